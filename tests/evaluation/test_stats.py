"""Estimators and intervals of `ormix.evaluation.stats`: properties that hold for every input."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ormix.evaluation.stats import mean_interval, paired_interval, pass_at_k, pass_hat_k, t_quantile


@st.composite
def counts(draw, max_n: int = 60):
    n = draw(st.integers(1, max_n))
    c = draw(st.integers(0, n))
    k = draw(st.integers(1, n))
    return n, c, k


@given(counts())
def test_pass_at_k_is_chens_estimator_and_bounded(nck):
    n, c, k = nck
    value = pass_at_k(n, c, k)
    assert 0.0 <= value <= 1.0
    assert value == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k), abs=1e-12)
    assert pass_hat_k(n, c, k) == pytest.approx(math.comb(c, k) / math.comb(n, k), abs=1e-12)


@given(counts())
def test_pass_at_k_is_monotone_in_k_and_c(nck):
    n, c, k = nck
    if k < n:
        assert pass_at_k(n, c, k + 1) >= pass_at_k(n, c, k) - 1e-12
        assert pass_hat_k(n, c, k + 1) <= pass_hat_k(n, c, k) + 1e-12
    if c < n:
        assert pass_at_k(n, c + 1, k) >= pass_at_k(n, c, k) - 1e-12
        assert pass_hat_k(n, c + 1, k) >= pass_hat_k(n, c, k) - 1e-12


@given(counts())
def test_pass_hat_k_below_pass_at_1_below_pass_at_k_and_k1_is_the_success_rate(nck):
    n, c, k = nck
    assert pass_at_k(n, c, 1) == c / n == pass_hat_k(n, c, 1)
    assert pass_hat_k(n, c, k) <= pass_at_k(n, c, 1) + 1e-12 <= pass_at_k(n, c, k) + 2e-12


@given(st.lists(st.lists(st.booleans(), min_size=3, max_size=3), min_size=1, max_size=30))
def test_pass_at_n_is_the_empirical_any_success_rate(tasks):
    # n == k: each task's pass@k is 1 exactly when one of its samples succeeded (no estimation left).
    values = [pass_at_k(3, sum(t), 3) for t in tasks]
    assert values == [1.0 if any(t) else 0.0 for t in tasks]
    assert [pass_hat_k(3, sum(t), 3) for t in tasks] == [1.0 if all(t) else 0.0 for t in tasks]


def test_pass_at_k_at_large_n_is_stable():
    assert pass_at_k(10_000, 1, 100) == pytest.approx(0.01, abs=1e-12)
    assert pass_at_k(10_000, 9_999, 2) == 1.0
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(4, 1, 5)


unit_values = st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=1, max_size=80)
binary_values = st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=80)


@given(st.one_of(unit_values, binary_values), st.sampled_from([0.5, 0.8, 0.95, 0.99]))
def test_interval_holds_the_estimate_inside_the_unit_range(values, confidence):
    iv = mean_interval(values, confidence)
    assert iv.n == len(values)
    assert iv.value == pytest.approx(np.mean(values))
    assert iv.low is not None and iv.high is not None
    assert 0.0 <= iv.low <= iv.value <= iv.high <= 1.0


@given(st.one_of(unit_values, binary_values))
def test_a_higher_confidence_gives_a_wider_interval(values):
    narrow, wide = mean_interval(values, 0.8), mean_interval(values, 0.99)
    assert wide.low <= narrow.low + 1e-12 and narrow.high <= wide.high + 1e-12


def test_binary_values_get_the_wilson_interval():
    iv = mean_interval([1.0] * 3 + [0.0] * 13)
    z = 1.959963984540054
    p, n = 3 / 16, 16
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert (iv.low, iv.high) == pytest.approx((centre - half, centre + half))
    # Every task failed: the interval is not a point (a t-interval would say [0, 0]).
    assert mean_interval([0.0] * 16).high == pytest.approx(z * z / (16 + z * z))


def test_values_outside_the_unit_range_get_a_t_interval():
    values = [2.0, 4.0, 6.0, 8.0]
    iv = mean_interval(values)
    half = t_quantile(0.975, 3) * np.std(values, ddof=1) / 2
    assert (iv.low, iv.high) == pytest.approx((5 - half, 5 + half))
    assert mean_interval([3.0]).low is None


@given(st.one_of(unit_values, binary_values))
def test_the_paired_interval_of_identical_evals_covers_zero(values):
    iv = paired_interval(values, values)
    assert iv.value == 0.0 and iv.covers(0.0)


@given(
    st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=60),
    st.sampled_from([0.8, 0.95]),
)
def test_the_paired_interval_holds_the_difference_and_is_antisymmetric(pairs, confidence):
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    iv = paired_interval(a, b, confidence)
    assert iv.value == pytest.approx(np.mean(b) - np.mean(a))
    assert -1.0 <= iv.low <= iv.value <= iv.high <= 1.0
    swapped = paired_interval(b, a, confidence)
    assert (swapped.low, swapped.high) == pytest.approx((-iv.high, -iv.low), abs=1e-9)


def test_the_paired_interval_sees_a_clear_improvement_and_uses_the_pairing():
    a = [0.0] * 12 + [1.0] * 4
    b = [1.0] * 12 + [1.0] * 4
    assert paired_interval(a, b).low > 0.3
    # Unscaled values: the paired t-interval of the differences.
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    y = x + np.array([0.5, 0.7, 0.4, 0.6, 0.5])
    iv = paired_interval(x, y)
    d = y - x
    half = t_quantile(0.975, 4) * d.std(ddof=1) / math.sqrt(5)
    assert (iv.low, iv.high) == pytest.approx((d.mean() - half, d.mean() + half))
    with pytest.raises(ValueError, match="same tasks"):
        paired_interval([1.0], [1.0, 0.0])


@settings(max_examples=50)
@given(st.integers(1, 400), st.sampled_from([0.9, 0.975, 0.995]))
def test_t_quantile_inverts_the_t_distribution(df, p):
    q = t_quantile(p, df)
    if df in (1, 2):  # closed forms
        exact = math.tan(math.pi * (p - 0.5)) if df == 1 else (2 * p - 1) / math.sqrt(2 * p * (1 - p))
        assert q == pytest.approx(exact, rel=1e-9)
    assert t_quantile(1 - p, df) == pytest.approx(-q)
    assert q > NormalDist().inv_cdf(p)  # heavier tails than the normal


def test_t_quantile_known_values():
    for df, expected in [(3, 3.182446305), (10, 2.228138852), (30, 2.042272456), (1000, 1.962339081)]:
        assert t_quantile(0.975, df) == pytest.approx(expected, rel=1e-8)


def test_a_paired_interval_over_two_tasks_claims_no_change_one_task_made():
    # 2 tasks always correlate perfectly; the demo's evals (2 tasks a member) once read +0.25 [0.01, 0.50].
    iv = paired_interval([0.5, 0.0], [1.0, 0.0])
    assert iv.value == 0.25 and iv.covers(0.0)
