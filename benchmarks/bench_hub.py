"""Cost of an uncapped entity hub in the diverse triple beam search (GEAR §4.2; unbounded hub degree, docs/graph_expansion.md).

A synthetic graph: ``--hub`` triples share one subject entity (a hub), each with its own object; random unit
vectors of dimension ``--dim`` stand in for the triple embeddings. Measured (median of ``--reps`` runs, ms):

  neighbours_cold   neighbour_rows() of a hub triple, first call (adjacency union; memoised afterwards)
  neighbours_warm   the same call again (memoised)
  hub_slices_build   the hub's contiguous float16 copy (graph.hub_slices_min_degree; core/hub_slices.py), once
  select            choosing ``--neighbours`` of the hub's neighbours by relevance to q (cosine of the single
                    triple; beam_search's gather step, ``TripleIndex.select_neighbours``, a new query each time)
  beam_search       one full Alg. 1 search (l=2, b=10, mean scorer) from ``--beams`` hub triples

for the default (no cap, hub slices for entities of 256+ triples), no cap without hub slices (every row of the
hub scored exactly: the same choice), and the old default cap (max_degree=1000, truncate).

    python -m benchmarks.bench_hub [--hub 50000] [--dim 768]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from gear_repro.core.triple_graph import NeighbourRelevance, TripleIndex
from gear_repro.methods.gear.beam_search import BeamConfig, beam_search
from gear_repro.methods.gear.scorers import MeanScorer
from gear_repro.types import Triple


class _QueryOnly:
    """Embedder stand-in: returns a fixed query vector."""

    def __init__(self, qv: np.ndarray):
        self.qv = qv

    def encode(self, texts):
        return np.stack([self.qv for _ in texts])


def _ms(f, reps: int) -> float:
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        out.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(out), 3)


def measure(n_hub: int, dim: int, n_neighbours: int, n_beams: int, reps: int, max_degree: int | None,
            hub_slices_min_degree: int | None) -> dict:
    rng = np.random.default_rng(0)
    triples = [Triple(f"t{i}", "hub entity", f"rel{i % 7}", f"object {i}", f"p{i // 10}") for i in range(n_hub)]
    vecs = rng.standard_normal((n_hub, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    qv = rng.standard_normal(dim).astype(np.float32)
    qv /= np.linalg.norm(qv)

    t0 = time.perf_counter()
    index = TripleIndex(None, triples, max_degree=max_degree, hub_slices_min_degree=hub_slices_min_degree)
    build_ms = (time.perf_counter() - t0) * 1000
    index.set_vectors(vecs)
    row = index.row["t0"]
    t0 = time.perf_counter()
    nb = index.neighbour_rows(row)
    cold_ms = (time.perf_counter() - t0) * 1000
    warm_ms = _ms(lambda: index.neighbour_rows(row), reps)
    t0 = time.perf_counter()
    index.hub_slices()
    codes_ms = (time.perf_counter() - t0) * 1000
    # beam_search's relevance cap (gather step), for a new query each time
    select_ms = _ms(lambda: index.select_neighbours(row, (), n_neighbours, NeighbourRelevance(index, qv)), reps)
    cfg = BeamConfig(length=2, width=10, neighbours=n_neighbours, scorer="mean")
    scorer = MeanScorer(index, _QueryOnly(qv))
    initial = [f"t{i}" for i in range(n_beams)]
    search_ms = _ms(lambda: beam_search("q", initial, index, scorer, cfg, query_vector=qv), reps)
    return {"max_degree": max_degree, "hub_slices_min_degree": hub_slices_min_degree, "hub_triples": n_hub,
            "neighbours_of_a_hub_triple": int(nb.size), "index_build_ms": round(build_ms, 1),
            "neighbours_cold_ms": round(cold_ms, 3), "neighbours_warm_ms": warm_ms,
            "hub_slices_build_ms": round(codes_ms, 1), "select_ms": select_ms, "beam_search_ms": search_ms}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hub", type=int, default=50_000)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--neighbours", type=int, default=100)
    ap.add_argument("--beams", type=int, default=10)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    for cap, codes in ((None, 256), (None, None), (1000, 256)):
        print(json.dumps(measure(a.hub, a.dim, a.neighbours, a.beams, a.reps, cap, codes)))


if __name__ == "__main__":
    main()
