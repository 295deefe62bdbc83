"""`local:seta`: software-engineering tasks in the style of Eigent/SETA.

The tool surface is the openreward SDK's real `CLIToolset` (`bash, glob, grep, ls, read, write, edit,
multi_edit, todo_write`), rooted at the session's workspace, plus `submit_solution{}`. Each session gets its
own sandbox (`ormix.workbench.envs.sandbox.Sandbox`) seeded with the task's files. `submit_solution` runs the
task's weighted checks: reward = weighted fraction passing, `finished=True`; a second submission scores -0.1
(as in SETA; note that the openreward server refuses every call after `finished=True`, so over ORS the second
one is answered `episode_finished` before it reaches the environment).

Splits: `train` (25 tasks) and `test` (5 tasks); difficulties Easy/Medium/Hard. Task spec (SETA-shaped):
`{task_id, difficulty, category, tags}`; the instructions and checks stay on the server, looked up by id. The
demo's skill tasks (`ormix.workbench.envs.tasks.ops_tasks`) are the splits `ops-train` (64) and `ops-test`
(32).

Example:
    >>> from ormix.server import serve_in_thread
    >>> with serve_in_thread(["local:seta"]) as srv:    # sessions are then opened on env "seta"
    ...     srv.env_names
    ['seta']
"""

from __future__ import annotations

from dataclasses import asdict

from openreward.environments import TextBlock, ToolOutput, tool
from openreward.toolsets.cli import CLIToolset
from pydantic import BaseModel

from ormix.workbench.envs.sandboxed import SandboxedTaskEnvironment
from ormix.workbench.envs.tasks import summarize, weighted_score
from ormix.workbench.envs.tasks.ops_tasks import SETA_OPS
from ormix.workbench.envs.tasks.seta_tasks import TASKS

#: Reward of every submission after the first.
RESUBMIT_PENALTY = -0.1


class SubmitParams(BaseModel, extra="forbid"):
    pass


class Seta(SandboxedTaskEnvironment):
    """SETA-like tasks on the SDK's CLIToolset surface; see the module docstring."""

    toolsets = [CLIToolset]

    TASKS = [*TASKS, *SETA_OPS]  # the skill tasks (splits ops-train, ops-test) of the demo
    SPEC_FIELDS = ("task_id", "difficulty", "category", "tags")

    def __init__(self, task_spec: dict, secrets: dict[str, str] | None = None) -> None:
        super().__init__(task_spec, secrets)
        self.submissions = 0

    @property
    def workspace_root(self) -> str:
        """Where CLIToolset roots relative paths: the sandbox's working directory."""
        return self.sandbox.workdir

    def get_prompt(self) -> list[TextBlock]:
        return [
            TextBlock(
                text=(
                    f"You are working in {self.sandbox.workdir} (a Linux sandbox without network access).\n\n"
                    f"Task ({self.task.difficulty}, {self.task.category}): {self.task.instructions}\n\n"
                    "Use the tools to inspect and change the files. When you are done, call submit_solution "
                    "once: your work is checked and the episode ends."
                )
            )
        ]

    # Exclusive: it waits for every call in flight and holds new ones, so nothing changes what it grades.
    @tool(exclusive=True)
    async def submit_solution(self, params: SubmitParams) -> ToolOutput:
        """Submit your solution for grading. Call it once, when you are done."""
        self.submissions += 1
        if self.submissions > 1:
            return ToolOutput(
                blocks=[TextBlock(text="Already submitted; a second submission is penalised.")],
                metadata={"submissions": self.submissions},
                reward=RESUBMIT_PENALTY,
                finished=True,
            )
        results = await self.task.grade(self.sandbox)
        score = weighted_score(results)
        return ToolOutput(
            blocks=[TextBlock(text=f"Score {score:.2f}. " + summarize(results))],
            metadata={"task_id": self.task.task_id, "score": score, "checks": [asdict(r) for r in results]},
            reward=score,
            finished=True,
        )
