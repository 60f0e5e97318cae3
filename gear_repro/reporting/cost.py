"""Cost and latency per method (cost.md / cost.csv; docs/evidence.md).

One row per run, for ONE pass of the method at one k (single-step methods whose output depends on k run once
per evaluated k, Table 2: the row is the pass at the largest k, not the sum of the passes):

- retrieval ms/query p50 / p95: the method's own time per question (trace timings of that pass; else the
  question's total minus its QA call latency), on this machine;
- end-to-end s/question (mean): method + QA reader for one pass;
- LLM calls, input and output tokens per question (QA included; extraction is offline and excluded);
- dollars per 1,000 questions at the dated list prices of gear_repro/resources/prices.yaml (default model: the
  paper's gpt-4o-mini), counting every call as billed (a cache hit here is a paid call for a fresh user).

Ledger records tagged with their pass's k are filtered exactly; untagged records of matched-k runs are split
evenly over the passes and the row is marked "≈" (gear_repro/evaluation/per_question.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from gear_repro.evaluation.per_question import call_counts, pass_share, passes, timing
from gear_repro.llm.prices import PRICES_YAML, load_prices, price_for_model, usd  # noqa: F401  (the report CLI reads them here)
from gear_repro.reporting.evidence import predictions
from gear_repro.reporting.runs import RunResult


def _pct(xs: list[float], q: float) -> float | None:
    return float(np.percentile(xs, q)) if xs else None


def cost_table(runs: Sequence[RunResult], prices: dict) -> pd.DataFrame:
    rows = []
    for run in runs:
        # a failed question's calls cost nothing: not a saving
        preds, failed = RunResult.split_errored(predictions(run))
        if not preds:
            continue
        counts = [call_counts(p) for p in preds]
        times = [timing(p) for p in preds]
        ret = [1000 * t["retrieval_s"] for t in times if t["retrieval_s"] is not None]
        e2e = [t["e2e_s"] for t in times if t["e2e_s"] is not None]
        n = len(preds)
        calls = sum(c["calls"] for c in counts) / n
        tin = sum(c["prompt_tokens"] for c in counts) / n
        tout = sum(c["completion_tokens"] for c in counts) / n
        ks = passes(preds[0])
        rows.append({
            "method": run.label, "dataset": run.dataset, "n_questions": n, "n_errored": len(failed),
            "k": int(ks[-1]) if ks else None, "passes_in_run": len(ks) or 1,
            "retrieval_ms_p50": _pct(ret, 50), "retrieval_ms_p95": _pct(ret, 95),
            "e2e_s_mean": float(np.mean(e2e)) if e2e else None,
            "llm_calls_per_q": calls, "input_tokens_per_q": tin, "output_tokens_per_q": tout,
            "usd_per_1000_q": usd(tin, tout, prices, per=1000),
            "price_model": prices["model"], "price_date": prices["date"],
            "approx_split": pass_share(preds), "run_dir": str(run.path),
        })
    return pd.DataFrame(rows)


def cost_markdown(df: pd.DataFrame, prices: dict) -> str:
    def f(x, fmt):
        return "–" if x is None or pd.isna(x) else fmt.format(x)

    lines = [
        "### Cost and latency per method (one pass at one k)",
        "",
        f"Latency measured on this machine. $ per 1,000 questions at {prices['model']} list prices "
        f"({prices['currency']} {prices['input']}/1M input, {prices['output']}/1M output tokens; as of {prices['date']}; "
        f"{prices['source']}), every call counted as billed. ≈: untagged matched-k ledger split evenly over passes. "
        "N: questions that did not error (an errored question's calls are left out, not priced at 0).",
        "",
        "| method | dataset | N | errored | k | retrieval ms/q p50 | p95 | end-to-end s/q | LLM calls/q | input tok/q | "
        "output tok/q | $/1k q | run |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for _, r in df.iterrows():
        approx = "≈" if r["approx_split"] else ""
        lines.append(
            f"| {r['method']} | {r['dataset']} | {r['n_questions']} | {r['n_errored']} | {f(r['k'], '{:.0f}')} | "
            f"{f(r['retrieval_ms_p50'], '{:.1f}')} | {f(r['retrieval_ms_p95'], '{:.1f}')} | {f(r['e2e_s_mean'], '{:.3g}')} | "
            f"{approx}{r['llm_calls_per_q']:.2f} | {approx}{r['input_tokens_per_q']:.0f} | "
            f"{approx}{r['output_tokens_per_q']:.0f} | {approx}{r['usd_per_1000_q']:.3f} | {Path(r['run_dir']).name} |")
    return "\n".join(lines) + "\n"


def write_cost(runs: Sequence[RunResult], out_dir: str | Path, prices: dict) -> list[Path]:
    df = cost_table(runs, prices)
    if df.empty:
        return []
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv, md = out / "cost.csv", out / "cost.md"
    df.to_csv(csv, index=False)
    md.write_text(cost_markdown(df, prices), encoding="utf-8")
    return [csv, md]
