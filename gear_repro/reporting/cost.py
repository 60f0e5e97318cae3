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

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from gear_repro.evaluation.per_question import call_counts, pass_share, passes, timing
from gear_repro.reporting.evidence import predictions
from gear_repro.reporting.runs import RunResult
from gear_repro.utils.errors import GearError

PRICES_YAML = Path(__file__).resolve().parent.parent / "resources" / "prices.yaml"


def load_prices(path: str | Path | None = None, model: str | None = None) -> dict:
    """{model, input, output ($ per 1M tokens), date, source} of ``model`` (default: the file's default)."""
    p = Path(path) if path else PRICES_YAML
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise GearError(f"price table {p}: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("models"), dict):
        raise GearError(f"price table {p}: expected a mapping with 'models' (and 'default', 'date'); see "
                        f"{PRICES_YAML.name}")
    name = model or doc.get("default")
    if name not in doc["models"]:
        raise GearError(f"price table {p} has no model '{name}' (has: {', '.join(doc['models'])})")
    m = doc["models"][name]
    try:
        out = {"model": name, "input": float(m["input"]), "output": float(m["output"]), "date": str(doc["date"]),
               "source": doc.get("source", ""), "currency": doc.get("currency", "USD")}
    except (KeyError, TypeError, ValueError) as e:
        raise GearError(f"price table {p}: model '{name}' needs numeric 'input' and 'output' and the table a "
                        f"'date' ({type(e).__name__}: {e})") from None
    bad = [k for k in ("input", "output") if not (math.isfinite(out[k]) and out[k] >= 0)]
    if bad:  # a negative or NaN price made the cost table's $ per 1k questions negative or nan
        raise GearError(f"price table {p}: model '{name}' has {' and '.join(f'{k}: {m[k]}' for k in bad)}; prices "
                        "are $ per 1M tokens, finite and >= 0")
    return out


def price_for_model(model: str, path: str | Path | None = None) -> dict | None:
    """The price table's row (:func:`load_prices`) for a served model name: the name itself, else the longest table
    name it extends by a dated or versioned suffix (``gpt-4o-mini-2024-07-18`` -> ``gpt-4o-mini``); None when the table
    prices no such model (a local or self-hosted model: no list price)."""
    p = Path(path) if path else PRICES_YAML
    load_prices(p)  # the table's own checks, with its errors
    doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    names = sorted((n for n in doc["models"] if model == n or model.startswith(f"{n}-")), key=len, reverse=True)
    return load_prices(p, names[0]) if names else None


def usd(prompt_tokens: float, completion_tokens: float, prices: dict) -> float:
    """Dollars for ``prompt_tokens`` input and ``completion_tokens`` output tokens at ``prices`` ($ per 1M tokens)."""
    return (prompt_tokens * prices["input"] + completion_tokens * prices["output"]) / 1e6


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
            "usd_per_1000_q": 1000 * usd(tin, tout, prices),
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
