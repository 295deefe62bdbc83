"""Flags no other test sets, each through the command line to what it changes in a real run: `ormix train
--lookahead` and `--sequential-envs` (the trainer's own step metrics say which loop ran and whether sessions
were opened ahead), `ormix eval --chunk` (what the eval directory records), `ormix check
--tolerate-tool-errors` (the exit status), `upload.close_timeout_s` (how long the end of a run waits),
`evaluation.after_training` (the final eval, and the manifest), `ormix train --no-save-on-interrupt` (the
checkpoint a Ctrl-C leaves) and `--warmup-fraction` (the warm start's episodes).

The runs are the smallest real ones: a one-member `local:echo` mixture served from a thread, the offline tiny
model, two GRPO steps of two rollouts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from ormix.app import app

pytestmark = pytest.mark.slow

USER_ENVS = Path(__file__).resolve().parents[1] / "data" / "user_envs"

ECHO = """\
name: flags
seed: 0
prompts_per_step: 1
num_samples: 2
members:
  echo:
    target: local:echo
    num_tasks: 2
    local_serve: thread
train:
  max_steps: 2
  num_generations: 2
  per_device_train_batch_size: 2
  max_completion_length: 8
  use_cpu: true
  report_to: none
"""


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")


def _invoke(tmp_path: Path, *flags: str, mixture: str = ECHO, warmup_sft: int = 0) -> tuple[Result, Path]:
    """`ormix train` on `mixture` into ``tmp_path/run``: the result and the run directory."""
    file = tmp_path / "flags.yaml"
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(mixture)
    run = tmp_path / "run"
    argv = ["train", str(file), "--output-dir", str(run), "--warmup-sft", str(warmup_sft), *flags]
    return CliRunner().invoke(app, argv, terminal_width=200), run


def _train(tmp_path: Path, *flags: str, mixture: str = ECHO, warmup_sft: int = 0) -> list[dict]:
    result, run = _invoke(tmp_path, *flags, mixture=mixture, warmup_sft=warmup_sft)
    # The untrained tiny model may score nothing in two steps (exit 1, said on the last line): the run still
    # ran both steps, which is what these tests read.
    assert result.exit_code in (0, 1), result.output[-3000:]
    history = [json.loads(line) for line in (run / "log_history.jsonl").read_text().splitlines()]
    return [h for h in history if "ormix/env/open_s" in h or "loss" in h]


def _manifest(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "run" / "manifest.json").read_text())


def test_lookahead_0_opens_no_session_ahead_where_the_default_does(tiny_model, tmp_path):
    default = _train(tmp_path / "default")
    assert default[-1].get("ormix/env/opened_ahead", 0) > 0  # step 2's sessions opened during step 1
    none_ahead = _train(tmp_path / "zero", "--lookahead", "0")
    assert len(none_ahead) == len(default) == 2
    assert all(step.get("ormix/env/opened_ahead", 0) == 0 for step in none_ahead)


def test_sequential_envs_runs_trls_own_loop(tiny_model, tmp_path):
    steps = _train(tmp_path, "--sequential-envs")
    assert len(steps) == 2
    # ormix's concurrent trainer logs where each step's time went; TRL's own loop does not.
    assert not any(key.startswith("ormix/env/") for step in steps for key in step)


def test_eval_chunk_sets_how_many_tasks_run_at_once(tmp_path, monkeypatch):
    # The eval records no chunk size of its own: the chunks it runs (one `evaluate()` each) say it.
    from ormix.app import _eval

    chunks: dict[int, list[list]] = {}

    def recorded(tasks, size):
        chunks[size] = _eval_chunks(tasks, size)
        return chunks[size]

    _eval_chunks = _eval.interleaved_chunks
    monkeypatch.setattr(_eval, "interleaved_chunks", recorded)
    for chunk in (1, 2):
        result = CliRunner().invoke(
            app,
            ["eval", str(USER_ENVS / "good.yaml"), "--policy", "reference", "--samples", "1"]
            + ["--chunk", str(chunk), "--out", str(tmp_path / f"chunk-{chunk}")],
        )
        assert result.exit_code == 0, result.output[-3000:]
    assert set(chunks) == {1, 2}
    assert {len(c) for c in chunks[1]} == {1} and max(len(c) for c in chunks[2]) == 2
    assert len(chunks[1]) > len(chunks[2])


def test_tolerate_tool_errors_turns_a_raising_tool_into_exit_0():
    file = str(USER_ENVS / "broken_tool_raises.yaml")
    assert CliRunner().invoke(app, ["check", file]).exit_code == 1
    tolerated = CliRunner().invoke(app, ["check", file, "--tolerate-tool-errors"])
    assert tolerated.exit_code == 0, tolerated.output[-3000:]


def test_evaluation_after_training_false_skips_the_final_eval_and_the_manifest_says_so(tiny_model, tmp_path):
    # before_training on: the evals around training are asked for, and this one runs; only the final one
    # is not asked.
    evaluation = "evaluation:\n  samples: 1\n  before_training: true\n  after_training: false\n"
    _train(tmp_path, mixture=ECHO + evaluation)
    run = tmp_path / "run"
    evaluated = _manifest(tmp_path)["evaluation"]
    assert evaluated["before"]["ran"] and (run / "eval-before").is_dir()
    assert not evaluated["after"]["ran"] and not (run / "eval").exists()
    assert evaluated["after"]["reason"] == "not asked (evaluation.after_training is false)"


@pytest.fixture
def ctrl_c_after_step_1(monkeypatch):
    """Ctrl-C once step 1 has ended: the KeyboardInterrupt the main thread gets, raised at that point."""
    from transformers.trainer_callback import CallbackHandler

    original = CallbackHandler.on_step_end

    def on_step_end(self, args, state, control):
        control = original(self, args, state, control)
        if state.global_step == 1:
            raise KeyboardInterrupt
        return control

    monkeypatch.setattr(CallbackHandler, "on_step_end", on_step_end)


@pytest.mark.usefixtures("ctrl_c_after_step_1")
def test_no_save_on_interrupt_leaves_no_checkpoint_where_the_default_saves_the_last_step(
    tiny_model, tmp_path
):
    checkpoints = {}
    for name, flags in (("default", ()), ("no-save", ("--no-save-on-interrupt",))):
        result, run = _invoke(tmp_path / name, *flags)
        assert result.exit_code == 130, result.output[-3000:]
        checkpoints[name] = sorted(p.name for p in run.glob("checkpoint-*"))
    assert checkpoints == {"default": ["checkpoint-1"], "no-save": []}


def test_warmup_fraction_warms_only_that_part_of_each_members_tasks(tiny_model, tmp_path):
    warmed = {}
    for name, flags in (("default", ()), ("half", ("--warmup-fraction", "0.5"))):
        _train(tmp_path / name, "--max-steps", "1", *flags, warmup_sft=1)
        warmed[name] = _manifest(tmp_path / name)["start"]["warm_start"]
    # local:echo with num_tasks 2: each task's reference episode, or the first half of them.
    assert (warmed["default"]["fraction"], warmed["default"]["episodes"]) == (1.0, 2)
    assert (warmed["half"]["fraction"], warmed["half"]["episodes"]) == (0.5, 1)
