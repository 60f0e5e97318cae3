"""Prompt-prefix reuse of the embedded llama.cpp server: ``llm.server.prompt_cache`` none vs ram (docs/llm.md,
"Prompt-prefix reuse").

Runs the real pipeline (``python -m gear_repro.cli.run``, one process per run, so each run starts its own server)
on the first N questions of the stratified MuSiQue sample, twice per method, prompt_cache none and ram, each with a
fresh empty LLM reply cache (``llm.cache_dir=<tmp>``) so that every distinct request reaches the server (a request
repeated within a run is still answered from that run's cache, alike in both settings). Methods: GEAR
(``agent=gear``, K.2 reader / reason / rewrite, then K.3 QA) and SyncGE (``agent=single expansion=sync``, matched
k: three K.2 reads per question, then QA); both ``qa=true retriever=hybrid embedder=minilm``. The runs go in the
order A B B A (GEAR none, GEAR ram, SyncGE ram, SyncGE none) so that a drift in background load hits both settings.

Per run: seconds per question (the run's question loop, wall clock, / N; includes the server's start), the whole
process's wall time, LLM requests sent to the server, their prompt tokens (as the server reports them), the prompt
tokens the server actually evaluated and its prompt-eval seconds (summed from its log: what prefix reuse saves),
the server's peak resident memory (polled VmHWM), and whether every reply equals the none run's (the two reply
caches compared key by key: same requests, same texts) and the predictions (rankings, answers) are equal.

    # the measurement: 5 questions with the local Qwen model; takes the CPU for a long time
    python -m benchmarks.bench_llm_prefix --questions 5 --llm local --keep <empty dir> --out bench_llm_prefix.json
    # smoke check with the tiny model (answers are nonsense)
    python -m benchmarks.bench_llm_prefix --questions 1 --llm tiny --set llm.timeout_s=600
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

METHODS = {
    "GEAR": ["agent=gear"],
    "SyncGE": ["agent=single", "expansion=sync"],
}
COMMON = ["qa=true", "retriever=hybrid", "embedder=minilm", "dataset=musique_sample", "dataset.subset=stratified",
          "run.progress=false"]
_EVAL = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")
_LOG = re.compile(r"starting llama\.cpp server: .* \(log (\S+)\)")


def _descendants(pid: int) -> list[int]:
    """Processes below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _peak_rss_kib(pid: int) -> int:
    """VmHWM (peak resident KiB) of ``pid``, 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class ServerMemory(threading.Thread):
    """Polls the peak resident memory of the llama.cpp server(s) started below a process."""

    def __init__(self, root_pid: int):
        super().__init__(daemon=True)
        self.root_pid, self.peak_kib, self.done = root_pid, 0, threading.Event()

    def run(self) -> None:
        while not self.done.wait(1.0):
            for p in _descendants(self.root_pid):
                try:
                    cmd = Path(f"/proc/{p}/cmdline").read_bytes()
                except OSError:
                    continue
                if b"llama_cpp.server" in cmd:
                    self.peak_kib = max(self.peak_kib, _peak_rss_kib(p))


def server_log_totals(run_log: Path) -> dict:
    """Prompt tokens evaluated and prompt-eval seconds from the logs of the servers this run started (each start
    is one ``Uvicorn running on`` segment at the end of its log file, which is appended to across runs)."""
    starts: dict[str, int] = {}
    for m in _LOG.finditer(run_log.read_text(errors="replace")):
        starts[m.group(1)] = starts.get(m.group(1), 0) + 1
    tokens, ms, hits = 0, 0.0, 0
    for path, n in starts.items():
        for seg in Path(path).read_text(errors="replace").split("Uvicorn running on")[-n:]:
            for m in _EVAL.finditer(seg):
                ms += float(m.group(1))
                tokens += int(m.group(2))
            hits += seg.count("Llama._create_completion: cache hit")
    return {"server_starts": sum(starts.values()), "prompt_tokens_evaluated": tokens,
            "prompt_eval_s": round(ms / 1000, 2), "prompt_cache_hits": hits}


def replies(cache_dir: Path) -> dict[str, str]:
    """Reply cache key -> reply text."""
    with sqlite3.connect(cache_dir / "cache.sqlite3") as conn:
        return {k: json.loads(v)["text"] for k, v in conn.execute("SELECT key, value FROM replies")}


def predictions(run_dir: Path) -> list[dict]:
    """The run's records without timing fields and LLM call latencies."""
    recs = [json.loads(x) for x in (run_dir / "predictions.jsonl").read_text().splitlines()]

    def strip(o):
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items() if k not in ("timings", "ts") and not k.endswith(("_ms", "_s"))}
        if isinstance(o, list):
            return [strip(v) for v in o]
        return o

    return [strip(r) for r in recs]


def one_run(method: str, setting: str, args: argparse.Namespace, root: Path) -> dict:
    tag = f"{method}_{setting}"
    cache, run_dir = root / f"cache_{tag}", root / f"run_{tag}"
    if cache.exists() or run_dir.exists():  # a resumed run or a warm reply cache would measure nothing
        raise SystemExit(f"{run_dir} or {cache} exists already: give an empty --keep dir")
    overrides = [f"llm={args.llm}", *COMMON, *METHODS[method], f"dataset.limit={args.questions}",
                 f"llm.server.prompt_cache={setting}", f"llm.cache_dir={cache}", f"hydra.run.dir={run_dir}",
                 *([f"llm.server.prompt_cache_bytes={args.cache_bytes}"] if args.cache_bytes else []), *args.set]
    cmd = [sys.executable, "-m", "gear_repro.cli.run", *overrides]
    print(f"[{time.strftime('%H:%M:%S')}] {method} prompt_cache={setting}: {' '.join(cmd[1:])}", flush=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    t0 = time.perf_counter()
    with open(root / f"{tag}.out", "wb") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
        mem = ServerMemory(proc.pid)
        mem.start()
        rc = proc.wait()
        mem.done.set()
    wall = time.perf_counter() - t0
    if rc != 0:
        tail = (root / f"{tag}.out").read_text(errors="replace")[-3000:]
        raise SystemExit(f"{method} prompt_cache={setting} failed (exit {rc}):\n{tail}")
    timings = json.loads((run_dir / "run.json").read_text())["timings"]
    calls = [c for r in predictions(run_dir) for c in r.get("llm_calls", [])]
    sent = [c for c in calls if not c["cached"]]
    return {"method": method, "setting": setting, "s_per_question": round(timings["questions_s"] / args.questions, 2),
            "wall_s": round(wall, 1), "llm_calls": len(calls), "llm_requests": len(sent),
            "prompt_tokens": sum(c["prompt_tokens"] for c in sent),
            "completion_tokens": sum(c["completion_tokens"] for c in sent),
            **server_log_totals(run_dir / "run.log"), "server_peak_rss_mib": round(mem.peak_kib / 1024),
            "_cache": cache, "_run": run_dir}


def compare(none: dict, ram: dict) -> dict:
    """Whether every reply and every prediction of the ram run equals the none run's."""
    a, b = replies(none["_cache"]), replies(ram["_cache"])
    differ = sorted(k for k in a.keys() & b.keys() if a[k] != b[k])
    return {"replies_compared": len(a.keys() & b.keys()), "replies_differ": len(differ),
            "requests_only_in_one": len(a.keys() ^ b.keys()),
            "replies_identical": not differ and a.keys() == b.keys(),
            "predictions_identical": predictions(none["_run"]) == predictions(ram["_run"])}


def table(rows: list[dict], args: argparse.Namespace) -> str:
    lines = [f"{args.questions} questions of the stratified MuSiQue sample, llm={args.llm}, qa=true retriever=hybrid "
             f"embedder=minilm, fresh LLM reply cache per run, {os.cpu_count()} CPUs; runs in the order "
             + ", ".join(f"{r['method']} {r['setting']}" for r in rows), "",
             "| method | prompt_cache | s / question | ram / none | wall s | LLM calls (sent) | prompt tokens | "
             "prompt tokens evaluated | prompt eval s | state loads | server peak RSS MiB | replies = none | "
             "predictions = none |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    by = {(r["method"], r["setting"]): r for r in rows}
    for method in args.methods:
        base = by[(method, "none")]
        for setting in ("none", "ram"):
            r = by[(method, setting)]
            ratio = round(r["s_per_question"] / base["s_per_question"], 3) if base["s_per_question"] else None
            same = "—" if setting == "none" else (
                f"{'yes' if r['replies_identical'] else 'NO'} ({r['replies_compared']} compared, "
                f"{r['replies_differ']} differ, {r['requests_only_in_one']} in one run only)")
            preds = "—" if setting == "none" else ("yes" if r["predictions_identical"] else "NO")
            lines.append(f"| {method} | {setting} | {r['s_per_question']} | {ratio} | {r['wall_s']} | "
                         f"{r['llm_calls']} ({r['llm_requests']}) | {r['prompt_tokens']} | "
                         f"{r['prompt_tokens_evaluated']} | {r['prompt_eval_s']} | {r['prompt_cache_hits']} | "
                         f"{r['server_peak_rss_mib']} | {same} | {preds} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=5, help="first N questions of the stratified sample")
    ap.add_argument("--llm", default="local", help="llm= config (local: Qwen2.5-Coder-1.5B; tiny: SmolLM2-135M)")
    ap.add_argument("--methods", nargs="+", choices=sorted(METHODS), default=["GEAR", "SyncGE"])
    ap.add_argument("--cache-bytes", type=int, default=None,
                    help="llm.server.prompt_cache_bytes of the ram runs (default: the config's)")
    ap.add_argument("--set", nargs="*", default=[], help="more overrides for every run, e.g. llm.timeout_s=600")
    ap.add_argument("--keep", default=None, help="keep the run dirs and caches here (default: a temporary dir)")
    ap.add_argument("--out", default=None, help="write the rows as JSON here")
    args = ap.parse_args()
    order = []  # A B B A: none, ram for the first method, ram, none for the next, ...
    for i, method in enumerate(args.methods):
        order += [(method, s) for s in (("none", "ram") if i % 2 == 0 else ("ram", "none"))]
    with tempfile.TemporaryDirectory(prefix="bench_llm_prefix_") as tmp:
        root = Path(args.keep) if args.keep else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        rows = [one_run(m, s, args, root) for m, s in order]
        by = {(r["method"], r["setting"]): r for r in rows}
        for method in args.methods:
            by[(method, "ram")].update(compare(by[(method, "none")], by[(method, "ram")]))
        text = table(rows, args)
    print(text)
    if args.out:
        clean = [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]
        Path(args.out).write_text(json.dumps({"questions": args.questions, "llm": args.llm, "rows": clean,
                                              "table": text}, indent=1))


if __name__ == "__main__":
    main()
