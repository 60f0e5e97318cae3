"""gear_repro: a reproduction harness for GEAR (Shen et al., 2025) and triple-graph retrievers.

The public names (typed: ``py.typed``) are those of ``__all__``; everything else is private. README.md "From
Python" shows them in use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["BaseExpansion", "BaseMethod", "BaseRetriever", "Evaluation", "Passage", "Pipeline", "Question",
           "Ranking", "Result", "Triple", "compare", "compose", "load_runs"]

if TYPE_CHECKING:
    from gear_repro.api import (
        BaseExpansion,
        BaseMethod,
        BaseRetriever,
        Evaluation,
        Pipeline,
        Result,
        compare,
        compose,
        load_runs,
    )
    from gear_repro.types import Passage, Question, Ranking, Triple


def __getattr__(name: str) -> Any:
    """The public names, imported on first use: ``import gear_repro`` stays light for the CLI's start-up."""
    if name in ("Passage", "Question", "Ranking", "Triple"):
        from gear_repro import types

        return getattr(types, name)
    if name in __all__:
        from gear_repro import api

        return getattr(api, name)
    raise AttributeError(f"module 'gear_repro' has no attribute {name!r}")
