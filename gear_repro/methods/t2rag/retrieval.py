"""T²RAG's adaptive retrieval over the proposition index (seed 002, Alg. 2) and the code's extra question query
(TRAG.py:478-487)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gear_repro.types import Ranking

QUESTION_WORDS = ("what", "who", "where", "when", "why", "how", "which", "whose")  # TRAG.py:481, in its order
_QUESTION_WORDS = re.compile(rf"\b({'|'.join(QUESTION_WORDS)})\b", re.IGNORECASE)


@dataclass
class Retrieved:
    """Output of Alg. 2: propositions (text, best score, passages) and the unique passages, best first."""

    propositions: list[dict[str, Any]] = field(default_factory=list)
    passages: Ranking = field(default_factory=Ranking)


def adaptive_retrieve(retriever: Any, triple_passage: dict[str, str], triple_text: dict[str, str],
                      queries: Sequence[str], k: int, depth: int, positive_only: bool = False) -> Retrieved:
    """Alg. 2: pool the top-``depth`` propositions of every query, rank them by their best similarity, take
    them in that order until ``k`` unique passages are reached (checked before each proposition, line 11);
    ``positive_only`` skips a proposition whose best similarity is <= 0 (TRAG.py:532).

    Propositions are triple ids of the triple collection, so a text extracted from several passages brings
    each of its passages; the returned list names a text once (its best score, all its passages taken).
    """
    queries = [q for q in dict.fromkeys(queries) if q.strip()]
    if not queries or k < 1:
        return Retrieved()
    best: dict[str, float] = {}
    order: dict[str, int] = {}
    for rank in retriever.retrieve_many(queries, depth):
        for tid, score in zip(rank.ids, rank.scores, strict=True):
            order.setdefault(tid, len(order))
            best[tid] = max(best.get(tid, float("-inf")), float(score))
    passages: dict[str, float] = {}
    props: dict[str, dict[str, Any]] = {}
    for tid in sorted(best, key=lambda t: (-best[t], order[t])):
        if len(passages) >= k:
            break
        pid = triple_passage.get(tid)
        if pid is None or (positive_only and best[tid] <= 0):
            continue
        passages.setdefault(pid, best[tid])
        rec = props.setdefault(triple_text[tid], {"text": triple_text[tid], "score": round(best[tid], 6),
                                                  "passage_ids": []})
        if pid not in rec["passage_ids"]:
            rec["passage_ids"].append(pid)
    return Retrieved(list(props.values()), Ranking(list(passages), list(passages.values())))


def question_query(question: str, mode: str = "word") -> str:
    """The authors' extra query: the question without question words and '?'.

    ``substring`` follows TRAG.py:481-485: lower-cased, each question word removed as a substring in the
    code's order ("Who directed Showboat?" -> "directed sboat"), no space squeezing; ``word`` removes them on
    word boundaries, case kept."""
    if mode == "substring":
        for word in QUESTION_WORDS:
            question = question.lower().replace(word, "").strip()
        return question.replace("?", "").strip()
    return " ".join(_QUESTION_WORDS.sub(" ", question).replace("?", " ").split())
