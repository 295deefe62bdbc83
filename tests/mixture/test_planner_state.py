"""The planner's state stays bounded by what its decisions read, and its rows stay exactly what they were.

`data/planner_v1.json` holds, for five adaptive mixtures (every signal, task filters, a metadata prior, the
platform prior, 2-8 members), the rows, weights and tasks set aside of every step as the planner of the
previous release decided them on seeded rewards, and that planner's checkpoint (format 1: every step kept)
part-way through. The planner now forgets what no decision reads; these tests hold it to those rows."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ormix._errors import MixtureError
from ormix.config import MixtureConfig
from ormix.mixture._adaptive import SIGNALS
from ormix.mixture._planner import KEPT_STEPS, STATE_FORMAT, Evidence, Planner

DETERMINISTIC = settings(derandomize=True, deadline=None, database=None)
SCENARIOS = json.loads((Path(__file__).parent / "data" / "planner_v1.json").read_text())


def _rewards(seed: int, member: str, task: int, step: int) -> list[float | None]:
    """The rewards the fixture was made with: a member's success rate drifts every 7 steps; 5% of groups
    have a reward missing."""
    rng = random.Random(f"{seed}/{member}/{task}/{step}")
    p = random.Random(f"{seed}/{member}/{step // 7}").random()
    out: list[float | None] = [float(rng.random() < p) for _ in range(4)]
    if rng.random() < 0.05:
        out[0] = None
    return out


def _build(s: dict[str, Any]) -> Planner:
    cfg = MixtureConfig(
        members={m: {"target": "local:echo", "filter": s["filters"].get(m)} for m in s["members"]},
        strategy="adaptive",
        prompts_per_step=s["k"],
        seed=s["seed"],
        adaptive=s["adaptive"],
    )
    metadata = {m: {int(t): v for t, v in d.items()} for m, d in s.get("metadata", {}).items()}
    difficulty = {m: {int(t): Evidence(*v) for t, v in d.items()} for m, d in s.get("difficulty", {}).items()}
    return Planner(
        cfg,
        {m: list(range(n)) for m, n in s["members"].items()},
        metadata=metadata or None,
        difficulty=difficulty or None,
    )


def _groups(rows: list[tuple[str, int]], seed: int, step: int) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for m, t in rows:
        out.setdefault(m, []).append((t, _rewards(seed, m, t, step)))
    return out


def _reloaded(planner: Planner, s: dict[str, Any]) -> Planner:
    """A new planner continuing from `planner`'s checkpoint, through JSON as checkpoints store it."""
    fresh = _build(s)
    fresh.load_state_dict(json.loads(json.dumps(planner.state_dict())))
    return fresh


@pytest.mark.parametrize("s", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
def test_the_rows_weights_and_tasks_set_aside_of_the_previous_release_are_kept(s) -> None:
    planner = _build(s)
    for step, expected in enumerate(s["expected"], start=1):
        rows = planner.rows(step)
        assert [list(r) for r in rows] == expected["rows"], step
        assert planner.weights(step) == expected["weights"], step
        assert {m: planner.tasks_set_aside(m, step) for m in planner.members} == expected["aside"], step
        planner.observe(step, _groups(rows, s["seed"], step))


@pytest.mark.parametrize("s", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
def test_a_checkpoint_of_the_previous_format_loads_and_continues_with_the_same_rows(s) -> None:
    assert "format" not in s["state"] and len(s["state"]["history"]) == s["save_at"]  # format 1: all kept
    planner = _build(s)
    planner.load_state_dict(s["state"])
    for step in range(s["save_at"] + 1, s["steps"] + 1):
        expected = s["expected"][step - 1]
        rows = planner.rows(step)
        assert [list(r) for r in rows] == expected["rows"], step
        assert planner.weights(step) == expected["weights"], step
        assert {m: planner.tasks_set_aside(m, step) for m in planner.members} == expected["aside"], step
        planner.observe(step, _groups(rows, s["seed"], step))
        # ...and every checkpoint written from there (format 2) continues with them too.
        planner = _reloaded(planner, s)


@pytest.mark.parametrize("s", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
def test_the_state_keeps_only_the_window_the_decisions_read(s) -> None:
    planner = _build(s)
    last = s["steps"]
    for step in range(1, last + 1):
        planner.observe(step, _groups(planner.rows(step), s["seed"], step))
    state = json.loads(json.dumps(planner.state_dict()))
    window = max(s["adaptive"]["window"], s["adaptive"]["progress_window"])
    lag = planner.lag
    assert state["format"] == STATE_FORMAT
    # The next decision (step last + 1) reads the statistics of steps last + 2 - lag - window ...
    # last + 1 - lag; the steps observed since (up to last) are kept for the decisions after it.
    assert sorted(int(x) for x in state["history"]) == list(range(last + 2 - lag - window, last + 1))
    kept = list(range(max(1, last + 1 - lag - window - KEPT_STEPS), last + 1))
    assert sorted(int(x) for x in state["rows"]) == kept == sorted(int(x) for x in state["weights"])
    if kept[0] > 1:
        with pytest.raises(MixtureError, match="forgotten"):
            planner.rows(kept[0] - 1)
        assert planner.rows(kept[0]) == [tuple(r) for r in s["expected"][kept[0] - 1]["rows"]]


def test_a_forgotten_step_observed_again_changes_nothing() -> None:
    s = SCENARIOS[1]  # window 2, progress window 3: statistics forgotten after 5 steps
    planner, straight = _build(s), _build(s)
    for step in range(1, 31):
        for p in (planner, straight):
            p.observe(step, _groups(p.rows(step), s["seed"], step))
    planner.observe(3, {m: [(0, [0.0, 1.0])] for m in planner.members})  # a replay of a forgotten step
    assert 3 not in planner.history
    assert planner.rows(31) == straight.rows(31) and planner.weights(32) == straight.weights(32)
    # A step the next decision still reads cannot change.
    with pytest.raises(MixtureError, match="cannot change"):
        planner.observe(29, {m: [(0, [0.0, 1.0])] for m in planner.members})


def test_the_state_does_not_grow_with_the_steps() -> None:
    # Three members of 40 tasks at 8 prompts a step: every task is seen within the first 100 steps, so past
    # them only the steps could make the state grow.
    cfg = MixtureConfig(
        members={m: {"target": "local:echo"} for m in "abc"},
        strategy="adaptive",
        prompts_per_step=8,
        adaptive={"window": 4, "progress_window": 8},
    )
    planner = Planner(cfg, {m: list(range(40)) for m in "abc"})
    sizes = {}
    for step in range(1, 1501):
        planner.observe(step, _groups(planner.rows(step), 0, step))
        if step in (300, 1500):
            sizes[step] = len(json.dumps(planner.state_dict()))
    assert sizes[1500] <= 1.3 * sizes[300], sizes
    assert len(planner.history) <= 2 + 8 and len(planner._rows) <= 2 + 8 + KEPT_STEPS + 1


members_ = st.integers(1, 4)
plans = st.fixed_dictionaries(
    {
        "n": members_,
        "k": st.integers(1, 10),
        "seed": st.integers(0, 2**32),
        "signal": st.sampled_from(SIGNALS),
        "window": st.integers(1, 4),
        "progress_window": st.integers(1, 6),
        "warmup": st.integers(0, 3),
        "tasks": st.integers(1, 5),
        "filter_window": st.integers(1, 3),
        "cooldown": st.integers(1, 6),
        "min_rollouts": st.sampled_from([1, 2, 8]),
        "group": st.integers(1, 4),
        "steps": st.integers(1, 100),
    }
)


@settings(DETERMINISTIC, max_examples=40)
@given(plans)
def test_checkpoints_every_step_give_the_rows_of_a_planner_never_checkpointed(plan) -> None:
    names = ["p", "q", "r", "s"][: plan["n"]]
    rule = {
        "window": plan["filter_window"],
        "cooldown_steps": plan["cooldown"],
        "min_rollouts": plan["min_rollouts"],
    }
    scenario = {
        "members": {m: plan["tasks"] + i for i, m in enumerate(names)},
        "k": plan["k"],
        "seed": plan["seed"],
        "adaptive": {
            "signal": plan["signal"],
            "window": plan["window"],
            "progress_window": plan["progress_window"],
            "warmup_steps": plan["warmup"],
            "thompson_draws": 8,
        },
        "filters": {m: rule for m in names},
    }
    rng = random.Random(plan["seed"])
    straight, resumed = _build(scenario), _build(scenario)
    for step in range(1, plan["steps"] + 1):
        rows = straight.rows(step)
        assert resumed.rows(step) == rows, step
        assert resumed.weights(step) == straight.weights(step)
        assert [resumed.tasks_set_aside(m, step) for m in names] == [
            straight.tasks_set_aside(m, step) for m in names
        ]
        groups: dict[str, list[Any]] = {}
        for m, t in rows:
            p = rng.random()
            groups.setdefault(m, []).append((t, [float(rng.random() < p) for _ in range(plan["group"])]))
        straight.observe(step, groups)
        resumed.observe(step, groups)
        resumed = _reloaded(resumed, scenario)
    assert resumed.state_dict() == json.loads(json.dumps(straight.state_dict()))


def test_a_planner_started_on_another_prior_takes_a_fresh_planners_state_and_decides_its_rows() -> None:
    # What `AdaptiveCallback` does when the processes' platform priors differ: every rank loads process 0's
    # state at step 0 and from then decides its rows (tests/integrations/test_multiprocess_adaptive.py runs
    # the callback on two ranks).
    s = next(s for s in SCENARIOS if s.get("difficulty"))
    first = _build(s)
    other = _build({**s, "difficulty": {}})  # a process the platform answered nothing
    assert [other.tasks_set_aside(m, 1) for m in other.members] != [
        first.tasks_set_aside(m, 1) for m in first.members
    ]
    other.load_state_dict(json.loads(json.dumps(first.state_dict())))
    for step in range(1, s["steps"] + 1):
        rows = first.rows(step)
        assert other.rows(step) == rows and other.weights(step) == first.weights(step), step
        for planner in (first, other):
            planner.observe(step, _groups(rows, s["seed"], step))
