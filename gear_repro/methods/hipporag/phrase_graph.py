"""HippoRAG's knowledge graph over phrases (Gutiérrez et al., 2024, §3 "Offline indexing"), built from T.

Follows the reference code OSU-NLP-Group/HippoRAG: ``legacy`` branch ``src/create_graph.py`` (v1 graph),
``src/hipporag.py`` (``build_graph``, ``load_index_files``: node specificity and the passage matrices) and, for
``version=v2``, ``main`` branch ``src/hipporag/HippoRAG.py`` (``add_fact_edges``, ``add_passage_edges``,
``add_synonymy_edges``). Our own code; differences are listed in docs/baselines.md.

- Phrase nodes: normalised subjects and objects of the triples (:func:`phrase_key`; ``hipporag``
  normalisation = the reference's ``processing_phrases``: lower case, non-alphanumerics to spaces, then
  :func:`gear_repro.core.triple_graph.normalize_entity`; ``entity`` = GEAR's entity key only).
- Relation edges: every triple adds 1 to the (subject, object) pair in both directions (co-occurrence count).
- Synonym edges: for each phrase with more than 2 alphanumeric characters, its nearest phrases by embedding
  cosine with score >= ``synonym_threshold`` (0.8), at most ``synonym_top_k`` (100) of them, weight = the
  cosine. As in the reference, a synonym entry overwrites the relation count of that direction.
- The reference stores directed entries and builds an undirected igraph with one edge per entry, so an
  undirected pair weighs s(a->b) + s(b->a); :class:`PhraseGraph` keeps exactly that sum in one edge (the same
  PPR: igraph adds the weights of parallel edges).
- Passage <-> phrase incidence: ``passage_phrase[d, p]`` = number of distinct (normalised) facts of passage d
  that contain phrase p (the reference's ``docs_to_facts @ facts_to_phrases``); node specificity |P_i| = number
  of passages containing phrase i.
- v2 adds one node per passage, linked to each phrase of its triples with weight 1.0 (one direction).

The exact nearest-neighbour search runs in blocks of query rows against all phrase vectors (memory
``block_rows x n_phrases`` floats; time O(n_phrases^2 d) — measured in docs/baselines.md); from
``synonym_auto_min_phrases`` phrases on (``synonym_search=auto``) an approximate search over faiss k-means cells
takes its place (:func:`ann_synonym_pairs`; docs/scale.md "HippoRAG at full size"). The built graph is
cached under $GEAR_CACHE/hipporag/<content hash>.npz (triples, passages, settings, embedder).
"""

from __future__ import annotations

import json
import logging
import re
import time
import zipfile
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from gear_repro.core.triple_graph import normalize_entity
from gear_repro.embedding.embedder import corpus_cache_path
from gear_repro.types import Triple
from gear_repro.utils.errors import ConfigError, DataError
from gear_repro.utils.hashing import hash_obj, hash_texts
from gear_repro.utils.io import atomic_open, load_cached, progress_bars, record_bar
from gear_repro.utils.paths import cache_dir
from gear_repro.utils.settings import Choice, choice

log = logging.getLogger(__name__)

_NON_ALNUM_SPACE = re.compile(r"[^A-Za-z0-9 ]")
_NON_ALNUM = re.compile(r"[^A-Za-z0-9]")


class HippoRAGVersion(Choice):
    """Which HippoRAG (hipporag.version)."""

    v1 = "v1"  # HippoRAG (legacy branch): NER -> phrase linking -> PPR over phrases
    v2 = "v2"  # HippoRAG 2 (main branch): fact linking, passage nodes


class PhraseNormalisation(Choice):
    """Phrase node keys (hipporag.normalisation; :func:`phrase_key`)."""

    hipporag = "hipporag"  # processing_phrases + GEAR's entity key
    entity = "entity"  # GEAR's entity key only


def phrase_key(s: str, normalisation: str = "hipporag") -> str:
    """Phrase node key. ``hipporag``: the reference's ``processing_phrases`` (lower case, every character
    other than A-Z, a-z, 0-9 and space becomes a space) followed by GEAR's entity key (casefold, trim, squeeze
    spaces); ``entity``: GEAR's entity key only (``normalize_entity``)."""
    if normalisation == "hipporag":
        s = _NON_ALNUM_SPACE.sub(" ", str(s).lower())
    return normalize_entity(s)


def alnum_length(s: str) -> int:
    """Number of ASCII letters and digits (the reference's synonym-candidate filter: more than 2)."""
    return len(_NON_ALNUM.sub("", s))


class SynonymSearch(Choice):
    """How the synonym kNN is searched (hipporag.synonym_search; :func:`synonym_edges`)."""

    auto = "auto"  # exact below hipporag.synonym_auto_min_phrases phrases, else ann
    exact = "exact"  # every phrase against every phrase (:func:`synonym_pairs`)
    ann = "ann"  # faiss k-means cells, each searched against its nearest cells (:func:`ann_synonym_pairs`)


def resolve_synonym_search(search: str, n_phrases: int, auto_min_phrases: int) -> str:
    """``exact`` or ``ann`` for a graph of ``n_phrases`` phrases (``auto``: exact below ``auto_min_phrases``)."""
    search = choice(SynonymSearch, search, "hipporag.synonym_search").value
    if search == "auto":
        return "exact" if n_phrases < auto_min_phrases else "ann"
    return search


class SynonymEntries:
    """Directed synonym entries (i, j, cosine) as three arrays (int32, int32, float32), rows ascending, each row's
    entries best first: ~12 bytes an entry, where Python tuples took ~150 (MuSiQue-size corpora give tens of
    millions of entries, docs/scale.md). Iterating yields ``(i, j, cosine)`` tuples."""

    def __init__(self, i: np.ndarray, j: np.ndarray, s: np.ndarray) -> None:
        self.i, self.j, self.s = i, j, s

    @classmethod
    def join(cls, parts: Sequence[SynonymEntries]) -> SynonymEntries:
        """The entries of ``parts`` in order (empty: none)."""
        if not parts:
            return cls(np.empty(0, np.int32), np.empty(0, np.int32), np.empty(0, np.float32))
        return cls(*(np.concatenate([getattr(x, a) for x in parts]) for a in ("i", "j", "s")))

    def __len__(self) -> int:
        return len(self.i)

    def __iter__(self) -> Iterator[tuple[int, int, float]]:
        return zip(self.i.tolist(), self.j.tolist(), self.s.astype(np.float64).tolist(), strict=True)


def _emit_hits(q: np.ndarray, sims: np.ndarray, cols: np.ndarray | None, threshold: float,
               top_k: int) -> SynonymEntries:
    """The synonym entries of query rows ``q`` from their similarities ``sims`` to the rows ``cols``
    (ascending; None = every row): scores >= ``threshold`` except the row itself, best first, ties by ascending
    row, at most ``top_k`` a row."""
    if cols is None:
        sims[np.arange(len(q)), q] = -np.inf  # never link a phrase to itself
    else:
        at = np.minimum(np.searchsorted(cols, q), len(cols) - 1)
        own = cols[at] == q
        sims[np.flatnonzero(own), at[own]] = -np.inf
    hit_r, hit_c = np.nonzero(sims >= threshold)
    scores = sims[hit_r, hit_c]
    if cols is not None:
        hit_c = cols[hit_c]  # ascending columns keep the tie order by row
    order = np.lexsort((hit_c, -scores, hit_r))  # by row, then score desc, then column asc
    hit_r, hit_c, scores = hit_r[order], hit_c[order], scores[order]
    starts = np.flatnonzero(np.r_[True, hit_r[1:] != hit_r[:-1]]) if hit_r.size else np.empty(0, np.int64)
    rank = np.arange(hit_r.size) - np.repeat(starts, np.diff(np.r_[starts, hit_r.size]))
    keep = rank < top_k
    return SynonymEntries(np.asarray(q)[hit_r[keep]].astype(np.int32), hit_c[keep].astype(np.int32),
                          scores[keep].astype(np.float32))


def synonym_pairs(vectors: np.ndarray, threshold: float = 0.8, top_k: int = 100, eligible: np.ndarray | None = None,
                  block_rows: int | None = None, max_block_bytes: int = 256 << 20,
                  progress: bool = False) -> SynonymEntries:
    """Directed synonym entries (i, j, cosine) for rows ``i`` (``eligible``) and their nearest rows ``j != i``
    with cosine >= ``threshold``, best first, at most ``top_k`` per row; ties by ascending ``j``.

    ``vectors`` must be L2-normalised. Exact search in blocks of query rows (``block_rows``, else as many as fit
    in ``max_block_bytes`` of float32 similarities), so memory stays bounded for any number of phrases; time is
    O(n^2 d). ``progress``: a bar over the query rows when there are many (:func:`record_bar`).
    """
    n = vectors.shape[0]
    if n == 0 or top_k <= 0:
        return SynonymEntries.join([])
    v = np.ascontiguousarray(vectors, dtype=np.float32)
    rows = np.arange(n) if eligible is None else np.flatnonzero(eligible)
    step = block_rows or max(1, int(max_block_bytes // (4 * n)))
    out: list[SynonymEntries] = []
    with progress_bars(progress), record_bar(len(rows), "hipporag synonyms (exact)", "phrase") as bar:
        for start in range(0, len(rows), step):
            q = rows[start:start + step]
            out.append(_emit_hits(q, v[q] @ v.T, None, threshold, top_k))
            bar.update(len(q))
    return SynonymEntries.join(out)


# OpenBLAS computes small float32 products (m·n up to about a thousand) with another kernel, which rounds some
# cosines differently in the last bit; the ANN search pads its products beyond that so that a pair found by both
# searches has the same weight as in the exact search: bitwise on the AVX-512 kernels, within a float32 ulp where
# the kernel still blocks the two shapes differently (AVX2; tests/test_hipporag_ann.py allows that ulp).
_MIN_ROWS, _MIN_COLS = 16, 256


def _cell_lists(assigned: np.ndarray, cells: int) -> list[np.ndarray]:
    """The rows listed in each cell (``assigned``: each row's cells, one per column), ascending."""
    cell, row = assigned.ravel(), np.repeat(np.arange(assigned.shape[0]), assigned.shape[1])
    order = np.lexsort((row, cell))
    bounds = np.searchsorted(cell[order], np.arange(cells + 1))
    return [row[order[bounds[c]:bounds[c + 1]]] for c in range(cells)]


def ann_synonym_pairs(vectors: np.ndarray, threshold: float = 0.8, top_k: int = 100,
                      eligible: np.ndarray | None = None, nlist: int | None = None, nprobe: int = 64,
                      spill: int = 2, train_size: int = 200_000, seed: int = 0, threads: int = 1,
                      max_block_bytes: int = 256 << 20, progress: bool = False) -> SynonymEntries:
    """:func:`synonym_pairs` with approximate candidates: the same entries, in the same order, except the
    neighbours that lie outside the searched cells.

    The phrases are split into ``nlist`` cells by seeded spherical faiss k-means (trained on ``train_size``
    vectors; null nlist = 4·sqrt(N), at most N/39, as backend.dense.ivf). Each phrase is a query of its nearest
    cell and is listed as a neighbour in its ``spill`` nearest cells (a phrase near a border is found from either
    side). The queries of a cell are scored together against every phrase listed in the ``nprobe`` cells whose
    centroids are nearest to that cell's (itself included), with the exact search's float32 BLAS products
    (the same cosines to a float32 ulp, see ``_MIN_ROWS``), so threshold, top_k, self exclusion and tie order are the
    exact path's. faiss runs on ``threads`` OpenMP threads (as backend.dense.threads). Time
    O(N · spill · nprobe/nlist · N · d) plus the k-means; ``nprobe >= nlist`` is the exact search.

    The reference found these neighbours with faiss too (HippoRAG legacy@b144c46 src/RetrievalModule.py:251-335:
    ``IndexFlat`` inner product over chunks, k=2047) or with a ColBERTv2 PLAID index (src/colbertv2_knn.py:14-57).
    """
    from gear_repro.backends.ann import DenseSettings, IVFSettings, import_faiss, ivf_nlist, training_sample

    n, d = vectors.shape
    if n == 0 or top_k <= 0:
        return SynonymEntries.join([])
    faiss = import_faiss()
    faiss.omp_set_num_threads(threads)
    v = np.ascontiguousarray(vectors, dtype=np.float32)
    cells = ivf_nlist(DenseSettings(ivf=IVFSettings(nlist=nlist, nprobe=nprobe, train_size=train_size)), n)
    if nprobe >= cells:
        return synonym_pairs(v, threshold, top_k, eligible, max_block_bytes=max_block_bytes, progress=progress)
    km = faiss.Kmeans(d, cells, niter=10, seed=seed, spherical=True, verbose=False)
    km.train(training_sample(v, train_size, seed))
    _, assigned = km.index.search(v, spill)
    # probed per cell, not per query: one product per cell; per-query probe lists, united over a cell's queries,
    # covered most cells in 384 dimensions and made the search slower than the exact one
    _, probes = km.index.search(km.centroids, nprobe)  # each cell's nearest cells, itself first
    members, queries_of = _cell_lists(assigned, cells), _cell_lists(assigned[:, :1], cells)
    is_query = np.ones(n, dtype=bool) if eligible is None else np.asarray(eligible, dtype=bool)
    found: list[SynonymEntries] = []
    with progress_bars(progress), record_bar(int(is_query.sum()), "hipporag synonyms (ann)", "phrase") as bar:
        for c in range(cells):
            queries = queries_of[c][is_query[queries_of[c]]]
            if queries.size == 0:
                continue
            cols = np.unique(np.concatenate([members[p] for p in probes[c] if p >= 0]))
            padded_cols = np.resize(cols, max(len(cols), _MIN_COLS))
            db = v[padded_cols].T
            step = max(1, int(max_block_bytes // (4 * len(padded_cols))))
            for start in range(0, len(queries), step):
                q = queries[start:start + step]
                sims = (v[np.resize(q, max(len(q), _MIN_ROWS))] @ db)[:len(q), :len(cols)]
                found.append(_emit_hits(q, sims, cols, threshold, top_k))
                bar.update(len(q))
    out = SynonymEntries.join(found)
    # a row is the query of one cell only, so its entries are together: a stable sort by row keeps their order
    order = np.argsort(out.i, kind="stable")
    return SynonymEntries(out.i[order], out.j[order], out.s[order])


@dataclass
class PhraseGraph:
    """The built graph: node names, undirected weighted edges, passage<->phrase matrix and statistics.

    Nodes ``0..n_phrases-1`` are phrases (sorted); with v2, nodes ``n_phrases..`` are the passages in corpus
    order. ``edges`` is an (E, 2) int array (u < v), ``weights`` its (E,) float array.
    """

    phrases: list[str]
    passage_ids: list[str]
    edges: np.ndarray
    weights: np.ndarray
    passage_phrase: sp.csr_matrix  # (n_passages, n_phrases) distinct-fact counts
    version: str = "v1"
    stats: dict[str, Any] = field(default_factory=dict)
    _igraph: Any = None

    @property
    def n_phrases(self) -> int:
        return len(self.phrases)

    @property
    def n_nodes(self) -> int:
        return self.n_phrases + (len(self.passage_ids) if self.version == "v2" else 0)

    @property
    def phrase_index(self) -> dict[str, int]:
        if "_pidx" not in self.__dict__:
            self.__dict__["_pidx"] = {p: i for i, p in enumerate(self.phrases)}
        return self.__dict__["_pidx"]

    def node_specificity_counts(self) -> np.ndarray:
        """|P_i|: number of passages containing phrase i (the reference's ``phrase_to_num_doc``)."""
        return np.asarray((self.passage_phrase > 0).sum(axis=0)).ravel().astype(np.int64)

    def igraph(self, edge_chunk: int = 1 << 20):
        """The python-igraph Graph (undirected, edge attribute ``weight``), built once. The edges go in
        ``edge_chunk`` at a time, in order (the same edge ids, so the same graph): a Python list of every edge at
        once took ~130 bytes an edge, 4.5 GiB at the 36M edges of a MuSiQue-size graph (docs/scale.md)."""
        if self._igraph is None:
            import igraph as ig

            g = ig.Graph(n=self.n_nodes, directed=False)
            for start in range(0, len(self.edges), edge_chunk):
                g.add_edges(self.edges[start:start + edge_chunk].tolist())
            g.es["weight"] = self.weights.tolist()
            self._igraph = g
        return self._igraph

    def personalized_pagerank(self, reset: np.ndarray, damping: float = 0.5) -> np.ndarray:
        """PPR over the graph (python-igraph ``personalized_pagerank``, prpack, undirected, weighted).

        ``damping`` is the probability of following an edge (HippoRAG's experiment scripts: 0.5). ``reset``
        (length ``n_nodes``, non-negative, not all zero) is normalised by igraph.
        """
        reset = np.asarray(reset, dtype=np.float64)
        if reset.shape != (self.n_nodes,):
            raise ValueError(f"reset vector of length {reset.shape} for {self.n_nodes} nodes")
        reset = np.where(np.isnan(reset) | (reset < 0), 0.0, reset)
        if reset.sum() <= 0:
            raise ValueError("PPR reset vector is all zero")
        pr = self.igraph().personalized_pagerank(vertices=None, directed=False, damping=damping, reset=reset.tolist(),
                                                 weights="weight", implementation="prpack")
        return np.asarray(pr, dtype=np.float64)

    # -- persistence -------------------------------------------------------------------------------
    def save(self, path) -> None:
        """One .npz. Names go in as UTF-8 bytes with their end offsets: a fixed-width unicode array holds every name
        at the longest one's width in UTF-32, 6.2 GiB for the 4.8M phrases of a 2Wiki-size graph (docs/scale.md)."""
        m = self.passage_phrase.tocsr()
        phrase_bytes, phrase_ends = _pack_strings(self.phrases)
        pid_bytes, pid_ends = _pack_strings(self.passage_ids)
        with atomic_open(path, "wb") as f:
            np.savez_compressed(f, phrases_utf8=phrase_bytes, phrases_ends=phrase_ends, passage_ids_utf8=pid_bytes,
                                passage_ids_ends=pid_ends, edges=self.edges, weights=self.weights, m_data=m.data,
                                m_indices=m.indices, m_indptr=m.indptr, m_shape=np.array(m.shape),
                                version=np.array(self.version), stats=np.array(json.dumps(self.stats)))

    @classmethod
    def load(cls, path) -> PhraseGraph:
        """A graph :meth:`save` wrote, or one saved with its names as unicode arrays (earlier caches)."""
        with np.load(path, allow_pickle=False) as z:
            m = sp.csr_matrix((z["m_data"], z["m_indices"], z["m_indptr"]), shape=tuple(z["m_shape"]))
            return cls(phrases=_load_strings(z, "phrases"), passage_ids=_load_strings(z, "passage_ids"),
                       edges=z["edges"], weights=z["weights"], passage_phrase=m, version=str(z["version"]),
                       stats=json.loads(str(z["stats"])))


def _pack_strings(names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """``names`` as one UTF-8 byte array and each name's end offset in it."""
    encoded = [n.encode("utf-8") for n in names]
    ends = np.cumsum([len(b) for b in encoded], dtype=np.int64)
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), ends


def _load_strings(z, key: str) -> list[str]:
    """The names :func:`_pack_strings` stored under ``key``, or an earlier cache's unicode array ``key``."""
    if f"{key}_utf8" not in z:
        return [str(n) for n in z[key]]
    data, ends = z[f"{key}_utf8"].tobytes(), z[f"{key}_ends"].tolist()
    return [data[a:b].decode("utf-8") for a, b in zip([0, *ends][:-1], ends, strict=True)]


def build_phrase_graph(triples: Sequence[Triple], passage_ids: Sequence[str], embed=None, *, version: str = "v1",
                       normalisation: str = "hipporag", synonym_threshold: float = 0.8, synonym_top_k: int = 100,
                       synonym_min_alnum: int = 3, synonyms: bool = True, synonym_search: str = "auto",
                       synonym_auto_min_phrases: int = 100_000, synonym_nlist: int | None = None,
                       synonym_nprobe: int = 64, block_rows: int | None = None, progress: bool = False) -> PhraseGraph:
    """Build the HippoRAG graph (module docstring). ``embed(texts) -> L2-normalised vectors`` is needed for
    synonym edges (``synonyms=False`` builds the reference's ``facts`` graph without them). ``synonym_search``
    (:func:`resolve_synonym_search`) picks :func:`synonym_pairs` or :func:`ann_synonym_pairs` (``synonym_nlist``,
    ``synonym_nprobe``); ``progress`` shows bars over the triples and the synonym search when they are many."""
    version = choice(HippoRAGVersion, version, "hipporag.version").value
    normalisation = choice(PhraseNormalisation, normalisation, "hipporag.normalisation").value
    if not triples:
        raise DataError("HippoRAG needs triples (dataset has no triples.jsonl; run extraction first)")
    t0 = time.perf_counter()
    pid_row = {p: i for i, p in enumerate(passage_ids)}
    clean: list[tuple[int, str, str, str]] = []  # (passage row, head, relation, tail)
    skipped = defaultdict(int)
    with progress_bars(progress), record_bar(len(triples), "hipporag graph", "triple") as bar:
        for t in triples:
            bar.update(1)
            row = pid_row.get(t.passage_id)
            if row is None:
                skipped["triples_without_passage"] += 1
                continue
            h, r, o = (phrase_key(t.subject, normalisation), phrase_key(t.predicate, normalisation),
                       phrase_key(t.object, normalisation))
            if not h or not o:
                skipped["triples_with_empty_phrase"] += 1
                continue
            clean.append((row, h, r, o))
    phrases = sorted({x for _, h, _, o in clean for x in (h, o)})
    idx = {p: i for i, p in enumerate(phrases)}
    n_p = len(phrases)

    stats_dir: dict[tuple[int, int], float] = defaultdict(float)  # directed entries, as the reference stores them
    facts_by_passage: dict[int, set[tuple[str, str, str]]] = defaultdict(set)
    for row, h, r, o in clean:
        a, b = idx[h], idx[o]
        stats_dir[(a, b)] += 1.0
        stats_dir[(b, a)] += 1.0
        facts_by_passage[row].add((h, r, o))
    n_relation_pairs = len({(min(a, b), max(a, b)) for a, b in stats_dir if a != b})
    n_used = len(clean)
    # From here on each intermediate is dropped once the next exists: at MuSiQue's size (1.5M triples, tens of
    # millions of synonym entries) holding them all to the end made the build's peak (docs/scale.md).
    del clean

    # passage x phrase: number of distinct facts of the passage containing the phrase
    counts: dict[tuple[int, int], int] = defaultdict(int)
    for row, facts in facts_by_passage.items():
        for h, _, o in facts:
            for p in {h, o}:
                counts[(row, idx[p])] += 1
    del facts_by_passage, idx
    keys = sorted(counts)
    m = sp.csr_matrix(([counts[k] for k in keys], ([k[0] for k in keys], [k[1] for k in keys])),
                      shape=(len(passage_ids), n_p), dtype=np.float64)
    del counts, keys

    t_syn = 0.0
    search = resolve_synonym_search(synonym_search, n_p, synonym_auto_min_phrases) if synonyms else None
    found = SynonymEntries.join([])
    if synonyms and n_p:
        if embed is None:
            raise ConfigError("synonym edges need an embedder")
        t1 = time.perf_counter()
        vecs = np.asarray(embed(phrases), dtype=np.float32)
        eligible = np.array([alnum_length(p) >= synonym_min_alnum for p in phrases])
        if search == "ann":
            found = ann_synonym_pairs(vecs, synonym_threshold, synonym_top_k, eligible, nlist=synonym_nlist,
                                      nprobe=synonym_nprobe, progress=progress)
        else:
            found = synonym_pairs(vecs, synonym_threshold, synonym_top_k, eligible, block_rows=block_rows,
                                  progress=progress)
        del vecs, eligible
        t_syn = time.perf_counter() - t1

    n_nodes = n_p + len(passage_ids)
    n_entries = len(found)
    n_synonym_edges, n_with_synonym = _synonym_counts(found, n_nodes)
    # directed entries as codes a * n_nodes + b (arrays: tens of millions of synonym entries at full size)
    rel = np.fromiter(stats_dir.keys(), dtype=np.dtype((np.int64, 2)), count=len(stats_dir)).reshape(-1, 2)
    rel_w = np.fromiter(stats_dir.values(), dtype=np.float64, count=len(stats_dir))
    del stats_dir
    rel_code = rel[:, 0] * n_nodes + rel[:, 1]
    del rel
    syn_code = found.i.astype(np.int64) * n_nodes + found.j
    keep = ~np.isin(rel_code, syn_code)  # a synonym entry overwrites a relation count of its direction, as the reference does
    codes, ws = [rel_code[keep], syn_code], [rel_w[keep], found.s.astype(np.float64)]
    del rel_code, rel_w, keep, syn_code, found
    if version == "v2":  # one entry per passage -> phrase, weight 1.0
        rows = np.repeat(np.arange(len(passage_ids), dtype=np.int64), np.diff(m.indptr))
        codes.append((n_p + rows) * n_nodes + m.indices)
        ws.append(np.ones(len(rows)))
        del rows
    code, w = np.concatenate(codes), np.concatenate(ws)
    del codes, ws
    a, b = np.divmod(code, n_nodes)
    del code
    own = a != b  # self loops are dropped (reference build_graph)
    w = w[own]
    lo = np.minimum(a, b)[own]
    hi = np.maximum(a, b)[own]
    del a, b, own
    lo *= n_nodes  # the pair's code lo * n_nodes + hi, in place
    lo += hi
    del hi
    # an undirected pair weighs the sum of its two directions (at most two terms: the sum of either order)
    und, inverse = np.unique(lo, return_inverse=True)
    del lo
    weights = np.bincount(inverse, weights=w, minlength=len(und)).astype(np.float64)  # (int64 when there are none)
    del inverse, w
    edges = np.stack(np.divmod(und, n_nodes), axis=1)  # int64, (E, 2) even when E = 0
    stats = {"phrases": n_p, "passages": len(passage_ids), "triples_used": n_used, "relation_pairs": n_relation_pairs,
             "synonym_search": search, "synonym_entries": n_entries, "synonym_edges": n_synonym_edges,
             "phrases_with_synonym": n_with_synonym, "synonym_phrase_share": round(n_with_synonym / max(1, n_p), 6),
             "edges": len(und), "synonym_s": round(t_syn, 3),
             "build_s": round(time.perf_counter() - t0, 3), **skipped}
    log.info("HippoRAG graph (%s): %s", version, stats)
    return PhraseGraph(phrases=phrases, passage_ids=list(passage_ids), edges=edges, weights=weights, passage_phrase=m,
                       version=version, stats=stats)


def _synonym_counts(found: SynonymEntries, n_nodes: int) -> tuple[int, int]:
    """The undirected synonym edges among ``found``'s entries and the phrases with at least one."""
    si, sj = found.i.astype(np.int64), found.j.astype(np.int64)
    pairs = np.unique(np.minimum(si, sj) * n_nodes + np.maximum(si, sj))
    del si, sj
    return len(pairs), len(np.unique(np.concatenate(np.divmod(pairs, n_nodes))))


# rows whose synonyms are counted to estimate a corpus's entries before its search (:func:`sampled_synonym_entries`)
SYNONYM_SAMPLE_ROWS = 1_000


def sampled_synonym_entries(vectors: np.ndarray, threshold: float, top_k: int, eligible: np.ndarray,
                            rows: int = SYNONYM_SAMPLE_ROWS, seed: int = 0, block: int = 65_536) -> int:
    """The entries :func:`synonym_pairs` would find over ``vectors``, estimated from ``rows`` eligible rows drawn
    with ``seed``: each row's neighbours ``j != i`` with cosine >= ``threshold``, at most ``top_k``, their mean times
    the eligible rows (exact when ``rows`` covers them). Columns a ``block`` at a time, so a memory-mapped matrix is
    read once in pieces: for the start-up capacity check, before the O(N^2) search (docs/scale.md)."""
    candidates = np.flatnonzero(eligible)
    if not len(candidates) or top_k <= 0:
        return 0
    picked = candidates if len(candidates) <= rows else np.sort(
        np.random.default_rng(seed).choice(candidates, size=rows, replace=False))
    q = np.asarray(vectors[picked], dtype=np.float32)
    counts = np.zeros(len(picked), dtype=np.int64)
    for start in range(0, vectors.shape[0], block):
        hits = q @ np.asarray(vectors[start:start + block], dtype=np.float32).T >= threshold
        own = (picked >= start) & (picked < start + hits.shape[1])
        hits[np.flatnonzero(own), picked[own] - start] = False
        counts += hits.sum(axis=1)
    return round(float(np.minimum(counts, top_k).mean()) * len(candidates))


def cached_phrase_vectors(phrases: Sequence[str]) -> list[np.ndarray]:
    """Memory maps of the encodes of ``phrases`` (the graph's phrase list, in its order) found in
    $GEAR_CACHE/embeddings, one per encoder that wrote one (:func:`corpus_cache_path`)."""
    found = []
    pattern = corpus_cache_path("*", phrases)
    for path in sorted(pattern.parent.glob(pattern.name)):
        try:
            m = np.load(path, mmap_mode="r")
        except (OSError, ValueError):
            continue
        if m.ndim == 2 and m.shape[0] == len(phrases):
            found.append(m)
    return found


def graph_cache_key(triples: Sequence[Triple], passage_ids: Sequence[str], settings: dict[str, Any]) -> str:
    """Content hash of everything the graph depends on."""
    th = hash_texts(f"{t.passage_id}\t{t.subject}\t{t.predicate}\t{t.object}" for t in triples)
    return hash_obj({"triples": th, "passages": hash_texts(passage_ids), **settings})


def cached_graph_edges(phrases: int) -> int | None:
    """The edges of a graph in $GEAR_CACHE/hipporag with ``phrases`` phrase nodes (the most, where several are),
    read from the arrays' headers (nothing decompressed); None when no cached graph has that many phrases. For the
    start-up capacity check, which prices the graph before its build (:meth:`HippoRAG.capacity_collections`)."""
    found = []
    for path in (cache_dir() / "hipporag").glob("graph-*.npz"):
        try:
            with zipfile.ZipFile(path) as z:
                # one end offset a phrase (PhraseGraph.save), or an earlier cache's unicode array
                names = "phrases_ends.npy" if "phrases_ends.npy" in z.namelist() else "phrases.npy"
                if _npy_rows(z, names) == phrases:
                    found.append(_npy_rows(z, "edges.npy"))
        except (OSError, ValueError, KeyError, zipfile.BadZipFile):
            continue
    return max(found, default=None)


def _npy_rows(z: zipfile.ZipFile, member: str) -> int:
    with z.open(member) as f:
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        return int(read(f)[0][0])


def cached_phrase_graph(triples: Sequence[Triple], passage_ids: Sequence[str], embed, settings: dict[str, Any],
                        embedder_id: str, cache: bool = True, block_rows: int | None = None,
                        progress: bool = False) -> PhraseGraph:
    """:func:`build_phrase_graph` with ``settings`` memoised at $GEAR_CACHE/hipporag/graph-<key>.npz
    (``stats['cached']`` says which); ``block_rows`` and ``progress`` do not change the graph."""
    key = graph_cache_key(triples, passage_ids, {**settings, "embedder": embedder_id, "format": 2})
    path = cache_dir() / "hipporag" / f"graph-{key}.npz"
    t0 = time.perf_counter()
    if cache and path.exists() and (g := load_cached(path, PhraseGraph.load, "HippoRAG graph")) is not None:
        g.stats.update(cached=True, load_s=round(time.perf_counter() - t0, 3))
        return g
    g = build_phrase_graph(triples, passage_ids, embed, block_rows=block_rows, progress=progress, **settings)
    if cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        g.save(path)
    g.stats["cached"] = False
    return g
