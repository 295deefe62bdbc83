"""Faults real deployments cause, provoked for real against local servers: what ormix does with each.

Every fault ends in a classified outcome (`error` with its kind, reward `None`), a short message to the model,
and no exception into TRL's loop.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
import uuid

import pytest

from ormix import OpenRewardSpec
from ormix.rollout._episode import close_episode
from ormix.server import ServeOptions, serve_in_process, serve_in_thread
from support.tools import tool_text


@pytest.fixture(scope="module")
def faulty():
    with serve_in_thread(["local:faulty"]) as server:
        yield server


def spec_on(server, **kwargs) -> OpenRewardSpec:
    kwargs.setdefault("discover_task_tools", False)
    return OpenRewardSpec(server.url, env_name="faulty", **kwargs)


def test_failed_open_is_retried_within_budget_and_counted(faulty):
    spec = spec_on(faulty, open_retries=1)
    ep = spec.environment_factory()
    prompt = ep.reset(task_spec={"flaky_open": uuid.uuid4().hex})
    assert "could not start" not in prompt
    assert ep.open_retries == 1 and ep.outcome.kind == "unscored"
    assert "42" in ep.submit(answer="42") or ep.reward == 1.0
    assert ep.outcome.kind == "scored"

    no_budget = spec_on(faulty).environment_factory()
    text = no_budget.reset(task_spec={"flaky_open": uuid.uuid4().hex})
    assert "could not start" in text and "flaky_open" in no_budget.outcome.error
    assert no_budget.outcome.kind == "error" and no_budget.outcome.error_kind == "session_open"
    assert spec_on(faulty).reward_funcs(environments=[no_budget]) == [None]


def test_thirty_percent_failed_opens_are_errors_and_never_zero(faulty):
    spec = spec_on(faulty, num_tasks=12, unscored_reward=0.0)
    episodes = []
    for row in spec.train_dataset:
        ep = spec.environment_factory()
        ep.reset(**row)
        if ep.outcome.kind != "error" and row["behaviour"] in ("plain", "slow"):
            ep.submit(answer=row["answer"])
        episodes.append((row["behaviour"], ep))
    rewards = spec.reward_funcs(environments=[ep for _, ep in episodes])
    for (behaviour, ep), reward in zip(episodes, rewards, strict=True):
        if behaviour in ("fail_open", "fail_setup"):
            assert ep.outcome.error_kind == "session_open" and reward is None
    assert sum(b == "fail_open" for b, _ in episodes) == 4  # every third task
    assert rewards.count(1.0) == sum(b in ("plain", "slow") for b, _ in episodes) == 5


def test_session_that_dies_mid_episode_is_an_error_even_after_a_reward(faulty):
    ep = spec_on(faulty).environment_factory()
    ep.reset(task_spec={"die_after": 2, "answer": "x"})
    ep.echo(text="one")
    ep.echo(text="two")
    text = tool_text(ep.echo, text="three")
    assert text == "the environment session has ended; no further tool call can succeed."
    assert ep.outcome.kind == "error" and ep.outcome.error_kind == "session_died"
    assert ep.outcome.reward is None


def test_deadline_is_reported_to_the_model_and_does_not_block_the_next_rollout(faulty):
    spec = spec_on(faulty, call_timeout_s=0.5)
    slow = spec.environment_factory()
    slow.reset(task_spec={"slow_s": 5})
    t0 = time.monotonic()
    text = tool_text(slow.slow)
    assert time.monotonic() - t0 < 3
    assert text == "the tool did not finish within its time limit."
    assert "did not finish within 0.5s" in slow.calls[-1].detail
    assert slow.outcome.error_kind == "deadline" and slow.calls[-1].error == "deadline"
    nxt = spec.environment_factory()
    t0 = time.monotonic()
    nxt.reset(task_spec={"answer": "42"})
    nxt.submit(answer="42")
    assert time.monotonic() - t0 < 2 and nxt.reward == 1.0


def test_a_call_after_a_failed_open_tells_the_model_no_session_id_or_advice(faulty):
    ep = spec_on(faulty).environment_factory()
    ep.reset(task_spec={"fail_setup": True})
    text = tool_text(ep.echo, text="a")
    assert text == "the environment could not start this task."
    detail = ep.calls[-1].detail
    assert ep.calls[-1].error == "session_open" and "session=" in detail and "fail in setup" in detail
    assert ep.outcome.error_kind == "session_open" and "session=" in ep.outcome.error


@pytest.mark.parametrize("pings", [True, False])
def test_long_idle_episode_survives_the_idle_limit_only_with_pings(pings):
    with serve_in_thread(["local:faulty"], ServeOptions(idle_limit_s=1.0)) as server:
        spec = spec_on(server, ping_interval_s=0.2 if pings else None)
        ep = spec.environment_factory()
        ep.reset(task_spec={"answer": "42"})
        time.sleep(2.5)  # the model "thinks" past the server's idle limit
        text = tool_text(ep.submit, answer="42")
        if pings:
            assert ep.reward == 1.0 and ep.outcome.kind == "scored", text
        else:
            assert ep.outcome.error_kind == "session_died"
            assert "reaped" in ep.outcome.error or "no longer" in ep.outcome.error, ep.outcome.error
        close_episode(ep)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_server_killed_and_restarted_mid_run():
    port = _free_port()
    server = serve_in_process(["local:faulty"], ServeOptions(port=port))
    try:
        spec = OpenRewardSpec(server.url, env_name="faulty", discover_task_tools=False, call_timeout_s=5)
        ep = spec.environment_factory()
        ep.reset(task_spec={"answer": "42"})
        server.close()  # the whole server process goes away mid-episode
        t0 = time.monotonic()
        text = tool_text(ep.submit, answer="42")
        assert time.monotonic() - t0 < 6  # no hang past the deadline
        assert "could not be reached" in text or "has ended" in text
        assert ep.outcome.kind == "error"
        assert ep.outcome.error_kind in ("transport", "session_died")
        assert spec.reward_funcs(environments=[ep]) == [None]

        server = serve_in_process(["local:faulty"], ServeOptions(port=port))  # back on the same address
        fresh = spec.environment_factory()
        fresh.reset(task_spec={"answer": "42"})
        fresh.submit(answer="42")
        assert fresh.outcome.kind == "scored" and fresh.reward == 1.0
    finally:
        server.close()


def test_bad_arguments_are_rejected_before_any_server_is_contacted():
    from ormix._errors import MixtureError
    from ormix._spec import SpecError
    from ormix.mixture import MixtureSpec

    unreachable = "http://127.0.0.1:9"
    with pytest.raises(SpecError, match="open_retries"):
        OpenRewardSpec(unreachable, env_name="x", open_retries=-1)
    with pytest.raises(MixtureError, match="weights"):
        MixtureSpec({"a": OpenRewardSpec(unreachable, env_name="x")}, weights={"b": 1})


def test_prompt_rides_out_a_slow_setup_answered_503_starting(monkeypatch):
    """A sandbox that takes longer to start than the server waits: /prompt answers 503 "starting" with
    Retry-After until setup() is done. The server's wait is shortened (25 s → 0.2 s), not the client's
    logic."""
    import openreward.environments.server as ors_server

    monkeypatch.setattr(ors_server, "_SETUP_WAIT_TIMEOUT_S", 0.2)
    monkeypatch.setattr(ors_server, "_SETUP_WAIT_RETRY_AFTER_S", 1)
    with serve_in_thread(["local:faulty"]) as server:
        ep = spec_on(server, call_timeout_s=30).environment_factory()
        t0 = time.monotonic()
        prompt = ep.reset(task_spec={"setup_s": 1.5, "answer": "42"})
        assert "could not start" not in prompt and ep.outcome.kind == "unscored"
        assert 1.4 < time.monotonic() - t0 < 10
        ep.submit(answer="42")
        assert ep.reward == 1.0
        close_episode(ep)


# ── one member on several servers: one of them hangs, then dies ────────────────────────────────────────


@pytest.fixture(scope="module")
def second_faulty():
    """A `local:faulty` server in a child process, next to the thread one: it can be stopped and killed."""
    server = serve_in_process(["local:faulty"])
    yield server
    with contextlib.suppress(ProcessLookupError):
        os.kill(server.pid, signal.SIGCONT)
    server.close()


def _on_both(faulty, other, **kwargs):
    spec = OpenRewardSpec([faulty.url, other.url], env_name="faulty", discover_task_tools=False, **kwargs)
    episodes = [spec.environment_factory() for _ in range(4)]
    for ep in episodes:
        ep.reset(task_spec={"answer": "42"})
    assert sorted(ep.server for ep in episodes) == sorted([faulty.url, other.url] * 2)
    return spec, episodes


def _call_all(episodes, seconds):
    """Every episode calls `slow` at once (a tool round); returns (text, seconds taken) per episode."""
    out: dict[int, tuple[str, float]] = {}

    def one(i, ep):
        t0 = time.monotonic()
        out[i] = (tool_text(ep.slow, seconds=seconds), time.monotonic() - t0)

    threads = [threading.Thread(target=one, args=(i, ep)) for i, ep in enumerate(episodes)]
    for t in threads:
        t.start()
    return threads, out


def _wait_for(condition, timeout_s):
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_hung_server_leaves_the_rotation_before_the_deadline_and_is_probed_back_in(faulty, second_faulty):
    # The probe waits a quarter of the 4 s call deadline, twice: the hung server's calls end at ~2 s.
    spec, episodes = _on_both(faulty, second_faulty, call_timeout_s=4, ping_interval_s=0.2)
    try:
        threads, out = _call_all(episodes, seconds=1.5)
        time.sleep(0.3)
        os.kill(second_faulty.pid, signal.SIGSTOP)  # the process stops answering, its sockets stay open
        for t in threads:
            t.join()
        for i, ep in enumerate(episodes):
            text, took = out[i]
            if ep.server == second_faulty.url:
                assert (
                    ep.outcome.error_kind == "transport" and text == "the environment could not be reached."
                )
                assert took < 3.5, took  # not at the 4 s deadline
                assert "taken out of rotation" in ep.outcome.error
            else:
                assert text == "slept 1.5s" and ep.outcome.kind == "unscored"
        (down,) = [s for s in spec.connection.server_stats() if not s["in_rotation"]]
        assert down["url"] == second_faulty.url
        fresh = spec.environment_factory()
        fresh.reset(task_spec={"answer": "42"})
        assert fresh.server == faulty.url and "submitted" in fresh.submit(answer="42")
        close_episode(fresh)

        os.kill(second_faulty.pid, signal.SIGCONT)
        _wait_for(lambda: all(s["in_rotation"] for s in spec.connection.server_stats()), 10)
        back = [spec.environment_factory() for _ in range(2)]
        for ep in back:
            ep.reset(task_spec={"answer": "42"})
        assert {ep.server for ep in back} == {faulty.url, second_faulty.url}
        for ep in back:
            ep.submit(answer="42")
        assert spec.reward_funcs(environments=back) == [1.0, 1.0]
    finally:
        os.kill(second_faulty.pid, signal.SIGCONT)
        spec.close()


def test_a_server_killed_mid_round_ends_only_its_own_rollouts_and_leaves_no_session(faulty, second_faulty):
    spec, episodes = _on_both(faulty, second_faulty, call_timeout_s=10)
    threads, out = _call_all(episodes, seconds=1.0)
    time.sleep(0.3)
    os.kill(second_faulty.pid, signal.SIGKILL)
    for t in threads:
        t.join()
    for ep in episodes:
        if ep.server == faulty.url:
            ep.submit(answer="42")
    rewards = spec.reward_funcs(environments=episodes)  # scores, then closes every session
    for i, (ep, reward) in enumerate(zip(episodes, rewards, strict=True)):
        if ep.server == second_faulty.url:
            assert ep.outcome.error_kind == "transport" and reward is None
            assert out[i][1] < 10  # within one call timeout
        else:
            assert reward == 1.0
    assert not set(faulty.active_sessions()) & {ep.session_id for ep in episodes}  # 0 left on the live one
    spec.close()
