"""GRIEVER (seed 001, Melo et al.): LLM-free graph retriever over passages, partial triples and same_as
aliases (§4, App. A), usable as ``retriever=griever`` wherever a base retriever is taken.

Its names are read from ``retriever.py`` on first use (the configs' ``_target_`` is this package's
``GrieverRetriever``): importing the package for its declaration (``spec.py``) loads no retriever code."""

from typing import Any

__all__ = ["GrieverRetriever", "GrieverRetrieverSettings", "GrieverSettings", "FinalRanking"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from gear_repro.methods.griever import retriever

        return getattr(retriever, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
