"""`SandboxedTaskEnvironment`: what `local:terminals` and `local:seta` share — a task looked up by id,
one sandbox per session seeded with the task's files, and a session that fails to open (not an episode
that scores 0) when no sandbox is available."""

from __future__ import annotations

from typing import ClassVar

from openreward.environments import Environment

from ormix.workbench.envs.sandbox import Sandbox
from ormix.workbench.envs.tasks import Task, by_split


class SandboxedTaskEnvironment(Environment):
    """Base of the local sandboxed environments. Subclasses set `TASKS` and `SPEC_FIELDS`."""

    TASKS: ClassVar[list[Task]] = []
    #: Task attributes a task spec carries (the rest stays on the server).
    SPEC_FIELDS: ClassVar[tuple[str, ...]] = ("task_id", "difficulty", "category")

    def __init__(self, task_spec: dict, secrets: dict[str, str] | None = None) -> None:
        super().__init__(task_spec, secrets or {})
        task_id = task_spec.get("task_id")
        by_id = {t.task_id: t for t in self.TASKS}
        if task_id not in by_id:
            raise ValueError(
                f"unknown {type(self).__name__.lower()} task_id {task_id!r}; list the tasks of a "
                "split for valid ids"
            )
        self.task = by_id[task_id]
        self.sandbox = Sandbox()

    @classmethod
    def list_splits(cls) -> list[str]:
        # `train` and `test`, then any other split a task names (the demo's skill tasks), sorted.
        return ["train", "test", *sorted({t.split for t in cls.TASKS} - {"train", "test"})]

    @classmethod
    def list_tasks(cls, split: str) -> list[dict]:
        splits = cls.list_splits()
        if split not in splits:
            raise ValueError(f"unknown split {split!r}; use one of {', '.join(map(repr, splits))}")
        return [
            {k: (list(v) if isinstance(v := getattr(t, k), tuple) else v) for k in cls.SPEC_FIELDS}
            for t in by_split(cls.TASKS, split)
        ]

    async def setup(self) -> None:
        await self.sandbox.start()
        if not self.sandbox.available:
            # Fail the session, not the episode: with no sandbox every rollout would score 0 for nothing.
            from fastapi import HTTPException

            await self.sandbox.close()
            raise HTTPException(status_code=500, detail=self.sandbox.refusal)
        self.task.seed(self.sandbox)

    async def teardown(self) -> None:
        await self.sandbox.close()
