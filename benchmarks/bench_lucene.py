#!/usr/bin/env python
"""Time backend=lucene on the bundled MuSiQue sample (not a test; figures go to docs/ARCHITECTURE.md's backend row):
JVM start, Lucene index build (no cache: written to a temp $GEAR_CACHE), reopening the cached index, BM25 query
latency p50/p95 (k=15, one query a call, the sample's 100 questions x 5 repeats), and the full score vectors of
``bm25_scores``; the memory backend (bm25s) beside it, and how many of the 100 top-15 rankings the two share.

  python -m benchmarks.bench_lucene [--repeats 5]     # needs make install-lucene (or $GEAR_LUCENE_JAR)
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "data" / "musique_sample"


def _ms(xs: list[float]) -> str:
    return f"p50 {np.percentile(xs, 50) * 1e3:.2f} ms, p95 {np.percentile(xs, 95) * 1e3:.2f} ms"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    from gear_repro.backends import lucene as L

    os.environ.setdefault(L.JAR_ENV, str(L.find_jar()))  # found in the real $GEAR_CACHE before it is swapped
    os.environ["GEAR_CACHE"] = tempfile.mkdtemp(prefix="bench_lucene_")

    from gear_repro.backends.base import IndexDoc
    from gear_repro.backends.memory import MemoryBackend
    from gear_repro.data.dataset import load_dataset

    ds = load_dataset(SAMPLE, name="musique")
    docs = [IndexDoc(p.id, p.content) for p in ds.passages]
    queries = [q.question for q in ds.questions]

    t = time.perf_counter()
    backend = L.LuceneBackend()
    print(f"JVM start + Lucene {backend.version}: {time.perf_counter() - t:.2f} s")
    coll = backend.open_collection("passages", docs)
    t = time.perf_counter()
    coll.bm25(queries[:1], 15)
    print(f"Lucene index build, {len(docs)} passages: {time.perf_counter() - t:.2f} s")
    t = time.perf_counter()
    again = backend.open_collection("passages", docs)
    again.bm25(queries[:1], 15)
    print(f"reopen cached index: {time.perf_counter() - t:.3f} s")

    def per_query(fn) -> list[float]:
        times = []
        for _ in range(args.repeats):
            for q in queries:
                t = time.perf_counter()
                fn([q])
                times.append(time.perf_counter() - t)
        return times

    print(f"Lucene bm25 k=15: {_ms(per_query(lambda q: coll.bm25(q, 15)))}")
    print(f"Lucene bm25_scores (full vector): {_ms(per_query(coll.bm25_scores))}")

    mem = MemoryBackend().open_collection("passages", docs)
    t = time.perf_counter()
    mem.bm25(queries[:1], 15)
    print(f"bm25s index build: {time.perf_counter() - t:.2f} s")
    print(f"bm25s bm25 k=15: {_ms(per_query(lambda q: mem.bm25(q, 15)))}")
    luc, bms = coll.bm25(queries, 15), mem.bm25(queries, 15)
    same = sum(a.ids == b.ids for a, b in zip(luc, bms, strict=True))
    top1 = sum(a.ids[:1] == b.ids[:1] for a, b in zip(luc, bms, strict=True))
    diff = max(abs(x - y) for a, b in zip(luc, bms, strict=True) for x, y in zip(a.scores, b.scores, strict=False))
    print(f"memory (bm25s lucene) vs Lucene: identical top-15 {same}/100, same top-1 {top1}/100, "
          f"max |score diff| at equal ranks {diff:.4g}")


if __name__ == "__main__":
    main()
