"""The examples: two run end to end, offline, in their short mode (ORMIX_EXAMPLE_SHORT=1), as a user runs
them; the others are imported and their mixtures built (servers started, tasks fetched, plans laid out), not
trained: what they train with is what `tests/test_train.py` and `tests/integrations/` train."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

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


@pytest.fixture
def example(monkeypatch):
    """Import an example as its script would run (its folder first on the path), without running `main`.

    Its local environments are served in threads of this process: a build starts them and fetches tasks.
    """
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.setenv("ORMIX_LOCAL_SERVE", "thread")

    def load(name: str) -> ModuleType:
        spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        assert callable(module.main)
        return module

    return load


# ── run end to end ────────────────────────────────────────────────────


@pytest.mark.slow
def test_single_env_trains_and_leaves_no_temporary_directory(tmp_path):
    out = run_example("single_env.py", tmp_path, keep=False)
    assert re.search(r"step 1: rewards/terminals/mean = \S+, coverage = 0\.0", out)
    assert "single_env done: 1 step(s) on local:terminals" in out
    assert "output in a temporary directory (removed at exit" in out
    assert not [p.name for p in (tmp_path / "tmp").iterdir() if p.name.startswith("ormix-")]


@pytest.mark.slow
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
    records = list((tmp_path / "out" / "rollouts").glob("*.jsonl"))
    assert records and '"member": "seta"' in "".join(r.read_text() for r in records)


# ── imported and built ────────────────────────────────────────────────


def test_curriculum_builds_a_schedule_that_shifts_prompts_to_seta(example):
    mix = example("curriculum").curriculum(2)
    try:
        envs = mix.train_dataset["environment"]
        plan = [Counter(envs[s * 4 : (s + 1) * 4]) for s in range(2)]
        assert len(envs) == 8 and all(sum(step.values()) == 4 for step in plan)
        assert plan[0]["terminals"] > plan[1]["terminals"]
    finally:
        mix.close()


def test_ablation_builds_the_full_mixture_and_one_without_each_member(example):
    runs = example("ablation").variants(1)
    try:
        assert {label: mix.train_members for label, mix in runs.items()} == {
            "full": ["terminals", "seta"],
            "without-terminals": ["seta"],
            "without-seta": ["terminals"],
        }
        # A dropped member stays, eval-only, so what not training on it did can be measured on it.
        assert runs["without-seta"].config.members["seta"].role == "eval"
        assert len({mix.manifest()["hash"] for mix in runs.values()}) == 3
        assert set(runs["without-seta"].train_dataset["environment"]) == {"terminals"}
    finally:
        for mix in runs.values():
            mix.close()


def test_custom_env_serves_the_users_environment_class(example):
    mix = example("custom_env").arithmetic(1)
    try:
        spec = mix.spec("arithmetic")
        assert [t.name for t in spec.tool_specs] == ["answer", "calculate"]
        assert len(mix.train_dataset) == 2 and set(mix.train_dataset["environment"]) == {"arithmetic"}
    finally:
        mix.close()
