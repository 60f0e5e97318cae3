"""Base retrievers h_base^k(q, R) (GEAR §3): BM25, SBERT, their RRF hybrid, and composed (BM25 re-scored densely)."""

from gear_repro.retrieval.base import (
    BM25Retriever,
    ComposedRetriever,
    DenseRetriever,
    HybridRetriever,
    Retriever,
)

__all__ = ["Retriever", "BM25Retriever", "ComposedRetriever", "DenseRetriever", "HybridRetriever"]
