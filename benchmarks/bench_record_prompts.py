"""Size of predictions.jsonl with ``llm.record_prompts`` on and off (docs/explorer.md, "Each method's own view").

The demo's LLM methods (Hybrid + SyncGE at base k = 15, GEAR with 2 rounds; qa=true) on the first ``--questions``
questions over the bundled MuSiQue sample's first 400 passages, through the real LLM client (HTTP, cache) against the
stand-in endpoint of the tests (tests/helpers/standin_server.py) whose replies follow each prompt's template; the
hashing embedder stands in for SBERT. Prompts are the real prompts; replies are shorter than a local model's, so
real files grow a little more.

    python -m benchmarks.bench_record_prompts --work /tmp/bench_prompts
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # tests.helpers (the doubles) when run as a script

METHODS = {"Hybrid + SyncGE": ["agent=single", "retriever=hybrid", "expansion=sync", "run.matched_k=false"],
           "GEAR": ["agent=gear", "retriever=hybrid", "dataset.max_rounds=2"]}


def main(argv: list[str] | None = None) -> int:
    from gear_repro.config import validate
    from gear_repro.pipeline.resources import Resources
    from gear_repro.pipeline.runner import Runner
    from tests.helpers.doubles import HashEmbedder, template_reply
    from tests.helpers.explorer_runs import make_dataset
    from tests.helpers.runs import compose_config
    from tests.helpers.standin_server import StandInServer

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/bench_prompts", help="scratch folder")
    ap.add_argument("--questions", type=int, default=20, help="questions per run (default 20)")
    args = ap.parse_args(argv)
    work = Path(args.work)
    os.environ.setdefault("GEAR_CACHE", str(work / "cache"))
    make_dataset(work / "data", 400, args.questions, hostile=False)
    titles = [json.loads(x)["title"] for x in (work / "data" / "corpus.jsonl").read_text().splitlines()]

    def reply(prompt: str) -> str:
        h = int(hashlib.sha256(prompt.encode()).hexdigest(), 16)
        return template_reply(prompt, h, titles) or f"Answer: {titles[h % len(titles)]}"

    rows = []
    with StandInServer(latency_s=0.0, reply=reply) as server:
        for name, overrides in METHODS.items():
            size = {}
            for flag in ("false", "true"):
                out = work / f"{name.replace(' ', '')}_{flag}"
                cfg = validate(compose_config([
                    *overrides, "qa=true", "embedder=minilm", f"dataset.path={work / 'data'}", "dataset.name=musique",
                    f"dataset.limit={args.questions}", "run.progress=false", "llm=openai_compatible",
                    f"llm.base_url={server.url}", "llm.model=standin", f"llm.cache_dir={out / 'llm_cache'}",
                    f"llm.record_prompts={flag}"]))
                Runner(cfg, out / "run", resources=Resources(cfg, embedder=HashEmbedder())).run()
                path = out / "run" / "predictions.jsonl"
                recs = [json.loads(x) for x in path.read_text(encoding="utf-8").split("\n") if x.strip()]
                size[flag] = path.stat().st_size
                calls = sum(len(r["llm_calls"]) for r in recs)
            rows.append({"method": name, "questions": len(recs), "calls": calls, "bytes_off": size["false"],
                         "bytes_on": size["true"], "per_question_kb": round((size["true"] - size["false"]) / len(recs) / 1000, 1)})
            print(json.dumps(rows[-1]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
