"""ormix.ors under faults, against `local:faulty` on loopback: keepalive vs the server's idle reaper,
deadlines, connections cut by a real TCP proxy (retried with the same task_id: the tool runs once),
sessions that die, and many concurrent sessions.

The server's idle limit is shortened to 1.5 s (`idle_limit_s`); the client's logic is untouched. The
server runs in a child process (sse-starlette 2.3.6 cannot serve SSE from two event loops of one process,
and the session-wide echo server already holds one), so the counter is read with the `read_count` tool.
"""

from __future__ import annotations

import time
import uuid

import anyio
import httpx
import pytest

from ormix.local import serve_in_process
from ormix.ors import DeadlineExceeded, ORSClient, SessionDeadError, TransportError
from support.tcp_proxy import TCPProxy

IDLE_LIMIT_S = 1.5


@pytest.fixture(scope="module")
def server():
    with serve_in_process(["local:faulty"], idle_limit_s=IDLE_LIMIT_S) as srv:
        yield srv


def run(fn, *args):
    return anyio.run(fn, *args)


async def read_count(url: str, key: str) -> int:
    async with ORSClient(url, env_name="faulty") as c, c.session(split="test", index=0) as s:
        return int((await s.call("read_count", {"key": key})).text)


def test_pings_keep_an_idle_session_alive_and_without_them_it_dies(server):
    async def main():
        async with (
            ORSClient(server.url, env_name="faulty", ping_interval_s=0.3) as pinged,
            ORSClient(server.url, env_name="faulty", ping_interval_s=None) as silent,
        ):
            kept = await pinged.open_session(split="test", index=0)
            long_call = await pinged.open_session(split="test", index=1)
            lost = await silent.open_session(split="test", index=2)
            slow_result = {}

            async def run_long() -> None:
                # Longer than the idle limit: only pings sent during the call keep the session.
                slow_result["r"] = await long_call.call("slow", {"seconds": 3.0})

            async with anyio.create_task_group() as tg:
                tg.start_soon(run_long)
                await anyio.sleep(4 * IDLE_LIMIT_S / 1.5)  # idle well past the limit (4 s)
            assert slow_result["r"].metadata == {"slept_s": 3.0}
            assert (await kept.call("echo", {"text": "still here"})).text == "still here"
            assert (await long_call.call("echo", {"text": "after"})).text == "after"
            assert kept.timings.pings >= 5
            with pytest.raises(SessionDeadError) as ei:
                await lost.call("echo", {"text": "gone?"})
            assert ei.value.session_id == lost.id and lost.dead
            assert "Open a new session" in str(ei.value)
            await lost.close()  # never raises on a dead session
            assert lost.closed

    run(main)


def test_ping_discovers_a_dead_session_and_the_next_call_fails_fast(server):
    async def main():
        async with ORSClient(server.url, env_name="faulty", ping_interval_s=0.1) as c:
            s = await c.open_session(split="test", index=0)
            assert (await s.call("die", {})).text == "this session is about to die"
            with anyio.fail_after(5):
                while not s.dead:
                    await anyio.sleep(0.02)
            t = time.perf_counter()
            with pytest.raises(SessionDeadError, match="reaped") as ei:
                await s.call("echo", {"text": "x"})
            assert time.perf_counter() - t < 0.05  # raised locally, no request
            assert ei.value.tool == "echo"
            await s.close()

    run(main)


def test_session_dying_mid_episode_is_reported_by_the_call(server):
    # Train task 4 has die_after=2: the server forgets the session after its second call.
    async def main():
        async with ORSClient(server.url, env_name="faulty", ping_interval_s=None) as c:
            task = await c.task("train", 4)
            assert task["die_after"] == 2
            async with c.session(split="train", index=4) as s:
                await s.call("echo", {"text": "1"})
                await s.call("echo", {"text": "2"})
                with pytest.raises(SessionDeadError):
                    await s.call("echo", {"text": "3"})
                with pytest.raises(SessionDeadError):  # stays dead
                    await s.prompt()

    run(main)


def test_deleted_session_raises_session_dead(server):
    async def main():
        async with ORSClient(server.url, env_name="faulty", ping_interval_s=None) as c:
            s = await c.open_session(split="test", index=0)
            async with httpx.AsyncClient() as h:
                assert (
                    await h.post(f"{server.url}/delete", headers={"X-Session-ID": s.id})
                ).status_code == 200
            with pytest.raises(SessionDeadError):
                await s.call("echo", {"text": "x"})
            with pytest.raises(SessionDeadError):
                await s.ping()
            await s.close()

    run(main)


def test_deadline_fires_and_everything_stays_usable(server):
    async def main():
        async with ORSClient(server.url, env_name="faulty", ping_interval_s=0.3) as c:
            async with c.session(split="test", index=0) as s:
                t = time.perf_counter()
                with pytest.raises(DeadlineExceeded) as ei:
                    await s.call("slow", {"seconds": 5.0}, timeout_s=0.5)
                assert 0.4 < time.perf_counter() - t < 2.0
                err = ei.value
                assert isinstance(err, TimeoutError)
                assert err.tool == "slow" and err.session_id == s.id
                assert "'slow'" in str(err) and s.id in str(err) and "timeout_s" in str(err)
                assert (await s.call("echo", {"text": "ok"})).text == "ok"
                assert await c.num_tasks("train") == 36
        # The client's default deadline applies when the call gives none.
        async with ORSClient(server.url, env_name="faulty", timeout_s=0.3) as c:
            async with c.session(split="test", index=1) as s:
                with pytest.raises(DeadlineExceeded):
                    await s.call("slow", {"seconds": 3.0})
                assert (await s.call("echo", {"text": "ok"})).text == "ok"

    run(main)


def test_dropped_connection_is_retried_and_the_tool_runs_once(server):
    key = f"drop-{uuid.uuid4()}"

    async def main():
        with TCPProxy(server.port) as proxy:
            async with ORSClient(proxy.url, env_name="faulty", ping_interval_s=None) as c:
                async with c.session(split="test", index=0) as s:
                    proxy.cut_next(b"POST /faulty/call", mode="after_task_id")
                    r = await s.call("count", {"key": key, "sleep_s": 0.5})
                    assert proxy.cuts == 1  # the connection really was cut mid-call
                    assert s.timings.retries >= 1
                    assert r.text == "1" and r.metadata == {"count": 1}
        assert await read_count(server.url, key) == 1

    run(main)


def test_connection_cut_before_acknowledgement_is_not_retried(server):
    # Without the server's task_id a retry could run the tool twice: the client reports it instead.
    key = f"cut-{uuid.uuid4()}"

    async def main():
        with TCPProxy(server.port) as proxy:
            async with ORSClient(proxy.url, env_name="faulty", ping_interval_s=None) as c:
                async with c.session(split="test", index=0) as s:
                    proxy.cut_next(b"POST /faulty/call", mode="before_request")
                    with pytest.raises(TransportError, match="not retried") as ei:
                        await s.call("count", {"key": key})
                    assert ei.value.tool == "count"
                    # The session is fine: the next call goes through.
                    assert (await s.call("count", {"key": key})).text == "1"
        assert await read_count(server.url, key) == 1

    run(main)


def test_server_closing_idle_connections_is_survived_without_rerunning(server):
    # Servers close idle keep-alive connections; the client sees the close and reconnects before
    # sending, so the call is neither lost nor run twice.
    key = f"idle-close-{uuid.uuid4()}"

    async def main():
        with TCPProxy(server.port) as proxy:
            async with ORSClient(proxy.url, env_name="faulty", ping_interval_s=None) as c:
                async with c.session(split="test", index=0) as s:
                    assert (await s.call("echo", {"text": "warm"})).text == "warm"
                    conn = s._http.conn
                    opened = proxy.connections
                    proxy.drop_all()
                    with anyio.fail_after(5):
                        while not conn.eof:  # the close reaches the client's event loop
                            await anyio.sleep(0.005)
                    assert (await s.call("count", {"key": key})).text == "1"
                    assert s._http.conn is not conn and proxy.connections == opened + 1
                    assert s.timings.retries == 0
        assert await read_count(server.url, key) == 1

    run(main)


def test_stalled_stream_is_detected(server, monkeypatch):
    # The server sends `: ping` every 10 s on a call stream; silence longer than the stream read timeout
    # means a stalled connection. Shortened here so a 2 s tool looks stalled.
    import ormix.ors.session as session_mod

    monkeypatch.setattr(session_mod, "_STREAM_READ_TIMEOUT_S", 0.3)

    async def main():
        async with ORSClient(server.url, env_name="faulty", ping_interval_s=None, retries=0) as c:
            async with c.session(split="test", index=0) as s:
                t = time.perf_counter()
                with pytest.raises(TransportError, match="ReadTimeout") as ei:
                    await s.call("slow", {"seconds": 2.0})
                assert 0.25 < time.perf_counter() - t < 1.5
                assert isinstance(ei.value.__cause__, httpx.ReadTimeout)
                assert (await s.call("echo", {"text": "ok"})).text == "ok"  # a fresh connection

    run(main)


def test_many_concurrent_sessions(server):
    async def main():
        async with ORSClient(server.url, env_name="faulty", ping_interval_s=None) as c:
            results: dict[int, float] = {}

            async def episode(i: int) -> None:
                async with c.session(task_spec={"answer": str(i)}) as s:
                    await s.call("echo", {"text": str(i)})
                    results[i] = (await s.call("submit", {"answer": str(i)})).reward

            async with anyio.create_task_group() as tg:
                for i in range(32):
                    tg.start_soon(episode, i)
            assert results == {i: 1.0 for i in range(32)}

    run(main)
