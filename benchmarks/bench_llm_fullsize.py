"""The LLM extraction stage at the paper's corpus size against a stand-in endpoint (docs/llm.md, "LLM stages at full size").

GEAR App. K.1 extracts triples for IRCoT's MuSiQue corpus, 148,793 passages (GEAR Table 5), with gpt-4o-mini. This
rehearses that through the user's command, ``python -m gear_repro.extraction --dataset DIR --llm openai_compatible``
(the real ``LLMClient``: SDK retries, reply cache, ledger, resumable log), against
``tests/helpers/standin_server.py`` run in its own process (replies in ~2 ms: the harness's own overhead is what is
measured, not a model's):

1. corpus: the MuSiQue sample's 1,890 passages (with their reference OpenIE triples) and, up to ``--passages``,
   passages recombined from them (seeded: 2-5 of the sample's sentences, a sample title numbered to be unique), or the
   passages of ``--corpus DIR``;
2. calls/s at ``llm.concurrency`` 1/4/16 on the first ``--rate-passages`` passages, clean endpoint, fresh cache;
3. the whole corpus at concurrency 16 on a seeded schedule of 429s (Retry-After), 500s and slow replies: killed
   (SIGKILL) once half of it is done, then the same command again: retries, failures (must be 0), requests the
   endpoint saw after the kill for prompts already in the reply cache at the kill (must be 0);
4. the estimate said before the first call (the same function the CLI logs) against what the run took;
   and the estimate the runner says before GEAR (with QA) on ``--questions`` questions, whose K.3 QA calls are
   then sent through the real client on the fault schedule;
5. the reply cache's size on disk and its lookup time (p50/p99 over ``--lookups`` hits) at the corpus size.

    nice -n 10 python -m benchmarks.bench_llm_fullsize --passages 148793 --out bench_llm_fullsize.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from statistics import quantiles

REPO = Path(__file__).resolve().parent.parent
MODEL = "gpt-4o-mini-2024-07-18"
SAMPLE = REPO / "data" / "musique_sample"
FAULTS = ["--p429", "0.03", "--p500", "0.01", "--p-slow", "0.005", "--slow-s", "0.2", "--retry-after-s", "0.05"]


def make_corpus(out: Path, n: int, seed: int = 0) -> None:
    """A canonical dataset folder of ``n`` passages: the sample's own first (with their triples and questions), then
    recombined ones; ids continue the sample's."""
    out.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(x) for x in (SAMPLE / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    sentences = [s for r in rows for s in re.split(r"(?<=[.!?])\s+", r["text"]) if len(s.split()) >= 4]
    titles = [r["title"] for r in rows]
    rng = random.Random(seed)
    with (out / "corpus.jsonl").open("w", encoding="utf-8") as f:
        for i in range(n):
            if i < len(rows):
                f.write(json.dumps(rows[i], ensure_ascii=False) + "\n")
                continue
            text = " ".join(rng.sample(sentences, rng.randint(2, 5)))
            f.write(json.dumps({"id": str(i), "title": f"{rng.choice(titles)} {i}", "text": text},
                               ensure_ascii=False) + "\n")
    for name in ("questions.jsonl", "triples.jsonl"):
        (out / name).write_bytes((SAMPLE / name).read_bytes())


class Endpoint:
    """The stand-in server in its own process (so that its work does not share the client's interpreter)."""

    def __init__(self, *args: str):
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.helpers.standin_server", *args], cwd=REPO,
                                     stdout=subprocess.PIPE, text=True, env=_env())
        self.url = self.proc.stdout.readline().strip()

    def stats(self, digests: bool = False, reset: bool = False) -> dict:
        q = "&".join(x for x, on in (("digests=1", digests), ("reset=1", reset)) if on)
        with urllib.request.urlopen(f"{self.url.rsplit('/v1', 1)[0]}/stats?{q}", timeout=60) as r:
            return json.loads(r.read())

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "OPENAI_API_KEY": "standin"}


def extract_cmd(data: Path, out: Path, cache: Path, url: str, concurrency: int, limit: int | None) -> list[str]:
    """The user's extraction command, aimed at the stand-in."""
    return [sys.executable, "-m", "gear_repro.extraction", "--dataset", str(data), "--llm", "openai_compatible",
            "--out", str(out), *(["--limit", str(limit)] if limit else []), "--set", f"base_url={url}",
            f"model={MODEL}", f"cache_dir={cache}", f"concurrency={concurrency}", "timeout_s=60",
            "estimate_latency_s=1.0"]


def run_cmd(cmd: list[str], log: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    with log.open("a") as f:
        rc = subprocess.run(cmd, cwd=REPO, stdout=f, stderr=f, env=_env()).returncode
    return time.perf_counter() - t0, rc


def lines(path: Path) -> int:
    if not path.exists():
        return 0
    with path.open("rb") as f:
        return sum(1 for _ in f)


def rate_runs(data: Path, root: Path, n: int, levels: list[int]) -> list[dict]:
    ep = Endpoint("--latency", "0.002")
    rows = []
    try:
        for c in levels:
            ep.stats(reset=True)
            wall, rc = run_cmd(extract_cmd(data, root / f"rate{c}", root / f"cache_rate{c}", ep.url, c, n),
                               root / f"rate{c}.log")
            st = json.loads((root / f"rate{c}" / "extraction_stats.json").read_text())
            s = ep.stats()
            rows.append({"concurrency": c, "passages": n, "rc": rc, "wall_s": round(wall, 1),
                         "extract_s": st["session"]["wall_s"],
                         "calls_per_s": round(n / st["session"]["wall_s"], 1),
                         "requests": s["n_requests"], "max_in_flight": s["max_in_flight"],
                         "failures": st["llm_stats"]["failures"]})
            print(rows[-1], flush=True)
    finally:
        ep.close()
    return rows


def full_run(data: Path, root: Path, n: int, kill_frac: float, cache_entries: int) -> dict:
    """The first ``n`` passages at concurrency 16 on the fault schedule, SIGKILLed at ``kill_frac`` done, then
    resumed; the estimate of the whole corpus and of these ``n``; the cache then filled to ``cache_entries``."""
    from gear_repro.data.dataset import load_dataset
    from gear_repro.extraction.extract import extraction_estimate
    from gear_repro.llm import LLMClient
    from gear_repro.llm.cache import request_key
    from gear_repro.llm.estimate import EstimateSettings
    from gear_repro.prompts import render
    from tests.helpers.standin_server import prompt_digest

    out, cache = root / "full", root / "cache_full"
    ep = Endpoint(*FAULTS)
    res: dict = {"passages": n, "concurrency": 16, "schedule": " ".join(FAULTS)}
    try:
        ds = load_dataset(str(data))
        passages = ds.passages[:n]
        client = LLMClient(model=MODEL, base_url=ep.url, cache_dir=str(cache), concurrency=16, max_tokens=1024,
                           estimate_latency_s=1.0)
        t0 = time.perf_counter()
        whole = extraction_estimate(ds.passages, client, {}, 16, ds.triples, EstimateSettings(latency_s=1.0))
        res["estimate_corpus_s"] = round(time.perf_counter() - t0, 1)
        res["estimate_corpus"] = whole.to_dict()
        print(whole.line(), flush=True)
        est = extraction_estimate(passages, client, {}, 16, ds.triples, EstimateSettings(latency_s=1.0))
        res["estimate"] = est.to_dict()
        client.close()
        cmd = extract_cmd(data, out, cache, ep.url, 16, n)
        log = root / "full.log"
        t0 = time.perf_counter()
        with log.open("w") as f:
            proc = subprocess.Popen(cmd, cwd=REPO, stdout=f, stderr=f, env=_env())
            while proc.poll() is None and lines(out / "extraction_log.jsonl") < kill_frac * n:
                time.sleep(2)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        first_s = time.perf_counter() - t0
        done_at_kill = lines(out / "extraction_log.jsonl")
        with sqlite3.connect(cache / "cache.sqlite3") as con:
            keys = {k for (k,) in con.execute("SELECT key FROM replies")}
        before = ep.stats(reset=True)
        res["session1"] = {"wall_s": round(first_s, 1), "logged_done": done_at_kill, "cached_at_kill": len(keys),
                           "requests": before["n_requests"], "status": before["status"]}
        print(res["session1"], flush=True)
        wall2, rc = run_cmd(cmd, log)
        after = ep.stats(digests=True)
        st = json.loads((out / "extraction_stats.json").read_text())
        endpoint = client.endpoint
        finished = []
        for p in passages:
            msgs = render("extraction", wiki_title=p.title, passage=p.text)
            if request_key(MODEL, msgs, {"temperature": 0.0, "max_tokens": 1024}, endpoint) in keys:
                finished.append(prompt_digest(msgs[-1]["content"]))
        resent = sum(after["requests"].get(d, 0) for d in finished)
        recs = [json.loads(x) for x in (out / "extraction_log.jsonl").read_text().splitlines()]
        res["session2"] = {"wall_s": round(wall2, 1), "rc": rc, "requests": after["n_requests"],
                           "status": after["status"], "cache_hits": st["llm_stats"]["cache_hits"],
                           "retries": st["llm_stats"]["retries"], "failures": st["llm_stats"]["failures"],
                           "call_errors": st["session"]["call_errors"]}
        res["resume"] = {"prompts_cached_at_kill": len(finished), "requests_for_them_after_kill": resent,
                         "cached_not_logged_at_kill": len(keys) - done_at_kill}
        res["actual"] = {"calls": len(recs), "done": st["n_done"],
                         "requests": before["n_requests"] + after["n_requests"],
                         "prompt_tokens": sum(r["prompt_tokens"] for r in recs),
                         "completion_tokens": sum(r["completion_tokens"] for r in recs),
                         "wall_s": round(first_s + wall2, 1),
                         "faults": {k: before["status"].get(k, 0) + after["status"].get(k, 0)
                                    for k in ("429", "500", "slow")},
                         "triples": st["triples"]}
        res["log_lines"] = [x for x in log.read_text().splitlines() if "estimate" in x or "LARGE LLM RUN" in x][:6]
        res["cache"] = cache_figures(cache / "cache.sqlite3", fill=ds.passages[:cache_entries], endpoint=endpoint)
    finally:
        ep.close()
    return res


def question_run(data: Path, root: Path, n_questions: int) -> dict:
    """GEAR with QA on ``n_questions`` (the sample's questions repeated under new ids) over the whole corpus: the
    estimate the runner says before its first call (``llm=openai``'s model, GEAR's per-question upper bound), and
    the K.3 QA calls of that estimate sent through the real client at concurrency 16 on the fault schedule (the
    agent's own calls take the same ``LLMClient.chat`` path; GEAR's retrieval at this size is not run here)."""
    from dataclasses import replace

    from hydra import compose, initialize_config_dir

    from gear_repro.config import register_configs, validate
    from gear_repro.data.dataset import load_dataset
    from gear_repro.llm import LLMClient
    from gear_repro.llm.estimate import EstimateSettings, estimate_calls
    from gear_repro.pipeline.estimate import question_estimate, question_prompts
    from gear_repro.utils.paths import config_dir

    ds = load_dataset(str(data))
    questions = [replace(q, id=f"{q.id}#{i}") for i in range(-(-n_questions // len(ds.questions)))
                 for q in ds.questions][:n_questions]
    register_configs()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = validate(compose("config", overrides=["agent=gear", "qa=true", "dataset=musique_sample",
                                                    f"dataset.path={data}", "llm=openai", "run.workers=16",
                                                    "llm.concurrency=16"]))
    ep = Endpoint(*FAULTS)
    try:
        client = LLMClient(model=MODEL, base_url=ep.url, cache_dir=str(root / "cache_qa"), concurrency=16,
                           max_tokens=1024, estimate_latency_s=1.0)
        t0 = time.perf_counter()
        est = question_estimate(cfg, questions, ds.passages, client)
        est_s = time.perf_counter() - t0
        qa = list(question_prompts([("qa", 1, 5)], questions, list(ds.passages)))
        qa_est = estimate_calls(qa, stage="qa", model=MODEL, concurrency=16, settings=EstimateSettings(latency_s=1.0))
        t0 = time.perf_counter()
        replies = client.chat_many(qa, stage="qa", return_exceptions=True)
        wall = time.perf_counter() - t0
        st = client.stats()
        client.close()
        s = ep.stats()
    finally:
        ep.close()
    return {"questions": n_questions, "estimate_s": round(est_s, 1), "estimate": est.to_dict() if est else None,
            "line": est.line() if est else None,
            "qa": {"calls": len(qa), "wall_s": round(wall, 1), "calls_per_s": round(len(qa) / wall, 1),
                   "retries": st["retries"], "failures": st["failures"],
                   "errors": sum(isinstance(r, Exception) for r in replies), "status": s["status"],
                   "estimate_prompt_tokens": qa_est.prompt_tokens, "actual_prompt_tokens": st["prompt_tokens"],
                   "actual_completion_tokens": st["completion_tokens"]}}


def cache_figures(path: Path, fill: list, endpoint: str | None, lookups: int = 5000, seed: int = 0) -> dict:
    """Entries, bytes on disk (with the WAL), and get() time of ``lookups`` random hits and as many misses, after the
    replies of the passages of ``fill`` not yet in the cache are put in it (their real keys, the stand-in's replies
    with tokens counted as the run's were: a cache the size of the corpus without ~1.5 h of calls here)."""
    from gear_repro.llm.cache import LLMCache, request_key
    from gear_repro.llm.tokens import count_messages, count_text
    from gear_repro.prompts import render
    from tests.helpers.standin_server import standin_reply

    cache = LLMCache(path.parent)
    t0 = time.perf_counter()
    filled = 0
    for p in fill:
        msgs = render("extraction", wiki_title=p.title, passage=p.text)
        key = request_key(MODEL, msgs, {"temperature": 0.0, "max_tokens": 1024}, endpoint)
        if cache.get(key) is None:
            text = standin_reply(msgs[-1]["content"])
            cache.put(key, MODEL, {"text": text, "prompt_tokens": count_messages(msgs, MODEL)[0],
                                   "completion_tokens": count_text(text, MODEL)[0], "finish_reason": "stop",
                                   "tokens_source": "usage", "model": MODEL})
            filled += 1
    fill_s = time.perf_counter() - t0

    with sqlite3.connect(path) as con:
        keys = [k for (k,) in con.execute("SELECT key FROM replies")]
    size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    rng = random.Random(seed)
    sample = rng.sample(keys, min(lookups, len(keys)))
    hit_ms, miss_ms = [], []
    for k in sample:
        t = time.perf_counter()
        assert cache.get(k) is not None
        hit_ms.append(1000 * (time.perf_counter() - t))
        t = time.perf_counter()
        cache.get(f"{k[:-4]}ffff" if not k.endswith("ffff") else f"{k[:-4]}0000")
        miss_ms.append(1000 * (time.perf_counter() - t))

    def pct(xs: list[float]) -> dict:
        q = quantiles(xs, n=100)
        return {"p50": round(q[49], 3), "p99": round(q[98], 3)}

    return {"entries": len(keys), "filled_without_calls": filled, "fill_s": round(fill_s, 1), "bytes": size, "bytes_per_entry": round(size / max(1, len(keys))),
            "hit_ms": pct(hit_ms), "miss_ms": pct(miss_ms)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--passages", type=int, default=148793, help="corpus size (default 148,793: GEAR Table 5)")
    ap.add_argument("--corpus", default=None, help="a canonical dataset folder to use instead of the generated one")
    ap.add_argument("--rate-passages", type=int, default=2000, help="passages per concurrency level (default 2000)")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--run-passages", type=int, default=None,
                    help="passages the killed-and-resumed run extracts (default all; less where time is short)")
    ap.add_argument("--cache-entries", type=int, default=None, help="fill the reply cache to this many (default all)")
    ap.add_argument("--questions", type=int, default=500, help="questions of the GEAR estimate and QA calls")
    ap.add_argument("--kill-at", type=float, default=0.5, help="fraction done at the SIGKILL (default 0.5)")
    ap.add_argument("--work", default="/tmp/bench_llm_fullsize", help="scratch folder (emptied)")
    ap.add_argument("--skip-rates", action="store_true")
    ap.add_argument("--skip-full", action="store_true", help="no killed-and-resumed run (rates and questions only)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    import shutil

    root = Path(a.work)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    data = Path(a.corpus) if a.corpus else root / "data"
    if not a.corpus:
        make_corpus(data, a.passages)
    report: dict = {"cpus": os.cpu_count(), "passages": a.passages}
    if not a.skip_rates:
        report["rates"] = rate_runs(data, root, min(a.rate_passages, a.passages), a.concurrency)
    report["questions"] = question_run(data, root, a.questions)
    print(json.dumps(report["questions"]), flush=True)
    if not a.skip_full:
        report["full"] = full_run(data, root, a.run_passages or a.passages, a.kill_at, a.cache_entries or a.passages)
    print(json.dumps(report, indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
