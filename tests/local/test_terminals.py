"""`local:terminals` over real HTTP (ormix.ors client → loopback server → bubblewrap sandboxes).

Every task is played twice, concurrently in two sessions: its reference solution must earn 1.0 and a
near-miss wrong solution 0.0. One server serves the whole module.
"""

from __future__ import annotations

import asyncio

import pytest

from ormix.ors import ORSClient, ToolRejected
from ormix.server import serve_in_thread
from ormix.workbench.envs.sandbox import bwrap_status
from ormix.workbench.envs.tasks.terminals_tasks import TASKS
from ormix.workbench.envs.terminals import Terminals
from support.solutions_terminals import REFERENCE, WRONG

_BWRAP_WHY = asyncio.run(bwrap_status())
pytestmark = pytest.mark.skipif(
    _BWRAP_WHY is not None, reason=f"needs a working bubblewrap (apt-get install -y bubblewrap): {_BWRAP_WHY}"
)

_INDEX = {
    t.task_id: (t.split, [u.task_id for u in TASKS if u.split == t.split].index(t.task_id)) for t in TASKS
}


@pytest.fixture(scope="module")
def server():
    with serve_in_thread(["local:terminals"]) as srv:
        yield srv


def client(server) -> ORSClient:
    return ORSClient(server.url, env_name="terminals", ping_interval_s=None, timeout_s=60)


async def play(server, task_id: str, calls) -> tuple[list, object]:
    """Open a session on the task, make the calls (every bash call must exit 0), submit; return results."""
    split, index = _INDEX[task_id]
    async with client(server) as c, c.session(split=split, index=index) as s:
        prompt = await s.prompt_text()
        outs = []
        for name, inp in calls:
            r = await s.call(name, inp)
            assert not r.text.startswith("Error"), (task_id, name, r.text)
            if name == "bash":
                assert r.metadata["exit_code"] == 0, (task_id, inp, r.text)
            outs.append(r)
        final = await s.call("submit", {})
        return [prompt, *outs], final


def test_catalog_shape():
    train, test = Terminals.list_tasks("train"), Terminals.list_tasks("test")
    assert len(train) == 28 and len(test) == 6
    assert {t["difficulty"] for t in train} == {"easy", "medium", "hard"}
    assert {t["category"] for t in train} == {"files", "text", "scripting"}
    assert all(set(t) == {"task_id", "difficulty", "category", "instructions"} for t in train + test)
    assert len({t["task_id"] for t in train + test}) == 34
    assert set(REFERENCE) == set(WRONG) == {t.task_id for t in TASKS}
    with pytest.raises(ValueError, match="unknown split"):
        Terminals.list_tasks("validation")


def test_tool_surface(server):
    async def main():
        async with client(server) as c:
            return {t.name: t for t in await c.tools()}, await c.num_tasks("train"), await c.num_tasks("test")

    tools, n_train, n_test = asyncio.run(main())
    assert set(tools) == {"bash", "view", "create_file", "str_replace", "submit"}
    assert tools["bash"].input_schema["required"] == ["command"]
    assert "timeout" in tools["bash"].input_schema["properties"]
    assert "view_range" in tools["view"].input_schema["properties"]
    assert (n_train, n_test) == (28, 6)


@pytest.mark.parametrize("task_id", [t.task_id for t in TASKS])
def test_reference_passes_and_wrong_fails(server, task_id):
    async def main():
        return await asyncio.gather(
            play(server, task_id, REFERENCE[task_id]), play(server, task_id, WRONG[task_id])
        )

    (ref_outs, ref), (_, wrong) = asyncio.run(main())
    task = next(t for t in TASKS if t.task_id == task_id)
    assert task.instructions in ref_outs[0]
    assert (ref.reward, ref.finished) == (1.0, True), ref.text
    assert ref.text.startswith("PASSED")
    assert (wrong.reward, wrong.finished) == (0.0, True), wrong.text
    assert "FAILED" in wrong.text


def test_tools_view_edit_and_episode_end(server):
    async def main():
        async with client(server) as c, c.session(split="train", index=0) as s:
            out = {}
            out["create"] = await s.call("create_file", {"path": "dir/x.txt", "content": "a\nb\nc\nd\n"})
            out["view"] = await s.call("view", {"path": "dir/x.txt", "view_range": [2, 3]})
            out["view_all"] = await s.call("view", {"path": "/workspace/dir/x.txt", "view_range": [3, -1]})
            out["listing"] = await s.call("view", {"path": "."})
            out["replace"] = await s.call(
                "str_replace", {"path": "dir/x.txt", "old_str": "b\n", "new_str": "B\n"}
            )
            out["dup"] = await s.call("str_replace", {"path": "dir/x.txt", "old_str": "\n", "new_str": ""})
            out["escape"] = await s.call("view", {"path": "../../etc/passwd"})
            out["etc"] = await s.call("view", {"path": "/etc/passwd"})
            out["cat"] = await s.call("bash", {"command": "cat dir/x.txt; pwd"})
            out["slow"] = await s.call("bash", {"command": "sleep 5", "timeout": 0.3})
            out["big"] = await s.call("bash", {"command": "head -c 100000 /dev/zero | tr '\\0' x"})
            out["submit"] = await s.call("submit", {})
            try:
                await s.call("bash", {"command": "true"})
            except ToolRejected as e:
                out["after"] = e.reason
            return out

    out = asyncio.run(main())
    assert out["view"].text == "     2\tb\n     3\tc"
    assert out["view_all"].text == "     3\tc\n     4\td"
    assert "dir/" in out["listing"].text.split("\n")
    assert out["replace"].text == "Edited dir/x.txt"
    assert "occurs 4 times" in out["dup"].text
    assert out["escape"].text.startswith("Error") and "outside the workspace" in out["escape"].text
    assert out["etc"].text.startswith("Error")
    assert out["cat"].text == "a\nB\nc\nd\n/workspace\n(exit 0)"
    assert out["slow"].metadata["timed_out"] is True and out["slow"].metadata["exit_code"] == 124
    assert out["big"].metadata["truncated"] is True and len(out["big"].text) < 31_000
    assert out["submit"].finished is True and out["submit"].reward == 0.0
    assert out["after"] == "episode_finished"


def test_sessions_are_isolated(server):
    """Two concurrent sessions of the same task do not see each other's files."""

    async def main():
        async with (
            client(server) as c,
            c.session(split="train", index=0) as a,
            c.session(split="train", index=0) as b,
        ):
            await a.call("bash", {"command": "echo mine > only_a.txt"})
            seen_by_b = await b.call("bash", {"command": "ls; test -e only_a.txt"})
            return seen_by_b

    seen_by_b = asyncio.run(main())
    assert "only_a.txt" not in seen_by_b.text
    assert seen_by_b.metadata["exit_code"] == 1


def test_submit_waits_for_calls_in_flight(server):
    """submit is exclusive: a bash call already running finishes before the workspace is graded."""
    split, index = _INDEX["files-mkdir-note"]

    async def main():
        async with client(server) as c, c.session(split=split, index=index) as s:
            await s.prompt_text()
            slow = asyncio.create_task(
                s.call("bash", {"command": "sleep 2; mkdir -p notes && echo 'buy milk' > notes/todo.txt"})
            )
            await asyncio.sleep(0.7)  # the bash call is running on the server
            submitted = await s.call("submit", {})
            return await slow, submitted

    bash, submitted = asyncio.run(main())
    assert bash.metadata["exit_code"] == 0
    assert submitted.reward == 1.0, submitted.text


def test_view_never_follows_symlinks(server):
    """view lists a symlink as a link: it never shows what lies outside the workspace through one."""

    async def main():
        async with client(server) as c, c.session(split="train", index=0) as s:
            await s.prompt_text()
            await s.call(
                "bash", {"command": "mkdir -p d/sub && ln -s /usr u && ln -s / d/up && ln -s sub d/in"}
            )
            return (
                await s.call("view", {"path": "."}),
                await s.call("view", {"path": "d"}),
                await s.call("view", {"path": "u"}),
            )

    top, d, u = asyncio.run(main())
    assert "u -> /usr" in top.text.split("\n") and "u/" not in top.text.split("\n")
    assert sorted(d.text.split("\n")) == ["in -> sub", "sub/", "up -> /"]
    assert u.text.startswith("Error") and "outside the workspace" in u.text


def _grade(task_id: str, calls) -> list:
    """Grade one task in-process after shell commands (`calls`) ran in its workspace."""
    from ormix.workbench.envs.sandbox import Sandbox

    task = next(t for t in TASKS if t.task_id == task_id)

    async def main():
        async with Sandbox() as sb:
            task.seed(sb)
            for cmd in calls:
                assert (await sb.run(cmd)).return_code == 0, cmd
            return await task.grade(sb)

    return asyncio.run(main())


_ROWS = [("bolt", 120, 0.25), ("nut", 300, 0.1), ("washer", 75, 0.05), ("gear", 4, 12.5)]


def test_csv_to_json_takes_no_float_for_an_integer():
    """qty is an integer: 120.0 is a wrong answer, though Python's == takes it for 120."""
    rows = ",".join(f'{{"name": "{n}", "qty": {q}.0, "price": {p}}}' for n, q, p in _ROWS)
    results = _grade("script-csv-to-json", [f"echo '[{rows}]' > inventory.json"])
    assert [r.passed for r in results] == [False]


def test_fix_count_counts_only_files_directly_inside():
    """The task says "directly inside": a recursive count is wrong."""
    recursive = _grade("script-fix-count", ["""echo 'find "$1" -name "*.txt" | wc -l' > count_txt.sh"""])
    assert [(r.name, r.passed) for r in recursive] == [
        ("two .txt files", True),
        ("no .txt file", True),
        ("only directly inside", False),
    ]
