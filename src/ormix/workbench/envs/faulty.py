"""`local:faulty`: an ORS environment that fails on purpose, for tests of clients and trainers.

Server env name `faulty`. Every behaviour is chosen by the TASK SPEC, so a test picks it by task index
(split `train`) or by passing `task_spec=` to `open_session`. Task-spec fields (all optional):

| field              | effect                                                                          |
|--------------------|---------------------------------------------------------------------------------|
| `fail_open`        | the constructor raises → `/create` answers 500 (`SessionOpenError`)             |
| `flaky_open`       | a key: the FIRST open with that key in this process fails as `fail_open`; later work |
| `fail_setup`       | `setup()` raises → `/prompt`, `/call` answer 500 (`SessionOpenError`)            |
| `setup_s`          | `setup()` sleeps this long (prompt waits for it)                                 |
| `slow_s`           | default duration of the `slow` tool (0.5 s when unset)                           |
| `raise_in`         | name of a tool that raises when called (SSE `error` → `ToolFailed`)              |
| `big_output_bytes` | default length of the `big` tool's output (150 000 when unset)                   |
| `die_after`        | the server forgets the session after this many tool calls (`SessionDeadError`)  |
| `answer`           | the answer `submit` rewards with 1.0 (else 0.0); default `"42"`                   |

Tools (all `async`, so they run on the server's loop): `echo{text}`; `submit{answer}` (reward, finishes);
`slow{seconds?}` (concurrent, sleeps); `big{n?}` (returns `big_text(n)`); `boom{}` (always raises);
`count{key, sleep_s?}` (increments a per-process counter, optionally sleeps after, returns the new count:
proves a retried call ran once); `read_count{key}`; `check_secret{key, value}` (did the session get that
secret; never reveals one); `die{}` (the server forgets this session right after the call returns, as when the
reaper or a restart removes it).

Split `train` has 36 tasks mixing behaviours deterministically by index `i`:
- `i % 3 == 2` → `fail_open` (12 of 36, a third: "sessions that fail to open");
- otherwise by `i % 12`: 0, 6, 10 → plain; 1, 7 → `slow_s = 0.2`; 3 → `raise_in = "submit"`;
  4 → `die_after = 2`; 9 → `fail_setup`.
Split `test` has 4 plain tasks.

The counter is per process; the `read_count` tool reads it.

Example:
    >>> [t["behaviour"] for t in Faulty.list_tasks("train")[:6]]
    ['plain', 'slow', 'fail_open', 'raise_in', 'die_after', 'fail_open']
"""

from __future__ import annotations

import asyncio
import threading

from openreward.environments import Environment, TextBlock, ToolOutput, tool
from pydantic import BaseModel

_COUNTS: dict[str, int] = {}
_COUNTS_LOCK = threading.Lock()
_DEFAULT_BIG = 150_000
_DEFAULT_SLOW_S = 0.5


def _count_of(key: str) -> int:
    """How many times `count{key}` ran in this process (a thread-mode server shares it with its caller)."""
    with _COUNTS_LOCK:
        return _COUNTS.get(key, 0)


def big_text(n: int) -> str:
    """Deterministic text of exactly `n` characters with spaces, newlines, quotes and non-ASCII.

    Runs of spaces land on SSE chunk boundaries, which catches parsers that strip leading whitespace.

    Example:
        >>> len(big_text(10_000)), big_text(12)
        (10000, 'line 0000:  ')
    """
    unit = 'line {:04d}:    "quoted" \\ tab\t é ü 漢字 end\n'
    parts: list[str] = []
    size = 0
    i = 0
    while size < n:
        s = unit.format(i % 10_000)
        parts.append(s)
        size += len(s)
        i += 1
    return "".join(parts)[:n]


def _train_task(i: int) -> dict:
    spec: dict = {"index": i, "answer": str(40 + i % 7), "behaviour": "plain"}
    if i % 3 == 2:
        spec.update(fail_open=True, behaviour="fail_open")
        return spec
    r = i % 12
    if r in (1, 7):
        spec.update(slow_s=0.2, behaviour="slow")
    elif r == 3:
        spec.update(raise_in="submit", behaviour="raise_in")
    elif r == 4:
        spec.update(die_after=2, behaviour="die_after")
    elif r == 9:
        spec.update(fail_setup=True, behaviour="fail_setup")
    return spec


class TextParams(BaseModel, extra="forbid"):
    text: str


class AnswerParams(BaseModel, extra="forbid"):
    answer: str


class SlowParams(BaseModel, extra="forbid"):
    seconds: float | None = None


class BigParams(BaseModel, extra="forbid"):
    n: int | None = None


class CountParams(BaseModel, extra="forbid"):
    key: str
    sleep_s: float = 0.0


class KeyParams(BaseModel, extra="forbid"):
    key: str


class EmptyParams(BaseModel, extra="forbid"):
    pass


class SecretParams(BaseModel, extra="forbid"):
    key: str
    value: str


class Faulty(Environment):
    """Fault injection driven by the task spec (see the module docstring)."""

    def __init__(self, task_spec: dict, secrets: dict[str, str] | None = None) -> None:
        super().__init__(task_spec, secrets or {})
        self.spec = dict(task_spec or {})
        self.secrets = dict(secrets or {})
        if self.spec.get("fail_open"):
            raise RuntimeError(f"faulty: task {self.spec.get('index', '?')} is configured to fail at open")
        flaky = self.spec.get("flaky_open")
        if flaky is not None:
            with _COUNTS_LOCK:
                key = f"open:{flaky}"
                _COUNTS[key] = _COUNTS.get(key, 0) + 1
                first = _COUNTS[key] == 1
            if first:
                raise RuntimeError(f"faulty: first open of {flaky!r} fails (flaky_open)")
        self.calls = 0

    @classmethod
    def list_splits(cls) -> list[str]:
        return ["train", "test"]

    @classmethod
    def list_tasks(cls, split: str) -> list[dict]:
        if split == "train":
            return [_train_task(i) for i in range(36)]
        if split == "test":
            return [{"index": i, "answer": "42", "behaviour": "plain"} for i in range(4)]
        raise ValueError(f"unknown split {split!r}")

    async def setup(self) -> None:
        if self.spec.get("setup_s"):
            await asyncio.sleep(float(self.spec["setup_s"]))
        if self.spec.get("fail_setup"):
            raise RuntimeError(f"faulty: task {self.spec.get('index', '?')} is configured to fail in setup()")

    def get_prompt(self) -> list[TextBlock]:
        return [
            TextBlock(
                text=f"Faulty task {self.spec.get('index', '?')}: call submit with answer "
                f"{self.spec.get('answer', '42')!r}."
            )
        ]

    # -- fault plumbing -------------------------------------------------------------------------

    def _enter(self, name: str) -> None:
        self.calls += 1
        die_after = self.spec.get("die_after")
        if die_after is not None and self.calls >= int(die_after):
            self._forget_soon()
        if self.spec.get("raise_in") == name:
            raise RuntimeError(f"faulty: tool {name!r} is configured to raise")

    def _forget_soon(self) -> None:
        """Make the server forget this session right after the current call, as its reaper would."""
        loop = asyncio.get_running_loop()
        loop.call_soon(lambda: loop.create_task(self._forget()))

    async def _forget(self) -> None:
        from ormix.server._openreward_internals import delete_session, session_of
        from ormix.server._serving import servers_in_process

        # The env does not know its server: ask the ones this process serves.
        for srv in servers_in_process():
            sid = session_of(srv, self)
            if sid is not None:
                await delete_session(srv, sid)
                return

    # -- tools ----------------------------------------------------------------------------------

    @tool
    async def echo(self, params: TextParams) -> ToolOutput:
        """Echo the text back."""
        self._enter("echo")
        return ToolOutput(blocks=[TextBlock(text=params.text)], reward=None, finished=False)

    @tool
    async def submit(self, params: AnswerParams) -> ToolOutput:
        """Submit the answer; reward 1.0 when it is right, else 0.0. Ends the episode."""
        self._enter("submit")
        reward = 1.0 if params.answer.strip() == str(self.spec.get("answer", "42")) else 0.0
        return ToolOutput(
            blocks=[TextBlock(text=f"submitted {params.answer!r}")], reward=reward, finished=True
        )

    @tool(concurrent=True)
    async def slow(self, params: SlowParams) -> ToolOutput:
        """Sleep `seconds` (default: the task's slow_s), then answer."""
        self._enter("slow")
        seconds = (
            params.seconds if params.seconds is not None else float(self.spec.get("slow_s", _DEFAULT_SLOW_S))
        )
        await asyncio.sleep(seconds)
        return ToolOutput(blocks=[TextBlock(text=f"slept {seconds:g}s")], metadata={"slept_s": seconds})

    @tool
    async def big(self, params: BigParams) -> ToolOutput:
        """Return `n` characters (default: the task's big_output_bytes)."""
        self._enter("big")
        n = params.n if params.n is not None else int(self.spec.get("big_output_bytes", _DEFAULT_BIG))
        return ToolOutput(blocks=[TextBlock(text=big_text(n))], metadata={"n": n})

    @tool
    async def boom(self, params: EmptyParams) -> ToolOutput:
        """Always raise."""
        self._enter("boom")
        raise RuntimeError("faulty: boom")

    @tool(concurrent=True)
    async def count(self, params: CountParams) -> ToolOutput:
        """Increment the per-process counter `key`, sleep `sleep_s`, return the new count."""
        self._enter("count")
        with _COUNTS_LOCK:
            _COUNTS[params.key] = value = _COUNTS.get(params.key, 0) + 1
        if params.sleep_s > 0:
            await asyncio.sleep(params.sleep_s)
        return ToolOutput(blocks=[TextBlock(text=str(value))], metadata={"count": value})

    @tool
    async def read_count(self, params: KeyParams) -> ToolOutput:
        """Read the counter `key` without changing it."""
        value = _count_of(params.key)
        return ToolOutput(blocks=[TextBlock(text=str(value))], metadata={"count": value})

    @tool
    async def check_secret(self, params: SecretParams) -> ToolOutput:
        """Whether the session received secret `key` with exactly `value` (never reveals a value)."""
        ok = self.secrets.get(params.key) == params.value
        return ToolOutput(
            blocks=[TextBlock(text="yes" if ok else "no")],
            metadata={"match": ok, "keys": sorted(self.secrets)},
        )

    @tool
    async def die(self, params: EmptyParams) -> ToolOutput:
        """The server forgets this session right after this call returns."""
        self._enter("die")
        self._forget_soon()
        return ToolOutput(blocks=[TextBlock(text="this session is about to die")])
