"""ormix.ors against real ORS servers on loopback: every endpoint, sessions, connections, keepalive task
groups, big outputs, typed errors, the sync bridge (threads and fork), and property tests of the SSE parser
and the secrets encoding."""

from __future__ import annotations

import base64
import json
import multiprocessing
import socket
import subprocess
import sys
import threading
import time

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openreward.api.sandboxes.secrets import WELL_KNOWN_SECRETS, build_secrets_header

from ormix.ors import (
    BadTargetError,
    Endpoint,
    ORSClient,
    ORSError,
    ServerError,
    SessionOpenError,
    Split,
    ToolFailed,
    ToolRejected,
    ToolResult,
    ToolSpec,
    TransportError,
    encode_secrets,
    portal,
    run_sync,
    text_of,
)
from ormix.ors._client import DEFAULT_MAX_KEPT_CHARS
from ormix.ors._http import HTTPClient
from ormix.ors._sse import CallStream, SSEParser
from ormix.server import serve_in_process, serve_in_thread
from ormix.workbench.envs.echo import Echo
from ormix.workbench.envs.faulty import big_text
from support.hostile_server import encode_event
from support.tcp_proxy import TCPProxy


@pytest.fixture(scope="module")
def multi_server():
    """`echo` (the default env) and `faulty` in one server, in a child process.

    A child process rather than a second thread server: sse-starlette 2.3.6 keeps one module-global exit
    event bound to the first event loop that waits on it, so SSE streams of a second in-process server
    (another loop) fail. The session-wide `echo_server` is the one thread server of this process.
    """
    with serve_in_process(["local:echo", "local:faulty"]) as srv:
        yield srv


@pytest.fixture(scope="module")
def faulty_server(multi_server):
    return multi_server


def run(fn, *args):
    return anyio.run(fn, *args)


# ----------------------------------------------------------------------------- stateless endpoints


def test_every_stateless_endpoint_on_echo(echo_server):
    async def main():
        async with ORSClient(echo_server.url, env_name="echo") as c:
            assert await c.health() == {"status": "ok"}
            assert "version" in await c.version()
            assert await c.list_environments() == ["echo"]
            assert await c.splits() == [Split(name="train", type="train"), Split(name="test", type="test")]
            assert await c.num_tasks("train") == 16
            assert (await c.task("train", 2))["word"] == "stone"
            every = await c.tasks("train")
            assert [t["index"] for t in every] == list(range(16))
            assert await c.task_range("train", 3, 6) == every[3:6]
            assert await c.task_range("train") == every
            tools = await c.tools()
            assert [t.name for t in tools] == ["echo", "submit"]
            assert tools[0].input_schema["required"] == ["text"]
            got = await c.get_tasks("train", [9, 0, 5, 5, 15], concurrency=2)
            assert got == [every[9], every[0], every[5], every[5], every[15]]

    run(main)


def test_a_session_no_caller_holds_is_still_deleted_when_the_client_closes(echo_server):
    """A session whose caller never received it (Ctrl-C cancels the call waiting for an open just as the open
    returns) or dropped it unclosed: `aclose()` deletes it. Held weakly, it was collected and left on the
    server (a platform session leaked at Ctrl-C)."""
    import gc

    async def open_drop_close() -> str:
        client = ORSClient(echo_server.url, env_name="echo", ping_interval_s=None)  # no ping task holds it
        session = await client.open_session(split="train", index=0)
        sid = session.id
        del session
        gc.collect()
        assert sid in echo_server.active_sessions()
        await client.aclose()
        return sid

    assert anyio.run(open_drop_close) not in echo_server.active_sessions()


def test_env_name_discovered_when_omitted(echo_server):
    assert ORSClient(echo_server.url).endpoint.env_name == "echo"  # a blocking discovery

    async def main():
        async with ORSClient(echo_server.url) as c:
            assert await c.num_tasks("test") == 4
            assert c.endpoint.env_name == "echo"

    run(main)


def test_env_name_in_path_selects_the_environment(multi_server):
    # Both envs on one server: the path names the env, so `faulty` answers although `echo` is the default.
    async def main():
        async with ORSClient(multi_server.url, env_name="faulty") as c:
            assert await c.num_tasks("train") == 36
            async with c.session(split="test", index=0) as s:
                assert "Faulty task" in await s.prompt_text()
                assert (await s.call("count", {"key": "multi-env"})).text == "1"
        async with ORSClient(multi_server.url, env_name="echo") as c:
            assert await c.num_tasks("train") == 16

    run(main)


def test_one_round_trip_per_call(echo_server):
    # Naming the env in the path avoids the server's 308 to the default env (two round trips).
    async def main():
        with TCPProxy(echo_server.port) as proxy:
            async with ORSClient(proxy.url, env_name="echo", ping_interval_s=None) as c:
                await c.num_tasks("train")
                async with c.session(split="train", index=1) as s:
                    await s.call("echo", {"text": "x"})
                    await s.call("echo", {"text": "y"})
            return proxy.requests

    assert run(main) == [
        "POST /echo/num_tasks",
        "POST /create",
        "POST /echo/call",
        "POST /echo/call",
        "POST /delete",
    ]


# ----------------------------------------------------------------------------- connections


def test_sequential_sessions_share_one_keep_alive_connection(echo_server):
    async def main():
        with TCPProxy(echo_server.port) as proxy:
            async with ORSClient(proxy.url, env_name="echo", ping_interval_s=None) as c:
                for i in range(2):
                    async with c.session(split="train", index=i) as s:
                        for _ in range(3):
                            r = await s.call("echo", {"text": "apple"})
                            assert r.text == "apple"
                assert await c.num_tasks("train") == 16
            return proxy.connections, len(proxy.requests)

    assert run(main) == (1, 2 * (1 + 3 + 1) + 1)  # one connection carried every request


def test_pings_during_a_long_call_use_another_connection(faulty_server):
    # A connection carries one request at a time: keepalive pings take another pooled connection.
    async def main():
        with TCPProxy(faulty_server.port) as proxy:
            async with ORSClient(proxy.url, env_name="faulty", ping_interval_s=0.1) as c:
                async with c.session(split="test", index=0) as s:
                    r = await s.call("slow", {"seconds": 0.8})
                    assert r.metadata == {"slept_s": 0.8}
                    assert s.timings.pings >= 3 and s.timings.ping_failures == 0
            # A ping in flight when the session closes reaches the server but is cancelled before its
            # answer is counted: the server may have seen one more than the session counts, never fewer.
            assert s.timings.pings <= proxy.requests.count("POST /ping") <= s.timings.pings + 1
            return proxy.connections

    assert run(main) == 2


def test_keepalive_stops_at_close_and_with_the_client(echo_server):
    async def main():
        async with ORSClient(echo_server.url, env_name="echo", ping_interval_s=0.05) as c:
            s = await c.open_session(split="train", index=0)
            assert s.pinging
            with anyio.fail_after(5):
                while s.timings.pings < 2:
                    await anyio.sleep(0.01)
            await s.close()
            with anyio.fail_after(5):
                while s.pinging:
                    await anyio.sleep(0.01)
            pings = s.timings.pings
            await anyio.sleep(0.2)  # four ping periods: a loop still running would ping
            assert s.timings.pings == pings
            s2 = await c.open_session(split="train", index=1)
            assert s2.pinging
        assert s2.closed and not s2.pinging  # leaving the client closed its session and its ping loop

    run(main)


def test_keepalive_of_a_bare_client_on_another_loop_is_hosted_by_the_portal(echo_server):
    # No `async with`, not on the portal: the portal hosts the ping loop (an HTTP client of its own there).
    async def main():
        c = ORSClient(echo_server.url, env_name="echo", ping_interval_s=0.05)
        s = await c.open_session(split="train", index=0)
        assert s.pinging
        with anyio.fail_after(5):
            while s.timings.pings < 2:
                await anyio.sleep(0.01)
        await c.aclose()
        assert s.closed and not s.pinging

    run(main)


def test_keepalive_through_run_sync_uses_the_service_task_group(echo_server):
    async def make():
        return ORSClient(echo_server.url, env_name="echo", ping_interval_s=0.05)

    c = run_sync(make)
    s = run_sync(c.open_session, split="train", index=0)
    try:
        assert s.pinging
        for _ in range(500):  # up to 5 s, polling from this plain thread
            if s.timings.pings >= 2:
                break
            time.sleep(0.01)
        assert s.timings.pings >= 2 and s.timings.ping_failures == 0
        assert run_sync(s.call, "echo", {"text": "apple"}).reward == 1.0
    finally:
        run_sync(c.aclose)
    assert s.closed


def test_megabytes_in_and_out(echo_server):
    # Big enough to fill the socket buffers: exercises write back-pressure and a long chunked answer.
    text = "".join(f"{i:07d} é漢\n" for i in range(300_000))  # ~3.6 MB of UTF-8

    async def main():
        async with ORSClient(echo_server.url, env_name="echo") as c, c.session(split="train", index=0) as s:
            assert (await s.call("echo", {"text": text})).text == text
            assert (await s.call("echo", {"text": "apple"})).reward == 1.0  # the connection is still in step

    run(main)


# ----------------------------------------------------------------------------- sessions


def test_echo_episode_and_close(echo_server):
    async def main():
        async with ORSClient(echo_server.url, env_name="echo") as c:
            s = await c.open_session(split="train", index=0)
            assert s.env_name == "echo" and not s.closed
            assert s.timings.open_ms is not None and s.timings.open_ms > 0
            assert "'apple'" in await s.prompt_text()
            assert isinstance((await s.prompt())[0], dict)
            assert [t.name for t in await s.tools()] == ["echo", "submit"]
            r = await s.call("echo", {"text": "apple"})
            assert isinstance(r, ToolResult) and r.text == "apple" and r.reward == 1.0 and not r.finished
            assert (await s.call("echo", {"text": "pear"})).reward == 0.0
            await s.ping()
            done = await s.call("submit", {"text": "apple"})
            assert done.finished and done.reward == 1.0
            assert s.timings.calls == 3
            await s.close()
            await s.close()  # idempotent
            assert s.closed
            with pytest.raises(ORSError, match="closed"):
                await s.call("echo", {"text": "apple"})
            # The server forgot it.
            async with HTTPClient() as h:
                r = await h.request("POST", f"{echo_server.url}/ping", headers={"X-Session-ID": s.id})
                assert r.status_code == 404

    run(main)


def test_session_context_manager_always_closes(echo_server):
    async def main():
        async with ORSClient(echo_server.url, env_name="echo") as c:
            with pytest.raises(RuntimeError, match="user code failed"):
                async with c.session(split="train", index=3) as s:
                    await s.call("echo", {"text": "x"})
                    raise RuntimeError("user code failed")
            assert s.closed
            async with HTTPClient() as h:
                r = await h.request("POST", f"{echo_server.url}/ping", headers={"X-Session-ID": s.id})
                assert r.status_code == 404

    run(main)


def test_aclose_closes_open_sessions(echo_server):
    async def main():
        c = ORSClient(echo_server.url, env_name="echo")
        sessions = [await c.open_session(split="train", index=i) for i in range(3)]
        await c.aclose()
        assert all(s.closed for s in sessions)
        async with HTTPClient() as h:
            for s in sessions:
                r = await h.request("POST", f"{echo_server.url}/ping", headers={"X-Session-ID": s.id})
                assert r.status_code == 404
        with pytest.raises(ORSError, match="closed"):
            await c.health()

    run(main)


class SlowOpen(Echo):
    """Echo whose constructor takes the task spec's `open_s`: a `/create` stays on the wire that long."""

    def __init__(self, task_spec: dict, secrets: dict[str, str] | None = None) -> None:
        time.sleep(float(task_spec.get("open_s", 0.0)))  # the server runs constructors off its loop
        super().__init__(task_spec, secrets)


def test_opens_cut_at_any_point_leave_no_session_on_the_server():
    """An open cut (Ctrl-C, a caller's scope, its deadline, the client closed) after its `/create` left
    and before the answer: the server makes that session anyway, and deletes only sessions it has made, so
    a `/delete` that overtook the `/create` deleted nothing. Cut here while the server is inside `/create`
    (the constructor sleeps), and at points before and after it: no session is left on the server."""
    srv = serve_in_thread([SlowOpen])  # its own server: every session on it is this test's

    def spec(i: int, open_s: float) -> dict:
        return {"word": f"w{i}", "open_s": open_s}

    async def main():
        async with ORSClient(srv.url, env_name="slowopen", ping_interval_s=None) as c:
            opened = []

            async def open_one(i: int, open_s: float) -> None:
                opened.append(await c.open_session(task_spec=spec(i, open_s)))

            for cut_s in (0.0, 0.02, 0.1, 0.2, 0.35, 0.5):  # before, during, after the 0.3 s constructors
                with anyio.move_on_after(cut_s):  # what Ctrl-C does to the task running the opens
                    async with anyio.create_task_group() as tg:
                        for i in range(6):
                            tg.start_soon(open_one, i, 0.3 if i % 2 else 0.0)
                # The cut opens deleted their sessions before they returned.
                assert set(srv.active_sessions()) == {s.id for s in opened}, cut_s
                for s in opened:
                    await s.close()
                opened.clear()
            assert srv.active_sessions() == []

            t = time.perf_counter()
            with pytest.raises(SessionOpenError, match="deadline"):
                await c.open_session(task_spec=spec(0, 0.3), timeout_s=0.1)
            assert time.perf_counter() - t < 2.0 and srv.active_sessions() == []

        c = ORSClient(srv.url, env_name="slowopen", ping_interval_s=None)
        failed: list[BaseException] = []

        async def open_until_closed() -> None:
            try:
                await c.open_session(task_spec=spec(1, 0.3))
            except ORSError as e:
                failed.append(e)

        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(open_until_closed)
            await anyio.sleep(0.1)
            await c.aclose()  # what the exit hook does, the opens' `/create`s on the wire
            assert srv.active_sessions() == []
        assert len(failed) == 4 and all("closed while the session opened" in str(e) for e in failed)

    try:
        run(main)
    finally:
        srv.close()


def test_task_spec_session_and_client_chosen_id(faulty_server):
    async def main():
        async with ORSClient(faulty_server.url, env_name="faulty") as c:
            async with c.session(task_spec={"answer": "xyz"}, session_id="my-own-id-1") as s:
                assert s.id == "my-own-id-1"
                r = await s.call("submit", {"answer": "xyz"})
                assert r.reward == 1.0 and r.finished

    run(main)


@pytest.mark.parametrize("n", [0, 4095, 4096, 4097, 150_000])
def test_big_output_arrives_whole(faulty_server, n):
    # Over 100 KB the server sends many 4096-char `chunk` events; the client joins them exactly.
    async def main():
        async with (
            ORSClient(faulty_server.url, env_name="faulty") as c,
            c.session(split="test", index=0) as s,
        ):
            r = await s.call("big", {"n": n})
            assert r.metadata == {"n": n}
            assert r.text == big_text(n)

    run(main)


def test_secrets_reach_the_environment(faulty_server):
    secrets = {"OPENAI_API_KEY": "sk-test-123", "custom_token": "tok-987"}

    async def main():
        async with ORSClient(faulty_server.url, env_name="faulty") as c:
            async with c.session(split="test", index=0, secrets=secrets) as s:
                for k, v in secrets.items():
                    r = await s.call("check_secret", {"key": k, "value": v})
                    assert r.text == "yes"
                assert sorted(r.metadata["keys"]) == sorted(secrets)
                assert "sk-test-123" not in repr(s)
            # A failing open never echoes a secret value.
            with pytest.raises(SessionOpenError) as ei:
                await c.open_session(task_spec={"fail_open": True}, secrets=secrets)
            assert "sk-test-123" not in str(ei.value) and "tok-987" not in str(ei.value)

    run(main)


# ----------------------------------------------------------------------------- typed errors


def test_tool_rejected_reasons_and_session_stays_usable(echo_server):
    async def main():
        async with ORSClient(echo_server.url, env_name="echo") as c, c.session(split="train", index=0) as s:
            with pytest.raises(ToolRejected) as ei:
                await s.call("echo", {"wrong": 1})
            assert ei.value.reason == "input_validation" and ei.value.tool == "echo"
            assert ei.value.session_id == s.id
            with pytest.raises(ToolRejected) as ei:
                await s.call("no_such_tool", {})
            assert ei.value.reason == "not_found"
            assert (await s.call("echo", {"text": "apple"})).reward == 1.0  # still usable
            await s.call("submit", {"text": "apple"})
            with pytest.raises(ToolRejected) as ei:
                await s.call("echo", {"text": "apple"})
            assert ei.value.reason == "episode_finished"

    run(main)


def test_tool_failed_when_the_tool_raises(faulty_server):
    async def main():
        async with ORSClient(faulty_server.url, env_name="faulty") as c:
            async with c.session(split="test", index=0) as s:
                with pytest.raises(ToolFailed) as ei:
                    await s.call("boom", {})
                assert "faulty: boom" in ei.value.detail and ei.value.tool == "boom"
            # Train task 3 is configured with raise_in="submit".
            async with c.session(split="train", index=3) as s:
                assert (await s.call("echo", {"text": "a"})).text == "a"
                with pytest.raises(ToolFailed, match="configured to raise"):
                    await s.call("submit", {"answer": "43"})

    run(main)


def test_session_open_errors(faulty_server):
    async def main():
        async with ORSClient(faulty_server.url, env_name="faulty") as c:
            with pytest.raises(SessionOpenError) as ei:
                await c.open_session(split="train", index=2)  # fail_open
            assert ei.value.status_code == 500 and "configured to fail at open" in ei.value.detail
            with pytest.raises(SessionOpenError) as ei:
                await c.open_session(split="train", index=999)
            assert ei.value.status_code == 400 and "Invalid index" in ei.value.detail
            with pytest.raises(SessionOpenError):
                await c.open_session(split="nope", index=0)
            # setup() fails in the background: the open succeeds, prompt and call report it.
            s = await c.open_session(split="train", index=9)
            with pytest.raises(SessionOpenError, match="configured to fail in setup"):
                await s.prompt()
            with pytest.raises(SessionOpenError, match="configured to fail in setup"):
                await s.call("echo", {"text": "a"})
            await s.close()
            with pytest.raises(ValueError):
                await c.open_session(split="train")

    run(main)


def test_server_error_for_bad_split(echo_server):
    async def main():
        async with ORSClient(echo_server.url, env_name="echo") as c:
            with pytest.raises(ServerError) as ei:
                await c.num_tasks("nope")
            assert ei.value.status_code == 400 and "Invalid split" in ei.value.detail

    run(main)


@pytest.mark.parametrize(
    "target", ["local:echo", "nonsense", "", "ftp://x/y", "Eigent/SETA", "mod.ule:Class"]
)
def test_the_client_takes_a_url_or_an_endpoint(target):
    # The target grammar is `ormix._targets`'; the protocol layer takes the parts (a catalog: an Endpoint).
    with pytest.raises(BadTargetError) as ei:
        ORSClient(target)
    assert isinstance(ei.value, ValueError)
    assert "owner/name" in str(ei.value) and "http" in str(ei.value)


def test_transport_error_on_closed_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()

    async def main():
        async with ORSClient(f"http://127.0.0.1:{port}", env_name="echo", retries=1) as c:
            with pytest.raises(TransportError) as ei:
                await c.health()
            assert "Check the server is running" in str(ei.value)
            with pytest.raises(TransportError):
                await c.open_session(split="train", index=0)

    run(main)
    with pytest.raises(TransportError):
        ORSClient(f"http://127.0.0.1:{port}", retries=1).endpoint  # noqa: B018 - a blocking discovery


# ----------------------------------------------------------------------------- endpoint


def test_catalog_endpoint_hosts_and_headers(monkeypatch):
    monkeypatch.setenv("OPENREWARD_API_URL", "https://api.example.test")
    monkeypatch.setenv("OPENREWARD_SESSION_URL", "https://sessions.example.test/")
    monkeypatch.setenv("OPENREWARD_API_KEY", "key-from-env")
    ep = Endpoint.for_catalog("Eigent/SETA")
    assert (ep.api_url, ep.session_url, ep.deployment, ep.env_name) == (
        "https://api.example.test",
        "https://sessions.example.test",
        "Eigent/SETA",
        None,
    )
    assert ep.is_platform and ep.path("/call") == "/call"
    h = ep.headers()
    assert h["X-Deployment"] == "Eigent/SETA" and h["X-API-Key"] == "key-from-env"
    assert "key-from-env" not in repr(ep)
    assert Endpoint.for_catalog("Eigent/SETA", api_key="explicit").api_key == "explicit"
    monkeypatch.delenv("OPENREWARD_API_URL")
    monkeypatch.delenv("OPENREWARD_SESSION_URL")
    ep = Endpoint.for_catalog("kanishk/EndlessTerminals", "endlessterminals")
    assert ep.api_url == "https://api.openreward.ai" and ep.session_url == "https://sessions.openreward.ai"
    assert ep.path("/call") == "/endlessterminals/call"


def test_url_endpoint_has_no_platform_headers():
    ep = Endpoint.for_url("http://127.0.0.1:1/", "Echo")
    assert ep.env_name == "echo" and not ep.is_platform
    assert "X-Deployment" not in ep.headers() and "X-API-Key" not in ep.headers()
    assert Endpoint("a", "a", "e", None, api_key="zzz") == Endpoint("a", "a", "e", None)


# ----------------------------------------------------------------------------- models


def test_models():
    r = ToolResult(
        blocks=[{"type": "text", "text": "a"}, {"type": "image", "data": "x"}, {"type": "text", "text": "b"}],
        metadata=None,
        reward=None,
        finished=False,
    )
    assert r.text == "a\nb" == text_of(r.blocks)
    wire = {"name": "t", "description": None, "input_schema": None}
    assert ToolSpec.model_validate(wire) == ToolSpec(name="t")


# ----------------------------------------------------------------------------- bridge


async def _episode(url: str, index: int) -> tuple[str, float]:
    async with ORSClient(url, env_name="echo") as c, c.session(split="train", index=index) as s:
        word = (await c.task("train", index))["word"]
        r = await s.call("echo", {"text": word})
        return r.text, r.reward


def test_bridge_from_many_threads(echo_server):
    results: dict[int, tuple[str, float]] = {}
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            results[i] = run_sync(_episode, echo_server.url, i)
        except BaseException as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert sorted(results) == list(range(8)) and all(r == 1.0 for _, r in results.values())
    assert portal() is portal()
    assert run_sync(anyio.sleep, 0) is None


def test_bridge_propagates_errors_and_accepts_awaitable_factories():
    async def boom() -> None:
        raise ToolRejected("no", reason="not_found", tool="t")

    with pytest.raises(ToolRejected) as ei:
        run_sync(boom)
    assert ei.value.reason == "not_found"
    assert run_sync(lambda: anyio.sleep(0)) is None  # a plain function returning a coroutine
    with pytest.raises(RuntimeError, match="portal's own event loop"):
        run_sync(run_sync, anyio.sleep, 0)


def _child(url: str, q) -> None:
    try:
        q.put(("ok", run_sync(_episode, url, 5)))
    except BaseException as e:  # reported to the parent
        q.put(("error", repr(e)))


def test_bridge_after_fork(echo_server):
    parent_portal = portal()
    assert run_sync(_episode, echo_server.url, 1)[1] == 1.0  # the parent's portal is live before the fork
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(echo_server.url, q))
    p.start()
    status, value = q.get(timeout=30)
    p.join(10)
    assert status == "ok", value
    assert value == ("maple", 1.0)
    assert portal() is parent_portal


# ----------------------------------------------------------------------------- pure logic (hypothesis)

_event_names = st.sampled_from(["task_id", "chunk", "end", "error", "message"])
_data = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r"), max_size=60)


@settings(max_examples=200, deadline=None)
@given(
    events=st.lists(st.tuples(_event_names, _data), max_size=8),
    sep=st.sampled_from(["\r\n", "\n", "\r"]),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=10),
    comments=st.booleans(),
)
def test_sse_parser_roundtrip_any_split(events, sep, cuts, comments):
    wire = ""
    for name, data in events:
        if comments:
            wire += f": ping{sep}{sep}"
        wire += encode_event(name, data, sep=sep)
    # Normalise the expectation: a lone "\r" inside data is a line break on the wire too.
    expected = [(n, d) for n, d in events]
    parser = SSEParser()
    got = []
    last = 0
    for c in sorted(set(min(c, len(wire)) for c in cuts)):
        got += parser.feed(wire[last:c])
        last = c
    got += parser.feed(wire[last:])
    assert got == expected


@settings(max_examples=100, deadline=None)
@given(payload=st.text(max_size=20_000), chunk=st.sampled_from([1, 7, 4096]))
def test_call_stream_reassembles_chunks(payload, chunk):
    # As the server does: `chunk` events of `chunk` chars, the last piece as `end`.
    text = json.dumps({"ok": True, "output": {"blocks": [{"type": "text", "text": payload}]}})
    wire = encode_event("task_id", "abc")
    for i in range(0, len(text), chunk):
        wire += encode_event("end" if i + chunk >= len(text) else "chunk", text[i : i + chunk])
    s = CallStream()
    for name, data in SSEParser().feed(wire):
        s.on_event(name, data)
    assert s.task_id == "abc" and s.done and json.loads(s.result)["output"]["blocks"][0]["text"] == payload


def _server_decode(raw: str) -> dict[str, str]:
    # openreward.environments.server._parse_secrets_header, on the header value.
    return {k: v["value"] for k, v in json.loads(base64.b64decode(raw)).items()}


_secret_values = st.text(max_size=40)


@settings(max_examples=200, deadline=None)
@given(secrets=st.dictionaries(st.text(min_size=1, max_size=20), _secret_values, max_size=6))
def test_secrets_roundtrip_through_server_decoder(secrets):
    assert _server_decode(encode_secrets(secrets)) == secrets


@settings(max_examples=100, deadline=None)
@given(
    known=st.dictionaries(st.sampled_from(sorted(WELL_KNOWN_SECRETS)), _secret_values, max_size=5),
    explicit=st.dictionaries(
        st.text(min_size=1, max_size=10),
        st.tuples(_secret_values, st.lists(st.text(max_size=10), max_size=3)),
        max_size=3,
    ),
    unknown=st.dictionaries(st.text(min_size=1, max_size=10).map("x-{}".format), _secret_values, max_size=3),
)
def test_secrets_encoding_is_the_sdks_and_sends_unknown_keys_without_domains(known, explicit, unknown):
    secrets = {**explicit, **known}
    assert encode_secrets(secrets) == build_secrets_header(secrets)
    # Where the SDK raises (a plain string under a key it does not know), ormix allows no domain.
    domains = {
        k: v["allowed_domains"] for k, v in json.loads(base64.b64decode(encode_secrets(unknown))).items()
    }
    assert domains == {k: [] for k in unknown}


def test_secret_values_never_in_type_errors():
    with pytest.raises(TypeError) as ei:
        encode_secrets({"k": 12345})  # type: ignore[dict-item]
    assert "12345" not in str(ei.value) and "'k'" in str(ei.value)


def test_the_memory_bound_has_a_name_of_its_own():
    # `max_output_chars` elsewhere in ormix is what the model sees (16 384); the client's bound is another.
    c = ORSClient("http://127.0.0.1:1", env_name="echo")
    assert c.max_kept_chars == DEFAULT_MAX_KEPT_CHARS == 4_000_000
    assert ORSClient("http://127.0.0.1:1", env_name="echo", max_kept_chars=10).max_kept_chars == 10
    with pytest.raises(TypeError):
        ORSClient("http://127.0.0.1:1", env_name="echo", max_output_chars=10)  # type: ignore[call-arg]


def test_the_package_imports_nothing_of_ormix_outside_it_nor_trl_or_datasets():
    code = (
        "import sys, ormix.ors; "
        "print(sorted(m for m in sys.modules if (m.startswith('ormix.') and not m.startswith('ormix.ors')) "
        "or m.split('.')[0] in ('trl', 'datasets', 'torch', 'transformers', 'httpx')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
