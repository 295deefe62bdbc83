"""The `ormix` console script: serve, inspect, ablate, and clear errors for bad mixture files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ormix.app import app
from ormix.config import load_mixture_config
from support.plain_http import blocking_request

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


@pytest.fixture(autouse=True)
def _thread_serving(monkeypatch):
    monkeypatch.setenv("ORMIX_LOCAL_SERVE", "thread")


def test_inspect_shows_members_tools_composition_and_starvation(tmp_path):
    result = runner.invoke(app, ["inspect", str(ROOT / "mixtures/local-demo.yaml")], terminal_width=200)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "echo" in out and "terminals" in out and "seta" in out and "submit_solution" in out
    assert "composition" in out and "step 1" in out  # steps count from 1, as training does
    static = tmp_path / "static.yaml"
    static.write_text(
        "members:\n  terminals: {target: 'local:terminals', num_tasks: 4}\n  seta: {target: 'local:seta', "
        "num_tasks: 4}\nweights: {terminals: 0.6, seta: 0.4}\nprompts_per_step: 4\n"
    )
    result = runner.invoke(app, ["inspect", str(static)], terminal_width=200)
    assert result.exit_code == 0, result.output
    # 0.6/0.4 at 4 prompts per step: random draws starve seta in (0.6)^4 = 13% of steps; quotas never do.
    assert "0.130" in result.output and "0.000" in result.output


def test_inspect_tools_shows_the_namespaced_names_and_parameters_the_model_sees(tmp_path):
    path = tmp_path / "ns.yaml"
    path.write_text(
        "members:\n  echo: {target: 'local:echo', num_tasks: 2}\n  terminals: {target: 'local:terminals', "
        "num_tasks: 2}\nrouting: namespaced\n"
    )
    result = runner.invoke(app, ["inspect", str(path), "--tools"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "echo__submit(text: str) — Submit the final answer" in result.output
    assert "terminals__bash(command: str, timeout: float | None = None)" in result.output
    plain = runner.invoke(app, ["inspect", str(path)], terminal_width=200)
    assert "terminals__bash(" not in plain.output and "ormix inspect --tools" in plain.output


def test_inspect_explains_an_adaptive_mixture_and_shows_its_fixed_steps(tmp_path):
    path = tmp_path / "adaptive.yaml"
    path.write_text(
        "members:\n  echo: {target: 'local:echo', num_tasks: 4, filter: {window: 3, cooldown_steps: 5}}\n"
        "  terminals: {target: 'local:terminals', num_tasks: 4}\nweights: {echo: 3, terminals: 1}\n"
        "strategy: adaptive\nadaptive: {signal: progress, warmup_steps: 3, floor: 0.1}\nprompts_per_step: 4\n"
        "num_steps: 10\n"
    )
    result = runner.invoke(app, ["inspect", str(path), "--steps", "6"], terminal_width=200)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "steps 1-3 use the starting weights (the file's weights); from step 4 on" in out
    assert "learning progress" in out and "at least 10% of a step" in out
    assert "reward left to gain" in out  # headroom is on by default
    assert "echo: a task whose last 3 group(s), and at least 8 rollout(s), were all solved" in out
    assert "set aside for 5 steps" in out
    # terminals has no `filter:`: the mixture's default rule is its.
    assert "terminals: a task whose last 2 group(s), and at least 8 rollout(s)" in out
    assert "set aside for 8 steps" in out
    assert "no task filter" not in out
    # Off for the mixture: echo keeps its own rule, terminals has none, and inspect says so.
    path.write_text(path.read_text().replace("floor: 0.1}", "floor: 0.1, filter: null}"))
    off = runner.invoke(app, ["inspect", str(path), "--steps", "6"], terminal_width=200).output
    assert "echo: a task whose last 3" in off and "no task filter: terminals" in off
    steps = [line for line in out.splitlines() if line.startswith("│ step ")]
    assert len(steps) == 3  # only the steps decided before any statistics
    assert all(line.split("│")[2].strip() == "3" for line in steps)  # echo's quota from weights 3:1


def test_inspect_reports_a_bad_file_with_key_path_and_fix(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "members:\n  a:\n    target: local:echo\n    num_tasks: 2\n    indices: [1]\nweights: {a: 1, b: 2}\n"
    )
    result = runner.invoke(app, ["inspect", str(bad)])
    assert result.exit_code == 2
    assert "members.a" in result.output and "num_tasks" in result.output and "indices" in result.output
    assert "weights" in result.output and "'b'" in result.output


def test_ablate_writes_loadable_files_with_manifest_hash(tmp_path, monkeypatch):
    src = ROOT / "mixtures/seta-endless-curriculum.yaml"
    monkeypatch.setenv("OPENREWARD_API_KEY", "sk-test")  # the file references ${OPENREWARD_API_KEY}
    result = runner.invoke(
        app, ["ablate", str(src), "--leave-one-out", "--only", "seta", "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    files = sorted(tmp_path.glob("*.yaml"))
    assert len(files) == 4  # the full mixture is an arm too
    for file in files:
        config = load_mixture_config(file)
        assert f"manifest hash: {config.config_hash()}" in file.read_text()
        assert config.config_hash()[:16] in result.output
        assert "budget: same-total" in file.read_text()
    configs = {f.name: load_mixture_config(f) for f in files}
    full = configs["seta-endless-curriculum-full.yaml"]
    assert full.config_hash() == load_mixture_config(src).config_hash()  # the original's own run
    without = configs["seta-endless-curriculum-without-seta.yaml"]
    assert without.train_members == ["terminals"] and without.eval_members == ["seta"]
    assert without.members["seta"].eval == full.members["seta"].eval
    assert "seta-endless-curriculum-only-seta.yaml" in configs


def test_an_ablated_file_trains_under_the_hash_written_into_it(tmp_path):
    """The hash `ormix ablate` stamps into a derived file is the `hash` its run's manifest.json gets."""
    from ormix import MixtureSpec

    result = runner.invoke(
        app, ["ablate", str(ROOT / "mixtures/local-demo.yaml"), "--only", "terminals", "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    derived = tmp_path / "local-demo-only-terminals.yaml"
    stamped = next(
        line.split(":", 1)[1].strip() for line in derived.read_text().splitlines() if "manifest hash:" in line
    )
    mix = MixtureSpec.from_config(load_mixture_config(derived))
    try:
        assert mix.manifest()["hash"] == stamped
    finally:
        mix.close()


def test_an_ablated_file_sized_by_its_run_is_stamped_with_the_runs_hash(tmp_path):
    # No num_samples and no num_steps: `ormix train` sizes the dataset to train.max_steps, which is part of
    # the run's config (and hash); the stamp must be that hash, not the bare file's.
    from ormix import MixtureSpec
    from ormix.app._train import load_run_config

    source = tmp_path / "sized.yaml"
    source.write_text(
        "members:\n"
        "  a: {target: 'local:echo', num_tasks: 4, local_serve: thread}\n"
        "  b: {target: 'local:echo', indices: [5, 6], local_serve: thread}\n"
        "prompts_per_step: 2\n"
        "train: {max_steps: 3, per_device_train_batch_size: 4, num_generations: 2}\n"
    )
    out = tmp_path / "out"
    result = runner.invoke(app, ["ablate", str(source), "--only", "a", "--out", str(out)])
    assert result.exit_code == 0, result.output
    derived = out / "sized-only-a.yaml"
    stamped = next(
        line.split(":", 1)[1].strip() for line in derived.read_text().splitlines() if "manifest hash:" in line
    )
    config = load_run_config(derived)  # what `ormix train` trains
    assert config.num_steps == 3
    assert stamped == config.config_hash() != load_mixture_config(derived).config_hash()
    mix = MixtureSpec.from_config(config)
    try:
        assert mix.manifest()["hash"] == stamped
    finally:
        mix.close()


def test_ablate_unknown_member_is_named(tmp_path):
    result = runner.invoke(
        app, ["ablate", str(ROOT / "mixtures/local-demo.yaml"), "--only", "nope", "--out", str(tmp_path)]
    )
    assert result.exit_code == 2 and "nope" in result.output


def test_serve_command_serves_local_environments():
    proc = subprocess.Popen(
        [sys.executable, "-m", "ormix.app", "serve", "local:echo", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        port = int(line.split("port=")[1].split()[0])
        said = proc.stderr.readline()  # the port it got, not the 0 it was given
        assert said.startswith(f"serving local:echo on http://127.0.0.1:{port} "), said
        assert blocking_request("GET", f"http://127.0.0.1:{port}/list_environments").json() == ["echo"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_serve_rejects_unknown_environment():
    result = runner.invoke(app, ["serve", "local:nope"])
    assert result.exit_code == 2 and "local:echo" in result.output


BROKEN_ENV = '''
from openreward.environments import Environment, TextBlock, ToolOutput, tool
from pydantic import BaseModel


class Params(BaseModel):
    text: str


class BrokenEnv(Environment):
    """Its server cannot start: listing its splits (which the server does when it builds) raises."""

    @classmethod
    def list_splits(cls):
        raise RuntimeError("the task store is unreachable")

    @classmethod
    def list_tasks(cls, split):
        return [{"text": "hi"}]

    def get_prompt(self):
        return [TextBlock(text="say hi")]

    @tool
    def say(self, params: Params) -> ToolOutput:
        """Say something."""
        return ToolOutput(blocks=[TextBlock(text=params.text)], reward=1.0, finished=True)
'''


@pytest.mark.parametrize("command", ["train", "inspect", "check"])
def test_a_user_environment_that_fails_to_list_its_splits_is_named_before_any_server(
    tmp_path, monkeypatch, command
):
    # The user's `list_splits` raises: found when the target is resolved (before a child server starts),
    # reported as the user's code (exit 2) in one line with its exception, for every command.
    monkeypatch.delenv("ORMIX_LOCAL_SERVE")
    (tmp_path / "broken_env.py").write_text(BROKEN_ENV)
    path = tmp_path / "broken.yaml"
    path.write_text("members:\n  broken: {target: 'broken_env:BrokenEnv', num_tasks: 1}\n")
    args = [command, str(path)]
    if command == "train":
        args += ["--max-steps", "1", "--output-dir", str(tmp_path / "run")]
    result = runner.invoke(app, args, terminal_width=200)
    assert result.exit_code == 2, result.output
    out = " ".join(result.output.split())  # tables wrap their cells
    assert "list_splits() raised RuntimeError: the task store is unreachable" in out, out
    assert "broken.yaml:2: members.broken.target" in out, out
    assert "Traceback" not in out and "training failed" not in out


def test_inspect_shows_each_members_eval_set(tmp_path):
    path = tmp_path / "evals.yaml"
    path.write_text(
        "members:\n  echo: {target: 'local:echo', num_tasks: 4, eval: {num_tasks: 2}}\n"
        "  seta: {target: 'local:seta', num_tasks: 2, eval: {split: test}}\n"
        "  bad: {target: 'local:echo', indices: [9], eval: {split: validation}}\n"
    )
    result = runner.invoke(app, ["inspect", str(path)], terminal_width=250)
    assert result.exit_code == 0, result.output
    rows = {
        cells[0]: cells
        for line in result.output.split("eval sets")[1].splitlines()
        if line.startswith("│ ") and (cells := [c.strip() for c in line.split("│")[1:-1]])
    }
    assert rows["echo"][:3] == ["echo", "train", "2 (4, 5)"] and rows["echo"][4] == "0"
    assert rows["echo"][3].startswith("held out: the first 2 tasks of split 'train'")
    assert rows["seta"][:3] == ["seta", "test", "5 (0, 1, 2, 3, 4)"]
    assert "eval set: member 'bad': eval split 'validation' does not exist on local:echo" in result.output


def test_report_of_two_runs_points_to_compare(tmp_path):
    result = runner.invoke(app, ["report", str(tmp_path / "a"), str(tmp_path / "b")], terminal_width=250)
    assert result.exit_code == 2
    assert f"ormix compare {tmp_path / 'a'} {tmp_path / 'b'}" in result.output.replace("\n", "")


def test_help_texts_are_whole_and_plain():
    top = runner.invoke(app, ["--help"], terminal_width=200).output
    assert "Serve local environments over ORS: `ormix serve local:terminals local:seta --port" in top
    ablate = runner.invoke(app, ["ablate", "--help"], terminal_width=200).output
    assert "--only MEMBER" in ablate and "list[str]" not in ablate


def test_debug_after_the_subcommand_is_the_root_option(monkeypatch, tmp_path, capsys):
    from ormix.app._cli import _state, main

    monkeypatch.setattr(sys, "argv", ["ormix", "report", str(tmp_path / "nope"), "--debug"])
    monkeypatch.setitem(_state, "debug", False)
    with pytest.raises(SystemExit) as done:
        main()
    out = capsys.readouterr()
    assert done.value.code == 2 and "No such option" not in out.out + out.err
    assert "not a directory" in out.out + out.err and _state["debug"] is True


def test_inspect_says_where_the_plan_ends(tmp_path):
    from ormix.app._inspect import inspect_mixture
    from ormix.mixture import MixtureSpec

    text = "members:\n  echo: {target: 'local:echo', num_tasks: 4}\nprompts_per_step: 2\nnum_samples: 6\n"
    (tmp_path / "short.yaml").write_text(text)
    mix = MixtureSpec.from_config(load_mixture_config(tmp_path / "short.yaml"))
    info = inspect_mixture(mix, first_steps=12, contact_servers=False)  # task counts from the file
    assert [label for label, _ in info.composition] == ["step 1", "step 2", "step 3"]
    assert "the plan ends at step 3 (6 rows, 2 prompts per step): 12 steps asked for, 3 shown" in info.notes
    assert not any("plan ends" in n for n in inspect_mixture(mix, first_steps=3, contact_servers=False).notes)


def test_a_negative_completion_length_is_refused(tmp_path):
    result = runner.invoke(
        app, ["train", str(ROOT / "mixtures/local-demo.yaml"), "--set", "max_completion_length=-5"]
    )
    assert result.exit_code == 2, result.output
    assert "--set max_completion_length: a whole number >= 1, not -5" in result.output
