"""Evidence a study can trust (issue 39): one start per study recorded by path and sha256 in every run's
manifest (`ormix eval --model RUN_DIR@start` evaluates it), arms × training seeds with intervals over seeds
and tasks, runs from different starts refused, the command that finishes an interrupted study, and a warm
start that refuses to train on episodes that never scored."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from ormix._errors import UsageError
from ormix._runs import weights_sha256
from ormix.app._cli import app
from ormix.app._eval_model import resolve_eval_model
from ormix.app._study import StudyOptions, command_line, run_study
from ormix.config import load_mixture_config
from ormix.evaluation._errors import EvalError
from ormix.evaluation._summary import summarize

runner = CliRunner()
SRC = Path(__file__).resolve().parents[2] / "src"
USER_ENVS = Path(__file__).resolve().parents[1] / "data" / "user_envs"

# Two members evaluated on their training tasks (the warm start memorises them, so the start scores there):
# a study's effects are then real numbers, not zeros of a model that never calls a tool.
MIXTURE = """\
name: one-start
members:
  echo: {target: "local:echo", num_tasks: 2, local_serve: thread, eval: {indices: [0, 1]}}
  terminals: {target: "local:terminals", num_tasks: 1, local_serve: thread, eval: {indices: [0]}}
prompts_per_step: 2
warm_start: {sft_steps: 80}
train:
  max_steps: 1
  num_generations: 2
  max_completion_length: 128
  max_tool_calling_iterations: 2
  logging_steps: 1
  activation_checkpointing: false
  report_to: none
"""


def _console() -> tuple[Console, StringIO]:
    out = StringIO()
    return Console(file=out, width=400, color_system=None), out


def _records(wins: dict[str, list[int]]) -> list[dict[str, Any]]:
    return [
        {
            "mode": "eval",
            "member": m,
            "split": "train",
            "task_index": t,
            "outcome": "scored",
            "env_reward": float(w),
        }
        for m, per_task in wins.items()
        for t, w in enumerate(per_task)
    ]


def _finished_run(run: Path, wins: dict[str, list[int]], config_hash: str, start_sha: str | None) -> None:
    """A run directory as a finished study run leaves it: its manifest (with the start it recorded), a model
    directory and an eval of the full mixture's tasks."""
    (run / "model").mkdir(parents=True)
    (run / "eval").mkdir()
    start = {"path": f"/starts/{start_sha}", "sha256": start_sha, "base": "ormix:tiny", "warm_start": None}
    (run / "manifest.json").write_text(json.dumps({"start": start} if start_sha else {}))
    (run / "train_args.json").write_text("{}")
    records = _records(wins)
    (run / "eval" / "rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    manifest = {
        "config_hash": config_hash,
        "k": [1],
        "members": {
            m: {"target": f"local:{m}", "split": "train", "tasks": list(range(len(w)))}
            for m, w in wins.items()
        },
    }
    (run / "eval" / "manifest.json").write_text(json.dumps(manifest))
    (run / "eval" / "summary.json").write_text(json.dumps(summarize(records, ks=(1,))))


def _source(tmp_path: Path) -> tuple[Path, str]:
    source = tmp_path / "mix.yaml"
    source.write_text(MIXTURE)
    return source, load_mixture_config(source).config_hash()


# ── fast: studies assembled from finished runs ───────────────────────


def test_runs_that_started_from_different_models_are_refused_unless_allowed(tmp_path: Path) -> None:
    source, full = _source(tmp_path)
    study = tmp_path / "study"
    n = 8
    _finished_run(study / "arms" / "full", {"echo": [1] * n, "terminals": [1] * n}, full, "a" * 64)
    _finished_run(study / "arms" / "without-echo", {"echo": [0] * n, "terminals": [1] * n}, full, "a" * 64)
    _finished_run(
        study / "arms" / "without-terminals", {"echo": [1] * n, "terminals": [0] * n}, full, "b" * 64
    )
    console, _ = _console()
    with pytest.raises(UsageError, match="started from different models") as raised:
        run_study(source, StudyOptions(out_dir=study), console=console)
    message = str(raised.value)
    assert "aaaaaaaaaaaa: full, without-echo" in message and "bbbbbbbbbbbb: without-terminals" in message
    assert "--allow-different-starts" in message
    # Asked to, the study compares them, and says so at the top of study.md.
    result = run_study(source, StudyOptions(out_dir=study, allow_different_starts=True), console=console)
    assert (
        result.exit_status == 0 and result.study["effects"]["without-echo"]["echo"]["pass@1"]["value"] == -1.0
    )
    md = (study / "study.md").read_text()
    assert md.splitlines()[2].startswith("> **WARNING: the arms did not all start from the same model**")
    assert "Every arm starts from `/starts/aaaa" in md  # the start the full arm recorded
    # Same starts: no refusal, no warning.
    _finished_run(study / "arms" / "x", {}, full, None)
    (study / "arms" / "without-terminals" / "manifest.json").write_text(
        (study / "arms" / "full" / "manifest.json").read_text()
    )
    result = run_study(source, StudyOptions(out_dir=study), console=console)
    assert result.study["different_starts"] == {} and "WARNING" not in (study / "study.md").read_text()


def test_seeds_pool_into_cells_and_effects_whose_intervals_cover_seeds_and_tasks(tmp_path: Path) -> None:
    source, full = _source(tmp_path)
    study = tmp_path / "study"
    n = 12
    wins = {
        "full": [[1] * n, [1] * (n - 2) + [0] * 2],
        "without-echo": [[0] * n, [0] * (n - 1) + [1]],
        "without-terminals": [[1] * n, [1] * n],
    }
    for arm, per_seed in wins.items():
        for seed, echo in enumerate(per_seed):
            run = study / "arms" / arm / f"seed-{seed}"
            _finished_run(run, {"echo": echo, "terminals": [1, 0] * (n // 2)}, full, "a" * 64)
    console, out = _console()
    result = run_study(source, StudyOptions(out_dir=study, seeds=(0, 1)), console=console)
    assert result.exit_status == 0 and len(result.skipped) == 6, out.getvalue()
    data = result.study
    assert data["seeds"] == [0, 1] and data["options"]["seeds"] == [0, 1]
    cell = data["matrix"]["full"]["echo"]["pass@1"]
    assert (
        cell["seeds"] == 2 and cell["covers"] == "seeds and tasks" and cell["value"] == pytest.approx(11 / 12)
    )
    effect = data["effects"]["without-echo"]["echo"]["pass@1"]
    assert effect["covers"] == "seeds and tasks" and effect["seeds"] == [2, 2] and effect["high"] < 0
    md = (study / "study.md").read_text()
    assert "trained with seeds 0, 1" in md and "over seeds and tasks" in md
    # A study directory remembers its seeds: other seeds would not compare.
    with pytest.raises(UsageError, match=r"seeds: \[0, 1\] → \[0, 1, 2\]"):
        run_study(source, StudyOptions(out_dir=study, seeds=(0, 1, 2)), console=console)


def test_an_arm_run_alone_prints_the_command_that_runs_the_rest(tmp_path: Path) -> None:
    source, full = _source(tmp_path)
    study = tmp_path / "study"
    _finished_run(study / "arms" / "full", {"echo": [1, 1], "terminals": [1, 0]}, full, "a" * 64)
    console, out = _console()
    options = StudyOptions(out_dir=study, arms=("full",), k=(1,))
    result = run_study(source, options, console=console)
    assert result.exit_status == 0, out.getvalue()
    whole = command_line(str(source), study, StudyOptions(out_dir=study, k=(1,)))
    assert "--arm" not in whole
    assert f"arms not done yet: without-echo, without-terminals; run them with:\n  {whole}" in out.getvalue()
    assert f"(run the study again: `{whole}`)" in (study / "study.md").read_text()


class _CtrlCAtFirstRun(Console):
    """A console whose user presses Ctrl-C when the study's first run starts (its rule is drawn)."""

    def rule(self, *args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt


def test_an_interrupted_study_prints_the_command_that_finishes_all_of_it(tmp_path: Path, tiny_model) -> None:
    source, _ = _source(tmp_path)
    study = tmp_path / "study"
    out = StringIO()
    # No warm start here (--warmup-sft 0): the study's start is the tiny model itself.
    options = StudyOptions(out_dir=study, warmup_sft=0, max_steps=1)
    result = run_study(source, options, console=_CtrlCAtFirstRun(file=out, width=400, color_system=None))
    assert result.exit_status == 130
    printed = out.getvalue()
    whole = command_line(str(source), study, options)
    assert f"continue the study with:\n  {whole}" in printed and "--arm" not in whole
    # The command is the same study (same options), and asks for every arm.
    assert shlex.split(whole)[1:4] == ["ablate", str(source), "--run"]
    # Run with --arm, the command keeps the arms the user asked for.
    arm_only = StudyOptions(out_dir=study, warmup_sft=0, max_steps=1, arms=("full",))
    result = run_study(source, arm_only, console=_CtrlCAtFirstRun(file=out, width=400, color_system=None))
    assert f"continue the study with:\n  {command_line(str(source), study, arm_only)}" in out.getvalue()
    assert command_line(str(source), study, arm_only).endswith("--arm full")


def test_eval_model_run_dir_at_start_is_the_recorded_start(tmp_path: Path) -> None:
    start = tmp_path / "warm"
    start.mkdir()
    (start / "config.json").write_text("{}")
    (start / "model.safetensors").write_bytes(b"the start's weights")
    run = tmp_path / "run"
    run.mkdir()
    (run / "train_args.json").write_text("{}")
    manifest = {"start": {"path": str(start), "sha256": weights_sha256(start), "base": "ormix:tiny"}}
    (run / "manifest.json").write_text(json.dumps(manifest))
    path, label, out = resolve_eval_model(f"{run}@start")
    assert (path, label, out) == (str(start), f"{run}@start", run / "eval-start")
    # Weights replaced since the run started: not the start any more.
    (start / "model.safetensors").write_bytes(b"other weights")
    with pytest.raises(EvalError, match="no longer holds the weights the run started from"):
        resolve_eval_model(f"{run}@start")
    # A run whose manifest records no start, and a directory that is no run.
    (run / "manifest.json").write_text("{}")
    with pytest.raises(EvalError, match="records no start"):
        resolve_eval_model(f"{run}@start")
    with pytest.raises(EvalError, match="is no run directory"):
        resolve_eval_model(f"{start}@start")


def test_train_seed_is_grpo_seed_only_and_a_resumed_run_keeps_it(tmp_path: Path) -> None:
    from ormix.app._train import RunOptions
    from ormix.app._train.prepare import earlier_overrides, load_run_config, plan_run
    from ormix.mixture import MixtureSpec

    source, _ = _source(tmp_path)
    mix = MixtureSpec.from_config(load_run_config(source))
    try:
        run = plan_run(mix, RunOptions(seed=7, output_dir=tmp_path / "run", warmup_sft=0))
    finally:
        mix.close()
    assert run.args.seed == 7 and run.warm_seed == 0  # the warm start (and the plan) keep the mixture's seed
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "manifest.json").write_text(json.dumps({"overrides": {"settings": {}, "seed": 7}}))
    resumed = earlier_overrides(RunOptions(resume="latest", output_dir=tmp_path / "run"))
    assert resumed.seed == 7
    assert earlier_overrides(RunOptions(resume="latest", output_dir=tmp_path / "run", seed=3)).seed == 3


def test_a_warm_start_whose_reference_episodes_never_score_is_refused(tmp_path: Path, tiny_model) -> None:
    # A user's environment whose scoring tool raises on every call, with a reference solution: each reference
    # episode plays, and none scores. SFT on them would teach calls that score nothing.
    mixture = tmp_path / "raising.yaml"
    mixture.write_text(
        f"base_dir: {USER_ENVS}\n"
        "members:\n"
        '  mine: {target: "broken_tool_raises:Env", num_tasks: 2, reference: "_base:solve"}\n'
        "train: {max_steps: 1, num_generations: 2, max_completion_length: 16, report_to: none}\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "400"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ormix.app",
            "train",
            str(mixture),
            "--warmup-sft",
            "4",
            "--output-dir",
            "run",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 2, out[-3000:]
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in out, out[-3000:]
    assert errors[0].startswith("error: warm start: 0 of 2 reference episodes scored"), errors
    assert "(mine: answer raised ToolCallError: 'score')" in errors[0] and "--policy reference" in errors[0]
    assert "sft step" not in out  # nothing was trained


# ── slow: real studies (tiny model, local servers, TRL) ──────────────


def _study(tmp_path: Path) -> tuple[Path, Path]:
    source, _ = _source(tmp_path)
    return source, tmp_path / "study"


def _manifest(run: Path) -> dict[str, Any]:
    return json.loads((run / "manifest.json").read_text())


@pytest.mark.slow
def test_a_study_whose_training_changes_nothing_reports_every_effect_as_exactly_0(
    tmp_path: Path, tiny_model
) -> None:
    # learning_rate=0: GRPO changes no weight, so every arm's model is the study's one start, and every effect
    # must be exactly 0. (Arms warmed on their own members, as before, differed here by their starts.)
    source, study = _study(tmp_path)
    args = ["ablate", str(source), "--run", "--out", str(study), "--only", "echo", "-k", "1,4"]
    done = runner.invoke(app, [*args, "--set", "learning_rate=0"])
    assert done.exit_code == 0, done.output
    data = json.loads((study / "study.json").read_text())
    assert [a["name"] for a in data["arms"]] == ["full", "only-echo"] and all(a["done"] for a in data["arms"])
    starts = [_manifest(study / "arms" / arm)["start"] for arm in ("full", "only-echo")]
    assert (
        starts[0]["sha256"]
        == starts[1]["sha256"]
        == data["start"]["sha256"]
        == weights_sha256(study / "start")
    )
    assert starts[0]["warm_start"]["members"] == ["echo", "terminals"]  # the FULL mixture's train members
    # The start scores (it calls the tools), so identical numbers are evidence, not zeros of a silent model.
    assert data["matrix"]["full"]["echo"]["pass@4"]["value"] > 0
    for member in ("echo", "terminals"):
        for metric, effect in data["effects"]["only-echo"][member].items():
            assert effect["value"] == 0.0, (member, metric, effect)
    md = (study / "study.md").read_text()
    assert (
        f"Every arm starts from `{(study / 'start').resolve()}` (sha256 `{starts[0]['sha256'][:12]}…`)" in md
    )
    # `ormix eval --model RUN_DIR@start` evaluates that start: here, what the arm's own eval saw.
    evaluated = runner.invoke(
        app, ["eval", str(source), "--model", f"{study / 'arms' / 'full'}@start", "-k", "1,4"]
    )
    assert evaluated.exit_code == 0, evaluated.output
    at_start = json.loads((study / "arms" / "full" / "eval-start" / "summary.json").read_text())
    after = json.loads((study / "arms" / "full" / "eval" / "summary.json").read_text())
    assert at_start["members"] == after["members"]


@pytest.mark.slow
def test_a_study_over_two_seeds_runs_arms_times_seeds_with_intervals_over_seeds(
    tmp_path: Path, tiny_model
) -> None:
    source, study = _study(tmp_path)
    args = ["ablate", str(source), "--run", "--out", str(study), "--seeds", "0,1"]
    done = runner.invoke(app, [*args, "--arm", "full", "--arm", "without-terminals", "--max-steps", "2"])
    assert done.exit_code == 0, done.output
    runs = sorted(p.relative_to(study).as_posix() for p in study.glob("arms/*/seed-*/model"))
    assert runs == [f"arms/{arm}/seed-{s}/model" for arm in ("full", "without-terminals") for s in (0, 1)]
    seeds = {
        json.loads((study / "arms" / "full" / f"seed-{s}" / "train_args.json").read_text())["seed"]
        for s in (0, 1)
    }
    assert seeds == {0, 1}
    hashes = {_manifest(run.parent)["start"]["sha256"] for run in study.glob("arms/*/seed-*/model")}
    assert hashes == {weights_sha256(study / "start")}
    data = json.loads((study / "study.json").read_text())
    cell = data["matrix"]["full"]["echo"]["pass@1"]
    assert cell["covers"] == "seeds and tasks" and cell["seeds"] == 2
    effect = data["effects"]["without-terminals"]["terminals"]["pass@1"]
    assert effect["covers"] == "seeds and tasks" and effect["seeds"] == [2, 2]
    # The arm not asked for: the command that runs it is printed.
    assert "arms not done yet: without-echo; run them with:" in done.output


def test_a_resumed_run_keeps_the_start_of_its_first_start(tmp_path: Path) -> None:
    from ormix._runs import RunDirectory

    run = RunDirectory(tmp_path / "run")
    checkpoint = tmp_path / "run" / "checkpoint-2"
    checkpoint.mkdir(parents=True)
    (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": 2}))
    start = {"path": "/warm", "sha256": "c" * 64, "base": "ormix:tiny", "warm_start": {"steps": 9}}
    run.manifest_path.write_text(json.dumps({"start": start}))
    resumed = run.resumed_manifest({"resolved_hash": None}, checkpoint, [], False)
    assert resumed["start"] == start and resumed["resumes"][0]["step"] == 2
    assert run.start() == start


@pytest.mark.slow
def test_a_warm_started_run_records_its_warm_start_and_keeps_it_when_resumed(
    tmp_path: Path, tiny_model
) -> None:
    source, _ = _source(tmp_path)
    base = [
        "train",
        str(source),
        "--output-dir",
        str(tmp_path / "run"),
        "--set",
        "save_steps=1",
        "--max-steps",
        "2",
    ]
    first = runner.invoke(app, base)
    assert first.exit_code == 0, first.output
    start = _manifest(tmp_path / "run")["start"]
    warm = Path(start["path"])
    assert warm.name.startswith("warm-") and (warm / "ormix-warm.json").is_file()  # the cached warm start
    assert start["sha256"] == weights_sha256(warm) and start["base"] == "ormix:tiny"
    assert start["warm_start"]["steps"] == 80 and start["warm_start"]["scored"] == 3
    assert start["warm_start"]["over_completion_budget"] == 0  # the longest reference fits in 128 tokens
    assert f"start: {warm} (sha256 {start['sha256'][:12]})" in first.output
    resumed = runner.invoke(app, [*base, "--resume", str(tmp_path / "run" / "checkpoint-1")])
    assert resumed.exit_code == 0, resumed.output
    manifest = _manifest(tmp_path / "run")
    assert manifest["start"] == start and manifest["resumes"]


def test_seeds_flags_are_checked(tmp_path: Path) -> None:
    source, _ = _source(tmp_path)
    done = runner.invoke(
        app, ["ablate", str(source), "--leave-one-out", "--out", str(tmp_path), "--seeds", "0,1"]
    )
    assert done.exit_code == 2 and "--seeds run(s) a study: add --run" in done.output
    done = runner.invoke(
        app, ["ablate", str(source), "--run", "--out", str(tmp_path / "s"), "--seeds", "0,0"]
    )
    assert done.exit_code == 2 and "--seeds takes distinct integers" in done.output
