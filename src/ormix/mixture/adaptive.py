"""Adaptive mixing: member weights that follow what the policy can learn, and task-level difficulty filtering.

Pure: no I/O, nothing of ormix's I/O; the statistics come in through `AdaptivePlanner.observe` (pooled over
every rank by the trainer callback), the rows go out through `AdaptivePlanner.rows`.

Why: a GRPO group whose rollouts all succeed, or all fail, has zero advantage — it teaches nothing. A member
whose groups are all solved (saturated) or all failed (not learnable yet) wastes its share of the batch. The
planner moves budget toward members whose groups are *informative*, with a floor so nothing starves and a
bound on how fast weights move.

Signals (``signal``):

- ``informative`` (default): a member's weight follows the fraction of its recent groups with reward spread.
- ``progress``: learning progress, the absolute change of its mean reward between the older and the newer
  half of the window (plus a little of the informative fraction, so a member that just started moves too).
- ``thompson``: a bandit: each member's chance of giving an informative group is Beta(1 + informative,
  1 + uninformative) over the window, sampled with a generator seeded by ``(seed, step)``; weights follow
  the samples.

Every step's weights are `constrain`ed: at least ``floor`` each, at most ``max_change`` away from the previous
step's, summing to 1. The first ``warmup_steps`` use the static weights. The rows of a step keep the exact
per-step quotas (largest remainder, remainders carried across steps, ties seeded).

Determinism and lag: the rows of step *t* are a pure function of the seed and the pooled statistics of the
steps up to *t - lag* (``lag`` = 2: when a trainer fetches the rows of step *t*, step *t - 1* may still be
running, step *t - 2* is complete on every rank). Asking for step *t* before step *t - lag* was observed
raises `SamplingError` (a loader prefetching deeper than the lag would make ranks disagree).

Task filtering (per member, optional): a task whose last ``window`` groups were all solved or all failed is
set aside for ``cooldown_steps`` steps, then comes back; a prior from task metadata (``prior``: pass rates by a
metadata value, e.g. difficulty) can set tasks aside from the start.

Example:
    >>> planner = AdaptivePlanner({"a": [0, 1], "b": [0, 1]}, prompts_per_step=4, seed=0,
    ...                           settings=AdaptiveSettings(warmup_steps=1))
    >>> sorted(m for m, _ in planner.rows(1))
    ['a', 'a', 'b', 'b']
    >>> planner.observe(1, {"a": [(0, [1.0, 1.0]), (1, [1.0, 1.0])], "b": [(0, [0.0, 1.0]), (1, [1.0, 0.0])]})
    >>> w = planner.weights(3)
    >>> w["b"] > w["a"]
    True
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ormix.mixture.sampling import SamplingError, derive_seed

__all__ = [
    "LAG",
    "AdaptivePlanner",
    "AdaptiveSettings",
    "TaskFilterSettings",
    "constrain",
    "group_is_informative",
    "signal_scores",
]

#: Steps the statistics are behind the rows they decide (see the module docstring).
LAG = 2

Signal = Literal["informative", "progress", "thompson"]
Group = tuple[int, Sequence[float | None]]


@dataclass(frozen=True)
class AdaptiveSettings:
    """How adaptive weights move (mirrors the mixture file's ``adaptive:`` section).

    Example:
        >>> AdaptiveSettings().floor
        0.05
    """

    signal: Signal = "informative"
    warmup_steps: int = 2
    floor: float = 0.05
    max_change: float = 0.25
    window: int = 4


@dataclass(frozen=True)
class TaskFilterSettings:
    """Task-level difficulty filtering inside one member (a member's ``filter:`` section).

    ``solved`` is the reward at or above which a rollout counts as solved (at or below ``failed``: failed).
    ``prior`` maps a task-metadata value of ``prior_field`` to a prior pass rate; a prior >= 0.9 or <= 0.1 sets
    the task aside from the start (for ``cooldown_steps``).

    Example:
        >>> TaskFilterSettings(window=2, cooldown_steps=4).window
        2
    """

    window: int = 2
    cooldown_steps: int = 8
    solved: float = 1.0
    failed: float = 0.0
    prior_field: str | None = None
    prior: Mapping[str, float] = field(default_factory=dict)


def group_is_informative(rewards: Sequence[float | None]) -> bool:
    """Whether a GRPO group's rewards differ (``None``, an error or unscored, is left out).

    Example:
        >>> group_is_informative([1.0, 0.0]), group_is_informative([1.0, 1.0, None])
        (True, False)
    """
    present = [float(r) for r in rewards if r is not None and not math.isnan(float(r))]
    return len(present) >= 2 and max(present) - min(present) > 1e-9


def signal_scores(
    signal: Signal,
    history: Sequence[Mapping[str, Sequence[Group]]],
    members: Sequence[str],
    rng: random.Random,
) -> dict[str, float | None]:
    """Each member's score from the window's statistics (oldest step first); ``None`` where it had no group.

    Example:
        >>> hist = [{"a": [(0, [1.0, 1.0])], "b": [(0, [0.0, 1.0])]}]
        >>> signal_scores("informative", hist, ["a", "b"], random.Random(0))
        {'a': 0.0, 'b': 1.0}
    """
    out: dict[str, float | None] = {}
    for member in members:
        per_step = [list(step.get(member, ())) for step in history]
        groups = [g for step in per_step for g in step]
        if not groups:
            out[member] = None
            continue
        informative = sum(group_is_informative(rewards) for _, rewards in groups)
        frac = informative / len(groups)
        if signal == "informative":
            out[member] = frac
        elif signal == "progress":
            half = max(1, len(per_step) // 2)
            older, newer = _mean_reward(per_step[:half]), _mean_reward(per_step[half:])
            change = abs(newer - older) if older is not None and newer is not None else 0.0
            out[member] = change + 0.1 * frac
        elif signal == "thompson":
            out[member] = rng.betavariate(1 + informative, 1 + len(groups) - informative)
        else:
            raise SamplingError(f"unknown adaptive signal {signal!r}; use informative, progress or thompson")
    return out


def _mean_reward(steps: Sequence[Sequence[Group]]) -> float | None:
    values = [float(r) for step in steps for _, rewards in step for r in rewards if r is not None]
    return sum(values) / len(values) if values else None


def constrain(
    target: Mapping[str, float], previous: Mapping[str, float], *, floor: float, max_change: float
) -> dict[str, float]:
    """Weights near ``target`` that sum to 1, are each >= ``floor`` and move at most ``max_change`` from ``previous``.

    (The floor wins over the bound when they conflict, so no member ever starves.)

    Example:
        >>> w = constrain({"a": 1.0, "b": 0.0}, {"a": 0.5, "b": 0.5}, floor=0.1, max_change=0.2)
        >>> round(w["a"], 6), round(w["b"], 6)
        (0.7, 0.3)
    """
    members = sorted(target)
    n = len(members)
    floor = min(max(0.0, floor), 1.0 / n)
    total = sum(max(0.0, target[m]) for m in members)
    wanted = {m: (max(0.0, target[m]) / total if total > 0 else 1.0 / n) for m in members}
    lo = {m: max(floor, previous.get(m, wanted[m]) - max_change) for m in members}
    hi = {m: max(lo[m], min(1.0, previous.get(m, wanted[m]) + max_change)) for m in members}

    # Clip to [lo, hi] and shift every unclipped member by the same amount until the sum is 1 (bisection on
    # the shift: the clipped sum is monotone in it).
    def clipped(shift: float) -> dict[str, float]:
        return {m: min(hi[m], max(lo[m], wanted[m] + shift)) for m in members}

    low, high = -1.0, 1.0
    for _ in range(100):
        mid = (low + high) / 2
        if sum(clipped(mid).values()) > 1.0:
            high = mid
        else:
            low = mid
    out = clipped((low + high) / 2)
    total = sum(out.values())
    return {m: v / total for m, v in out.items()}


class AdaptivePlanner:
    """The rows of each training step of an adaptive mixture, decided from pooled statistics (pure).

    Args:
        tasks: train member → its task indices.
        prompts_per_step: unique prompts per step (each step gets its exact quota).
        seed: plan seed.
        settings: `AdaptiveSettings`.
        base_weights: the static weights used for warm-up and as the starting point (default: uniform).
        filters: member → `TaskFilterSettings`, for the members that filter tasks.
        metadata: member → task index → task spec (for a filter's prior).

    Steps count from 1, as training does. `state_dict` / `load_state_dict` carry everything across a resume.
    """

    def __init__(
        self,
        tasks: Mapping[str, Sequence[int]],
        *,
        prompts_per_step: int,
        seed: int = 0,
        settings: AdaptiveSettings | None = None,
        base_weights: Mapping[str, float] | None = None,
        filters: Mapping[str, TaskFilterSettings] | None = None,
        metadata: Mapping[str, Mapping[int, Mapping[str, Any]]] | None = None,
        lag: int = LAG,
    ) -> None:
        if prompts_per_step < 1:
            raise SamplingError("adaptive mixing needs prompts_per_step >= 1")
        empty = sorted(m for m, t in tasks.items() if not t)
        if empty:
            raise SamplingError(f"member(s) {empty} have no tasks; fix their task selection")
        self.members = sorted(tasks)
        self.tasks = {m: list(tasks[m]) for m in self.members}
        self.k = prompts_per_step
        self.seed = seed
        self.settings = settings or AdaptiveSettings()
        self.lag = max(1, lag)
        base = dict(base_weights or dict.fromkeys(self.members, 1.0))
        total = sum(max(0.0, base.get(m, 0.0)) for m in self.members) or float(len(self.members))
        self.base = {m: max(0.0, base.get(m, 0.0)) / total for m in self.members}
        self.filters = dict(filters or {})
        # Pooled statistics, by step: member → [(task, rewards)].
        self.history: dict[int, dict[str, list[Group]]] = {}
        self._weights: dict[int, dict[str, float]] = {}
        self._rows: dict[int, list[tuple[str, int]]] = {}
        self._credit = dict.fromkeys(self.members, 0.0)
        self._cursor = {m: 0 for m in self.members}  # position in the member's current task permutation
        self._cycle = {m: 0 for m in self.members}
        self._task_history: dict[str, dict[int, list[str]]] = {m: {} for m in self.members}
        self._aside: dict[str, dict[int, int]] = {m: {} for m in self.members}  # task → back at this step
        for member, rule in self.filters.items():
            if rule.prior_field:
                for index, spec in (metadata or {}).get(member, {}).items():
                    rate = rule.prior.get(str(spec.get(rule.prior_field)))
                    if rate is not None and (rate >= 0.9 or rate <= 0.1):
                        self._aside[member][int(index)] = 1 + rule.cooldown_steps

    # ── statistics in ─────────────────────────────────────────────────

    def observe(self, step: int, groups: Mapping[str, Sequence[Group]]) -> None:
        """The pooled groups of a completed training step: member → [(task index, rewards of its rollouts)]."""
        self.history[step] = {m: [(int(t), list(r)) for t, r in groups.get(m, ())] for m in self.members}
        for member, rule in self.filters.items():
            past = self._task_history[member]
            for task, rewards in self.history[step].get(member, []):
                present = [r for r in rewards if r is not None]
                if not present:
                    continue
                kind = (
                    "solved"
                    if min(present) >= rule.solved
                    else "failed"
                    if max(present) <= rule.failed
                    else "mixed"
                )
                recent = past.setdefault(task, [])
                recent.append(kind)
                del recent[: -rule.window]
                if len(recent) == rule.window and len(set(recent)) == 1 and recent[0] != "mixed":
                    # Decided with this step's statistics, so it applies from step + lag on (see rows()).
                    self._aside[member][task] = step + self.lag + rule.cooldown_steps
                    recent.clear()

    # ── rows out ──────────────────────────────────────────────────────

    def weights(self, step: int) -> dict[str, float]:
        """The member weights in force at `step` (deciding the steps before it first)."""
        self._decide_through(step)
        return dict(self._weights[step])

    def rows(self, step: int) -> list[tuple[str, int]]:
        """The (member, task index) rows of `step`, in their order within the step."""
        self._decide_through(step)
        return list(self._rows[step])

    def tasks_set_aside(self, member: str, step: int) -> int:
        """How many of a member's tasks are set aside at `step`."""
        return sum(1 for back in self._aside.get(member, {}).values() if back > step)

    def _decide_through(self, step: int) -> None:
        if step < 1:
            raise SamplingError(f"steps count from 1, not {step}")
        first = max(self._rows, default=0) + 1
        for s in range(first, step + 1):
            self._decide(s)

    def _decide(self, step: int) -> None:
        cfg = self.settings
        previous = self._weights.get(step - 1, self.base)
        seen_through = step - self.lag
        if step <= cfg.warmup_steps or seen_through < 1:
            weights = dict(self.base)
        else:
            missing = [
                s
                for s in range(max(1, seen_through - cfg.window + 1), seen_through + 1)
                if s not in self.history
            ]
            if missing:
                raise SamplingError(
                    f"the rows of step {step} need the statistics of step(s) {missing}, which were not observed: "
                    f"adaptive mixing decides step t from steps <= t-{self.lag}; keep dataloader_num_workers=0 "
                    "so the trainer does not fetch rows further ahead"
                )
            window = [self.history[s] for s in range(max(1, seen_through - cfg.window + 1), seen_through + 1)]
            rng = random.Random(derive_seed(self.seed, "adaptive", str(step)))
            scores = signal_scores(cfg.signal, window, self.members, rng)
            # A member with no recent group keeps its previous weight's share of the score scale.
            known = [v for v in scores.values() if v is not None]
            scale = max(known) if known else 1.0
            target = {
                m: (scores[m] if scores[m] is not None else previous.get(m, 0.0) * scale) + 1e-6
                for m in self.members
            }
            weights = constrain(target, previous, floor=cfg.floor, max_change=cfg.max_change)
        self._weights[step] = weights
        quotas = self._quotas(weights, step)
        order = random.Random(derive_seed(self.seed, "adaptive-positions", str(step)))
        block = [m for m in self.members for _ in range(quotas[m])]
        order.shuffle(block)
        self._rows[step] = [(m, self._next_task(m, step)) for m in block]

    def _quotas(self, weights: Mapping[str, float], step: int) -> dict[str, int]:
        # Largest remainder with the remainders carried: every member stays within one row of its target.
        for m in self.members:
            self._credit[m] += weights[m] * self.k
        quotas = {m: int(math.floor(self._credit[m] + 1e-12)) for m in self.members}
        left = self.k - sum(quotas.values())
        ties = random.Random(derive_seed(self.seed, "adaptive-ties", str(step)))
        rank = sorted(self.members, key=lambda m: (-(self._credit[m] - quotas[m]), ties.random()))
        for m in rank[: max(0, left)]:
            quotas[m] += 1
        while sum(quotas.values()) > self.k:  # a float edge: take the excess back from the largest
            quotas[max(self.members, key=lambda m: quotas[m])] -= 1
        for m in self.members:
            self._credit[m] -= quotas[m]
        return quotas

    def _next_task(self, member: str, step: int) -> int:
        tasks = self.tasks[member]
        aside = {t for t, back in self._aside[member].items() if back > step}
        for _ in range(2 * len(tasks) + 1):
            task = self._permutation(member)[self._cursor[member]]
            self._advance(member)
            if task not in aside or len(aside) >= len(tasks):
                return task
        return task  # every task is set aside: take the next one anyway

    def _permutation(self, member: str) -> list[int]:
        order = list(self.tasks[member])
        random.Random(derive_seed(self.seed, "adaptive-tasks", member, str(self._cycle[member]))).shuffle(
            order
        )
        return order

    def _advance(self, member: str) -> None:
        self._cursor[member] += 1
        if self._cursor[member] >= len(self.tasks[member]):
            self._cursor[member] = 0
            self._cycle[member] += 1

    # ── checkpoints ───────────────────────────────────────────────────

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly, as JSON data.

        Example:
            >>> p = AdaptivePlanner({"a": [0]}, prompts_per_step=1)
            >>> q = AdaptivePlanner({"a": [0]}, prompts_per_step=1); q.load_state_dict(p.state_dict())
            >>> q.rows(2) == p.rows(2)
            True
        """
        return {
            "history": {
                str(s): {m: [[t, list(r)] for t, r in g] for m, g in h.items()}
                for s, h in self.history.items()
            },
            "weights": {str(s): w for s, w in self._weights.items()},
            "rows": {str(s): [list(r) for r in rows] for s, rows in self._rows.items()},
            "credit": dict(self._credit),
            "cursor": dict(self._cursor),
            "cycle": dict(self._cycle),
            "task_history": {m: {str(t): k for t, k in h.items()} for m, h in self._task_history.items()},
            "aside": {m: {str(t): b for t, b in a.items()} for m, a in self._aside.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from `state_dict` (of a planner built from the same mixture)."""
        self.history = {
            int(s): {m: [(int(t), list(r)) for t, r in g] for m, g in h.items()}
            for s, h in state["history"].items()
        }
        self._weights = {int(s): dict(w) for s, w in state["weights"].items()}
        self._rows = {int(s): [(str(m), int(t)) for m, t in rows] for s, rows in state["rows"].items()}
        self._credit = {m: float(v) for m, v in state["credit"].items()}
        self._cursor = {m: int(v) for m, v in state["cursor"].items()}
        self._cycle = {m: int(v) for m, v in state["cycle"].items()}
        self._task_history = {
            m: {int(t): list(k) for t, k in h.items()} for m, h in state["task_history"].items()
        }
        self._aside = {m: {int(t): int(b) for t, b in a.items()} for m, a in state["aside"].items()}
