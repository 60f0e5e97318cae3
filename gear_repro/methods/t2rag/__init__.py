"""T²RAG (seed 002, rockcor/T2RAG): triplet decomposition, proposition retrieval, iterative resolution."""
