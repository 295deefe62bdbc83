"""Every example runs, offline, in its short mode (ORMIX_EXAMPLE_SHORT=1), as a user would run it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_example(name: str, tmp_path: Path, *, keep: bool = True) -> str:
    env = {
        **os.environ,
        "ORMIX_EXAMPLE_SHORT": "1",
        "TRL_EXPERIMENTAL_SILENCE": "1",
        "HF_HUB_OFFLINE": "1",
        "COLUMNS": "200",
        "TMPDIR": str(tmp_path / "tmp"),
    }
    (tmp_path / "tmp").mkdir(exist_ok=True)
    flags = ["--output-dir", str(tmp_path / "out")] if keep else []
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *flags],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_single_env(tmp_path):
    out = run_example("single_env.py", tmp_path)
    assert re.search(r"step 1: rewards/terminals/mean = \S+, coverage = 0\.0", out)
    assert "single_env done: 1 step(s) on local:terminals" in out
    assert list((tmp_path / "out" / "rollouts").glob("*.jsonl"))


def test_an_example_without_output_dir_leaves_no_temporary_directory(tmp_path):
    out = run_example("single_env.py", tmp_path, keep=False)
    assert "output in a temporary directory (removed at exit" in out
    assert not [p.name for p in (tmp_path / "tmp").iterdir() if p.name.startswith("ormix-")]


def test_mixture(tmp_path):
    out = run_example("mixture.py", tmp_path)
    plan = re.search(r"step 1 plan: (\{.*\})", out).group(1)
    assert plan in (
        "{'terminals': 2, 'seta': 2}",
        "{'seta': 2, 'terminals': 2}",
        "{'terminals': 3, 'seta': 1}",
        "{'seta': 1, 'terminals': 3}",
    )
    assert re.search(r"step 1: terminals: reward \S+, coverage \S+; seta: reward \S+, coverage \S+", out)
    assert "mixture done: 1 step(s); routing per_env" in out


def test_curriculum(tmp_path):
    out = run_example("curriculum.py", tmp_path)
    plan = [tuple(map(int, m)) for m in re.findall(r"plan step \d: terminals (\d), seta (\d)", out)]
    assert len(plan) == 2 and plan[0][0] > plan[1][0]  # the schedule shifts prompts from terminals to seta
    assert "step 2/2" in out and (tmp_path / "out" / "manifest.json").is_file()
    assert "curriculum done" in out


def test_ablation(tmp_path):
    out = run_example("ablation.py", tmp_path)
    for label in ("full", "without-terminals", "without-seta"):
        assert (tmp_path / "out" / label / "manifest.json").is_file()
        assert re.search(rf"{label}\s+│", out), out
    assert "(left out)" in out and "ablation done: 3 runs" in out
    # A member no rollout was scored for shows that, not a reward of 0 (seta has unscored_reward: 0.0).
    assert "0.00 / 0.00" not in out


def test_custom_env(tmp_path):
    out = run_example("custom_env.py", tmp_path)
    assert "tools the model sees: ['answer', 'calculate']" in out
    # a random model calls no tool: nothing scored, so no reward and coverage 0
    assert "custom_env done: arithmetic reward None, coverage 0.0" in out
    records = list((tmp_path / "out" / "rollouts").glob("*.jsonl"))
    assert records and '"member": "arithmetic"' in records[0].read_text()
