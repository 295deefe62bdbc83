"""Sessions opened ahead (`ConcurrentGRPOTrainer(lookahead=N)`): real TRL, a real local server whose opens
are slower than a step, the tiny offline model; only sampling is scripted."""

from __future__ import annotations

import re

import pytest

from ormix import OpenRewardSpec
from ormix.demo.scripted import ScriptedPolicy, tool_call
from ormix.local.server.shared import server_for
from support.trl_args import cpu_grpo_config

pytestmark = pytest.mark.slow

T = {"local_serve": "thread"}


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    monkeypatch.setenv("ORMIX_LATENCY_OPEN_S", "0.6")
    monkeypatch.setenv("ORMIX_LATENCY_TOOL_S", "0.02")


def one_round(ctx):
    word = re.search(r"word '(\w+)'", ctx.user).group(1)
    return tool_call("work", text=word) if ctx.turn == 0 else "done"


def trainer_for(spec, tiny_model, tmp_path, name, *, lookahead, **args):
    from ormix.integrations.trl.trainer import ConcurrentGRPOTrainer

    settings = dict(max_steps=3, max_completion_length=32, max_tool_calling_iterations=1)
    trainer = ConcurrentGRPOTrainer(
        model=tiny_model,
        args=cpu_grpo_config(str(tmp_path / name), **{**settings, **args}),
        train_dataset=spec.train_dataset,
        environment_factory=spec.environment_factory,
        reward_funcs=spec.reward_funcs,
        callbacks=spec.callbacks,
        lookahead=lookahead,
    )
    ScriptedPolicy(one_round).attach(trainer)
    return trainer


def test_sessions_of_the_next_step_open_while_this_one_runs(tiny_model, tmp_path):
    spec = OpenRewardSpec("local:latency", num_tasks=8, **T)
    trainer = trainer_for(spec, tiny_model, tmp_path, "a", lookahead=1)
    trainer.train()
    steps = [h for h in trainer.state.log_history if "loss" in h]
    assert len(steps) == 3
    assert steps[0]["ormix/env/opened_ahead"] == 0 and steps[0]["ormix/env/open_s"] >= 0.6
    for step in steps[1:]:
        assert step["ormix/env/opened_ahead"] == 4  # every row of the step was opened ahead
        assert step["ormix/latency/coverage"] == 1.0
    # max_steps: the step after the last one was never opened; nothing is left on the server.
    assert trainer.ahead_unused == 0
    assert server_for("local:latency", mode="thread").active_sessions() == []
