"""Per-question values of every reported quantity, from predictions.jsonl records (docs/evidence.md).

The means of these values are the table numbers; their spread gives the intervals and paired tests of
:mod:`gear_repro.evaluation.stats`. Rules (one place, so tables, claims and figures agree):

- ``recall@k`` (0-100): questions with gold passages, each scored on the ranking its record holds
  (:func:`~gear_repro.evaluation.aggregate.question_recalls`, as metrics.json): a question that errored before its
  retrieval finished holds an empty ranking and counts as 0; one whose retrieval finished and whose QA call failed
  is scored on its ranking, since R@k does not involve the reader (it was 0 here and its recall in metrics.json).
- ``em`` / ``f1`` (0-100): every question of a QA run; one without an answer (it errored) counts as 0.
- ``recall@k@round<n>``: R@k of the ranking GEAR had after round n (carried forward; Fig. 2).
- ``tokens``: retrieval-stage LLM tokens (input + output; QA and extraction excluded, as Fig. 4) of ONE pass.
- ``calls`` / ``prompt_tokens`` / ``completion_tokens``: every LLM call of one pass, QA included (cost table).

"One pass": single-step methods whose output depends on k run once per evaluated k (Table 2); the cost of
the method is the pass at the largest k. Ledger records tagged with their pass's k (``k``) are filtered to
that pass (:func:`gear_repro.evaluation.aggregate.calls_at_k`); untagged records of a matched-k run (runs from
before the tags) are divided by the number of passes (an approximation, flagged by :func:`pass_share`).
These rules are aggregate.py's (metrics.json), so the means here equal metrics.json's numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

from gear_repro.evaluation.aggregate import calls_at_k, question_recalls, round_recalls
from gear_repro.evaluation.metrics import answer_metric_of, exact_match, f1_score

NON_RETRIEVAL_STAGES = ("qa", "extract")


def passes(pred: dict) -> list[str]:
    """The k's of the matched-k passes a record holds (``rankings`` keys other than "final"), as strings."""
    return sorted((k for k in (pred.get("rankings") or {}) if k != "final"), key=int)


def _final_k(pred: dict) -> str | None:
    ks = passes(pred)
    return ks[-1] if ks else None


def pass_calls(pred: dict) -> tuple[list[dict], float]:
    """(LLM call records of the final pass, weight): weight 1 when exact, 1/passes when records are untagged."""
    calls = list(pred.get("llm_calls") or [])
    k = _final_k(pred)
    if k is None:
        return calls, 1.0
    if any(c.get("k") is not None for c in calls):
        return calls_at_k(calls, int(k)), 1.0
    per_pass = [c for c in calls if c.get("stage") not in NON_RETRIEVAL_STAGES]
    other = [c for c in calls if c.get("stage") in NON_RETRIEVAL_STAGES]
    if not per_pass:
        return other, 1.0
    return per_pass + other, 1.0 / len(passes(pred))


def pass_share(preds: Sequence[dict]) -> bool:
    """True when any record's single-pass cost had to be approximated (untagged matched-k ledger)."""
    return any(pass_calls(p)[1] != 1.0 for p in preds)


def call_counts(pred: dict) -> dict[str, float]:
    """LLM calls and tokens of one pass of one question (QA included; retrieval-stage share weighted)."""
    calls, w = pass_calls(pred)
    out = {"calls": 0.0, "prompt_tokens": 0.0, "completion_tokens": 0.0, "tokens": 0.0}
    for c in calls:
        weight = w if c.get("stage") not in NON_RETRIEVAL_STAGES else 1.0
        pt, ct = float(c.get("prompt_tokens") or 0), float(c.get("completion_tokens") or 0)
        out["calls"] += weight
        out["prompt_tokens"] += weight * pt
        out["completion_tokens"] += weight * ct
        if c.get("stage") not in NON_RETRIEVAL_STAGES:
            out["tokens"] += weight * (pt + ct)
    return out


def _pass_seconds(trace: dict) -> float | None:
    t = (trace or {}).get("timings") if isinstance(trace, dict) else None
    if not isinstance(t, dict):
        return None
    return float(sum(v for v in t.values() if isinstance(v, (int, float))))


def qa_seconds(pred: dict) -> float:
    return float(sum(c.get("latency_s") or 0.0 for c in pred.get("llm_calls") or [] if c.get("stage") == "qa"))


def timing(pred: dict) -> dict[str, float | None]:
    """Seconds of one pass: ``retrieval_s`` (method only) and ``e2e_s`` (method + QA) for one question.

    Matched-k records: the final pass's trace timings; end-to-end = total minus the other passes. Else the
    trace's timings if present, or total minus the QA call latency.
    """
    total = (pred.get("timings") or {}).get("total_s")
    trace = pred.get("trace") or {}
    k = _final_k(pred)
    if k is not None and isinstance(trace.get(k), dict):
        ret = _pass_seconds(trace[k])
        other = sum(_pass_seconds(trace.get(j) or {}) or 0.0 for j in passes(pred) if j != k)
        e2e = None if total is None else float(total) - other
        return {"retrieval_s": ret if ret is not None else e2e, "e2e_s": e2e}
    ret = _pass_seconds(trace)
    e2e = None if total is None else float(total)
    if ret is None and e2e is not None:
        ret = e2e - qa_seconds(pred)
    return {"retrieval_s": ret, "e2e_s": e2e}


def question_values(preds: Sequence[dict], key: str) -> dict[str, float]:
    """{question id: value} of one quantity (see the module docstring for the keys and rules)."""
    out: dict[str, float] = {}
    if key.startswith("recall@"):
        k_part, _, rnd = key[len("recall@"):].partition("@round")
        k = int(k_part)
        for p in preds:
            if not p.get("gold_ids"):
                continue
            if rnd:
                out[str(p["id"])] = round_recalls(p, k, int(rnd))[int(rnd) - 1]
            else:
                out[str(p["id"])] = question_recalls(p, [k])[f"recall@{k}"]
        return out
    if key in ("em", "f1"):
        if not any("answer" in p for p in preds):
            return {}
        score = exact_match if key == "em" else f1_score
        return {str(p["id"]): 100.0 * score(p["answer"] or "", p["answers"], answer_metric_of(p))
                if "answer" in p else 0.0 for p in preds}
    if key in ("tokens", "calls", "prompt_tokens", "completion_tokens"):
        return {str(p["id"]): call_counts(p)[key] for p in preds}
    raise KeyError(f"unknown per-question quantity '{key}'")
