"""A named pipe in a workspace is refused by the file tools and graders; it never stalls the server.

Opening a FIFO that has no other end waits forever; the host-side file tools run on the server's event loop,
so one such open would stop every session. Real server, real bubblewrap sandboxes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import threading
import time
from pathlib import Path

import pytest

from ormix.ors import ORSClient
from ormix.server import serve_in_thread
from ormix.workbench.envs.sandbox import bwrap_status

_BWRAP_WHY = asyncio.run(bwrap_status())
pytestmark = pytest.mark.skipif(
    _BWRAP_WHY is not None, reason=f"needs a working bubblewrap (apt-get install -y bubblewrap): {_BWRAP_WHY}"
)

#: Seconds the calls on a named pipe may take, session starts included.
DEADLINE_S = 5.0


@contextlib.contextmanager
def released_after(base: Path, seconds: float):
    """Past `seconds`, keep giving every FIFO under `base` another end, so a server stuck opening one goes on
    and the test fails on its clock instead of hanging."""
    done = threading.Event()

    def watch() -> None:
        if done.wait(seconds):
            return
        while not done.wait(0.1):
            for p in base.rglob("*"):
                with contextlib.suppress(OSError):
                    if stat.S_ISFIFO(p.lstat().st_mode):
                        os.close(os.open(p, os.O_RDWR | os.O_NONBLOCK))

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        yield
    finally:
        done.set()
        t.join()


@pytest.fixture
def server(tmp_path, monkeypatch):
    monkeypatch.setenv("ORMIX_SANDBOX_DIR", str(tmp_path))
    with serve_in_thread(["local:terminals", "local:seta"]) as srv:
        yield srv


def client(server, env: str) -> ORSClient:
    return ORSClient(server.url, env_name=env, ping_interval_s=None, timeout_s=60)


def test_named_pipe_is_refused_promptly_and_the_server_goes_on(server, tmp_path):
    async def terminals():
        async with client(server, "terminals") as c, c.session(split="train", index=0) as s:
            await s.call("bash", {"command": "mkfifo p"})
            t0 = time.monotonic()
            out = {
                "view": await s.call("view", {"path": "p"}),
                "create": await s.call("create_file", {"path": "p", "content": "x"}),
                "edit": await s.call("str_replace", {"path": "p", "old_str": "a", "new_str": "b"}),
            }
            async with c.session(split="train", index=1) as other:  # another session still opens
                out["other"] = await other.call("bash", {"command": "echo alive"})
            return out, time.monotonic() - t0

    async def seta():
        async with client(server, "seta") as c, c.session(split="train", index=0) as s:
            await s.call("bash", {"command": "rm -f hello.txt && mkfifo hello.txt"})
            t0 = time.monotonic()
            return await s.call("submit_solution", {}), time.monotonic() - t0

    with released_after(tmp_path, DEADLINE_S):
        out, took = asyncio.run(terminals())
        graded, graded_took = asyncio.run(seta())

    assert took < DEADLINE_S and graded_took < DEADLINE_S, (took, graded_took)
    for name in ("view", "create", "edit"):
        assert out[name].text.startswith("Error") and "p is not a regular file" in out[name].text, out[
            name
        ].text
    assert out["other"].text.startswith("alive")
    assert graded.finished and graded.reward < 1.0
    assert "hello.txt is not a regular file" in graded.text, graded.text
