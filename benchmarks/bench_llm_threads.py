"""Local llama.cpp model: seconds per K.3 call and the reply texts at ``n_threads`` 1 vs 2 (docs/llm.md, "Threads").

The LLM reply cache keys a request by model, messages and parameters (``gear_repro/llm/cache.py``), not by the
server's thread count, so a run at ``llm.server.n_threads=2`` reuses replies written at 1 and the other way round.
That is right only if greedy replies do not depend on the thread count; this script checks it on real prompts: the
App. K.3 reader prompt (``render("qa", ...)``) over the gold passages of the first N stratified MuSiQue sample
questions, each answered once per thread count by one in-process ``llama_cpp.Llama`` (the library the harness's
server runs), greedy, ``max_tokens`` as given. Prints and writes seconds per call per thread count, their ratio, and
whether every reply text is identical.

    python -m benchmarks.bench_llm_threads --questions 4 --model qwen --out bench_llm_threads.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from gear_repro.data.dataset import load_dataset
from gear_repro.llm.gguf_weights import resolve_model_path
from gear_repro.prompts import render

REPO = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--questions", type=int, default=4)
    ap.add_argument("--model", default="qwen", help="a .gguf path, qwen or smollm2 (gear_repro.llm.gguf_weights)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--n-ctx", type=int, default=8192)
    ap.add_argument("--dataset", default=str(REPO / "data" / "musique_sample"))
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    from llama_cpp import Llama

    ds = load_dataset(a.dataset, limit=a.questions, subset="stratified")
    by_id = {p.id: p for p in ds.passages}
    prompts = [render("qa", passages=[by_id[p] for p in q.gold_ids if p in by_id], question=q.question)
               for q in ds.questions]
    path = resolve_model_path(a.model)
    runs: dict[int, dict] = {}
    for n in a.threads:
        llm = Llama(model_path=str(path), n_threads=n, n_threads_batch=n, n_ctx=a.n_ctx, verbose=False, seed=0)
        texts, secs, prompt_tokens = [], [], []
        for msgs in prompts:
            llm.reset()  # no prefix reuse between calls: every thread count evaluates every prompt whole
            t0 = time.perf_counter()
            out = llm.create_chat_completion(messages=msgs, temperature=0.0, max_tokens=a.max_tokens, seed=0)
            secs.append(time.perf_counter() - t0)
            texts.append(out["choices"][0]["message"]["content"])
            prompt_tokens.append(out["usage"]["prompt_tokens"])
        runs[n] = {"seconds": secs, "texts": texts, "prompt_tokens": prompt_tokens}
        print(f"n_threads={n}: {sum(secs) / len(secs):.1f} s/call over {len(secs)} calls "
              f"(prompt tokens {min(prompt_tokens)}-{max(prompt_tokens)})", flush=True)
        del llm
    base = a.threads[0]
    result = {
        "model": str(path), "questions": [q.id for q in ds.questions], "max_tokens": a.max_tokens,
        "seconds_per_call": {n: sum(r["seconds"]) / len(r["seconds"]) for n, r in runs.items()},
        "speedup_vs_first": {n: sum(runs[base]["seconds"]) / sum(r["seconds"]) for n, r in runs.items()},
        "identical_replies": {n: sum(x == y for x, y in zip(runs[base]["texts"], r["texts"], strict=True))
                              for n, r in runs.items()},
        "calls": len(prompts), "runs": runs,
    }
    for n in a.threads[1:]:
        print(f"n_threads={n} vs {base}: {result['speedup_vs_first'][n]:.2f}x, identical replies "
              f"{result['identical_replies'][n]}/{len(prompts)}")
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(result, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
