"""What every retrieval method returns for one question (docs/ARCHITECTURE.md "Method")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from gear_repro.types import Question, Ranking


@dataclass
class MethodOutput:
    """Final ranking, per-round records (multi-step methods) and a JSON-serialisable trace."""

    ranking: Ranking
    rounds: list[dict[str, Any]] = field(default_factory=list)
    trace: dict[str, Any] = field(default_factory=dict)


class Method(Protocol):
    name: str
    k_dependent: bool

    def run(self, question: Question, k: int) -> MethodOutput: ...

    def describe(self) -> dict[str, Any]:
        """JSON-ready settings written to run.json (``method``)."""
        ...
