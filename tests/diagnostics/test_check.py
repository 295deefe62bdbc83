"""`ormix check`: real servers (echo, faulty) plus a member on a closed port; the order tools are called in.

The schema→arguments generator it uses is tested in `tests/tools/test_examples.py`.
"""

from __future__ import annotations

import io
import socket

import pytest
from rich.console import Console

from ormix.app._check import check_command, looks_final, order_tools


@pytest.fixture
def thread_serving(monkeypatch):
    """Serve `local:` members in this process."""

    monkeypatch.setenv("ORMIX_LOCAL_SERVE", "thread")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_check_names_the_dead_member_and_still_checks_the_others(tmp_path, thread_serving):
    port = closed_port()
    path = tmp_path / "mix.yaml"
    path.write_text(
        "members:\n"
        "  echo: {target: 'local:echo', num_tasks: 2}\n"
        f"  gone: {{target: 'http://127.0.0.1:{port}', env_name: echo}}\n"
        "  faulty: {target: 'local:faulty', indices: [0]}\n"
    )
    buf = io.StringIO()
    code = check_command(path, Console(file=buf, width=250, color_system=None))
    text = buf.getvalue()
    assert code == 1
    assert f"environment 'gone' (http://127.0.0.1:{port}) is unusable: connect:" in text
    assert "connect" in text.split("'gone'")[1].lower() or "refused" in text.lower()
    lines = {
        line.split()[1]: line for line in text.splitlines() if line.startswith("│ ") and "local:" in line
    }
    # echo: both tools worked; its tool calls are listed with latencies.
    assert "ok" in lines["echo"] and "2/2" in lines["echo"]
    # faulty still checked after the dead member: its 1 selected task of the split's 36, 9 tools, and `boom`
    # raising inside the environment is a finding (every rollout calling it would fail).
    assert "1 of 36" in lines["faulty"] and "│ 9 " in lines["faulty"]
    assert "tool(s) raising boom" in lines["faulty"] and "tool_failed" in text
    assert (
        "environment 'faulty': tool 'boom' raised inside the environment: faulty: boom; every rollout" in text
    )
    # `die` and `submit` (they look like they end the episode) ran after the others; `die` killed its session
    # and `submit` still ran, on a fresh one.
    cells = [
        [c.strip() for c in line.split("│")[1:-1]]
        for line in text.split("eval sets")[0].splitlines()  # the tools table, not the eval sets below it
        if line.startswith("│ faulty")
    ]
    tools_in_order = [row[1] for row in cells if row[1] != "local:faulty"]
    assert tools_in_order[-2:] == ["die", "submit"] and len(tools_in_order) == 9
    assert "the session was gone after this call" in text
    assert "gone" not in lines  # the dead member's row names no local target
    assert "rejected" not in text  # the generated arguments satisfied every real schema


def test_check_exit_zero_when_every_member_works(tmp_path, thread_serving):
    path = tmp_path / "ok.yaml"
    path.write_text("members:\n  echo: {target: 'local:echo', num_tasks: 1}\n")
    buf = io.StringIO()
    assert check_command(path, Console(file=buf, width=200, color_system=None)) == 0
    assert "all 1 environment(s) usable" in buf.getvalue()


def test_check_refuses_a_bad_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("members:\n  echo: {target: 'local:echo'}\ntelemetry: {min_coverag: 0.3}\n")
    buf = io.StringIO()
    assert check_command(path, Console(file=buf, width=200, color_system=None)) == 2
    assert "min_coverag" in buf.getvalue()


# ── pure: which tools go last ─────────────────────────────────────────────────────────────────────────────


def test_submit_like_tools_go_last():
    assert looks_final("submit") and looks_final("submit_solution") and looks_final("finalAnswer")
    assert not looks_final("bash") and not looks_final("read_file") and not looks_final("append")
    assert looks_final("grade_it", "") and looks_final("x", "Submit and end the episode.")
    names = [
        t["name"]
        for t in order_tools(
            [{"name": "submit_solution"}, {"name": "bash"}, {"name": "write", "description": "write a file"}]
        )
    ]
    assert names == ["bash", "write", "submit_solution"]


def test_a_tool_that_raises_fails_the_check_unless_tolerated(tmp_path, thread_serving):
    path = tmp_path / "mix.yaml"
    path.write_text("members:\n  faulty: {target: 'local:faulty', indices: [0]}\n")
    assert check_command(path, Console(file=io.StringIO(), width=250)) == 1
    buf = io.StringIO()
    assert check_command(path, Console(file=buf, width=250), tolerate_tool_errors=True) == 0
    assert "boom" in buf.getvalue()


def test_check_shows_eval_sets_and_refuses_one_the_environment_lacks(tmp_path, thread_serving):
    path = tmp_path / "evals.yaml"
    path.write_text(
        "members:\n"
        "  echo: {target: 'local:echo', num_tasks: 15, eval: {num_tasks: 2}}\n"
        "  held: {target: 'local:echo', indices: [3], eval: {split: test, indices: [0, 1]}}\n"
    )
    buf = io.StringIO()
    assert check_command(path, Console(file=buf, width=250, color_system=None)) == 0
    text = buf.getvalue()
    rows = {
        cells[0]: cells
        for line in text.split("eval sets")[1].splitlines()
        if line.startswith("│ ") and (cells := [c.strip() for c in line.split("│")[1:-1]])
    }
    assert rows["echo"] == [
        "echo",
        "train",
        "2",
        "the first 2 tasks of split 'train' (overlapping training)",
        "2",
    ]
    assert rows["held"] == ["held", "test", "2", "eval.indices of split 'test'", "0"]
    assert "note: echo: eval overlaps training: split 'train' has 16 tasks and echo trains on 15" in text
    path.write_text(path.read_text().replace("split: test,", "split: validation,"))
    buf = io.StringIO()
    assert check_command(path, Console(file=buf, width=250, color_system=None)) == 2
    assert "error: member 'held': eval split 'validation' does not exist on local:echo" in buf.getvalue()


def test_check_shows_the_eval_set_ormix_eval_uses_when_the_file_names_none(tmp_path, thread_serving):
    """No member has an ``eval:`` set: `ormix eval` and `ormix train` evaluate on the test split, so `check`
    shows that set (before, its table stayed empty and the evals looked like they would not run)."""
    path = tmp_path / "mix.yaml"
    path.write_text("members:\n  echo: {target: 'local:echo', num_tasks: 2}\n")
    buf = io.StringIO()
    code = check_command(path, Console(file=buf, width=250, color_system=None))
    text = buf.getvalue()
    assert code == 0, text
    evals = text.split("eval sets")[1]
    row = next(line for line in evals.splitlines() if line.startswith("│ echo"))
    cells = [c.strip() for c in row.split("│")[1:-1]]
    assert cells[:3] == ["echo", "test", "4"], cells
    assert "no eval: set" in cells[3]


_SLEEPY_ENV = '''
import asyncio

from openreward.environments import Environment, TextBlock, ToolOutput, tool
from pydantic import BaseModel


class Text(BaseModel):
    text: str


class Env(Environment):
    def __init__(self, task_spec, secrets=None):
        super().__init__(task_spec, secrets or {})

    @classmethod
    def list_splits(cls):
        return ["train"]

    @classmethod
    def list_tasks(cls, split):
        return [{"word": "river"}, {"word": "stone"}]

    def get_prompt(self):
        return [TextBlock(text="Look it up, then answer.")]

    @tool
    async def lookup(self, params: Text) -> ToolOutput:
        """Look something up (slower than the member's deadline)."""
        await asyncio.sleep(3)
        return ToolOutput(blocks=[TextBlock(text="found")])

    @tool
    def answer(self, params: Text) -> ToolOutput:
        """Answer; ends the episode."""
        return ToolOutput(blocks=[TextBlock(text="ok")], reward=1.0, finished=True)
'''


def test_a_tool_slower_than_the_members_call_timeout_fails_the_check_unless_tolerated(tmp_path):
    import time

    (tmp_path / "check_sleepy_env.py").write_text(_SLEEPY_ENV)
    path = tmp_path / "mix.yaml"
    path.write_text("members:\n  mine: {target: 'check_sleepy_env:Env', num_tasks: 2, call_timeout_s: 1}\n")
    buf = io.StringIO()
    start = time.perf_counter()
    # The member's own deadline (1 s), not a fixed 30 s: a tool training would give up on fails here too.
    assert check_command(path, Console(file=buf, width=400)) == 1
    assert time.perf_counter() - start < 20
    out = buf.getvalue()
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "'mine'" in errors[0] and "'lookup' gave no answer within 1 s" in errors[0]
    assert "raise call_timeout_s of member 'mine' in the mixture file" in errors[0]
    assert "--tolerate-tool-errors" in errors[0]
    assert "Pass a larger timeout_s" not in out and "usable" not in out.splitlines()[-1]
    tolerated = io.StringIO()
    assert check_command(path, Console(file=tolerated, width=400), tolerate_tool_errors=True) == 0
