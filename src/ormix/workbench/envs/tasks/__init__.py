"""Task definitions of the local shell environments, and the checks their graders run against a sandbox.

A task is plain data (`Task`): instructions, files seeded into the workspace, and weighted `Check`s. The
checks read workspace files on the host side (confined to the workspace) or run commands inside the sandbox;
nothing the model wrote is ever imported or executed outside it.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ormix.workbench.envs.sandbox import Sandbox

#: Seconds a grader command may run before it counts as failed.
CHECK_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class CheckResult:
    """One check's outcome, with a short reason when it failed."""

    name: str
    weight: float
    passed: bool
    detail: str = ""


@dataclass(frozen=True)
class Check:
    """A weighted assertion about the workspace. Subclasses implement `_run`.

    `name` is what the grader reports; `weight` counts toward a weighted score (SETA-style environments).
    """

    name: str
    weight: float = 1.0

    async def evaluate(self, sandbox: Sandbox) -> CheckResult:
        try:
            ok, detail = await self._run(sandbox)
        except (OSError, ValueError, RuntimeError) as e:  # missing file, path refused, bad JSON, ...
            ok, detail = False, f"{type(e).__name__}: {e}"
        return CheckResult(self.name, self.weight, ok, "" if ok else detail)

    async def _run(self, sandbox: Sandbox) -> tuple[bool, str]:  # pragma: no cover - abstract
        raise NotImplementedError


async def _read(sandbox: Sandbox, path: str) -> str:
    # In a worker thread: graders run on the server's event loop, which serves every session.
    return await asyncio.to_thread(sandbox.read_file, path)


def _norm(text: str) -> str:
    # Trailing spaces and the final newline are not part of what a task asks for.
    return "\n".join(line.rstrip() for line in text.rstrip("\n").split("\n"))


@dataclass(frozen=True)
class FileEquals(Check):
    """The file's text equals `expected` (trailing whitespace of lines and final newlines ignored)."""

    path: str = ""
    expected: str = ""

    async def _run(self, sandbox: Sandbox) -> tuple[bool, str]:
        got = await _read(sandbox, self.path)
        return _norm(got) == _norm(self.expected), f"{self.path} does not have the expected content"


@dataclass(frozen=True)
class FileMatches(Check):
    """Every regex in `patterns` matches somewhere in the file (multiline mode); none of `absent` does."""

    path: str = ""
    patterns: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()

    async def _run(self, sandbox: Sandbox) -> tuple[bool, str]:
        text = await _read(sandbox, self.path)
        for p in self.patterns:
            if not re.search(p, text, re.MULTILINE):
                return False, f"{self.path}: nothing matches {p!r}"
        for p in self.absent:
            if re.search(p, text, re.MULTILINE):
                return False, f"{self.path}: should not match {p!r}"
        return True, ""


def json_same(got: Any, expected: Any) -> bool:
    """Whether two JSON values are equal with the same types throughout (Python's `==` says `120.0 == 120`
    and `True == 1`, but a task asking for an integer does not accept `120.0` or `true`).

    Example:
        >>> json_same({"qty": [1, 2.5]}, {"qty": [1, 2.5]}), json_same({"qty": 120.0}, {"qty": 120})
        (True, False)
        >>> json_same([True], [1]), json_same({"a": 1}, {"a": 1, "b": 2})
        (False, False)
    """
    if type(got) is not type(expected):
        return False
    if isinstance(expected, dict):
        return got.keys() == expected.keys() and all(json_same(got[k], v) for k, v in expected.items())
    if isinstance(expected, list):
        return len(got) == len(expected) and all(json_same(g, e) for g, e in zip(got, expected, strict=True))
    return bool(got == expected)


@dataclass(frozen=True)
class JsonEquals(Check):
    """The file parses as JSON equal to `expected`, types included (`json_same`: `120.0` is not `120`)."""

    path: str = ""
    expected: Any = None

    async def _run(self, sandbox: Sandbox) -> tuple[bool, str]:
        got = json.loads(await _read(sandbox, self.path))
        return json_same(got, self.expected), f"{self.path}: unexpected JSON value"


@dataclass(frozen=True)
class Exists(Check):
    """Every path exists (`present=True`) or none does (`present=False`)."""

    paths: tuple[str, ...] = ()
    present: bool = True

    async def _run(self, sandbox: Sandbox) -> tuple[bool, str]:
        for p in self.paths:
            if sandbox.exists(p) != self.present:
                return False, f"{p} {'is missing' if self.present else 'should not exist'}"
        return True, ""


@dataclass(frozen=True)
class Executable(Check):
    """The file exists and has its owner-execute bit set."""

    path: str = ""

    async def _run(self, sandbox: Sandbox) -> tuple[bool, str]:
        return bool(sandbox.host_path(self.path).stat().st_mode & 0o100), f"{self.path} is not executable"


#: Placeholder in a `Command` with `nonce=True`, replaced by a fresh random token on every run.
NONCE = "@ORMIX_NONCE@"


@dataclass(frozen=True)
class Command(Check):
    """Run `cmd` with bash in the sandbox: it must exit 0 and, when `output` is set, print exactly that.

    With `nonce=True`, every `NONCE` in `cmd` is replaced by a fresh random token, and the command must
    also print that token on a line of its own (it is not part of what `output` is compared with). A check
    that runs the code under test in its own process sets it: that code can end the process early with
    status 0 (`os._exit(0)` on import), and then the token is never printed. It stops an early exit, not
    code written to find the token (it is in the check's own process: its source, its frames, its argv).
    """

    cmd: str = ""
    output: str | None = None
    #: How failures name the command (default: the command itself).
    label: str | None = None
    nonce: bool = False

    async def _run(self, sandbox: Sandbox) -> tuple[bool, str]:
        what = self.label or f"`{self.cmd}`"
        cmd, token = self.cmd, None
        if self.nonce:
            token = secrets.token_hex(16)
            cmd = cmd.replace(NONCE, token)
        res = await sandbox.run(cmd, timeout=CHECK_TIMEOUT_S, max_bytes=200_000)
        if res.timed_out:
            return False, f"{what} timed out after {CHECK_TIMEOUT_S:g}s"
        if res.return_code != 0:
            return False, f"{what} exited {res.return_code}"
        output = res.output
        if token is not None:
            lines = output.split("\n")
            if token not in (line.strip() for line in lines):
                return False, f"{what} ended before its last statement (the code under test exited early)"
            output = "\n".join(line for line in lines if line.strip() != token)
        if self.output is not None and _norm(output) != _norm(self.output):
            return False, f"{what} printed something else"
        return True, ""


def python_check(name: str, code: str, weight: float = 1.0) -> Command:
    """A check that runs `code` with the sandbox's python3 in the workspace; it passes when `code` runs to
    its end and the process exits 0 (so code under test that exits early, even with status 0, fails it).

    `-I` keeps PYTHON* variables and user site-packages out; the workspace is put first on `sys.path`
    explicitly so the code under test imports.
    """
    prelude = "import os, sys\nsys.path.insert(0, os.getcwd())\n"
    # Flushed here, so nothing the code under test does at interpreter exit can hold it back.
    done = f"\nprint({NONCE!r}, flush=True)"
    return Command(
        name,
        weight,
        cmd=f"python3 -I - <<'ORMIX_CHECK_EOF'\n{prelude}{code}{done}\nORMIX_CHECK_EOF",
        label="the Python check",
        nonce=True,
    )


def unittest_check(name: str, tests: str, weight: float = 1.0) -> Command:
    """A `python_check` that runs the unittest tests named by `tests` (a module, class or method, dotted as
    for `python -m unittest`) and passes when at least one ran and all succeeded.

    Not `python -m unittest`: its exit status is all it reports, and code under test can fake that.
    """
    code = (
        "import unittest\n"
        f"suite = unittest.defaultTestLoader.loadTestsFromName({tests!r})\n"
        "result = unittest.TextTestRunner(verbosity=0).run(suite)\n"
        "assert result.testsRun and result.wasSuccessful(), result"
    )
    return python_check(name, code, weight)


@dataclass(frozen=True)
class Task:
    """One task: what the prompt says, what the workspace starts with, and how it is graded.

    `files` maps workspace paths to text, or to `(text, mode)` for a file with permission bits.
    """

    task_id: str
    difficulty: str
    category: str
    instructions: str
    files: dict[str, str | tuple[str, int]] = field(default_factory=dict)
    checks: Sequence[Check] = ()
    tags: tuple[str, ...] = ()
    split: str = "train"

    def seed(self, sandbox: Sandbox) -> None:
        """Write the task's files into the workspace."""
        for path, spec in self.files.items():
            text, mode = spec if isinstance(spec, tuple) else (spec, None)
            sandbox.write_file(path, text, mode)

    async def grade(self, sandbox: Sandbox) -> list[CheckResult]:
        """Run every check, in order."""
        return [await c.evaluate(sandbox) for c in self.checks]


def weighted_score(results: Sequence[CheckResult]) -> float:
    """The weighted fraction of passing checks (0.0 when there are none)."""
    total = sum(r.weight for r in results)
    return sum(r.weight for r in results if r.passed) / total if total else 0.0


def summarize(results: Sequence[CheckResult]) -> str:
    """A short report for the model: how many checks passed and which failed."""
    passed = sum(r.passed for r in results)
    lines = [f"{passed}/{len(results)} checks passed."]
    lines += [f"FAILED {r.name}: {r.detail}" for r in results if not r.passed]
    return "\n".join(lines)


def by_split(tasks: Sequence[Task], split: str) -> list[Task]:
    """The tasks of one split, in definition order."""
    return [t for t in tasks if t.split == split]
