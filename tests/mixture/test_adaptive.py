"""Tests for adaptive plans (ormix.mixture._planner with ormix.mixture._adaptive's weights): weights, quotas,
lag, determinism, checkpoints, task filtering, signals, as Hypothesis properties plus worked examples."""

from __future__ import annotations

import doctest
import inspect
import json
import math
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from ormix._errors import MixtureError
from ormix.config import AdaptiveConfig, MixtureConfig, TaskFilterConfig
from ormix.mixture import _adaptive as adaptive
from ormix.mixture._adaptive import SIGNALS, constrain, scores, step_stats
from ormix.mixture._planner import LAG, Evidence, Planner, evidence_of, prior_decisions, prior_outcome
from ormix.ors._catalog import TaskDifficulty
from ormix.telemetry._metrics import is_informative

# Derandomized: the same examples on every run, so CI never fails (or passes) by luck.
DETERMINISTIC = settings(derandomize=True, deadline=None, database=None)
NAMES = ["alpha", "beta", "gamma", "delta", "eps", "zeta"]
EPS = 1e-9


def test_doctests() -> None:
    result = doctest.testmod(adaptive)
    assert result.attempted >= 5 and result.failed == 0


def test_every_public_name_has_a_docstring_with_an_example() -> None:
    public = [
        n
        for n, o in vars(adaptive).items()
        if not n.startswith("_") and getattr(o, "__module__", "") == adaptive.__name__
    ]
    assert len(public) >= 5
    for name in public:
        obj = getattr(adaptive, name)
        if not callable(obj) or name == "Group":
            continue  # constants and aliases (SIGNALS, Group) are described where they are defined
        assert obj.__doc__ and ">>>" in obj.__doc__, name
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if not attr.startswith("_") and callable(member):
                    assert member.__doc__ and ">>>" in member.__doc__, f"{name}.{attr}"


# ---------------------------------------------------------------------------------------------- constrain

weights_of = st.integers(2, 6).flatmap(
    lambda n: st.tuples(
        st.lists(st.floats(0.0, 10.0), min_size=n, max_size=n),
        st.lists(st.floats(0.001, 10.0), min_size=n, max_size=n),
    )
)


def _normed(values: list[float], names: list[str]) -> dict[str, float]:
    total = math.fsum(values)
    return {m: v / total for m, v in zip(names, values, strict=True)} if total > 0 else {}


@settings(DETERMINISTIC, max_examples=400)
@given(weights_of, st.floats(0.0, 0.3), st.floats(0.01, 1.0))
def test_constrain_sums_to_one_keeps_the_floor_and_the_bound(pair, floor: float, max_change: float) -> None:
    raw_target, raw_prev = pair
    names = NAMES[: len(raw_target)]
    n = len(names)
    prev = _normed(raw_prev, names)
    out = constrain(dict(zip(names, raw_target, strict=True)), prev, floor=floor, max_change=max_change)
    eff_floor = min(floor, 1 / n)
    assert math.isclose(math.fsum(out.values()), 1.0, abs_tol=1e-12)
    assert all(w >= eff_floor - EPS for w in out.values())
    if all(p >= eff_floor for p in prev.values()):  # the bound holds whenever it is compatible with the floor
        assert all(abs(out[m] - prev[m]) <= max_change + EPS for m in names)


@settings(DETERMINISTIC, max_examples=400)
@given(weights_of, st.floats(0.0, 0.3), st.floats(0.01, 1.0))
def test_constrain_is_the_closest_allowed_point_to_the_target(pair, floor: float, max_change: float) -> None:
    raw_target, raw_prev = pair
    names = NAMES[: len(raw_target)]
    n = len(names)
    eff_floor = min(floor, 1 / n)
    prev = _normed(raw_prev, names)
    if any(p < eff_floor for p in prev.values()):
        return  # the floor overrides the bound there (tested below)
    target = _normed(raw_target, names) or {m: 1 / n for m in names}
    out = constrain(dict(zip(names, raw_target, strict=True)), prev, floor=floor, max_change=max_change)
    lo = {m: max(eff_floor, prev[m] - max_change) for m in names}
    hi = {m: min(1.0, prev[m] + max_change) for m in names}

    def dist(w: dict[str, float]) -> float:
        return math.fsum((w[m] - target[m]) ** 2 for m in names)

    # The allowed set is a polytope and the distance convex: a point no move of mass between two members
    # (within their bounds) brings closer is the closest one.
    base = dist(out)
    for a in names:
        for b in names:
            step = min(1e-3, hi[a] - out[a], out[b] - lo[b])
            if a != b and step > 1e-9:
                moved = dict(out)
                moved[a] += step
                moved[b] -= step
                assert dist(moved) >= base - 1e-12
    inside = all(lo[m] - EPS <= target[m] <= hi[m] + EPS for m in names)
    if inside:
        assert all(abs(out[m] - target[m]) < 1e-9 for m in names)


def test_constrain_floor_wins_over_the_bound() -> None:
    out = constrain({"a": 1.0, "b": 0.0}, {"a": 1.0, "b": 0.0}, floor=0.1, max_change=0.05)
    assert out["b"] == pytest.approx(0.1) and out["a"] == pytest.approx(0.9)
    # A floor above 1/n counts as 1/n: everyone gets the same.
    assert constrain({"a": 5.0, "b": 1.0}, {"a": 0.5, "b": 0.5}, floor=0.9, max_change=1.0) == pytest.approx(
        {"a": 0.5, "b": 0.5}
    )
    # An all-zero target is read as uniform.
    assert constrain({"a": 0.0, "b": 0.0}, {"a": 0.5, "b": 0.5}, floor=0.0, max_change=1.0) == pytest.approx(
        {"a": 0.5, "b": 0.5}
    )


# ---------------------------------------------------------------------------------------------- helpers


def _planner(
    members: dict[str, int],
    k: int,
    seed: int = 0,
    *,
    settings: dict[str, Any] | None = None,
    weights: dict[str, float] | None = None,
    filters: dict[str, dict[str, Any]] | None = None,
    metadata: dict[str, dict[int, dict[str, Any]]] | None = None,
) -> Planner:
    """The planner of an adaptive mixture of local members with these task counts and settings."""
    config = MixtureConfig(
        members={m: {"target": "local:echo", "filter": (filters or {}).get(m)} for m in members},
        strategy="adaptive",
        prompts_per_step=k,
        seed=seed,
        adaptive=settings,
        weights=weights,
    )
    return Planner(config, {m: list(range(n)) for m, n in members.items()}, metadata=metadata)


def _scores(signal: str, hist, members: list[str], rng: random.Random, **settings: Any):
    """The adaptive scores of a history of steps (member → groups), as the planner computes them."""
    window = [step_stats(step, members) for step in hist]
    return scores(window, members, rng, AdaptiveConfig(signal=signal, **settings))


def _groups(rows, rewards_for) -> dict[str, list[tuple[int, list[float]]]]:
    out: dict[str, list[tuple[int, list[float]]]] = {}
    for member, task in rows:
        out.setdefault(member, []).append((task, rewards_for(member, task)))
    return out


def _drive(planner: Planner, steps: int, rewards_for, start: int = 1) -> list[list[tuple[str, int]]]:
    """Ask for each step's rows, then observe them (what a trainer does); the rows of every step."""
    out = []
    for step in range(start, start + steps):
        rows = planner.rows(step)
        out.append(rows)
        planner.observe(step, _groups(rows, lambda m, t, s=step: rewards_for(m, t, s)))
    return out


def _random_rewards(seed: int, group: int = 4):
    """Each member's groups succeed with its own (seeded) probability, which drifts with the step."""

    def rewards(member: str, task: int, step: int) -> list[float]:
        rng = random.Random(f"{seed}/{member}/{task}/{step}")
        p = random.Random(f"{seed}/{member}/{step // 7}").random()
        return [float(rng.random() < p) for _ in range(group)]

    return rewards


plans = st.fixed_dictionaries(
    {
        "n": st.integers(1, 5),
        "k": st.integers(1, 12),
        "seed": st.integers(0, 2**32),
        "signal": st.sampled_from(SIGNALS),
        "floor": st.sampled_from([0.0, 0.02, 0.05, 0.2]),
        "max_change": st.sampled_from([0.05, 0.25, 1.0]),
        "warmup": st.integers(0, 4),
        "tasks": st.integers(1, 6),
    }
)


def _from(plan, **extra) -> Planner:
    settings_ = {
        "signal": plan["signal"],
        "floor": plan["floor"],
        "max_change": plan["max_change"],
        "warmup_steps": plan["warmup"],
        "window": 4,
        "progress_window": 8,
        "thompson_draws": 32,
    }
    members = {NAMES[i]: plan["tasks"] + i for i in range(plan["n"])}
    return _planner(members, plan["k"], plan["seed"], settings=settings_, **extra)


# ---------------------------------------------------------------------------------------------- quotas


@settings(DETERMINISTIC, max_examples=60)
@given(plans)
def test_quotas_are_exact_per_step_and_within_one_row_cumulatively(plan) -> None:
    planner = _from(plan)
    rows = _drive(planner, 25, _random_rewards(plan["seed"]))
    target = Counter()
    got = Counter()
    for step, step_rows in enumerate(rows, start=1):
        assert len(step_rows) == plan["k"]
        weights = planner.weights(step)
        assert math.isclose(math.fsum(weights.values()), 1.0, abs_tol=1e-9)
        for m in planner.members:
            target[m] += weights[m] * plan["k"]
        got.update(m for m, _ in step_rows)
        for m in planner.members:
            assert abs(got[m] - target[m]) < 1 + 1e-6, (step, m, got[m], target[m])
        for m, task in step_rows:
            assert task in planner.tasks[m]


def test_warmup_uses_the_static_weights_then_the_floor_applies() -> None:
    planner = _planner(
        {"a": 3, "b": 3},
        4,
        settings={"warmup_steps": 3, "floor": 0.1},
        weights={"a": 1.0, "b": 0.0},
    )
    rows = _drive(planner, 6, lambda m, t, s: [1.0, 0.0])
    assert [planner.weights(s) for s in (1, 2, 3)] == [{"a": 1.0, "b": 0.0}] * 3
    assert all(m == "a" for step in rows[:3] for m, _ in step)
    assert planner.weights(4)["b"] >= 0.1 - EPS  # the floor wins over the bound at once


# ---------------------------------------------------------------------------------------------- lag, purity


def test_asking_ahead_of_the_lag_raises() -> None:
    planner = _planner({"a": 2, "b": 2}, 2)
    planner.rows(LAG)  # steps 1..LAG need no statistics
    with pytest.raises(MixtureError, match=r"step\(s\) \[1\].*dataloader_num_workers=0"):
        planner.rows(LAG + 1)
    planner.observe(1, {"a": [(0, [1.0, 0.0])]})
    planner.rows(LAG + 1)
    with pytest.raises(MixtureError, match=r"step\(s\) \[2\]"):
        planner.weights(LAG + 2)


def test_the_lag_holds_during_warmup_too() -> None:
    planner = _planner({"a": 2}, 1, settings={"warmup_steps": 10})
    planner.rows(2)
    with pytest.raises(MixtureError):
        planner.rows(3)


@settings(DETERMINISTIC, max_examples=40)
@given(plans, st.integers(0, 2**32))
def test_rows_ignore_statistics_newer_than_the_lag(plan, other: int) -> None:
    # Two runs agree on every step up to t-2 and differ at t-1; one fetches step t before observing t-1 (a
    # prefetching loader), one after: step t must be the same. With task filtering, whose state moves too.
    filters = {m: {"window": 1, "cooldown_steps": 3} for m in NAMES}
    rewards = _random_rewards(plan["seed"])
    ahead, behind = _from(plan, filters=filters), _from(plan, filters=filters)
    for step in range(1, 16):
        rows_ahead = ahead.rows(step)
        assert behind.rows(step) == rows_ahead
        assert ahead.weights(step) == behind.weights(step)
        groups = _groups(rows_ahead, lambda m, t, s=step: rewards(m, t, s))
        ahead.observe(step, groups)
        if step < 15:
            odd = _random_rewards(other)
            # "behind" sees different statistics of step `step` first, asks for step+1, then is corrected
            # (as if its rank had not finished pooling): step+1 may not depend on them.
            behind.observe(step, _groups(rows_ahead, lambda m, t, s=step, odd=odd: odd(m, t, s)))
            assert behind.rows(step + 1) == ahead.rows(step + 1)
            behind.observe(step, groups)


def test_statistics_a_decision_used_cannot_change() -> None:
    planner = _planner({"a": 2}, 1)
    planner.observe(1, {"a": [(0, [1.0, 0.0])]})
    planner.rows(3)  # used step 1
    planner.observe(1, {"a": [(0, [1.0, 0.0])]})  # the same again is fine
    with pytest.raises(MixtureError, match="already used"):
        planner.observe(1, {"a": [(0, [1.0, 1.0])]})


# ---------------------------------------------------------------------------------------------- determinism


@settings(DETERMINISTIC, max_examples=30)
@given(plans, st.integers(2, 12))
def test_same_inputs_same_rows_and_a_restored_planner_continues_exactly(plan, stop: int) -> None:
    filters = {NAMES[0]: {"window": 1, "cooldown_steps": 2}}
    rewards = _random_rewards(plan["seed"])
    straight = _from(plan, filters=filters)
    rows = _drive(straight, 20, rewards)
    again = _from(plan, filters=filters)
    assert _drive(again, 20, rewards) == rows
    first = _from(plan, filters=filters)
    assert _drive(first, stop, rewards) == rows[:stop]
    state = json.loads(json.dumps(first.state_dict()))  # JSON data, as checkpoints store it
    resumed = _from(plan, filters=filters)
    resumed.load_state_dict(state)
    assert _drive(resumed, 20 - stop, rewards, start=stop + 1) == rows[stop:]
    assert [resumed.weights(s) for s in range(1, 21)] == [straight.weights(s) for s in range(1, 21)]


def test_a_planner_state_of_another_version_is_refused_with_what_to_do() -> None:
    # The state an AdaptivePlanner of the previous release wrote: carried credit, no extra rows.
    old = {
        "history": {},
        "weights": {},
        "rows": {},
        "credit": {"a": 0.0},
        "cursor": {"a": 0},
        "cycle": {"a": 0},
    }
    with pytest.raises(MixtureError, match="another version of ormix.*start a new run"):
        _planner({"a": 2}, 2, 0).load_state_dict(old)


def test_rows_are_the_same_in_another_process() -> None:
    # Seeds are derived with SHA-256, not hash(): a fresh interpreter with another PYTHONHASHSEED agrees.
    code = """
import json, random, sys
from ormix.config import MixtureConfig
from ormix.mixture._planner import Planner
cfg = MixtureConfig(members={m: {"target": "local:echo"} for m in "xyz"}, strategy="adaptive", seed=11,
                    prompts_per_step=5, adaptive={"signal": "thompson", "warmup_steps": 1})
p = Planner(cfg, {"x": list(range(5)), "y": list(range(3)), "z": [7]})
out = []
for s in range(1, 12):
    rows = p.rows(s)
    out.append(rows)
    rng = random.Random(s)
    p.observe(s, {m: [(t, [float(rng.random() < 0.5) for _ in range(4)]) for mm, t in rows if mm == m]
                  for m in "xyz"})
print(json.dumps(out))
"""
    src = str(Path(adaptive.__file__).resolve().parents[2])
    runs = []
    for hashseed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hashseed, "PYTHONPATH": src}
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        runs.append(done.stdout)
    assert runs[0] == runs[1] and len(json.loads(runs[0])) == 11


# ---------------------------------------------------------------------------------------------- task filter


def _tasks_of(rows, member: str) -> set[int]:
    return {t for m, t in rows if m == member}


@pytest.mark.parametrize("outcome", [1.0, 0.0])
def test_a_task_all_solved_or_all_failed_is_set_aside_for_its_cooldown_then_comes_back(
    outcome: float,
) -> None:
    rule = {"window": 2, "cooldown_steps": 4}
    planner = _planner({"a": 4}, 4, filters={"a": rule}, settings={"warmup_steps": 100})

    def rewards(m: str, t: int, s: int) -> list[float]:
        return [outcome] * 4 if t == 0 and s <= 2 else [1.0, 0.0, 1.0, 0.0]

    rows = _drive(planner, 12, rewards)
    # Steps 1 and 2 each drew every task once (4 tasks, 4 rows): task 0's two groups were uniform, so it is
    # set aside from step 2 + LAG for 4 steps, then drawn again.
    assert all(_tasks_of(rows[s - 1], "a") == {0, 1, 2, 3} for s in (1, 2, 3))
    aside = range(2 + LAG, 2 + LAG + rule["cooldown_steps"])
    for s in aside:
        assert 0 not in _tasks_of(rows[s - 1], "a") and len(rows[s - 1]) == 4
        assert planner.tasks_set_aside("a", s) == 1
    back = 2 + LAG + rule["cooldown_steps"]
    assert planner.tasks_set_aside("a", back) == 0
    assert 0 in {t for step in rows[back - 1 : back + 1] for _, t in step}


def test_mixed_groups_keep_a_task_and_a_single_uniform_group_is_not_enough() -> None:
    rule = {"window": 2, "cooldown_steps": 4}
    planner = _planner({"a": 2}, 2, filters={"a": rule}, settings={"warmup_steps": 100})
    pattern = {1: [1.0] * 2, 2: [1.0, 0.0], 3: [1.0] * 2, 4: [0.0] * 2}  # solved, mixed, solved, failed
    rows = _drive(planner, 10, lambda m, t, s: pattern.get(s, [1.0, 0.0]))
    assert all(_tasks_of(step, "a") == {0, 1} for step in rows)
    assert all(planner.tasks_set_aside("a", s) == 0 for s in range(1, 11))


def test_a_group_whose_rewards_differ_is_never_settled_whatever_their_range() -> None:
    # Rewards outside [0, 1] (raw scores, costs, a scale above 1): every group is above `solved` or below
    # `failed`, but each has spread, so GRPO learns from it and the filter must keep its task.
    planner = _planner({"a": 2}, 2, settings={"warmup_steps": 100})
    rows = _drive(planner, 8, lambda m, t, s: [2.0, 7.0] if t == 0 else [-0.2, -0.9])
    assert all(planner.tasks_set_aside("a", s) == 0 for s in range(1, 9))
    assert all(_tasks_of(step, "a") == {0, 1} for step in rows)
    # ... while equal rewards above `solved` are a settled task.
    planner = _planner({"a": 2}, 2, settings={"warmup_steps": 100})
    _drive(planner, 4, lambda m, t, s: [2.0] * 4 if t == 0 else [-0.2, -0.9, 0.0, 0.0])
    assert planner.tasks_set_aside("a", 2 + LAG) == 1


@pytest.mark.parametrize("size", [1, 2, 4, 8])
def test_small_groups_need_more_of_them_to_settle_a_task(size: int) -> None:
    # min_rollouts 8 (the default) and window 2: groups of 1 need 8, of 2 need 4, of 4 and 8 need 2.
    needed = max(2, 8 // size)
    planner = _planner({"a": 1}, 1, settings={"warmup_steps": 100})
    _drive(planner, needed + LAG + 1, lambda m, t, s: [1.0] * size)
    assert planner.tasks_set_aside("a", needed - 1 + LAG) == 0
    assert planner.tasks_set_aside("a", needed + LAG) == 1


def test_prior_from_metadata_sets_tasks_aside_from_the_start() -> None:
    rule = {
        "cooldown_steps": 3,
        "prior": {"field": "difficulty", "pass_rates": {"Easy": 0.95, "Hard": 0.05, "Medium": 0.5}},
    }
    metadata = {
        "a": {0: {"difficulty": "Easy"}, 1: {"difficulty": "Hard"}, 2: {"difficulty": "Medium"}, 3: {}}
    }
    planner = _planner({"a": 4}, 2, filters={"a": rule}, metadata=metadata, settings={"warmup_steps": 100})
    rows = _drive(planner, 8, lambda m, t, s: [1.0, 0.0])
    assert planner.tasks_set_aside("a", 1) == 2 and planner.tasks_set_aside("a", 4) == 0
    assert all(_tasks_of(rows[s - 1], "a") <= {2, 3} for s in (1, 2, 3))
    assert {0, 1} <= {t for step in rows[3:] for _, t in step}


@pytest.mark.parametrize(
    ("adaptive_filter", "own", "aside"),
    [
        ("default", None, {"a": 1, "b": 1}),  # no `filter:` anywhere: every member filters (the default)
        (None, None, {"a": 0, "b": 0}),  # `adaptive: {filter: null}`: off
        ({"cooldown_steps": 50}, None, {"a": 1, "b": 1}),  # the mixture's rule, for every member
        (None, {"window": 2}, {"a": 1, "b": 0}),  # off, but a member's own `filter:` wins
        ("default", False, {"a": 0, "b": 1}),  # `filter: false` on a member: none for it
    ],
)
def test_every_member_filters_by_default_unless_the_mixture_turns_it_off(adaptive_filter, own, aside) -> None:
    settings = {"warmup_steps": 100} | ({} if adaptive_filter == "default" else {"filter": adaptive_filter})
    planner = _planner(
        {"a": 4, "b": 4}, 8, filters={"a": own} if own is not None else None, settings=settings
    )
    # Task 0 of both members: all solved in steps 1 and 2 (every task is drawn once a step).
    _drive(planner, 6, lambda m, t, s: [1.0] * 4 if t == 0 else [1.0, 0.0, 1.0, 0.0])
    assert {m: planner.tasks_set_aside(m, 2 + LAG) for m in ("a", "b")} == aside
    assert {m: planner.config.task_filter(m) is not None for m in ("a", "b")} == {
        m: n > 0 for m, n in aside.items()
    }


def test_a_member_whose_every_task_is_set_aside_still_gets_its_rows() -> None:
    rule = {"window": 1, "cooldown_steps": 50}
    planner = _planner({"a": 2, "b": 2}, 4, filters={"a": rule}, settings={"warmup_steps": 100})
    rows = _drive(planner, 8, lambda m, t, s: [1.0, 1.0] if m == "a" else [1.0, 0.0])
    assert planner.tasks_set_aside("a", 8) == 2
    assert all(sum(m == "a" for m, _ in step) == 2 for step in rows)


# ---------------------------------------------------------------------------------------------- signals


def _learner(seed: int):
    """'learns': success rises with its own informative groups; 'solved' always succeeds; 'failed' never."""
    practice = Counter()

    def rewards(member: str, task: int, step: int) -> list[float]:
        rng = random.Random(f"{seed}/{member}/{task}/{step}/{practice[member]}")
        if member == "solved":
            return [1.0] * 4
        if member == "failed":
            return [0.0] * 4
        p = min(0.9, 0.2 + 0.01 * practice[member])
        out = [float(rng.random() < p) for _ in range(4)]
        practice[member] += is_informative(out)
        return out

    return rewards


@pytest.mark.parametrize("signal", SIGNALS)
@settings(DETERMINISTIC, max_examples=5)
@given(seed=st.integers(0, 2**32))
def test_each_signal_moves_budget_to_the_member_that_teaches_and_never_below_the_floor(
    signal: str, seed: int
) -> None:
    # The signal alone: with the task filter too, 'learns' (one success rate for every task) reaches its
    # 0.9 ceiling sooner and rightly loses share in the last steps this test watches.
    cfg = AdaptiveConfig(signal=signal, floor=0.05, max_change=0.25, filter=None)  # type: ignore[arg-type]
    planner = _planner({"learns": 8, "solved": 8, "failed": 8}, 12, seed, settings=cfg.model_dump())
    rows = _drive(planner, 30, _learner(seed))
    for step in range(1, 31):
        w = planner.weights(step)
        assert min(w.values()) >= cfg.floor - EPS
        if step > 1:
            prev = planner.weights(step - 1)
            assert all(abs(w[m] - prev[m]) <= cfg.max_change + EPS for m in w)
    late = [planner.weights(s) for s in range(21, 31)]
    assert all(w["learns"] >= 0.6 for w in late), late[-1]
    assert sum(w["solved"] + w["failed"] for w in late) / len(late) <= 0.3
    assert Counter(m for step in rows[20:] for m, _ in step)["learns"] >= 0.6 * 10 * 12


def test_informative_puts_saturated_and_dead_members_on_the_floor() -> None:
    planner = _planner(
        {"learns": 4, "solved": 4, "failed": 4},
        6,
        settings={"signal": "informative", "floor": 0.05, "max_change": 0.3},
    )
    _drive(planner, 12, lambda m, t, s: {"learns": [1.0, 0.0], "solved": [1.0, 1.0]}.get(m, [0.0, 0.0]))
    assert planner.weights(12) == pytest.approx({"learns": 0.9, "solved": 0.05, "failed": 0.05}, abs=1e-9)


def test_a_member_with_no_group_in_a_short_window_is_judged_on_its_longer_record() -> None:
    # window=2 and a 0.05 floor of 6 rows: the always-failed member often has no group in the window. It must
    # stay on the floor (a prior at the mixture-wide rate would hand it a third of the batch).
    planner = _planner(
        {"solved": 4, "failed": 4, "mixed": 4},
        6,
        1,
        settings={"signal": "informative", "warmup_steps": 2, "floor": 0.05, "max_change": 0.3, "window": 2},
    )
    outcome = {"solved": [1.0, 1.0], "failed": [0.0, 0.0], "mixed": [1.0, 0.0]}
    _drive(planner, 16, lambda m, t, s: outcome[m])
    assert planner.weights(1) == pytest.approx({m: 1 / 3 for m in outcome})
    for step in range(4, 17):
        assert planner.weights(step) == pytest.approx(
            {"solved": 0.05, "failed": 0.05, "mixed": 0.9}, abs=1e-9
        )


def test_progress_prefers_the_member_that_learns_faster() -> None:
    # Two members equally informative (success 0.5 in every group, spread), but only one's success rises.
    def rewards(member: str, task: int, step: int) -> list[float]:
        rng = random.Random(f"{member}/{task}/{step}")
        p = 0.3 + 0.02 * step if member == "rises" else 0.5
        return [float(rng.random() < min(p, 0.9)) for _ in range(8)]

    for signal in ("progress", "thompson"):
        planner = _planner({"rises": 4, "flat": 4}, 16, settings={"signal": signal})  # type: ignore[arg-type]
        _drive(planner, 25, rewards)
        late = [planner.weights(s)["rises"] for s in range(16, 26)]
        assert sum(late) / len(late) > 0.65, (signal, late)


def test_headroom_favours_the_equally_informative_member_with_more_reward_left() -> None:
    # Two members' groups always teach (one success of four, or three of four), but one has 0.75 of its reward
    # to gain and the other 0.25: every signal gives the first more. The third never teaches (the baseline).
    hist = [
        {
            "low": [(0, [1.0, 0.0, 0.0, 0.0])] * 4,
            "high": [(0, [1.0, 1.0, 1.0, 0.0])] * 4,
            "dead": [(0, [0.0] * 4)] * 4,
        }
    ] * 8
    members = ["low", "high", "dead"]
    for signal in SIGNALS:
        scores = _scores(signal, hist, members, random.Random(0))  # type: ignore[arg-type]
        assert scores["low"] > scores["high"], (signal, scores)  # type: ignore[operator]
    scores = _scores("informative", hist, members, random.Random(0))
    flat = _scores("informative", hist, members, random.Random(0), headroom=0)
    assert scores["dead"] == flat["dead"] == 0.0
    assert flat["low"] == flat["high"] > 0.0  # without headroom nothing tells them apart
    # 0.75 vs 0.25 of the reward left: three times the score, a little less after shrinking toward the
    # mixture.
    assert 2.5 < scores["low"] / scores["high"] <= 3.0  # type: ignore[operator]


histories = st.lists(
    st.fixed_dictionaries(
        {
            m: st.lists(
                st.tuples(st.just(0), st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=2, max_size=4)),
                max_size=3,
            )
            for m in NAMES[:3]
        }
    ),
    min_size=1,
    max_size=6,
)


@DETERMINISTIC
@given(histories, st.floats(0.1, 10.0), st.floats(-5.0, 5.0), st.sampled_from(SIGNALS))
def test_scores_do_not_depend_on_the_reward_scale(hist, scale: float, shift: float, signal: str) -> None:
    # Headroom is measured on the range of rewards seen, the informative rate on spread: an environment that
    # scores 0..10 or -1..1 instead of 0..1 gets the same weights. (Slopes scale with the rewards, and the
    # empirical-Bayes prior with them, so progress and thompson are invariant too.)
    moved = [
        {m: [(t, [r * scale + shift for r in rs]) for t, rs in g] for m, g in step.items()} for step in hist
    ]
    one = _scores(signal, hist, NAMES[:3], random.Random(3))  # type: ignore[arg-type]
    two = _scores(signal, moved, NAMES[:3], random.Random(3))  # type: ignore[arg-type]
    assert (None in one.values()) == (None in two.values())
    if None in one.values() or max(one.values()) < 1e-9:  # type: ignore[type-var]
        return  # no signal: every score is at the planner's 1e-12 floor, where only rounding differs
    # Scores are weights before normalising: compare the shares they give.
    for shares in (one, two):
        total = sum(shares.values())  # type: ignore[arg-type]
        for m in shares:
            shares[m] = shares[m] / total if total > 0 else 0.0  # type: ignore[operator]
    assert two == pytest.approx(one, rel=1e-6, abs=1e-9)


def test_scores_ignore_missing_rewards() -> None:
    assert not is_informative([None, 1.0, float("nan")])
    hist = [{"a": [(0, [None, None])] * 3 + [(0, [1.0, 0.0])], "b": [(0, [1.0, None, 1.0])] * 4}]
    scores = _scores("informative", hist, ["a", "b"], random.Random(0))
    assert scores["a"] > 0 and scores["b"] == 0.0


def test_thompson_is_seeded() -> None:
    hist = [{"a": [(0, [1.0, 0.0, 1.0])] * 3, "b": [(0, [0.0, 0.0, 1.0])] * 3}] * 3
    one = _scores("thompson", hist, ["a", "b"], random.Random(5))
    assert one == _scores("thompson", hist, ["a", "b"], random.Random(5))
    assert math.isclose(sum(v for v in one.values() if v is not None), 1.0)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"window": 0}, "window"),
        ({"floor": 1.5}, "floor"),
        ({"max_change": 0.0}, "max_change"),
        ({"sharpness": 0.0}, "sharpness"),
        ({"warmup_steps": -1}, "warmup_steps"),
        ({"thompson_draws": 0}, "thompson_draws"),
        ({"prior_groups": -1.0}, "prior_groups"),
        ({"progress_window": 0}, "progress_window"),
        ({"headroom": -1.0}, "headroom"),
    ],
)
def test_settings_are_checked(kwargs: dict, needle: str) -> None:
    with pytest.raises(ValidationError, match=needle):
        AdaptiveConfig(**kwargs)


def test_planner_argument_errors() -> None:
    with pytest.raises(ValidationError, match="prompts_per_step"):
        _planner({"a": 1}, 0)
    with pytest.raises(MixtureError, match=r"\['b'\] have no tasks"):
        _planner({"a": 1, "b": 0}, 1)
    with pytest.raises(MixtureError, match="count from 1"):
        _planner({"a": 1}, 1).rows(0)


# ---------------------------------------------------------------------------------------------- denoised


@settings(DETERMINISTIC, max_examples=10)
@given(noise=st.sampled_from([0.0, 0.05, 0.1, 0.2, 0.3]), seed=st.integers(0, 2**32))
def test_noise_estimates_recover_the_flip_rate_from_settled_tasks(noise: float, seed: int) -> None:
    # Eight tasks the policy always fails or always solves; the grader flips each outcome with `noise`.
    rng = random.Random(seed)
    steps = []
    for _ in range(64):
        groups = []
        for _ in range(4):
            task = rng.randrange(8)
            groups.append((task, [float((task < 4) != (rng.random() < noise)) for _ in range(4)]))
        steps.append(step_stats({"a": groups}, ["a"]))
    assert adaptive.noise_estimates(steps, ["a"])["a"] == pytest.approx(noise, abs=0.06)


def _flaky_world(seed: int):
    """'flaky': always failed, its grader flips 20% of outcomes; 'learns': tasks of spread difficulty whose
    success rises with practice; 'solved', 'failed': settled."""
    practice = Counter()

    def rewards(member: str, task: int, step: int) -> list[float]:
        rng = random.Random(f"{seed}/{member}/{task}/{step}/{practice[member]}")
        if member == "flaky":
            return [float(rng.random() < 0.2) for _ in range(4)]
        if member in ("solved", "failed"):
            return [float(member == "solved")] * 4
        skill = 0.1 + 0.01 * practice[member]
        p = 1 / (1 + math.exp(-10 * (skill - 0.8 * task / 7)))
        out = [float(rng.random() < p) for _ in range(4)]
        practice[member] += is_informative(out)
        return out

    return rewards


@settings(DETERMINISTIC, max_examples=5)
@given(seed=st.integers(0, 2**32))
def test_denoised_keeps_a_flaky_member_that_teaches_nothing_within_twice_its_uniform_share(seed: int) -> None:
    members = {"flaky": 8, "learns": 8, "solved": 8, "failed": 8}
    planner = _planner(members, 12, seed)  # the default signal
    _drive(planner, 40, _flaky_world(seed))
    weights = [planner.weights(s) for s in range(3, 41)]
    assert all(w["flaky"] <= 2 / len(members) + EPS for w in weights), max(w["flaky"] for w in weights)
    assert sum(w["learns"] for w in weights[-10:]) / 10 > 0.4  # ... and the budget goes where learning is
    believed = planner.beliefs(40)
    assert believed["flaky"]["noise"] > 0.1 and believed["learns"]["noise"] < believed["flaky"]["noise"]


def test_informative_is_fooled_by_the_flaky_member() -> None:
    # The case the default exists for: with the same world, `informative` hands the flaky member the batch.
    planner = _planner(
        {"flaky": 8, "learns": 8, "solved": 8, "failed": 8}, 12, 0, settings={"signal": "informative"}
    )
    _drive(planner, 40, _flaky_world(0))
    assert max(planner.weights(s)["flaky"] for s in range(3, 41)) > 0.5


def _flaky_learner_world(seed: int):
    """Three members learning at one pace on tasks of spread difficulty; 'flaky''s grader flips 20% of its
    outcomes. 'solved' and 'failed' are settled."""
    practice = Counter()

    def rewards(member: str, task: int, step: int) -> list[float]:
        rng = random.Random(f"{seed}/{member}/{task}/{step}/{practice[member]}")
        if member in ("solved", "failed"):
            return [float(member == "solved")] * 4
        skill = 0.1 + 0.004 * practice[member]
        p = 1 / (1 + math.exp(-10 * (skill - 0.8 * task / 7)))
        seen = [rng.random() < p for _ in range(4)]
        practice[member] += is_informative([float(s) for s in seen])
        if member == "flaky":
            seen = [s != (rng.random() < 0.2) for s in seen]
        return [float(s) for s in seen]

    return rewards


@settings(DETERMINISTIC, max_examples=3)
@given(seed=st.integers(0, 2**32))
def test_a_flaky_member_that_learns_no_faster_stays_within_twice_its_share_once_its_noise_is_known(
    seed: int,
) -> None:
    # Long enough for its noise to be well measured (trust near 1): then `_noise_cap` is what holds it.
    members = {"flaky": 8, "a": 8, "b": 8, "solved": 8, "failed": 8}
    planner = _planner(members, 12, seed)
    _drive(planner, 120, _flaky_learner_world(seed))
    weights = [planner.weights(s) for s in range(3, 121)]
    assert max(w["flaky"] for w in weights) <= 2 / len(members) + EPS, max(w["flaky"] for w in weights)
    assert planner.beliefs(120)["flaky"]["noise"] > 0.1


# ------------------------------------------------------------------------------- platform prior (pure)


def _prior_planner(
    n: int, k: int, evidence: dict[int, Evidence], rule: dict[str, Any] | None = None
) -> Planner:
    """An adaptive one-member planner whose filter has ``prior: platform``, fed `evidence`."""
    config = MixtureConfig(
        members={"a": {"target": "Owner/A", "filter": {"prior": "platform", **(rule or {})}}},
        strategy="adaptive",
        prompts_per_step=k,
        adaptive={"warmup_steps": 100},
    )
    return Planner(config, {"a": list(range(n))}, difficulty={"a": evidence})


rows_of_difficulty = st.lists(
    st.builds(
        lambda t, lo, hi, n: (t, min(lo, hi), max(lo, hi), n),
        st.integers(0, 6),
        st.sampled_from([0.0, 0.5, 1.0]),
        st.sampled_from([0.0, 0.5, 1.0]),
        st.integers(0, 20),
    ),
    max_size=12,
)


def _row(t: int, lo: float, hi: float, n: int) -> Any:
    return TaskDifficulty(t, (lo + hi) / 2, lo, hi, n)


@settings(DETERMINISTIC, max_examples=200)
@given(rows_of_difficulty, st.randoms(use_true_random=False))
def test_the_evidence_of_a_platform_answer_does_not_depend_on_its_order(rows, rnd) -> None:
    shuffled = list(rows)
    rnd.shuffle(shuffled)
    pooled = evidence_of([_row(*r) for r in rows])
    assert pooled == evidence_of([_row(*r) for r in shuffled])
    for task, seen in pooled.items():
        mine = [r for r in rows if r[0] == task and r[3] > 0]
        assert seen.rollouts == sum(r[3] for r in mine)
        assert seen.min_reward == min(r[1] for r in mine) and seen.max_reward == max(r[2] for r in mine)
    assert set(pooled) == {r[0] for r in rows if r[3] > 0}  # rows without rollouts say nothing


@settings(DETERMINISTIC, max_examples=300)
@given(
    st.dictionaries(
        st.integers(0, 9),
        st.builds(
            Evidence, st.sampled_from([0.0, 0.5, 1.0]), st.sampled_from([0.0, 0.5, 1.0]), st.integers(0, 30)
        ),
    ),
    st.integers(1, 16),
    st.integers(1, 4),
)
def test_prior_decisions_set_aside_exactly_the_tasks_every_rollout_agreed_on_with_enough_rollouts(
    evidence, min_rollouts: int, window: int
) -> None:
    rule = TaskFilterConfig(min_rollouts=min_rollouts, window=window)
    decisions = prior_decisions(evidence, rule)
    for task, seen in evidence.items():
        agreed = seen.rollouts > 0 and seen.min_reward == seen.max_reward in (0.0, 1.0)
        assert (task in decisions) == agreed
        if agreed:
            d = decisions[task]
            assert d.outcome == ("solved" if seen.min_reward == 1.0 else "failed")
            assert d.rollouts == seen.rollouts
            assert d.aside == (seen.rollouts >= max(min_rollouts, window))
    # A prior never decides about rollouts whose rewards differ: they teach.
    assert prior_outcome(Evidence(0.0, 1.0, 1000), solved=1.0, failed=0.0) is None


@settings(DETERMINISTIC, max_examples=40)
@given(
    st.dictionaries(st.integers(0, 7), st.builds(Evidence, st.just(1.0), st.just(1.0), st.integers(1, 20))),
    st.integers(1, 6),
)
def test_the_platform_prior_sets_tasks_aside_from_step_one_for_the_cooldown_and_same_input_same_rows(
    evidence, k: int
) -> None:
    planner = _prior_planner(8, k, evidence, {"cooldown_steps": 3})
    aside = {t for t, e in evidence.items() if e.rollouts >= 8}
    rows = _drive(planner, 6, lambda m, t, s: [1.0, 0.0])
    assert planner.tasks_set_aside("a", 1) == len(aside)
    if len(aside) < 8:  # (a member whose every task is aside still gets its rows)
        assert all(not (_tasks_of(rows[s - 1], "a") & aside) for s in (1, 2, 3))
    assert planner.tasks_set_aside("a", 4) == 0  # back after the cooldown, as any set-aside task
    # Deterministic: the same evidence (however it was ordered) gives the same rows, as on every rank.
    again = _prior_planner(8, k, dict(reversed(list(evidence.items()))), {"cooldown_steps": 3})
    assert _drive(again, 6, lambda m, t, s: [1.0, 0.0]) == rows


@pytest.mark.parametrize(("credit", "groups_needed"), [(0, 4), (2, 3), (4, 2), (7, 1)])
def test_too_few_logged_rollouts_count_as_earlier_groups_toward_the_first_decision(
    credit: int, groups_needed: int
) -> None:
    # Groups of 2 and min_rollouts 8: training alone needs 4 solved groups; the prior's solved rollouts
    # stand in for credit // 2 of them (7 logged rollouts: three groups, so one more from training).
    evidence = {0: Evidence(1.0, 1.0, credit)} if credit else {}
    planner = _prior_planner(1, 1, evidence)
    assert planner.tasks_set_aside("a", 1) == 0
    _drive(planner, groups_needed + LAG, lambda m, t, s: [1.0, 1.0])
    assert planner.tasks_set_aside("a", groups_needed - 1 + LAG) == 0
    assert planner.tasks_set_aside("a", groups_needed + LAG) == 1


def test_credit_the_first_group_contradicts_is_dropped() -> None:
    planner = _prior_planner(1, 1, {0: Evidence(1.0, 1.0, 6)})
    # The first group fails: the prior's 3 solved groups and 1 failed group do not agree; three more failed
    # groups are needed for the four the filter wants.
    _drive(planner, 4 + LAG, lambda m, t, s: [0.0, 0.0])
    assert planner.tasks_set_aside("a", 3 + LAG) == 0 and planner.tasks_set_aside("a", 4 + LAG) == 1


def test_the_prior_credit_is_checkpointed_and_a_restored_planner_continues_exactly() -> None:
    evidence = {0: Evidence(1.0, 1.0, 4), 1: Evidence(0.0, 0.0, 12), 2: Evidence(0.0, 0.0, 2)}
    planner = _prior_planner(4, 2, evidence)
    _drive(planner, 1, lambda m, t, s: [1.0, 1.0])
    state = json.loads(json.dumps(planner.state_dict()))
    assert state["set_aside"]["a"] == [[1, 9, [1]]]  # (first step, first step back, the tasks)
    # Whatever the platform answers now (here: nothing), the resumed run goes on from the checkpoint.
    restored = _prior_planner(4, 2, {})
    restored.load_state_dict(state)
    assert restored._credit == planner._credit
    assert _drive(restored, 8, lambda m, t, s: [1.0, 1.0], start=2) == _drive(
        planner, 8, lambda m, t, s: [1.0, 1.0], start=2
    )
    # A checkpoint of a version without the prior's credit has none.
    old = {k: v for k, v in state.items() if k != "credit"}
    restored.load_state_dict(old)
    assert all(not c for c in restored._credit.values())


def test_a_metadata_prior_and_the_platform_prior_are_told_apart() -> None:
    metadata_rule = TaskFilterConfig(prior={"field": "level", "pass_rates": {"easy": 0.95}})
    assert type(metadata_rule.prior).__name__ == "PriorConfig"
    assert TaskFilterConfig(prior="platform").prior.source == "platform"  # type: ignore[union-attr]
    with pytest.raises(ValidationError, match="prior is 'platform'"):
        TaskFilterConfig(prior="platfrom")


@settings(DETERMINISTIC, max_examples=40)
@given(st.integers(0, 2**32), st.sampled_from([0.0, 0.2, 0.5]))
def test_uniform_mix_spreads_its_share_of_the_batch_evenly(seed: int, mix: float) -> None:
    # `adaptive.uniform_mix`: that share of the batch is uniform whatever the signal says (1: all of it).
    rng = random.Random(seed)
    hist = [
        {
            "a": [(t, [float(rng.random() < 0.5) for _ in range(4)]) for t in range(3)],
            "b": [(t, [1.0] * 4) for t in range(3)],  # all solved: nothing to learn
        }
        for _ in range(12)
    ]
    flat = _scores("denoised", hist, ["a", "b"], random.Random(0), uniform_mix=1.0)
    assert flat == pytest.approx({"a": 0.5, "b": 0.5})
    got = _scores("denoised", hist, ["a", "b"], random.Random(0), uniform_mix=mix)
    assert min(got.values()) >= mix / 2 - 1e-9  # each member keeps at least its part of the uniform share
    more = _scores("denoised", hist, ["a", "b"], random.Random(0), uniform_mix=min(1.0, mix + 0.3))
    assert abs(more["b"] - 0.5) <= abs(got["b"] - 0.5) + 1e-9  # a larger uniform share: closer to even


def _observed_split(cfg: MixtureConfig, rewards: list[float], generations: int, world: int) -> list[Any]:
    """What the planner observes for step 1 when `world` processes each record their slice of the batch."""
    from types import SimpleNamespace

    from ormix.mixture._adaptive_run import AdaptiveRun
    from ormix.mixture._planner import Planner
    from ormix.rollout._rewards import ScoredBatch

    n = len(rewards) // world
    runs = []
    for rank in range(world):
        run = AdaptiveRun(Planner(cfg, {"a": [0, 1, 2]}), rows={"a": {t: {} for t in range(3)}})
        run.rank, run.num_generations = rank, generations
        part = range(rank * n, (rank + 1) * n)
        episodes = [SimpleNamespace(task_index=i // generations) for i in part]
        run.record(ScoredBatch("a", episodes, [rewards[i] for i in part], list(enumerate(episodes))))
        runs.append(run)
    runs[0].end_step(1, [run.take_groups() for run in runs])
    return runs[0].planner.state_dict()["history"]["1"]["a"]


def test_groups_split_over_processes_reach_the_planner_whole_as_on_one_process() -> None:
    """TRL hands process k the slice [k*n, (k+1)*n) of the global batch: with n not a multiple of
    num_generations a GRPO group is split over processes, and the planner must still see it as one group (a
    group [1, 1 | 0, 0] split in two is informative; its halves are not)."""
    cfg = MixtureConfig(members={"a": {"target": "local:echo"}}, strategy="adaptive", prompts_per_step=3)
    rng = random.Random(0)
    for generations, processes in ((4, 2), (8, 2), (4, 4), (8, 4), (2, 6), (4, 6), (4, 3)):
        rewards = [float(rng.random() < 0.5) for _ in range(3 * generations)]  # prompts_per_step groups
        one = _observed_split(cfg, rewards, generations, 1)
        assert [len(r) for _, r in one] == [generations] * 3
        assert _observed_split(cfg, rewards, generations, processes) == one, (generations, processes)
