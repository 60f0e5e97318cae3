"""Benchmark NaiveGE (GEAR §6.3, Alg. 1 with the paper's l=2, b=10, 100 neighbours, γ=20) on this CPU:
the scorer × base-retriever table (R@k and latency) with the ratio to the hybrid retriever's p50 of the same run.

Protocol (matched k as Table 2: base k = the evaluated rank, three passes k = 5, 10, 15 per question):
  * before every pass the embedder's query cache is emptied, so each pass encodes q (base retrievers and
    NaiveGE alike; the hybrid p50 is the per-pass time of BM25 + SBERT + RRF with a cold q);
  * the ``fast`` scorer's per-text path memo is emptied at the start of every question and shared by its
    three k-passes (as in a run: the runner calls the method once per k for a question);
  * the ``exact`` scorer reads and writes the on-disk path-vector store (``path_cache``), so its recall is
    exact but its latency is not cold (its cold cost: ~4 s/question with mpnet, docs/graph_expansion.md);
    ``--exact-cold`` measures it cold instead.
Per pass: total = base retrieval + expansion; p50/p95 over all questions; parts (init/gather/score/fusion)
in the JSON.

    python -m benchmarks.bench_expansion                                   # bm25, sbert, hybrid × exact, fast
    python -m benchmarks.bench_expansion --limit 20 --bases hybrid --scorers exact fast mean
    python -m benchmarks.bench_expansion --embedder minilm --out bench_expansion.json
    python -m benchmarks.bench_expansion --scorers exact fast fast:rescore=20,margin=0.05   # scorer options
    python -m benchmarks.bench_expansion --exact-cold --scorers exact exact:batch_size=null   # batched vs one at a time
    python -m benchmarks.bench_expansion --embedder minilm --precision bf16                  # embedder.precision
    python -m benchmarks.bench_expansion --exact-cold --scorers exact --floor   # + the pass's matrix-product floor

``--floor``: the least time any exact encoding of a pass's paths can take on this machine, measured in
the same process: the word pieces the pass encoded (the embedder's ``fixed_tokens``, no padding) × the
multiply-adds of the encoder's linear layers per token (2 × in × out summed over them), at the rate those same
linear layers reach in the embedder's precision on a 192-token input (8 rows × 24, the exact scorer's usual pass;
best of 5, the run's clock). Attention, layer norms, padding and framework overhead come on top, so "floor ×
hybrid" (the base retrieval + that floor, against the hybrid p50) bounds what a faster implementation could reach.

Uses all-mpnet-base-v2 (the paper's) when $GEAR_CACHE/models/all-mpnet-base-v2 exists, else
all-MiniLM-L6-v2, and says which.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parent.parent

from gear_repro.backends.base import IndexDoc  # noqa: E402
from gear_repro.backends.memory import MemoryBackend  # noqa: E402
from gear_repro.core.triple_graph import TripleIndex, triple_docs  # noqa: E402
from gear_repro.data import load_dataset  # noqa: E402
from gear_repro.embedding import SentenceEmbedder  # noqa: E402
from gear_repro.embedding.sbert_weights import MINILM, MPNET, resolve_model  # noqa: E402
from gear_repro.evaluation.metrics import recall_at_k  # noqa: E402
from gear_repro.methods.gear.expansion import NaiveGE  # noqa: E402
from gear_repro.retrieval.base import BM25Retriever, DenseRetriever, HybridRetriever  # noqa: E402

RETRIEVERS = {"bm25": BM25Retriever, "sbert": DenseRetriever, "hybrid": HybridRetriever}


def pick_embedder(choice: str) -> str:
    if choice == "mpnet":
        return MPNET
    if choice == "minilm":
        return MINILM
    if choice != "auto":
        return choice  # a local sentence-transformers folder
    return MPNET if resolve_model(MPNET) != MPNET else MINILM


def linear_floor(emb, clock, tokens: int = 192, repeats: int = 5) -> tuple[float, float]:
    """(FLOPs per token of the encoder's linear layers, their FLOP/s on a ``tokens``-row input in the embedder's
    precision, best of ``repeats`` on ``clock``): the matrix products a token costs and how fast this core runs
    them (PackedLinear under bf16 has the same in/out features)."""
    import torch

    layers = [m for m in emb.model[0].auto_model.encoder.modules() if hasattr(m, "in_features")
              and hasattr(m, "out_features") and not list(m.children())]
    per_token = 2.0 * sum(m.in_features * m.out_features for m in layers)
    gen = torch.Generator().manual_seed(0)
    inputs = {m.in_features: torch.randn(tokens, m.in_features, generator=gen) for m in layers}
    best = float("inf")
    with torch.inference_mode(), emb.autocast():
        for m in layers:  # warm-up: oneDNN primitives are created on first use
            m(inputs[m.in_features])
        for _ in range(repeats):
            t = clock()
            for m in layers:
                m(inputs[m.in_features])
            best = min(best, clock() - t)
    return per_token, per_token * tokens / best


def pct(xs: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(xs) * 1000.0, p)) if xs else float("nan")


def scorer_beam(spec: str, a: argparse.Namespace) -> dict:
    """Beam settings for a scorer spec: a name, or ``name:key=value,...`` (scorer options, e.g.
    ``fast:rescore=20,margin=0.05``; ``null`` = None)."""
    name, _, rest = spec.partition(":")
    opts: dict = {"batch_size": a.batch_size} if a.batch_size and name in ("exact", "fast") else {}
    for kv in filter(None, rest.split(",")):
        key, _, val = kv.partition("=")
        opts[key] = (None if val == "null" else float(val) if "." in val else int(val) if val.lstrip("-").isdigit()
                     else val)
    return {"scorer": name, "scorer_options": opts, "path_cache": name == "exact" and not a.exact_cold}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(REPO / "data" / "musique_sample"))
    ap.add_argument("--limit", type=int, default=None, help="first N questions (default all)")
    ap.add_argument("--ks", type=int, nargs="+", default=[5, 10, 15], help="evaluated ranks = base k")
    ap.add_argument("--bases", nargs="+", default=["bm25", "sbert", "hybrid"], choices=sorted(RETRIEVERS))
    ap.add_argument("--scorers", nargs="+", default=["exact", "fast"])
    ap.add_argument("--embedder", default="auto", help="auto | mpnet | minilm | a local sentence-transformers folder")
    ap.add_argument("--precision", choices=["fp32", "bf16", "auto"], default="fp32", help="embedder.precision")
    ap.add_argument("--query-precision", choices=["fp32", "same"], default="fp32", help="embedder.query_precision")
    ap.add_argument("--batch-size", type=int, default=None, help="embedder batch size for path encoding")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default torch's)")
    ap.add_argument("--exact-cold", action="store_true", help="exact scorer without the disk path store")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="cpu: the process's CPU time (with --threads 1, what an idle core takes on a shared machine)")
    ap.add_argument("--floor", action="store_true",
                    help="also the exact passes' matrix-product floor (linear layers at this core's measured rate)")
    ap.add_argument("--out", default=None, help="write the figures as JSON here")
    a = ap.parse_args()
    clock = time.process_time if a.clock == "cpu" else time.perf_counter

    ds = load_dataset(a.data, limit=a.limit)
    model = pick_embedder(a.embedder)
    emb = SentenceEmbedder(model=model, show_progress=False, num_threads=a.threads, precision=a.precision,
                           query_precision=a.query_precision)
    print(f"embedder: {model} ({resolve_model(model)}), precision {emb.precision_used}, queries "
          f"{emb.queries.precision_used}", flush=True)
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
    retrievers = {b: RETRIEVERS[b](pcoll, emb) for b in sorted(set(a.bases) | {"hybrid"})}
    questions = [q for q in ds.questions if q.gold_ids]
    retrievers["hybrid"].retrieve("warm up the model", 5)
    expansions = {sc: NaiveGE(index, emb, beam=scorer_beam(sc, a)) for sc in a.scorers}
    floor = linear_floor(emb, clock) if a.floor else None
    if floor:
        print(f"linear layers: {floor[0] / 1e6:.1f} MFLOP per token, {floor[1] / 1e9:.1f} GFLOP/s on this core "
              f"({emb.precision_used.value}, {a.clock} clock)", flush=True)

    report: dict = {"embedder": model, "precision": emb.precision_used.value,
                    "query_precision": emb.queries.precision_used.value, "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                    "load_avg_start": os.getloadavg(), "questions": len(questions), "ks": a.ks,
                    "index_build_s": round(build_s, 2), "exact_cold": a.exact_cold, "clock": a.clock, "base": {}, "naive": {}}
    if floor:
        report["linear_flops_per_token"], report["linear_flops_per_s"] = floor
    times: dict[tuple, list[float]] = defaultdict(list)
    parts: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    recall: dict[tuple, list[float]] = defaultdict(list)
    counts: dict[tuple, list[float]] = defaultdict(list)
    for i, q in enumerate(questions):
        for b in sorted(retrievers):  # the base retrievers alone
            for k in a.ks:
                emb.forget()
                t = clock()
                r = retrievers[b].retrieve(q.question, k)
                times[(b, k)].append(clock() - t)
                recall[(b, k)].append(recall_at_k(r.ids, q.gold_ids, k))
        for sc, ge in expansions.items():
            for b in a.bases:
                if hasattr(ge.scorer, "clear"):
                    ge.scorer.clear()  # a cold question; its k-passes share the path memo
                for k in a.ks:
                    emb.forget()
                    stats = dict(getattr(ge.scorer, "stats", {}))
                    tokens = emb.stats["fixed_tokens"], emb.stats["fixed_slots"]
                    t = clock()
                    base = retrievers[b].retrieve(q.question, k)
                    tb = clock() - t
                    out = ge.expand(q.question, base)
                    key = (sc, b, k)
                    times[key].append(clock() - t)
                    tm = out.trace["timings"]
                    for p, v in (("base", tb), ("init", tm["initial_s"]), ("gather", tm["gather_s"]),
                                 ("score", tm["score_s"]), ("fusion", tm["fusion_s"])):
                        parts[key][p].append(v)
                    recall[key].append(recall_at_k(out.ranking.ids, q.gold_ids, k))
                    counts[key].append(out.trace["counters"].get("candidates", 0))
                    now = getattr(ge.scorer, "stats", {})
                    counts[key + ("encoded",)].append(now.get("paths_encoded", 0) - stats.get("paths_encoded", 0))
                    real = emb.stats["fixed_tokens"] - tokens[0]
                    counts[key + ("tokens",)].append(real)
                    counts[key + ("slots",)].append(emb.stats["fixed_slots"] - tokens[1])
                    if floor:  # the base retrieval as measured + the least time the pass's encoding can take
                        times[key + ("floor",)].append(tb + real * floor[0] / floor[1])
        if (i + 1) % 10 == 0:
            print(f"  {i + 1}/{len(questions)} questions", flush=True)
            if i + 1 < len(questions):  # a partial table, so a slow run still reports
                summarise(report, a, retrievers, times, parts, recall, counts, i + 1)
    summarise(report, a, retrievers, times, parts, recall, counts, len(questions))


def summarise(report: dict, a: argparse.Namespace, retrievers: dict, times: dict, parts: dict, recall: dict,
              counts: dict, done: int) -> None:
    """Print the scorer × base table over the first ``done`` questions and write the JSON (``--out``)."""
    model = report["embedder"]
    report["questions_done"] = done
    report["load_avg_end"] = os.getloadavg()
    for b in sorted(retrievers):
        report["base"][b] = {k: {"recall": 100 * float(np.mean(recall[(b, k)])), "p50_ms": pct(times[(b, k)], 50),
                                 "p95_ms": pct(times[(b, k)], 95)} for k in a.ks}
    for sc in a.scorers:
        report["naive"][sc] = {b: {k: {
            "recall": 100 * float(np.mean(recall[(sc, b, k)])), "p50_ms": pct(times[(sc, b, k)], 50),
            "p95_ms": pct(times[(sc, b, k)], 95), "candidates_mean": float(np.mean(counts[(sc, b, k)])),
            "paths_encoded_mean": float(np.mean(counts[(sc, b, k, "encoded")])),
            "tokens_encoded_mean": float(np.mean(counts[(sc, b, k, "tokens")])),
            "slots_computed_mean": float(np.mean(counts[(sc, b, k, "slots")])),
            **({"floor_p50_ms": pct(times[(sc, b, k, "floor")], 50)} if (sc, b, k, "floor") in times else {}),
            "parts": {p: {"p50_ms": pct(v, 50), "p95_ms": pct(v, 95)} for p, v in parts[(sc, b, k)].items()},
        } for k in a.ks} for b in a.bases}

    hyb = {k: report["base"]["hybrid"][k]["p50_ms"] for k in a.ks}
    print("\nhybrid retriever p50 (this run): " + ", ".join(f"k={k} {hyb[k]:.1f} ms" for k in a.ks))
    ref = "exact" if "exact" in a.scorers else None
    print("\n| base | k | base R@k | " + " | ".join(f"NaiveGE {sc} R@k" for sc in a.scorers)
          + "".join(f" | {sc} − exact" for sc in a.scorers if ref and sc != ref)
          + " | " + " | ".join(f"{sc} p50 / p95 ms (× hybrid p50)" for sc in a.scorers) + " | paths encoded/pass |"
          + (" exact: tokens / slots per pass | exact floor p50 ms (× hybrid p50) |" if "linear_flops_per_s" in report
             and ref else ""))
    n_cols = 3 + len(a.scorers) * 2 + (len(a.scorers) - 1 if ref else 0) + 1 + (2 if "linear_flops_per_s" in report
                                                                                  and ref else 0)
    print("|" + "---|" * n_cols)
    for b in a.bases:
        for k in a.ks:
            rows = {sc: report["naive"][sc][b][k] for sc in a.scorers}
            cells = [b, str(k), f"{report['base'][b][k]['recall']:.1f}"]
            cells += [f"{rows[sc]['recall']:.1f}" for sc in a.scorers]
            if ref:
                cells += [f"{rows[sc]['recall'] - rows[ref]['recall']:+.1f}" for sc in a.scorers if sc != ref]
            cells += [f"{rows[sc]['p50_ms']:.0f} / {rows[sc]['p95_ms']:.0f} ({rows[sc]['p50_ms'] / hyb[k]:.2f}×)"
                      for sc in a.scorers]
            cells.append(" / ".join(f"{sc} {rows[sc]['paths_encoded_mean']:.1f}" for sc in a.scorers))
            if "floor_p50_ms" in rows.get("exact", {}):
                e = rows["exact"]
                cells.append(f"{e['tokens_encoded_mean']:.0f} / {e['slots_computed_mean']:.0f}")
                cells.append(f"{e['floor_p50_ms']:.0f} ({e['floor_p50_ms'] / hyb[k]:.2f}×)")
            print("| " + " | ".join(cells) + " |")
    print(f"\nembedder {model} ({report['precision']}); {a.clock} clock; {done} questions; load average {report['load_avg_start']} -> "
          f"{report['load_avg_end']} on {os.cpu_count()} cores")
    if a.out:
        Path(a.out).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
