"""Stragglers cut by rule in `ConcurrentGRPOTrainer`'s tool rounds: real TRL, a real local server, the tiny
offline model; only sampling is scripted. The cut rollout ends as ``error`` / ``straggler``, its session is
closed, and TRL leaves it out of its group's baseline with advantage 0 (ormix's reward is ``None``)."""

from __future__ import annotations

import re
import time

import pytest

from ormix import OpenRewardSpec
from ormix.server._shared import server_for
from ormix.telemetry._records import read_records
from ormix.workbench._scripted import ScriptedPolicy, tool_call
from support.trl_args import cpu_grpo_config

pytestmark = pytest.mark.slow


def script(ctx):
    if ctx.turn > 0:
        return "done"
    answer = re.search(r"answer '(\d+)'", ctx.user).group(1)
    if "Faulty task 0:" in ctx.user and ctx.sample == 3:
        return tool_call("slow", seconds=20.0)  # the straggler
    return tool_call("submit", answer=answer if ctx.sample else "wrong")


def test_a_straggler_is_cut_by_rule_and_left_out_of_its_group_baseline(tiny_model, tmp_path, monkeypatch):
    import torch
    from trl.trainer.utils import nanstd

    from ormix.trl._trainer import ConcurrentGRPOTrainer

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    outputs = []

    class Captured(ConcurrentGRPOTrainer):
        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            outputs.append(out["advantages"].tolist())
            return out

    rule = {"median_multiple": 3, "after_fraction": 0.5, "min_wait_s": 0.5}
    spec = OpenRewardSpec("local:faulty", indices=[0, 6], stragglers=rule, local_serve="thread")
    trainer = Captured(
        model=tiny_model,
        args=cpu_grpo_config(
            str(tmp_path / "s"),
            max_steps=1,
            per_device_train_batch_size=8,
            num_generations=4,
            max_completion_length=32,
            max_tool_calling_iterations=1,
        ),
        train_dataset=spec.train_dataset,
        environment_factory=spec.environment_factory,
        reward_funcs=spec.reward_funcs,
        callbacks=spec.callbacks,
    )
    ScriptedPolicy(script).attach(trainer)
    t0 = time.perf_counter()
    trainer.train()
    assert time.perf_counter() - t0 < 20  # the 20 s call was not waited for
    step = next(h for h in trainer.state.log_history if "loss" in h)
    assert step["ormix/faulty/straggler_rate"] == 1 / 8
    assert 0.5 <= step["ormix/env/tools_s"] < 2.0
    # The round's last call (the cut one) held it from the others' return to the cut at >= 0.5 s: about
    # 0.4 s on an idle machine, less when the others are slow (CI once read 0.397), never the 20 s call.
    assert 0.05 < step["ormix/env/tail_wait_s"] <= step["ormix/env/tools_s"]
    records = read_records(tmp_path / "s")
    cut = [r for r in records if r["error_kind"] == "straggler"]
    assert len(cut) == 1 and cut[0]["outcome"] == "error" and cut[0]["task_index"] == 0
    assert server_for("local:faulty", mode="thread").active_sessions() == []

    # TRL's advantages: group of task 0 = rows 0-3 (rewards 0, 1, 1, cut); the cut row gets 0 and the
    # baseline is of the three scored rows only (with the cut one scored 0 it would be 0.5, not 2/3).
    (advantages,) = outputs
    rewards = torch.tensor([0.0, 1.0, 1.0])
    expected = ((rewards - rewards.mean()) / (nanstd(rewards) + 1e-4)).tolist()
    assert advantages[:3] == pytest.approx(expected, abs=1e-4)
    assert advantages[3] == 0.0
