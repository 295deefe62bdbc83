"""Tests for the static plans of ormix.mixture._planner (fixed weights, temperature, round robin, schedules):
pure planning logic, so Hypothesis properties plus worked examples. Adaptive plans: test_adaptive.py."""

from __future__ import annotations

import doctest
import hashlib
import math
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ormix._errors import MixtureError
from ormix.config import MixtureConfig
from ormix.mixture import _planner as planner_module
from ormix.mixture._planner import Planner, derive_seed, starvation_probability

NAMES = ["alpha", "beta", "gamma", "delta", "eps", "zeta"]

weight_maps = st.integers(2, 6).flatmap(
    lambda m: st.lists(st.floats(0.001, 10.0), min_size=m, max_size=m).map(
        lambda ws: dict(zip(NAMES[: len(ws)], ws, strict=False))
    )
)

# Every Hypothesis test here is derandomized: the same examples on every run, so CI never fails (or passes) by
# luck; max_examples sets how many cases each explores.
DETERMINISTIC = settings(derandomize=True, deadline=None, database=None)
EPS = 1e-6


def _planner(tasks: dict[str, list[int]], **config: Any) -> Planner:
    members = {m: {"target": "local:echo"} for m in tasks}
    return Planner(MixtureConfig(members=members, **config), tasks)


def _steps(planner: Planner, steps: int) -> list[Counter[str]]:
    return [Counter(m for m, _ in planner.rows(s)) for s in range(1, steps + 1)]


def _norm(ws: dict[str, float]) -> dict[str, float]:
    total = math.fsum(ws.values())
    return {m: w / total for m, w in ws.items()}


def _check_bounds(planner: Planner, steps: int, starts: set[int], exact: set[int]) -> None:
    """Every step has k rows; C <= ceil(T) always; floor(T) <= C on the steps of `exact` (constant weights),
    C > T - 2 on the others; T and C counted from the last of `starts` (a phase start)."""
    k = planner.k
    assert k is not None
    target: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for s in range(1, steps + 1):
        if s in starts:
            target, count = Counter(), Counter()
        w = planner.weights(s)
        rows = planner.rows(s)
        assert len(rows) == k
        for m in planner.members:
            target[m] += w[m] * k
            count[m] += sum(r == m for r, _ in rows)
            if w[m] == 0 and target[m] < EPS:
                assert count[m] == 0, (s, m)
            assert count[m] <= math.ceil(target[m] - EPS), (s, m, count[m], target[m])
            if s in exact:
                assert count[m] >= math.floor(target[m] + EPS), (s, m, count[m], target[m])
            else:
                assert count[m] > target[m] - 2, (s, m, count[m], target[m])


def test_doctests() -> None:
    result = doctest.testmod(planner_module)
    assert result.attempted > 10 and result.failed == 0


# ---------------------------------------------------------------------------------------------- weights


def test_weights_normalised_and_uniform_without_weights() -> None:
    p = _planner({"a": [0], "b": [0]}, weights={"a": 3, "b": 1}, prompts_per_step=4)
    assert p.weights(1) == {"a": 0.75, "b": 0.25}
    assert _planner({"b": [0], "a": list(range(100))}, prompts_per_step=2).weights(1) == {"a": 0.5, "b": 0.5}
    rr = _planner({"a": [0], "b": list(range(9))}, strategy="round_robin", prompts_per_step=2)
    assert rr.weights(1) == {"a": 0.5, "b": 0.5}


def test_weights_near_the_float_limit_plan_by_their_ratios() -> None:
    # Their sum overflows a float: only the ratios matter, so they plan as 1:1 and 2:1 do.
    for weights, expected in (({"a": 1e308, "b": 1e308}, 0.5), ({"a": 1.6e308, "b": 0.8e308}, 2 / 3)):
        p = _planner({"a": [0], "b": [0]}, weights=weights, prompts_per_step=6)
        assert p.weights(1)["a"] == pytest.approx(expected)
        assert Counter(m for m, _ in p.rows(1))["a"] == round(6 * expected)
    phases = [{"until_step": 2, "weights": {"a": 1e308, "b": 1e308}}, {"weights": {"a": 1, "b": 3}}]
    assert _planner({"a": [0], "b": [0]}, schedule=phases, prompts_per_step=4).weights(1) == {
        "a": 0.5,
        "b": 0.5,
    }


def test_temperature_limits() -> None:
    tasks = {"a": list(range(10)), "b": list(range(90)), "c": list(range(900))}

    def base(t: float) -> dict[str, float]:
        return _planner(tasks, strategy="temperature", temperature=t).base

    assert base(1.0) == pytest.approx({"a": 0.01, "b": 0.09, "c": 0.9})
    assert all(abs(p - 1 / 3) < 1e-4 for p in base(1e6).values())
    assert base(0.01)["c"] == pytest.approx(1.0)  # no overflow
    assert base(2.0)["a"] == pytest.approx(math.sqrt(10) / (math.sqrt(10) + math.sqrt(90) + math.sqrt(900)))


@settings(DETERMINISTIC, max_examples=40)
@given(st.dictionaries(st.sampled_from(NAMES), st.integers(1, 3000), min_size=1), st.floats(0.05, 50.0))
def test_temperature_is_a_distribution_and_monotone(counts: dict[str, int], t: float) -> None:
    p = _planner({m: list(range(n)) for m, n in counts.items()}, strategy="temperature", temperature=t).base
    assert math.isclose(math.fsum(p.values()), 1.0)
    for a in counts:
        for b in counts:
            if counts[a] > counts[b]:
                assert p[a] >= p[b]


def test_a_member_without_tasks_is_refused() -> None:
    with pytest.raises(MixtureError, match=r"\['b'\] have no tasks: check num_tasks"):
        _planner({"a": [0], "b": []})
    with pytest.raises(MixtureError, match="no train members"):
        Planner(MixtureConfig(members={"a": {"target": "local:echo"}}), {})


# ---------------------------------------------------------------------------------------------- quotas


@settings(DETERMINISTIC, max_examples=150)
@given(weight_maps, st.integers(1, 16), st.integers(0, 2**32), st.booleans())
def test_constant_weights_keep_every_count_within_one_row_of_target(
    ws: dict[str, float], k: int, seed: int, temperature: bool
) -> None:
    # The quota method's guarantee (module docstring): floor(T) <= C <= ceil(T) at every step.
    tasks = {m: list(range(1 + int(w * 7))) for m, w in ws.items()}
    config: dict[str, Any] = {"strategy": "temperature"} if temperature else {"weights": ws}
    p = _planner(tasks, prompts_per_step=k, seed=seed, **config)
    _check_bounds(p, 60, {1}, set(range(1, 61)))


def test_former_failures_of_carried_largest_remainder_are_exact() -> None:
    # Per-step largest remainder with the remainders carried lets a member fall more than a row behind with
    # constant weights (members in debt shrink the extras left for the others); the quota rule does not.
    for ws, k in (({"a": 0.55, "b": 0.3, "c": 0.1, "d": 0.05}, 3), ({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3}, 1)):
        for seed in range(20):
            p = _planner({m: [0] for m in ws}, weights=ws, prompts_per_step=k, seed=seed)
            _check_bounds(p, 81, {1}, set(range(1, 82)))


@settings(DETERMINISTIC, max_examples=300)
@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from([0.0, 0.05, 0.3, 1.0, 2.5, 7.0]), min_size=4, max_size=4),
            st.integers(1, 25),
            st.booleans(),
        ),
        min_size=1,
        max_size=4,
    ),
    st.integers(1, 12),
    st.integers(0, 100),
)
def test_schedule_plans_keep_per_step_and_per_phase_bounds(
    phases: list[tuple[list[float], int, bool]], k: int, seed: int
) -> None:
    # Real schedules: constant or linearly interpolated phases, members entering and leaving (weight 0).
    # Constant phases keep both bounds exactly; interpolated ones the upper bound and "never two rows behind".
    names = NAMES[:4]
    schedule, until, exact, starts = [], 1, set(), {1}
    for i, (ws, length, interp) in enumerate(phases):
        if sum(ws) == 0:
            ws = [1.0, *ws[1:]]
        last = i == len(phases) - 1
        interp = interp and not last
        phase: dict[str, Any] = {"weights": dict(zip(names, ws, strict=True)), "interpolate": interp}
        if not interp:
            exact |= set(range(until, until + length + (5 if last else 0)))
        until += length
        if not last:
            phase["until_step"] = until
            starts.add(until)
        schedule.append(phase)
    p = _planner({m: [0, 1, 2] for m in names}, schedule=schedule, prompts_per_step=k, seed=seed)
    _check_bounds(p, until + 4, starts, exact)


def test_small_probability_member_is_not_starved() -> None:
    # p=0.1, k=4: plain per-step rounding gives 0 every step; the carried quotas give 2 rows every 5 steps.
    p = _planner({"big": [0], "tiny": [0]}, weights={"big": 0.9, "tiny": 0.1}, prompts_per_step=4)
    tiny = [c["tiny"] for c in _steps(p, 50)]
    for start in range(0, 50, 5):
        assert sum(tiny[start : start + 5]) == 2  # evenly spread, not bunched


@settings(DETERMINISTIC, max_examples=30)
@given(weight_maps, st.integers(1, 16), st.integers(0, 10_000))
def test_plan_no_starvation(ws: dict[str, float], k: int, seed: int) -> None:
    p = _planner({m: list(range(5)) for m in ws}, weights=ws, prompts_per_step=k, num_steps=40, seed=seed)
    plan = p.plan()
    assert len(plan) == 40 * k and [r.step for r in plan] == sorted(r.step for r in plan)
    comp = [Counter(r.member for r in plan if r.step == s) for s in range(1, 41)]
    for m, q in _norm(ws).items():
        if q * k >= 1:
            assert all(step[m] >= 1 for step in comp), m
        assert abs(sum(step[m] for step in comp) - q * k * 40) < 1 + 1e-6


# ---------------------------------------------------------------------------------------------- schedules


def test_schedule_boundaries_count_from_one_and_until_step_is_exclusive() -> None:
    schedule = [{"until_step": 3, "weights": {"a": 1, "b": 0}}, {"weights": {"a": 0, "b": 1}}]
    p = _planner({"a": [0, 1], "b": [0, 1]}, schedule=schedule, prompts_per_step=4, num_steps=6)
    assert [set(c) for c in _steps(p, 4)] == [{"a"}, {"a"}, {"b"}, {"b"}]
    plan = _planner({"a": [0, 1], "b": [0, 1]}, schedule=schedule, prompts_per_step=4, num_steps=6).plan()
    assert plan[7].step == 2 and plan[8].step == 3 and plan[8].member == "b"


def test_interpolation_midpoint_and_end() -> None:
    schedule = [
        {"until_step": 11, "weights": {"a": 1.0, "b": 0.0}, "interpolate": True},
        {"until_step": 21, "weights": {"a": 0.0, "b": 1.0}},
        {"weights": {"a": 1, "b": 0}},
    ]
    p = _planner({"a": [0], "b": [0]}, schedule=schedule, prompts_per_step=10)
    assert p.weights(1) == {"a": 1.0, "b": 0.0}
    assert p.weights(6) == pytest.approx({"a": 0.5, "b": 0.5})
    assert p.weights(10) == pytest.approx({"a": 0.1, "b": 0.9})
    assert p.weights(11) == {"a": 0.0, "b": 1.0}
    assert p.weights(26) == {"a": 1.0, "b": 0.0}
    assert [c["a"] for c in _steps(p, 10)] == [10, 9, 8, 7, 6, 5, 4, 3, 2, 1]


def test_closed_last_phase_keeps_its_weights() -> None:
    p = _planner(
        {"a": [0], "b": [0]}, schedule=[{"until_step": 5, "weights": {"a": 1, "b": 3}}], prompts_per_step=4
    )
    assert p.weights(100) == {"a": 0.25, "b": 0.75}


# ---------------------------------------------------------------------------------------------- plans


def test_plan_sizes_and_defaults() -> None:
    tasks = {"a": [0, 1, 2], "b": [5, 6]}
    assert len(_planner(tasks).plan()) == 5
    assert len(_planner(tasks, num_samples=7).plan()) == 7
    rows = _planner(tasks, prompts_per_step=3, num_steps=4).plan()
    assert len(rows) == 12 and [r.position for r in rows] == list(range(12))
    cut = _planner(tasks, prompts_per_step=4, num_samples=10).plan()
    assert len(cut) == 10 and cut[-1].step == 3
    assert all(r.step is None for r in _planner(tasks, num_samples=6).plan())
    with pytest.raises(MixtureError, match="count from 1"):
        _planner(tasks, prompts_per_step=2).rows(0)
    with pytest.raises(MixtureError, match="set prompts_per_step"):
        _planner(tasks).rows(1)


@settings(DETERMINISTIC, max_examples=30)
@given(weight_maps, st.integers(0, 2**40), st.sampled_from([None, 1, 3, 8]))
def test_plan_determinism(ws: dict[str, float], seed: int, k: int | None) -> None:
    tasks = {m: list(range(3 + i)) for i, m in enumerate(ws)}
    a = _planner(tasks, weights=ws, num_samples=48, prompts_per_step=k, seed=seed).plan()
    b = _planner(
        dict(reversed(list(tasks.items()))),
        weights=dict(reversed(list(ws.items()))),
        num_samples=48,
        prompts_per_step=k,
        seed=seed,
    ).plan()
    assert a == b  # same content in another dict order → same rows
    assert a != _planner(tasks, weights=ws, num_samples=48, prompts_per_step=k, seed=seed + 1).plan()


def test_plan_is_stable_across_processes() -> None:
    # Pinned values: guards against any dependence on hash() randomisation or dict order.
    one = _planner({"b": [0, 1, 2], "a": [0, 1, 2]}, num_samples=6, prompts_per_step=2).plan()
    assert one == _planner({"a": [0, 1, 2], "b": [0, 1, 2]}, num_samples=6, prompts_per_step=2).plan()
    assert derive_seed(0, "tasks", "a") == int.from_bytes(
        hashlib.sha256(b"0\x1ftasks\x1fa").digest()[:8], "big"
    )


def test_a_static_planner_resumed_from_its_state_gives_the_same_rows() -> None:
    schedule = [
        {"until_step": 4, "weights": {"a": 1, "b": 2}, "interpolate": True},
        {"weights": {"a": 3, "b": 1}},
    ]
    config = {"schedule": schedule, "prompts_per_step": 3, "seed": 4}
    whole = _planner({"a": [0, 1, 2], "b": [5, 6]}, **config)
    first = _planner({"a": [0, 1, 2], "b": [5, 6]}, **config)
    _ = first.rows(5)
    resumed = _planner({"a": [0, 1, 2], "b": [5, 6]}, **config)
    resumed.load_state_dict(first.state_dict())
    assert [resumed.rows(s) for s in range(1, 12)] == [whole.rows(s) for s in range(1, 12)]


def test_iid_mode_follows_probabilities() -> None:
    rows = _planner({"a": [0], "b": [0]}, weights={"a": 0.8, "b": 0.2}, num_samples=5000, seed=3).plan()
    assert abs(sum(r.member == "a" for r in rows) / len(rows) - 0.8) < 0.03


def test_round_robin_cycles_exactly() -> None:
    tasks = {"c": [0, 1], "a": [0], "b": [0, 1, 2]}
    rows = _planner(tasks, strategy="round_robin", num_samples=9).plan()
    assert [r.member for r in rows] == ["a", "b", "c"] * 3
    stepped = _planner(tasks, strategy="round_robin", prompts_per_step=2, num_steps=3).plan()
    assert [r.member for r in stepped] == ["a", "b", "c", "a", "b", "c"]
    assert [r.step for r in stepped] == [1, 1, 2, 2, 3, 3]


def test_within_step_positions_are_shuffled_but_composition_exact() -> None:
    p = _planner({"a": list(range(10)), "b": list(range(10))}, prompts_per_step=10, seed=1)
    assert all(c == {"a": 5, "b": 5} for c in _steps(p, 20))
    assert len({tuple(m for m, _ in p.rows(s)) for s in range(1, 21)}) > 1  # not always the same layout


@settings(DETERMINISTIC, max_examples=40)
@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=30, unique=True), st.integers(0, 10**6))
def test_tasks_without_replacement_per_cycle(task_ids: list[int], seed: int) -> None:
    p = _planner({"m": task_ids}, prompts_per_step=len(task_ids), seed=seed)
    assert sorted(t for _, t in p.rows(1)) == sorted(task_ids)
    assert sorted(t for _, t in p.rows(2)) == sorted(task_ids)


@settings(DETERMINISTIC, max_examples=20)
@given(st.integers(0, 10**6))
def test_member_task_order_independent_of_other_members(seed: int) -> None:
    ta = list(range(20))
    one = _planner({"a": ta, "b": [0, 1]}, strategy="round_robin", num_samples=40, seed=seed).plan()
    two = _planner(
        {"a": ta, "z": [5, 6, 7], "b": [9]}, strategy="round_robin", num_samples=60, seed=seed
    ).plan()
    seq1 = [r.task_index for r in one if r.member == "a"]
    seq2 = [r.task_index for r in two if r.member == "a"]
    assert seq1 == seq2[: len(seq1)]


# ---------------------------------------------------------------------------------------------- inspection


def test_starvation_matches_the_plan() -> None:
    iid = starvation_probability({"a": 0.9, "b": 0.1}, 4)
    assert iid["b"] == pytest.approx(0.9**4) and iid["a"] == pytest.approx(0.1**4)
    exact = starvation_probability({"a": 0.9, "b": 0.1}, 4, mode="quotas")
    assert exact == pytest.approx({"a": 0.0, "b": 0.6})
    p = _planner({"a": [0], "b": [0]}, weights={"a": 0.9, "b": 0.1}, prompts_per_step=4)
    assert sum(c["b"] == 0 for c in _steps(p, 50)) / 50 == pytest.approx(exact["b"])
