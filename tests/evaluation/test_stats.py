"""Estimators and intervals of `ormix.evaluation._stats`: properties that hold for every input."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ormix.evaluation._stats import (
    COVERS_SEEDS_AND_TASKS,
    COVERS_TASKS,
    hierarchical_interval,
    iqm,
    mean_interval,
    paired_hierarchical_interval,
    paired_interval,
    pass_at_k,
    pass_hat_k,
    t_quantile,
)


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


# --- Several runs (seeds): hierarchical intervals over seeds and tasks ------------------------------------


@st.composite
def run_matrix(draw, min_seeds: int = 1, max_seeds: int = 5, unit: bool = True):
    """Runs × tasks values: values in [0, 1] (or any scale), the same tasks in every run."""
    seeds = draw(st.integers(min_seeds, max_seeds))
    tasks = draw(st.integers(2, 24))
    values = st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]) if unit else st.floats(-50, 50)
    return np.array(
        draw(st.lists(st.lists(values, min_size=tasks, max_size=tasks), min_size=seeds, max_size=seeds))
    )


@given(run_matrix(), st.sampled_from(["mean", "iqm"]), st.sampled_from([0.8, 0.95]))
@settings(max_examples=60, deadline=None)
def test_a_hierarchical_interval_holds_its_estimate_in_the_unit_range(y, statistic, confidence):
    iv = hierarchical_interval(y, statistic=statistic, confidence=confidence, resamples=200)
    expected = y.mean() if statistic == "mean" else iqm(y)
    assert iv.value == pytest.approx(expected) and iv.n == y.shape[1] and iv.seeds == y.shape[0]
    assert 0.0 <= iv.low <= iv.value <= iv.high <= 1.0
    assert iv.as_dict()["covers"] == ("seeds and tasks" if y.shape[0] >= 2 else "tasks")


@given(run_matrix(max_seeds=1))
def test_one_run_is_the_interval_over_tasks_only(y):
    iv, task_only = hierarchical_interval(y), mean_interval(y[0])
    assert (iv.value, iv.low, iv.high, iv.n) == (task_only.value, task_only.low, task_only.high, task_only.n)
    assert iv.over == COVERS_TASKS


@given(run_matrix(min_seeds=2, unit=False), st.integers(0, 2**32 - 1))
@settings(max_examples=40, deadline=None)
def test_the_iqm_interval_is_deterministic_under_a_seed(y, seed):
    a = hierarchical_interval(y, statistic="iqm", seed=seed, resamples=200)
    assert a == hierarchical_interval(y, statistic="iqm", seed=seed, resamples=200)
    b = paired_hierarchical_interval(y, y[:, ::-1], statistic="iqm", seed=seed, resamples=200)
    assert b == paired_hierarchical_interval(y, y[:, ::-1], statistic="iqm", seed=seed, resamples=200)


@given(run_matrix(min_seeds=1), st.sampled_from(["mean", "iqm"]), st.randoms(use_true_random=False))
@settings(max_examples=60, deadline=None)
def test_a_group_compared_with_itself_is_exactly_zero_with_a_zero_width_interval(y, statistic, rnd):
    order = list(range(len(y)))
    rnd.shuffle(order)
    iv = paired_hierarchical_interval(y, y[order], statistic=statistic, resamples=200, same_runs=True)
    assert (iv.value, iv.low, iv.high) == (0.0, 0.0, 0.0)


@given(st.integers(1, 4), st.integers(1, 4), st.integers(2, 24), st.sampled_from([0.0, 1.0]), st.booleans())
@settings(max_examples=60, deadline=None)
def test_other_runs_that_happen_to_agree_get_an_interval_over_their_tasks_not_certainty(
    sa, sb, tasks, a, differ
):
    # Every run alike within each group (no spread seen): two different models both failing every task, or
    # 3 seeds all failing against 3 all succeeding, still carry the tasks' uncertainty.
    b = 1.0 - a if differ else a
    iv = paired_hierarchical_interval(np.full((sa, tasks), a), np.full((sb, tasks), b))
    assert iv.value == b - a and iv.low is not None and iv.high is not None
    assert iv.high - iv.low > 0.0 and iv.low <= iv.value <= iv.high and -1.0 <= iv.low and iv.high <= 1.0
    one = paired_interval(np.full(tasks, a), np.full(tasks, b))
    assert (iv.low, iv.high) == pytest.approx((one.low, one.high))  # each task one trial


@given(run_matrix(max_seeds=1, unit=False), st.lists(st.floats(-20, 20), min_size=2, max_size=5))
@settings(max_examples=60, deadline=None)
def test_a_seed_effect_widens_the_interval(task_values, offsets):
    # Runs that agree on every task, then the same runs each shifted (one seed better than another): the
    # tasks' spread is unchanged; the seed component can only add to it.
    y = np.repeat(task_values, len(offsets), axis=0)
    y[:, 0] = 1000.0  # values on another scale: the t form, whose width is the variance's alone
    shift = np.array(offsets)[:, None]
    plain, shifted = hierarchical_interval(y), hierarchical_interval(y + shift)
    assert shifted.high - shifted.low >= (plain.high - plain.low) * (1 - 1e-9) - 1e-9
    if np.ptp(offsets) > 1.0 and np.ptp(task_values) < 1.0:
        assert shifted.high - shifted.low > plain.high - plain.low


def test_two_seeds_that_disagree_get_the_t_quantile_with_one_degree_of_freedom():
    # Seed variance dominates: the quantile is t(1) = 12.7, not the normal 1.96 of a percentile bootstrap.
    y = np.array([[10.0, 10.1, 9.9, 10.0] * 8, [20.0, 20.1, 19.9, 20.0] * 8])
    iv = hierarchical_interval(y)
    half = t_quantile(0.975, 1) * np.sqrt(np.var(y.mean(axis=1), ddof=1) / 2)
    assert (iv.low, iv.high) == pytest.approx((15.0 - half, 15.0 + half), rel=0.01)


def test_more_seeds_and_more_tasks_give_narrower_intervals():
    # A two-level world (seed effect and task effect on the logit scale): the mean width over draws.
    rng = np.random.default_rng(0)

    def width(seeds: int, tasks: int) -> float:
        out = []
        for _ in range(150):
            task = rng.normal(0, 1.5, size=tasks)
            seed = rng.normal(0, 0.5, size=seeds)
            p = 1 / (1 + np.exp(-(task[None, :] + seed[:, None])))
            iv = hierarchical_interval(rng.binomial(4, p) / 4)
            out.append(iv.high - iv.low)
        return float(np.mean(out))

    assert width(5, 64) < width(3, 64) < width(3, 16) < width(2, 16)


def test_a_paired_difference_of_groups_covers_seeds_and_reduces_to_the_paired_interval():
    a = np.array([[0, 0, 1, 0, 1, 0, 0, 1, 0, 0, 1, 0]] * 3, dtype=float)
    b = np.array(
        [[1, 0, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1], [1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1]] * 2, dtype=float
    )
    iv = paired_hierarchical_interval(a, b)
    assert (
        iv.value == pytest.approx(b.mean() - a.mean())
        and iv.seeds == (3, 4)
        and iv.over == COVERS_SEEDS_AND_TASKS
    )
    assert iv.low > 0.0 and iv.as_dict()["seeds"] == [3, 4]
    swapped = paired_hierarchical_interval(b, a)
    assert (swapped.low, swapped.high) == pytest.approx((-iv.high, -iv.low))
    one = paired_hierarchical_interval(a[:1], b[:1])
    plain = paired_interval(a[0], b[0])
    assert (one.value, one.low, one.high, one.over) == (plain.value, plain.low, plain.high, COVERS_TASKS)
    # One run on one side: the other side's seed variance is borrowed, so the interval still covers seeds.
    borrowed = paired_hierarchical_interval(a[:1], b)
    assert borrowed.over == COVERS_SEEDS_AND_TASKS and borrowed.high - borrowed.low > 0.0
    with pytest.raises(ValueError, match="same tasks"):
        paired_hierarchical_interval(a, b[:, :5])
    with pytest.raises(ValueError, match="statistic is one of mean, iqm"):
        hierarchical_interval(a, statistic="median")
    with pytest.raises(ValueError, match="seeds x tasks"):
        hierarchical_interval([1.0, 0.0])


@given(st.lists(st.floats(-100, 100), min_size=1, max_size=60))
def test_iqm_is_the_mean_of_the_middle_half(values):
    x = np.sort(values)
    cut = len(x) // 4
    assert iqm(values) == pytest.approx(x[cut : len(x) - cut].mean())
    assert min(values) - 1e-9 <= iqm(values) <= max(values) + 1e-9  # a mean rounds


# --- No spread seen is not certainty: values on another scale get no interval, never a point ------------

off_scale = st.one_of(st.floats(-100, -1e-3), st.floats(1.001, 100))


@given(off_scale, st.integers(2, 40))
def test_alike_values_outside_the_unit_range_get_no_interval_not_a_point(value, tasks):
    # 16 tasks all at reward -1 once read "-1.00 [-1.00, -1.00]": a certainty the tasks do not give.
    iv = mean_interval([value] * tasks)
    assert (iv.value, iv.low, iv.high, iv.n) == (pytest.approx(value), None, None, tasks)
    assert hierarchical_interval([[value] * tasks]).low is None
    for statistic in ("mean", "iqm"):
        group = hierarchical_interval([[value] * tasks] * 3, statistic=statistic, resamples=200)
        assert group.value == pytest.approx(value) and (group.low, group.high) == (None, None)


@given(
    st.lists(st.floats(-3, 3), min_size=2, max_size=30).filter(lambda a: np.ptp(a) > 0.01),
    st.floats(-2, 2).filter(lambda s: abs(s) > 1e-3),
    st.integers(1, 4),
    st.sampled_from(["mean", "iqm"]),
)
@settings(max_examples=80, deadline=None)
def test_every_task_changed_by_the_same_amount_off_the_unit_range_gives_no_interval(
    a, shift, seeds, statistic
):
    # `compare --metric mean_reward`: every task +0.5 once read "+0.50 [0.50, 0.50]".
    xa = np.array(a) - 1.5  # some values below 0: the t form
    xb = xa + shift
    iv = paired_interval(xa, xb)
    assert iv.value == pytest.approx(shift) and (iv.low, iv.high) == (None, None)
    group = paired_hierarchical_interval([xa] * seeds, [xb] * seeds, statistic=statistic, resamples=200)
    assert group.value == pytest.approx(shift) and (group.low, group.high) == (None, None)


def test_a_constant_side_off_the_unit_range_still_pairs_with_a_spread_side():
    # One eval alike on every task, the other not: the differences have spread, the paired t-interval holds.
    a, b = np.full(16, -1.0), np.array([-1.0, 0.5] * 8)
    iv = paired_interval(a, b)
    half = t_quantile(0.975, 15) * np.std(b - a, ddof=1) / 4
    assert (iv.low, iv.high) == pytest.approx((0.75 - half, 0.75 + half))


@given(st.floats(0.001, 0.999), st.integers(2, 40), st.integers(1, 4), st.sampled_from(["mean", "iqm"]))
@settings(max_examples=80, deadline=None)
def test_alike_fractions_count_each_task_as_one_trial_whatever_the_rounding(value, tasks, seeds, statistic):
    # 10 tasks at 0.01 average to 0.009999999999999998 with a variance of 1e-36, which once read as spread:
    # an interval of width 1e-18. No spread seen, to rounding, is the binomial's width at that many tasks.
    z = NormalDist().inv_cdf(0.975)
    floor = z * math.sqrt(value * (1 - value) / tasks) / (1 + z * z / tasks)  # Wilson's half-width, at least
    iv = mean_interval([value] * tasks)
    assert iv.high - iv.low > floor
    group = hierarchical_interval(np.full((seeds, tasks), value), statistic=statistic, resamples=200)
    assert group.high - group.low > floor
