"""`local:terminals`: shell tasks in the style of kanishk/EndlessTerminals.

Each session gets its own sandbox (`ormix.workbench.envs.sandbox.Sandbox`: a temporary directory, bubblewrap,
no
network) seeded with the task's files. Five tools: `bash`, `view`, `create_file`, `str_replace` and `submit`.
`submit` grades the workspace (all checks must pass: reward 1.0, else 0.0) and finishes the episode.

Splits: `train` (28 tasks) and `test` (6 tasks); difficulties easy/medium/hard; categories
files/text/scripting. Task spec: `{task_id, difficulty, category, instructions}`. The demo's skill tasks
(`ormix.workbench.envs.tasks.ops_tasks`: an operation the prompt names, applied to a word it shows) are the
splits
`ops-train` (64) and `ops-test` (32).

Example:
    >>> from ormix.server import serve_in_thread
    >>> with serve_in_thread(["local:terminals"]) as srv:    # sessions are then opened on env "terminals"
    ...     srv.env_names
    ['terminals']
"""

from __future__ import annotations

import asyncio
import shlex
from dataclasses import asdict
from typing import Optional

from openreward.environments import TextBlock, ToolOutput, tool
from pydantic import BaseModel, Field

from ormix.workbench.envs.sandbox import SandboxError
from ormix.workbench.envs.sandboxed import SandboxedTaskEnvironment
from ormix.workbench.envs.tasks import summarize
from ormix.workbench.envs.tasks.ops_tasks import TERMINALS_OPS
from ormix.workbench.envs.tasks.terminals_tasks import TASKS

#: Tool-side limits (the hosted EndlessTerminals sandbox is 1 CPU / 2 GB; commands there also time out).
BASH_TIMEOUT_S = 60.0
MAX_BASH_TIMEOUT_S = 300.0
BASH_MAX_BYTES = 30_000
VIEW_MAX_BYTES = 100_000


class BashParams(BaseModel, extra="forbid"):
    command: str = Field(description="The bash command to run in the workspace.")
    timeout: float | None = Field(
        default=None, description="Seconds before the command is killed (default 60)."
    )  # noqa: UP045 - pydantic schema shape


class ViewParams(BaseModel, extra="forbid"):
    path: str = Field(description="File or directory, relative to the workspace or absolute under it.")
    view_range: Optional[tuple[int, int]] = Field(  # noqa: UP045
        default=None,
        description="1-based inclusive line range [start, end]; end -1 means to the end of the file.",
    )


class CreateFileParams(BaseModel, extra="forbid"):
    path: str = Field(description="File to create or overwrite, relative to the workspace.")
    content: str = Field(description="The complete file content.")


class StrReplaceParams(BaseModel, extra="forbid"):
    path: str = Field(description="File to edit, relative to the workspace.")
    old_str: str = Field(description="Exact text to replace; must occur exactly once in the file.")
    new_str: str = Field(description="Replacement text.")


class SubmitParams(BaseModel, extra="forbid"):
    pass


def _text(text: str, **metadata) -> ToolOutput:
    return ToolOutput(blocks=[TextBlock(text=text)], metadata=metadata or None, finished=False)


class Terminals(SandboxedTaskEnvironment):
    """EndlessTerminals-like shell tasks graded at submit; see the module docstring."""

    TASKS = [*TASKS, *TERMINALS_OPS]  # the skill tasks (splits ops-train, ops-test) of the demo
    SPEC_FIELDS = ("task_id", "difficulty", "category", "instructions")

    def get_prompt(self) -> list[TextBlock]:
        wd = self.sandbox.workdir
        return [
            TextBlock(
                text=(
                    f"You are in a Linux shell; your working directory is {wd} and it holds the task's "
                    "files. There is no network.\n\n"
                    f"Task: {self.task.instructions}\n\n"
                    "Use the tools to do the work (bash, view, create_file, str_replace). When you are done, "
                    "call submit: the workspace is then checked and the episode ends."
                )
            )
        ]

    # ── tools ──

    @tool
    async def bash(self, params: BashParams) -> ToolOutput:
        """Run a bash command in the workspace (no network). Returns its combined output and exit code."""
        timeout = min(
            params.timeout if params.timeout and params.timeout > 0 else BASH_TIMEOUT_S, MAX_BASH_TIMEOUT_S
        )
        try:
            res = await self.sandbox.run(
                f"cd {shlex.quote(self.sandbox.workdir)} || exit 1\n{params.command}",
                timeout=timeout,
                max_bytes=BASH_MAX_BYTES,
            )
        except SandboxError as e:
            if self.sandbox.refusal is None:  # not the "no bubblewrap" refusal: a sandbox used wrongly
                raise
            return _text(f"Error: {e}", error="sandbox_unavailable")
        notes = []
        if res.truncated:
            notes.append(f"output cut off at {BASH_MAX_BYTES} bytes")
        if res.timed_out:
            notes.append(f"killed after {timeout:g}s")
        suffix = f"\n[{'; '.join(notes)}]" if notes else ""
        return _text(
            f"{res.output}\n(exit {res.return_code}){suffix}",
            exit_code=res.return_code,
            truncated=res.truncated,
            timed_out=res.timed_out,
        )

    @tool
    async def view(self, params: ViewParams) -> ToolOutput:
        """Show a file with line numbers (optionally a line range), or list a directory."""
        # Workspace file I/O runs in a worker thread: the event loop serves every session of the server.
        return await asyncio.to_thread(self._view, params)

    def _view(self, params: ViewParams) -> ToolOutput:
        try:
            try:
                # Listed through a descriptor, never a path: a symlink swapped in meanwhile is not followed.
                entries = self.sandbox.list_dir(params.path)
            except NotADirectoryError:
                data = self.sandbox.read_bytes(params.path, max_size=None)
            else:
                return _text("\n".join(entries) if entries else "(empty directory)")
        except (SandboxError, OSError) as e:
            return _text(f"Error: cannot view {params.path!r}: {e}", error="view_failed")
        lines = data[:VIEW_MAX_BYTES].decode("utf-8", errors="replace").splitlines()
        start, end = 1, len(lines)
        if params.view_range is not None:
            start, end = params.view_range
            end = len(lines) if end == -1 else end
            if start < 1 or end < start:
                return _text(
                    f"Error: invalid view_range {list(params.view_range)}; use [start, end] with "
                    f"1 <= start <= end, or end = -1",
                    error="bad_range",
                )
        shown = "\n".join(f"{i:6}\t{line}" for i, line in enumerate(lines[start - 1 : end], start))
        if len(data) > VIEW_MAX_BYTES:
            shown += f"\n[file is {len(data)} bytes; only the first {VIEW_MAX_BYTES} are shown]"
        return _text(shown)

    @tool
    async def create_file(self, params: CreateFileParams) -> ToolOutput:
        """Create or overwrite a file with the given content (parent directories are created)."""
        return await asyncio.to_thread(self._create_file, params)

    def _create_file(self, params: CreateFileParams) -> ToolOutput:
        try:
            self.sandbox.write_file(params.path, params.content)
        except (SandboxError, OSError) as e:
            return _text(f"Error: cannot write {params.path!r}: {e}", error="write_failed")
        return _text(f"Wrote {len(params.content.encode())} bytes to {params.path}")

    @tool
    async def str_replace(self, params: StrReplaceParams) -> ToolOutput:
        """Replace one exact occurrence of old_str with new_str in a file."""
        return await asyncio.to_thread(self._str_replace, params)

    def _str_replace(self, params: StrReplaceParams) -> ToolOutput:
        try:
            content = self.sandbox.read_file(params.path)
            count = content.count(params.old_str) if params.old_str else 0
            if count != 1:
                return _text(
                    f"Error: old_str occurs {count} times in {params.path}; it must occur exactly once",
                    error="not_unique" if count else "not_found",
                )
            self.sandbox.write_file(params.path, content.replace(params.old_str, params.new_str, 1))
        except (SandboxError, OSError) as e:
            return _text(f"Error: cannot edit {params.path!r}: {e}", error="edit_failed")
        return _text(f"Edited {params.path}")

    # Exclusive: it waits for every call in flight and holds new ones, so nothing changes what it grades.
    @tool(exclusive=True)
    async def submit(self, params: SubmitParams) -> ToolOutput:
        """Submit the workspace for grading. Ends the episode."""
        results = await self.task.grade(self.sandbox)
        passed = all(r.passed for r in results)
        return ToolOutput(
            blocks=[TextBlock(text=("PASSED. " if passed else "FAILED. ") + summarize(results))],
            metadata={"task_id": self.task.task_id, "checks": [asdict(r) for r in results]},
            reward=1.0 if passed else 0.0,
            finished=True,
        )
