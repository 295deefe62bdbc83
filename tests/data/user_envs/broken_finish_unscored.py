"""Mistake: the scoring tool ends the episode without a reward (every rollout would come back unscored)."""

from _base import AnswerParams, Reverse, TextBlock, ToolOutput, tool


class Env(Reverse):
    @tool
    def answer(self, params: AnswerParams) -> ToolOutput:
        """Answer with the reversed word; ends the episode."""
        right = params.text == self.word[::-1]
        return ToolOutput(blocks=[TextBlock(text="right" if right else "wrong")], finished=True)
