"""Per-run per-question values, their intervals, and paired differences between runs (docs/evidence.md).

Bridges finished runs (:class:`~gear_repro.reporting.runs.RunResult`) and the numeric tools of
:mod:`gear_repro.evaluation.stats`. Predictions are read once per run and report invocation.
Paired comparisons are only made on the same question ids: :func:`paired` refuses runs whose question
sets differ unless ``intersect`` is set (then it pairs the shared ids and says how many were dropped).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gear_repro.evaluation.per_question import question_values
from gear_repro.evaluation.stats import (
    DEFAULT_ALPHA,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Interval,
    PairedResult,
    bootstrap_ci,
    paired_test,
)
from gear_repro.pipeline import run_folder as rf
from gear_repro.reporting.runs import RunResult, different_data, load_predictions
from gear_repro.utils.errors import GearError

ANSWER_METRICS = {"EM": "em", "F1": "f1"}


def metric_key(name: str) -> str:
    """The metrics.json / per-question key of a table metric name: "R@k" -> "recall@k" (any k), "EM" -> "em", "F1"
    -> "f1"; other names are keys already."""
    if name.startswith("R@") and name[2:].isdigit():
        return f"recall@{name[2:]}"
    return ANSWER_METRICS.get(name, name)


def run_metrics(run: RunResult) -> list[str]:
    """The table metrics a run has: R@k for each evaluated k (``run.ks``, ascending), then EM and F1."""
    recall = [f"R@{k}" for k in sorted(set(run.ks)) if f"recall@{k}" in run.metrics]
    return recall + [m for m, key in ANSWER_METRICS.items() if key in run.metrics]


def metric_order(names: Iterable[str]) -> list[str]:
    """Column order of metric names: R@k by k, then EM, F1."""
    names = list(dict.fromkeys(names))
    recall = sorted((m for m in names if m.startswith("R@") and m[2:].isdigit()), key=lambda m: int(m[2:]))
    return recall + [m for m in ANSWER_METRICS if m in names] + [m for m in names if m not in recall and
                                                                  m not in ANSWER_METRICS]


class QuestionSetMismatch(GearError):
    """Two runs compared question by question hold different question ids."""


@dataclass(frozen=True)
class EvidenceOptions:
    """Report-wide settings of intervals and tests (gear-repro-report --resamples/--seed/--intersect)."""

    resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED
    alpha: float = DEFAULT_ALPHA
    intersect: bool = False


DEFAULT_OPTIONS = EvidenceOptions()
_PRED_CACHE: dict[tuple, list[dict]] = {}


def predictions(run: RunResult) -> list[dict]:
    """The run's prediction records (runs.load_predictions), read once per file version."""

    f = Path(run.path) / rf.PREDICTIONS
    st = f.stat() if f.exists() else None
    key = (str(f), st.st_mtime_ns if st else 0, st.st_size if st else 0, repr(run.config.get("dataset")))
    if key not in _PRED_CACHE:
        _PRED_CACHE[key] = load_predictions(run)
    return _PRED_CACHE[key]


def values(run: RunResult, key: str) -> dict[str, float]:
    """{question id: value} of ``key`` (a per_question key or a table metric name such as "R@15"); {} for a recall
    at a rank the run did not evaluate (:meth:`RunResult.evaluates`)."""
    key = metric_key(key)
    if key.startswith("recall@") and not run.evaluates(int(key[len("recall@"):].partition("@")[0])):
        return {}
    return question_values(predictions(run), key)


def interval(run: RunResult, key: str, opts: EvidenceOptions = DEFAULT_OPTIONS) -> Interval | None:
    """Mean and bootstrap interval of ``key`` over the run's questions (None without predictions)."""
    v = values(run, key)
    if not v:
        return None
    return values_interval(v, opts)


def values_interval(vals: Mapping[str, float] | Sequence[float], opts: EvidenceOptions = DEFAULT_OPTIONS) -> Interval | None:
    """Mean and bootstrap interval of per-question values: ``{question id: value}`` resamples by id (the same
    interval whatever order the questions come in); a plain sequence in its own order."""
    if not len(vals):
        return None
    if isinstance(vals, Mapping):
        return bootstrap_ci(np.fromiter(vals.values(), float, len(vals)), opts.resamples, opts.seed, opts.alpha,
                            ids=list(vals))
    return bootstrap_ci(np.asarray(vals, float), opts.resamples, opts.seed, opts.alpha)


@dataclass(frozen=True)
class Pairing:
    """Question ids two runs are compared on, and how many of each run's ids were left out."""

    ids: list[str]
    dropped_a: int
    dropped_b: int


def align(va: dict[str, float], vb: dict[str, float], intersect: bool, what: str = "",
          option: str = "--intersect") -> Pairing:
    """The ids to pair: all of them when both sets are equal; the shared ones with ``intersect``; else refuse,
    naming ``option``, the caller's way to set ``intersect`` (the report's flag, the API's argument)."""
    sa, sb = set(va), set(vb)
    if sa != sb and not intersect:
        raise QuestionSetMismatch(
            f"{what}: the runs hold different question sets ({len(sa)} vs {len(sb)} questions, {len(sa & sb)} shared); "
            "a paired comparison needs the same question ids. Run both on the same subset "
            f"(dataset.subset=stratified dataset.limit=N) or pass {option} to compare the shared questions only")
    ids = sorted(sa & sb)
    if not ids:
        raise QuestionSetMismatch(f"{what}: the runs share no question")
    return Pairing(ids, len(sa) - len(ids), len(sb) - len(ids))


def paired_arrays(va: dict[str, float], vb: dict[str, float], pairing: Pairing) -> tuple[np.ndarray, np.ndarray]:
    return (np.array([va[i] for i in pairing.ids], float), np.array([vb[i] for i in pairing.ids], float))


def paired(run_a: RunResult, run_b: RunResult, key: str, opts: EvidenceOptions = DEFAULT_OPTIONS,
           key_b: str | None = None) -> tuple[PairedResult, Pairing]:
    """Paired test of ``key`` in run_a minus ``key_b`` (default ``key``) in run_b on their common question ids."""
    why = different_data(run_a, run_b)
    if why:
        raise QuestionSetMismatch(f"{run_a.path} vs {run_b.path} ({key}): the runs read {why}; a paired comparison "
                                  "needs the same questions on the same corpus")
    va, vb = values(run_a, key), values(run_b, key_b or key)
    pairing = align(va, vb, opts.intersect, f"{run_a.path} vs {run_b.path} ({key})")
    a, b = paired_arrays(va, vb, pairing)
    return paired_test(a, b, opts.resamples, opts.seed, opts.alpha), pairing
