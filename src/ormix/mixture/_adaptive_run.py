"""An adaptive mixture in a trainer: rows decided as they are fetched, statistics gathered as rollouts are
scored.

`AdaptiveRun` ties the pure `Planner` to TRL's data flow:

- the training dataset (`dataset`) is one placeholder row per planned row; a `datasets` transform fills each
  row in when the trainer fetches it, from ``planner.rows(step)`` (step = row // prompts_per_step + 1);
- an observer on every train member's reward function (`observer`) keeps each GRPO group's task and rewards
  of the step being trained, and logs the member's weight, its tasks set aside and what the signal believed of
  it (``ormix/<member>/weight``, ``ormix/<member>/tasks_set_aside``, ``ormix/<member>/noise``,
  ``ormix/<member>/signal``; the last two once the warm-up is over);
- at the end of every training step, a trainer callback (`ormix.trl._callbacks.AdaptiveCallback`)
  pools those groups over all ranks and hands them to ``planner.observe`` (`end_step`), and saves / restores
  ``planner.state_dict()`` with the trainer's checkpoints.

Example:
    >>> from ormix.config import MixtureConfig
    >>> cfg = MixtureConfig(members={"a": {"target": "local:echo"}}, strategy="adaptive", prompts_per_step=2)
    >>> run = AdaptiveRun(Planner(cfg, {"a": [0, 1]}), rows={"a": {0: {}, 1: {}}})
    >>> run.step_of(3)
    2
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ormix.mixture._planner import Planner
from ormix.rollout._rewards import ScoredBatch
from ormix.telemetry._metrics import group_ids, metric_key
from ormix.telemetry._records import trainer_mode

#: The placeholder column: the row's position in the plan.
ROW_COLUMN = "ormix_row"


class AdaptiveRun:
    """The planner plus what a trainer needs around it (see the module docstring).

    Args:
        planner: the mixture's `Planner`.
        rows: member → task index → that task's dataset row (``prompt``, ``task_index``, metadata), as
            `OpenRewardSpec.dataset_rows` gives them.
    """

    def __init__(self, planner: Planner, rows: Mapping[str, Mapping[int, Mapping[str, Any]]]) -> None:
        assert planner.k is not None  # the config requires prompts_per_step for adaptive mixing
        self.planner = planner
        self.rows = {m: dict(r) for m, r in rows.items()}
        self.columns = sorted({k for r in self.rows.values() for row in r.values() for k in row} - {"prompt"})
        self._lock = threading.Lock()
        # Groups of the step being trained: member → group key → (task index, rewards).
        self._groups: dict[str, dict[int, tuple[int, list[float | None]]]] = {}
        self.rank = 0
        self.num_generations: int | None = None

    @property
    def k(self) -> int:
        """Prompts per step (the planner's)."""
        assert self.planner.k is not None
        return self.planner.k

    # ── rows ──────────────────────────────────────────────────────────

    def step_of(self, row: int) -> int:
        """The training step (from 1) a row of the dataset belongs to."""
        return row // self.k + 1

    def row(self, index: int) -> dict[str, Any]:
        """The dataset row at `index`, decided now from the planner."""
        step, position = self.step_of(index), index % self.k
        member, task = self.planner.rows(step)[position]
        return {
            **dict.fromkeys(self.columns),
            **self.rows[member][task],
            "environment": member,
            "task_index": task,
        }

    def transform(self, batch: Mapping[str, Sequence[Any]]) -> dict[str, list[Any]]:
        """The `datasets` transform: placeholder rows (their `ROW_COLUMN`) → the decided rows."""
        rows = [self.row(int(i)) for i in batch[ROW_COLUMN]]
        keys = [
            "prompt",
            "environment",
            "task_index",
            *[c for c in self.columns if c not in ("environment", "task_index")],
        ]
        return {k: [r.get(k) for r in rows] for k in keys}

    def dataset(self, num_rows: int) -> Any:
        """The training dataset: `num_rows` placeholders, each decided when it is fetched."""
        from datasets import Dataset

        base = Dataset.from_dict({ROW_COLUMN: list(range(num_rows))})
        return base.with_transform(self.transform)

    # ── statistics ────────────────────────────────────────────────────

    def observer(self, member: str) -> Any:
        """The reward-function observer of one member (pickles without the run's state: a worker logs
        nothing)."""
        return _Observer(self, member)

    def record(self, batch: ScoredBatch) -> None:
        """Keep the groups of a training batch (called by the member's observer)."""
        n = len(batch.environments)
        groups = group_ids(n, rank=self.rank, num_generations=self.num_generations)
        with self._lock:
            mine = self._groups.setdefault(batch.member, {})
            for i, episode in batch.mine:
                task = getattr(episode, "task_index", None)
                if task is None:
                    continue
                entry = mine.setdefault(groups[i], (int(task), []))
                entry[1].append(batch.rewards[i])

    def take_groups(self) -> dict[str, dict[int, tuple[int, list[float | None]]]]:
        """This process's groups of the step just trained, by their global group position (and forget
        them)."""
        with self._lock:
            groups, self._groups = self._groups, {}
        return groups

    def end_step(
        self, step: int, pooled: Sequence[Mapping[str, Mapping[int, tuple[int, Sequence[float | None]]]]]
    ) -> None:
        """Hand the step's groups of every rank (`take_groups`, in rank order) to the planner, each group
        whole: a group whose rollouts were split over processes (a process's batch not a multiple of
        ``num_generations``) is one group of all its rewards, not a part-group per process, as on one process.

        Example:
            >>> from ormix.config import MixtureConfig
            >>> cfg = MixtureConfig(members={"a": {"target": "local:echo"}}, strategy="adaptive",
            ...                     prompts_per_step=1)
            >>> run = AdaptiveRun(Planner(cfg, {"a": [0]}), rows={"a": {0: {}}})
            >>> run.end_step(1, [{"a": {0: (0, [1.0, 1.0])}}, {"a": {0: (0, [0.0, 0.0])}}])
            >>> run.planner.state_dict()["history"]["1"]     # one group of 4 rewards, not two of 2
            {'a': [[0, [1.0, 1.0, 0.0, 0.0]]]}
        """
        merged: dict[str, dict[int, tuple[int, list[float | None]]]] = {}
        for part in pooled:
            for member, groups in part.items():
                mine = merged.setdefault(member, {})
                for position, (task, rewards) in groups.items():
                    mine.setdefault(int(position), (int(task), []))[1].extend(rewards)
        self.planner.observe(step, {m: [g[p] for p in sorted(g)] for m, g in merged.items()})


class _Observer:
    def __init__(self, run: AdaptiveRun, member: str) -> None:
        self.run: AdaptiveRun | None = run
        self.member = member

    def __getstate__(self) -> dict[str, Any]:
        return {"run": None, "member": self.member}

    def __call__(self, batch: ScoredBatch) -> None:
        run = self.run
        if run is None:
            return
        if trainer_mode(batch.log_metric) == "eval":
            return  # evaluation batches do not steer training
        run.record(batch)
        step = int(getattr(batch.trainer_state, "global_step", 0) or 0) + 1
        if batch.log_metric is not None and self.member in run.planner.members:
            batch.log_metric(metric_key(self.member, "weight"), run.planner.weights(step)[self.member])
            batch.log_metric(
                metric_key(self.member, "tasks_set_aside"),
                float(run.planner.tasks_set_aside(self.member, step)),
            )
            # What the signal believed of this member when it decided the step (none during warm-up).
            belief = run.planner.beliefs(step).get(self.member)
            if belief is not None:
                batch.log_metric(metric_key(self.member, "noise"), belief["noise"])
                batch.log_metric(metric_key(self.member, "signal"), belief["signal"])
