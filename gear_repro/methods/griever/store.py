"""The searches GRIEVER issues against its three indexes (§4.2, App. A.1, Alg. 1-2), and the in-process
(memory backend) implementation: bm25s scores + numpy vectors + dict inverted indexes for the keyword
filters. ``methods/griever/elasticsearch.py`` implements the same searches as Elasticsearch queries.

Filters (§4.2.2): after iteration 1 the passages must contain one of the joinable entities among their
``subjects``/``objects`` and must not have been retrieved before (the ``passage_id`` inverse filter).
Shortlisting (Alg. 2) searches the units (partial triples) whose ``passage_ids`` meet the retrieved
passages and whose anchor (``subject`` field) is one of their entities or aliases.
Ties break by index position (the corpus / unit order), as the base backends do.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, overload

import numpy as np

from gear_repro.backends.base import IndexDoc
from gear_repro.backends.memory import MemoryBackend, MemoryCollection
from gear_repro.methods.griever.index import GrieverData, Unit
from gear_repro.types import Ranking
from gear_repro.utils.arrays import top_k_row
from gear_repro.utils.errors import ConfigError


@dataclass(frozen=True)
class PassageFilter:
    """``entities``: a passage must hold one of them as subject or object (None = no entity filter);
    ``exclude``: passage ids never returned (novelty)."""

    entities: frozenset[str] | None = None
    exclude: frozenset[str] = frozenset()


class GrieverStore(Protocol):
    data: GrieverData

    def passage_bm25(self, queries: Sequence[str], k: int, filt: PassageFilter | None = None) -> list[Ranking]: ...

    def passage_knn(self, vector: np.ndarray, k: int, filt: PassageFilter | None = None) -> Ranking: ...

    def passage_rescore(self, vector: np.ndarray, ids: Sequence[str]) -> Ranking:
        """Dense cosine of ``vector`` with the given passages, best first (the composed retriever's step 2)."""
        ...

    def passage_triples(self, ids: Sequence[str]) -> dict[str, list[str]]:
        """The ``triples`` field of the given passages (triple ids)."""
        ...

    def unit_bm25(self, query: str, k: int, passage_ids: Sequence[str], anchors: Sequence[str]) -> Ranking: ...

    def unit_knn(self, vector: np.ndarray, k: int, passage_ids: Sequence[str], anchors: Sequence[str]) -> Ranking: ...

    def same_as(self, entities: Sequence[str], passage_ids: Sequence[str]) -> dict[str, list[str]]:
        """Aliases of each entity whose same_as document meets ``passage_ids`` (§4.2.3)."""
        ...


class UnitDocs(Sequence[IndexDoc]):
    """The units as the documents of their BM25 index, each made when read: 7.5M ``IndexDoc`` held beside the
    units would be ~1 GiB at 2Wiki's size (docs/scale.md)."""

    def __init__(self, units: Sequence[Unit]):
        self.units = units

    def __len__(self) -> int:
        return len(self.units)

    @overload
    def __getitem__(self, i: int) -> IndexDoc: ...

    @overload
    def __getitem__(self, i: slice) -> list[IndexDoc]: ...

    def __getitem__(self, i: int | slice) -> IndexDoc | list[IndexDoc]:
        if isinstance(i, slice):
            return [IndexDoc(u.id, u.text) for u in self.units[i]]
        u = self.units[i]
        return IndexDoc(u.id, u.text)


def passage_unit_rows(units: Sequence[Unit]) -> dict[str, np.ndarray]:
    """Passage id -> the rows of the units taken from it, ascending: views of one int32 array (a list of Python
    ints per passage is ~36 B a row, ~0.3 GiB at 2Wiki's size)."""
    counts = np.fromiter((len(u.passage_ids) for u in units), np.int64, len(units))
    code: dict[str, int] = {}
    pcode = np.fromiter((code.setdefault(p, len(code)) for u in units for p in u.passage_ids), np.int64,
                        int(counts.sum()))
    order = np.argsort(pcode, kind="stable")  # stable: each passage's rows stay ascending
    rows = np.repeat(np.arange(len(units), dtype=np.int32), counts)[order]
    bounds = np.searchsorted(pcode[order], np.arange(len(code) + 1))
    return {p: rows[bounds[c]:bounds[c + 1]] for p, c in code.items()}


def _ranking(ids: Sequence[str], rows: np.ndarray, scores: np.ndarray) -> Ranking:
    return Ranking([ids[int(r)] for r in rows], [float(s) for s in scores])


def _top(scores: np.ndarray, rows: np.ndarray, k: int, positive: bool) -> tuple[np.ndarray, np.ndarray]:
    """Best k of ``scores`` (aligned with ``rows``, ascending row order) with ties by row."""
    if rows.size == 0 or k <= 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    order = top_k_row(scores, k)
    if positive:
        order = order[scores[order] > 0]
    return rows[order], scores[order]


class MemoryGrieverStore:
    """GRIEVER's indexes in process memory, on the run's memory-backend passage collection.

    Args:
        data: the offline content (:class:`GrieverData`, with its vectors).
        passages: the run's passage collection (``MemoryCollection``: ``bm25_scores`` and ``vectors``).
        backend: the memory backend, to open the BM25 index of the shortlisting units.
    """

    def __init__(self, data: GrieverData, passages: MemoryCollection, backend: MemoryBackend):
        if not isinstance(passages, MemoryCollection):
            raise ConfigError("MemoryGrieverStore needs the memory backend's passage collection")
        self.data = data
        self.passages = passages
        self.ids = list(passages.ids)
        self.row = {pid: i for i, pid in enumerate(self.ids)}
        self.vectors = passages.vectors()
        ent_rows: dict[str, list[int]] = defaultdict(list)
        for e, pids in data.entity_passages.items():
            ent_rows[e] = sorted(self.row[p] for p in pids if p in self.row)
        self.entity_rows = dict(ent_rows)
        self.units = backend.open_collection(f"griever-{data.unit_kind.value}-units", UnitDocs(data.units), None)
        self.unit_ids = self.units.ids
        self.unit_vectors = data.unit_vectors()
        self.unit_anchor = [u.anchor for u in data.units]
        self.passage_units = passage_unit_rows(data.units)

    # -- passages -----------------------------------------------------------------------------
    def _allowed(self, filt: PassageFilter | None) -> np.ndarray | None:
        """Allowed passage rows (ascending) or None for all."""
        if filt is None or (filt.entities is None and not filt.exclude):
            return None
        if filt.entities is None:
            rows = np.arange(len(self.ids))
        else:
            rows = np.asarray(sorted({r for e in filt.entities for r in self.entity_rows.get(e, ())}), np.int64)
        if filt.exclude:
            ex = np.asarray(sorted(self.row[p] for p in filt.exclude if p in self.row), np.int64)
            rows = np.setdiff1d(rows, ex, assume_unique=True)
        return rows

    def passage_bm25(self, queries: Sequence[str], k: int, filt: PassageFilter | None = None) -> list[Ranking]:
        allowed = self._allowed(filt)
        out = []
        for scores in self.passages.bm25_scores(list(queries)):
            if scores is None:
                out.append(Ranking())
                continue
            rows = np.arange(len(self.ids)) if allowed is None else allowed
            out.append(_ranking(self.ids, *_top(scores[rows], rows, k, positive=True)))
        return out

    def passage_knn(self, vector: np.ndarray, k: int, filt: PassageFilter | None = None) -> Ranking:
        allowed = self._allowed(filt)
        rows = np.arange(len(self.ids)) if allowed is None else allowed
        sims = (self.vectors[rows] @ vector).astype(np.float32)
        return _ranking(self.ids, *_top(sims, rows, k, positive=False))

    def passage_rescore(self, vector: np.ndarray, ids: Sequence[str]) -> Ranking:
        rows = np.asarray(sorted({self.row[i] for i in ids}), np.int64)
        sims = (self.vectors[rows] @ vector).astype(np.float32) if rows.size else np.zeros(0, np.float32)
        return _ranking(self.ids, *_top(sims, rows, rows.size, positive=False))

    def passage_triples(self, ids: Sequence[str]) -> dict[str, list[str]]:
        return {pid: self.data.passage_triples.get(pid, []) for pid in ids}

    # -- shortlisting units (Alg. 2) -----------------------------------------------------------
    def _unit_rows(self, passage_ids: Sequence[str], anchors: Sequence[str]) -> np.ndarray:
        anchor_set = set(anchors)
        none = np.zeros(0, np.int32)
        rows = {r for p in passage_ids for r in self.passage_units.get(p, none).tolist()
                if self.unit_anchor[r] in anchor_set}
        return np.asarray(sorted(rows), np.int64)

    def unit_bm25(self, query: str, k: int, passage_ids: Sequence[str], anchors: Sequence[str]) -> Ranking:
        rows = self._unit_rows(passage_ids, anchors)
        scores = self.units.bm25_scores([query])[0]
        if scores is None or rows.size == 0:
            return Ranking()
        return _ranking(self.unit_ids, *_top(scores[rows], rows, k, positive=True))

    def unit_knn(self, vector: np.ndarray, k: int, passage_ids: Sequence[str], anchors: Sequence[str]) -> Ranking:
        rows = self._unit_rows(passage_ids, anchors)
        if rows.size == 0:
            return Ranking()
        sims = (self.unit_vectors[rows] @ vector).astype(np.float32)
        return _ranking(self.unit_ids, *_top(sims, rows, k, positive=False))

    # -- same_as (§4.2.3) ------------------------------------------------------------------------
    def same_as(self, entities: Sequence[str], passage_ids: Sequence[str]) -> dict[str, list[str]]:
        pset = set(passage_ids)
        out = {}
        for e in dict.fromkeys(entities):
            aliases = self.data.same_as_entity.get(e)
            if aliases and pset.intersection(self.data.entity_passages.get(e, ())):
                out[e] = list(aliases)
        return out
