"""Mistake: a @tool without type annotations (the SDK silently does not count it as a tool)."""

from _base import AnswerParams, Reverse, TextBlock, ToolOutput, tool


class Env(Reverse):
    answer = None  # type: ignore[assignment]

    @tool
    def respond(self, params):
        return ToolOutput(blocks=[TextBlock(text=params.text)], reward=1.0, finished=True)


_ = AnswerParams
