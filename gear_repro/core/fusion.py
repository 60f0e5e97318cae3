"""Reciprocal Rank Fusion (Cormack et al., 2009) as fixed in DESIGN.md.

score(d) = sum over lists of 1 / (k_rrf + rank(d)), rank from 1, k_rrf = 60.
Ties keep first-seen order (lists visited in the given order, each top to bottom).
"""

from __future__ import annotations

from collections.abc import Sequence

from gear_repro.types import Ranking

RRF_K = 60


def rrf(lists: Sequence[Sequence[str] | Ranking], k_rrf: int = RRF_K, limit: int | None = None) -> Ranking:
    """Fuse ranked id lists; returns ids by descending fused score."""
    scores: dict[str, float] = {}
    first_seen: dict[str, int] = {}
    for lst in lists:
        ids = lst.ids if isinstance(lst, Ranking) else lst
        for rank, doc in enumerate(ids, start=1):
            if doc not in first_seen:
                first_seen[doc] = len(first_seen)
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k_rrf + rank)
    order = sorted(scores, key=lambda d: (-scores[d], first_seen[d]))
    if limit is not None:
        order = order[:limit]
    return Ranking(order, [scores[d] for d in order])
