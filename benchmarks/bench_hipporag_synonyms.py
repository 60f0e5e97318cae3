#!/usr/bin/env python
"""HippoRAG v1 sensitivity to the synonym threshold and the no-entity fallback: R@5/10/15, synonym
edges and the share of phrases with a synonym at ``hipporag.synonym_threshold`` 0.8 / 0.85 / 0.9, each under
``hipporag.no_entity_fallback`` uniform (v1, ``hipporag.py`` 232-233) and retriever (the run's base retriever),
on the MuSiQue sample.

The reference scored synonyms with ColBERTv2's self-normalised MaxSim or Contriever's cosine at 0.8
(HippoRAG legacy ``create_graph.py``, ``setup_hipporag_main_exps.sh``); ours scores them with the run's
embedder (``hipporag.encoder``), whose cosine is on another scale, so the same number admits a different
number of edges. This script shows how much that moves recall.

The query NER comes from one of:
  --ner FILE   cached entities, JSON lines ``{"question": ..., "named_entities": [...]}`` (``id`` optional);
               no LLM is called, a question missing from the file counts as "no entity";
  (no --ner)   the run's LLM through the harness (reply cache included): pass Hydra overrides after ``--``,
               e.g. ``-- llm=openai llm.model=gpt-4o-mini``; ``--write-ner FILE`` keeps the entities for later.

  python -m benchmarks.bench_hipporag_synonyms --ner outputs/ner/musique_sample.jsonl
  python -m benchmarks.bench_hipporag_synonyms --write-ner outputs/ner/musique_sample.jsonl -- llm=openai
Writes outputs/bench/hipporag_synonyms.json and prints a Markdown table.

``--scale`` measures the synonym kNN and PPR at full size instead, on synthetic data (no model, no LLM; docs/scale.md
"HippoRAG at full size"): exact (all pairs) against ann (faiss k-means cells, ``hipporag.synonym_search``) on
clustered unit vectors (384-d float32) at growing sizes, each in its own process (its peak RSS), with the recall
of the ann entries against the exact ones (all rows up to ``--exact-max`` phrases, else ``--check-rows`` sampled
rows, whose exact time also gives the all-pairs time by proportion); then PPR per query on a random phrase graph of
MuSiQue's full size (phrases, passages and 1.51M triples; synonym edges between phrases of one cluster):

  nice -n 10 python -m benchmarks.bench_hipporag_synonyms --scale --sizes 50000 200000 1000000
Writes outputs/bench/hipporag_scale.json and prints Markdown tables.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import resource
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
THRESHOLDS = (0.8, 0.85, 0.9)
FALLBACKS = ("uniform", "retriever")
_QUESTION = re.compile(r"Question: (.*)\s*$", re.DOTALL)


class CachedNER:
    """LLM stand-in for the ``ner`` stage only: the cached entities of the question in the prompt."""

    model = "cached-ner"
    concurrency = 1  # the LLM role's attributes (gear_repro/llm/base.py)
    context_window = None
    default_params: dict[str, Any] = {}

    def __init__(self, entities: dict[str, list[str]]) -> None:
        from gear_repro.llm import TokenLedger

        self.entities = entities
        self.ledger = TokenLedger()
        self.calls = 0

    def check_ready(self) -> None:
        """Nothing to start: the entities are read from the file."""

    def check_params(self, params: Mapping[str, Any], key: str) -> None:
        """The entities are read from the file: params are not used."""

    def stats(self) -> dict[str, Any]:
        return {"calls": self.calls, "cache_hits": self.calls, "cache_misses": 0, "retries": 0, "failures": 0}

    def close(self) -> None:
        """Nothing to stop."""

    def chat(self, messages: Sequence[dict], *, stage: str, **_: Any):
        from gear_repro.llm import LLMReply

        if stage != "ner":
            raise RuntimeError(f"--ner answers the query NER only, not stage '{stage}'")
        self.calls += 1
        m = _QUESTION.search(str(messages[-1]["content"]))
        ents = self.entities.get(m.group(1).strip() if m else "", [])
        return LLMReply(text=json.dumps({"named_entities": ents}), prompt_tokens=0, completion_tokens=0,
                        cached=True, latency_s=0.0, model=self.model)


def load_ner(path: Path) -> dict[str, list[str]]:
    """Question text -> entities from a JSON-lines file."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            out[str(row["question"]).strip()] = [str(e) for e in row.get("named_entities", [])]
    return out


def run_threshold(threshold: float, fallback: str, overrides: list[str], run_dir: Path,
                  ner: dict[str, list[str]] | None) -> dict:
    """One HippoRAG run at ``threshold`` and ``fallback``: metrics and the graph's synonym statistics."""
    from hydra import compose, initialize_config_dir

    from gear_repro.config import register_configs, validate
    from gear_repro.pipeline.resources import Resources
    from gear_repro.pipeline.runner import Runner
    from gear_repro.utils.paths import config_dir

    register_configs()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = compose("config", overrides=["agent=hipporag", "run.progress=false", "run.resume=false",
                                           f"hipporag.synonym_threshold={threshold}",
                                           f"hipporag.no_entity_fallback={fallback}", *overrides])
    cfg = validate(cfg)
    res = Resources(cfg) if ner is None else Resources(cfg, llm=CachedNER(ner))
    metrics = Runner(cfg, run_dir, resources=res).run()
    graph = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["hipporag"]["graph"]
    stats = metrics.get("agent_stats", {})
    return {"threshold": threshold, "fallback": fallback, **{f"R@{k}": metrics[f"recall@{k}"] for k in (5, 10, 15)},
            "synonym_edges": graph["synonym_edges"], "synonym_entries": graph["synonym_entries"],
            "synonym_phrase_share": graph["synonym_phrase_share"], "phrases": graph["phrases"],
            "no_entity_rate": stats.get("hipporag_no_entity_rate"), "n_questions": metrics["n_questions"]}


def write_ner(run_dir: Path, path: Path) -> None:
    """The entities the LLM named in ``run_dir``'s predictions, as a ``--ner`` file."""
    rows = [json.loads(x) for x in (run_dir / "predictions.jsonl").read_text(encoding="utf-8").splitlines() if x]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"id": r["id"], "question": r["question"],
                                        "named_entities": (r.get("trace") or {}).get("entities", [])}) + "\n"
                            for r in rows), encoding="utf-8")


def table(rows: list[dict]) -> str:
    lines = ["| threshold | no-entity fallback | R@5 | R@10 | R@15 | synonym edges | phrases with a synonym "
             "| no-entity rate |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        rate = "–" if r["no_entity_rate"] is None else f"{100 * r['no_entity_rate']:.1f}%"
        lines.append(f"| {r['threshold']} | {r['fallback']} | {r['R@5']:.1f} | {r['R@10']:.1f} | {r['R@15']:.1f} | "
                     f"{r['synonym_edges']:,} | {100 * r['synonym_phrase_share']:.1f}% of {r['phrases']:,} | {rate} |")
    return "\n".join(lines)


def clustered_unit_vectors(n: int, dim: int = 384, mean_cluster: int = 8, spread: float = 0.45,
                           seed: int = 0) -> np.ndarray:
    """``n`` L2-normalised float32 rows around ``n / mean_cluster`` random centres: two rows of a cluster have a
    cosine near 1 / (1 + spread^2) (0.83 at 0.45), so about half of a cluster's pairs pass 0.8, as synonyms would;
    rows of different clusters are near-orthogonal."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(1, n // mean_cluster), dim), dtype=np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    out = np.empty((n, dim), dtype=np.float32)
    for a in range(0, n, 65_536):  # bounded temporaries at a million rows
        m = min(n, a + 65_536) - a
        x = centres[rng.integers(0, len(centres), m)] + (spread / np.sqrt(dim)) * rng.standard_normal((m, dim), dtype=np.float32)
        out[a:a + m] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: KiB


def synonym_case(n: int, search: str, dim: int, check_rows: int, exact_max: int, nprobe: int) -> dict:
    """One size, one search (run in a fresh process: its peak RSS is this case's). ``ann`` also checks its entries
    against the exact search (all rows when n <= exact_max, else ``check_rows`` sampled rows)."""
    from gear_repro.methods.hipporag.phrase_graph import ann_synonym_pairs, synonym_pairs

    v = clustered_unit_vectors(n, dim)
    t = time.perf_counter()
    if search == "exact":
        found = synonym_pairs(v, 0.8, 100)
        return {"n": n, "search": "exact", "s": round(time.perf_counter() - t, 2), "entries": len(found),
                "peak_rss_gib": round(peak_rss_gib(), 2)}
    found = ann_synonym_pairs(v, 0.8, 100, nprobe=nprobe)
    row = {"n": n, "search": f"ann (nprobe {nprobe})", "s": round(time.perf_counter() - t, 2), "entries": len(found),
           "peak_rss_gib": round(peak_rss_gib(), 2)}
    rows = np.ones(n, bool) if n <= exact_max else np.zeros(n, bool)
    if n > exact_max:
        rows[np.random.default_rng(1).choice(n, check_rows, replace=False)] = True
    t = time.perf_counter()
    exact = synonym_pairs(v, 0.8, 100, rows)
    exact_s = time.perf_counter() - t
    got = {(i, j): s for i, j, s in found if rows[i]}
    hit = sum((i, j) in got for i, j, _ in exact)
    row.update(recall=round(hit / max(1, len(exact)), 5), checked_rows=int(rows.sum()), checked_entries=len(exact),
               # the two searches' products differ in shape: a kernel may round a cosine differently in the last bit
               max_weight_diff=max((abs(got[i, j] - s) for i, j, s in exact if (i, j) in got), default=0.0),
               exact_s_estimate=round(exact_s * n / rows.sum(), 1))
    return row


def ppr_case(n_phrases: int, n_passages: int, n_triples: int, queries: int, seed: int = 0) -> dict:
    """PPR per query (igraph prpack, as ``PhraseGraph.personalized_pagerank``) plus the passage scores, on a random
    v1 graph: triples between phrases drawn with a skewed degree (a few hubs), 1-3 synonym edges for half of the
    phrases, triples spread over the passages; each query seeds 1-3 random phrases with weight 1/|P_i|."""
    import scipy.sparse as sp

    from gear_repro.methods.hipporag.phrase_graph import PhraseGraph

    rng = np.random.default_rng(seed)
    t = time.perf_counter()
    # subjects skewed to low ids (cube of a uniform: a few hubs, as corpus-wide entities), objects uniform
    h = np.minimum((n_phrases * rng.random(n_triples) ** 3).astype(np.int64), n_phrases - 1)
    o = rng.integers(0, n_phrases, n_triples)
    syn_a = rng.choice(n_phrases, n_phrases // 2, replace=False).repeat(2)
    syn_b = np.minimum(syn_a + rng.integers(1, 4, len(syn_a)), n_phrases - 1)
    a, b = np.concatenate([h, syn_a]), np.concatenate([o, syn_b])
    w = np.concatenate([np.full(n_triples, 2.0), 0.8 + 0.2 * rng.random(len(syn_a))])
    keep = a != b
    und = sp.coo_matrix((w[keep], (np.minimum(a, b)[keep], np.maximum(a, b)[keep])), shape=(n_phrases, n_phrases)).tocsr()
    und.sum_duplicates()
    coo = und.tocoo()
    passage = rng.integers(0, n_passages, n_triples)
    m = sp.csr_matrix((np.ones(2 * n_triples), (np.concatenate([passage, passage]), np.concatenate([h, o]))),
                      shape=(n_passages, n_phrases))
    g = PhraseGraph(phrases=[str(i) for i in range(n_phrases)], passage_ids=[str(i) for i in range(n_passages)],
                    edges=np.stack([coo.row, coo.col], axis=1).astype(np.int64), weights=coo.data, passage_phrase=m)
    g.igraph()
    build_s = time.perf_counter() - t
    counts = g.node_specificity_counts()
    spec = np.where(counts > 0, 1.0 / np.maximum(counts, 1), 1.0)
    times = []
    for _ in range(queries):
        reset = np.zeros(n_phrases)
        seeds = rng.choice(n_phrases, int(rng.integers(1, 4)), replace=False)
        reset[seeds] = spec[seeds]
        t = time.perf_counter()
        ppr = g.personalized_pagerank(reset, 0.5)
        np.asarray(g.passage_phrase @ ppr).ravel()
        times.append(time.perf_counter() - t)
    return {"phrases": n_phrases, "passages": n_passages, "triples": n_triples, "edges": len(g.edges),
            "graph_build_s": round(build_s, 1), "queries": queries, "ppr_p50_s": round(float(np.median(times)), 3),
            "ppr_max_s": round(max(times), 3), "peak_rss_gib": round(peak_rss_gib(), 2)}


def in_process(fn: Any, *args: Any) -> dict:
    """``fn(*args)`` in a fresh process (spawned: its peak RSS is its own)."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as ex:
        return ex.submit(fn, *args).result()


def scale_tables(res: dict) -> str:
    lines = [] if not res["synonyms"] else ["| phrases | search | time s | entries | recall vs exact (rows checked) | max weight diff | exact s "
             "(all pairs; * = from the checked rows) | peak RSS GiB |", "|---|---|---|---|---|---|---|---|"]
    for r in res["synonyms"]:
        if "recall" in r:
            est = "" if r["checked_rows"] == r["n"] else "*"
            lines.append(f"| {r['n']:,} | {r['search']} | {r['s']} | {r['entries']:,} | {r['recall']:.4f} "
                         f"({r['checked_rows']:,}) | {r['max_weight_diff']:.1g} | {r['exact_s_estimate']}{est} | "
                         f"{r['peak_rss_gib']} |")
        else:
            lines.append(f"| {r['n']:,} | exact | {r['s']} | {r['entries']:,} | 1 | – | {r['s']} | "
                         f"{r['peak_rss_gib']} |")
    p = res.get("ppr")
    if p:
        lines += ["", "| phrases | passages | triples | edges | graph build s | PPR p50 s (max) per query | peak RSS GiB |",
                  "|---|---|---|---|---|---|---|",
                  f"| {p['phrases']:,} | {p['passages']:,} | {p['triples']:,} | {p['edges']:,} | {p['graph_build_s']} "
                  f"| {p['ppr_p50_s']} ({p['ppr_max_s']}) over {p['queries']} | {p['peak_rss_gib']} |"]
    return "\n".join(lines)


def scale(a: argparse.Namespace) -> dict:
    """The ``--scale`` run: synonym kNN at each size, then PPR at MuSiQue's size."""
    res: dict[str, Any] = {"dim": a.dim, "synonyms": [], "ppr": None}
    for n in a.sizes:
        if n <= a.exact_max:
            res["synonyms"].append(in_process(synonym_case, n, "exact", a.dim, a.check_rows, a.exact_max, a.nprobe))
            print(res["synonyms"][-1], file=sys.stderr, flush=True)
        res["synonyms"].append(in_process(synonym_case, n, "ann", a.dim, a.check_rows, a.exact_max, a.nprobe))
        print(res["synonyms"][-1], file=sys.stderr, flush=True)
    if a.ppr_phrases:
        res["ppr"] = in_process(ppr_case, a.ppr_phrases, a.ppr_passages, a.ppr_triples, a.ppr_queries)
    return res


def main(argv: Sequence[str] | None = None) -> list[dict]:
    argv = list(sys.argv[1:] if argv is None else argv)
    overrides = argv[argv.index("--") + 1:] if "--" in argv else []
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ner", type=Path, help="cached query entities (JSON lines); no LLM call")
    ap.add_argument("--write-ner", type=Path, help="with the LLM: save its entities here")
    ap.add_argument("--thresholds", type=float, nargs="+", default=list(THRESHOLDS))
    ap.add_argument("--fallbacks", nargs="+", default=list(FALLBACKS), choices=FALLBACKS)
    ap.add_argument("--out", type=Path, default=REPO / "outputs" / "bench" / "hipporag_synonyms.json")
    ap.add_argument("--run-root", type=Path, default=REPO / "outputs" / "bench" / "hipporag_synonyms")
    ap.add_argument("--scale", action="store_true", help="synthetic full-size synonym kNN and PPR (module docstring)")
    ap.add_argument("--sizes", type=int, nargs="*", default=[50_000, 200_000, 1_000_000])
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--nprobe", type=int, default=64, help="hipporag.synonym_nprobe of the ann rows")
    ap.add_argument("--exact-max", type=int, default=50_000, help="largest size searched exactly in full")
    ap.add_argument("--check-rows", type=int, default=2_000, help="sampled rows checked exactly above --exact-max")
    ap.add_argument("--ppr-phrases", type=int, default=1_000_000, help="0 = no PPR case")
    ap.add_argument("--ppr-passages", type=int, default=148_793)
    ap.add_argument("--ppr-triples", type=int, default=1_514_009)
    ap.add_argument("--ppr-queries", type=int, default=20)
    a = ap.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if a.scale:
        res = scale(a)
        out = a.out.with_name("hipporag_scale.json") if a.out == ap.get_default("out") else a.out
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(res, indent=2))
        print(scale_tables(res))
        return res["synonyms"]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    ner = load_ner(a.ner) if a.ner else None
    base = ["dataset=musique_sample", "embedder=minilm", *overrides]
    rows = []
    grid = [(thr, fb) for thr in a.thresholds for fb in a.fallbacks]
    for i, (thr, fb) in enumerate(grid):
        run_dir = a.run_root / f"threshold_{thr}_{fb}"
        rows.append(run_threshold(thr, fb, base, run_dir, ner))
        if i == 0 and a.write_ner and ner is None:
            write_ner(run_dir, a.write_ner)
            ner = load_ner(a.write_ner)  # the same entities for every threshold
        print(rows[-1], file=sys.stderr)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"overrides": base, "ner": str(a.ner) if a.ner else "llm", "rows": rows}, indent=2))
    print(table(rows))
    return rows


if __name__ == "__main__":
    main()
