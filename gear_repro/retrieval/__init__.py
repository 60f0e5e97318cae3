"""Base retrievers h_base^k(q, R) (GEAR §3): BM25, SBERT, and their RRF hybrid."""

from gear_repro.retrieval.base import BM25Retriever, DenseRetriever, HybridRetriever, Retriever
from gear_repro.retrieval.fusion import rrf

__all__ = ["Retriever", "BM25Retriever", "DenseRetriever", "HybridRetriever", "rrf"]
