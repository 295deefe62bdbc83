"""A `GRPOConfig` consistent with a mixture: typed overrides, named mistakes, derived batch geometry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ormix import MixtureSpec, OpenRewardSpec
from ormix._errors import TrainConfigError
from ormix.trl._args import build_grpo_config, derive_batch, parse_overrides


def _echo_mix(**kwargs) -> MixtureSpec:
    # Constructing a mixture contacts no server: these tests of settings stay offline and fast.
    return MixtureSpec(
        {"a": OpenRewardSpec("local:echo", num_tasks=4), "b": OpenRewardSpec("local:echo", indices=[5])},
        **kwargs,
    )


# ── settings (pure) ───────────────────────────────────────────────────


def test_overrides_are_typed_like_the_setting():
    settings_ = parse_overrides(["max_steps=3", "learning_rate=1e-5", "report_to=none", "bf16=false"])
    args, _ = build_grpo_config(_echo_mix(), {**settings_, "num_generations": 2}, output_dir="unused")
    assert args.max_steps == 3 and args.learning_rate == pytest.approx(1e-5) and args.bf16 is False
    with pytest.raises(TrainConfigError, match="key=value"):
        parse_overrides(["max_steps"])


def test_unknown_setting_is_named_with_a_suggestion():
    with pytest.raises(
        TrainConfigError, match=r"lerning_rate: not a GRPOConfig setting; did you mean 'learning_rate'"
    ):
        build_grpo_config(_echo_mix(), {"lerning_rate": 1e-5}, output_dir="unused")


_TRL_FACTS_PROBE = (
    "import json, sys\n"
    "from ormix.trl._compat import grpo_config_fields\n"
    "from ormix.trl._compat import accepts_dict_factory\n"
    "fields, per_env = grpo_config_fields(), accepts_dict_factory()\n"
    "print(json.dumps({'torch_imported': 'torch' in sys.modules, 'fields': fields, 'per_env': per_env}))\n"
)


def _trl_facts_in_a_fresh_process(cache: Path) -> dict:
    env = {**os.environ, "ORMIX_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-c", _TRL_FACTS_PROBE], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_what_ormix_reads_of_trl_is_cached_per_trl_and_transformers_version(tmp_path, monkeypatch):
    # `ormix check` names a misspelt train: key, and `ormix inspect` says how tools are routed, without
    # importing TRL (and torch) once these are cached.
    import transformers
    import trl

    from ormix.trl._compat import _read_trl_facts, _trl_facts

    truth = json.loads(
        json.dumps(_read_trl_facts())
    )  # as TRL answers now, through JSON as the cache keeps it
    built = _trl_facts_in_a_fresh_process(tmp_path)
    (cached,) = tmp_path.glob("trl-facts-*.json")
    assert f"trl{trl.__version__}" in cached.name and f"transformers{transformers.__version__}" in cached.name
    again = _trl_facts_in_a_fresh_process(tmp_path)
    assert built["torch_imported"] and not again["torch_imported"]
    for answer in (built, again):
        assert answer["fields"] == truth["grpo_config_fields"] and answer["fields"]["num_generations"] == 8
        assert answer["per_env"] is truth["accepts_dict_factory"]
    # A torn file, or one of another shape, is rebuilt, not believed. Read here, past the per-process memo
    # (`__wrapped__`): TRL is imported already, so a rebuild costs no fresh interpreter.
    monkeypatch.setenv("ORMIX_CACHE_DIR", str(tmp_path))
    for damaged in ('{"num_gener', '{"grpo_config_fields": []}'):
        cached.write_text(damaged)
        assert _trl_facts.__wrapped__() == truth
        assert json.loads(cached.read_text()) == truth
    assert cached.stat().st_mode & 0o044 == 0o044  # readable by others sharing the cache directory


def test_settings_follow_the_mixture():
    args, notes = build_grpo_config(
        _echo_mix(prompts_per_step=3), {"num_generations": 2}, output_dir="runs/x"
    )
    assert args.shuffle_dataset is False and args.remove_unused_columns is False
    assert args.per_device_train_batch_size * args.gradient_accumulation_steps == 3 * 2
    assert any("derived from prompts_per_step" in n for n in notes)
    assert args.report_to in ("none", ["none"], [])  # nothing reported to an external tracker
    assert args.log_completions is True and args.use_cpu is True and args.logging_steps == 1
    # No plan order without quotas/schedule/round robin: shuffling stays TRL's default.
    args, _ = build_grpo_config(_echo_mix(), {"num_generations": 2}, output_dir="runs/x")
    assert args.shuffle_dataset is True


@pytest.mark.parametrize(
    ("given_settings", "message"),
    [
        ({"shuffle_dataset": True}, "shuffle_dataset=True would shuffle away"),
        ({"remove_unused_columns": True}, "remove_unused_columns=True strips"),
        ({"per_device_train_batch_size": 4, "gradient_accumulation_steps": 2}, "their product is 6"),
        ({"per_device_train_batch_size": 4}, "does not divide 6"),
    ],
)
def test_settings_that_break_the_plan_are_refused(given_settings, message):
    with pytest.raises(TrainConfigError, match=message):
        build_grpo_config(
            _echo_mix(prompts_per_step=3), {"num_generations": 2, **given_settings}, output_dir="x"
        )


@settings(max_examples=200, deadline=None)
@given(
    pps=st.integers(1, 64),
    gens=st.integers(2, 16),
    world=st.sampled_from([1, 2, 4, 8]),
    batch=st.one_of(st.none(), st.integers(1, 64)),
    accum=st.one_of(st.none(), st.integers(1, 64)),
)
def test_batch_geometry_matches_prompts_per_step_or_explains(pps, gens, world, batch, accum):
    settings_ = {
        "num_generations": gens,
        "per_device_train_batch_size": batch,
        "gradient_accumulation_steps": accum,
    }
    settings_ = {k: v for k, v in settings_.items() if v is not None}
    try:
        derive_batch(settings_, pps, world, "")
    except TrainConfigError as e:
        assert "prompts_per_step" in str(e)
        return
    total = settings_["per_device_train_batch_size"] * settings_["gradient_accumulation_steps"] * world
    assert total == pps * gens  # exactly prompts_per_step unique prompts per optimizer step
    if batch is not None:
        assert settings_["per_device_train_batch_size"] == batch
    if accum is not None:
        assert settings_["gradient_accumulation_steps"] == accum


def test_save_steps_in_a_file_means_checkpoints(tmp_path):
    mix = MixtureSpec({"a": OpenRewardSpec("http://127.0.0.1:9", env_name="x")})
    args, _ = build_grpo_config(mix, {"save_steps": 50}, output_dir=tmp_path)
    assert args.save_strategy == "steps" and args.save_steps == 50
    args, _ = build_grpo_config(mix, {}, output_dir=tmp_path)
    assert args.save_strategy == "no"


# ── evaluation during training, and the step limit ────────────────────


def _with_eval(**kwargs) -> MixtureSpec:
    from ormix.mixture import Member

    return MixtureSpec(
        {
            "a": Member(OpenRewardSpec("local:echo", num_tasks=4), eval_split="test"),
            "b": OpenRewardSpec("local:echo"),
        },
        **kwargs,
    )


def test_eval_steps_turns_periodic_evaluation_on_with_whole_eval_groups():
    args, notes = build_grpo_config(
        _with_eval(prompts_per_step=2), {"num_generations": 4, "eval_steps": 5}, output_dir="x"
    )
    assert args.eval_strategy == "steps" and args.eval_steps == 5
    assert args.per_device_eval_batch_size == 8  # a training batch's worth: 2 tasks × 4 samples
    assert any(n.startswith("eval_strategy=steps (eval_steps=5; members with an eval set: a)") for n in notes)
    # Without eval_steps no periodic evaluation (ormix's final evaluation runs anyway); given ones stay.
    args, _ = build_grpo_config(_with_eval(), {"num_generations": 4}, output_dir="x")
    assert args.eval_strategy == "no"
    args, _ = build_grpo_config(
        _with_eval(),
        {"num_generations": 4, "num_generations_eval": 3, "eval_strategy": "epoch"},
        output_dir="x",
    )
    assert args.eval_strategy == "epoch" and args.per_device_eval_batch_size % 3 == 0


@pytest.mark.parametrize(
    ("mixture", "given_settings", "message"),
    [
        (_echo_mix, {"eval_steps": 5}, "eval_steps=5: no member has an eval set"),
        (_echo_mix, {"eval_strategy": "steps"}, "eval_strategy=steps: no member has an eval set"),
        (_with_eval, {"eval_steps": 5, "per_device_eval_batch_size": 3}, "make it a multiple of 2"),
        (_echo_mix, {"max_steps": -1}, "a run trains at least 1 step, not -1"),
    ],
)
def test_evaluation_and_step_settings_that_cannot_work_are_refused(mixture, given_settings, message):
    with pytest.raises(TrainConfigError, match=message):
        build_grpo_config(mixture(), {"num_generations": 2, **given_settings}, output_dir="x")


@settings(max_examples=200, deadline=None)
@given(
    gens=st.integers(1, 16),
    world=st.sampled_from([1, 2, 4, 8]),
    train_batch=st.integers(1, 64),
    eval_batch=st.one_of(st.none(), st.integers(1, 64)),
)
def test_the_eval_batch_holds_whole_groups_or_is_refused(gens, world, train_batch, eval_batch):
    from ormix.trl._args import derive_eval

    settings_ = {"eval_steps": 2, "num_generations_eval": gens, "per_device_train_batch_size": train_batch}
    if eval_batch is not None:
        settings_["per_device_eval_batch_size"] = eval_batch
    try:
        derive_eval(settings_, ["a"], world)
    except TrainConfigError as e:
        assert eval_batch is not None and (eval_batch * world) % gens and "multiple of" in str(e)
        return
    assert (settings_["per_device_eval_batch_size"] * world) % gens == 0
    assert settings_["eval_strategy"] == "steps"
    if eval_batch is None:  # about a training batch, never less than one group
        assert gens <= settings_["per_device_eval_batch_size"] <= max(train_batch, gens)


def test_an_unset_max_steps_trains_the_planned_steps_not_epochs():
    args, notes = build_grpo_config(
        _echo_mix(prompts_per_step=2, num_samples=10), {"num_generations": 2}, output_dir="x"
    )
    assert args.max_steps == 5 and "max_steps=5 (the mixture plans 5 steps of 2 prompts)" in notes
    args, _ = build_grpo_config(
        _echo_mix(prompts_per_step=2, num_samples=10), {"num_generations": 2, "max_steps": 3}, output_dir="x"
    )
    assert args.max_steps == 3
    args, _ = build_grpo_config(_echo_mix(), {"num_generations": 2}, output_dir="x")
    assert args.max_steps == -1  # no plan laid out by steps: TRL's own default
