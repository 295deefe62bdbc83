"""A user's own ORS environment: arithmetic questions answered with a `calculate` tool and `answer`.

Written against the openreward SDK exactly as for the OpenReward platform. ormix trains on it as
``my_env:Arithmetic`` (module:Class): it imports the class and serves it on loopback, so there is no server
to start by hand. See `custom_env.py`.
"""

from __future__ import annotations

import ast
import operator

from openreward.environments import Environment, TextBlock, ToolOutput, tool
from pydantic import BaseModel, Field

PROBLEMS = [
    ("17 + 25", 42),
    ("9 * 8", 72),
    ("100 - 37", 63),
    ("144 / 12", 12),
    ("2 ** 10", 1024),
    ("(3 + 4) * 5", 35),
    ("81 / 9 + 1", 10),
    ("7 * 6 - 2", 40),
]
_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
}


def _evaluate(expression: str) -> float:
    """+, -, *, /, ** on numbers only: a tiny parser; the text is never run as Python."""

    def walk(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](walk(node.operand))
        raise ValueError("only numbers and + - * / ** are allowed")

    return walk(ast.parse(expression, mode="eval").body)


class CalculateParams(BaseModel, extra="forbid"):
    expression: str = Field(description="Arithmetic with + - * / ** and parentheses, e.g. '(3 + 4) * 5'.")


class AnswerParams(BaseModel, extra="forbid"):
    value: float = Field(description="The final numeric answer.")


class Arithmetic(Environment):
    """Compute the value of an expression. Splits: `train` (8 tasks) and `test` (2 tasks)."""

    def __init__(self, task_spec: dict, secrets: dict[str, str] | None = None) -> None:
        super().__init__(task_spec, secrets or {})
        self.expression = task_spec["expression"]
        self.value = task_spec["value"]

    @classmethod
    def list_splits(cls) -> list[str]:
        return ["train", "test"]

    @classmethod
    def list_tasks(cls, split: str) -> list[dict]:
        chosen = {"train": PROBLEMS, "test": PROBLEMS[:2]}.get(split)
        if chosen is None:
            raise ValueError(f"unknown split {split!r}")
        return [{"expression": e, "value": v, "difficulty": "easy"} for e, v in chosen]

    def get_prompt(self) -> list[TextBlock]:
        return [
            TextBlock(text=f"What is {self.expression}? Use `calculate` if you like, then call `answer`.")
        ]

    @tool
    def calculate(self, params: CalculateParams) -> ToolOutput:
        """Evaluate an arithmetic expression."""
        try:
            text = str(_evaluate(params.expression))
        except (ValueError, SyntaxError, ZeroDivisionError) as e:
            text = f"error: {e}"
        return ToolOutput(blocks=[TextBlock(text=text)], reward=None, finished=False)

    @tool
    def answer(self, params: AnswerParams) -> ToolOutput:
        """Give the final answer; ends the episode with reward 1.0 when it is right, else 0.0."""
        right = abs(params.value - self.value) < 1e-6
        return ToolOutput(
            blocks=[TextBlock(text="correct" if right else "wrong")],
            reward=1.0 if right else 0.0,
            finished=True,
        )
