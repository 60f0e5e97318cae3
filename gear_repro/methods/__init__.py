"""The paper methods, one home each (docs/ARCHITECTURE.md): single-step retrieval with graph expansion and the
GEAR agent (``gear/``), HippoRAG (``hipporag/``), IRCoT and HippoRAG w/ IRCoT (``ircot.py``), GRIEVER
(``griever/``) and T²RAG (``t2rag/``). A method imports shared primitives (types, core, retrieval, llm, qa),
never the pipeline or another method's internals."""
