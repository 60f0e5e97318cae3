"""Each method's peak memory on a prepared corpus with synthetic vectors (docs/scale.md, "Every method at 2Wiki's
size").

    python -m benchmarks.bench_method_memory PREPARED --methods hybrid_syncge t2rag --out mem.json \
        [--set backend.dense_dtype=float16 ...]

Encoding 2Wiki's 490,454 passages and ~5M triples with a real model takes ~5 h of two CPU cores; what a method
holds in memory does not depend on the vectors' values. So each method (:data:`scripts/estimate_methods.METHODS`)
runs here as the runner runs it (MiniLM's width unless ``--set embedder=...``), on every question of ``PREPARED`` (``--limit``), with two stand-ins:
``tests/helpers/doubles.HashEmbedder`` (feature hashing: float32 vectors of the configured model's width,
encoded at ~20k texts/s, cached under the hash embedder's own key, so they never pass for a model's) and the
scripted LLM (``ScriptedLLM``: parseable replies, no model); MiniLM is loaded as a run loads it (the queries
GRIEVER's matcher tokenizes go through it). Everything else is the harness's: the dataset, the
collections and their faiss indexes, the triple graph, HippoRAG's phrase graph, GRIEVER's matrices, the capacity
check. Each method runs in a child process of its own; reported per method: the start-up estimate
(``pipeline/capacity.py``, the figure the run is refused by), peak RSS (``ru_maxrss``, file-backed pages
included) and the anonymous part at the end, wall time. The rankings are the hash vectors', not a model's.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GIB = 1024 ** 3


def anon_gib() -> float:
    """The process's anonymous resident memory now (``RssAnon``), GiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024 / GIB
    return float("nan")


def one(name: str, prepared: str, limit: int | None, overrides: list[str], out: Path) -> dict:
    """Run method ``name`` in this process and return its figures."""
    sys.path.insert(0, str(REPO / "scripts"))
    from estimate_methods import METHODS

    from gear_repro.api import compose
    from gear_repro.embedding import SentenceEmbedder
    from gear_repro.pipeline import capacity
    from gear_repro.pipeline.resources import Resources
    from gear_repro.pipeline.runner import Runner
    from tests.helpers.doubles import HashEmbedder, ScriptedLLM

    label, method = METHODS[name]
    args = ["dataset=musique", f"dataset.path={prepared}", "embedder=minilm", *method, *overrides,
            *([f"dataset.limit={limit}"] if limit else [])]
    cfg = compose(*args)
    t0 = time.perf_counter()
    embedder = HashEmbedder(capacity.embedder_dim(cfg.embedder))  # the width the estimate counts
    # the model loaded as a run loads it: the process holds what the CLI's does, and GRIEVER's query matcher
    # tokenizes with it
    embedder._model = SentenceEmbedder(str(cfg.embedder.model)).model
    res = Resources(cfg, embedder=embedder, llm=ScriptedLLM())
    est = capacity.run_estimate(cfg, res, capacity.opened_collections(cfg))
    run = Runner(cfg, out / name, resources=res).run()
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB
    return {"method": label, "overrides": args[3:], "questions": len(res.dataset.questions),
            "estimate_gib": round(est.memory / GIB, 2) if est is not None else None,
            "peak_rss_gib": round(peak, 2), "anon_at_end_gib": round(anon_gib(), 2), "wall_s": round(wall, 1),
            "failed_questions": run.get("n_errors")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("prepared", help="a prepared folder (questions.jsonl, corpus.jsonl, triples.jsonl)")
    ap.add_argument("--methods", nargs="+", required=True, help="names of scripts/estimate_methods.METHODS")
    ap.add_argument("--limit", type=int, default=100, help="questions a method runs (default 100)")
    ap.add_argument("--workdir", type=Path, default=None, help="run folders (default: a temporary folder)")
    ap.add_argument("--out", type=Path, required=True, help="the JSON written (one record per method)")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # the child process's method
    ap.add_argument("--set", dest="overrides", action="append", default=[],
                    help="an override of every run (repeatable; e.g. backend.dense_dtype=float16)")
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="method_memory_"))
    if args.one:
        rec = one(args.one, args.prepared, args.limit, args.overrides, work)
        args.out.write_text(json.dumps(rec, indent=1))
        return
    records = []
    for name in args.methods:
        part = work / f"{name}.json"
        cmd = [sys.executable, "-m", "benchmarks.bench_method_memory", args.prepared, "--methods", name, "--one",
               name, "--limit", str(args.limit), "--workdir", str(work), "--out", str(part),
               *(x for o in args.overrides for x in ("--set", o))]
        rc = subprocess.run(cmd, cwd=REPO).returncode
        rec = json.loads(part.read_text()) if rc == 0 and part.exists() else {"method": name, "rc": rc}
        records.append(rec)
        print(json.dumps(rec), flush=True)
        args.out.write_text(json.dumps(records, indent=1))
    if any("rc" in r for r in records):
        sys.exit(1)


if __name__ == "__main__":
    main()
