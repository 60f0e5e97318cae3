"""Alg. 1's gather step at scale (core/triple_graph.select_neighbours, core/hub_slices.py): the neighbours a beam may
extend with, narrowed by relevance, are exactly those of scoring every neighbour, with or without the hub slices;
the codes' candidate sets contain the exact top-m; NaiveGE's rankings and counters do not change."""

from __future__ import annotations

import sys

import faiss
import numpy as np
import pytest

from gear_repro.core.triple_graph import NeighbourRelevance, TripleIndex
from gear_repro.methods.gear.beam_search import BeamConfig, beam_search
from gear_repro.methods.gear.scorers import MeanScorer
from gear_repro.types import Triple
from gear_repro.utils.arrays import row_dots

DIM = 48


def _graph(n: int = 6000, n_ent: int = 800, seed: int = 0) -> tuple[list[Triple], np.ndarray]:
    """Triples whose subjects/objects follow a power law over ``n_ent`` entities (hubs of hundreds of triples) and
    float16 unit vectors, as benchmarks/bench_scale.py stores them."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, n_ent + 1) ** 0.9
    p /= p.sum()
    s, o = rng.choice(n_ent, n, p=p), rng.choice(n_ent, n, p=p)
    triples = [Triple(f"t{i}", f"E{a}", "rel", f"E{b}", f"p{i // 5}") for i, (a, b) in enumerate(zip(s, o, strict=True))]
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return triples, (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float16)


@pytest.fixture(scope="module")
def graph() -> tuple[list[Triple], np.ndarray]:
    return _graph()


def _index(graph, min_degree: int | None) -> TripleIndex:
    index = TripleIndex(None, graph[0], hub_slices_min_degree=min_degree)
    index.set_vectors(graph[1])
    return index


def _dots(x: np.ndarray, qv: np.ndarray) -> np.ndarray:
    """q·x per row as the relevance computes it: exact products in float64, each row summed on its own."""
    return (np.asarray(x, dtype=np.float64) * np.asarray(qv, dtype=np.float32).astype(np.float64)).sum(axis=1)


def _reference(index: TripleIndex, row: int, exclude: np.ndarray, cap: int, qv: np.ndarray | None):
    """The gather step as Alg. 1 reads it: every neighbour, minus the excluded, the cap best by q·t (ties by row)."""
    nb = index.neighbour_rows(row)
    kept = nb[~np.isin(nb, exclude)]
    if kept.size <= cap:
        return kept, nb.size - kept.size, False
    if qv is None:
        return kept[:cap], nb.size - kept.size, True
    rel = _dots(index.vectors()[kept], qv)
    return kept[np.sort(np.lexsort((kept, -rel))[:cap])], nb.size - kept.size, True


@pytest.mark.parametrize("min_degree", [None, 30])
@pytest.mark.parametrize("by_relevance", [True, False])
def test_select_neighbours_equals_scoring_every_neighbour(graph, min_degree, by_relevance) -> None:
    index = _index(graph, min_degree)
    rng = np.random.default_rng(1)
    capped = 0
    for trial in range(300):
        qv = rng.standard_normal(DIM).astype(np.float32)
        qv /= np.linalg.norm(qv)
        row = int(rng.integers(len(graph[0])))
        exclude = rng.integers(len(graph[0]), size=int(rng.integers(0, 25)))
        if trial % 3 == 0:  # exclusions inside the neighbourhood
            nb = index.neighbour_rows(row)
            exclude = np.concatenate([exclude, nb[:: max(1, nb.size // 7)]])
        cap = int(rng.choice([5, 20, 100]))
        relevance = NeighbourRelevance(index, qv) if by_relevance else None
        got = index.select_neighbours(row, exclude, cap, relevance)
        want = _reference(index, row, exclude, cap, qv if by_relevance else None)
        assert np.array_equal(got[0], want[0]) and got[1:] == want[1:], (trial, row)
        capped += got[2]
    assert capped > 100  # the cap applied often (hubs)
    if min_degree:
        assert len(index.hub_slices().hubs) > 10


def test_hub_candidates_contain_the_exact_top_m(graph) -> None:
    index = _index(graph, 30)
    codes = index.hub_slices()
    rng = np.random.default_rng(2)
    sizes = []
    for e in codes.hubs[:20]:
        rows = index._rows_of_entity(e)
        for m in (1, 10, 40):
            qv = rng.standard_normal(DIM).astype(np.float32)
            qv /= np.linalg.norm(qv)
            cand = codes.candidates(e, qv, m)
            rel = _dots(graph[1][rows], qv)
            top = rows[np.lexsort((rows, -rel))[:m]]
            assert set(top) <= set(cand)
            assert np.all(np.diff(cand) > 0)
            sizes.append(cand.size / rows.size)
    assert np.median(sizes) < 0.5  # the scan prunes: most rows are never scored exactly


def test_hub_file_is_a_faiss_index(graph) -> None:
    """The hand-written header + rows read back as the index faiss itself serialises (format check)."""
    index = _index(graph, 30)
    codes = index.hub_slices()
    e = codes.hubs[0]
    ref = faiss.IndexScalarQuantizer(DIM, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT)
    ref.add_sa_codes(np.ascontiguousarray(graph[1][codes.rows[e]]).view(np.uint8))
    assert np.array_equal(faiss.serialize_index(codes.index[e]), faiss.serialize_index(ref))
    q = np.asarray(graph[1][:3], dtype=np.float32) + 0.1
    assert np.array_equal(codes.index[e].search(q, 5)[1], ref.search(q, 5)[1])


def test_near_ties_and_exact_ties_stay_exact() -> None:
    """Rows one float16 step apart and duplicated rows: the candidates still hold the exact top-m, ties by row."""
    rng = np.random.default_rng(6)
    base = rng.standard_normal((40, DIM)).astype(np.float16)
    bumped = base.copy()
    bumped[:, 0] = np.nextafter(bumped[:, 0], np.float16(np.inf))
    v = np.concatenate([base, bumped, base, rng.standard_normal((400, DIM)).astype(np.float16)])
    triples = [Triple(f"t{i}", "hub", "rel", f"o{i}", f"p{i}") for i in range(len(v))]
    index = TripleIndex(None, triples, hub_slices_min_degree=30)
    index.set_vectors(v)
    codes = index.hub_slices()
    rows = codes.rows["hub"]
    for trial in range(60):
        qv = (base[trial % 40].astype(np.float32) + rng.normal(0, 0.01, DIM).astype(np.float32))
        if trial % 2:
            qv[0] = 50.0  # the bumped dimension decides
        m = int(rng.choice([1, 3, 40, 81]))
        rel = _dots(v[rows], qv)
        top = rows[np.lexsort((rows, -rel))[:m]]
        cand = codes.candidates("hub", qv, m)
        assert set(top) <= set(cand), trial
        chosen = cand[np.lexsort((cand, -_dots(v[cand], qv)))[:m]]
        assert np.array_equal(chosen, top), trial
        got = index.select_neighbours(int(rows[trial]), (), m, NeighbourRelevance(index, qv))
        assert np.array_equal(got[0], _reference(index, int(rows[trial]), np.asarray([rows[trial]]), m, qv)[0])


def test_float32_matrix_codes_bound_the_rounding(graph) -> None:
    """From a float32 matrix the float16 copy rounds: the candidates still contain the exact top-m."""
    vectors = np.asarray(graph[1], dtype=np.float32) + np.float32(1e-4)  # not float16-exact
    index = TripleIndex(None, graph[0], hub_slices_min_degree=30)
    index.set_vectors(vectors)
    codes = index.hub_slices()
    assert codes.err.max() > 0
    rng = np.random.default_rng(4)
    for e in codes.hubs[:10]:
        rows = codes.rows[e]
        qv = rng.standard_normal(DIM).astype(np.float32)
        rel = _dots(vectors[rows], qv)
        assert set(rows[np.lexsort((rows, -rel))[:20]]) <= set(codes.candidates(e, qv, 20))


def _naive_runs(index: TripleIndex, n: int = 30) -> list:
    scorer = MeanScorer(index, None)
    rng = np.random.default_rng(3)
    out = []
    for _ in range(n):
        qv = rng.standard_normal(DIM).astype(np.float32)
        qv /= np.linalg.norm(qv)
        initial = [f"t{i}" for i in rng.integers(len(index.ids), size=40)]
        r = beam_search("q", initial, index, scorer, BeamConfig(scorer="mean", neighbours=20), query_vector=qv)
        out.append((r.triples, [round(b.score, 12) for b in r.beams], r.counters))
    return out


def test_beam_search_unchanged_by_hub_slices_and_without_faiss(graph, monkeypatch) -> None:
    exact = _naive_runs(_index(graph, None))
    assert _naive_runs(_index(graph, 30)) == exact
    assert any(r[2].get("neighbours_capped") for r in exact)
    monkeypatch.setitem(sys.modules, "faiss", None)
    without = _index(graph, 30)
    assert _naive_runs(without) == exact
    assert without.hub_slices() is None


def test_no_hub_slices_below_the_degree(graph) -> None:
    index = _index(graph, 10**6)
    assert index.hub_slices() is None
    assert _naive_runs(index, 3) == _naive_runs(_index(graph, None), 3)


def test_a_rows_relevance_does_not_depend_on_the_rows_beside_it() -> None:
    """Identical rows score identically wherever they stand and whatever is gathered with them (a BLAS product of
    3 rows rounds them apart on this CPU), so ties fall to the row order in every gather."""
    rng = np.random.default_rng(7)
    v = rng.standard_normal((64, 768)).astype(np.float16)
    v[[3, 17, 40, 63]] = v[5]
    q = rng.standard_normal(768).astype(np.float32)
    for rows in ([3, 17, 40], [5, 63], list(range(64)), [63, 0, 40, 3, 1, 17]):
        got = row_dots(v, np.asarray(rows), q)
        dup = [g for r, g in zip(rows, got, strict=True) if r in (3, 5, 17, 40, 63)]
        assert len(set(dup)) == 1 and dup[0] == row_dots(v, np.asarray([5]), q)[0]
