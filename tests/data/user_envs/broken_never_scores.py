"""Mistake: the tool never gives a reward nor finishes the episode (every rollout would be unscored)."""

from _base import AnswerParams, Reverse, TextBlock, ToolOutput, tool


class Env(Reverse):
    @tool
    def answer(self, params: AnswerParams) -> ToolOutput:
        return ToolOutput(blocks=[TextBlock(text="noted")])
