"""Sentence embeddings (SBERT) with offline model resolution and a content-hashed disk cache."""

from gear_repro.embedding.embedder import Embedder, SentenceEmbedder
from gear_repro.embedding.sbert_weights import resolve_model

__all__ = ["Embedder", "SentenceEmbedder", "resolve_model"]
