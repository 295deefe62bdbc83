"""Mistake: no `get_prompt` (the SDK needs get_prompt or get_messages)."""

from _base import AnswerParams, Environment, TextBlock, ToolOutput, tool


class Env(Environment):
    def __init__(self, task_spec: dict, secrets: dict | None = None) -> None:
        super().__init__(task_spec, secrets or {})

    @classmethod
    def list_splits(cls) -> list[str]:
        return ["train"]

    @classmethod
    def list_tasks(cls, split: str) -> list[dict]:
        return [{"word": "river"}]

    @tool
    def answer(self, params: AnswerParams) -> ToolOutput:
        return ToolOutput(blocks=[TextBlock(text="ok")], reward=1.0, finished=True)
