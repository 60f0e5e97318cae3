#!/usr/bin/env python
"""Benchmark the base retrievers on the memory backend (not a timed test; figures go to the README).

For each corpus (bundled MuSiQue sample; the 2Wiki sample corpus of 6,119 passages) and each base
retriever (BM25, SBERT, hybrid), in a fresh subprocess so peak memory is its own:
  - BM25 index build time (no cache), dense matrix load time (embeddings from the content-hash cache,
    encoded once if absent) and encoding throughput on 128 passages;
  - per-query latency p50/p95 over the dataset's questions (query encoding included), k=15;
  - peak resident memory (ru_maxrss).

  python -m benchmarks.bench_retrieval [--embedder mpnet|minilm] [--datasets musique_sample 2wiki_sample]
Writes outputs/bench/retrieval.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DATASETS = {"musique_sample": REPO / "data" / "musique_sample", "2wiki_sample": REPO / "data" / "prepared" / "2wiki_sample"}
EMBEDDERS = {"mpnet": "all-mpnet-base-v2", "minilm": "all-MiniLM-L6-v2"}


def one(dataset: str, retriever: str, embedder: str) -> dict:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from gear_repro.backends.base import IndexDoc
    from gear_repro.backends.memory import MemoryBackend
    from gear_repro.data import load_dataset
    from gear_repro.embedding import SentenceEmbedder
    from gear_repro.retrieval import BM25Retriever, DenseRetriever, HybridRetriever

    ds = load_dataset(DATASETS[dataset])
    docs = [IndexDoc(p.id, p.content) for p in ds.passages]
    emb = SentenceEmbedder(EMBEDDERS[embedder], show_progress=False)
    out: dict = {"dataset": dataset, "retriever": retriever, "passages": len(docs), "questions": len(ds.questions)}
    coll = MemoryBackend(cache=False).open_collection("passages", docs, emb)
    if retriever in ("bm25", "hybrid"):
        t = time.perf_counter()
        coll.bm25(["warm"], 1)
        out["bm25_build_s"] = time.perf_counter() - t
    if retriever in ("sbert", "hybrid"):
        t = time.perf_counter()
        coll.vectors()
        out["dense_load_s"] = time.perf_counter() - t
        t = time.perf_counter()
        emb._encode([d.text for d in docs[:128]])
        out["encode_passages_per_s"] = 128 / (time.perf_counter() - t)
    cls = {"bm25": BM25Retriever, "sbert": DenseRetriever, "hybrid": HybridRetriever}[retriever]
    r = cls(coll, emb)
    r.retrieve("warm up query", 15)
    lat = []
    for q in ds.questions:
        t = time.perf_counter()
        r.retrieve(q.question, 15)
        lat.append(1000 * (time.perf_counter() - t))
    out["query_ms_p50"] = float(np.percentile(lat, 50))
    out["query_ms_p95"] = float(np.percentile(lat, 95))
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--embedder", default="mpnet", choices=list(EMBEDDERS))
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS))
    ap.add_argument("--retrievers", nargs="+", default=["bm25", "sbert", "hybrid"])
    ap.add_argument("--one", nargs=2, metavar=("DATASET", "RETRIEVER"), help=argparse.SUPPRESS)
    ap.add_argument("--out", default=str(REPO / "outputs" / "bench" / "retrieval.json"))
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a.one[0], a.one[1], a.embedder)))
        return
    rows = []
    for ds in a.datasets:
        if not (DATASETS[ds] / "corpus.jsonl").exists():
            print(f"skip {ds}: {DATASETS[ds]} not prepared (scripts/prepare_samples.sh)", file=sys.stderr)
            continue
        for r in a.retrievers:
            res = subprocess.run([sys.executable, "-m", "benchmarks.bench_retrieval", "--one", ds, r, "--embedder",
                                  a.embedder], capture_output=True, text=True, check=True, cwd=REPO)
            rows.append(json.loads(res.stdout.strip().splitlines()[-1]))
            print(rows[-1], file=sys.stderr)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"embedder": a.embedder, "cpu_count": os.cpu_count(), "rows": rows}, indent=2))
    print("| corpus | retriever | passages | BM25 build s | dense load s | encode p/s | query p50 ms | p95 ms | peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    f = lambda v: "–" if v is None else f"{v:.2f}" if v < 100 else f"{v:.0f}"  # noqa: E731
    for x in rows:
        print(f"| {x['dataset']} | {x['retriever']} | {x['passages']} | {f(x.get('bm25_build_s'))} | "
              f"{f(x.get('dense_load_s'))} | {f(x.get('encode_passages_per_s'))} | {f(x['query_ms_p50'])} | "
              f"{f(x['query_ms_p95'])} | {f(x['peak_rss_mb'])} |")


if __name__ == "__main__":
    main()
