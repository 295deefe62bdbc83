"""No mistake, but slow: its tool takes a minute, so a check of it is still running when a test interrupts it
(Ctrl-C, SIGTERM) and the test never races the check's end."""

import asyncio

from _base import AnswerParams, Reverse, TextBlock, ToolOutput, tool


class Env(Reverse):
    @tool
    async def answer(self, params: AnswerParams) -> ToolOutput:
        """Answer with the reversed word, after a minute; ends the episode."""
        await asyncio.sleep(60)
        right = params.text == self.word[::-1]
        return ToolOutput(
            blocks=[TextBlock(text="right" if right else "wrong")], reward=float(right), finished=True
        )
