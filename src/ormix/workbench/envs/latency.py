"""`local:latency`: an environment that is slow the way sandboxed ones are, for benchmarks and tests.

Opening a session waits `open_s` (a container starting), each `work` call waits `tool_s` (a command
running); both wait asynchronously, so one server holds many sessions at once, as a real deployment does.
The defaults are 0.4 s and 0.25 s; the environment variables `ORMIX_LATENCY_OPEN_S` / `ORMIX_LATENCY_TOOL_S`
(read by the server process) or the task spec's `open_s` / `tool_s` change them. With
`ORMIX_LATENCY_TOOL_SIGMA` (or `tool_sigma`) > 0 each `work` call waits a log-normal time instead: median
`tool_s`, shape σ (heavy-tailed, as test suites are), drawn from one generator per server process seeded by
`ORMIX_LATENCY_SEED` (default 0).

Tools: `work{text}` (waits, echoes `text`, reward 1.0 when it is the task's word, never finishes) and
`submit{text}` (no wait, reward 1.0 / 0.0, finishes). Split `train` has 64 tasks, `test` 4.

`Latency.peak` is the most sessions that were opening or working at the same moment in this process (a
thread-mode server shares it with its test); `Latency.reset_peak()` starts counting again.

Example:
    >>> Latency.list_tasks("train")[1]["word"]
    'w1'
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import random
import threading

from openreward.environments import Environment, TextBlock, ToolOutput, tool
from pydantic import BaseModel


def _seconds(spec: dict, key: str, variable: str, default: float) -> float:
    if key in spec:
        return float(spec[key])
    return float(os.environ.get(variable, default))


class TextParams(BaseModel, extra="forbid"):
    text: str


class Latency(Environment):
    """Slow sessions and slow tools (see the module docstring)."""

    _rng: random.Random | None = None
    peak = 0
    _busy = 0
    _lock = threading.Lock()

    @classmethod
    def reset_peak(cls) -> None:
        """Start counting `peak` again."""
        with cls._lock:
            cls.peak = cls._busy

    @classmethod
    @contextlib.asynccontextmanager
    async def _working(cls):
        with cls._lock:
            cls._busy += 1
            cls.peak = max(cls.peak, cls._busy)
        try:
            yield
        finally:
            with cls._lock:
                cls._busy -= 1

    def __init__(self, task_spec: dict, secrets: dict[str, str] | None = None) -> None:
        super().__init__(task_spec, secrets or {})
        self.spec = dict(task_spec)
        self.word = self.spec.get("word", "w0")
        self.open_s = _seconds(self.spec, "open_s", "ORMIX_LATENCY_OPEN_S", 0.4)
        self.tool_s = _seconds(self.spec, "tool_s", "ORMIX_LATENCY_TOOL_S", 0.25)
        self.tool_sigma = _seconds(self.spec, "tool_sigma", "ORMIX_LATENCY_TOOL_SIGMA", 0.0)

    @classmethod
    def _draw(cls, median: float, sigma: float) -> float:
        with cls._lock:
            if cls._rng is None:
                cls._rng = random.Random(int(os.environ.get("ORMIX_LATENCY_SEED", "0")))
            return median * math.exp(sigma * cls._rng.gauss(0.0, 1.0))

    @classmethod
    def list_splits(cls) -> list[str]:
        return ["train", "test"]

    @classmethod
    def list_tasks(cls, split: str) -> list[dict]:
        if split == "train":
            return [{"index": i, "word": f"w{i}"} for i in range(64)]
        if split == "test":
            return [{"index": i, "word": f"t{i}"} for i in range(4)]
        raise ValueError(f"unknown split {split!r}")

    async def setup(self) -> None:
        async with self._working():
            await asyncio.sleep(self.open_s)

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text=f"Call work, then submit, with the word {self.word!r}.")]

    @tool
    async def work(self, params: TextParams) -> ToolOutput:
        """Do some slow work on the text and echo it back."""
        wait = self._draw(self.tool_s, self.tool_sigma) if self.tool_sigma > 0 else self.tool_s
        async with self._working():
            await asyncio.sleep(wait)
        reward = 1.0 if params.text.strip() == self.word else 0.0
        return ToolOutput(blocks=[TextBlock(text=f"worked on {params.text}")], reward=reward, finished=False)

    @tool
    async def submit(self, params: TextParams) -> ToolOutput:
        """Submit the final answer and end the episode."""
        reward = 1.0 if params.text.strip() == self.word else 0.0
        return ToolOutput(blocks=[TextBlock(text=f"submitted {params.text!r}")], reward=reward, finished=True)
