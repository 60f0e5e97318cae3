"""Triple index T: triple<->passage alignment, entity adjacency and tripleLink (GEAR §3, §4.1, §4.2).

* §3: every triple t_j is tied to exactly one passage c_i; a passage may hold many triples.
* §4.2 ``get_neighbours``: the neighbourhood of a triple is the set of triples sharing its head or tail
  entity. Entities are compared after :func:`normalize_entity` (casefold, trim, squeeze spaces; DESIGN.md).
  The adjacency maps a normalised entity to the triples in which it is subject or object, so
  ``neighbours(t)`` costs O(deg(s_t) + deg(o_t)).
* §4.1 Eq. 2: ``tripleLink(t') = h^1_base(t', T)``, the top-1 triple of the base retriever over T.

By default no entity is capped: §4.2 takes all triples sharing the entity and the beam search narrows a
hub's neighbours by relevance to q (``beam.neighbours``; docs/graph_expansion.md "Entity hubs"). An
optional cap ``max_degree`` (``hub_policy='truncate'`` keeps the first ``max_degree`` in corpus order,
``'drop'`` ignores the entity for adjacency) is counted in :attr:`TripleIndex.stats` and per call in the
counters passed to ``neighbours``.

:meth:`TripleIndex.select_neighbours` is the beam search's gather step (Alg. 1 lines 11-12): a beam's neighbours
minus the excluded triples, narrowed to ``beam.neighbours`` by relevance. It ranks at most ``cap + |exclude|`` rows
per entity (:class:`NeighbourRelevance`, once per query) and never builds a hub's whole neighbourhood; entities
with at least ``hub_slices_min_degree`` triples are scanned as one contiguous float16 slice each (faiss,
:mod:`gear_repro.core.hub_slices`) and only the rows that can reach the top are scored exactly, so the choice is the
same as scoring every row.
"""

from __future__ import annotations

import logging
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from itertools import compress
from typing import Any, ClassVar

import numpy as np

from gear_repro.backends.base import Collection, IndexDoc
from gear_repro.core.hub_slices import HubSlices, faiss_available
from gear_repro.types import Triple, triple_text
from gear_repro.utils.arrays import row_dots
from gear_repro.utils.errors import ConfigError, DataError
from gear_repro.utils.settings import Choice, Settings, num

log = logging.getLogger(__name__)

_SPACES = re.compile(r"\s+")

SUBJECT_KEY = "subject_key"
OBJECT_KEY = "object_key"
PASSAGE_ID = "passage_id"


class HubPolicy(Choice):
    """What a capped entity (graph.max_degree) links (graph.hub_policy)."""

    truncate = "truncate"  # its first max_degree triples
    drop = "drop"  # nothing


class Adjacency(Choice):
    """Where the entity map comes from (graph.adjacency)."""

    records = "records"  # built from the triple records in memory
    lookup = "lookup"  # keyword lookups on the backend, memoised


def normalize_entity(s: str) -> str:
    """Entity key for adjacency (DESIGN.md): casefold, trim, squeeze runs of whitespace to one space."""
    return _SPACES.sub(" ", str(s).casefold()).strip()


def triple_docs(triples: Iterable[Triple]) -> list[IndexDoc]:
    """Index documents for T (docs/ARCHITECTURE.md): text "subject predicate object" (DESIGN.md) and the
    keyword fields ``subject_key``/``object_key`` (normalised entities) and ``passage_id``."""
    return [
        IndexDoc(
            id=t.id,
            text=t.text,
            fields={SUBJECT_KEY: normalize_entity(t.subject), OBJECT_KEY: normalize_entity(t.object),
                    PASSAGE_ID: t.passage_id},
        )
        for t in triples
    ]


class EntityRows(Mapping[str, np.ndarray]):
    """Entity -> its triple rows (ascending) as views of one array (compressed rows): an int per entity instead of
    an array object per entity, ~0.4 GiB less at 2Wiki size with the real ~0.94 entities per triple
    (docs/scale.md)."""

    def __init__(self, ids: dict[str, int], offsets: np.ndarray, rows: np.ndarray):
        self._ids, self._offsets, self._rows = ids, offsets, rows

    def __getitem__(self, entity: str) -> np.ndarray:
        i = self._ids[entity]
        return self._rows[self._offsets[i]:self._offsets[i + 1]]

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def degrees(self) -> np.ndarray:
        """Every entity's number of rows, in the map's order (from the offsets: no view made)."""
        return np.diff(self._offsets)

    def at_least(self, degree: int) -> dict[str, np.ndarray]:
        """The entities with at least ``degree`` rows and their rows, in the map's order, found from the offsets
        (no view made for the others: 4.6M entities at 2Wiki size)."""
        keep = self.degrees() >= degree
        return {e: self[e] for e in compress(self._ids, keep.tolist())}


@dataclass
class GraphSettings(Settings):
    """``graph:`` the triple graph T (each field's default and meaning declared here; docs/graph_expansion.md): the
    node's schema and
    :class:`TripleIndex`'s settings (GEAR §4.2 entity adjacency)."""

    config_key: ClassVar[str] = "graph"

    # cap on the triples kept per entity, applied in corpus order (null = no cap: §4.2 takes every triple sharing the
    # entity; the beam then picks beam.neighbours of them by relevance to q)
    max_degree: int | None = num(None, ge=1)
    hub_policy: HubPolicy = HubPolicy.truncate  # with max_degree: keep the first max_degree triples | drop the hub
    # records (the entity map built from triples.jsonl in memory, eager) | lookup (keyword lookups on the backend
    # per entity, memoised; for backends holding T remotely)
    adjacency: Adjacency = Adjacency.records
    link_empty_entities: bool = False  # whether an entity that normalises to "" links triples
    # entities with at least this many triples are scanned as contiguous float16 slices when the beam search picks
    # neighbours by relevance (same choice, faster; needs faiss and adjacency=records); null = every row exactly
    hub_slices_min_degree: int | None = num(256, ge=1)


class TripleIndex:
    """Triples T over a backend collection, with the passage alignment and the entity graph.

    Args:
        collection: the backend collection built from :func:`triple_docs` (BM25/kNN over triple texts,
            ``vectors()`` for beam-search scoring). ``None`` is allowed for pure graph use (tests).
        triples: the Triple records (e.g. ``dataset.triples``); ids must be unique.
        settings, **given: :class:`GraphSettings` (an instance, or its fields as keywords).
    """

    def __init__(self, collection: Collection | None, triples: Sequence[Triple] | None,
                 settings: GraphSettings | None = None, **given: Any):
        s = self.settings = GraphSettings.of(settings, "TripleIndex", **given)
        max_degree, hub_policy, adjacency = s.max_degree, s.hub_policy, s.adjacency
        link_empty_entities, hub_slices_min_degree = s.link_empty_entities, s.hub_slices_min_degree
        if adjacency == "lookup" and collection is None:
            raise ConfigError("graph.adjacency=lookup needs a triple collection")
        if not triples:
            raise DataError("the triple index needs triples (dataset has no triples.jsonl; run extraction first)")
        self.collection = collection
        self.max_degree = int(max_degree) if max_degree else None
        self.hub_policy = hub_policy
        self.adjacency = adjacency
        self.link_empty_entities = link_empty_entities
        self.hub_slices_min_degree = hub_slices_min_degree
        self._hub_slices: HubSlices | None = None
        self._hub_slices_checked = False

        self.triples: dict[str, Triple] = {}
        for t in triples:
            if t.id in self.triples:
                raise DataError(f"duplicate triple id '{t.id}'")
            self.triples[t.id] = t
        # rows follow the collection (its vectors() are aligned with its ids), else record order
        if collection is not None:
            self.ids: list[str] = list(collection.ids)
            missing = [i for i in self.ids if i not in self.triples]
            if missing:
                raise DataError(f"triple collection '{collection.name}' holds {len(missing)} ids without a "
                                f"Triple record (first: '{missing[0]}')")
        else:
            self.ids = list(self.triples)
        self.row: dict[str, int] = {tid: i for i, tid in enumerate(self.ids)}
        self.stats: Counter[str] = Counter(triples=len(self.ids),
                                           records_not_indexed=len(self.triples) - len(self.ids))

        # passage <-> triple alignment (§3)
        self.passage_of: dict[str, str] = {tid: self.triples[tid].passage_id for tid in self.ids}
        by_passage: dict[str, list[str]] = defaultdict(list)
        for tid in self.ids:
            by_passage[self.passage_of[tid]].append(tid)
        self._by_passage = dict(by_passage)

        # entity keys per row
        self._keys: list[tuple[str, str]] = [
            (normalize_entity(self.triples[tid].subject), normalize_entity(self.triples[tid].object))
            for tid in self.ids
        ]
        self._entity_rows: dict[str, np.ndarray] | EntityRows = {}  # records: EntityRows; lookup: memo
        self._capped: set[str] = set()
        self._neigh_cache: dict[int, np.ndarray] = {}
        self._vectors: np.ndarray | None = None
        if adjacency == "records":
            self._build_from_records()

    # -- adjacency -----------------------------------------------------------------------------
    def _cap(self, entity: str, rows: Sequence[int] | np.ndarray) -> np.ndarray:
        """An entity's rows under the hub cap (``max_degree``, ``hub_policy``): a prefix of them, counted."""
        if self.max_degree and len(rows) > self.max_degree:
            self._capped.add(entity)
            self.stats["hub_entities"] += 1
            self.stats["hub_links_removed"] += len(rows) - (self.max_degree if self.hub_policy == "truncate" else 0)
            rows = rows[: self.max_degree] if self.hub_policy == "truncate" else []
        return np.asarray(rows, dtype=np.int64)

    def _build_from_records(self) -> None:
        """The entity map from the records (``adjacency=records``): every row's subject and object (once when they
        are equal; the empty entity only with ``link_empty_entities``), grouped by entity with numpy, rows
        ascending, then the hub cap (:meth:`_cap`'s rule)."""
        ids: dict[str, int] = {}
        n = len(self._keys)
        ends = np.full(2 * n, -1, dtype=np.int64)  # entity id of row r's subject at 2r, object at 2r + 1; -1 none
        for r, (s, o) in enumerate(self._keys):
            for j, e in ((0, s), (1, o)) if s != o else ((0, s),):
                if e or self.link_empty_entities:
                    ends[2 * r + j] = ids.setdefault(e, len(ids))
                else:
                    self.stats["empty_entity_slots"] += 1
        linked = ends >= 0
        owner = ends[linked]
        order = np.argsort(owner, kind="stable")  # stable: each entity's rows stay ascending
        rows = (np.flatnonzero(linked) // 2)[order]
        counts = np.bincount(owner, minlength=len(ids))
        if self.max_degree and counts.max(initial=0) > self.max_degree:
            # the hubs through _cap (its rule and counters; it keeps a prefix of the rows), then one mask
            names, start = list(ids), np.concatenate(([0], np.cumsum(counts)[:-1]))
            limit = counts.copy()
            for i in np.flatnonzero(counts > self.max_degree):
                limit[i] = self._cap(names[i], rows[start[i]:start[i] + counts[i]]).size
            group = owner[order]
            keep = np.arange(rows.size) - start[group] < limit[group]
            rows, counts = rows[keep], limit
        self._entity_rows = EntityRows(ids, np.concatenate(([0], np.cumsum(counts))), rows)
        self.stats["entities"] = len(ids)
        if self._capped:
            log.info("triple index: %d hub entities capped at %d triples (%s)", len(self._capped),
                     self.max_degree, self.hub_policy)

    def _rows_of_entity(self, entity: str) -> np.ndarray:
        rows = self._entity_rows.get(entity)
        if rows is not None:
            return rows
        if self.adjacency == "records" or (not entity and not self.link_empty_entities):
            return np.zeros(0, dtype=np.int64)
        assert self.collection is not None
        hits = self.collection.lookup(SUBJECT_KEY, [entity])[entity] + self.collection.lookup(OBJECT_KEY, [entity])[entity]
        rows_l = sorted({self.row[h] for h in hits if h in self.row})
        rows = self._cap(entity, rows_l)
        self._entity_rows[entity] = rows
        return rows

    def entity_degree(self, entity: str) -> int:
        """Number of triples linked through ``entity`` (after normalisation and the hub cap)."""
        return int(self._rows_of_entity(normalize_entity(entity)).size)

    def neighbour_rows(self, row: int, counters: MutableMapping[str, int] | None = None) -> np.ndarray:
        """Rows of the triples sharing the subject or object entity of triple ``row`` (itself excluded),
        ascending. O(degree); memoised per row. Hub entities touched are added to
        ``counters['hub_entities_capped']``."""
        s, o = self._keys[row]
        rows = self._neigh_cache.get(row)
        if rows is None:
            parts = [self._rows_of_entity(s)]
            if o != s:
                parts.append(self._rows_of_entity(o))
            rows = np.unique(np.concatenate(parts)) if len(parts) > 1 else parts[0]
            rows = rows[rows != row]
            self._neigh_cache[row] = rows
        self._count_capped(s, o, counters)
        return rows

    def _count_capped(self, s: str, o: str, counters: MutableMapping[str, int] | None) -> None:
        if counters is not None and self._capped:
            n_cap = int(s in self._capped) + int(o != s and o in self._capped)
            if n_cap:
                counters["hub_entities_capped"] = counters.get("hub_entities_capped", 0) + n_cap

    def select_neighbours(self, row: int, exclude: Sequence[int] | np.ndarray, cap: int | None,
                          relevance: NeighbourRelevance | None = None,
                          counters: MutableMapping[str, int] | None = None) -> tuple[np.ndarray, int, bool]:
        """Alg. 1 lines 11-12 for a beam ending in triple ``row``: its neighbours (:meth:`neighbour_rows`) not in
        ``exclude``, ascending; when more than ``cap`` (> 0) remain, ``cap`` of them: the most relevant to q by
        ``relevance`` (ties by row), without it the first ``cap`` in row order. Returns (rows, how many neighbours
        ``exclude`` removed, whether the cap applied). An entity with more than ``cap + |exclude|`` triples
        decides the cap by itself, and then only its top ``cap + |exclude|`` rows are ranked (no union is built)."""
        s, o = self._keys[row]
        lists = [self._rows_of_entity(s)] + ([self._rows_of_entity(o)] if o != s else [])
        ex = np.unique(np.append(np.asarray(exclude, dtype=np.int64), row))
        m = (cap or 0) + ex.size
        if not cap or all(rows.size <= m for rows in lists):
            nb = self.neighbour_rows(row, counters)
            kept = nb[~np.isin(nb, ex)]
            if cap and kept.size > cap:
                if relevance is None:
                    return kept[:cap], nb.size - kept.size, True
                rel = relevance.scores(kept)
                return kept[np.sort(np.lexsort((kept, -rel))[:cap])], nb.size - kept.size, True
            return kept, nb.size - kept.size, False
        self._count_capped(s, o, counters)
        others = ex[ex != row]
        n_excluded = int(np.logical_or.reduce([_contains(rows, others) for rows in lists]).sum())
        if relevance is None:
            first = np.unique(np.concatenate([rows[:m] for rows in lists]))
            return first[~np.isin(first, ex)][:cap], n_excluded, True
        tops = [relevance.top(e, m) for e in ([s] if o == s else [s, o])]
        cand = np.concatenate([t[0] for t in tops])
        rel = np.concatenate([t[1] for t in tops])
        cand, first = np.unique(cand, return_index=True)  # a row in both lists keeps its first score
        rel = rel[first]
        keep = ~np.isin(cand, ex)
        cand, rel = cand[keep], rel[keep]
        return np.sort(cand[np.lexsort((cand, -rel))[:cap]]), n_excluded, True

    def hub_slices(self) -> HubSlices | None:
        """The entity-ordered float16 copies of the hubs (built on first use), or None: no entity has ``hub_slices_min_degree``
        triples, lookup adjacency, or faiss is missing (then every row is scored exactly: the same choice, slower)."""
        if not self._hub_slices_checked:
            self._hub_slices_checked = True
            least = self.hub_slices_min_degree
            hubs = self._entity_rows.at_least(least) if least and isinstance(self._entity_rows, EntityRows) else {}
            if hubs:
                if faiss_available():
                    self._hub_slices = HubSlices(self.vectors(), hubs, least)
                else:
                    log.info("faiss is not installed: neighbour selection scores every hub row exactly")
        return self._hub_slices

    def neighbours(self, triple_id: str) -> list[str]:
        """get_neighbours of Alg. 1: ids of triples sharing a (normalised) head or tail entity."""
        return [self.ids[r] for r in self.neighbour_rows(self.row[triple_id])]

    # -- alignment ------------------------------------------------------------------------------
    def triples_of_passage(self, passage_id: str) -> list[str]:
        """Triple ids extracted from passage ``passage_id`` (record order); [] when it has none."""
        return self._by_passage.get(passage_id, [])

    def text(self, triple_id: str) -> str:
        return self.triples[triple_id].text

    def vectors(self) -> np.ndarray:
        """Embedding matrix of the triple texts, rows aligned with :attr:`ids` (from the collection)."""
        if self._vectors is None:
            if self.collection is None:
                raise ConfigError("this TripleIndex has no collection: no triple vectors")
            self._vectors = self.collection.vectors()
        return self._vectors

    def set_vectors(self, vectors: np.ndarray) -> None:
        """Use a given matrix (rows aligned with :attr:`ids`), e.g. in tests without a collection. float32 and
        float16 matrices (also memory-mapped ones) are used as they are, without a copy; others become float32."""
        if vectors.shape[0] != len(self.ids):
            raise ValueError(f"{vectors.shape[0]} vectors for {len(self.ids)} triples")
        keep = vectors.dtype in (np.float32, np.float16) and vectors.flags.c_contiguous
        self._vectors = vectors if keep else np.ascontiguousarray(vectors, dtype=np.float32)

    # -- tripleLink (§4.1, Eq. 2) ----------------------------------------------------------------
    def triple_link(self, proximal: str | tuple[str, str, str], retriever) -> str | None:
        """tripleLink(t') = top-1 of h_base(t', T); ``None`` when the retriever finds nothing."""
        return self.link_many([proximal], retriever)[0]

    def link_many(self, proximal: Sequence[str | tuple[str, str, str]], retriever) -> list[str | None]:
        """Batched tripleLink. A proximal triple is given as its text or as (s, p, o)."""
        texts = [p if isinstance(p, str) else triple_text(p) for p in proximal]
        if not texts:
            return []
        out: list[str | None] = []
        for r in retriever.retrieve_many(texts, 1):
            out.append(r.ids[0] if len(r) and r.ids[0] in self.row else None)
        return out

    def describe(self) -> dict:
        """Configuration and size counters (for the run record)."""
        return {"max_degree": self.max_degree, "hub_policy": self.hub_policy, "adjacency": self.adjacency,
                **{k: int(v) for k, v in self.stats.items()}, "passages_with_triples": len(self._by_passage)}


def _contains(sorted_rows: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """Whether each of ``xs`` is in ``sorted_rows`` (ascending): binary search, no sort of the (hub-sized) rows."""
    if sorted_rows.size == 0:
        return np.zeros(len(xs), dtype=bool)
    i = np.minimum(np.searchsorted(sorted_rows, xs), sorted_rows.size - 1)
    return sorted_rows[i] == xs


class NeighbourRelevance:
    """q·x of one query's candidate neighbours (Alg. 1 neighbour selection, ``beam.neighbour_selection=relevance``):
    the triple vectors' products with the query vector (cos(q, t) of unit vectors; float64 sums of exact products,
    one row at a time); an entity's ranking is computed once per query and reused by every beam and step."""

    def __init__(self, index: TripleIndex, qv: np.ndarray):
        self.index = index
        self.qv = np.asarray(qv, dtype=np.float32)
        self._top: dict[str, tuple[int, np.ndarray, np.ndarray]] = {}

    def scores(self, rows: np.ndarray) -> np.ndarray:
        """q·x of the given rows (:func:`~gear_repro.utils.arrays.row_dots`: a function of the row alone, so a hub
        ranked through its slice's candidates orders tied rows as scoring every row does)."""
        return row_dots(self.index.vectors(), rows, self.qv)

    def top(self, entity: str, m: int) -> tuple[np.ndarray, np.ndarray]:
        """The exact top-``m`` rows of ``entity`` by q·x, ties by row, and their scores (best first)."""
        memo = self._top.get(entity)
        if memo is None or memo[0] < m:
            rows = self.index._rows_of_entity(entity)
            slices = self.index.hub_slices()
            cand = slices.candidates(entity, self.qv, m) if slices is not None and entity in slices else rows
            rel = self.scores(cand)
            order = np.lexsort((cand, -rel))
            valid = rows.size if cand.size == rows.size else m  # every row scored: the ranking serves any m
            memo = (valid, cand[order][:valid], rel[order][:valid])
            self._top[entity] = memo
        return memo[1][:m], memo[2][:m]
