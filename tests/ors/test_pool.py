"""One member on several ORS servers: the balance rules (pure, Hypothesis) and `ServerPool` against real
loopback servers (the faults a real server process causes are in tests/test_reliability.py)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ormix import OpenRewardSpec
from ormix._errors import SpecError
from ormix.ors import DeadlineExceeded, Endpoint, ServerPool, TransportError, run_sync
from ormix.ors._balance import Rotation, pick_server
from ormix.server import serve_in_thread
from ormix.telemetry._metrics import member_values
from ormix.telemetry._records import rollout_record

loads_and_up = st.integers(1, 8).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 20), min_size=n, max_size=n),
        st.lists(st.booleans(), min_size=n, max_size=n),
        st.integers(0, n - 1),
    )
)


@given(loads_and_up)
def test_pick_server_takes_the_least_busy_server_in_rotation(case):
    loads, up, turn = case
    chosen = pick_server(loads, up, turn)
    if not any(up):
        assert chosen is None
        return
    assert chosen is not None and up[chosen]
    assert loads[chosen] == min(load for load, u in zip(loads, up, strict=True) if u)


@given(st.integers(1, 6), st.integers(1, 40))
def test_equal_servers_fill_evenly(n, sessions):
    loads, turn = [0] * n, 0
    for _ in range(sessions):
        i = pick_server(loads, [True] * n, turn)
        assert i is not None
        loads[i] += 1
        turn = (i + 1) % n
    assert max(loads) - min(loads) <= 1


@given(st.lists(st.sampled_from(["ok", "refused", "timeout"]), max_size=30))
def test_rotation_follows_its_probes(results):
    r, now = Rotation(timeouts_to_down=2), 0.0
    up, streak = True, 0  # the rule, written out: refused is out at once, two timeouts in a row too
    for result in results:
        change = r.probed(result, now=now, interval_s=1.0)
        was_up = up
        if result == "ok":
            up, streak = True, 0
        elif up and result == "refused":
            up, streak = False, 0
        elif up:
            streak += 1
            up = streak < 2
            streak = streak if up else 0
        assert r.up == up
        assert change == ("up" if up and not was_up else "down" if was_up and not up else "same")
        assert now <= r.next_probe_at <= now + r.max_retry_s
        now += 1.0


def test_a_servers_retry_delay_doubles_while_it_stays_out():
    r = Rotation()
    r.take_down(0.0)
    delays = []
    for t in range(6):
        r.probed("refused", now=float(t), interval_s=1.0)
        delays.append(r.next_probe_at - t)
    assert delays == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


@pytest.fixture(scope="module")
def two_echo(echo_server):
    with serve_in_thread(["local:echo"]) as other:
        yield echo_server, other


def test_targets_are_checked_before_any_server_is_contacted():
    with pytest.raises(SpecError, match="local target"):
        OpenRewardSpec(["http://127.0.0.1:9", "local:echo"])
    with pytest.raises(SpecError, match="appears twice"):
        OpenRewardSpec(["http://127.0.0.1:9", "http://127.0.0.1:9/"])
    spec = OpenRewardSpec(["http://127.0.0.1:9", "http://127.0.0.1:10"], env_name="echo")
    assert spec.target == "http://127.0.0.1:9" and spec.targets == [
        "http://127.0.0.1:9",
        "http://127.0.0.1:10",
    ]
    assert OpenRewardSpec(["http://127.0.0.1:9"]).targets is None  # one server is a plain target


def test_sessions_spread_least_busy_stay_on_their_server_and_are_counted_per_server(two_echo):
    a, b = two_echo
    spec = OpenRewardSpec([a.url, b.url], env_name="echo", num_tasks=4, discover_task_tools=False)
    episodes = []
    for row in spec.train_dataset:
        ep = spec.environment_factory()
        ep.reset(**row)
        episodes.append(ep)
    try:
        assert sorted(ep.server for ep in episodes) == sorted([a.url, a.url, b.url, b.url])
        for server in (a, b):  # every session is on the server its episode names, and nowhere else
            mine = {ep.session_id for ep in episodes if ep.server == server.url}
            assert mine <= set(server.active_sessions())
        for ep, row in zip(episodes, spec.train_dataset, strict=True):
            ep.echo(text=row["word"])
        assert [ep.outcome.kind for ep in episodes] == ["scored"] * 4
        stats = {s["url"]: s for s in spec.connection.server_stats()}
        assert {u: s["sessions"] for u, s in stats.items()} == {a.url: 2, b.url: 2}
        records = [
            rollout_record(ep, member="echo", training_reward=1.0, step=1, rank=0, mode="train", group=0)
            for ep in episodes
        ]
        values = member_values(records, "echo", batch_size=4)
        label = a.url.removeprefix("http://")
        assert values[f"server/{label}/share"] == [float(ep.server == a.url) for ep in episodes]
        assert values[f"server/{label}/coverage"] == [1.0, 1.0]
    finally:
        spec.close()
    assert not set(a.active_sessions()) & {ep.session_id for ep in episodes}


def test_a_server_that_refuses_leaves_the_rotation_and_opens_go_to_the_others(echo_server):
    gone = serve_in_thread(["local:echo"])
    gone.close()  # its port now refuses connections

    async def run():
        pool = ServerPool([Endpoint.for_url(u, "echo") for u in (gone.url, echo_server.url)], retries=0)
        async with pool:
            sessions = [await pool.open_session(split="train", index=i) for i in range(3)]
            assert {s.server for s in sessions} == {echo_server.url}
            assert (await sessions[0].call("echo", {"text": "hi"})).text == "hi"
            assert await pool.num_tasks("train") > 0  # stateless requests skip it too
            stats = {s["url"]: s for s in pool.stats()}
            assert not stats[gone.url]["in_rotation"] and stats[gone.url]["downs"] == 1
            for s in sessions:
                await s.close()

        lone = ServerPool([Endpoint.for_url(gone.url, "echo")], retries=0)
        async with lone:
            with pytest.raises(TransportError):
                await lone.open_session(split="train", index=0)
            with pytest.raises(TransportError, match="none of the 1 ORS servers is in rotation"):
                await lone.open_session(split="train", index=0)

    run_sync(run)


class HangingProxy:
    """A loopback TCP proxy to a real server that, once `hang()` is called, stops forwarding: connections
    open, requests are read, nothing is answered (a server wedged, or a network path that went dark)."""

    def __init__(self, upstream_url: str) -> None:
        self.upstream_port = int(upstream_url.rsplit(":", 1)[1])
        self.hung = False
        self.loop = asyncio.new_event_loop()
        sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        ready = threading.Event()

        async def serve() -> None:
            self.server = await asyncio.start_server(self._handle, sock=sock)
            ready.set()
            await self.server.serve_forever()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            try:
                self.loop.run_until_complete(serve())
            except asyncio.CancelledError:
                pass

        self.thread = threading.Thread(target=run, daemon=True, name="hanging-proxy")
        self.thread.start()
        ready.wait(10)

    def hang(self) -> None:
        self.hung = True

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                while self.hung:
                    await asyncio.sleep(3600)
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.hung:
            await asyncio.sleep(3600)
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
        for task in asyncio.all_tasks(self.loop):
            self.loop.call_soon_threadsafe(task.cancel)
        self.thread.join(5)


@pytest.fixture
def hung_and_healthy(echo_server):
    """A proxy to a server of the test's own (the sessions the hung proxy strands stay there), and a
    healthy server."""
    with serve_in_thread(["local:echo"]) as behind:
        proxy = HangingProxy(behind.url)
        try:
            yield proxy, echo_server
        finally:
            proxy.close()


def _pool(urls: list[str], **kw) -> ServerPool:
    return ServerPool(
        [Endpoint.for_url(u, "echo") for u in urls],
        probe_interval_s=0.5,
        probe_timeout_s=0.3,
        ping_interval_s=None,
        **kw,
    )


async def _until_out(pool: ServerPool, i: int) -> None:
    with anyio.fail_after(5):
        while pool.servers[i].rotation.up:
            await anyio.sleep(0.05)


def test_a_server_out_of_rotation_is_not_waited_on_at_close(hung_and_healthy):
    """Closing a pool whose server hangs: its sessions are dropped at once (the server reaps them itself),
    not each waited on for the 30 s of a deletion; the healthy server's sessions are deleted."""
    proxy, b = hung_and_healthy

    async def run():
        pool = _pool([proxy.url, b.url], timeout_s=20)
        s1 = await pool.open_session(split="train", index=0)
        s2 = await pool.open_session(split="train", index=1)
        assert (s1.server, s2.server) == (proxy.url, b.url)
        proxy.hang()
        await _until_out(pool, 0)
        t = time.perf_counter()
        await pool.aclose()
        return time.perf_counter() - t, s2.id

    took, healthy = run_sync(run)
    assert took < 3.0, took
    assert healthy not in b.active_sessions()


def test_an_open_cut_by_its_server_leaving_the_rotation_moves_on_at_once(hung_and_healthy):
    """An open in flight on a server that hangs ends when the prober takes the server out, and goes to the
    next server: the cut open's cleanup (its `/create`'s answer, its deletion) does not wait on the hung
    one."""
    proxy, b = hung_and_healthy

    async def run():
        pool = _pool([proxy.url, b.url], timeout_s=60)
        proxy.hang()
        t = time.perf_counter()
        with anyio.fail_after(15):
            s = await pool.open_session(split="train", index=0)
        took = time.perf_counter() - t
        assert s.server == b.url and not pool.servers[0].rotation.up
        await s.close()
        await pool.aclose()
        return took

    assert run_sync(run) < 5.0


def test_a_stateless_call_past_its_deadline_is_typed_and_makes_its_server_suspect():
    """`num_tasks` (any stateless call) on a server that accepts and never answers: `DeadlineExceeded`
    naming the request, the server and the deadline, and its pool probes the server at once (the regular
    probe is a minute away) and takes it out."""
    hung = socket.create_server(("127.0.0.1", 0))  # the kernel accepts connections; nothing ever answers
    url = f"http://127.0.0.1:{hung.getsockname()[1]}"

    async def run():
        pool = ServerPool([Endpoint.for_url(url, "echo")], timeout_s=0.5, probe_interval_s=60, retries=0)
        async with pool:
            with pytest.raises(DeadlineExceeded) as ei:
                await pool.num_tasks("train")
            await _until_out(pool, 0)
        return str(ei.value)

    try:
        message = run_sync(run)
    finally:
        hung.close()
    for word in ("POST /echo/num_tasks", url, "0.5s", "timeout_s"):
        assert word in message, (word, message)
