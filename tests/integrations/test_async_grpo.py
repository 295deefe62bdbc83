"""TRL's `AsyncGRPOTrainer` end to end on a mixture: real TRL (its spawned rollout worker, its trainer), real
local ORS servers, the tiny model served by the vLLM stand-in (`ormix.workbench._vllm_standin`, sampling
scripted
as `ScriptedPolicy` does for the sync trainer: a random tiny model never calls a tool).

Two members on `local:echo`: `flaky` calls no tool on two of its four tasks (unscored: its coverage falls
below the alarm's 0.6) and solves the other two (no group of it teaches GRPO anything); `mixed` solves
sample 0 of each group and fails sample 1 (its groups teach). The adaptive planner, which runs in the
worker, must move the budget to `mixed`.
"""

from __future__ import annotations

import io
import json
import re
from collections import Counter

import pytest
from rich.console import Console

from ormix.mixture import load_mixture
from ormix.mixture._lagged import async_lag
from ormix.telemetry._metrics import batch_metrics
from ormix.telemetry._records import read_records
from ormix.workbench._scripted import tool_call
from ormix.workbench.envs.echo import WORDS

pytestmark = pytest.mark.slow

MIXTURE = """\
name: async-e2e
members:
  flaky: {target: "local:echo", indices: [0, 1, 2, 3], local_serve: thread}
  mixed: {target: "local:echo", indices: [8, 9, 10, 11, 12, 13], local_serve: thread}
strategy: adaptive
# `informative`: this test is about the async path's lag and logs; the default signal's caution toward an
# unmeasured member (`denoised`) is tested in tests/mixture/test_adaptive.py.
adaptive: {signal: informative, warmup_steps: 1, floor: 0.05, max_change: 0.3, window: 2}
prompts_per_step: 2
num_samples: 40
seed: 1
telemetry: {min_coverage: 0.6, consecutive_steps: 1}
"""


def script(prompt: str, sample: int) -> str:
    """The policy: the text of the first turn's answer, then a final word once a tool answered."""
    if "<tool_response>" in prompt:
        return "done"
    word = re.findall(r"word '(\w+)'", prompt)[-1]
    index = WORDS.index(word)
    if index < 2:  # `flaky`'s tasks 0 and 1: no tool call
        return "I will not call a tool."
    if index < 8:  # `flaky`'s tasks 2 and 3: right
        return tool_call("submit", text=word)
    return tool_call("submit", text=word if sample % 2 == 0 else "nope")


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")


def test_async_trainer_logs_what_its_records_say_adapts_and_reports(tiny_model, tmp_path):
    from trl.experimental.async_grpo import AsyncGRPOConfig

    from ormix.app._report import write_report
    from ormix.app._train.progress import console_lines
    from ormix.trl._async_grpo import AsyncMixtureTrainer
    from ormix.trl._lifecycle import ProgressLine
    from ormix.workbench._vllm_standin import StandInWeightTransfer, VLLMStandIn

    file = tmp_path / "mix.yaml"
    file.write_text(MIXTURE)
    mix = load_mixture(str(file))
    run_dir = tmp_path / "run"
    with VLLMStandIn(tiny_model, script=script) as standin:
        args = AsyncGRPOConfig(
            output_dir=str(run_dir),
            per_device_train_batch_size=4,
            num_generations=2,
            max_steps=4,
            max_completion_length=48,
            learning_rate=1e-4,
            logging_steps=1,
            report_to="none",
            bf16=False,
            use_cpu=True,
            dtype="float32",
            save_strategy="no",
            disable_tqdm=True,
            vllm_server_base_url=standin.url,
            token_budget=0,
            max_inflight_tasks=4,
            queue_maxsize=8,
            weight_sync_steps=1,
            max_tool_calling_iterations=1,
        )
        console = Console(file=io.StringIO(), width=400, color_system=None)
        progress = ProgressLine(["flaky", "mixed"], console_lines(console), run_dir)
        trainer = AsyncMixtureTrainer(
            tiny_model,
            mix,
            args,
            weight_transfer=StandInWeightTransfer(standin),
            score_queue_maxsize=1,
            callbacks=[progress],
        )
        with pytest.warns(Warning, match="coverage"):
            trainer.train()
        weight_loads = standin.weight_loads

    # The trainer's weights reached the server: once before the worker started, then after every step.
    assert weight_loads == 1 + 4
    history = trainer.state.log_history
    steps = [h for h in history if "loss" in h]
    assert [h["step"] for h in steps] == [1, 2, 3, 4]
    # Step 1 trains on samples of the weights it starts from: the trainer's logprobs (TRL's packed tree
    # attention, here on SDPA) equal the server's, token for token.
    assert steps[0]["ratio"] == pytest.approx(1.0, abs=1e-3) and steps[0]["sample/staleness_mean"] == 0

    # Records: written once (one file, one line per rollout), stamped with the policy they were sampled
    # with and how stale they were when they reached the trainer.
    records = read_records(run_dir)
    assert records and {r["member"] for r in records} == {"flaky", "mixed"}
    # Each GRPO group is 2 rollouts of one task: a record written twice would make 3 (the records' ``time``
    # is rounded to the millisecond, so it cannot tell two rollouts of a group apart).
    per_group = Counter((r["step"], r["group"], r["member"], r["task_index"]) for r in records)
    assert set(per_group.values()) <= {1, 2} and sum(per_group.values()) == len(records)
    assert all(isinstance(r["policy_version"], int) and r["staleness"] >= 0 for r in records)
    assert {r["outcome"] for r in records if r["member"] == "flaky"} == {"unscored", "scored"}
    assert sorted({r["reward"] for r in records if r["member"] == "mixed"}) == [0.0, 1.0]

    # Every per-member metric of a step's log entry is what that step's records say.
    members = ["flaky", "mixed"]
    # (A record's step is the entry it reached the trainer with; an entry whose window no group reached has
    # no per-member metrics, as a sync step without a member's rows has none of that member's.)
    with_records = 0
    for entry in steps:
        batch = [r for r in records if r["step"] == entry["step"]]
        if not batch:
            assert not [k for k in entry if k.startswith("ormix/") and k.endswith("/coverage")], entry
            continue
        with_records += 1
        for key, value in batch_metrics(batch, members).items():
            assert entry[key] == pytest.approx(value), (entry["step"], key)
        assert entry["ormix/staleness"] == pytest.approx(sum(r["staleness"] for r in batch) / len(batch))

    assert with_records >= 2
    # The progress line reads the per-member metrics the sync line reads: each member's scored reward where
    # the entry has one (never `r -` beside a logged `ormix/<member>/reward`), and its coverage.
    lines = [line for line in console.file.getvalue().splitlines() if line.startswith("step ")]
    assert len(lines) == len(steps)
    shown = 0
    for line, entry in zip(lines, steps, strict=True):
        for member in members:
            reward = entry.get(f"ormix/{member}/reward")
            if reward is not None:
                shown += 1
                assert f"{member} r {reward:5.2f} cov {entry[f'ormix/{member}/coverage']:5.2f}" in line, line
    assert shown >= 2
    # The coverage alarm fired on `flaky` (and was written beside the records).
    alarms = [json.loads(line) for line in (run_dir / "alarms.jsonl").read_text().splitlines()]
    assert alarms and alarms[0]["member"] == "flaky"

    # Adaptive: the planner (in the worker) decides with the async lag and moves the budget to `mixed`.
    assert trainer.ormix_lag == async_lag(max_inflight_tasks=4, score_queue_maxsize=1, prompts_per_step=2)
    weights = [h["ormix/mixed/weight"] for h in steps]
    # Plan steps up to the lag keep the prior (0.5); a log entry averages the groups that reached it, and the
    # worker runs ahead by its queues, so the first entry may already hold a later step's group.
    assert weights[0] < 0.6 and max(weights) > 0.7
    assert {r["plan_step"] for r in records} >= {1, 2}

    # `ormix report` on the async run directory: the plots a sync run gets.
    with (run_dir / "log_history.jsonl").open("w") as fh:  # what `ormix train` writes (ProgressLine)
        for entry in history:
            fh.write(json.dumps(entry) + "\n")
    written = {p.name for p in write_report(run_dir).files}
    assert {
        "reward_coverage.png",
        "share.png",
        "errors.png",
        "latency.png",
        "weights.png",
        "env_time.png",
    } <= written


def test_async_training_is_checked_before_anything_starts(tmp_path):
    from typer.testing import CliRunner

    from ormix._errors import TrainConfigError
    from ormix.app import app
    from ormix.app._train import train

    file = tmp_path / "mix.yaml"
    file.write_text(MIXTURE)
    result = CliRunner().invoke(app, ["train", str(file), "--vllm-url", "http://127.0.0.1:8000"])
    assert result.exit_code == 2 and "--async" in result.output
    # A real server gets the weights over NCCL through the vllm package, which this machine lacks.
    with pytest.raises(TrainConfigError, match="pip install vllm") as info:
        train(str(file), vllm_url="127.0.0.1:8000", output_dir=tmp_path / "run", warmup_sft=2)
    assert "http(s)://" in str(info.value) and "--warmup-sft 0" in str(info.value)
    assert not (tmp_path / "run").exists()
