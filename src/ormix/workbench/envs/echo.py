"""`local:echo`: the smallest useful ORS environment.

Task i asks the model to echo a word back. `echo(text)` returns the text with reward 1.0 when it is the
task's word and 0.0 otherwise; it never finishes the episode, so benchmarks can run long episodes.
`submit(text)` scores the same way and finishes.
"""

from __future__ import annotations

from openreward.environments import Environment, TextBlock, ToolOutput, tool
from pydantic import BaseModel

WORDS = [
    "apple",
    "river",
    "stone",
    "cloud",
    "ember",
    "maple",
    "orbit",
    "pixel",
    "quartz",
    "tundra",
    "violet",
    "willow",
    "zephyr",
    "harbor",
    "lantern",
    "meadow",
]


class EchoParams(BaseModel, extra="forbid"):
    text: str


class Echo(Environment):
    """Echo a word back. Splits `train` (16 tasks) and `test` (4 tasks)."""

    def __init__(self, task_spec: dict, secrets: dict[str, str] | None = None) -> None:
        super().__init__(task_spec, secrets or {})
        self.word = task_spec["word"]

    @classmethod
    def list_splits(cls) -> list[str]:
        return ["train", "test"]

    @classmethod
    def list_tasks(cls, split: str) -> list[dict]:
        if split == "train":
            return [{"index": i, "word": w, "difficulty": "easy"} for i, w in enumerate(WORDS)]
        if split == "test":
            return [{"index": i, "word": w, "difficulty": "easy"} for i, w in enumerate(reversed(WORDS[:4]))]
        raise ValueError(f"unknown split {split!r}")

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text=f"Call the echo tool with the word {self.word!r}.")]

    def _score(self, text: str) -> float:
        return 1.0 if text.strip() == self.word else 0.0

    @tool
    def echo(self, params: EchoParams) -> ToolOutput:
        """Echo the text back."""
        return ToolOutput(
            blocks=[TextBlock(text=params.text)], reward=self._score(params.text), finished=False
        )

    @tool
    def submit(self, params: EchoParams) -> ToolOutput:
        """Submit the final answer and end the episode."""
        return ToolOutput(
            blocks=[TextBlock(text=f"submitted {params.text!r}")],
            reward=self._score(params.text),
            finished=True,
        )
