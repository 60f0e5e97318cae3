"""What every retrieval method returns for one question (docs/ARCHITECTURE.md "Method")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from gear_repro.types import Question, Ranking


@dataclass(frozen=True)
class MethodAnswer:
    """A method's own answer (e.g. T²RAG's final answering step): the extracted answer and the raw reply.

    The runner scores it with the same EM/F1 as the QA reader's answers; a method that answers by itself
    is not re-answered by ``qa_reader``.
    """

    text: str
    raw: str


@dataclass
class SearchResult:
    """One search of a multi-step method's retriever (HippoRAG, IRCoT's base): a ranking and what produced it
    (JSON-serialisable trace)."""

    ranking: Ranking
    trace: dict[str, Any] = field(default_factory=dict)


@dataclass
class MethodOutput:
    """Final ranking, per-round records (multi-step methods), a JSON-serialisable trace and, for methods that
    answer by themselves, their answer."""

    ranking: Ranking
    rounds: list[dict[str, Any]] = field(default_factory=list)
    trace: dict[str, Any] = field(default_factory=dict)
    answer: MethodAnswer | None = None


class Method(Protocol):
    """A retrieval method. Optional attributes the runner reads: ``answers_questions`` (True: its outputs
    carry ``answer``, scored as EM/F1 without a QA reader) and ``max_rounds`` (length of per-round recall).

    With ``run.workers`` > 1 one method object runs several questions, one computing at a time, another's
    computation running while one waits on an LLM reply (:mod:`gear_repro.utils.concurrency`). So ``run`` keeps a
    question's state in locals, never on ``self`` (or on what the method shares) across an LLM call; memos of
    per-text values are fine. ``tests/test_concurrency.py`` checks every LLM method against ``run.workers=1``."""

    name: str
    k_dependent: bool

    def run(self, question: Question, k: int) -> MethodOutput: ...

    def describe(self) -> dict[str, Any]:
        """JSON-ready settings written to run.json (``method``)."""
        ...
