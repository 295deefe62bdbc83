"""Mistake: the tool raises on every call."""

from _base import AnswerParams, Reverse, ToolOutput, tool


class Env(Reverse):
    @tool
    def answer(self, params: AnswerParams) -> ToolOutput:
        return ToolOutput(blocks=[], reward=self.task_spec["score"], finished=True)
