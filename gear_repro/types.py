"""Core records shared by every stage (DESIGN.md "Datasets"; GEAR §3 notation).

C = passages, T = triples (each tied to exactly one passage), q = question.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from numbers import Integral
from typing import Any, NamedTuple

Triple3 = tuple[str, str, str]  # a triple as (subject, predicate, object) strings (e.g. an LLM's proximal triple)


def check_k(k: Any, what: str = "k") -> int:
    """``k`` as a ranking depth: a whole number >= 1, else a ConfigError naming ``what`` (a slice by a negative or
    zero k would return all but the last passages, or nothing)."""
    from gear_repro.utils.errors import ConfigError

    if isinstance(k, bool) or not isinstance(k, Integral) or k < 1:
        raise ConfigError(f"{what} must be a whole number >= 1 (how many passages to return), got {k!r}")
    return int(k)


def triple_text(spo: Sequence[Any]) -> str:
    """Triple text for indexing, scoring, tripleLink and passageLink: "subject predicate object" (DESIGN.md)."""
    return " ".join(str(x) for x in spo)


@dataclass(frozen=True)
class Passage:
    """A passage c_i of the corpus C."""

    id: str
    title: str
    text: str

    @property
    def content(self) -> str:
        """Text indexed for retrieval: title and body (as HippoRAG/GEAR index passages)."""
        return f"{self.title}\n{self.text}" if self.title else self.text


@dataclass(frozen=True)
class Question:
    """A multi-hop question with its answers (answer + aliases) and gold passage ids."""

    id: str
    question: str
    answers: list[str]
    gold_ids: list[str]
    type: str = ""
    dataset: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Triple:
    """A triple t_j = (s_j, p_j, o_j) tied to one passage (GEAR §3)."""

    id: str
    subject: str
    predicate: str
    object: str
    passage_id: str

    @property
    def text(self) -> str:
        """Triple text for indexing and scoring: "subject predicate object" (DESIGN.md; :func:`triple_text`'s, here
        formatted directly: the exact scorer builds ~75 path texts a step from these)."""
        return f"{self.subject} {self.predicate} {self.object}"

    def as_tuple(self) -> tuple[str, str, str]:
        return (self.subject, self.predicate, self.object)


@dataclass
class Ranking:
    """A ranked list of item ids with their scores, best first."""

    ids: list[str] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if len(self.ids) != len(self.scores):
            raise ValueError(f"Ranking has {len(self.ids)} ids but {len(self.scores)} scores")

    def __len__(self) -> int:
        return len(self.ids)

    def top(self, k: int) -> Ranking:
        k = check_k(k)
        return Ranking(self.ids[:k], self.scores[:k])

    def to_dict(self) -> dict[str, list]:
        return {"ids": list(self.ids), "scores": [round(float(s), 6) for s in self.scores]}


class OwnMatrix(NamedTuple):
    """A matrix a retriever embeds beyond the passages (``capacity_collections``: GRIEVER's names and units), for the
    start-up capacity check (:mod:`gear_repro.pipeline.capacity`): its rows (counted on the raw strings: at least as
    many as the build embeds) and characters of text, whether the
    build reads it whole (``resident``; else it stays a memory map of its cache file of which only the rows a query
    reads are held), the bytes of Python objects the build keeps per row, and what else the build holds as a line
    of the estimate of its own (``also``: (what, bytes); HippoRAG's phrase graph). No rows: nothing embedded, only
    ``also`` held (HippoRAG 2's phrases without synonym edges)."""

    rows: int
    chars: int
    resident: bool
    record_bytes: int
    also: tuple[str, int] | None = None

    @property
    def embedded(self) -> bool:
        """Whether the build encodes this matrix at all (no rows: only ``also`` is held)."""
        return self.rows > 0
