"""`trainer.evaluate()` and `predict()` with `callbacks=mix.callbacks`, without training first.

The mixture plans exact per-step quotas (its callbacks are required: without them the first scored batch
stops with "built without ormix's callbacks"), so these runs pass only when the callbacks attach when the
trainer is built. The echo script answers every eval task correctly, so the records' rewards are known.
No trainer leaves a filter on TRL's logger behind (it would hide every later trainer's notices).
"""

from __future__ import annotations

import logging

import pytest

from ormix import MixtureSpec, OpenRewardSpec
from ormix._errors import TrainConfigError
from ormix.mixture._mixture import Member
from ormix.telemetry._records import read_records
from ormix.trl._callbacks import TelemetryCallback
from ormix.workbench._scripted import ScriptedPolicy, tool_call
from support.trl_args import cpu_grpo_config

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")


TRL_LOGGER = logging.getLogger("trl.trainer.grpo_trainer")


def _telemetry(mix: MixtureSpec) -> TelemetryCallback:
    return next(c for c in mix.callbacks if isinstance(c, TelemetryCallback))


def _word(ctx) -> str:
    return ctx.user.split("word '")[1].split("'")[0]


def _mixture() -> MixtureSpec:
    return MixtureSpec(
        {
            "a": Member(OpenRewardSpec("local:echo", num_tasks=4, local_serve="thread"), eval_split="test"),
            "b": OpenRewardSpec("local:echo", indices=[5, 6], local_serve="thread"),
        },
        prompts_per_step=2,
        num_samples=4,
    )


def test_evaluate_and_predict_record_eval_rollouts_without_training(tiny_model, tmp_path):
    from trl import GRPOTrainer

    mix = _mixture()
    assert mix.order_matters  # its callbacks are required
    args = cpu_grpo_config(
        str(tmp_path / "out"),
        max_completion_length=48,
        max_tool_calling_iterations=1,
        num_generations_eval=2,
        per_device_eval_batch_size=4,
        activation_checkpointing=False,
    )
    trainer = GRPOTrainer(
        model=tiny_model,
        args=args,
        train_dataset=mix.train_dataset,
        eval_dataset=mix.eval_dataset["a"],
        environment_factory=mix.environment_factory,
        reward_funcs=mix.reward_funcs,
        callbacks=mix.callbacks,
    )
    ScriptedPolicy(lambda ctx: tool_call("submit", text=_word(ctx)) if ctx.turn == 0 else "done").attach(
        trainer
    )
    try:
        metrics = trainer.evaluate()
        records = read_records(tmp_path / "out")
        # Every task of a's test split (4), 2 samples each, all scored 1.0, as eval rollouts of step 0.
        assert len(records) == 8
        assert {r["mode"] for r in records} == {"eval"} and {r["step"] for r in records} == {0}
        assert sorted({r["task_index"] for r in records}) == [0, 1, 2, 3]
        assert all(r["member"] == "a" and r["env_reward"] == 1.0 for r in records)
        assert {r["split"] for r in records} == {"test"}  # the eval set's split, not the member's own

        assert metrics["eval_rewards/a/mean"] == pytest.approx(1.0)

        trainer.predict(mix.eval_dataset["a"].select([0, 1]))
        assert len(read_records(tmp_path / "out")) == 12
        assert _telemetry(mix).unscored_notices not in TRL_LOGGER.filters
    finally:
        mix.close()


def test_ormix_trainers_evaluate_counts_trls_unscored_dumps_and_leaves_no_filter(
    tiny_model, tmp_path, caplog
):
    from ormix.trl._trainer import ConcurrentGRPOTrainer

    mix = _mixture()
    args = cpu_grpo_config(
        str(tmp_path / "out"),
        max_completion_length=16,
        max_tool_calling_iterations=1,
        num_generations_eval=2,
        per_device_eval_batch_size=4,
        activation_checkpointing=False,
    )
    trainer = ConcurrentGRPOTrainer(
        model=tiny_model,
        args=args,
        train_dataset=mix.train_dataset,
        eval_dataset=mix.eval_dataset["a"].select([0, 1]),
        environment_factory=mix.environment_factory,
        reward_funcs=mix.reward_funcs,
        callbacks=mix.callbacks,
    )
    ScriptedPolicy(lambda ctx: "no tool call").attach(trainer)  # every rollout unscored
    telemetry = _telemetry(mix)
    assert telemetry.unscored_notices.dropped == 0  # counted per trainer, not since the callbacks were made
    try:
        trainer.evaluate()
    finally:
        mix.close()
    assert telemetry.unscored_notices.dropped >= 1
    assert not [r for r in caplog.records if "All reward functions returned None" in r.getMessage()]
    assert telemetry.unscored_notices not in TRL_LOGGER.filters


def test_evaluation_settings_are_checked_when_the_trainer_is_built(tiny_model, tmp_path):
    from trl import GRPOTrainer

    mix = _mixture()
    # Training's rules (here the shuffled plan) wait for training; what evaluation needs is checked now.
    args = cpu_grpo_config(str(tmp_path / "out"), shuffle_dataset=True)
    trainer = GRPOTrainer(
        model=tiny_model,
        args=args,
        train_dataset=mix.train_dataset,
        environment_factory=mix.environment_factory,
        reward_funcs=mix.reward_funcs,
        callbacks=mix.callbacks,
    )
    with pytest.raises(TrainConfigError, match="shuffle_dataset=False"):
        trainer.train()
    assert _telemetry(mix).unscored_notices not in TRL_LOGGER.filters  # built, never trained: nothing left
    with pytest.raises(TrainConfigError, match="remove_unused_columns=False"):
        GRPOTrainer(
            model=tiny_model,
            args=cpu_grpo_config(str(tmp_path / "out2"), remove_unused_columns=True),
            train_dataset=mix.train_dataset,
            environment_factory=mix.environment_factory,
            reward_funcs=mix.reward_funcs,
            callbacks=mix.callbacks,
        )
    mix.close()
