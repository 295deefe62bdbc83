"""The demo learns: `mixtures/local-demo.yaml` warms the tiny model up on a reference solution and a near miss
of each task, then runs GRPO.

The full run (`ormix train mixtures/local-demo.yaml`, about 3.4 minutes) is measured by hand, not here
(docs/demo.md quotes its trend).
These tests check the mechanism that makes its learning visible: the file asks for a warm start with near
misses and adaptive mixing, the warm start runs from the file alone (no command-line flag), and after it the
policy scores above 0 in GRPO, so there is a reward to raise (a random tiny model scores 0 on every rollout).
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
from rich.console import Console

from ormix.config import load_mixture_config
from ormix.workbench.envs.solutions import near_miss_for, reference_for

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "mixtures" / "local-demo.yaml"


@pytest.mark.parametrize("demo_file", [DEMO, ROOT / "mixtures" / "local-skills.yaml"], ids=lambda p: p.stem)
def test_the_demo_file_asks_for_a_warm_start_with_near_misses_adaptive_mixing_and_checkpoints(demo_file):
    # Both shipped demos: the three-member one and the held-out one `make demo` runs.
    cfg = load_mixture_config(demo_file, environ={})
    warm = cfg.warm_start
    assert warm is not None and warm.sft_steps > 0
    # Every train member ships reference solutions, so the warm start covers all of them; the members that
    # have near misses are demonstrated both ways, so GRPO starts with a choice to learn.
    assert all(reference_for(cfg.members[m].target) is not None for m in cfg.train_members)
    assert (
        warm.near_misses
        and sum(near_miss_for(cfg.members[m].target) is not None for m in cfg.train_members) >= 2
    )
    assert cfg.strategy == "adaptive" and len(cfg.train_members) >= 2
    t = cfg.train
    assert t["learning_rate"] >= 1e-4  # 1e-5 does not move the tiny model in 40 steps
    assert 0 < t["save_steps"] <= t["max_steps"]  # resumable
    assert cfg.num_samples >= t["max_steps"] * cfg.prompts_per_step


@pytest.mark.slow
def test_a_short_run_of_the_demo_recipe_scores_above_zero_after_the_warm_start(tmp_path, monkeypatch):
    """The demo's own file, shortened: echo (4 tasks, half warmed) and terminals (1 task, its reference and
    its near miss), 60 SFT steps, two GRPO steps (~1 min)."""
    from ormix.app._train import train
    from ormix.mixture import MixtureSpec

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    monkeypatch.setenv("ORMIX_LOCAL_SERVE", "thread")
    cache = tmp_path / "cache"
    monkeypatch.setenv("ORMIX_CACHE_DIR", str(cache))  # a real warm start, not one cached by an earlier run
    demo = load_mixture_config(DEMO, environ={})
    cfg = demo.only("echo", "terminals")
    cfg = cfg.updated(
        members={
            "echo": cfg.members["echo"].model_copy(update={"num_tasks": 4}),
            "terminals": cfg.members["terminals"].model_copy(update={"num_tasks": 1}),
        },
        warm_start=demo.warm_start.model_copy(update={"sft_steps": 60, "fraction": 0.5}),
    )
    buffer = io.StringIO()
    result = train(
        MixtureSpec.from_config(cfg),
        max_steps=2,
        output_dir=tmp_path / "run",
        settings={"max_completion_length": 64, "max_tool_calling_iterations": 2},
        console=Console(file=buffer, width=200, color_system=None),
        report=False,
        evaluate=False,  # what the warm start does is read from the training rollouts below
    )
    out = buffer.getvalue()
    assert result.exit_status == 0, out
    # The warm start ran because the file asks for it (near misses included), on half of the tasks (at least
    # one per member), and was cached for the next run.
    assert "warm start: 3 reference episodes and 1 near miss " in out, out
    assert list(cache.glob("warm-*/ormix-warm.json"))
    rewards = [h["rewards/echo/mean"] for h in result.log_history if "rewards/echo/mean" in h]
    coverage = [h["ormix/echo/coverage"] for h in result.log_history if "ormix/echo/coverage" in h]
    assert len(rewards) == 2 and not any(math.isnan(r) for r in rewards)
    # A random tiny model scores 0 on every rollout; the warmed one calls the tools and scores.
    assert max(rewards) > 0.0 and max(coverage) > 0.0, result.log_history
    # ... on the tasks it was warmed on (held in: the first half), so GRPO has groups to learn from.
    records = [json.loads(line) for f in (tmp_path / "run" / "rollouts").glob("*.jsonl") for line in f.open()]
    held_in = [r for r in records if r["task_index"] in (0, 1)]
    assert held_in and any((r["reward"] or 0.0) > 0.0 for r in held_in), records


def test_completions_whose_tool_calls_take_no_arguments_can_be_logged(tmp_path):
    """A learning demo calls `submit()` with no arguments; TRL's per-step parquet of completions must cope."""
    import pandas as pd

    from ormix.trl._trainer import _parquet_safe

    call = {"type": "function", "function": {"name": "submit", "arguments": {}}}
    completion = [{"role": "assistant", "content": "", "tool_calls": [call]}]
    with pytest.raises(Exception, match="no child field"):
        pd.DataFrame({"completion": [completion]}).to_parquet(tmp_path / "raw.parquet")
    pd.DataFrame({"completion": [_parquet_safe(completion)]}).to_parquet(tmp_path / "safe.parquet")
    assert (
        completion[0]["tool_calls"][0]["function"]["arguments"] == {}
    )  # the trainer's own data is untouched
