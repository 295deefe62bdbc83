"""A `GRPOConfig` consistent with a mixture: typed overrides, named mistakes, derived batch geometry."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ormix import MixtureSpec, OpenRewardSpec
from ormix.errors import TrainConfigError
from ormix.integrations.trl.args import build_grpo_config, derive_batch, parse_overrides


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
