"""Questions in flight against an LLM endpoint (``run.workers``, ``llm.concurrency``; docs/llm.md, "Concurrency").

IRCoT (BM25) on the first N MuSiQue-sample questions, the LLM a stand-in OpenAI-compatible endpoint
(``tests/helpers/standin_server.py``) that answers each request after a fixed latency (an API or vLLM call), with a
fresh LLM cache per setting. For workers ∈ {1, 2, 4, 8} (``llm.concurrency`` = workers): wall time, questions/s,
speed-up over workers=1 measured in the same run, whether predictions.jsonl equals workers=1's (timing fields
aside), and the peak number of requests in flight at the endpoint.

    python -m benchmarks.bench_llm_concurrency --questions 20 --latency 0.5 --out bench_llm_concurrency.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parent.parent

from hydra import compose, initialize_config_dir  # noqa: E402

from gear_repro.config import register_configs, validate  # noqa: E402
from gear_repro.pipeline.resources import Resources  # noqa: E402
from gear_repro.pipeline.runner import Runner  # noqa: E402
from gear_repro.utils.paths import config_dir  # noqa: E402
from tests.helpers.standin_server import StandInServer  # noqa: E402


def without_timings(obj):
    """A prediction record without its timing fields."""
    if isinstance(obj, dict):
        return {k: without_timings(v) for k, v in obj.items() if k not in ("timings", "ts")
                and not k.endswith(("_ms", "_s"))}
    if isinstance(obj, list):
        return [without_timings(v) for v in obj]
    return obj


def one_setting(workers: int, n: int, latency: float, jitter: float, root: Path) -> dict:
    register_configs()
    with StandInServer(latency_s=latency, jitter_s=jitter, seed=workers) as server:
        with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
            cfg = validate(compose("config", overrides=[
                "agent=ircot", "retriever=bm25", "dataset=musique_sample", f"dataset.limit={n}", "qa=true",
                "run.progress=false", "llm=openai_compatible", f"llm.base_url={server.url}", "llm.model=standin",
                f"llm.cache_dir={root / f'cache{workers}'}", f"run.workers={workers}", f"llm.concurrency={workers}"]))
        res = Resources(cfg, embedder=None)  # IRCoT (BM25) needs no vectors
        t0 = time.perf_counter()
        metrics = Runner(cfg, root / f"run{workers}", resources=res).run()
        wall = time.perf_counter() - t0
    preds = [json.loads(x) for x in (root / f"run{workers}" / "predictions.jsonl").read_text().splitlines()]
    return {"workers": workers, "wall_s": round(wall, 2), "questions_per_s": round(n / wall, 3),
            "requests": server.n_requests, "max_in_flight": server.max_in_flight, "n_errors": metrics["n_errors"],
            "preds": [without_timings(p) for p in preds]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=20)
    ap.add_argument("--latency", type=float, default=0.5, help="seconds per request at the stand-in endpoint")
    ap.add_argument("--jitter", type=float, default=0.2, help="extra seconds, seeded uniform, per request")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [one_setting(w, args.questions, args.latency, args.jitter, Path(tmp)) for w in args.workers]
    base = rows[0]
    for r in rows:
        r["speedup"] = round(base["wall_s"] / r["wall_s"], 2)
        r["identical_to_first"] = r["preds"] == base["preds"]
    lines = [f"IRCoT (BM25), {args.questions} MuSiQue-sample questions, stand-in endpoint {args.latency} s "
             f"+ up to {args.jitter} s per request, llm.concurrency = workers, {os.cpu_count()} CPUs", "",
             "| run.workers | wall s | questions/s | speed-up vs 1 | requests | max in flight | predictions = workers 1 |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['workers']} | {r['wall_s']} | {r['questions_per_s']} | {r['speedup']}× | {r['requests']} | "
              f"{r['max_in_flight']} | {'yes' if r['identical_to_first'] else 'NO'} |" for r in rows]
    print("\n".join(lines))
    if args.out:
        Path(args.out).write_text(json.dumps([{k: v for k, v in r.items() if k != "preds"} for r in rows], indent=1))


if __name__ == "__main__":
    main()
