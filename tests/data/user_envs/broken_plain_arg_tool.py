"""Mistake: a @tool taking a plain `str` instead of one pydantic model."""

from _base import Reverse, TextBlock, ToolOutput, tool


class Env(Reverse):
    answer = None  # type: ignore[assignment]

    @tool
    def respond(self, text: str) -> ToolOutput:
        return ToolOutput(blocks=[TextBlock(text=text)], reward=1.0, finished=True)
