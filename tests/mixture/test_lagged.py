"""`LaggedPlan` / `async_lag`: adaptive mixing when TRL's async rollout worker reads ahead of the trainer.

The worker is simulated as TRL 1.16's loop schedules it (``async_rollout_worker._generate_loop`` and
``_score_loop``): rows drawn in order, one per group of G rollouts, at most M rollouts in flight, finished
groups in a scoring queue of Q (a full queue blocks drawing), one group scored at a time. Hypothesis picks
every interleaving; the planner must never be asked for a step whose statistics are missing, and it must
decide the same rows whatever the interleaving.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ormix._errors import MixtureError
from ormix.config import MixtureConfig
from ormix.mixture._lagged import LaggedPlan, async_lag
from ormix.mixture._planner import Planner

CONFIG = MixtureConfig(
    members={"a": {"target": "local:echo"}, "b": {"target": "local:echo"}},
    strategy="adaptive",
    prompts_per_step=2,
    adaptive={"warmup_steps": 1, "window": 2},
    seed=3,
)
TASKS = {"a": list(range(5)), "b": list(range(7))}


def rewards_of(member: str, task: int, g: int) -> list[float | None]:
    """The scripted outcome of one group: `a` always solved, `b` informative on even tasks."""
    if member == "a":
        return [1.0] * g
    return [float(i % 2 == 0) if task % 2 == 0 else 0.0 for i in range(g)]


def simulate(
    m: int, q: int, g: int, groups: int, choices: list[int], *, fifo: bool = False
) -> tuple[list[tuple[str, int]], Planner]:
    """Run the worker's schedule with `choices` picking each next event (`fifo`: rollouts finish in the
    order they were drawn); return the rows it drew and the planner (its `held`: the plan steps decided
    before their statistics were in)."""
    lag = async_lag(max_inflight_tasks=m, score_queue_maxsize=q, prompts_per_step=CONFIG.prompts_per_step)
    plan = LaggedPlan(Planner(CONFIG, TASKS, lag=lag, hold_unobserved=True))
    rows: list[tuple[str, int]] = []
    drawn = 0  # rollouts drawn
    inflight: list[int] = []  # rollout indices
    done = [0] * groups
    queue: list[int] = []
    blocked: int | None = None  # a finished group the generate loop waits to queue
    scoring: int | None = None
    scored = 0
    picks = iter(choices)
    while scored < groups:
        events = []
        if blocked is None and len(inflight) < m and drawn < groups * g:
            events.append("draw")
        if blocked is None and inflight:
            events.append("finish")
        if scoring is None and queue:
            events.append("pop")
        if scoring is not None:
            events.append("score")
        pick = next(picks, 0)
        event = events[pick % len(events)]
        if event == "draw":
            if drawn % g == 0:  # the group's row is read from the dataset now
                rows.append(plan.row(drawn // g))
            inflight.append(drawn)
            drawn += 1
        elif event == "finish":
            rollout = inflight.pop(0 if fifo else next(picks, 0) % len(inflight))
            done[rollout // g] += 1
            if done[rollout // g] == g:
                if len(queue) < q:
                    queue.append(rollout // g)
                else:
                    blocked = rollout // g
        elif event == "pop":
            scoring = queue.pop(0)
            if blocked is not None:
                queue.append(blocked)
                blocked = None
        else:
            group = scoring
            member, task = rows[group]
            plan.add(group, member, task, rewards_of(member, task, g))
            scoring = None
            scored += 1
    return rows, plan.planner


SCHEDULES = {
    "m": st.integers(1, 6),
    "q": st.integers(1, 3),
    "g": st.integers(1, 3),
    "choices": st.lists(st.integers(0, 7), max_size=400),
}


@settings(max_examples=40, deadline=None)
@given(**SCHEDULES)
def test_while_rollouts_finish_in_order_the_lag_holds_and_rows_do_not_depend_on_timing(m, q, g, choices):
    groups = 14  # 7 plan steps
    rows, planner = simulate(m, q, g, groups, choices, fifo=True)
    in_order, sequential = simulate(m, q, g, groups, [])  # the sequential schedule: always the first event
    assert planner.held == [] and sequential.held == []
    assert rows == in_order


@settings(max_examples=40, deadline=None)
@given(**SCHEDULES)
def test_a_rollout_slower_than_the_lag_holds_the_weights_and_never_stops_the_worker(m, q, g, choices):
    """Any completion order (one rollout may stay in flight while later ones cycle through): no row is
    refused; a step whose statistics were not in keeps the weights of the step before, and is counted."""
    groups = 14
    rows, planner = simulate(m, q, g, groups, choices)
    in_order, _ = simulate(m, q, g, groups, [])
    for step in planner.held:
        assert planner.weights(step) == planner.weights(step - 1)
    if not planner.held:
        assert rows == in_order


def test_a_slow_rollout_is_what_holds_a_step():
    # m=3, q=1, g=1: rollout 2 finishes first, rollout 0 waits behind a full queue, rollout 1 is still being
    # scored when step 4 (rows 6, 7) is drawn, so step 1's statistics are not in.
    _, planner = simulate(3, 1, 1, 14, [0, 0, 0, 0, 2])
    assert planner.held and planner.held[0] == 4


def test_a_row_whose_statistics_are_missing_is_refused():
    lag = 3
    plan = LaggedPlan(Planner(CONFIG, TASKS, lag=lag))
    for group in range(2 * lag):
        plan.row(group)  # the first `lag` steps need no statistics
    with pytest.raises(MixtureError, match="observed"):
        plan.row(2 * lag)


def test_groups_are_pooled_per_step_in_group_order():
    seen = []

    class Recorder:
        k, lag = 2, 3

        def observe(self, step, groups):
            seen.append((step, groups))

    plan = LaggedPlan(Recorder())
    assert plan.add(3, "b", 1, [0.0, 1.0]) == []
    assert plan.add(1, "a", 0, [1.0]) == []
    assert plan.add(0, "b", 2, [1.0]) == [1]
    assert plan.add(2, "a", 4, [0.0]) == [2]
    assert seen == [
        (1, {"b": [(2, [1.0])], "a": [(0, [1.0])]}),
        (2, {"a": [(4, [0.0])], "b": [(1, [0.0, 1.0])]}),
    ]
    assert list(seen[0][1]) == ["b", "a"]  # group 0 (b) before group 1 (a)
    with pytest.raises(MixtureError, match="already observed"):
        plan.add(0, "b", 2, [1.0])
    assert plan.has(3) and not plan.has(4)


def test_async_lag_values():
    assert async_lag(max_inflight_tasks=1, score_queue_maxsize=0, prompts_per_step=8) == 2
    assert async_lag(max_inflight_tasks=4, score_queue_maxsize=1, prompts_per_step=2) == 4
    with pytest.raises(MixtureError):
        async_lag(max_inflight_tasks=0, score_queue_maxsize=1, prompts_per_step=2)
