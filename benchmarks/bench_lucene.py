#!/usr/bin/env python
"""BM25 of the memory backend against the real Lucene (``backend=lucene``), in one run (not a test): index build
(cold: a fresh $GEAR_CACHE), reopening the cached index, BM25 query latency p50/p95 (k=15, one query a call, the
two backends alternating query by query so that a drift of the machine's speed hits both), the full score vectors
of ``bm25_scores`` (GRIEVER's filtered search; the first 20 queries), how many top-15 rankings are identical, and the earlier analysis
(``tokenizer=word2 method=bm25s_lucene``) beside them; with ``--es`` also ``backend=elasticsearch`` (standard analyzer)
on a cluster (``--es-url``) or the noida-db emulator the tests use, for the three-way check (rankings only: the
emulator's timings are not Elasticsearch's).

  python -m benchmarks.bench_lucene [--data DIR] [--queries N] [--repeats R] [--es [--es-url URL]]

``--data`` is a prepared dataset folder (default the bundled MuSiQue sample; the full-size corpus of
``make fullsize-rehearsal`` is ``outputs/fullsize/prepared``).
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
    ap.add_argument("--data", type=Path, default=SAMPLE)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--es", action="store_true", help="also rank with backend=elasticsearch")
    ap.add_argument("--es-url", default=None, help="a running cluster (default: spawn the noida-db emulator)")
    args = ap.parse_args()

    from gear_repro.backends import lucene as L

    os.environ.setdefault(L.JAR_ENV, str(L.find_jar()))  # found in the real $GEAR_CACHE before it is swapped
    os.environ["GEAR_CACHE"] = tempfile.mkdtemp(prefix="bench_lucene_")

    from gear_repro.backends.base import IndexDoc
    from gear_repro.backends.memory import MemoryBackend
    from gear_repro.data.dataset import load_dataset

    ds = load_dataset(args.data, name="musique")
    docs = [IndexDoc(p.id, p.content) for p in ds.passages]
    queries = [q.question for q in ds.questions][: args.queries]
    print(f"{args.data}: {len(docs):,} passages, {len(queries)} queries x {args.repeats}")

    t = time.perf_counter()
    lucene = L.LuceneBackend()
    print(f"JVM start + Lucene {lucene.version}: {time.perf_counter() - t:.2f} s")
    backends = {"memory": MemoryBackend(), "lucene": lucene,
                "memory word2+bm25s": MemoryBackend(bm25={"tokenizer": "word2", "method": "bm25s_lucene"})}
    colls = {}
    for name, backend in backends.items():
        t = time.perf_counter()
        colls[name] = backend.open_collection("passages", docs)
        colls[name].bm25(queries[:1], 15)
        build = time.perf_counter() - t
        t = time.perf_counter()
        backend.open_collection("passages", docs).bm25(queries[:1], 15)
        print(f"{name}: index build {build:.2f} s, reopen cached {time.perf_counter() - t:.3f} s")

    times: dict[str, list[float]] = {n: [] for n in colls}
    for _ in range(args.repeats):
        for q in queries:
            for name, coll in colls.items():
                t = time.perf_counter()
                coll.bm25([q], 15)
                times[name].append(time.perf_counter() - t)
    scores: dict[str, list[float]] = {n: [] for n in ("memory", "lucene")}
    for q in queries[:20]:  # Lucene hands every hit over JNI: seconds a query on a large corpus
        for name in scores:
            t = time.perf_counter()
            colls[name].bm25_scores([q])
            scores[name].append(time.perf_counter() - t)
    for name in colls:
        print(f"{name} bm25 k=15: {_ms(times[name])}")
    for name in scores:
        print(f"{name} bm25_scores (full vector): {_ms(scores[name])}")
    ratio = np.asarray(times["memory"]) / np.asarray(times["lucene"])
    print(f"memory / lucene query time, pair by pair: median {np.median(ratio):.2f}")
    ranked = {n: c.bm25(queries, 15) for n, c in colls.items()}
    if args.es:
        ranked["elasticsearch"] = _es_rankings(args.es_url, docs, queries)
    for other in [n for n in ranked if n != "lucene"]:
        same = sum(a.ids == b.ids for a, b in zip(ranked[other], ranked["lucene"], strict=True))
        exact = sum((a.ids, a.scores) == (b.ids, b.scores) for a, b in zip(ranked[other], ranked["lucene"], strict=True))
        print(f"{other} vs lucene: identical top-15 ids {same}/{len(queries)}, ids and scores {exact}/{len(queries)}")


def _es_rankings(url: str | None, docs, queries: list[str]):
    """Top-15 of ``backend=elasticsearch`` with ES's standard analyzer, on ``url`` or a spawned emulator."""
    import uuid

    from gear_repro.backends.elasticsearch import ElasticsearchBackend

    server = None
    if url is None:
        from tests.helpers.es_fixtures import NoidaServer

        server = NoidaServer(Path(tempfile.mkdtemp(prefix="bench-noida-")))
        url = server.start()
    try:
        be = ElasticsearchBackend(url=url, index_prefix=f"gear-bench-{uuid.uuid4().hex[:6]}",
                                  bm25={"analyzer": "standard"}, bulk={"progress": False})
        print(f"elasticsearch at {url} ({'a real cluster' if server is None else 'the noida-db emulator'})")
        return be.open_collection("passages", docs).bm25(queries, 15)
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
