"""Bootstrap intervals and paired tests against closed-form cases (gear_repro/evaluation/stats.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gear_repro.evaluation.stats import (
    bootstrap_ci,
    bootstrap_cis,
    bootstrap_means,
    paired_test,
    questions_needed,
    sign_flip_p,
)


def test_constant_difference_gives_zero_width_interval_at_that_constant():
    rng = np.random.default_rng(1)
    b = rng.uniform(0, 100, size=50)
    res = paired_test(b + 7.5, b)
    assert res.diff == pytest.approx(7.5)
    assert res.low == pytest.approx(7.5, abs=1e-9) and res.high == pytest.approx(7.5, abs=1e-9)
    assert res.sd == pytest.approx(0.0, abs=1e-9)
    # every sign flip other than all-plus/all-minus shrinks |mean|: p = (1 + ~0) / (1 + R)
    assert res.p_value < 0.01 and not res.exact


def test_identical_runs_interval_at_zero_and_p_one():
    a = np.array([0, 50, 100, 100, 0, 33.3, 66.7] * 9)
    res = paired_test(a, a.copy())
    assert (res.diff, res.low, res.high, res.p_value) == (0.0, 0.0, 0.0, 1.0)
    assert math.isinf(questions_needed(res.diff, res.sd))


def test_binomial_proportion_matches_wald_and_wilson():
    n, k = 400, 120  # p = 0.3
    x = np.array([1.0] * k + [0.0] * (n - k))
    ci = bootstrap_ci(x, resamples=4000, seed=3)
    p, z = k / n, 1.959964
    half = z * math.sqrt(p * (1 - p) / n)  # Wald: 0.0449
    assert ci.mean == pytest.approx(0.3)
    assert ci.low == pytest.approx(p - half, abs=0.01) and ci.high == pytest.approx(p + half, abs=0.01)
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)  # Wilson score interval
    w = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert ci.low == pytest.approx(centre - w, abs=0.01) and ci.high == pytest.approx(centre + w, abs=0.01)
    assert ci.n == n


def test_exact_sign_flip_on_small_samples():
    # d = (1, 2, 3): of the 8 sign vectors only (+,+,+) and (-,-,-) reach |mean| = 2 -> p = 2/8
    p, exact = sign_flip_p([1.0, 2.0, 3.0])
    assert exact and p == pytest.approx(0.25)
    p, exact = sign_flip_p([1.0, -1.0, 1.0, -1.0])  # mean 0: every vector is as extreme
    assert exact and p == 1.0


def test_seeded_and_vectorised_draws_are_reproducible():
    x = np.random.default_rng(0).uniform(size=37)
    assert np.array_equal(bootstrap_means(x, 500, seed=4), bootstrap_means(x, 500, seed=4))
    assert not np.array_equal(bootstrap_means(x, 500, seed=4), bootstrap_means(x, 500, seed=5))
    # chunked draws (n large) give as many means as asked, each a mean of resampled values
    big = np.arange(5000, dtype=float)
    means = bootstrap_means(big, 900, seed=0)
    assert means.shape == (900,) and big.min() <= means.min() and means.max() <= big.max()
    assert paired_test(x, x[::-1]).as_dict() == paired_test(x, x[::-1]).as_dict()


def test_questions_needed_formula():
    # ((z_.975 + z_.8) * sd / d)^2 = ((1.95996 + 0.84162) * 2 / 1)^2 = 31.4 -> 32
    assert questions_needed(1.0, 2.0) == 32
    assert questions_needed(-1.0, 2.0) == 32
    # never below the 6 questions the sign-flip test needs for p < 0.05 (its smallest p at n is 2 / 2^n)
    assert questions_needed(3.0, 0.0) == 6 and questions_needed(10.0, 1.0) == 6
    assert questions_needed(3.0, 0.0, alpha=0.01) == 8
    assert math.isinf(questions_needed(0.0, 5.0))
    cancelled = float(np.mean(np.array([100 / 3, -100 / 3, 50.0, -50.0, 0.1, -0.1]) * 1.0))  # ~1e-15, not 0
    assert math.isinf(questions_needed(cancelled + 1e-14, 22.4))


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="empty"):
        bootstrap_ci([])
    with pytest.raises(ValueError, match="one value per question"):
        paired_test([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="NaN"):
        bootstrap_ci([1.0, float("nan")])


def test_bootstrap_cis_equals_bootstrap_ci_column_by_column():
    """One draw for a whole recall@k curve: each column's interval is bootstrap_ci's for that column (same seed)."""
    rng = np.random.default_rng(3)
    m = np.column_stack([(rng.random(137) > t) * 100.0 for t in (0.2, 0.5, 0.9)] + [rng.random(137)])
    cis = bootstrap_cis(m, resamples=3000, seed=5)
    for j, ci in enumerate(cis):
        ref = bootstrap_ci(m[:, j], resamples=3000, seed=5)
        assert (ci.mean, ci.low, ci.high, ci.n) == pytest.approx((ref.mean, ref.low, ref.high, ref.n), abs=1e-9)
    assert cis[0].low < cis[0].mean < cis[0].high
    with pytest.raises(ValueError):
        bootstrap_cis(np.zeros((0, 3)))
