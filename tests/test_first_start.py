"""A first start that fails leaves nothing that refuses the retry; --model is checked before anything
starts; --resume trains with the run's earlier --set values."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from ormix.app._train import RunOptions, train_command
from ormix.app._train.prepare import earlier_overrides, model_problem

ENVS = Path(__file__).resolve().parent / "data" / "user_envs"
ECHO = """
members:
  echo: {target: "local:echo", num_tasks: 2, local_serve: thread}
train: {max_steps: 1, num_generations: 2, per_device_train_batch_size: 2, max_completion_length: 8,
        use_cpu: true, report_to: none}
"""


def test_model_problems_name_the_flag_at_once(tmp_path, monkeypatch):
    assert "no such model directory" in model_problem("./no_such_model")
    (tmp_path / "empty").mkdir()
    assert "has no config.json" in model_problem(str(tmp_path / "empty"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    said = model_problem("Qwen/Qwen3-0.6b-typo")
    assert said.startswith("--model Qwen/Qwen3-0.6b-typo: not in the local hub cache")
    assert "neither a model directory nor a hub id" in model_problem("bad id!")


def test_a_failed_start_leaves_nothing_and_the_retry_runs_into_the_same_error(tmp_path):
    mix = tmp_path / "echo.yaml"
    mix.write_text(ECHO)
    model = tmp_path / "broken-model"
    model.mkdir()
    (model / "config.json").write_text("{}")  # passes the early check, fails when the trainer loads it
    run = tmp_path / "run"
    outputs = []
    for _ in range(2):
        out = io.StringIO()
        options = RunOptions(model=str(model), output_dir=run, warmup_sft=0, report=False)
        rc = train_command(mix, options, console=Console(file=out, width=300))
        outputs.append(out.getvalue())
        assert rc == 1 and not run.exists(), out.getvalue()[-2000:]
    assert "already holds a run" not in outputs[1]  # was: the retry refused, and --resume found no checkpoint


def test_resume_reapplies_the_first_starts_settings(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    overrides = {"settings": {"learning_rate": 0.001, "save_steps": 1}, "max_steps": 4}
    (run / "manifest.json").write_text(json.dumps({"overrides": overrides}))
    again = earlier_overrides(RunOptions(output_dir=run, resume="latest", settings={"save_steps": 2}))
    assert again.settings == {"learning_rate": 0.001, "save_steps": 2} and again.max_steps == 4
    fresh = RunOptions(output_dir=run, settings={"save_steps": 2})
    assert earlier_overrides(fresh) is fresh  # a new run takes only what it is given
