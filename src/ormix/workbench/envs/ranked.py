"""`local:ranked`: small sums, scored pointwise and, for a whole GRPO group, by preference (``score_group``).

Task i asks for the sum of two numbers. `submit(answer)` scores 1.0 when the answer is the sum (surrounding
spaces ignored) and 0.0 otherwise, and finishes. `score_group` ranks a group's candidates, deterministically:
a wrong answer gets 0.0; the correct ones get 1.0 for the shortest down to 0.5 for the longest (equal
lengths share a score): the environment prefers the shortest correct answer. A candidate's answer is its
last `submit` call's ``answer`` when the candidate carries its tool calls (the whole trajectory), else the
text of its last assistant message (the final output, the default).

Split ``train`` has 32 tasks, ``test`` 4. Split ``judge_fails``: the same tasks, whose ``score_group``
raises (a judge that fails: ``ScoreGroupFailed``), for tests of what a trainer keeps when scoring fails.

Example:
    >>> Ranked.list_tasks("train")[0]
    {'index': 0, 'a': 2, 'b': 2}
    >>> rank_answers(["4", "5", " 4 "], 4)
    [1.0, 0.0, 0.5]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from openreward.environments import Environment, GroupCandidate, GroupScore, TextBlock, ToolOutput, tool
from pydantic import BaseModel

SPLITS = ("train", "test", "judge_fails")


def _tasks(n: int, offset: int = 0) -> list[dict[str, Any]]:
    return [{"index": i, "a": 2 + (i + offset) % 7, "b": 2 + (3 * (i + offset)) % 11} for i in range(n)]


def rank_answers(answers: Sequence[str | None], correct: int) -> list[float]:
    """The group scores of these answers: 0.0 when wrong (or missing), 1.0 for the shortest correct one
    down to 0.5 for the longest (by length as written; equal lengths share a score).

    Example:
        >>> rank_answers(["12", None, " 12", "12", "012"], 12)
        [1.0, 0.0, 0.5, 1.0, 0.0]
    """
    right = [a is not None and a.strip() == str(correct) for a in answers]
    lengths = sorted({len(a) for a, ok in zip(answers, right, strict=True) if ok and a is not None})
    scores = []
    for answer, ok in zip(answers, right, strict=True):
        if not ok or answer is None:
            scores.append(0.0)
            continue
        place = lengths.index(len(answer))
        scores.append(1.0 if len(lengths) == 1 else 1.0 - 0.5 * place / (len(lengths) - 1))
    return scores


def answer_of(messages: Sequence[Any]) -> str | None:
    """A candidate's answer: its last `submit` call's ``answer``, else its last assistant message's text.

    Example:
        >>> from openreward.environments import Message
        >>> answer_of([Message(role="assistant", blocks=[TextBlock(text="7")])])
        '7'
    """
    for message in reversed(messages):
        for block in reversed(message.blocks):
            if block.type == "tool_call" and block.name == "submit":
                return str(block.input.get("answer", ""))
    for message in reversed(messages):
        if message.role == "assistant":
            text = "".join(b.text for b in message.blocks if b.type == "text")
            if text:
                return text
    return None


class AnswerParams(BaseModel, extra="forbid"):
    answer: str


class Ranked(Environment):
    """Sums scored pointwise and by group preference (see the module docstring)."""

    def __init__(self, task_spec: dict, secrets: dict[str, str] | None = None) -> None:
        super().__init__(task_spec, secrets or {})
        self.a, self.b = int(task_spec["a"]), int(task_spec["b"])
        self.judge_fails = bool(task_spec.get("judge_fails", False))

    @classmethod
    def list_splits(cls) -> list[str]:
        return list(SPLITS)

    @classmethod
    def list_tasks(cls, split: str) -> list[dict]:
        if split == "train":
            return _tasks(32)
        if split == "test":
            return _tasks(4, offset=32)
        if split == "judge_fails":
            return [{**task, "judge_fails": True} for task in _tasks(32)]
        raise ValueError(f"unknown split {split!r}")

    def get_prompt(self) -> list[TextBlock]:
        return [
            TextBlock(text=f"What is {self.a} + {self.b}? Call submit with the number, as short as can be.")
        ]

    @tool
    def submit(self, params: AnswerParams) -> ToolOutput:
        """Submit the sum and end the episode."""
        right = params.answer.strip() == str(self.a + self.b)
        return ToolOutput(
            blocks=[TextBlock(text="correct" if right else "wrong")], reward=float(right), finished=True
        )

    async def score_group(self, candidates: Sequence[GroupCandidate]) -> Sequence[GroupScore | float]:
        if self.judge_fails:
            raise RuntimeError("ranked: the judge failed (split judge_fails)")
        answers = [answer_of(c.messages) for c in candidates]
        scores = rank_answers(answers, self.a + self.b)
        return [
            GroupScore(
                reward=score, metadata={"answer": answer, "length": None if answer is None else len(answer)}
            )
            for score, answer in zip(scores, answers, strict=True)
        ]
