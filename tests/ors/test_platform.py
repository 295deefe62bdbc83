"""The OpenReward platform path as the SDK speaks it, through the platform double
(tests/support/platform_double.py, a stand-in: a recording reverse proxy on loopback in front of a real local
ORS server).

The openreward SDK is the reference: the same episode through the SDK and through ormix sends the same
requests (paths, order, headers, bodies) except what the platform guide (docs/guides/platform.md) lists;
cold starts are waited out on every request of an open, up to the open's deadline; a 429 pauses the whole
member; every platform session created is deleted, also when its open fails or is cancelled.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import os
import subprocess
import sys
import time

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ormix import OpenRewardSpec
from ormix._connection import BackendWait, BackendWatch
from ormix.ors import Endpoint, ORSClient, ORSError, SessionOpenError, run_sync
from ormix.ors._platform import BackendGate
from ormix.server import serve_in_thread
from support.platform_double import PlatformDouble

ECHO = "Owner/Echo"
COLD = "Owner/Cold"


@pytest.fixture(scope="module")
def double():
    with serve_in_thread(["local:echo"]) as upstream:
        deployments = {ECHO: (upstream.url, "echo"), COLD: (upstream.url, "echo")}
        with PlatformDouble(deployments, required_secrets={ECHO: ["OPENAI_API_KEY"]}) as platform:
            yield platform


@pytest.fixture
def platform(double, monkeypatch):
    for name, value in double.env().items():
        monkeypatch.setenv(name, value)
    double.clear()
    double.end_sid = "same"
    yield double
    assert double.live() == set(), "a platform session was left behind"


def _client(name: str = ECHO, **kwargs) -> ORSClient:
    return ORSClient(Endpoint.for_catalog(name), **kwargs)


def _sdk_env(name: str = ECHO):
    """The SDK's environment handle (as a user gets it, in a running loop), and how to close its client."""
    from openreward import AsyncOpenReward

    client = AsyncOpenReward()
    return client.environments.get(name), client.environments.aclose


# ── conformance: the same episode through the SDK and through ormix ─────────────────────────────────────


_IGNORED_HEADERS = {"host", "content-length"}  # transport details (platform guide: compact JSON)


def _normal(rec) -> tuple:
    """A request as the conformance test compares it: ids replaced, X-Secrets decoded, the platform guide's
    differences (User-Agent) named instead of compared."""
    headers = {}
    for k, v in rec.headers.items():
        key = k.lower()
        if key in _IGNORED_HEADERS:
            continue
        if key == "user-agent":
            v = "<ormix/* or openreward/*>" if v.startswith(("ormix", "openreward")) else v
        elif key == "x-session-id":
            v = "<sid>"
        elif key == "x-secrets":
            v = json.dumps(json.loads(base64.b64decode(v)), sort_keys=True)
        headers[key] = v
    body = rec.body
    if isinstance(body, dict) and "task_id" in body:
        body = {**body, "task_id": "<task_id>"}
    return rec.method, rec.path, tuple(sorted(headers.items())), json.dumps(body, sort_keys=True)


def _episode_trace(platform, sid: str) -> tuple[list[tuple], list[tuple]]:
    """(the session's requests without pings, its pings), normalised."""
    trace = platform.trace(sid)
    return [_normal(r) for r in trace if r.path != "/ping"], [_normal(r) for r in trace if r.path == "/ping"]


def test_the_same_episode_through_the_sdk_and_through_ormix_sends_the_same_requests(platform):
    secrets = {"OPENAI_API_KEY": "sk-openai-123456"}

    async def through_sdk():
        env, close = _sdk_env()
        try:
            async with env.session(split="train", index=0, secrets=secrets) as s:
                prompt = await s.get_prompt()
                out = await s.call_tool("submit", {"text": "apple"})
                sid = s.sid
                await anyio.sleep(0.3)  # its first ping goes out right after the open
            # The API host's call the SDK makes, answered by the double.
            required = await env.list_required_secrets()
        finally:
            await close()
        return sid, prompt[0].text, out.reward, required

    sdk_sid, sdk_prompt, sdk_reward, required = run_sync(through_sdk)
    assert required == ["OPENAI_API_KEY"]

    # ormix's own path, as a user runs it: the spec's episode (reset, tool call, reward closes the session).
    spec = OpenRewardSpec(ECHO, num_tasks=1, secrets=secrets, ping_interval_s=0.2, discover_task_tools=False)
    ep = spec.environment_factory()
    prompt = ep.reset(**spec.train_dataset[0])
    ormix_sid = ep.session_id
    time.sleep(0.5)  # a keepalive ping or two
    ep.submit(text="apple")
    assert spec.reward_funcs(environments=[ep]) == [1.0] and prompt == sdk_prompt and sdk_reward == 1.0

    spec.close()

    sdk, sdk_pings = _episode_trace(platform, sdk_sid)
    ours, our_pings = _episode_trace(platform, ormix_sid)
    assert [r[:2] for r in sdk] == [
        ("POST", "/create_session"),
        ("POST", "/create"),
        ("GET", "/prompt"),
        ("POST", "/call"),
        ("POST", "/delete"),
        ("POST", "/delete_session"),
    ]
    assert ours == sdk, "ormix's requests differ from the SDK's beyond the platform guide's list"
    assert sdk_pings and our_pings and set(our_pings) == set(sdk_pings)
    # What the headers are, spelled out (the differences the issue found are gone).
    by_path = {r[1]: dict(r[2]) for r in ours}
    assert "x-secrets" in by_path["/create_session"] and "x-secrets" in by_path["/create"]
    assert by_path["/call"]["accept"] == "text/event-stream"
    assert "x-deployment" not in by_path["/delete"] and "x-deployment" not in by_path["/delete_session"]
    assert all(h["x-api-key"] == platform.api_key for h in by_path.values())


def test_stateless_calls_match_the_sdk_and_delete_their_throwaway_sessions(platform):
    async def sdk_count():
        env, close = _sdk_env()
        try:
            return await env.num_tasks("train")
        finally:
            await close()

    n = run_sync(sdk_count)
    sdk = [_normal(r) for r in platform.records]
    assert platform.live() == set()  # the SDK deleted its throwaway session (`clear()` forgets it)
    platform.clear()

    async def ours():
        async with _client() as c:
            return await c.num_tasks("train")

    assert run_sync(ours) == n
    assert [_normal(r) for r in platform.records] == sdk


def test_a_wrong_key_fails_in_one_request_with_a_clear_message_and_no_key(platform, monkeypatch):
    monkeypatch.setenv("OPENREWARD_API_KEY", "sk-wrong-key-0000")

    async def go():
        async with _client() as c:
            await c.open_session(split="train", index=0)

    with pytest.raises(Exception) as info:
        run_sync(go)
    assert "401" in str(info.value) and "OPENREWARD_API_KEY" in str(info.value)
    assert "sk-wrong-key-0000" not in str(info.value)
    assert len(platform.records) == 1


def test_the_end_events_sid_is_the_session(platform):
    platform.end_sid = "different"  # task_id carries a decoy the platform does not know

    async def go():
        async with _client() as c, c.session(split="train", index=0) as s:
            return s.id, (await s.call("echo", {"text": "hi"})).text

    sid, text = run_sync(go)
    assert text == "hi" and sid in platform.sessions and not sid.startswith("decoy")


# ── cold starts ──────────────────────────────────────────────────────────────────────────────────────────


def test_a_cold_start_on_every_request_of_an_open_is_waited_out_and_counted(platform):
    platform.cold_start(ECHO, 1.0, paths=("/create_session", "/create", "/ping"))

    async def go():
        async with _client(ping_interval_s=0.2) as c, c.session(split="train", index=0) as s:
            opened = s.timings.starting_ms
            with anyio.fail_after(10):
                while s.timings.pings < 1:  # the first ping rides out "starting" too
                    await anyio.sleep(0.05)
            return opened, s.timings.ping_failures, (await s.call("echo", {"text": "hi"})).text, c.gate

    starting_ms, ping_failures, text, gate = run_sync(go)
    assert text == "hi" and ping_failures == 0
    assert starting_ms >= 1900  # /create_session and /create each waited ~1 s (Retry-After: 1)
    assert gate.starting_waits == 3 and gate.gave_up == 0
    starting = [r.path for r in platform.records if r.note == "starting"]
    assert sorted(set(starting)) == ["/create", "/create_session", "/ping"]


def test_a_backend_that_never_starts_fails_the_open_at_its_deadline_and_leaves_no_session(platform):
    platform.cold_start(COLD, math.inf, paths=("/create",))

    async def go():
        async with _client(COLD, open_timeout_s=1.0) as c:
            await c.open_session(split="train", index=0)

    t0 = time.monotonic()
    with pytest.raises(SessionOpenError) as info:
        run_sync(go)
    took = time.monotonic() - t0
    assert 0.9 < took < 4.0
    message = str(info.value)
    assert (
        ("deadline (1 s)" in message or "within 1 s" in message) and "starting" in message and COLD in message
    )
    assert platform.counts() == (1, 1)


def test_a_waiting_member_is_named_while_it_waits(platform):
    platform.cold_start(ECHO, 1.0, paths=("/create",))
    # ECHO requires OPENAI_API_KEY (the double's fixture): ormix checks that before the first session.
    secrets = {"OPENAI_API_KEY": "sk-openai-123456"}
    spec = OpenRewardSpec(ECHO, num_tasks=1, name="seta", discover_task_tools=False, secrets=secrets)
    spec.__dict__["tool_specs"] = []
    lines: list[str] = []
    with BackendWatch(lines.append, first_s=0.3, poll_s=0.05):
        ep = spec.environment_factory()
        ep.reset(task_index=0)
    spec.close()
    assert lines and lines[0].startswith("seta: backend starting, ")
    assert ep.starting_ms >= 900
    after: list[str] = []
    BackendWatch(after.append, first_s=0.0).poll()  # nothing is waiting any more
    assert after == []


# ── nothing leaked ───────────────────────────────────────────────────────────────────────────────────────


def test_a_failed_create_deletes_its_platform_session(platform):
    async def go():
        async with _client() as c:
            await c.open_session(split="train", index=10_000)

    with pytest.raises(SessionOpenError):
        run_sync(go)
    assert platform.counts() == (1, 1)


def test_an_open_cancelled_mid_cold_start_deletes_its_platform_session(platform):
    platform.cold_start(COLD, math.inf, paths=("/create",))

    async def go():
        conn = _client(COLD)
        try:
            with anyio.move_on_after(10):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(lambda: conn.open_session(split="train", index=0))
                    while not any(r.note == "starting" for r in platform.records):
                        await anyio.sleep(0.02)
                    tg.cancel_scope.cancel()  # what Ctrl-C does to the portal's task
        finally:
            await conn.aclose()

    run_sync(go)
    assert platform.counts() == (1, 1)


def test_a_client_closed_while_a_cancelled_opens_deletion_is_on_the_wire_waits_for_it(platform):
    """Ctrl-C cancels the portal's task without waiting for it, and the exit hook closes the client at once:
    the cancelled open's deletion is still in flight then, and closing the connections under it would leave
    its platform session behind."""
    platform.cold_start(COLD, math.inf, paths=("/create",))
    platform.slow_answer(COLD, 1.0, path="/delete")

    async def go():
        conn = _client(COLD)
        opening = anyio.CancelScope()

        async def open_it() -> None:
            with opening:
                await conn.open_session(split="train", index=0)

        with anyio.move_on_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(open_it)
                while not any(r.note == "starting" for r in platform.records):
                    await anyio.sleep(0.02)
                opening.cancel()  # not waited for, as run_sync's future.cancel() is not
                while not any(r.path == "/delete" for r in platform.records):
                    await anyio.sleep(0.01)
                await conn.aclose()  # what the exit hook does, the deletion on the wire
                assert platform.live() == set()

    run_sync(go)
    assert platform.counts() == (1, 1)


def test_closing_a_client_cuts_an_open_that_waits_out_a_cold_start(platform):
    """The exit hook closes clients while their opens may still ride out a cold start (a catalog open may
    wait 10 minutes): closing cuts each at once, and it deletes its platform session before the client's
    connections close."""
    platform.cold_start(COLD, math.inf, paths=("/create",))

    async def go():
        conn = _client(COLD, open_timeout_s=60)
        failed: list[ORSError] = []

        async def open_it() -> None:
            try:
                await conn.open_session(split="train", index=0)
            except ORSError as e:
                failed.append(e)

        with anyio.fail_after(20):  # not the open's 60 s
            async with anyio.create_task_group() as tg:
                tg.start_soon(open_it)
                while not any(r.note == "starting" for r in platform.records):
                    await anyio.sleep(0.02)
                await conn.aclose()
        assert len(failed) == 1 and "closed while the session opened" in str(failed[0])

    run_sync(go)
    assert platform.counts() == (1, 1) and platform.live() == set()


_EXIT_MID_OPEN = """
import atexit, sys, threading
from ormix import OpenRewardSpec
from ormix.ors import ORSError, run_sync

spec = OpenRewardSpec(
    "Owner/Cold",
    num_tasks=1,
    open_retries=3,
    open_timeout_s=30,
    discover_task_tools=False,
)
episode = spec.environment_factory()
threading.Thread(target=lambda: episode.reset(task_index=0)).start()  # a rollout's thread, not a daemon


@atexit.register  # runs after the exit hook (threading's exit callbacks run first)
def connect_after_the_hook():
    try:
        run_sync(spec.connection.client)
    except ORSError as e:
        print("refused:", e)


sys.stdin.readline()  # the test's word: the open is waiting out the cold start
sys.exit(0)  # the exit hook closes the connection under the open
"""


def test_a_process_exiting_mid_open_leaves_no_platform_session_even_when_opens_are_retried(platform):
    """The exit hook cuts the opens in flight and closes each connection for good. A rollout thread whose
    open it cut (with `open_retries` left) must not reconnect through a fresh client: that client's platform
    session would be made while the process tears its connections and its portal down, never deleted."""
    platform.cold_start(COLD, math.inf, paths=("/create",))
    env = {**os.environ, **platform.env(), "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen(
        [sys.executable, "-c", _EXIT_MID_OPEN],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not any(r.note == "starting" for r in platform.records):
            assert child.poll() is None and time.monotonic() < deadline, "the open never waited"
            time.sleep(0.02)
        out, err = child.communicate("exit\n", timeout=60)
    finally:
        child.kill()
    assert child.returncode == 0, err[-3000:]
    assert "refused: Owner/Cold: the process is exiting" in out, out + err[-3000:]
    trace = [(r.path, r.status, r.sid) for r in platform.records]
    waited = {r.sid for r in platform.records if r.path == "/create"}
    assert len(waited) == 1, trace  # the open the hook cut, and no other after it
    assert ("/delete_session", 200, waited.pop()) in trace, trace
    created, deleted = platform.counts()
    assert created == deleted and platform.live() == set(), trace


@pytest.mark.parametrize("how", ["cancelled", "client closed"])
def test_an_open_cut_while_its_create_session_is_unanswered_deletes_the_session_made(platform, how):
    """The platform makes the session before it answers `/create_session`: an open cut in that window (a
    Ctrl-C, or the client closed at exit) must still learn the id and delete it."""
    platform.slow_answer(ECHO, 0.5)

    async def go():
        conn = _client()
        try:
            with anyio.move_on_after(10):
                async with anyio.create_task_group() as tg:

                    async def open_it() -> None:
                        with pytest.raises(ORSError) if how == "client closed" else _nothing():
                            await conn.open_session(split="train", index=0)

                    tg.start_soon(open_it)
                    while not platform.counts()[0]:
                        await anyio.sleep(0.01)
                    if how == "cancelled":
                        tg.cancel_scope.cancel()  # what Ctrl-C does to the portal's task
                    else:
                        await conn.aclose()  # what the exit hook does
        finally:
            await conn.aclose()

    run_sync(go)
    assert platform.counts() == (1, 1)


@contextlib.contextmanager
def _nothing():
    yield


# ── rate limits and dropped streams ──────────────────────────────────────────────────────────────────────


def test_a_429_pauses_every_request_of_the_member_for_its_retry_after(platform):
    platform.rate_limit(ECHO, 1, paths=("/create",))

    async def go():
        async with _client() as c:
            results = []

            async def one():
                s = await c.open_session(split="train", index=0)
                results.append(s)

            async with anyio.create_task_group() as tg:
                tg.start_soon(one)
                while not any(r.note == "429" for r in platform.records):
                    await anyio.sleep(0.01)
                await anyio.sleep(0.2)  # the first open has seen its 429; a second one starts now
                tg.start_soon(one)
            for s in results:
                await s.close()
            return len(results)

    assert run_sync(go) == 2
    limited = next(r for r in platform.records if r.note == "429")
    later = [r for r in platform.records if r.t > limited.t]
    # Nothing of this member went out during the Retry-After (1 s), the second open's first request included.
    assert later and min(r.t for r in later) - limited.t >= 0.9


@pytest.mark.parametrize("transport", ["ormix", "sdk"])
def test_a_dropped_call_stream_is_resumed_with_its_task_id(platform, transport):
    platform.drop_stream(ECHO)

    async def go():
        if transport == "sdk":
            env, close = _sdk_env()
            try:
                async with env.session(split="train", index=0) as s:
                    return (await s.call_tool("echo", {"text": "hi"})).blocks[0].text
            finally:
                await close()
        async with _client() as c, c.session(split="train", index=0) as s:
            return (await s.call("echo", {"text": "hi"})).text

    assert run_sync(go) == "hi"
    calls = [r for r in platform.records if r.path == "/call"]
    assert [r.note for r in calls] == ["dropped", ""] and "task_id" in calls[1].body


# ── pure parts ───────────────────────────────────────────────────────────────────────────────────────────


@given(st.lists(st.tuples(st.floats(0, 100), st.floats(0, 30)), max_size=8))
def test_the_gate_pauses_until_the_latest_retry_after_capped(events):
    now = [0.0]
    gate = BackendGate(clock=lambda: now[0])
    until = 0.0
    for t, wait in sorted(events):
        now[0] = t
        gate.pause(wait)
        until = max(until, t + min(wait, 10.0))
        assert gate.delay() == pytest.approx(max(0.0, until - t))
    assert gate.rate_limited == len(events)


def test_a_wait_line_names_the_members_and_what_holds_them():
    assert (
        BackendWait(("seta", "seta_eval"), "Eigent/SETA", 40.4).line
        == "seta, seta_eval: backend starting, 40 s"
    )
    assert BackendWait((), "Owner/X", None, 2.2).line == "Owner/X: rate limited (429), resuming in 2 s"
