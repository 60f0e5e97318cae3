#!/usr/bin/env python
"""GRIEVER Table 1 and Table 3 on one machine in one process (GRIEVER §5.2): R@5/10/15 and per-query
latency of BM25, dense (SBERT), RRF hybrid, composed and GRIEVER, plus GRIEVER's ablations, all on the
memory backend with the same embedder, and GRIEVER's index build time and peak memory.

  python -m benchmarks.bench_griever [--embedder minilm|mpnet] [--dataset data/musique_sample] [--limit N]
                                  [--out outputs/bench/griever_<embedder>.json]

Latency: wall time of ``retrieve(question, k)`` per question, query encoding included (the embedders'
query caches are emptied before each timed pass; one warm-up query per retriever loads the model).
Recall: per question |gold ∩ top-k| / |gold|, x100 (DESIGN.md). The retriever is called with k = the
evaluated rank (Table 1: "R@k" with "ms@k"). Prints a Markdown table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
EMBEDDERS = {"mpnet": "all-mpnet-base-v2", "minilm": "all-MiniLM-L6-v2"}
ABLATIONS = {  # GRIEVER Table 3 rows (+ our final-ranking variant)
    "GRIEVER w/ full_triples": {"shortlist_index": "full"},
    "GRIEVER w/o shortlisting": {"shortlist": False},
    "GRIEVER w/o composed_retriever": {"composed": False},
    "GRIEVER final=rrf (ours)": {"final": "rrf"},
}


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--embedder", default="minilm", choices=sorted(EMBEDDERS))
    ap.add_argument("--dataset", default=str(REPO / "data" / "musique_sample"))
    ap.add_argument("--limit", type=int, default=None, help="first N questions (default all)")
    ap.add_argument("--ks", type=int, nargs="+", default=[5, 10, 15])
    ap.add_argument("--threads", type=int, default=1, help="torch threads of the embedder (default 1)")
    ap.add_argument("--no-ablations", action="store_true")
    ap.add_argument("--unit-vectors", default="encode", choices=["encode", "compose"],
                    help="GRIEVER unit embeddings: encode the unit texts (paper) or compose name vectors")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from gear_repro.backends.base import IndexDoc
    from gear_repro.backends.memory import MemoryBackend
    from gear_repro.data import load_dataset
    from gear_repro.embedding import SentenceEmbedder
    from gear_repro.evaluation.metrics import recall_at_k
    from gear_repro.methods.griever import GrieverRetriever
    from gear_repro.retrieval import BM25Retriever, ComposedRetriever, DenseRetriever, HybridRetriever

    ds = load_dataset(a.dataset, limit=a.limit)
    qs = ds.questions
    emb = SentenceEmbedder(EMBEDDERS[a.embedder], show_progress=False, num_threads=a.threads)
    backend = MemoryBackend()
    out: dict = {"dataset": str(a.dataset), "embedder": a.embedder, "unit_vectors": a.unit_vectors,
                 "n_questions": len(qs),
                 "passages": len(ds.passages), "triples": len(ds.triples), "rss_start_mb": round(rss_mb(), 1)}
    t = time.perf_counter()
    coll = backend.open_collection("passages", [IndexDoc(p.id, p.content) for p in ds.passages], emb)
    coll.bm25(["warm up"], 1)
    coll.vectors()
    out["passage_index_s"] = round(time.perf_counter() - t, 3)
    out["rss_after_passages_mb"] = round(rss_mb(), 1)

    retrievers = {"BM25": BM25Retriever(coll), "Dense": DenseRetriever(coll, emb),
                  "RRFHybrid": HybridRetriever(coll, emb), "Composed": ComposedRetriever(coll, emb)}
    griever = GrieverRetriever(coll, emb, ds.passages, ds.triples, backend, unit_vectors=a.unit_vectors)
    t = time.perf_counter()
    out["griever_build"] = griever.build()
    out["griever_build_s"] = round(time.perf_counter() - t, 3)
    out["rss_after_griever_mb"] = round(rss_mb(), 1)
    retrievers["GRIEVER"] = griever
    if not a.no_ablations:
        for label, kw in ABLATIONS.items():
            g = GrieverRetriever(coll, emb, ds.passages, ds.triples, backend, unit_vectors=a.unit_vectors, **kw)
            t = time.perf_counter()
            g.build()
            out.setdefault("ablation_build_s", {})[label] = round(time.perf_counter() - t, 3)
            retrievers[label] = g
    rows = {}
    for label, r in retrievers.items():
        r.retrieve("warm up query", a.ks[0])
        row: dict = {}
        for k in a.ks:
            emb.forget()
            if isinstance(r, GrieverRetriever):
                r.matcher._cache.clear()
            ms, rec = [], []
            for q in qs:
                t = time.perf_counter()
                ids = r.retrieve(q.question, k).ids
                ms.append(1000 * (time.perf_counter() - t))
                rec.append(recall_at_k(ids, q.gold_ids, k))
            row[f"R@{k}"] = round(100 * float(np.mean(rec)), 1)
            row[f"ms@{k}"] = {"mean": round(float(np.mean(ms)), 1), "std": round(float(np.std(ms)), 1),
                              "p50": round(float(np.percentile(ms, 50)), 1), "p95": round(float(np.percentile(ms, 95)), 1)}
        rows[label] = row
        print(label, json.dumps(row), flush=True)
    out["rows"] = rows
    out["rss_peak_mb"] = round(rss_mb(), 1)
    k0 = a.ks[0]
    hdr = "| retriever | " + " | ".join(f"R@{k}" for k in a.ks) + f" | ms@{k0} p50 | ms@{k0} p95 | ms@{k0} mean±sd |"
    lines = [hdr, "|" + "---|" * (len(a.ks) + 4)]
    for label, row in rows.items():
        m = row[f"ms@{k0}"]
        lines.append(f"| {label} | " + " | ".join(f"{row[f'R@{k}']:.1f}" for k in a.ks)
                     + f" | {m['p50']:.0f} | {m['p95']:.0f} | {m['mean']:.0f}±{m['std']:.0f} |")
    hy, gr = rows["RRFHybrid"], rows["GRIEVER"]
    out["griever_above_hybrid_every_k"] = all(gr[f"R@{k}"] > hy[f"R@{k}"] for k in a.ks)
    table = "\n".join(lines)
    print(table)
    print(f"GRIEVER above RRF hybrid at every k: {out['griever_above_hybrid_every_k']}; GRIEVER index build "
          f"{out['griever_build_s']} s; peak RSS {out['rss_peak_mb']} MB")
    out["markdown"] = table
    path = Path(a.out or REPO / "outputs" / "bench" / f"griever_{a.embedder}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1), encoding="utf-8")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
