"""The explorer's plot series, with the tables' 95% bootstrap intervals over questions (docs/evidence.md):

- recall@k curves, k = 1..the saved depth of each run (its longest final list, at least its largest evaluated k,
  at most ``run.save_depth``);
- recall@K per round n = 1..N (K = the run's largest evaluated k; the list the method had after round n, carried
  forward: Fig. 2), single-step runs as a flat line;
- recall@K per hop type (Fig. 3);
- cumulative input and output retrieval-stage LLM tokens per question after each round (Fig. 4; QA excluded).

Per-question values follow :mod:`gear_repro.evaluation.per_question` (an errored question counts as 0), so the
points at k = 5/10/15 equal the tables' numbers and intervals (the same bootstrap draws:
:func:`gear_repro.evaluation.stats.bootstrap_cis`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from gear_repro.evaluation.aggregate import calls_at_k, ranking_for_k, run_k
from gear_repro.evaluation.metrics import recall_at_k
from gear_repro.evaluation.per_question import question_values
from gear_repro.evaluation.stats import Interval, bootstrap_cis
from gear_repro.reporting.evidence import EvidenceOptions, predictions, values_interval
from gear_repro.reporting.runs import RunResult


def _series(label: str, xs: Sequence[int], cis: Sequence[Interval], **extra: Any) -> dict[str, Any]:
    return {"label": label, "x": list(xs), "mean": [round(c.mean, 3) for c in cis], "lo": [round(c.low, 3) for c in cis],
            "hi": [round(c.high, 3) for c in cis], "n": cis[0].n if cis else 0, **extra}


def _scored(preds: Sequence[dict]) -> list[dict]:
    return [p for p in preds if p.get("gold_ids")]


def recall_curve(run: RunResult, preds: Sequence[dict], opts: EvidenceOptions) -> dict[str, Any] | None:
    """R@k for k = 1..depth with intervals: depth = the largest evaluated k or, when longer, the longest final list,
    at most ``run.save_depth`` (beyond a question's list its recall stays what the whole list found)."""
    scored = _scored(preds)
    if not scored:
        return None
    save = int((run.config.get("run") or {}).get("save_depth") or 100)
    depth = min(save, max(_max_k(run), *(len((p.get("rankings") or {}).get("final", [])) for p in scored)))
    if depth < 1:
        return None
    m = np.zeros((len(scored), depth))
    for i, p in enumerate(scored):  # an errored question: its recorded ranking (empty: 0), as metrics.json
        for k in range(1, depth + 1):
            m[i, k - 1] = 100.0 * recall_at_k(ranking_for_k(p, k), p["gold_ids"], k)
    return _series(run.label, range(1, depth + 1), bootstrap_cis(m, opts.resamples, opts.seed, opts.alpha,
                                                                 ids=[p["id"] for p in scored]))


def _max_k(run: RunResult) -> int:
    return max(int(k) for k in (run.config.get("run") or {}).get("ks") or [15])


def _n_rounds(run: RunResult, preds: Sequence[dict]) -> int:
    agent = run.config.get("agent") or {}
    return int(agent.get("max_rounds") or (run.config.get("dataset") or {}).get("max_rounds")
               or max(len(p.get("rounds") or []) for p in preds) or 1)


def recall_by_round(run: RunResult, preds: Sequence[dict], opts: EvidenceOptions) -> dict[str, Any] | None:
    """R@K after each round (multi-step runs), or the run's R@K as a flat line (single-step)."""
    scored = _scored(preds)
    if not scored:
        return None
    k = _max_k(run)
    if not any(p.get("rounds") for p in scored):
        vals = question_values(scored, f"recall@{k}")
        ci = values_interval(vals, opts)
        return None if ci is None else _series(run.label, [1], [ci], flat=True, k=k)
    n = _n_rounds(run, scored)
    cols = [question_values(scored, f"recall@{k}@round{r}") for r in range(1, n + 1)]
    m = np.array([[c[str(p["id"])] for c in cols] for p in scored])
    return _series(run.label, range(1, n + 1), bootstrap_cis(m, opts.resamples, opts.seed, opts.alpha,
                                                             ids=[p["id"] for p in scored]), flat=False, k=k)


def recall_by_type(run: RunResult, preds: Sequence[dict], opts: EvidenceOptions) -> dict[str, Any] | None:
    """R@K per hop type (question ``type``) with intervals."""
    scored = _scored(preds)
    if not scored:
        return None
    k = _max_k(run)
    vals = question_values(scored, f"recall@{k}")
    by_type: dict[str, dict[str, float]] = defaultdict(dict)
    for p in scored:
        by_type[p.get("type") or "all"][str(p["id"])] = vals[str(p["id"])]
    cis = {t: values_interval(v, opts) for t, v in sorted(by_type.items())}
    return {"label": run.label, "k": k, "types": [{"type": t, "n": c.n, "mean": round(c.mean, 3), "lo": round(c.low, 3),
                                                  "hi": round(c.high, 3)} for t, c in cis.items() if c is not None]}


def tokens_by_round(run: RunResult, preds: Sequence[dict], opts: EvidenceOptions) -> list[dict[str, Any]]:
    """Cumulative retrieval-stage input and output tokens per question after rounds 1..N (one pass at the largest k;
    single-step methods at n = 1), two series with intervals; [] without such calls."""
    from gear_repro.reporting.figures import retrieval_stages

    stages = retrieval_stages()
    if not preds or not any(c.get("stage") in stages for p in preds for c in p.get("llm_calls") or []):
        return []
    multi = any(p.get("rounds") for p in preds)
    n = _n_rounds(run, preds) if multi else 1
    k = run_k(preds)
    inp, out = np.zeros((len(preds), n)), np.zeros((len(preds), n))
    for i, p in enumerate(preds):
        for c in calls_at_k(p.get("llm_calls") or [], k):
            if c.get("stage") not in stages:
                continue
            r = max(1, int(c.get("round") or 0))
            if r > n:
                continue
            inp[i, r - 1:] += int(c.get("prompt_tokens") or 0)
            out[i, r - 1:] += int(c.get("completion_tokens") or 0)
    xs, ids = range(1, n + 1), [p["id"] for p in preds]
    return [_series(f"{run.label} input", xs, bootstrap_cis(inp, opts.resamples, opts.seed, opts.alpha, ids=ids),
                    dashed=False),
            _series(f"{run.label} output", xs, bootstrap_cis(out, opts.resamples, opts.seed, opts.alpha, ids=ids),
                    dashed=True)]


def plot_data(runs: Sequence[RunResult], opts: EvidenceOptions) -> dict[str, Any]:
    """Every plot series of the runs of one dataset (QA bounds left out: they retrieve nothing)."""
    curves, rounds, types, tokens = [], [], [], []
    for run in runs:
        if run.is_qa_bound:
            continue
        preds = predictions(run)
        for target, series in ((curves, recall_curve(run, preds, opts)), (rounds, recall_by_round(run, preds, opts)),
                               (types, recall_by_type(run, preds, opts))):
            if series is not None:
                target.append(series)
        tokens += tokens_by_round(run, preds, opts)
    return {"curves": curves, "rounds": rounds, "types": types, "tokens": tokens}
