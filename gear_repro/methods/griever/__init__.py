"""GRIEVER (seed 001, Melo et al.): LLM-free graph retriever over passages, partial triples and same_as
aliases (§4, App. A), usable as ``retriever=griever`` wherever a base retriever is taken."""

from gear_repro.methods.griever.retriever import (
    FinalRanking,
    GrieverRetriever,
    GrieverRetrieverSettings,
    GrieverSettings,
)

__all__ = ["GrieverRetriever", "GrieverRetrieverSettings", "GrieverSettings", "FinalRanking"]
