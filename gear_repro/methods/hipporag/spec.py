"""HippoRAG's declarations (gear_repro/registry.py): the single-step method (``agent=hipporag``) and the retriever
it searches (the ``hipporag`` group, built once per run), by path: reading them imports none of HippoRAG's code."""

from __future__ import annotations

from typing import Any

from gear_repro.utils.component import Component, Dependency, PlannedCall

_HERE = "gear_repro.methods.hipporag"


def phrase_encoder(setting: Any) -> Any:
    """``hipporag.encoder``: None (the run's embedder), a model name, or an embedder config node."""
    if setting is None:
        return None
    if isinstance(setting, str):
        from gear_repro.embedding.embedder import SentenceEmbedder

        return SentenceEmbedder(model=setting, show_progress=False)
    from hydra.utils import instantiate

    return instantiate(setting)


def hipporag_dependencies(node: Any, dep: Dependency) -> dict[str, Any]:
    """v1 reads the triples with the run's LLM (query NER); v2 searches the indexed passages and triples; the
    no-entity fallback ``retriever`` ranks with the run's passage retriever. The node went through
    HippoRAGSettings: every setting is present, with its default."""
    v2 = node.version == "v2"
    fallback = node.no_entity_fallback == "retriever"
    return {"passages": dep("passages"), "triples": dep("triples"), "embedder": dep("embedder"),
            "llm": None if v2 else dep("llm"), "fallback_retriever": dep("retriever") if fallback else None,
            "passage_collection": dep("passage_collection") if v2 else None,
            "triple_collection": dep("triple_collection") if v2 else None,
            "encoder": phrase_encoder(node.get("encoder"))}


def ner_plan(cfg: Any) -> list[PlannedCall]:
    """HippoRAG v1's query NER, one call a search (the single-step method searches once a question; HippoRAG w/
    IRCoT once a round, ``ircot_plan``); v2 calls no LLM (fact and passage linking by vectors alone)."""
    from omegaconf import OmegaConf

    if str(OmegaConf.select(cfg, "hipporag.version", default="v1")) == "v2":
        return []
    return [PlannedCall("hipporag_ner", 1, 0, lambda s: {"question": s.question})]


COMPONENTS = (
    Component("agent", "hipporag_schema", f"{_HERE}.method.HippoRAGMethodSettings", f"{_HERE}.method.HippoRAGMethod",
              report=f"{_HERE}.report:HOOKS", llm_plan=ner_plan),
    Component("hipporag", "hipporag_schema", f"{_HERE}.retriever.HippoRAGSettings", f"{_HERE}.retriever.HippoRAG",
              wiring=hipporag_dependencies, llm_plan=ner_plan),
)
