"""Ctrl-C and SIGTERM while a step waits on its environments, with real signals on this process's main thread
and real local servers: the interrupt surfaces within a moment, whatever the step was waiting on (a tool
round's calls, a single call, sessions opened ahead), and nothing is left open on a server."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from ormix import OpenRewardSpec
from ormix.rollout._ahead import SessionsAhead
from ormix.rollout._batch import OpenRequest, ToolRound
from ormix.rollout._episode import Episode, close_episodes, set_tool_round
from ormix.server import serve_in_thread
from ormix.trl._lifecycle import handle_termination

#: How long the stuck tool runs: an interrupt that waits for it fails the test's bound by far.
TOOL_S = 8.0


@pytest.fixture
def episodes():
    spec = OpenRewardSpec("local:faulty", num_tasks=2, local_serve="thread", discover_task_tools=False)
    envs = [spec.environment_factory() for _ in range(2)]
    for env in envs:
        env.reset(task_spec={})
    yield envs
    close_episodes(envs)


def _signal_in(seconds: float, signum: int) -> threading.Timer:
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signum))
    timer.daemon = True
    timer.start()
    return timer


def _round_of_slow_calls(envs: list[Episode]) -> ToolRound:
    """Every rollout's newest message asks for `slow` (TRL's tool loop then calls rollout after rollout)."""
    call = {"type": "function", "function": {"name": "slow", "arguments": {"seconds": TOOL_S}}}
    completions = [[{"role": "assistant", "content": "", "tool_calls": [call]}] for _ in envs]
    tool_round = ToolRound(completions, envs, is_ours=lambda e: isinstance(e, Episode))
    for env in envs:
        set_tool_round(env, tool_round)
    return tool_round


def test_ctrl_c_during_a_tool_round_surfaces_at_once_and_cuts_the_round(episodes):
    _round_of_slow_calls(episodes)
    timer = _signal_in(0.5, signal.SIGINT)
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            episodes[0].slow(seconds=TOOL_S)
    finally:
        timer.cancel()
        for env in episodes:
            set_tool_round(env, None)
    assert time.monotonic() - started < TOOL_S / 2  # not after the round's calls (was 8 s)
    # The round's rollouts are cut: a later call of theirs fails at once instead of running.
    assert all(env.outcome.kind == "error" and env.error == "interrupted" for env in episodes)
    started = time.monotonic()
    with pytest.raises(Exception, match="abandoned"):
        episodes[1].slow(seconds=TOOL_S)
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize("in_round", [False, True], ids=["one call", "tool round"])
def test_the_sigterm_grace_bound_interrupts_a_step_stuck_in_a_tool_call(episodes, in_round):
    if in_round:
        _round_of_slow_calls(episodes)
    started = time.monotonic()
    timer = _signal_in(0.3, signal.SIGTERM)
    try:
        with handle_termination("checkpoint", grace_s=1.0) as stop, pytest.raises(KeyboardInterrupt):
            episodes[0].slow(seconds=TOOL_S)
    finally:
        timer.cancel()
        for env in episodes:
            set_tool_round(env, None)
    # SIGTERM at 0.3 s, grace 1 s: interrupted then, before a scheduler's SIGKILL (was when the call ended).
    assert stop.forced and time.monotonic() - started < TOOL_S / 2


def test_ctrl_c_while_a_step_waits_for_its_sessions_opened_ahead_leaves_none_open(monkeypatch):
    open_s = 1.5
    monkeypatch.setenv("ORMIX_LATENCY_OPEN_S", str(open_s))
    with serve_in_thread(["local:latency"]) as server:
        spec = OpenRewardSpec(server.url, env_name="latency", num_tasks=4, discover_task_tools=False)
        factory = spec.environment_factory
        requests = [
            OpenRequest(factory.episode_config_for({"task_index": i}), {"task_index": i}) for i in range(4)
        ]
        ahead = SessionsAhead()
        ahead.start(1, requests)
        timer = _signal_in(0.3, signal.SIGINT)
        try:
            with pytest.raises(KeyboardInterrupt):
                ahead.take(1, requests)
        finally:
            timer.cancel()
        ahead.close()  # the run's cleanup after Ctrl-C
        time.sleep(open_s + 0.5)  # past the opens: one nobody cancelled would have its session by now
        deadline = time.monotonic() + 3.0
        while server.active_sessions() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert server.active_sessions() == []
        spec.close_sessions()


def test_a_disarmed_grace_bound_leaves_the_cleanup_alone_and_the_handler_is_restored():
    previous = signal.getsignal(signal.SIGTERM)
    timer = _signal_in(0.1, signal.SIGTERM)
    try:
        with handle_termination("checkpoint", grace_s=0.5) as stop:
            time.sleep(0.3)  # the SIGTERM arrived: the step would end and save; the grace timer runs
            assert stop.requested and not stop.forced
            stop.disarm()  # training returned: what follows is cleanup (closing sessions)
            threading.Event().wait(1.0)  # a blocking wait past the grace bound, not interrupted
    finally:
        timer.cancel()
    assert not stop.forced
    assert signal.getsignal(signal.SIGTERM) is previous
