"""Ablation studies (`ormix ablate FILE --run`, `ormix.app._study`): arms trained and evaluated on the
full mixture's eval tasks, the arm × member matrix, the effects, the heatmap, skipping and resuming arms."""

from __future__ import annotations

import json
import shlex
import shutil
from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from ormix._errors import MixtureError, UsageError
from ormix.app._cli import app
from ormix.app._study import (
    StudyOptions,
    arm_done,
    command_line,
    effects_table,
    matrix_table,
    run_study,
    study_markdown,
)
from ormix.config import load_mixture_config
from ormix.evaluation._summary import summarize

runner = CliRunner()

MIXTURE = """\
name: tiny-study
members:
  echo: {target: "local:echo", num_tasks: 2, local_serve: thread}
  terminals: {target: "local:terminals", num_tasks: 2, local_serve: thread}
prompts_per_step: 2
train:
  max_steps: 1
  num_generations: 2
  max_completion_length: 24
  max_tool_calling_iterations: 2
  logging_steps: 1
  activation_checkpointing: false
  report_to: none
"""


def _console() -> tuple[Console, StringIO]:
    out = StringIO()
    return Console(file=out, width=200, color_system=None), out


def _fake_eval(run: Path, wins: dict[str, list[int]], config_hash: str) -> None:
    """An arm's run directory as a finished arm leaves it: a model directory and an eval of it (records,
    manifest, summary) with these successes per member and task."""
    (run / "model").mkdir(parents=True)
    (run / "eval").mkdir()
    records = [
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
    (run / "eval" / "rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    manifest = {
        "config_hash": config_hash,  # the full mixture's: every arm is evaluated on its tasks
        "k": [1],
        "members": {
            m: {"target": f"local:{m}", "split": "train", "tasks": list(range(len(w)))}
            for m, w in wins.items()
        },
    }
    (run / "eval" / "manifest.json").write_text(json.dumps(manifest))
    (run / "eval" / "summary.json").write_text(json.dumps(summarize(records, ks=(1,))))


def test_a_study_whose_arms_are_done_only_rebuilds_its_matrix(tmp_path: Path) -> None:
    # Arms made elsewhere (`--arm NAME` on other machines) and copied into one study directory: running the
    # study again trains nothing and writes the matrix, the effects and the heatmap from them.
    source = tmp_path / "mix.yaml"
    source.write_text(MIXTURE)
    study = tmp_path / "study"
    n, full = 12, load_mixture_config(source).config_hash()
    half = [1] * (n // 2) + [0] * (n // 2)
    _fake_eval(study / "arms" / "full", {"echo": [1] * n, "terminals": half}, full)
    _fake_eval(study / "arms" / "without-echo", {"echo": [0] * n, "terminals": half}, full)
    _fake_eval(study / "arms" / "without-terminals", {"echo": [1] * n, "terminals": [0] * n}, full)
    console, out = _console()
    result = run_study(source, StudyOptions(out_dir=study), console=console)
    assert result.exit_status == 0 and result.ran == [] and len(result.skipped) == 3
    assert "done already" in out.getvalue()
    data = json.loads((study / "study.json").read_text())
    assert [a["name"] for a in data["arms"]] == ["full", "without-echo", "without-terminals"]
    assert data["arms"][1]["trained"] == ["terminals"] and data["arms"][1]["dropped"] == ["echo"]
    assert data["budget"] == "same-total" and "same-total" in data["arms"][1]["budget"]
    assert data["matrix"]["without-echo"]["echo"]["pass@1"]["value"] == 0.0
    assert data["matrix"]["full"]["terminals"]["pass@1"]["value"] == 0.5
    # The effect of dropping echo, measured on echo (it stayed eval-only): arm − full, paired over tasks.
    on_echo = data["effects"]["without-echo"]["echo"]["pass@1"]
    assert on_echo["value"] == -1.0 and on_echo["high"] < 0 and on_echo["tasks"] == n
    assert data["effects"]["without-echo"]["terminals"]["pass@1"]["verdict"].startswith(
        "terminals: no detectable change"
    )
    assert data["effects"]["without-terminals"]["terminals"]["pass@1"]["value"] == -0.5
    md = (study / "study.md").read_text()
    assert "| without-echo | terminals | echo |" in md and "no detectable change" in md
    assert "| full | 1.00 [" in md
    assert (study / "heatmap.png").stat().st_size > 10_000
    # Each arm's file is there, self-contained: `ormix train <it>` trains that arm.
    assert "role: eval" in (study / "mixtures" / "without-echo.yaml").read_text()
    # The command it prints to continue it is accepted as the same study (the same options).
    again = runner.invoke(app, shlex.split(command_line(str(source), study, StudyOptions()))[1:])
    assert again.exit_code == 0 and again.output.count("done already") == 3, again.output
    # Asked again with another budget rule, the study refuses: its arms would not compare with new ones.
    with pytest.raises(UsageError, match="budget: 'same-total' → 'same-per-member'"):
        run_study(source, StudyOptions(out_dir=study, budget="same-per-member"), console=console)
    with pytest.raises(MixtureError, match="no arm named 'without-seta'"):
        run_study(source, StudyOptions(out_dir=study, arms=("without-seta",)), console=console)


def test_the_tables_say_which_arms_are_not_done() -> None:
    cell = {"value": 0.5, "low": 0.25, "high": 0.75, "n": 8}
    study = {
        "mixture": "m",
        "metric": "pass@1",
        "metrics": ["pass@1", "mean_reward"],
        "budget": "same-per-member",
        "k": [1],
        "members": ["a", "b"],
        "arms": [
            {
                "name": "full",
                "done": True,
                "trained": ["a", "b"],
                "dropped": [],
                "budget": "same-per-member: 4",
            },
            {"name": "without-a", "done": False, "trained": ["b"], "dropped": ["a"], "budget": "4 → 2"},
        ],
        "matrix": {"full": {"a": {"pass@1": cell}, "b": {"pass@1": cell}}},
        "effects": {},
    }
    assert matrix_table(study) == [
        ["arm", "a", "b"],
        ["full", "0.50 [0.25, 0.75]", "0.50 [0.25, 0.75]"],
        ["without-a", "(not done)", "(not done)"],
    ]
    assert matrix_table(study, "mean_reward")[1] == ["full", "-", "-"]
    assert effects_table(study) == [["arm", "a", "b"]]
    md = study_markdown(study)
    assert "Budget rule: **same-per-member**" in md and "| without-a | b | a | 4 → 2 |" in md
    assert "Not done yet: without-a" in md


def test_arm_done_needs_the_model_and_the_eval_summary(tmp_path: Path) -> None:
    run = tmp_path / "arm"
    (run / "model").mkdir(parents=True)
    assert not arm_done(run)
    (run / "eval").mkdir()
    (run / "eval" / "summary.json").write_text("{}")
    assert arm_done(run)
    # An eval of another mixture (e.g. the arm's own, by training) is not the study's.
    (run / "eval" / "manifest.json").write_text(json.dumps({"config_hash": "other"}))
    assert not arm_done(run, "full-hash") and arm_done(run, "other")


def test_study_flags_without_run_and_bad_flags_exit_2(tmp_path: Path) -> None:
    source = tmp_path / "mix.yaml"
    source.write_text(MIXTURE)
    result = runner.invoke(
        app, ["ablate", str(source), "--leave-one-out", "--out", str(tmp_path), "--arm", "full"]
    )
    assert result.exit_code == 2 and "--arm run(s) a study: add --run" in result.output
    result = runner.invoke(app, ["ablate", str(source), "--leave-one-out"])
    assert result.exit_code == 2 and "--out DIR is required" in result.output
    result = runner.invoke(app, ["ablate", str(source), "--run", "--budget", "same"])
    assert result.exit_code == 2 and "'same-total', 'same-per-member'" in result.output
    result = runner.invoke(
        app, ["ablate", str(source), "--run", "--max-steps", "0", "--out", str(tmp_path / "s")]
    )
    assert result.exit_code == 2 and "--max-steps" in result.output


# ── a real study: the tiny model, local servers, TRL ──────────────────


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "eval" / "rollouts.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_a_two_arm_study_runs_to_its_matrix_and_resumes_after_interruptions(
    tmp_path: Path, tiny_model
) -> None:
    source = tmp_path / "mix.yaml"
    source.write_text(MIXTURE)
    study = tmp_path / "study"
    # save_steps=1: every arm leaves a checkpoint, so an arm interrupted after it resumes from it.
    base = ["ablate", str(source), "--run", "--out", str(study), "-k", "1", "--set", "save_steps=1"]

    # 1. One arm (as on one machine of several): the full mixture, trained and evaluated.
    first = runner.invoke(app, [*base, "--arm", "full"])
    assert first.exit_code == 0, first.output
    data = json.loads((study / "study.json").read_text())
    assert [(a["name"], a["done"]) for a in data["arms"]] == [
        ("full", True),
        ("without-echo", False),
        ("without-terminals", False),
    ]
    # Evaluated on every member's eval tasks (here their test splits), with intervals.
    full = data["matrix"]["full"]
    assert {m: full[m]["pass@1"]["n"] for m in ("echo", "terminals")} == {"echo": 4, "terminals": 6}
    assert all(full[m]["pass@1"]["low"] is not None for m in ("echo", "terminals"))
    assert "Not done yet: without-echo, without-terminals" in (study / "study.md").read_text()
    assert (study / "heatmap.png").is_file() and data["effects"] == {}
    full_model = study / "arms" / "full" / "model"
    trained_at = full_model.stat().st_mtime_ns

    # 2. The second arm; the done one is skipped, not trained again.
    second = runner.invoke(app, [*base, "--arm", "full", "--arm", "without-terminals"])
    assert second.exit_code == 0, second.output
    assert "arm full (1/2): done already" in second.output
    assert full_model.stat().st_mtime_ns == trained_at
    arm = study / "arms" / "without-terminals"
    manifest = json.loads((arm / "manifest.json").read_text())
    assert manifest["config"]["members"]["terminals"]["role"] == "eval"  # not trained on, still evaluated
    trained = {json.loads(line)["member"] for line in next((arm / "rollouts").glob("*.jsonl")).open()}
    assert trained == {"echo"}
    assert {r["member"] for r in _records(arm)} == {"echo", "terminals"}  # the full mixture's eval tasks
    data = json.loads((study / "study.json").read_text())
    effect = data["effects"]["without-terminals"]["terminals"]["pass@1"]
    assert effect["tasks"] == 6 and effect["verdict"].startswith("terminals: ")
    assert effect["low"] <= effect["value"] <= effect["high"]
    matrix = (study / "study.md").read_text()
    assert "| without-terminals | echo | terminals |" in matrix and "arm − full, paired over tasks" in matrix

    # 3. The eval was interrupted (its last records and its summary lost): it resumes, with no training.
    log = (arm / "log_history.jsonl").read_text()
    (arm / "eval" / "summary.json").unlink()
    lines = (arm / "eval" / "rollouts.jsonl").read_text().splitlines(keepends=True)
    (arm / "eval" / "rollouts.jsonl").write_text("".join(lines[:-3]))
    third = runner.invoke(app, [*base, "--arm", "without-terminals"])
    assert third.exit_code == 0, third.output
    assert "resuming: 7 task(s) already done" in third.output
    assert (arm / "log_history.jsonl").read_text() == log and len(_records(arm)) == 10

    # 4. Training was interrupted after its checkpoint (no final model): it resumes from the checkpoint,
    # and the eval of the earlier model is not reused.
    shutil.rmtree(arm / "model")
    fourth = runner.invoke(app, [*base, "--arm", "without-terminals"])
    assert fourth.exit_code == 0, fourth.output
    assert "resuming without-terminals from" in fourth.output and "checkpoint-1" in fourth.output
    assert "its eval was of an earlier model; removed" in fourth.output
    assert arm_done(arm) and len(_records(arm)) == 10

    # 5. Training was interrupted before any checkpoint: the arm starts over (and is done again).
    shutil.rmtree(arm / "model")
    for checkpoint in arm.glob("checkpoint-*"):
        shutil.rmtree(checkpoint)
    fifth = runner.invoke(app, [*base, "--arm", "without-terminals"])
    assert fifth.exit_code == 0, fifth.output
    assert "stopped before its first checkpoint: starting it over" in fifth.output
    assert arm_done(arm) and json.loads((study / "study.json").read_text())["effects"]["without-terminals"]

    # 6. An eval of another mixture in the arm's eval/ (as training's own final eval would leave, on the
    # arm's eval sets): not the study's; replaced by the full mixture's.
    manifest_path = arm / "eval" / "manifest.json"
    manifest_path.write_text(json.dumps({**json.loads(manifest_path.read_text()), "config_hash": "other"}))
    sixth = runner.invoke(app, [*base, "--arm", "without-terminals"])
    assert sixth.exit_code == 0, sixth.output
    assert "holds an eval of another mixture: replaced by the full mixture's" in sixth.output
    full_eval = json.loads((study / "arms" / "full" / "eval" / "manifest.json").read_text())
    assert json.loads(manifest_path.read_text())["config_hash"] == full_eval["config_hash"]
    assert arm_done(arm, full_eval["config_hash"]) and len(_records(arm)) == 10


def test_an_arm_whose_eval_stopped_short_is_not_done(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "eval").mkdir()
    summary = tmp_path / "eval" / "summary.json"
    summary.write_text(json.dumps({"complete": False, "members": {}}))
    assert not arm_done(tmp_path)
    summary.write_text(json.dumps({"complete": True, "members": {}}))
    assert arm_done(tmp_path)


def test_the_heatmap_says_its_intervals_cover_seeds_when_the_arms_pool_several(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    from ormix.app._plots import study_heatmap

    source = tmp_path / "mix.yaml"
    source.write_text(MIXTURE)
    full = load_mixture_config(source).config_hash()
    labels = {}
    for seeds in ((), (0, 1)):
        study = tmp_path / f"study-{len(seeds)}"
        for arm in ("full", "without-echo", "without-terminals"):
            for run in [study / "arms" / arm / f"seed-{s}" for s in seeds] or [study / "arms" / arm]:
                _fake_eval(run, {"echo": [1, 0, 1, 1], "terminals": [0, 1, 0, 0]}, full)
        result = run_study(source, StudyOptions(out_dir=study, seeds=seeds), console=_console()[0])
        assert result.exit_status == 0 and result.ran == []
        data = json.loads((study / "study.json").read_text())
        try:
            labels[len(seeds)] = study_heatmap(data).axes[-1].get_ylabel()  # the colorbar's
        finally:
            plt.close("all")
        assert (len(seeds) > 1) == ("over seeds and tasks" in (study / "study.md").read_text())
    assert labels == {0: "pass@1 (95% interval over tasks)", 2: "pass@1 (95% interval over seeds and tasks)"}


def test_a_metric_the_studys_evals_do_not_report_exits_2_before_anything_trains(tmp_path: Path) -> None:
    source = tmp_path / "mix.yaml"
    source.write_text(MIXTURE)
    for metric, k in (("pass@4", "1"), ("pass1", "1,4")):
        study = tmp_path / f"study-{metric}"
        result = runner.invoke(
            app, ["ablate", str(source), "--run", "--metric", metric, "-k", k, "--out", str(study)]
        )
        said = " ".join(result.output.split())
        assert result.exit_code == 2, result.output
        assert f"--metric {metric!r} is not a metric of the study's evals (-k {k})" in said
        assert "choose from pass@1, pass^1" in said and "needs it in -k too" in said
        assert not study.exists()  # no arm file, no study.json, no run
