"""Keepalive pings at scale: a session busy with calls sends none (each call tells the server it is alive);
an idle session and one inside a call longer than the interval still ping. At 1,024 sessions a ping each
every 10 s would be ~40% more requests than their calls (benchmarks/scale_sessions.py)."""

from __future__ import annotations

import time

import anyio
import pytest

from ormix.ors import ORSClient
from ormix.server import serve_in_thread

INTERVAL = 0.3


@pytest.fixture(scope="module")
def latency_url():
    with serve_in_thread(["local:latency"]) as srv:
        yield srv.url


def _spec(tool_s: float) -> dict:
    return {"index": 0, "word": "w0", "open_s": 0.0, "tool_s": tool_s}


def test_a_session_busy_with_calls_sends_no_pings_and_an_idle_one_does(latency_url):
    async def main() -> tuple[int, int, int, int]:
        async with ORSClient(latency_url, env_name="latency", ping_interval_s=INTERVAL) as client:
            busy = await client.open_session(task_spec=_spec(0.05))
            idle = await client.open_session(task_spec=_spec(0.05))
            # Counted from the first call: opening `idle` on a loaded machine may take longer than INTERVAL,
            # and `busy` was rightly idle until then.
            before = busy.timings.pings
            started = time.monotonic()
            calls = slow = 0
            while time.monotonic() - started < 5 * INTERVAL:  # a call every ~0.05 s, well within INTERVAL
                began = time.monotonic()
                assert (await busy.call("work", {"text": "w0"})).reward == 1.0
                calls += 1
                # A call that itself outlasts INTERVAL (a loaded machine) is kept alive by a ping, by design.
                slow += int((time.monotonic() - began) // INTERVAL)
            return busy.timings.pings - before, idle.timings.pings, calls, slow

    busy_pings, idle_pings, calls, slow = anyio.run(main)
    assert calls >= 10
    assert busy_pings <= slow
    assert idle_pings >= 3


def test_a_call_longer_than_the_interval_is_kept_alive_by_pings(latency_url):
    async def main() -> int:
        async with ORSClient(latency_url, env_name="latency", ping_interval_s=INTERVAL) as client:
            session = await client.open_session(task_spec=_spec(4 * INTERVAL))
            assert (await session.call("work", {"text": "w0"})).reward == 1.0
            return session.timings.pings

    assert anyio.run(main) >= 2  # a ping due INTERVAL after the call began, and after each ping
