"""Test-only ORS environments with exact, hostile or per-task tool surfaces.

They are real `openreward.environments.Environment` classes served by a real server. They override the
server-side tool listing (to serve the exact JSON schemas of real catalog environments, or hostile ones)
and the server-side dispatch `_call_tool` (to answer any listed tool name and record what arrived), which
`@tool` methods cannot express for names like `class` or `fs.read`.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, ClassVar

from openreward.environments import Environment, ImageBlock, TextBlock, ToolOutput, tool
from openreward.environments.types import ListToolsOutput, RunToolOutput, RunToolSuccess, ToolSpec
from pydantic import BaseModel

SURFACES = Path(__file__).resolve().parents[1] / "data" / "tool-surfaces"


def surface_tools(name: str) -> list[dict[str, Any]]:
    """The tool list of a reference surface (`seta` or `swe-rebench-v2`)."""
    return json.loads((SURFACES / f"{name}.json").read_text())["tools"]


class _SurfaceBase(Environment):
    TOOLS: ClassVar[list[dict[str, Any]]] = []
    TASK_TOOLS: ClassVar[dict[int, list[dict[str, Any]]]] = {}
    CALLS: ClassVar[list[tuple[str, Any]]] = []

    def __init__(self, task_spec: dict, secrets: dict | None = None) -> None:
        super().__init__(task_spec, secrets or {})

    @classmethod
    def list_splits(cls) -> list[str]:
        return ["train"]

    @classmethod
    def list_tasks(cls, split: str) -> list[dict]:
        return [
            {"n": i, "prompt": f"raw prompt {i}", "task_index": 999, "difficulty": ["Easy", "Hard"][i % 2]}
            for i in range(6)
        ]

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text=f"surface task {self.task_spec['n']}")]

    @classmethod
    def list_tools(cls) -> ListToolsOutput:
        return ListToolsOutput(tools=[ToolSpec(**t) for t in cls.TOOLS])

    def list_task_tools(self) -> ListToolsOutput:
        extra = self.TASK_TOOLS.get(self.task_spec["n"], [])
        return ListToolsOutput(tools=[ToolSpec(**t) for t in extra])

    async def _call_tool(self, name: str, input: Any) -> RunToolOutput:
        type(self).CALLS.append((name, input))
        text = json.dumps({"tool": name, "input": input}, sort_keys=True)
        return RunToolOutput(RunToolSuccess(output=ToolOutput(blocks=[TextBlock(text=text)], reward=0.5)))


class SetaSurface(_SurfaceBase):
    """Eigent/SETA's exact tool schemas."""

    TOOLS = surface_tools("seta")


class SweSurface(_SurfaceBase):
    """nebius/SWE-rebench-V2's exact tool schemas."""

    TOOLS = surface_tools("swe-rebench-v2")


_TRIPLE = '"""; import os; os.system("touch /tmp/ormix-pwned") #'
HOSTILE_TOOLS: list[dict[str, Any]] = [
    {
        "name": "class",
        "description": "a keyword name",
        "input_schema": {
            "type": "object",
            "properties": {
                "from": {"type": "string", "description": "keyword param"},
                "self": {"type": "integer", "description": "self param"},
                "lambda": {"type": "boolean", "default": False},
            },
            "required": ["from", "self"],
        },
    },
    {
        "name": "run-tests",
        "description": f"dash name {_TRIPLE}",
        "input_schema": {
            "type": "object",
            "properties": {
                "pattern": {
                    "type": "string",
                    "description": f"desc with code {_TRIPLE}\nArgs:\n  evil: injected",
                }
            },
        },
    },
    {
        "name": "fs.read",
        "description": "dotted name",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
    {
        "name": "x" * 300,
        "description": "a very long name",
        "input_schema": {"type": "object", "properties": {}},
    },
    {
        "name": "reset",
        "description": "clashes with the adapter's reset",
        "input_schema": {"type": "object", "properties": {}},
    },
]


class Hostile(_SurfaceBase):
    """Tool names and texts no Python binder should trust; two probes with differing schemas for `probe`."""

    TOOLS = HOSTILE_TOOLS
    CALLS: ClassVar[list[tuple[str, Any]]] = []
    TASK_TOOLS = {
        0: [
            {
                "name": "probe",
                "description": "task 0 version",
                "input_schema": {
                    "type": "object",
                    "properties": {"a": {"type": "string"}},
                    "required": ["a"],
                },
            }
        ],
        1: [
            {
                "name": "probe",
                "description": "task 1 version",
                "input_schema": {
                    "type": "object",
                    "properties": {"a": {"type": "integer"}},
                    "required": ["a"],
                },
            }
        ],
    }


class NumericDifficulty(_SurfaceBase):
    """Same metadata key as the SWE surface (`difficulty`), but an integer: a type clash across members."""

    TOOLS = surface_tools("swe-rebench-v2")
    CALLS: ClassVar[list[tuple[str, Any]]] = []

    @classmethod
    def list_tasks(cls, split: str) -> list[dict]:
        return [{"n": i, "difficulty": i % 3, "tags": {"nested": [i]}} for i in range(4)]


_FLAKY_LOCK = threading.Lock()


class _EchoParams(BaseModel, extra="forbid"):
    text: str


class FlakyEcho(Environment):
    """`local:echo`'s tasks and tools with a flaky grader: every fifth `submit` in this process has its
    reward flipped (20% of outcomes, deterministic in count, as a flaky test suite would flip them).

    Example (a target ``support.envs:FlakyEcho``):
        >>> FlakyEcho.list_splits()
        ['train', 'test']
    """

    FLIP_EVERY: ClassVar[int] = 5
    _calls: ClassVar[list[int]] = [0]

    def __init__(self, task_spec: dict, secrets: dict | None = None) -> None:
        super().__init__(task_spec, secrets or {})
        self.word = task_spec["word"]

    @classmethod
    def list_splits(cls) -> list[str]:
        return ["train", "test"]

    @classmethod
    def list_tasks(cls, split: str) -> list[dict]:
        from ormix.workbench.envs.echo import Echo

        return Echo.list_tasks(split)

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text=f"Call the submit tool with the word {self.word!r}.")]

    @tool
    def submit(self, params: _EchoParams) -> ToolOutput:
        """Submit the final answer and end the episode."""
        reward = 1.0 if params.text.strip() == self.word else 0.0
        with _FLAKY_LOCK:
            self._calls[0] += 1
            flip = self._calls[0] % self.FLIP_EVERY == 0
        return ToolOutput(
            blocks=[TextBlock(text=f"submitted {params.text!r}")],
            reward=1.0 - reward if flip else reward,
            finished=True,
        )


class _TextParams(BaseModel, extra="forbid"):
    text: str


class Blocks(Environment):
    """Odd content blocks: task 0 has a proper prompt, task 1 a prompt whose text block holds null; `say`
    answers a text block holding null (with a reward a client must not take for a score), `look` an image
    and no text."""

    def __init__(self, task_spec: dict[str, Any], secrets: dict[str, str] | None = None) -> None:
        super().__init__(task_spec, secrets or {})

    @classmethod
    def list_splits(cls) -> list[str]:
        return ["train"]

    @classmethod
    def list_tasks(cls, split: str) -> list[dict[str, Any]]:
        return [{"index": 0}, {"index": 1, "null_prompt": True}]

    def get_prompt(self) -> list[TextBlock]:
        if self.task_spec.get("null_prompt"):
            return [TextBlock.model_construct(type="text", text=None)]
        return [TextBlock(text="say something")]

    @tool
    async def say(self, params: _TextParams) -> ToolOutput:
        """A result whose text block holds null."""
        return ToolOutput(
            blocks=[TextBlock.model_construct(type="text", text=None)], reward=1.0, finished=True
        )

    @tool
    async def look(self, params: _TextParams) -> ToolOutput:
        """A result with an image and no text."""
        return ToolOutput(blocks=[ImageBlock(data="iVBORw0KGgo=", mimeType="image/png")], reward=0.5)
