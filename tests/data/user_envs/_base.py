"""The shared part of the broken user environments: two tasks, a prompt, one good `answer` tool.

Each `broken_*.py` next to it subclasses `Reverse` and makes one mistake a new user makes; `good.py` makes
none. Tests (tests/diagnostics/test_user_envs.py, test_check_exit_codes.py) run `ormix check`, `inspect`,
`train` and `eval --policy reference` on them.
"""

from __future__ import annotations

from openreward.environments import Environment, TextBlock, ToolOutput, tool
from pydantic import BaseModel

WORDS = ["river", "stone"]


class AnswerParams(BaseModel):
    text: str


class Reverse(Environment):
    """Reverse a word, then answer."""

    def __init__(self, task_spec: dict, secrets: dict | None = None) -> None:
        super().__init__(task_spec, secrets or {})
        self.word = task_spec["word"]

    @classmethod
    def list_splits(cls) -> list[str]:
        return ["train"]

    @classmethod
    def list_tasks(cls, split: str) -> list[dict]:
        return [{"word": w} for w in WORDS]

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text=f"Reverse the word {self.word!r} and call answer.")]

    @tool
    def answer(self, params: AnswerParams) -> ToolOutput:
        """Answer with the reversed word; ends the episode."""
        right = params.text == self.word[::-1]
        return ToolOutput(
            blocks=[TextBlock(text="right" if right else "wrong")], reward=float(right), finished=True
        )


def solve(row: dict) -> list:
    """The reference solution of a task: the `answer` call with the reversed word."""
    return [("answer", {"text": row["task_spec"]["word"][::-1]})]
