"""A benchmark-only environment with many tasks (`benchmarks/scale.py` builds datasets of 1k to 100k tasks).

One class per catalog size, ``Catalog1000`` ... ``Catalog100000`` (targets ``scale_env:Catalog1000``, with
`benchmarks/` on ``sys.path``): a server may keep a class's task list, so every size is its own class. Tasks
carry SETA-like metadata (a difficulty, tags), so a dataset row has columns as a catalog's would.
"""

from __future__ import annotations

from openreward.environments import Environment, TextBlock, ToolOutput, tool
from pydantic import BaseModel

SIZES = (1_000, 3_000, 10_000, 30_000, 100_000)


class Params(BaseModel):
    text: str


class Catalog(Environment):
    """A catalog-shaped environment of ``TASKS`` tasks."""

    TASKS = 1_000

    @classmethod
    def list_splits(cls):
        return ["train"]

    @classmethod
    def list_tasks(cls, split):
        return [
            {"task_id": f"t{i}", "difficulty": ("Easy", "Medium", "Hard")[i % 3], "tags": ["a", str(i % 7)]}
            for i in range(cls.TASKS)
        ]

    def get_prompt(self):
        return [TextBlock(text="noop")]

    @tool
    def noop(self, params: Params) -> ToolOutput:
        """Do nothing."""
        return ToolOutput(blocks=[TextBlock(text=params.text)])


for _n in SIZES:
    globals()[f"Catalog{_n}"] = type(f"Catalog{_n}", (Catalog,), {"TASKS": _n})
