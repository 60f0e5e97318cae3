"""The roles of the methods layer (docs/ARCHITECTURE.md "Contracts"): what a method returns for one question and
the protocols the pipeline wires against (:class:`Method`, :class:`Expansion`, :class:`Searcher`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
class ExpansionOutput:
    """A graph expansion's fused ranking C_q and a JSON-serialisable trace of how it came about."""

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
    """A retrieval method: everything the runner reads of it.

    ``k_dependent``: the ranking depends on the evaluated k (single-step runs are then called once per k);
    ``needs_llm``: a question calls the LLM (start-up checks its credentials); ``answers_questions``: its outputs
    carry ``answer``, scored as EM/F1 without a QA reader; ``max_rounds``: length of the per-round recall
    (None = ``dataset.max_rounds``); ``needs_vectors`` (a class attribute): the run's collections must hold
    embeddings for it (``pipeline/resources.needs_vectors``).

    With ``run.workers`` > 1 one method object runs several questions, one computing at a time, another's
    computation running while one waits on an LLM reply (:mod:`gear_repro.utils.concurrency`). So ``run`` keeps a
    question's state in locals, never on ``self`` (or on what the method shares) across an LLM call; memos of
    per-text values are fine. ``tests/test_concurrency.py`` checks every LLM method against ``run.workers=1``."""

    name: str
    k_dependent: bool
    needs_llm: bool
    needs_vectors: bool
    answers_questions: bool
    max_rounds: int | None

    def run(self, question: Question, k: int) -> MethodOutput: ...

    def check_prompts(self, questions: Sequence[Question]) -> None:
        """Start-up: raise ConfigError when a prompt without passages does not fit ``llm.context_window``."""
        ...

    def describe(self) -> dict[str, Any]:
        """JSON-ready settings written to run.json (``method``)."""
        ...

    def summarize(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """JSON-ready statistics of the run from its finished records (predictions.jsonl: every question, also
        those an earlier process of a resumed run finished), added to run.json ``method`` after the questions;
        {} for a method without any."""
        ...


class Expansion(Protocol):
    """Graph expansion of a base list (GEAR's NoExpansion / NaiveGE / SyncGE, ``methods/gear/expansion.py``).

    ``expand(query, base, *, read_query=None, memory=())``: beams scored against ``query``, a reader
    sees ``read_query`` (None = query) and, when non-empty, the gist memory."""

    name: str
    k_dependent: bool
    needs_llm: bool
    needs_vectors: bool

    def expand(self, query: str, base: Ranking, *, read_query: str | None = None,
               memory: Sequence[Sequence[str]] = ()) -> ExpansionOutput: ...

    def check_prompts(self, questions: Sequence[Question]) -> None: ...

    def describe(self) -> dict[str, Any]: ...


class Searcher(Protocol):
    """A retriever that also reports how it found its list (HippoRAG): what IRCoT and HippoRAG's method call."""

    def search(self, query: str, k: int) -> SearchResult: ...

    def describe(self) -> dict[str, Any]: ...
