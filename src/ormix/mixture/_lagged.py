"""Adaptive mixing when the rollout worker reads the dataset ahead of the trainer (pure: no I/O).

Under TRL's `AsyncGRPOTrainer` a spawned worker draws dataset rows, generates, scores, and queues samples
while the trainer trains; the planner therefore lives in the worker and learns from the groups the worker
scores, not from the trainer's steps. A *plan step* is ``row // prompts_per_step + 1`` (the step the row was
planned for); the planner decides the rows of plan step *s* from the pooled statistics of plan steps up to
``s - lag``.

The lag (`async_lag`). The worker draws rows in order and holds at most ``max_inflight_tasks`` rollouts in
flight; a finished group waits in a scoring queue of at most ``score_queue_maxsize`` groups, and one more is
being scored. When the worker draws the first row of plan step *s* (group index ``(s - 1) * k``), every group
it has not scored yet is one of those: at most ``M - 1`` groups with a rollout in flight (a slot is free for
the draw), ``Q`` queued and 1 being scored, so at most ``M + Q`` groups. Every group before
``(s - 1) * k - (M + Q)`` is scored, so plan steps up to ``s - 1 - ceil((M + Q) / k)`` are complete, and

    lag = 1 + ceil((M + Q) / k)

never asks for statistics that do not exist yet, however the worker's requests interleave. The rollout
buffer between worker and trainer does not enter: a sample is queued after its group was observed.

Pooled and deterministic (`LaggedPlan`): a plan step's groups are handed to the planner once, when all its
``k`` groups are scored, in group order, whatever order they finished in. The planner's decisions are then a
function of the rewards alone (the same rewards give the same rows), not of timing; the property tests
(tests/mixture/test_lagged.py) check both the bound and this.

Example:
    >>> async_lag(max_inflight_tasks=4, score_queue_maxsize=2, prompts_per_step=2)
    4
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ormix._errors import MixtureError


def async_lag(*, max_inflight_tasks: int, score_queue_maxsize: int, prompts_per_step: int) -> int:
    """Plan steps between the statistics and the rows they decide, for TRL's async rollout worker (see the
    module docstring). At least 2, the synchronous trainer's lag.

    Example:
        >>> async_lag(max_inflight_tasks=128, score_queue_maxsize=16, prompts_per_step=8)
        19
    """
    if max_inflight_tasks < 1 or score_queue_maxsize < 0 or prompts_per_step < 1:
        raise MixtureError(
            "async_lag needs max_inflight_tasks >= 1, score_queue_maxsize >= 0, prompts_per_step >= 1 (got "
            f"{max_inflight_tasks}, {score_queue_maxsize}, {prompts_per_step})"
        )
    return max(2, 1 + math.ceil((max_inflight_tasks + score_queue_maxsize) / prompts_per_step))


class LaggedPlan:
    """A planner fed by the worker's scored groups: each plan step observed once, complete and in order.

    Args:
        planner: a `ormix.mixture._planner.Planner` built with ``lag=async_lag(...)`` (or any object with
            ``k``, ``lag``, ``rows(step)`` and ``observe(step, groups)``).

    ``add(group_index, member, task, rewards)`` takes one scored group (``group_index`` = the row it came
    from, counted from 0 in the order the worker drew rows); it returns the plan steps that became complete
    and were handed to the planner.

    Example:
        >>> from ormix.config import MixtureConfig
        >>> from ormix.mixture._planner import Planner
        >>> cfg = MixtureConfig(members={"a": {"target": "local:echo"}, "b": {"target": "local:echo"}},
        ...                     strategy="adaptive", prompts_per_step=2, adaptive={"warmup_steps": 1})
        >>> plan = LaggedPlan(Planner(cfg, {"a": [0, 1], "b": [0, 1]}, lag=3))
        >>> plan.add(1, "b", 0, [0.0, 1.0]), plan.add(0, "a", 1, [1.0, 1.0])
        ([], [1])
        >>> plan.observed
        [1]
    """

    def __init__(self, planner: Any) -> None:
        if planner.k is None:
            raise MixtureError("adaptive mixing under the async trainer needs prompts_per_step")
        self.planner = planner
        self.k = int(planner.k)
        self.lag = int(planner.lag)
        # plan step → group index → (member, task, rewards)
        self._pending: dict[int, dict[int, tuple[str, int, list[float | None]]]] = {}
        self.observed: list[int] = []
        # The same steps, looked up once per scored group: a set, so a long run does not slow every lookup.
        self._observed: set[int] = set()

    def step_of(self, group_index: int) -> int:
        """The plan step of a row (from 1).

        Example:
            >>> from types import SimpleNamespace
            >>> LaggedPlan(SimpleNamespace(k=3, lag=2)).step_of(5)
            2
        """
        return group_index // self.k + 1

    def row(self, group_index: int) -> tuple[str, int]:
        """The (member, task) of a row, decided now by the planner."""
        return tuple(self.planner.rows(self.step_of(group_index))[group_index % self.k])

    def add(self, group_index: int, member: str, task: int, rewards: Sequence[float | None]) -> list[int]:
        """Take one scored group; hand every plan step it completes to the planner (see the class)."""
        step = self.step_of(group_index)
        if step in self._observed:
            raise MixtureError(f"plan step {step} was already observed; group {group_index} came twice")
        groups = self._pending.setdefault(step, {})
        if group_index in groups:
            raise MixtureError(f"group {group_index} was added twice")
        groups[group_index] = (str(member), int(task), list(rewards))
        if len(groups) < self.k:
            return []
        del self._pending[step]
        pooled: dict[str, list[tuple[int, list[float | None]]]] = {}
        for index in sorted(groups):  # group order, not completion order: the decisions do not race
            m, t, r = groups[index]
            pooled.setdefault(m, []).append((t, r))
        self.planner.observe(step, pooled)
        self.observed.append(step)
        self._observed.add(step)
        return [step]

    def has(self, group_index: int) -> bool:
        """Whether this group was added already (its step observed, or pending with it).

        Example:
            >>> from types import SimpleNamespace
            >>> LaggedPlan(SimpleNamespace(k=2, lag=2)).has(0)
            False
        """
        step = self.step_of(group_index)
        return step in self._observed or group_index in self._pending.get(step, {})
