"""A new user's own environment, broken the ways new users break it (tests/data/user_envs/): each mistake is
one `error:` line naming its cause and the method it is in, no traceback. Mistakes found before anything runs
exit 2 in `ormix check`, `ormix inspect` and `ormix train` (which fails before any model or trainer is built);
those found by running the environment (a constructor, `get_prompt` or tool that raises, a scoring tool that
finishes without a reward) make `ormix check` exit 1, as a run meeting them does (docs/cli.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ENVS = Path(__file__).resolve().parents[1] / "data" / "user_envs"
SRC = Path(__file__).resolve().parents[2] / "src"

# mistake -> what the error line must name
CASES = {
    "broken_untyped_tool": "argument 'params' has no type annotation",
    "broken_plain_arg_tool": "argument `text: str` is not a pydantic model",
    "broken_instance_list_tasks": "list_tasks must be a @classmethod",
    "broken_no_prompt": "it has no get_prompt",
    "broken_import_error": "NameError: name 'UNDEFINED_LIMIT' is not defined",
    "broken_list_tasks_raises": "raised TypeError: string indices must be integers",
}
# Mistakes found while the file is loaded, before any server starts: the same code for every command, so
# `check` shows one of them end to end and the rest are checked in this process.
AT_LOAD = {"broken_plain_arg_tool", "broken_instance_list_tasks", "broken_no_prompt", "broken_import_error"}


def ormix(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "400"}
    return subprocess.run(
        [sys.executable, "-m", "ormix.app", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )


def assert_named(
    done: subprocess.CompletedProcess[str], cause: str, errors: int = 1, status: int = 2
) -> None:
    out = done.stdout + done.stderr
    assert done.returncode == status, out[-3000:]
    assert "Traceback" not in out and "Fatal Python error" not in out, out[-3000:]
    assert "binding shared tools only" not in out, out[-3000:]  # the cause is named, not worked around
    assert len([line for line in out.splitlines() if line.startswith("error:")]) == errors, out[-3000:]
    assert cause in " ".join(out.split()), out[-3000:]


@pytest.mark.parametrize(
    ("case", "command"),
    [
        ("broken_untyped_tool", "check"),
        ("broken_list_tasks_raises", "check"),
        ("broken_list_tasks_raises", "inspect"),
        ("broken_list_tasks_raises", "train"),
    ],
)
def test_each_mistake_is_one_named_error_line(case: str, command: str, tmp_path: Path) -> None:
    args = [command, str(ENVS / f"{case}.yaml")]
    if command == "train":
        args += ["--output-dir", str(tmp_path / "run"), "--warmup-sft", "0"]
    assert_named(ormix(*args, cwd=tmp_path), CASES[case])
    if command == "train":
        assert not (tmp_path / "run").exists()  # a failed start leaves nothing to refuse the retry


@pytest.mark.parametrize("case", sorted(AT_LOAD))
def test_mistakes_found_at_load_name_their_cause_with_the_file_line(case: str) -> None:
    from ormix.config import MixtureConfigError, load_mixture_config

    with pytest.raises(MixtureConfigError) as info:
        load_mixture_config(ENVS / f"{case}.yaml")
    assert f"{case}.yaml:3: members.mine.target:" in str(info.value) and CASES[case] in str(info.value)
    assert isinstance(info.value, ValueError)  # a UsageError: exit 2


def test_tools_that_never_score_are_named_by_check(tmp_path: Path) -> None:
    done = ormix("check", str(ENVS / "broken_scoring.yaml"), cwd=tmp_path)
    # A raising tool is found by running the environment: 1, as `ormix train` ends on it (never scored).
    assert_named(done, "tool 'answer' raised inside the environment: 'score'", status=1)
    text = " ".join(done.stdout.split())
    assert "warning: environment 'quiet': no tool call gave a reward or finished the episode" in text
    assert "'raising'" not in text.split("warning:")[1].split("error:")[0]  # raising: an error, not a warning


def test_a_scoring_tool_that_finishes_without_a_reward_fails_the_check(tmp_path: Path) -> None:
    done = ormix("check", str(ENVS / "broken_finish_unscored.yaml"), cwd=tmp_path)
    assert_named(done, "environment 'mine': tool 'answer' finished the episode without a reward", status=1)
    text = " ".join(done.stdout.split())
    assert "finishes unscored answer" in text and "ok, finished without a reward" in text
    assert "all 1 environment(s) usable" not in text


# mistake -> (exit status of `ormix check`, the method the error line must name and what it raised)
METHODS = {
    # ormix would read each string as an empty task; the constructor then fails, but list_tasks is the cause.
    "broken_list_tasks_strings": (2, "Env.list_tasks returned str items ('river'), not one dict"),
    "broken_constructor_raises": (1, "constructor: Env.__init__ raised KeyError: 'limit' for task train[0]"),
    "broken_prompt_raises": (1, "get_prompt: Env.get_prompt (or its setup()) raised AttributeError"),
}


@pytest.mark.parametrize("case", sorted(METHODS))
def test_check_names_the_method_that_failed(case: str, tmp_path: Path) -> None:
    status, named = METHODS[case]
    done = ormix("check", str(ENVS / f"{case}.yaml"), cwd=tmp_path)
    assert_named(done, named, status=status)
    if case != "broken_constructor_raises":
        assert "constructor raised" not in done.stdout  # blamed on its own method, not on the constructor
    if case == "broken_list_tasks_strings":
        row = next(line for line in done.stdout.splitlines() if line.startswith("│ mine"))
        assert "2 of 2" not in row and "- of 2" in row  # the tasks it listed are not counted as usable


def test_train_refuses_task_specs_that_are_not_dicts_naming_list_tasks(tmp_path: Path) -> None:
    # Read as empty tasks, they would fail every session later in the constructor, blamed on it.
    args = ["--output-dir", str(tmp_path / "run"), "--warmup-sft", "0"]
    done = ormix("train", str(ENVS / "broken_list_tasks_strings.yaml"), *args, cwd=tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == 2 and "Traceback" not in out, out[-3000:]
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert (
        len(errors) == 1 and "Env.list_tasks returned str items ('river'), not one dict per task" in errors[0]
    )
    assert not (tmp_path / "run").exists()


def test_a_config_error_is_reported_without_the_sdk_or_trl(tmp_path: Path) -> None:
    # TRL's settings are read once per TRL version and cached (the suite's cache, which the processes below
    # inherit): after that, checking `train:` with the rest of the file imports no TRL.
    warm = "from ormix.trl._compat import grpo_config_fields; grpo_config_fields()"
    subprocess.run([sys.executable, "-c", warm], check=True, env={**os.environ, "PYTHONPATH": str(SRC)})
    bad = tmp_path / "typo.yaml"
    bad.write_text((ENVS / "good.yaml").read_text().replace("num_tasks:", "num_taks:"))
    (tmp_path / "good.py").write_text((ENVS / "good.py").read_text())
    code = (
        "import sys; from ormix.app._cli import main; sys.argv = ['ormix', 'train', sys.argv[1]]\n"
        "try:\n    main()\nexcept SystemExit as e:\n"
        # `openreward` itself is registered at start, its `__init__` deferred (`defer_sdk_namespace`): what
        # costs is its client and environments.
        "    heavy = ('openreward.api', 'openreward.environments', 'trl', 'torch')\n"
        "    heavy = sorted(m for m in heavy if m in sys.modules)\n"
        "    print('exit', e.code, 'heavy', heavy)\n"
    )
    started = time.monotonic()
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", code, str(bad)], capture_output=True, text=True, env=env)
    took = time.monotonic() - started
    assert "did you mean 'num_tasks'" in done.stdout, done.stdout + done.stderr
    assert "exit 2 heavy []" in done.stdout, done.stdout
    assert took < 6  # ~1.5 s on the 2-core machine (the SDK and TRL alone take 5+ s)
