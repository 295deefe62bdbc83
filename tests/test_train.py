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

from ormix import MixtureSpec, OpenRewardSpec
from ormix.train import train_command

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
        [*command, "--set", "max_completion_length=48", "--warmup-sft", "0"],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=run.parent,
        env={**os.environ, "COLUMNS": "240"},  # one progress line per step, as on a wide terminal
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return run, done.stdout


@pytest.mark.slow
def test_train_command_runs_the_demo_and_writes_the_run_directory(demo_run):
    run, text = demo_run

    manifest = json.loads((run / "manifest.json").read_text())
    assert set(manifest["members"]) == {"echo", "terminals", "seta"} and len(manifest["hash"]) == 64
    args = json.loads((run / "train_args.json").read_text())
    assert args["shuffle_dataset"] is False and args["remove_unused_columns"] is False
    assert args["max_steps"] == 2 and args["max_completion_length"] == 48
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

    from ormix.demo.warmup import FINAL_ANSWER, build_transcripts, sft_loop

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
