"""Sessions opened ahead (`ConcurrentGRPOTrainer(lookahead=N)`): real TRL, a real local server, the tiny
offline model; only sampling is scripted. Faults with sessions opened ahead: a session the server reaps
while it waits for its step, Ctrl-C and SIGTERM with sessions opened ahead (none left on the server), and one
of a member's two servers killed mid-round (its rollouts end at once, its sessions opened ahead open again on
the other)."""

from __future__ import annotations

import os
import re
import signal
import threading
import time

import pytest
from transformers import TrainerCallback

from ormix import OpenRewardSpec
from ormix.ors._bridge import run_sync
from ormix.server._shared import server_for
from ormix.workbench._scripted import ScriptedPolicy, tool_call
from support.tools import tool_text
from support.trl_args import cpu_grpo_config

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")


def submit(ctx):
    answer = re.search(r"answer '(\d+)'", ctx.user).group(1)
    return tool_call("submit", answer=answer) if ctx.turn == 0 else "done"


def _wait_for(condition, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


class AtStepEnd(TrainerCallback):
    """Runs `action(trainer)` when the given step ends, once the next step's sessions are all open ahead."""

    def __init__(self, step, action):
        self.step, self.action, self.trainer = step, action, None

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            _wait_for(lambda: len(self.trainer._ahead.sessions()) == 4)
            self.action(self.trainer)
        return control


def trainer_for(
    tmp_path,
    *callbacks,
    max_steps=2,
    target="local:faulty",
    script=submit,
    max_completion_length=32,
    max_tool_calling_iterations=1,
    local_serve="thread",
    **spec_kwargs,
):
    from ormix.trl._trainer import ConcurrentGRPOTrainer

    spec = OpenRewardSpec(
        target, indices=[0, 6, 10, 12, 18, 22], ping_interval_s=0.1, local_serve=local_serve, **spec_kwargs
    )
    args = cpu_grpo_config(
        str(tmp_path / "run"),
        max_steps=max_steps,
        max_completion_length=max_completion_length,
        max_tool_calling_iterations=max_tool_calling_iterations,
    )
    trainer = ConcurrentGRPOTrainer(
        model=os.environ["ORMIX_TEST_TINY"],
        args=args,
        train_dataset=spec.train_dataset,
        environment_factory=spec.environment_factory,
        reward_funcs=spec.reward_funcs,
        callbacks=[*spec.callbacks, *callbacks],
    )
    for callback in callbacks:
        callback.trainer = trainer
    ScriptedPolicy(script).attach(trainer)
    return trainer


@pytest.fixture
def tiny(tiny_model, monkeypatch):
    monkeypatch.setenv("ORMIX_TEST_TINY", tiny_model)


def test_sessions_open_ahead_and_one_the_server_reaped_is_opened_again(tiny, tmp_path):
    server = server_for("local:faulty", mode="thread")

    def reap(trainer):
        # The server forgets step 2's sessions while they wait (`die`); their pings find out.
        sessions = trainer._ahead.sessions()
        for session in sessions:
            run_sync(session.call, "die", {})
        _wait_for(lambda: all(s.dead for s in sessions))

    trainer = trainer_for(tmp_path, AtStepEnd(1, reap), max_steps=2)
    trainer.train()
    steps = [h for h in trainer.state.log_history if "loss" in h]
    # (That sessions opened ahead are used: tests/integrations/test_concurrent.py, step 2 of its run.)
    assert [h["ormix/env/opened_ahead"] for h in steps] == [0, 0]  # step 2's four were reaped
    assert "ormix/env/ahead_reaped" not in steps[0] and steps[1]["ormix/env/ahead_reaped"] == 4
    assert all(h["ormix/faulty/coverage"] == 1.0 for h in steps)  # opened again: every rollout scored
    # max_steps: no step after the last one was opened; nothing is left on the server.
    assert trainer.ahead_unused == 0
    assert server.active_sessions() == []


@pytest.mark.parametrize("how", ["ctrl_c", "sigterm"])
def test_a_stopped_run_leaves_no_session_opened_ahead(tiny, tmp_path, how):
    from ormix.trl._lifecycle import RunLifecycle, handle_termination

    server = server_for("local:faulty", mode="thread")

    def stop(trainer):
        assert len(server.active_sessions()) >= 4  # step 2's, opened ahead, are there to be left behind
        if how == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)  # the step ends, then the run stops (ormix train's rule)
        else:
            raise KeyboardInterrupt

    with handle_termination("checkpoint", 60) as request:
        trainer = trainer_for(tmp_path, AtStepEnd(1, stop), RunLifecycle(None, request))
        if how == "ctrl_c":
            with pytest.raises(KeyboardInterrupt):
                trainer.train()
        else:
            trainer.train()
            assert request.requested and request.saved_step == 1
    assert trainer.state.global_step == 1
    assert trainer.ahead_unused == 4  # closed, and counted
    assert server.active_sessions() == []


def test_a_step_that_fails_before_its_resets_closes_and_counts_its_sessions_opened_ahead(
    tiny, tmp_path, caplog
):
    from ormix.rollout._episode import close_episodes

    server = server_for("local:faulty", mode="thread")
    ahead: list[str] = []

    def break_resets(trainer):
        # Every session of step 2 came ahead (none left to open at the step); then TRL fails before a reset.
        ahead.extend(s.id for s in trainer._ahead.sessions())

        def reset(**row):
            raise RuntimeError("reset failed")

        for environment in trainer.environments:
            environment.reset = reset

    trainer = trainer_for(tmp_path, AtStepEnd(1, break_resets), max_steps=2)
    with pytest.raises(RuntimeError, match="reset failed"):
        trainer.train()
    assert len(ahead) == 4 and not set(ahead) & set(server.active_sessions())
    assert trainer._pending_metrics["ormix/env/unused_sessions"] == [4.0]  # the step failed: not flushed
    assert "4 session(s) opened ahead were never taken by a reset" in caplog.text
    close_episodes(trainer.environments)  # step 1's, still open: the run did not end


def test_an_open_that_failed_ahead_is_opened_again_at_its_step():
    # The first open of this task fails (as on a server that died meanwhile); at its step it opens again.
    import uuid

    from ormix.rollout._ahead import SessionsAhead
    from ormix.rollout._batch import OpenRequest
    from ormix.rollout._episode import close_episode

    spec = OpenRewardSpec("local:faulty", num_tasks=1, local_serve="thread", discover_task_tools=False)
    config = spec.episode_config
    row = {"task_spec": {"flaky_open": uuid.uuid4().hex, "answer": "42"}}
    ahead = SessionsAhead()
    ahead.start(1, [OpenRequest(config, row)])
    taken = ahead.take(1, [OpenRequest(config, row)])
    assert (taken.used, taken.failed, len(taken.remaining)) == (0, 1, 1)
    episode = spec.environment_factory()
    episode.reset(**row)  # opened now: the flaky open fails only once
    assert episode.outcome.kind == "unscored" and "submitted" in episode.submit(answer="42")
    close_episode(episode)
    assert ahead.close() == 0 and server_for("local:faulty", mode="thread").active_sessions() == []


def test_a_server_killed_mid_round_with_sessions_open_ahead_costs_only_its_own_rollouts(tiny, tmp_path):
    # One member on two servers, lookahead 1. Step 1's tool round is in flight on both when one server is
    # SIGKILLed: its rollouts end as transport errors at once (not at the call timeout), the run goes on, step
    # 2's sessions opened ahead on the dead server are opened again on the live one (every rollout scored),
    # and nothing is left on the live server.
    import contextlib

    from ormix.rollout._episode import close_episode
    from ormix.server import serve_in_process, serve_in_thread

    call_timeout_s, busy_s, key = 30.0, 2.0, "r"

    def script(ctx):
        if ctx.turn == 0:
            return tool_call("count", key=key, sleep_s=busy_s)
        answer = re.search(r"answer '(\d+)'", ctx.user).group(1)
        return tool_call("submit", answer=answer) if ctx.turn == 1 else "done"

    with serve_in_thread(["local:faulty"]) as live:
        doomed = serve_in_process(["local:faulty"])
        try:
            probe = OpenRewardSpec(
                doomed.url, env_name="faulty", discover_task_tools=False
            ).environment_factory()
            probe.reset(task_spec={"answer": "42"})

            def kill_mid_round(trainer):
                # The doomed server holds both of its rollouts' calls (each sleeping busy_s): kill it then.
                _wait_for(lambda: tool_text(probe.read_count, key=key).strip() == "2")
                os.kill(doomed.pid, signal.SIGKILL)

            trainer = trainer_for(
                tmp_path,
                target=[live.url, doomed.url],
                local_serve=None,
                env_name="faulty",
                call_timeout_s=call_timeout_s,
                script=script,
                max_completion_length=128,
                max_tool_calling_iterations=2,
            )
            assert trainer.lookahead == 1
            killer = None

            class KillDuringStepOne(TrainerCallback):
                def on_step_begin(self, args, state, control, **kwargs):
                    nonlocal killer
                    if state.global_step == 0:
                        killer = threading.Thread(target=kill_mid_round, args=(trainer,), daemon=True)
                        killer.start()

            trainer.add_callback(KillDuringStepOne())
            trainer.train()
            killer.join(timeout=1)
            steps = [h for h in trainer.state.log_history if "loss" in h]
            assert trainer.state.global_step == 2
            first, second = steps
            assert first["ormix/faulty/coverage"] == 0.5  # the doomed server's two rollouts: transport errors
            assert first["ormix/env/tools_s"] < call_timeout_s / 2  # ended at once, not at the timeout
            # Step 2's two sessions opened ahead on the doomed server were gone: opened again on the live one.
            assert (second["ormix/env/opened_ahead"], second["ormix/env/ahead_reaped"]) == (2, 2)
            assert second["ormix/faulty/coverage"] == 1.0  # every rollout scored
            assert live.active_sessions() == []
            with contextlib.suppress(Exception):
                close_episode(probe)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(doomed.pid, signal.SIGKILL)
            doomed.close()
