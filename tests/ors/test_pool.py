"""One member on several ORS servers: the balance rules (pure, Hypothesis) and `ServerPool` against real
loopback servers (the faults a real server process causes are in tests/test_reliability.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ormix import OpenRewardSpec
from ormix._errors import SpecError
from ormix.ors import Endpoint, ServerPool, TransportError, run_sync
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
