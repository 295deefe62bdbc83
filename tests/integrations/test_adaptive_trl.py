"""`strategy: adaptive` end to end: real TRL, real local servers, a scripted policy whose outcomes are known.

Three members on `local:echo` (disjoint tasks): one always solved, one always failed, one whose GRPO groups
are mixed (sample 0 right, sample 1 wrong). Only the mixed member's groups teach GRPO anything, so its
share must rise above its static third within a few steps and the always-solved member must fall to its floor.
"""

from __future__ import annotations

import json
import re

import pytest

from ormix.mixture import load_mixture
from ormix.telemetry._records import read_records
from ormix.workbench._scripted import ScriptContext, tool_call
from ormix.workbench.envs.echo import WORDS
from support.trl_args import cpu_grpo_config, scripted_trainer

pytestmark = pytest.mark.slow

MIXTURE = """\
name: adaptive-e2e
members:
  solved: {target: "local:echo", indices: [0, 1, 2, 3], local_serve: thread}
  failed: {target: "local:echo", indices: [4, 5, 6, 7], local_serve: thread}
  mixed: {target: "local:echo", indices: [8, 9, 10, 11], local_serve: thread}
strategy: adaptive
adaptive: {signal: informative, warmup_steps: 2, floor: 0.05, max_change: 0.3, window: 2}
prompts_per_step: 6
num_samples: 60
seed: 1
"""


def script(ctx: ScriptContext) -> str:
    if ctx.turn > 0:
        return "done"
    word = re.search(r"word '(\w+)'", ctx.user).group(1)
    index = WORDS.index(word)
    right = index < 4 or (index >= 8 and ctx.sample == 0)
    return tool_call("submit", text=word if right else "nope")


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")


def test_budget_moves_to_the_member_whose_groups_teach(tiny_model, tmp_path):

    from ormix.trl._trainer import ConcurrentGRPOTrainer

    file = tmp_path / "adaptive.yaml"
    file.write_text(MIXTURE)
    mix = load_mixture(str(file))
    args = cpu_grpo_config(
        str(tmp_path / "out"),
        per_device_train_batch_size=12,
        max_steps=8,
        max_completion_length=64,
        save_strategy="steps",
        save_steps=4,
        remove_unused_columns=False,
        max_tool_calling_iterations=1,
    )
    trainer = scripted_trainer(mix, tiny_model, args, script, ConcurrentGRPOTrainer)
    trainer.train()

    steps = [h for h in trainer.state.log_history if "loss" in h]
    assert len(steps) == 8
    weights = [{m: h[f"ormix/{m}/weight"] for m in ("solved", "failed", "mixed")} for h in steps]
    assert weights[0] == pytest.approx({"solved": 1 / 3, "failed": 1 / 3, "mixed": 1 / 3})  # warm-up: static
    assert weights[-1]["solved"] == pytest.approx(0.05, abs=1e-6) and weights[-1]["failed"] == pytest.approx(
        0.05, abs=1e-6
    )
    assert weights[-1]["mixed"] == pytest.approx(0.9, abs=1e-6)
    # The rows trained on follow the weights: the mixed member's share of the last steps is far above 1/3.
    records = [r for r in read_records(tmp_path / "out") if r["mode"] == "train"]
    late = [r["member"] for r in records if r["step"] >= 6]
    assert late.count("mixed") / len(late) > 0.7
    # ...and every step kept its exact quota of 6 prompts (12 rollouts).
    assert all(sum(1 for r in records if r["step"] == s) == 12 for s in range(1, 9))
    # The planner's state went into the checkpoints, for a resume to continue from.
    state = json.loads((tmp_path / "out" / "checkpoint-4" / "ormix_adaptive.json").read_text())
    decided = max(int(s) for s in state["weights"])
    assert "4" in state["history"] and decided >= 5 and state["weights"][str(decided)]["mixed"] > 1 / 3
