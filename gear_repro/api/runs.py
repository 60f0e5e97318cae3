"""The report's data as DataFrames: ``load_runs`` (one row per question × run) and ``compare`` (the claims' paired
test), read by the same functions as ``gear-repro-report`` (:mod:`gear_repro.reporting.runs`,
:mod:`gear_repro.reporting.evidence`, :mod:`gear_repro.evaluation.per_question`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from gear_repro.evaluation.stats import DEFAULT_RESAMPLES, DEFAULT_SEED, PairedResult

__all__ = ["compare", "load_runs"]

_BASE = ["run", "run_dir", "dataset", "method", "id", "question", "type"]


def load_runs(paths: Sequence[str | Path] | str | Path) -> pd.DataFrame:
    """Every finished run under ``paths`` (run dirs or sweep folders, as ``gear-repro-report`` takes them), one row
    per question × run: ``run`` (the report's row label), ``run_dir``, ``dataset``, ``method``, ``id``,
    ``question``, ``type``, ``recall@k`` for each evaluated k (0-100; NaN for a question without gold), ``em``/``f1``
    (0-100, QA runs), ``tokens`` (retrieval-stage LLM tokens of one pass), ``calls``, ``rounds`` (GEAR's rounds
    run), ``error`` (None, or why the question failed: it is scored as a miss, as in the tables).

    Raises:
        GearError: a path that does not exist, or no finished run under ``paths``.
    """
    from gear_repro.evaluation.per_question import question_values
    from gear_repro.reporting.runs import find_runs, load_predictions

    if isinstance(paths, str | Path):
        paths = [paths]
    rows: list[dict[str, Any]] = []
    columns = list(_BASE)
    for run in find_runs(list(paths)):
        preds = load_predictions(run)
        keys = [f"recall@{k}" for k in run.ks] + ["em", "f1", "tokens", "calls"]
        values = {key: question_values(preds, key) for key in keys}
        for key in keys:
            if key not in columns:
                columns.append(key)
        for p in preds:
            qid = str(p["id"])
            row = {"run": run.label, "run_dir": str(run.path), "dataset": run.dataset, "method": run.method,
                   "id": qid, "question": p.get("question"), "type": p.get("type")}
            for key in keys:
                row[key] = values[key].get(qid, float("nan"))
            row["rounds"] = len(p.get("rounds") or [])
            row["error"] = p.get("error")
            rows.append(row)
    return pd.DataFrame(rows, columns=[*columns, "rounds", "error"])


def _run(x: Any) -> Any:
    from gear_repro.reporting.runs import RunResult, find_runs
    from gear_repro.utils.errors import GearError

    if isinstance(x, RunResult):
        return x
    runs = find_runs([x])
    if len(runs) != 1:
        raise GearError(f"compare: {x} holds {len(runs)} finished runs; name one run dir")
    return runs[0]


def compare(a: str | Path | Any, b: str | Path | Any, metric: str = "recall@5", *, intersect: bool = False,
            resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> PairedResult:
    """The paired test of ``metric`` between runs ``a`` and ``b`` (run dirs), as the claims scoreboard runs it:
    per-question values on the same question ids (``intersect=True``: on the ids both hold, else a differing set
    is refused), questions that errored in either run left out, a paired bootstrap interval of mean(a - b) and a
    sign-flip p-value (:func:`gear_repro.evaluation.stats.paired_test`). ``metric``: ``recall@k``, ``em``, ``f1``,
    ``tokens``, ``recall@k@round<n>``.

    Raises:
        GearError: the runs read different corpus or question files, no values of ``metric``, or no question left.
    """
    from gear_repro.evaluation.stats import paired_test
    from gear_repro.reporting.claims import errored
    from gear_repro.reporting.evidence import Pairing, align, paired_arrays, values
    from gear_repro.reporting.runs import different_data
    from gear_repro.utils.errors import GearError

    ra, rb = _run(a), _run(b)
    why = different_data(ra, rb)
    if why:
        raise GearError(f"compare: the runs read {why}: no question-by-question comparison")
    va, vb = values(ra, metric), values(rb, metric)
    if not va or not vb:
        raise GearError(f"compare: no per-question {metric} in {ra.path if not va else rb.path}")
    pairing = align(va, vb, intersect, f"compare {metric}", option="intersect=True")
    failed = errored(ra) | errored(rb)
    kept = [q for q in pairing.ids if q not in failed]
    if not kept:
        raise GearError("compare: every shared question errored in a or b")
    pairing = Pairing(kept, pairing.dropped_a, pairing.dropped_b)
    xa, xb = paired_arrays(va, vb, pairing)
    return paired_test(xa, xb, resamples, seed)
