"""The main job: `ormix train` (via `train_command` and the console script), settings, and the warm start.

Everything runs for real: the local environments are served on loopback (child processes, as `ormix train`
does), GRPO runs on ormix's offline tiny model on the CPU, and the run directory is checked file by file.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from ormix import MixtureSpec, OpenRewardSpec
from ormix.app import app
from ormix.app._train import train_command

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "mixtures" / "local-demo.yaml"


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")


def _console() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, width=240, color_system=None), buffer


def _echo_mix(**kwargs) -> MixtureSpec:
    # Constructing a mixture contacts no server: these tests of settings stay offline and fast.
    return MixtureSpec(
        {"a": OpenRewardSpec("local:echo", num_tasks=4), "b": OpenRewardSpec("local:echo", indices=[5])},
        **kwargs,
    )


def test_bad_inputs_exit_2_before_any_server(tmp_path):
    console, out = _console()
    rc = train_command(
        DEMO,
        model=None,
        max_steps=1,
        output_dir=tmp_path / "run",
        warmup_sft=0,
        overrides=["num_generatoins=2"],
        console=console,
    )
    assert (
        rc == 2
        and "num_generatoins: not a GRPOConfig setting; did you mean 'num_generations'" in out.getvalue()
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text(DEMO.read_text().replace("learning_rate:", "learnin_rate:"))
    console, out = _console()
    rc = train_command(
        bad, model=None, max_steps=1, output_dir=tmp_path / "run", warmup_sft=0, overrides=[], console=console
    )
    assert rc == 2 and "train.learnin_rate: not a GRPOConfig setting" in out.getvalue()
    assert not (tmp_path / "run").exists()


def test_a_run_that_never_scored_ends_with_a_line_naming_it_and_exit_1_when_no_member_scored(tmp_path):
    from ormix.app._train import RunOptions, TrainResult
    from ormix.app._train.finish import finish_run
    from ormix.app._train.prepare import PlannedRun
    from ormix.app._workspace import Workspace

    run = PlannedRun(Workspace(tmp_path), None, [], None, 0, 1.0, 0)
    history = [{"step": 1, "loss": 0.0}]
    cases = (
        (0.5, 0, "warning: never scored: mine (coverage 0"),  # another member scored: the run succeeded
        (None, 1, "error: no member was ever scored: mine (coverage 0"),  # other: no training rollouts
        (0.0, 1, "error: no member was ever scored: mine, other (coverage 0"),  # GRPO had nothing to learn
    )
    for coverage, status, label in cases:
        summary = {"mine": {"coverage": 0.0}, "other": {"coverage": coverage}}
        result = TrainResult(tmp_path, log_history=history, summary=summary)
        console, out = _console()
        finish_run("m.yaml", run, RunOptions(report=False), result, console)
        last = out.getvalue().strip().splitlines()[-1]
        assert result.exit_status == status and last.startswith(label), out.getvalue()
    result = TrainResult(tmp_path, log_history=history, summary={"mine": {"coverage": 0.0}}, interrupted=True)
    assert result.exit_status == 130  # Ctrl-C still says Ctrl-C


def test_a_resume_does_not_report_the_tied_lm_head_as_missing(tiny_model, caplog):
    import logging

    from transformers import AutoModelForCausalLM

    from ormix.trl._lifecycle import quiet_trainer

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    assert model.lm_head.weight is model.get_input_embeddings().weight  # tied: not saved, "missing"
    log = logging.getLogger("transformers.trainer")
    with caplog.at_level(logging.WARNING, logger="transformers.trainer"), quiet_trainer(model):
        # What transformers' Trainer logs when it resumes from a checkpoint of a tied model.
        log.warning("There were missing keys in the checkpoint model loaded: ['lm_head.weight'].")
        log.warning("There were missing keys in the checkpoint model loaded: ['model.norm.weight'].")
    said = [r.getMessage() for r in caplog.records]
    assert said == ["There were missing keys in the checkpoint model loaded: ['model.norm.weight']."]


# ── the main job, end to end ──────────────────────────────────────────


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory) -> tuple[Path, str]:
    """One run of the README's main job, read by the tests below: the installed `ormix` console script on the
    demo file, 2 steps, no warm start (its SFT costs minutes); the run directory and what it printed."""
    exe = shutil.which("ormix", path=str(Path(sys.executable).parent))
    assert exe, "the ormix console script is not installed in this environment"
    run = tmp_path_factory.mktemp("demo") / "run"
    command = [exe, "train", str(DEMO), "--max-steps", "2", "--output-dir", str(run)]
    done = subprocess.run(
        [*command, "--set", "max_completion_length=16", "--warmup-sft", "0"],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=run.parent,
        env={**os.environ, "COLUMNS": "240"},  # one progress line per step, as on a wide terminal
    )
    # Without a warm start the tiny model may score nothing in 2 steps: then the run fails (exit 1) with a
    # last line naming every member, and is otherwise complete.
    history = [json.loads(line) for line in (run / "log_history.jsonl").read_text().splitlines()]
    coverage = [h[k] for h in history for k in h if k.startswith("ormix/") and k.endswith("/coverage")]
    unscored = bool(coverage) and not any(coverage)
    for bar in ("Loading weights", "Writing model shards"):  # ormix prints one line per step, no bars
        assert bar not in done.stderr + done.stdout, done.stderr[-3000:]
    assert done.returncode == (1 if unscored else 0), done.stdout[-3000:] + done.stderr[-3000:]
    if unscored:
        assert done.stdout.strip().splitlines()[-1].startswith("error: no member was ever scored: echo")
    return run, done.stdout


@pytest.mark.slow
def test_train_command_runs_the_demo_and_writes_the_run_directory(demo_run):
    run, text = demo_run

    manifest = json.loads((run / "manifest.json").read_text())
    assert set(manifest["members"]) == {"echo", "terminals", "seta"} and len(manifest["hash"]) == 64
    args = json.loads((run / "train_args.json").read_text())
    assert args["shuffle_dataset"] is False and args["remove_unused_columns"] is False
    assert args["max_steps"] == 2 and args["max_completion_length"] == 16
    assert (
        args["per_device_train_batch_size"] * args["gradient_accumulation_steps"]
        == 4 * args["num_generations"]
    )

    steps = [json.loads(line) for line in (run / "log_history.jsonl").read_text().splitlines()]
    logged = [s for s in steps if "loss" in s]
    assert [s["step"] for s in logged] == [1, 2]
    for s in logged:  # every member's reward and coverage, every step
        for member in ("echo", "terminals", "seta"):
            assert f"rewards/{member}/mean" in s and f"ormix/{member}/coverage" in s
            # 4 prompts per step at 0.2/0.4/0.4 by largest remainder (the adaptive warm-up steps): all present
            assert s[f"ormix/{member}/share"] > 0
    # seta counts an unscored rollout as 0.0 (unscored_reward in the file): its mean is a number
    assert all(isinstance(s["rewards/seta/mean"], float) for s in logged)

    records = [
        json.loads(line)
        for f in sorted((run / "rollouts").glob("*.jsonl"))
        for line in f.read_text().splitlines()
    ]
    assert len(records) == 2 * 4 * args["num_generations"]
    assert {r["member"] for r in records} == {"echo", "terminals", "seta"}
    assert list((run / "completions").glob("*.parquet"))
    assert (run / "report" / "summary.json").is_file() and (run / "report" / "report.md").is_file()
    assert (run / "model" / "config.json").is_file()

    lines = [line for line in text.splitlines() if line.startswith("step ")]
    assert len(lines) == 2 and all(
        "echo r" in line and "terminals r" in line and "seta r" in line and "cov" in line for line in lines
    )
    assert f"run directory: {run}" in text.replace("\n", "")


@pytest.mark.slow
def test_the_demo_ends_with_its_model_evaluated_before_and_after_training_and_the_comparison(demo_run):
    run, text = demo_run
    for name in ("eval-before", "eval"):
        summary = json.loads((run / name / "summary.json").read_text())
        assert summary["k"] == [1, 4] and set(summary["members"]) == {"echo", "terminals", "seta"}
        for entry in summary["members"].values():
            # the demo's eval sets: its 2 training tasks a member, 4 samples each, every figure an interval
            assert entry["tasks"] == 2 and entry["samples"] == 8
            assert entry["pass@4"]["low"] <= entry["pass@4"]["value"] <= entry["pass@4"]["high"]
        records = [json.loads(line) for line in (run / name / "rollouts.jsonl").read_text().splitlines()]
        assert len(records) == 24 and {r["mode"] for r in records} == {"eval"}
    comparison = json.loads((run / "eval-comparison" / "comparison.json").read_text())
    (verdicts,) = [c["verdicts"] for c in comparison["comparisons"]]
    assert set(verdicts) == {"pass@1", "pass@4"}
    # what the run printed (its report): the final eval, then the change, per member, with its interval
    assert "eval of the trained model" in text and "what training changed" in text
    report = (run / "report" / "report.md").read_text()
    assert "Eval of the trained model" in report and "What training changed" in report
    finals = json.loads((run / "report" / "summary.json").read_text())["run_evals"]
    assert set(finals) == {"before", "after", "change"} and finals["change"] == verdicts
    pass1 = next(line for line in text.splitlines() if line.strip().startswith("pass@1: "))
    assert all(f"{m}: " in pass1 for m in ("echo", "terminals", "seta")) and "[" in pass1
    # the eval draws its own progress bar: no per-step progress line for it
    assert not [line for line in text.splitlines() if line.startswith("eval @ step")]
    # `ormix eval --model RUN_DIR` is that eval: it finds it done (and rewrites nothing but its summary)
    command = ["eval", str(DEMO), "--model", str(run), "--set", "max_completion_length=16"]  # as trained
    again = CliRunner().invoke(app, command, terminal_width=200)
    assert again.exit_code == 0 and "every task is done already (6)" in again.output, again.output
    assert len((run / "eval" / "rollouts.jsonl").read_text().splitlines()) == 24


@pytest.mark.slow
def test_console_script_trains(demo_run):
    exe = shutil.which("ormix", path=str(Path(sys.executable).parent))
    assert exe, "the ormix console script is not installed in this environment"
    probe = subprocess.run([exe, "train", "--help"], capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0 and "--warmup-sft" in probe.stdout, probe.stderr
    run, out = demo_run  # trained by that script
    assert (run / "manifest.json").is_file() and list((run / "rollouts").glob("*.jsonl"))
    assert "step 1/2" in out and "step 2/2" in out


# ── warm start ────────────────────────────────────────────────────────


@pytest.mark.slow
def test_warm_start_transcripts_are_real_reference_episodes(tiny_model):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ormix.workbench._warmup import FINAL_ANSWER, build_transcripts, sft_loop

    mix = MixtureSpec(
        {
            "terminals": OpenRewardSpec("local:terminals", num_tasks=2, local_serve="thread"),
            "seta": OpenRewardSpec("local:seta", num_tasks=2, local_serve="thread"),
        },
        prompts_per_step=2,
        num_samples=4,
        seed=0,
    )
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    transcripts = build_transcripts(mix, tokenizer)
    assert sorted(t.member for t in transcripts) == ["seta", "seta", "terminals", "terminals"]
    # Each reference solution, played in a real session, scored 1.0: the transcripts are what succeeds.
    assert [t.reward for t in transcripts] == [1.0] * 4
    for t in transcripts:
        taught = tokenizer.decode([i for i, lab in zip(t.input_ids, t.labels, strict=True) if lab != -100])
        assert taught.startswith('<tool_call>\n{"name": ') and taught.endswith(FINAL_ANSWER + "<|im_end|>")
        submit = "submit" if t.member == "terminals" else "submit_solution"
        assert f'"name": "{submit}"' in taught
        # the prompt and tool results are context, never targets
        assert all(lab == -100 for lab in t.labels[: t.prompt_length])
        assert "<tool_response>" in tokenizer.decode(t.input_ids[t.prompt_length :])
        assert "<tool_response>" not in taught

    assert not any(t.near_miss for t in transcripts)

    # With near misses each task is played a second time, the near miss's way, in its own real session: it
    # scores less than the reference, so SFT on both leaves a choice that GRPO can learn from the rewards.
    both = build_transcripts(mix, tokenizer, near_misses=True)
    assert [(t.member, t.task_id, t.near_miss) for t in both[::2]] == [
        (t.member, t.task_id, False) for t in transcripts
    ]
    assert [t.input_ids for t in both[::2]] == [t.input_ids for t in transcripts]  # same cache for references
    misses = both[1::2]
    assert [(t.member, t.task_id) for t in misses] == [(t.member, t.task_id) for t in transcripts]
    assert all(t.near_miss and t.reward is not None and t.reward < 1.0 for t in misses), misses
    assert all(m.input_ids != r.input_ids for m, r in zip(misses, transcripts, strict=True))

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    first = sft_loop(model, transcripts[:1], steps=1, learning_rate=3e-3, batch_size=1)
    last = sft_loop(model, transcripts[:1], steps=25, learning_rate=3e-3, batch_size=1)
    assert last < first / 2  # the loop really fits the assistant tokens


# ── the step limit ────────────────────────────────────────────────────


@pytest.mark.parametrize("steps", [0, -1])
def test_max_steps_below_one_is_refused_before_anything_starts(tmp_path, steps):
    # 0 used to train a step anyway, and -1 (TRL's "train by epochs") ran past the plan.
    console, out = _console()
    rc = train_command(DEMO, max_steps=steps, output_dir=tmp_path / "run", warmup_sft=0, console=console)
    assert rc == 2 and f"--max-steps {steps}: a run trains at least 1 step, not {steps}" in out.getvalue()
    console, out = _console()
    rc = train_command(DEMO, output_dir=tmp_path / "run", overrides=[f"max_steps={steps}"], console=console)
    assert rc == 2 and f"max_steps: a run trains at least 1 step, not {steps}" in out.getvalue()
    from ormix._errors import TrainConfigError
    from ormix.app._train import train

    with pytest.raises(TrainConfigError, match="at least 1 step"):
        train(_echo_mix(prompts_per_step=2, num_samples=4), max_steps=steps, output_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_the_console_script_refuses_max_steps_0_with_exit_2(tmp_path):
    from typer.testing import CliRunner

    from ormix.app import app

    result = CliRunner().invoke(app, ["train", str(DEMO), "--max-steps", "0"], terminal_width=200)
    assert result.exit_code == 2 and "a run trains at least 1 step, not 0" in result.output


# ── eval sets, checked before the model loads ─────────────────────────


def test_an_eval_split_the_environment_lacks_is_refused_naming_the_member(tmp_path):
    path = tmp_path / "bad-eval.yaml"
    path.write_text(
        "members:\n"
        "  echo: {target: 'local:echo', num_tasks: 2, local_serve: thread}\n"
        "  held: {target: 'local:echo', indices: [5], local_serve: thread, eval: {split: validation}}\n"
        "prompts_per_step: 2\nnum_samples: 4\n"
    )
    console, out = _console()
    rc = train_command(path, max_steps=1, output_dir=tmp_path / "run", warmup_sft=0, console=console)
    text = out.getvalue()
    assert rc == 2, text
    assert (
        "member 'held': eval split 'validation' does not exist on local:echo (its splits: train, test)"
        in text
    )
    assert "training rows" not in text  # refused when the servers answered, before the trainer (and model)
    assert not (tmp_path / "run").exists()


# ── evaluation during training, end to end ────────────────────────────


def _word_or_miss(ctx):
    """Echo tasks: the first rollout of each group submits the word, the second misses; seta: no tool call."""
    import re

    found = re.search(r"word '(\w+)'", ctx.user)
    if found is None or ctx.turn > 0:
        return "done"
    from ormix.workbench._scripted import tool_call

    return tool_call("submit", text=found.group(1) if ctx.sample == 0 else "miss")


@pytest.fixture(scope="module")
def eval_run(tiny_model, tmp_path_factory):
    """Two GRPO steps on a mixture built in Python (echo with 2 held-out eval tasks, seta without an eval
    set), evaluating every step (`eval_steps=1`), with a scripted policy: of the 2 samples of each eval task
    one succeeds. The run directory, the result and what the run printed."""
    from transformers import TrainerCallback

    from ormix.app._train import train
    from ormix.mixture import Member
    from ormix.workbench._scripted import ScriptedPolicy

    class Scripted(TrainerCallback):
        def on_init_end(self, args, state, control, model=None, processing_class=None, **kwargs):
            ScriptedPolicy(_word_or_miss, tokenizer=processing_class).attach(model)

    mix = MixtureSpec(
        {
            "echo": Member(OpenRewardSpec("local:echo", num_tasks=2, local_serve="thread"), eval_num_tasks=2),
            "seta": OpenRewardSpec("local:seta", num_tasks=1, local_serve="thread"),
        },
        prompts_per_step=2,
        num_samples=4,
        name="tiny-eval",
    )
    console, out = _console()
    run = tmp_path_factory.mktemp("eval") / "run"
    settings = {"eval_steps": 1, "num_generations": 2, "max_completion_length": 32}
    result = train(
        mix,
        max_steps=2,
        output_dir=run,
        warmup_sft=0,
        settings=settings,
        console=console,
        callbacks=[Scripted()],
    )
    return run, result, out.getvalue()


@pytest.mark.slow
def test_training_evaluates_each_member_with_an_eval_set_and_logs_pass_at_k(eval_run):
    run, result, text = eval_run
    evals = [h for h in result.log_history if any(k.startswith("eval/") for k in h)]
    assert [h["step"] for h in evals] == [1, 2]
    for entry in evals:  # from the evaluation's own records: one of 2 samples per task succeeds
        assert entry["eval/echo/pass@1"] == 0.5 and entry["eval/echo/pass@2"] == 1.0
        assert entry["eval/echo/pass^2"] == 0.0 and entry["eval/echo/coverage"] == 1.0
        assert entry["eval/echo/tasks"] == 2
        assert not any(k.startswith("eval/seta/") for k in entry)  # seta has no eval set
    logged = [json.loads(line) for line in (run / "log_history.jsonl").read_text().splitlines()]
    assert [e["eval/echo/pass@1"] for e in logged if "eval/echo/pass@1" in e] == [0.5, 0.5]
    args = json.loads((run / "train_args.json").read_text())
    assert args["eval_strategy"] == "steps" and args["per_device_eval_batch_size"] % 2 == 0
    lines = [line for line in text.splitlines() if line.startswith("eval @ step")]
    assert len(lines) == 2 and all("echo pass@1 0.50 pass@2 1.00" in line for line in lines), text
    assert not any("seta" in line for line in lines)


@pytest.mark.slow
def test_eval_rollouts_are_recorded_in_the_training_format(eval_run):
    run, _, _ = eval_run
    records = [json.loads(line) for line in (run / "rollouts" / "rank-0.jsonl").read_text().splitlines()]
    train_records = [r for r in records if r["mode"] == "train"]
    eval_records = [r for r in records if r["mode"] == "eval"]
    assert len(train_records) == 2 * 2 * 2 and len(eval_records) == 2 * 2 * 2  # 2 steps × 2 tasks × 2 samples
    assert {r["member"] for r in eval_records} == {"echo"}
    assert {r["task_index"] for r in eval_records} == {2, 3}  # held out: echo trains on tasks 0 and 1
    # The training format, plus the evaluation's text (TRL logs none of an evaluation's; `ormix show` reads
    # it), which training records never hold.
    assert set(eval_records[0]) == set(train_records[0]) | {"prompt", "completion"}
    assert not {"prompt", "completion"} & set(train_records[0])
    assert eval_records[0]["completion"] and eval_records[0]["prompt"]


@pytest.mark.slow
def test_a_run_built_in_python_writes_its_manifest_with_its_eval_sets(eval_run):
    run, _, text = eval_run
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["name"] == "tiny-eval" and len(manifest["hash"]) == 64
    assert manifest["members"]["echo"]["task_indices"] == [0, 1]
    assert manifest["eval"] == {
        "echo": {
            "split": "train",
            "tasks": 2,
            "task_indices": [2, 3],
            "source": "held out: the first 2 tasks of split 'train' that echo does not train on",
            "overlap": 0,
            "notes": [],
        }
    }
    assert "eval echo: 2 task(s) of split 'train', held out" in text


@pytest.mark.slow
def test_the_report_of_a_run_with_evaluations(eval_run):
    run, _, text = eval_run
    summary = json.loads((run / "report" / "summary.json").read_text())
    assert summary["eval"]["last_step"] == 2 and sorted(summary["eval"]["steps"]) == ["1", "2"]
    echo = summary["eval"]["steps"]["2"]["members"]["echo"]
    assert echo["pass@1"]["value"] == 0.5 and echo["pass@2"]["value"] == 1.0 and echo["tasks"] == 2
    assert set(summary["members"]) == {"echo", "seta"} and summary["members"]["echo"]["rollouts"] == 4
    # The printed tables count training rollouts only; the evaluations are said apart.
    assert "outcomes (8 training rollouts; 8 eval rollouts below)" in text
    assert "eval at step 2 (2 samples per task" in text and "eval pass@1 by step" in text
    report = (run / "report" / "report.md").read_text()
    assert "## Evaluation at step 2" in report and "| echo | 2 | 0.50" in report
    assert "### pass@1 by step" in report and "![eval](eval.png)" in report
    assert (run / "report" / "eval.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ── the evals around training: `ormix eval`'s default eval set, said and recorded ─────────────────────


EVAL_DEFAULT = """\
name: eval-default
members:
  echo: {target: "local:echo", num_tasks: 2, local_serve: thread}
prompts_per_step: 2
num_samples: 8
evaluation: {samples: 1, before_training: true}
train: {num_generations: 2, max_completion_length: 12, max_tool_calling_iterations: 1, logging_steps: 1}
"""


def _evaluated(run: Path, text: str, not_evaluated: dict[str, str] | None = None) -> None:
    """Both evals ran on `ormix eval`'s default set (no member has an `eval:` set: echo's test split, 4
    tasks), said so, and the manifest records what ran."""
    for name in ("eval-before", "eval"):
        summary = json.loads((run / name / "summary.json").read_text())
        assert set(summary["members"]) == {"echo"} and summary["members"]["echo"]["tasks"] == 4, name
        records = [json.loads(line) for line in (run / name / "rollouts.jsonl").read_text().splitlines()]
        assert {(r["split"], r["task_index"]) for r in records} == {("test", i) for i in range(4)}
    echo = {"echo": {"split": "test", "tasks": 4, "source": "test split"}}
    skipped = {"not_evaluated": not_evaluated} if not_evaluated else {}
    assert json.loads((run / "manifest.json").read_text())["evaluation"] == {
        "before": {"ran": True, "dir": "eval-before", "samples": 1, "members": echo, **skipped},
        "after": {"ran": True, "dir": "eval", "samples": 1, "members": echo, **skipped},
    }
    for label in ("before training", "after training"):
        assert f"eval {label}: echo 4 task(s) of split 'test' (test split)" in text, text
        for member, why in (not_evaluated or {}).items():  # said, one line a member and eval
            assert f"eval {label}: {member} not evaluated: {why}" in text, text


@pytest.mark.slow
def test_the_evals_a_file_asks_for_run_on_the_default_eval_set_and_the_manifest_says_what_ran(tmp_path):
    # `evaluation: {before_training: true}` and no member with an `eval:` set used to run no eval at all,
    # while the manifest said before_training: true.
    # `rare` trains on the one train task whose word is 'maple'; its test split has none: it is not evaluated,
    # and the run says so.
    path = tmp_path / "mix.yaml"
    rare = "  rare: {target: 'local:echo', where: {word: maple}, local_serve: thread}\n"
    path.write_text(EVAL_DEFAULT.replace("prompts_per_step:", rare + "prompts_per_step:"))
    run = tmp_path / "run"
    console, out = _console()
    rc = train_command(path, max_steps=1, output_dir=run, warmup_sft=0, console=console)
    assert rc in (0, 1), out.getvalue()  # a random tiny model may score nothing in one step
    why = (
        "rare: no task of split 'test' matches where={'word': 'maple'}. Check the metadata keys and values "
        "(`ormix inspect` lists them)."
    )
    _evaluated(run, out.getvalue(), {"rare": why})
    # The eval before training is of the model GRPO starts from, named as `ormix eval --model RUN_DIR@start`.
    before = json.loads((run / "eval-before" / "manifest.json").read_text())
    assert before["model"] == f"{run.resolve()}@start"
    assert (run / "eval-comparison" / "comparison.json").is_file()


@pytest.mark.slow
def test_async_training_runs_the_same_evals_and_records_them(tmp_path):
    # `--async` used to skip the evals without a word.
    from ormix.app._train import train

    path = tmp_path / "mix.yaml"
    path.write_text(EVAL_DEFAULT)
    run = tmp_path / "run"
    console, out = _console()
    result = train(str(path), max_steps=2, output_dir=run, warmup_sft=0, vllm_url="standin", console=console)
    _evaluated(run, out.getvalue())
    assert result.eval_before == run / "eval-before" and result.eval == run / "eval"
    assert result.evaluation["after"]["ran"] is True
    # The evals' own trainers did not take the run's records away (they share the mixture's callbacks).
    from ormix.telemetry._records import read_records

    assert read_records(run) and {r["mode"] for r in read_records(run)} == {"train"}


# ── the last line names the real cause ────────────────────────────────────────────────────────────────


def test_when_a_warm_start_ran_the_last_line_blames_the_completion_budget_not_a_missing_warm_start(tmp_path):
    from types import SimpleNamespace

    from ormix.app._train import RunOptions, TrainResult
    from ormix.app._train.finish import finish_run
    from ormix.app._train.prepare import PlannedRun
    from ormix.app._workspace import Workspace

    args = SimpleNamespace(max_completion_length=64)
    run = PlannedRun(Workspace(tmp_path), args, [], None, 50, 1.0, 0)
    summary = {"upper": {"coverage": 0.0}, "echo": {"coverage": 0.0}}
    start = {
        "path": "/w",
        "warm_start": {
            "steps": 50,
            "episodes": 3,
            "over_completion_budget": 2,
            "max_completion_length": 64,
            "longest_episode_tokens": 120,
        },
    }
    (tmp_path / "manifest.json").write_text(json.dumps({"start": start}))
    history = [{"step": 1, "loss": 0.0, "completions/clipped_ratio": 1.0}]
    console, out = _console()
    finish_run("m.yaml", run, RunOptions(report=False), TrainResult(tmp_path, history, summary), console)
    last = out.getvalue().strip().splitlines()[-1]
    assert last.startswith("error: no member was ever scored: upper, echo (coverage 0"), last
    assert "2 of its 3 demonstrated episodes exceed the completion budget, max_completion_length=64" in last
    assert "raise train.max_completion_length to at least 120" in last
    assert "a warm start on reference solutions" not in last  # one ran: it is not the advice
    # A start whose manifest does not list the episodes' lengths: the clipped completions say it.
    (tmp_path / "manifest.json").write_text(
        json.dumps({"start": {"path": "/w", "warm_start": {"steps": 50}}})
    )
    console, out = _console()
    finish_run("m.yaml", run, RunOptions(report=False), TrainResult(tmp_path, history, summary), console)
    last = out.getvalue().strip().splitlines()[-1]
    assert "100% of GRPO's completions were cut at the completion budget, max_completion_length=64" in last
    assert "a warm start on reference solutions" not in last


WARM_OVER_BUDGET = """\
name: warm-over-budget
members:
  echo: {target: "local:echo", num_tasks: 2, local_serve: thread}
prompts_per_step: 2
num_samples: 8
warm_start: {sft_steps: 3}
train: {num_generations: 2, max_completion_length: 8, max_tool_calling_iterations: 1, logging_steps: 1}
"""


@pytest.mark.slow
def test_a_run_whose_warm_start_references_exceed_the_budget_ends_saying_so(tmp_path):
    # Echo's reference episode (a tool call, its result, a final word) is longer than 8 completion tokens:
    # GRPO cuts every episode before its submit call, and the last line used to advise a warm start.
    path = tmp_path / "mix.yaml"
    path.write_text(WARM_OVER_BUDGET)
    console, out = _console()
    rc = train_command(path, max_steps=1, output_dir=tmp_path / "run", console=console)
    text = out.getvalue()
    last = text.strip().splitlines()[-1]
    assert rc == 1 and last.startswith("error: no member was ever scored: echo"), text
    assert "the warm start ran, but" in last and "max_completion_length=8" in last, last
    assert "a warm start on reference solutions" not in last


FROZEN_ENV = """
import gc

from _base import Reverse

#: gc.get_freeze_count() as each rollout's prompt is asked for (the server runs in the trainer's process).
SEEN = []


class Env(Reverse):
    def get_prompt(self):
        SEEN.append(gc.get_freeze_count())
        return super().get_prompt()
"""


@pytest.mark.slow
def test_training_runs_with_the_model_and_trainer_kept_out_of_full_garbage_collections(tmp_path, monkeypatch):
    import gc
    import importlib

    from ormix.app._train import RunOptions

    (tmp_path / "frozen_env.py").write_text(FROZEN_ENV)
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "data" / "user_envs"))
    monkeypatch.syspath_prepend(str(tmp_path))
    mixture = tmp_path / "frozen.yaml"
    mixture.write_text(
        "members:\n  mine: {target: 'frozen_env:Env', num_tasks: 2, local_serve: thread}\n"
        "train: {max_steps: 1, num_generations: 2, per_device_train_batch_size: 2, max_completion_length: 8, "
        "use_cpu: true, report_to: none}\n"
    )
    console, out = _console()
    options = RunOptions(output_dir=tmp_path / "run", warmup_sft=0, report=False)
    rc = train_command(mixture, options, console=console)
    assert rc in (0, 1), out.getvalue()[-3000:]  # 1: the tiny model may score nothing in one step
    seen = importlib.import_module("frozen_env").SEEN
    assert len(seen) >= 2 and min(seen) > 100_000, seen  # the model's, TRL's and torch's objects
    assert gc.get_freeze_count() == 0  # given back when training ends
