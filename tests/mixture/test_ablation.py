"""The arms of an ablation study (`ormix.mixture._ablation`): what each trains on, what it still evaluates,
the budget rule, and derived files that resolve their targets from wherever they are written."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ormix import MixtureSpec, OpenRewardSpec
from ormix.app._cli import app
from ormix.config import EvalConfig, MixtureConfig, load_mixture_config
from ormix.evaluation import eval_tasks
from ormix.mixture._ablation import (
    arm_file_text,
    arms,
    member_shares,
    scaled_prompts,
    select_arms,
    write_ablations,
)
from ormix.mixture._planner import Planner
from ormix.server import serve_in_thread
from ormix.trl._args import derive_batch
from support.envs import SweSurface

ROOT = Path(__file__).resolve().parents[2]


@st.composite
def mixtures(draw: st.DrawFn) -> MixtureConfig:
    n = draw(st.integers(2, 5))
    names = [f"m{i}" for i in range(n)]
    strategy = draw(st.sampled_from(["weights", "adaptive", "round_robin", "temperature"]))
    weights = draw(st.none() | st.lists(st.floats(0.1, 10), min_size=n, max_size=n))
    members = {
        name: {"target": "local:echo", "num_tasks": draw(st.integers(1, 50))}
        | ({"role": "both", "eval": {"num_tasks": 2}} if draw(st.booleans()) else {})
        for name in names
    }
    members["held"] = {"target": "local:echo", "role": "eval"}
    pps, generations = draw(st.integers(1, 64)), draw(st.sampled_from([2, 4, 8]))
    # A batch the full mixture trains with: a divisor of its step, with or without the accumulation.
    completions = pps * generations
    batch = draw(st.sampled_from([d for d in range(1, min(completions, 16) + 1) if completions % d == 0]))
    train = {"num_generations": generations, "per_device_train_batch_size": batch}
    if draw(st.booleans()):
        train["gradient_accumulation_steps"] = completions // batch
    return MixtureConfig.model_validate(
        {
            "name": "m",
            "members": members,
            "strategy": strategy,
            "weights": dict(zip(names, weights, strict=True))
            if weights and strategy in ("weights", "adaptive")
            else None,
            "temperature": draw(st.floats(0.5, 4)),
            "prompts_per_step": pps,
            "train": train,
        }
    )


@settings(max_examples=60, deadline=None)
@given(mixtures(), st.sampled_from(["same-total", "same-per-member"]))
def test_every_arm_keeps_every_member_and_follows_its_budget_rule(cfg: MixtureConfig, budget) -> None:
    shares = member_shares(cfg)
    assert abs(sum(shares.values()) - 1) < 1e-9 and all(s > 0 for s in shares.values())
    study = arms(cfg, leave_one_out=True, only=[cfg.train_members[0]], budget=budget)
    assert [a.name for a in study] == [
        "full",
        *[f"without-{n}" for n in cfg.train_members],
        f"only-{cfg.train_members[0]}",
    ]
    assert study[0].config == cfg and study[0].dropped == ()
    pps = cfg.prompts_per_step
    assert pps is not None
    for arm in study[1:]:
        # Every member is still there: the dropped ones eval-only, their eval sets as they were.
        assert list(arm.config.members) == list(cfg.members)
        assert arm.config.train_members == [n for n in cfg.train_members if n not in arm.dropped]
        assert arm.dropped and set(arm.dropped) <= set(arm.config.eval_members)
        for name in arm.dropped:
            assert arm.config.members[name].role == "eval"
            # Its eval set kept; without one, the rule that picks the full mixture's (its test split).
            before = cfg.members[name].eval or EvalConfig(split="test", fallback="own_tasks")
            assert arm.config.members[name].eval == before
        kept_share = sum(shares[n] for n in arm.config.train_members)
        new = arm.config.prompts_per_step
        assert new is not None
        if budget == "same-total":
            assert new == pps and arm.config.train == cfg.train
        else:
            assert new == scaled_prompts(pps, kept_share)
            assert 1 <= new <= pps and (new == 1 or abs(new - pps * kept_share) <= 0.5)
            assert f"prompts_per_step {pps}" in arm.budget
        # ormix can lay a step of the arm's prompts out from what its train: section still says.
        assert derive_batch(dict(arm.config.train), new, 1, "") is not None
        # The file written for it loads back to it (plus the base_dir) under the hash it is stamped with.
        text, digest = arm_file_text(arm, "<test>")
        back = MixtureConfig.from_yaml_text(text, resolve_targets=False)
        assert back == arm.config and back.sized_for().config_hash() == digest
        assert f"budget: {arm.budget}" in text


@given(st.integers(1, 1000), st.floats(0, 1))
def test_scaled_prompts_rounds_half_up_and_never_reaches_zero(pps: int, share: float) -> None:
    new = scaled_prompts(pps, share)
    assert new >= 1 and new <= max(1, pps)
    assert new == 1 or pps * share - 0.5 < new <= pps * share + 0.5


def test_the_demos_budget_rule_is_stated_with_the_numbers() -> None:
    cfg = load_mixture_config(ROOT / "mixtures/local-demo.yaml")
    same = arms(cfg, leave_one_out=True, budget="same-per-member")
    assert [a.config.prompts_per_step for a in same] == [4, 3, 2, 2]  # weights 0.2 / 0.4 / 0.4 of 4
    echo = same[1]
    assert echo.budget.startswith("same-per-member: prompts_per_step 4 → 3 (4 × 0.8")
    # 3 prompts × 2 generations = 6 completions: the file's batch of 4 × 2 no longer fits, so it goes.
    assert "per_device_train_batch_size" not in echo.config.train
    assert "gradient_accumulation_steps" not in echo.config.train
    assert "left out" in echo.budget
    total = arms(cfg, leave_one_out=True)
    assert all(a.config.prompts_per_step == 4 for a in total)
    assert "share the dropped members' prompts" in total[1].budget


def test_rules_that_cannot_be_followed_say_what_to_do() -> None:
    scheduled = MixtureConfig.model_validate(
        {
            "members": {"a": {"target": "local:echo"}, "b": {"target": "local:seta"}},
            "prompts_per_step": 2,
            "schedule": [{"until_step": 3, "weights": {"a": 1, "b": 1}}, {"weights": {"a": 1, "b": 2}}],
        }
    )
    with pytest.raises(match="schedule changes it .* --budget same-total"):
        arms(scheduled, leave_one_out=True, budget="same-per-member")
    assert [a.config.prompts_per_step for a in arms(scheduled, leave_one_out=True)] == [2, 2, 2]
    unsized = MixtureConfig.model_validate(
        {"members": {"a": {"target": "local:echo"}, "b": {"target": "local:seta"}}}
    )
    with pytest.raises(match="add `prompts_per_step: N`"):
        arms(unsized, leave_one_out=True, budget="same-per-member")
    with pytest.raises(match="no arm named 'without-c'; this study's arms are full, without-a"):
        select_arms(arms(unsized, leave_one_out=True), ["without-c"])
    with pytest.raises(match="nothing to derive"):
        write_ablations(unsized, Path("unused"), source="<test>")


def test_base_dir_is_where_not_what() -> None:
    cfg = load_mixture_config(ROOT / "mixtures/local-demo.yaml")
    moved = cfg.updated(base_dir=str(ROOT / "examples"))
    assert moved.config_hash() == cfg.config_hash() and "base_dir" not in moved.manifest_dict()
    with pytest.raises(Exception, match="is not a directory; base_dir names the directory"):
        MixtureConfig.from_yaml_text(cfg.to_yaml() + "base_dir: no/such/dir\n", str(ROOT / "x.yaml"))


def test_a_derived_file_written_elsewhere_finds_the_users_module_next_to_the_original(tmp_path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "examples/my_env.py", project / "my_arith_env.py")
    source = project / "mix.yaml"
    source.write_text(
        "members:\n"
        "  arith: {target: 'my_arith_env:Arithmetic', num_tasks: 2}\n"
        "  echo: {target: 'local:echo', num_tasks: 2}\n"
        "prompts_per_step: 2\n"
    )
    out = tmp_path / "study" / "mixtures"
    cli = CliRunner().invoke(app, ["ablate", str(source), "--leave-one-out", "--out", str(out)])
    assert cli.exit_code == 0, cli.output
    derived = out / "mix-without-echo.yaml"
    assert f"base_dir: {project}" in derived.read_text()
    bare = out / "bare.yaml"
    bare.write_text("\n".join(line for line in derived.read_text().splitlines() if "base_dir" not in line))
    # A fresh process, started elsewhere: nothing loaded before has taught it where the user's module is.
    # Without the key the file does not resolve from there (the control); with it, it does, and serves.
    code = textwrap.dedent(
        f"""
        from ormix._errors import OrmixError
        from ormix.mixture import load_mixture
        try:
            load_mixture({str(bare)!r})
        except OrmixError as e:
            print("bare:", e)
        mix = load_mixture({str(derived)!r})
        try:
            print("derived:", mix.manifest()["members"]["arith"]["task_indices"])
        finally:
            mix.close()
        """
    )
    # Served in threads: the server child finding the module is test_resolution's (the same search path).
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "ORMIX_LOCAL_SERVE": "thread"}
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "bare:" in run.stdout and "no module 'my_arith_env'" in run.stdout
    assert "derived: [0, 1]" in run.stdout


def test_an_arm_file_of_a_warm_started_mixture_says_arms_compare_from_one_start():
    members = {"a": {"target": "local:echo"}, "b": {"target": "local:seta"}}
    warm = MixtureConfig(name="m", members=members, warm_start={"sft_steps": 20})
    text, _ = arm_file_text(arms(warm, leave_one_out=True)[1], "<python>")
    assert "arms compare only from ONE start" in text and "--model STUDY/start --warmup-sft 0" in text
    cold, _ = arm_file_text(arms(MixtureConfig(name="m", members=members), leave_one_out=True)[1], "<python>")
    assert "ONE start" not in cold


def test_an_arm_evaluates_a_dropped_member_on_the_tasks_the_full_mixture_does() -> None:
    # local:echo has a test split (the full mixture evaluates echo there), the SWE surface none (its training
    # tasks): dropped, each is evaluated where it was, not on its own selection.
    with serve_in_thread([SweSurface]) as server:
        cfg = MixtureConfig(
            name="m",
            members={
                "echo": {"target": "local:echo", "num_tasks": 2, "local_serve": "thread"},
                "swe": {"target": server.url, "env_name": "swesurface", "num_tasks": 2},
                "seta": {"target": "local:seta", "num_tasks": 2, "local_serve": "thread"},
                # Trains on 2 tasks of the test split itself: evaluated on the whole split all the same.
                "echo_test": {
                    "target": "local:echo",
                    "split": "test",
                    "num_tasks": 2,
                    "local_serve": "thread",
                },
            },
            prompts_per_step=4,
        )
        full = eval_tasks(cfg)
        study = arms(cfg, leave_one_out=True)
        for arm in study[1:]:
            (dropped,) = arm.dropped
            chosen = eval_tasks(arm.config)[dropped]
            assert (chosen.split, chosen.indices) == (full[dropped].split, full[dropped].indices), arm.name
            # The file written for it chooses the same.
            text, _ = arm_file_text(arm, "<test>")
            again = eval_tasks(MixtureConfig.from_yaml_text(text), members=[dropped])[dropped]
            assert (again.split, again.indices) == (chosen.split, chosen.indices)
    assert (full["echo"].split, full["echo"].indices) == ("test", (0, 1, 2, 3))
    assert (full["swe"].split, full["swe"].indices) == ("train", (0, 1))
    assert (full["echo_test"].split, full["echo_test"].indices) == ("test", (0, 1, 2, 3))


def test_an_arm_whose_members_had_weight_0_somewhere_weighs_them_equally_and_says_so() -> None:
    members = {n: {"target": "local:echo"} for n in ("a", "b", "c")}
    cfg = MixtureConfig(
        name="m",
        members=members,
        prompts_per_step=4,
        schedule=[
            {"until_step": 10, "weights": {"a": 1, "b": 0, "c": 0}},
            {"weights": {"a": 1, "b": 1, "c": 1}},
        ],
    )
    study = arms(cfg, leave_one_out=True)
    without_a = study[1]
    assert [p.weights for p in without_a.config.schedule or []] == [{"b": 1.0, "c": 1.0}] * 2
    assert sorted({m for m, _ in Planner(without_a.config, {"b": [0], "c": [0]}).rows(1)}) == ["b", "c"]
    text, _ = arm_file_text(without_a, "<test>")
    said = (
        "schedule phase 0 (until step 10): 0 for every member this arm trains on (b, c), so they have equal"
    )
    assert said in text and said in without_a.notes[0]
    assert all(not arm.notes for arm in study if arm.name != "without-a")
    weighted = MixtureConfig(name="m", members=members, prompts_per_step=4, weights={"a": 1, "b": 0, "c": 0})
    arm = arms(weighted, leave_one_out=True)[1]
    assert arm.config.weights == {"b": 1.0, "c": 1.0} and arm.notes[0].startswith("weights: 0 for every")


def test_a_same_per_member_arm_leaves_the_batch_to_ormix_whatever_the_processes() -> None:
    cfg = MixtureConfig(
        name="m",
        members={n: {"target": "local:echo"} for n in ("a", "b", "c", "d")},
        prompts_per_step=4,
        train={"num_generations": 8, "per_device_train_batch_size": 8, "gradient_accumulation_steps": 2},
    )
    derive_batch(dict(cfg.train), 4, 2, "")  # the full mixture trains on 2 processes
    without_a = arms(cfg, leave_one_out=True, budget="same-per-member")[1]
    assert without_a.config.prompts_per_step == 3
    # 3 × 8 = 24 completions: 12 per process, which a batch of 8 does not divide; ormix derives one.
    assert "per_device_train_batch_size" not in without_a.config.train
    assert "per_device_train_batch_size=8" in without_a.budget
    settings = dict(without_a.config.train)
    derive_batch(settings, 3, 2, "")
    assert settings["per_device_train_batch_size"] * settings["gradient_accumulation_steps"] == 12


def test_mixture_spec_reweight_of_temperature_keeps_the_planners_weights() -> None:
    echo = lambda n: OpenRewardSpec("local:echo", num_tasks=n, local_serve="thread")  # noqa: E731
    mix = MixtureSpec({"a": echo(1), "b": echo(4), "c": echo(9)}, strategy="temperature", prompts_per_step=4)
    try:
        start = mix.planner.weights(1)
        heavier = mix.reweight(a=0.5)
        assert heavier.config.strategy == "weights"
        assert heavier.config.weights == {"a": 0.5, "b": start["b"], "c": start["c"]}
        assert start["c"] > start["b"]  # the task counts, not 1.0 each
    finally:
        mix.close()
