"""Uncertainty of per-question metrics: bootstrap intervals and paired tests (docs/evidence.md).

Every metric of the paper (Recall@k, EM, F1; DESIGN.md "Readings") is a mean over questions, so its
uncertainty is estimated by resampling questions:

- :func:`bootstrap_ci` — percentile bootstrap of the mean (Efron & Tibshirani 1993, §13.3): draw ``resamples``
  samples of n questions with replacement, take the mean of each, report the α/2 and 1-α/2 percentiles.
- :func:`paired_test` — two methods on the same questions: d_i = a_i - b_i; the interval of mean(d) is the
  paired percentile bootstrap (resample question indices, keep pairs together); the p-value is the two-sided
  sign-flip permutation test of H0 "d_i is symmetric around 0" (Fisher's randomisation test):
  p = (1 + #{|mean(s·d)| >= |mean(d)|}) / (1 + R) over R random sign vectors s, or exactly over all 2^n sign
  vectors when 2^n <= R (then p = #{...} / 2^n).
- :func:`questions_needed` — n at which a paired test at level α with power 1-β would detect the observed mean
  difference given the observed per-question sd of the differences:
  n = ceil(((z_{1-α/2} + z_{1-β}) · sd / |d|)^2)   (normal approximation; α=0.05, power 0.8 by default).

All draws are vectorised numpy over a seeded ``numpy.random.Generator`` (same inputs + seed -> same numbers).
Given the questions' ``ids``, the values are put in the order of their ids before the draws (:func:`by_ids`), so the
resampling is keyed by question id: a reordered predictions or questions file gives the same interval.
Resampling is done in chunks so memory stays bounded (resamples × n indices per chunk <= ~4M).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist

import numpy as np

DEFAULT_RESAMPLES = 2000  # bootstrap / permutation draws (default 2000)
MIN_RESAMPLES = 100  # fewer: the 2.5 % tails of a 95 % interval hold under 3 draws (gear-repro-report refuses them)
DEFAULT_SEED = 0  # seed of every draw (default 0)
DEFAULT_ALPHA = 0.05  # 1 - confidence level (95% intervals)
DEFAULT_POWER = 0.8  # power assumed by questions_needed
_CHUNK_CELLS = 4_000_000  # resamples × n per chunk


@dataclass(frozen=True)
class Interval:
    """Mean of the per-question values with its bootstrap percentile interval."""

    mean: float
    low: float
    high: float
    n: int

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class PairedResult:
    """Paired comparison a - b on the same n questions."""

    diff: float  # mean of a_i - b_i
    low: float  # bootstrap percentile interval of diff
    high: float
    p_value: float  # two-sided sign-flip permutation p-value of H0: diff = 0
    n: int
    sd: float  # sample sd (ddof=1) of the per-question differences
    mean_a: float
    mean_b: float
    exact: bool  # p-value from all 2^n sign vectors

    def as_dict(self) -> dict:
        return asdict(self)


def _as_array(values: Sequence[float] | np.ndarray) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"expected one value per question (1-d), got shape {arr.shape}")
    if arr.size and not np.all(np.isfinite(arr)):
        raise ValueError("per-question values contain NaN/inf")
    return arr


def by_ids(values: Sequence[float] | np.ndarray, ids: Sequence[object] | None) -> np.ndarray:
    """``values`` (one per question, or rows of an n × m matrix) in the order of their question ``ids`` (as text;
    equal ids keep their order); unchanged without ``ids``. The draws then depend on which question has which value,
    never on the order a file lists them in."""
    x = np.asarray(values, dtype=np.float64)
    if ids is None:
        return x
    keys = [str(i) for i in ids]
    if len(keys) != x.shape[0]:
        raise ValueError(f"{len(keys)} question ids for {x.shape[0]} values")
    return x[sorted(range(len(keys)), key=keys.__getitem__)]


def bootstrap_means(values: Sequence[float] | np.ndarray, resamples: int = DEFAULT_RESAMPLES,
                    seed: int = DEFAULT_SEED) -> np.ndarray:
    """Means of ``resamples`` with-replacement resamples of ``values`` (shape [resamples])."""
    x = _as_array(values)
    n = x.size
    if n == 0:
        raise ValueError("bootstrap of an empty sample")
    rng = np.random.default_rng(seed)
    out = np.empty(resamples, dtype=np.float64)
    step = max(1, _CHUNK_CELLS // n)
    for start in range(0, resamples, step):
        stop = min(resamples, start + step)
        idx = rng.integers(0, n, size=(stop - start, n))
        out[start:stop] = x[idx].mean(axis=1)
    return out


def _percentiles(draws: np.ndarray, alpha: float) -> tuple[float, float]:
    lo, hi = np.quantile(draws, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def bootstrap_ci(values: Sequence[float] | np.ndarray, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                 alpha: float = DEFAULT_ALPHA, ids: Sequence[object] | None = None) -> Interval:
    """Mean and (1-α) percentile-bootstrap interval over questions; ``ids``: the questions' ids, which key the
    resampling (:func:`by_ids`)."""
    x = _as_array(by_ids(values, ids))
    if x.size == 0:
        raise ValueError("bootstrap of an empty sample")
    lo, hi = _percentiles(bootstrap_means(x, resamples, seed), alpha)
    m = float(x.mean())
    # a constant sample gives draws equal to m up to rounding: pin the interval to it exactly
    return Interval(m, min(lo, m), max(hi, m), int(x.size))


def bootstrap_cis(columns: np.ndarray, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                  alpha: float = DEFAULT_ALPHA, ids: Sequence[object] | None = None) -> list[Interval]:
    """:func:`bootstrap_ci` of every column of an (n questions × m) matrix in one pass: the same resampled question
    indices as :func:`bootstrap_ci` draws for n values with this seed, so column j's interval equals
    ``bootstrap_ci(columns[:, j])`` (to float rounding); a recall@k curve over k = 1..100 costs one draw. ``ids``:
    the rows' question ids, which key the resampling (:func:`by_ids`)."""
    x = by_ids(columns, ids)
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError(f"expected an (n questions × m) matrix with n > 0, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("per-question values contain NaN/inf")
    n, m = x.shape
    rng = np.random.default_rng(seed)
    draws = np.empty((resamples, m), dtype=np.float64)
    step = max(1, _CHUNK_CELLS // n)
    for start in range(0, resamples, step):
        stop = min(resamples, start + step)
        idx = rng.integers(0, n, size=(stop - start, n))
        rows = np.arange(stop - start)[:, None] * n
        counts = np.bincount((idx + rows).ravel(), minlength=(stop - start) * n).reshape(stop - start, n)
        draws[start:stop] = counts @ x / n
    lo, hi = np.quantile(draws, [alpha / 2, 1 - alpha / 2], axis=0)
    means = x.mean(axis=0)
    return [Interval(float(mu), min(float(a), float(mu)), max(float(b), float(mu)), n)
            for mu, a, b in zip(means, lo, hi, strict=True)]


def sign_flip_p(diffs: Sequence[float] | np.ndarray, resamples: int = DEFAULT_RESAMPLES,
                seed: int = DEFAULT_SEED) -> tuple[float, bool]:
    """Two-sided sign-flip permutation p-value of mean(diffs) = 0, and whether it was exact."""
    d = _as_array(diffs)
    n = d.size
    if n == 0:
        raise ValueError("permutation test of an empty sample")
    observed = abs(d.mean())
    tol = 1e-12 * max(1.0, float(np.abs(d).max()))
    if 2 ** n <= resamples:  # exact: every sign vector once
        signs = 1 - 2 * ((np.arange(2 ** n)[:, None] >> np.arange(n)[None, :]) & 1)
        stats = np.abs((signs * d).mean(axis=1))
        return float(np.mean(stats >= observed - tol)), True
    rng = np.random.default_rng(seed)
    hits = 0
    step = max(1, _CHUNK_CELLS // n)
    for start in range(0, resamples, step):
        stop = min(resamples, start + step)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(stop - start, n))
        hits += int(np.sum(np.abs((signs * d).mean(axis=1)) >= observed - tol))
    return (1 + hits) / (1 + resamples), False


def paired_test(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray,
                resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                alpha: float = DEFAULT_ALPHA) -> PairedResult:
    """Paired bootstrap interval and sign-flip p-value of mean(a - b); a[i], b[i] = the same question."""
    xa, xb = _as_array(a), _as_array(b)
    if xa.shape != xb.shape:
        raise ValueError(f"paired test needs one value per question on both sides ({xa.size} != {xb.size})")
    d = xa - xb
    ci = bootstrap_ci(d, resamples, seed, alpha)
    p, exact = sign_flip_p(d, resamples, seed)
    sd = float(d.std(ddof=1)) if d.size > 1 else 0.0
    return PairedResult(diff=ci.mean, low=ci.low, high=ci.high, p_value=p, n=int(d.size), sd=sd,
                        mean_a=float(xa.mean()), mean_b=float(xb.mean()), exact=exact)


def decisive_questions(alpha: float = DEFAULT_ALPHA) -> int:
    """The fewest questions on which the sign-flip test can give p < α: its smallest p at n is 2 / 2^n (6 at 0.05)."""
    return math.floor(1 - math.log2(alpha)) + 1


def questions_needed(diff: float, sd: float, alpha: float = DEFAULT_ALPHA, power: float = DEFAULT_POWER) -> float:
    """n = ceil(((z_{1-α/2} + z_{power}) · sd / |diff|)^2), and never below :func:`decisive_questions` (it said 1
    beside an undecided 1-question claim); inf when diff = 0 (to rounding: a mean of per-question differences that
    cancel is ~1e-15, not 0)."""
    if not math.isfinite(diff) or abs(diff) < 1e-9:
        return math.inf
    least = decisive_questions(alpha)
    if sd <= 0:
        return float(least)
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    return float(max(least, math.ceil((z * sd / abs(diff)) ** 2)))
