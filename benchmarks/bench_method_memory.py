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
included), the anonymous part at its sampled peak (what a run needs: the file pages of the memory maps it writes and
reads can be dropped by the kernel) and at the end, wall time, and where the peak came: the resident memory sampled
every 0.2 s, with the stack of the run's thread at the highest sample (``peak_at``; a spike between samples is
missed, so ``peak_rss_gib`` stays the figure). A run killed for memory (rc -9) is reported with the highest
samples it wrote before the kill (``last_samples``). The rankings are the hash vectors', not a model's.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

from gear_repro.utils.memory import status_gib

REPO = Path(__file__).resolve().parent.parent
GIB = 1024 ** 3


class PeakSampler(threading.Thread):
    """Samples the resident memory every ``every`` s and keeps, at the highest sample, its anonymous and file
    parts and the innermost frames of ``thread``'s stack (the harness's code), and the highest anonymous sample:
    the memory a run needs, where RSS also counts the file pages of the memory maps a run writes and reads, which
    the kernel can drop. Each new peak is also written to ``record`` (JSON), so a run the kernel kills for memory
    still tells where it stood."""

    def __init__(self, thread: threading.Thread, every: float = 0.2, record: Path | None = None):
        super().__init__(daemon=True)
        self.watched, self.every, self.peak, self.anon_peak = thread.ident, every, {"rss_gib": 0.0}, 0.0
        self.record = record
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.every):
            rss, anon, file = (status_gib(k) for k in ("VmRSS", "RssAnon", "RssFile"))
            higher = anon > self.anon_peak or rss > self.peak["rss_gib"]
            self.anon_peak = max(self.anon_peak, anon)
            if rss > self.peak["rss_gib"]:
                frame = sys._current_frames().get(self.watched)
                stack = traceback.extract_stack(frame) if frame is not None else []
                where: list[str] = []
                for f in stack:  # the harness's frames, a recursion once
                    if "gear_repro" in f.filename and not (where and where[-1].endswith(f" {f.name}")):
                        where.append(f"{Path(f.filename).name}:{f.lineno} {f.name}")
                self.peak = {"rss_gib": round(rss, 2), "anon_gib": round(anon, 2), "file_gib": round(file, 2),
                             "where": where[-6:]}
            if higher and self.record is not None:
                tmp = self.record.with_suffix(".tmp")
                tmp.write_text(json.dumps({"peak_anon_gib": round(self.anon_peak, 2), "peak_at": self.peak}))
                tmp.replace(self.record)


def one(name: str, prepared: str, limit: int | None, overrides: list[str], out: Path, samples: Path) -> dict:
    """Run method ``name`` in this process and return its figures; its sampled peaks go to ``samples`` as they
    rise."""
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
    sampler = PeakSampler(threading.current_thread(), record=samples)
    sampler.start()
    res = Resources(cfg, embedder=embedder, llm=ScriptedLLM())
    est = capacity.run_estimate(cfg, res, capacity.opened_collections(cfg))
    run = Runner(cfg, out / name, resources=res).run()
    wall = time.perf_counter() - t0
    sampler.stopped.set()
    sampler.join()  # its last sample is in both the record and the samples file
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB
    return {"method": label, "overrides": args[3:], "questions": len(res.dataset.questions),
            "estimate_gib": round(est.memory / GIB, 2) if est is not None else None,
            "peak_rss_gib": round(peak, 2), "anon_at_end_gib": round(status_gib("RssAnon"), 2),
            "peak_anon_gib": round(sampler.anon_peak, 2), "wall_s": round(wall, 1),
            "failed_questions": run.get("n_errors"), "peak_at": sampler.peak}


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
    work.mkdir(parents=True, exist_ok=True)  # before a child's sampler writes its peaks there
    if args.one:
        rec = one(args.one, args.prepared, args.limit, args.overrides, work, args.out.with_suffix(".samples.json"))
        args.out.write_text(json.dumps(rec, indent=1))
        return
    taken = [str(work / name) for name in args.methods if (work / name).exists()]
    if taken:  # the runner would resume the finished questions there, and the peak would measure no retrieval
        sys.exit(f"bench_method_memory: run folder(s) {', '.join(taken)} exist: a resumed run measures nothing; "
                 "remove them or pick another --workdir")
    records = []
    for name in args.methods:
        part = work / f"{name}.json"
        cmd = [sys.executable, "-m", "benchmarks.bench_method_memory", args.prepared, "--methods", name, "--one",
               name, "--limit", str(args.limit), "--workdir", str(work), "--out", str(part),
               *(x for o in args.overrides for x in ("--set", o))]
        rc = subprocess.run(cmd, cwd=REPO).returncode
        rec = json.loads(part.read_text()) if rc == 0 and part.exists() else {"method": name, "rc": rc}
        samples = part.with_suffix(".samples.json")
        if "rc" in rec and samples.exists():  # killed (rc -9: out of memory): the highest samples before the end
            rec["last_samples"] = json.loads(samples.read_text())
        records.append(rec)
        print(json.dumps(rec), flush=True)
        args.out.write_text(json.dumps(records, indent=1))
    if any("rc" in r for r in records):
        sys.exit(1)


if __name__ == "__main__":
    main()
