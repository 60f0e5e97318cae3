"""Deterministic question subsets for expensive rows.

``stratified``: questions are grouped by stratum (MuSiQue hop count "2hop"/"3hop"/"4hop" from the type
"3hop1"; the type itself elsewhere: comparison, bridge, ...), each stratum is ordered by a seeded hash of
the question id, and strata are interleaved round-robin (sorted stratum names, the order within a round).
The first ``size`` questions of that sequence form the subset, so

* the same ids are chosen for every method (rows pair up question by question),
* a larger size extends a smaller one (nested: cached LLM replies of the smaller subset are reused),
* strata are as balanced as their sizes allow (a small stratum is taken whole, then the others go on).

The subset is returned in the dataset's own question order.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from gear_repro.types import Question

_HOP = re.compile(r"^(\d+hop)")


def stratum(q: Question) -> str:
    """The stratum of a question: MuSiQue hop count ("3hop1" -> "3hop"), else its type ("" = untyped)."""
    m = _HOP.match(q.type or "")
    return m.group(1) if m else (q.type or "")


def _key(seed: int, qid: str) -> str:
    return hashlib.sha256(f"{seed}:{qid}".encode()).hexdigest()


def stratified_order(questions: Sequence[Question], seed: int = 0) -> list[Question]:
    """Every question once, in the round-robin order whose prefixes are the stratified subsets."""
    groups: dict[str, list[Question]] = {}
    for q in questions:
        groups.setdefault(stratum(q), []).append(q)
    queues = [sorted(groups[s], key=lambda q: _key(seed, q.id)) for s in sorted(groups)]
    out: list[Question] = []
    depth = 0
    while len(out) < len(questions):
        out.extend(queue[depth] for queue in queues if depth < len(queue))
        depth += 1
    return out


def stratified_subset(questions: Sequence[Question], size: int, seed: int = 0) -> list[Question]:
    """The first ``size`` questions of :func:`stratified_order`, in the dataset's order."""
    chosen = {q.id for q in stratified_order(questions, seed)[:size]}
    return [q for q in questions if q.id in chosen]
