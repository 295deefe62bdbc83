"""The exit-status table of docs/cli.md (the command-line page) is the truth: this test reads it and runs
every example it gives, each a command on a real (broken) input under tests/data/user_envs/, and asserts the
status the table says.

Ctrl-C and SIGTERM rows are run by sending the signal once the command has started checking (its environment's
tool takes a minute, so the command is still running when the signal arrives).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLI_PAGE = ROOT / "docs" / "cli.md"
SRC = ROOT / "src"


def exit_table() -> list[tuple[int, str, str]]:
    """``(status, example command, how it is stopped: "" / "Ctrl-C" / "SIGTERM")`` for every example of the
    exit-status table of docs/cli.md."""
    text = CLI_PAGE.read_text()
    section = text.split("\n## Exit statuses", 1)[1]
    rows = section.split("\n\n")[2].splitlines()  # the paragraph after the section's first one
    assert rows and rows[0].startswith("| status |"), "the table must follow the section's first paragraph"
    found = []
    for row in rows[2:]:
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        status, examples = int(cells[0]), cells[-1]
        for example in examples.split("; "):
            stop = next((s for s in ("Ctrl-C", "SIGTERM") if example.startswith(s)), "")
            commands = re.findall(r"`(ormix [^`]+)`", example)
            assert len(commands) == 1, f"an example is one `ormix ...` command: {example!r}"
            found.append((status, commands[0], stop))
    return found


CASES = exit_table()


def test_the_table_covers_every_status_and_the_problems_of_issue_39() -> None:
    statuses = {status for status, _, _ in CASES}
    assert statuses == {0, 1, 2, 130, 143}
    commands = {command: status for status, command, _ in CASES}
    # A tool that raises and a scoring tool that ends unscored: found by running the environment, 1.
    assert commands["ormix check tests/data/user_envs/broken_tool_raises.yaml"] == 1
    assert commands["ormix check tests/data/user_envs/broken_finish_unscored.yaml"] == 1
    assert commands["ormix eval tests/data/user_envs/broken_finish_unscored.yaml --policy reference"] == 1
    # An eval whose every rollout of a member failed in the environment measured nothing: 1, never a quiet 0.
    assert commands["ormix eval tests/data/user_envs/broken_constructor_raises.yaml"] == 1
    # An oracle eval of a member without any reference solution would run nothing of it: refused, 2.
    assert commands["ormix eval tests/data/user_envs/two_members.yaml --policy reference"] == 2
    # The table is the only place that says which status a command ends with on such inputs.
    text = CLI_PAGE.read_text()
    assert "exit 1 when a member is unusable" in text and "2 for\nbad input" not in text


def run(command: str, cwd: Path, stop: str) -> subprocess.CompletedProcess[str]:
    # Paths in the table are the repository's; the command runs in a fresh directory (runs/, evals/ go there).
    args = [str(ROOT / a) if a.startswith("tests/") else a for a in shlex.split(command)[1:]]
    env = {**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "400", "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, "-m", "ormix.app", *args]
    if not stop:
        return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd
    ) as proc:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # "checking 1 environment(s) of ...": it is running now
        proc.send_signal(signal.SIGINT if stop == "Ctrl-C" else signal.SIGTERM)
        out = first + proc.stdout.read()
        proc.wait(timeout=120)
        return subprocess.CompletedProcess(argv, proc.returncode, out, "")


@pytest.mark.parametrize(("status", "command", "stop"), CASES, ids=[f"{s}:{c}" for s, c, _ in CASES])
def test_each_example_of_the_exit_table_exits_as_it_says(
    status: int, command: str, stop: str, tmp_path: Path, tiny_model: str
) -> None:
    done = run(command, tmp_path, stop)
    out = done.stdout + done.stderr
    assert done.returncode == status, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    if status in (1, 2):
        assert "error:" in out, out[-3000:]  # every failure says why, in one line


def test_a_rerun_of_an_eval_whose_member_only_errored_fails_again_naming_the_member_and_the_fix(
    tmp_path: Path, tiny_model: str
) -> None:
    # The rerun finds every task done (the errors are records too) and once said so and exited 0.
    command = "ormix eval tests/data/user_envs/broken_constructor_raises.yaml --out out"
    for attempt in ("first", "rerun"):
        done = run(command, tmp_path, "")
        out = done.stdout + done.stderr
        assert done.returncode == 1, (attempt, out[-3000:])
        errors = [line for line in out.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, (attempt, out[-3000:])
        assert "'mine'" in errors[0] and "mostly session_open" in errors[0] and "--overwrite" in errors[0]
    assert "every task is done already" in out
