"""`mixtures/local-skills.yaml`, the held-out demo (what `make demo` runs): terminals and seta train on the
skill split `ops-train` (the prompt names an operation to apply to a word) and are evaluated on `ops-test`,
words they never trained on; the warm start teaches the tool-call format on a reference command of each
training task and, for half of them, a near miss (the member's one wrong operation), then GRPO learns to drop
it.

Its full run (about 4.5 minutes on a quiet 2-core machine, warm start included) is measured by hand, not
here (the file and docs/demo.md quote its figures on three seeds).
These tests check the mechanism: the file trains and evaluates on disjoint task sets of the right size, the
warm start runs from the file alone, and after it the policy scores above 0 in GRPO; the file derives the
2-arm ablation study from one start. That it asks for a warm start with near misses and adaptive mixing is
checked with the other shipped demo, in tests/demo/test_demo_learns.py.
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
SKILLS = ROOT / "mixtures" / "local-skills.yaml"


def test_it_trains_on_64_tasks_a_member_and_evaluates_on_32_it_never_trains_on(monkeypatch):
    from ormix.evaluation._tasks import eval_tasks
    from ormix.mixture import MixtureSpec
    from ormix.server import load_environment_class

    monkeypatch.setenv("ORMIX_LOCAL_SERVE", "thread")
    cfg = load_mixture_config(SKILLS, environ={})
    assert set(cfg.train_members) == {"terminals", "seta"}
    mix = MixtureSpec.from_config(cfg)
    try:
        tasks = eval_tasks(cfg)
        for member in cfg.train_members:
            spec = mix.spec(member)
            trained = {s["task_id"] for _, s in spec.task_specs}
            held_out = tasks[member]
            assert len(trained) >= 64 and len(held_out.indices) >= 32
            assert held_out.split == "ops-test" != spec.split
            # Held out: no task of the eval set is trained on (ids are unique across a member's splits).
            env = load_environment_class(spec.target)
            test_ids = {t["task_id"] for t in env.list_tasks(held_out.split)}
            assert not trained & test_ids
            # Every training task has a reference for the warm start to demonstrate, half of them (every
            # other word's) a near miss too.
            assert all(reference_for(spec.target)({"task_id": i}) is not None for i in trained)
            missed = [i for i in trained if near_miss_for(spec.target)({"task_id": i}) is not None]
            assert len(missed) == len(trained) // 2
    finally:
        mix.close()


@pytest.mark.slow
@pytest.mark.timeout(420)  # a real 80-step warm start and two GRPO steps: ~60 s alone, more beside others
def test_a_short_run_of_its_recipe_scores_above_zero_after_the_warm_start(tmp_path, monkeypatch):
    """The file itself, shortened: 2 training tasks a member, the first warmed (its reference and its near
    miss), 80 SFT steps, two GRPO steps (~1 min). (At 30 and 45 steps the policy still scores 0 here.)"""
    from ormix.app._train import train
    from ormix.mixture import MixtureSpec

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    monkeypatch.setenv("ORMIX_LOCAL_SERVE", "thread")
    cache = tmp_path / "cache"
    monkeypatch.setenv("ORMIX_CACHE_DIR", str(cache))  # a real warm start, not one cached by an earlier run
    demo = load_mixture_config(SKILLS, environ={})
    cfg = demo.updated(
        members={m: c.model_copy(update={"num_tasks": 2}) for m, c in demo.members.items()},
        warm_start=demo.warm_start.model_copy(update={"sft_steps": 80, "fraction": 0.5}),
    )
    buffer = io.StringIO()
    result = train(
        MixtureSpec.from_config(cfg),
        max_steps=2,
        output_dir=tmp_path / "run",
        console=Console(file=buffer, width=200, color_system=None),
        report=False,
        evaluate=False,  # what the warm start does is read from the training rollouts below
    )
    out = buffer.getvalue()
    assert result.exit_status == 0, out
    # The warm start ran because the file asks for it (near misses included), on half of the tasks (one a
    # member), and was cached for the next run.
    assert "warm start: 2 reference episodes and 2 near misses " in out, out
    assert list(cache.glob("warm-*/ormix-warm.json"))
    rewards = [h["rewards/seta/mean"] for h in result.log_history if "rewards/seta/mean" in h]
    coverage = [h["ormix/seta/coverage"] for h in result.log_history if "ormix/seta/coverage" in h]
    assert len(rewards) == 2 and not any(math.isnan(r) for r in rewards)
    # A random tiny model scores 0 on every rollout; the warmed one calls the tools and scores (seta's
    # weighted checks give 0.25 for writing result.txt at all, 1.0 with the right operation).
    assert max(rewards) > 0.0 and max(coverage) > 0.0, result.log_history
    # ... on the task it was warmed on (held in: the first), so GRPO has groups to learn from.
    records = [json.loads(line) for f in (tmp_path / "run" / "rollouts").glob("*.jsonl") for line in f.open()]
    held_in = [r for r in records if r["task_index"] == 0]
    assert held_in and any((r["reward"] or 0.0) > 0.0 for r in held_in), records


def test_it_derives_the_two_arm_ablation_study_from_one_start():
    from ormix.mixture._ablation import arms, select_arms

    cfg = load_mixture_config(SKILLS, environ={})
    full, without = select_arms(arms(cfg, leave_one_out=True), ["full", "without-terminals"])
    assert set(full.config.train_members) == {"terminals", "seta"}
    # Dropped from training, terminals stays in the arm as an eval-only member on the same held-out tasks.
    assert list(without.config.train_members) == ["seta"]
    dropped = without.config.members["terminals"]
    assert dropped.role == "eval" and dropped.eval == cfg.members["terminals"].eval
    assert dropped.eval is not None and dropped.eval.split == "ops-test"
    # Same budget (same-total): seta gets terminals' prompts, the steps stay.
    assert without.config.prompts_per_step == full.config.prompts_per_step
    assert without.config.train["max_steps"] == full.config.train["max_steps"]
