"""Every problem of a mixture file at once: a target typo never hides the `train:` typos until it is fixed
(tests/data/user_envs/typos.yaml: `local:terminal`, `max_step`, `num_generation`), as a user meets them in
`load_mixture`, `ormix check` and `ormix train`."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

ROOT = Path(__file__).resolve().parents[2]
TYPOS = ROOT / "tests" / "data" / "user_envs" / "typos.yaml"

# Each problem, with its line and its "did you mean".
EXPECTED = [
    "typos.yaml:5: members.term.target: 'local:terminal' is not a local environment; did you mean "
    "'local:terminals'?",
    "typos.yaml:11: train.max_step: not a GRPOConfig setting; did you mean 'max_steps'?",
    "typos.yaml:12: train.num_generation: not a GRPOConfig setting; did you mean 'num_generations'?",
]


def assert_every_problem(text: str) -> None:
    flat = " ".join(text.split())
    assert "3 problems in the mixture config" in flat, text
    for problem in EXPECTED:
        assert problem in flat, text


def test_load_mixture_reports_the_target_and_the_train_typos_in_one_error() -> None:
    from ormix.config import MixtureConfigError
    from ormix.mixture import load_mixture

    with pytest.raises(MixtureConfigError) as info:
        load_mixture(str(TYPOS))
    assert [p.key_path for p in info.value.problems] == [
        "members.term.target",
        "train.max_step",
        "train.num_generation",
    ]
    assert_every_problem(str(info.value))


def test_a_cheap_problem_and_a_local_typo_and_train_typos_come_together(tmp_path: Path) -> None:
    from ormix.config import MixtureConfigError
    from ormix.mixture import load_mixture

    path = tmp_path / "typos.yaml"
    path.write_text(TYPOS.read_text().replace("    num_tasks: 2\n  echo", "    num_taks: 2\n  echo"))
    with pytest.raises(MixtureConfigError) as info:
        load_mixture(str(path))
    assert [p.key_path for p in info.value.problems] == [
        "members.term.target",
        "members.term.num_taks",
        "train.max_step",
        "train.num_generation",
    ]
    assert "did you mean 'num_tasks'" in str(info.value)


def test_check_reports_every_problem_at_once() -> None:
    from ormix.app._check import check_command

    buf = io.StringIO()
    assert check_command(TYPOS, Console(file=buf, width=400, color_system=None)) == 2
    assert_every_problem(buf.getvalue())


def test_train_reports_every_problem_at_once_before_anything_runs(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "400"}
    done = subprocess.run(
        [sys.executable, "-m", "ormix.app", "train", str(TYPOS), "--output-dir", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert_every_problem(done.stdout + done.stderr)
    assert not (tmp_path / "run").exists()


def test_an_unquoted_secret_reference_inside_braces_names_the_quoting_that_fixes_it(tmp_path: Path) -> None:
    import yaml

    from ormix.config import MixtureConfigError, load_mixture_config

    path = tmp_path / "mix.yaml"
    path.write_text("members:\n  seta: {target: 'local:seta', api_key: ${ENV_KEY}}\n")
    with pytest.raises(MixtureConfigError) as raised:
        load_mixture_config(path, environ={"ENV_KEY": "k"})
    assert "inside {...}, quote a ${VAR} value: api_key: '${ENV_KEY}'" in str(raised.value)
    # The fix it names, and the one `ormix` prints for a missing secret, parse to the reference.
    path.write_text("members:\n  seta: {target: 'local:seta', api_key: '${ENV_KEY}'}\n")
    assert load_mixture_config(path, environ={"ENV_KEY": "k"}).members["seta"].api_key is not None
    assert yaml.safe_load("secrets: {OPENAI_API_KEY: '${OPENAI_API_KEY}'}") == {
        "secrets": {"OPENAI_API_KEY": "${OPENAI_API_KEY}"}
    }
