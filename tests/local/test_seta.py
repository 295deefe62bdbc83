"""`local:seta` over real HTTP (ormix.ors client → loopback server → the SDK's CLIToolset → bubblewrap).

Every task is played twice, concurrently: the reference solution must earn 1.0, and a near miss exactly
the weighted fraction of checks it still passes (partial credit). One server serves the whole module.
"""

from __future__ import annotations

import asyncio

import pytest

from ormix.ors import ORSClient, ToolRejected
from ormix.server import serve_in_thread
from ormix.workbench.envs.sandbox import bwrap_status
from ormix.workbench.envs.seta import RESUBMIT_PENALTY, Seta
from ormix.workbench.envs.tasks.seta_tasks import TASKS
from support.solutions_seta import REFERENCE, WRONG

_BWRAP_WHY = asyncio.run(bwrap_status())
pytestmark = pytest.mark.skipif(
    _BWRAP_WHY is not None, reason=f"needs a working bubblewrap (apt-get install -y bubblewrap): {_BWRAP_WHY}"
)

_INDEX = {
    t.task_id: (t.split, [u.task_id for u in TASKS if u.split == t.split].index(t.task_id)) for t in TASKS
}
CLI_TOOLS = {"bash", "glob", "grep", "ls", "read", "write", "edit", "multi_edit", "todo_write"}


@pytest.fixture(scope="module")
def server():
    with serve_in_thread(["local:seta"]) as srv:
        yield srv


def client(server) -> ORSClient:
    return ORSClient(server.url, env_name="seta", ping_interval_s=None, timeout_s=60)


async def play(server, task_id: str, calls):
    """Open a session on the task, make the calls (each must succeed), submit; return (prompt, result)."""
    split, index = _INDEX[task_id]
    async with client(server) as c, c.session(split=split, index=index) as s:
        prompt = await s.prompt_text()
        for name, inp in calls:
            r = await s.call(name, inp)
            meta = r.metadata or {}
            assert "error" not in meta, (task_id, name, r.text)
            if name == "bash":
                assert meta["exit_code"] == 0, (task_id, inp, r.text)
        return prompt, await s.call("submit_solution", {})


def test_catalog_shape():
    train, test = Seta.list_tasks("train"), Seta.list_tasks("test")
    assert (len(train), len(test)) == (25, 5)
    assert all(set(t) == {"task_id", "difficulty", "category", "tags"} for t in train + test)
    assert all(isinstance(t["tags"], list) and t["tags"] for t in train + test)
    assert {t["difficulty"] for t in train} == {"Easy", "Medium", "Hard"}
    assert {t["difficulty"] for t in test} == {"Easy", "Medium", "Hard"}
    assert set(REFERENCE) == set(WRONG) == {t.task_id for t in TASKS}
    assert all(len(t.checks) >= 2 for t in TASKS)


def test_tool_surface_is_the_sdk_cli_toolset(server):
    async def main():
        async with client(server) as c:
            return {t.name: t for t in await c.tools()}, await c.task("train", 0)

    tools, task0 = asyncio.run(main())
    assert set(tools) == CLI_TOOLS | {"submit_solution"}
    assert tools["submit_solution"].input_schema["properties"] == {}
    assert tools["read"].input_schema["required"] == ["file_path"]
    assert set(task0) == {"task_id", "difficulty", "category", "tags"}


@pytest.mark.parametrize("task_id", [t.task_id for t in TASKS])
def test_reference_full_reward_wrong_partial(server, task_id):
    expected_wrong, wrong_calls = WRONG[task_id]

    async def main():
        return await asyncio.gather(
            play(server, task_id, REFERENCE[task_id]), play(server, task_id, wrong_calls)
        )

    (prompt, ref), (_, wrong) = asyncio.run(main())
    task = next(t for t in TASKS if t.task_id == task_id)
    assert task.instructions in prompt and "/workspace" in prompt
    assert (ref.reward, ref.finished) == (1.0, True), ref.text
    assert wrong.finished is True
    assert wrong.reward == pytest.approx(expected_wrong), wrong.text
    assert wrong.reward < 1.0


def test_cli_tools_are_rooted_and_confined(server):
    async def main():
        async with client(server) as c, c.session(split="train", index=0) as s:
            out = {
                "write": await s.call("write", {"file_path": "pkg/mod.py", "content": "x = 1\n"}),
                "read": await s.call("read", {"file_path": "/workspace/pkg/mod.py"}),
                "glob": await s.call("glob", {"pattern": "*.py"}),
                "grep": await s.call("grep", {"pattern": "x = 1"}),
                "ls": await s.call("ls", {"path": "pkg"}),
                "todo": await s.call(
                    "todo_write", {"todos": [{"content": "do it", "status": "in_progress"}]}
                ),
                "escape": await s.call("read", {"file_path": "/etc/hostname"}),
                "etc": await s.call("bash", {"command": "touch /etc/owned"}),
                "net": await s.call(
                    "bash",
                    {
                        "command": 'python3 -c "import socket; socket.create_connection(('
                        f"'127.0.0.1', {server.port}), timeout=2)\""
                    },
                ),
            }
            out["submit"] = await s.call("submit_solution", {})
            try:
                await s.call("submit_solution", {})
            except ToolRejected as e:
                out["second"] = e.reason
            return out

    out = asyncio.run(main())
    assert out["read"].text.startswith("1\tx = 1")
    assert "/workspace/pkg/mod.py" in out["glob"].text
    assert "mod.py:1:x = 1" in out["grep"].text
    assert "mod.py" in out["ls"].text
    assert "[in_progress] [medium] do it" in out["todo"].text
    assert "outside the workspace" in out["escape"].text
    assert out["etc"].metadata["exit_code"] != 0 and "Read-only file system" in out["etc"].text
    assert out["net"].metadata["exit_code"] != 0  # the test server's own port is unreachable from the sandbox
    assert out["submit"].finished is True and out["submit"].reward == 0.0
    # The openreward server latches finished=True: the second submission never reaches the environment.
    assert out["second"] == "episode_finished"


def test_second_submission_is_penalised_in_process():
    """The -0.1 rule itself, on an environment instance (over ORS the server's latch answers first)."""

    async def main():
        env = Seta(Seta.list_tasks("train")[0])
        await env.setup()
        try:
            first = await env.submit_solution(None)
            second = await env.submit_solution(None)
        finally:
            await env.teardown()
        return env, first, second

    env, first, second = asyncio.run(main())
    assert first.finished and first.reward == 0.0
    assert second.finished and second.reward == RESUBMIT_PENALTY == -0.1
    assert not env.sandbox.host_dir.exists()


_MODULE_UNDER_TEST = {
    "seta-fix-add": "calc.py",
    "seta-lru-cache": "lru.py",
    "seta-roman": "roman.py",
    "seta-matrix": "matrix.py",
    "seta-inventory-tests": "inventory.py",
}


@pytest.mark.parametrize("exit_call", ["os._exit(0)", "raise SystemExit(0)"])
def test_code_under_test_cannot_pass_a_check_by_exiting_early(exit_call):
    """A module that ends the checking process with status 0 on import passes no check that imports it."""
    from ormix.workbench.envs.sandbox import Sandbox
    from ormix.workbench.envs.tasks import weighted_score

    by_id = {t.task_id: t for t in TASKS}

    async def main():
        scores = {}
        for task_id, module in _MODULE_UNDER_TEST.items():
            task = by_id[task_id]
            async with Sandbox() as sb:
                task.seed(sb)
                sb.write_file(module, f"import os\n{exit_call}\n" + sb.read_file(module))
                scores[task_id] = weighted_score(await task.grade(sb))
        return scores

    scores = asyncio.run(main())
    # seta-inventory-tests keeps only "tests unchanged" (weight 1 of 5): it reads the file, runs nothing.
    assert scores == {**dict.fromkeys(_MODULE_UNDER_TEST, 0.0), "seta-inventory-tests": 0.2}


def test_submit_waits_for_calls_in_flight(server):
    """submit_solution is exclusive: a bash call already running finishes before the workspace is graded."""
    split, index = _INDEX["seta-hello-file"]

    async def main():
        async with client(server) as c, c.session(split=split, index=index) as s:
            await s.prompt_text()
            slow = asyncio.create_task(
                s.call("bash", {"command": "sleep 2; echo 'Hello, SETA!' > hello.txt"})
            )
            await asyncio.sleep(0.7)  # the bash call is running on the server
            submitted = await s.call("submit_solution", {})
            return await slow, submitted

    bash, submitted = asyncio.run(main())
    assert bash.metadata["exit_code"] == 0
    assert submitted.reward == 1.0, submitted.text
