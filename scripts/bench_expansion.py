"""Benchmark NaiveGE (GEAR §6.3, Alg. 1 with the paper's l=2, b=10, 100 neighbours, γ=20) on this CPU.

Per question (embedder query/path caches cleared first, so every query is cold):
  base   hybrid base retrieval h^k(q, C) (BM25 + SBERT, RRF; includes encoding q)
  init   initial triples = triples of the base passages
  query  q vector for the scorer (a cache hit after base retrieval)
  gather neighbour gathering: adjacency, exists-check, relevance cap
  score  scoring/encoding: B0 + path scores, re-weighting, top-b
  fusion RRF(C~_q, C'_q)
p50/p95 of each part and of the total, next to the plain hybrid retriever's p50/p95, and R@k of each
scorer on the sample (base k = the evaluated rank, as Table 2).

    python scripts/bench_expansion.py                       # all 100 questions, k=15, exact + sum
    python scripts/bench_expansion.py --limit 20 --ks 5 10 15 --scorers exact sum mean
    python scripts/bench_expansion.py --embedder minilm --out bench_expansion.json

Uses all-mpnet-base-v2 (the paper's) when $GEAR_CACHE/models/all-mpnet-base-v2 exists, else
all-MiniLM-L6-v2, and says which.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gear_repro.backends.base import IndexDoc  # noqa: E402
from gear_repro.backends.memory import MemoryBackend  # noqa: E402
from gear_repro.data import load_dataset  # noqa: E402
from gear_repro.embedding import SentenceEmbedder  # noqa: E402
from gear_repro.embedding.offline import MINILM, MPNET, resolve_model  # noqa: E402
from gear_repro.evaluation.metrics import recall_at_k  # noqa: E402
from gear_repro.graph.expansion import NaiveGE  # noqa: E402
from gear_repro.graph.triple_index import TripleIndex, triple_docs  # noqa: E402
from gear_repro.retrieval.base import HybridRetriever  # noqa: E402

PARTS = ["base", "init", "query", "gather", "score", "fusion", "total"]


def pick_embedder(choice: str) -> str:
    if choice == "mpnet":
        return MPNET
    if choice == "minilm":
        return MINILM
    return MPNET if resolve_model(MPNET) != MPNET else MINILM


def clear_caches(emb) -> None:
    """Forget memoised query/path vectors, so each question is measured cold."""
    cache = getattr(emb, "_qcache", None)
    if cache is not None:
        cache.clear()


def pct(xs: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(xs) * 1000.0, p)) if xs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(REPO / "data" / "musique_sample"))
    ap.add_argument("--limit", type=int, default=None, help="first N questions (default all)")
    ap.add_argument("--ks", type=int, nargs="+", default=[15], help="evaluated ranks = base k (default 15)")
    ap.add_argument("--scorers", nargs="+", default=["exact", "sum"])
    ap.add_argument("--embedder", choices=["auto", "mpnet", "minilm"], default="auto")
    ap.add_argument("--batch-size", type=int, default=None, help="embedder batch size for path encoding")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default torch's)")
    ap.add_argument("--warm", action="store_true", help="keep query/path caches across questions")
    ap.add_argument("--out", default=None, help="write the figures as JSON here")
    a = ap.parse_args()

    ds = load_dataset(a.data, limit=a.limit)
    model = pick_embedder(a.embedder)
    emb = SentenceEmbedder(model=model, show_progress=False, num_threads=a.threads)
    print(f"embedder: {model} ({resolve_model(model)})", flush=True)
    backend = MemoryBackend()
    t0 = time.perf_counter()
    pcoll = backend.open_collection("passages", [IndexDoc(p.id, p.content) for p in ds.passages], emb)
    pcoll.vectors()
    pcoll.bm25(["warm up"], 1)
    tcoll = backend.open_collection("triples", triple_docs(ds.triples or []), emb)
    tcoll.vectors()
    index = TripleIndex(tcoll, ds.triples)
    build_s = time.perf_counter() - t0
    print(f"indexes ready in {build_s:.1f}s: {len(pcoll)} passages, {len(tcoll)} triples; {index.describe()}",
          flush=True)
    res = SimpleNamespace(dataset=ds, embedder=emb, triple_index=index)
    hybrid = HybridRetriever(pcoll, emb)
    questions = [q for q in ds.questions if q.gold_ids]
    hybrid.retrieve("warm up the model", 5)

    report: dict = {"embedder": model, "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                    "load_avg_start": os.getloadavg(), "questions": len(questions), "ks": a.ks,
                    "index_build_s": round(build_s, 2), "warm": a.warm, "hybrid": {}, "naive": {}}

    # plain hybrid retriever
    for k in a.ks:
        times, rec = [], []
        for q in questions:
            if not a.warm:
                clear_caches(emb)
            t = time.perf_counter()
            r = hybrid.retrieve(q.question, k)
            times.append(time.perf_counter() - t)
            rec.append(recall_at_k(r.ids, q.gold_ids, k))
        report["hybrid"][k] = {"p50_ms": pct(times, 50), "p95_ms": pct(times, 95), "recall": 100 * float(np.mean(rec))}
        print(f"hybrid k={k}: p50 {pct(times, 50):.1f} ms  p95 {pct(times, 95):.1f} ms  R@{k} "
              f"{100 * np.mean(rec):.1f}", flush=True)

    for sc in a.scorers:
        opts = {"batch_size": a.batch_size} if (sc == "exact" and a.batch_size) else {}
        ge = NaiveGE(res, beam={"scorer": sc, "scorer_options": opts})
        report["naive"][sc] = {}
        for k in a.ks:
            parts: dict[str, list[float]] = {p: [] for p in PARTS}
            rec, cands = [], []
            for q in questions:
                if not a.warm:
                    clear_caches(emb)
                t = time.perf_counter()
                base = hybrid.retrieve(q.question, k)
                tb = time.perf_counter() - t
                out = ge.expand(q.question, base)
                total = time.perf_counter() - t
                tm = out.trace["timings"]
                parts["base"].append(tb)
                parts["init"].append(tm["initial_s"])
                parts["query"].append(tm["query_s"])
                parts["gather"].append(tm["gather_s"])
                parts["score"].append(tm["score_s"])
                parts["fusion"].append(tm["fusion_s"])
                parts["total"].append(total)
                rec.append(recall_at_k(out.ranking.ids, q.gold_ids, k))
                cands.append(out.trace["counters"].get("candidates", 0))
            row = {p: {"p50_ms": pct(v, 50), "p95_ms": pct(v, 95)} for p, v in parts.items()}
            row["recall"] = 100 * float(np.mean(rec))
            row["candidates_mean"] = float(np.mean(cands))
            report["naive"][sc][k] = row
            print(f"NaiveGE[{sc}] k={k}: R@{k} {row['recall']:.1f}  candidates/query {row['candidates_mean']:.0f}",
                  flush=True)
            for p in PARTS:
                print(f"    {p:7s} p50 {row[p]['p50_ms']:9.1f} ms   p95 {row[p]['p95_ms']:9.1f} ms", flush=True)
    report["load_avg_end"] = os.getloadavg()

    # summary table
    print("\n| method | k | R@k | p50 ms | p95 ms | p50 / hybrid p50 |")
    print("|---|---|---|---|---|---|")
    for k in a.ks:
        h = report["hybrid"][k]
        print(f"| Hybrid | {k} | {h['recall']:.1f} | {h['p50_ms']:.1f} | {h['p95_ms']:.1f} | 1.0 |")
        for sc in a.scorers:
            r = report["naive"][sc][k]
            print(f"| Hybrid + NaiveGE ({sc}) | {k} | {r['recall']:.1f} | {r['total']['p50_ms']:.1f} | "
                  f"{r['total']['p95_ms']:.1f} | {r['total']['p50_ms'] / h['p50_ms']:.1f} |")
    print(f"\nembedder {model}; {len(questions)} questions; load average {report['load_avg_start']} -> "
          f"{report['load_avg_end']} on {os.cpu_count()} cores")
    if a.out:
        Path(a.out).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
