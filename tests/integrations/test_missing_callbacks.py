"""A hand-built `GRPOTrainer` without `callbacks=mix.callbacks` is noticed at the first scored batch.

A mixture whose plan carries an order (here exact per-step quotas) stops with a message naming the missing
argument; a single environment (the TRL drop-in) warns once and trains on, degraded. Also: TRL's
"All reward functions returned None" dump is filtered by ormix's callbacks, with a count.
"""

from __future__ import annotations

import logging
import warnings

import pytest

from ormix import MixtureSpec, OpenRewardSpec
from ormix._errors import UsageError
from ormix.telemetry._alarm import UnscoredRolloutsWarning
from ormix.telemetry._records import MissingCallbacksWarning
from ormix.trl._callbacks import TelemetryCallback
from ormix.workbench._scripted import ScriptedPolicy, tool_call
from support.trl_args import cpu_grpo_config

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")


def _args(out, **extra):
    settings = dict(
        max_steps=1, max_completion_length=256, max_tool_calling_iterations=2, activation_checkpointing=False
    )
    return cpu_grpo_config(str(out), **{**settings, **extra})


def _echo_once(ctx):
    return tool_call("submit", text="x") if ctx.turn == 0 else "done"


def test_an_ordered_mixture_without_its_callbacks_stops_naming_the_argument(tiny_model, tmp_path):
    from trl import GRPOTrainer

    mix = MixtureSpec(
        {
            "a": OpenRewardSpec("local:echo", num_tasks=4, local_serve="thread"),
            "b": OpenRewardSpec("local:echo", num_tasks=4, local_serve="thread"),
        },
        prompts_per_step=2,
        num_samples=2,
        seed=0,
    )
    assert mix.order_matters
    trainer = GRPOTrainer(
        model=tiny_model,
        args=_args(tmp_path / "out"),
        train_dataset=mix.train_dataset,
        environment_factory=mix.environment_factory,
        reward_funcs=mix.reward_funcs,
    )
    ScriptedPolicy(_echo_once).attach(trainer)
    try:
        with pytest.raises(UsageError, match=r"callbacks=mix\.callbacks") as caught:
            trainer.train()
        assert "plan" in str(caught.value)
        # The batch's sessions were closed before the error ended training.
        assert mix.close_sessions() == 0
        assert not (tmp_path / "out" / "rollouts").exists()
    finally:
        mix.close()


def test_a_single_environment_without_callbacks_warns_once_and_trains(tiny_model, tmp_path):
    from trl import GRPOTrainer

    spec = OpenRewardSpec("local:echo", num_tasks=4, local_serve="thread")
    trainer = GRPOTrainer(
        model=tiny_model,
        args=_args(tmp_path / "out", max_steps=2),
        train_dataset=spec.train_dataset,
        environment_factory=spec.environment_factory,
        reward_funcs=spec.reward_funcs,
    )
    ScriptedPolicy(_echo_once).attach(trainer)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")  # each distinct warning once, as a console shows them
            trainer.train()
    finally:
        spec.close()
    said = [w for w in caught if issubclass(w.category, MissingCallbacksWarning)]
    assert len(said) == 1 and "callbacks=mix.callbacks" in str(said[0].message)
    assert trainer.state.global_step == 2
    assert any("ormix/echo/coverage" in h for h in trainer.state.log_history)


def test_trls_all_none_dump_is_filtered_and_counted(tiny_model, tmp_path, caplog):
    from trl import GRPOTrainer

    # Every rollout is unscored (no submit): TRL would dump each prompt and completion.
    spec = OpenRewardSpec("local:echo", num_tasks=4, local_serve="thread")
    trainer = GRPOTrainer(
        model=tiny_model,
        args=_args(tmp_path / "out"),
        train_dataset=spec.train_dataset,
        environment_factory=spec.environment_factory,
        reward_funcs=spec.reward_funcs,
        callbacks=spec.callbacks,
    )
    ScriptedPolicy(lambda ctx: "no tool call").attach(trainer)
    caplog.set_level(logging.INFO)
    try:
        with pytest.warns(UnscoredRolloutsWarning) as said:
            trainer.train()
    finally:
        spec.close()
    trl_said = [r for r in caplog.records if r.name.startswith("trl")]
    assert not [r for r in trl_said if "All reward functions returned None" in r.getMessage()]
    callback = next(c for c in spec.callbacks if isinstance(c, TelemetryCallback))
    assert callback.unscored_notices.dropped >= 1
    # Never left out without a word: said in ormix's words, as a warning a Python caller sees (at the first
    # step that had one, and the total at the end), and in the log.
    total = f'returned None" {callback.unscored_notices.dropped} time(s) in this training'
    ours = [str(w.message) for w in said if issubclass(w.category, UnscoredRolloutsWarning)]
    assert ours[-1].startswith("ormix: rollouts ended without a reward") and total in ours[-1]
    assert any(total in r.getMessage() for r in caplog.records if r.name == "ormix.telemetry")
    # Filtering ends with training: the filter is no longer on TRL's logger.
    assert callback.unscored_notices not in logging.getLogger("trl.trainer.grpo_trainer").filters


def test_a_training_that_raised_leaves_no_filter_that_takes_the_next_trainers_notices(tmp_path):
    # TRL calls no on_train_end when training raises: the filter that training put on TRL's logger stays.
    from types import SimpleNamespace

    from ormix.telemetry._records import TelemetryObserver

    trl_logger = logging.getLogger("trl.trainer.grpo_trainer")
    args = SimpleNamespace(output_dir=str(tmp_path), num_generations=2, process_index=0)
    crashed, next_one = (TelemetryCallback({"a": TelemetryObserver("a")}) for _ in range(2))
    try:
        crashed.on_train_begin(args, SimpleNamespace(global_step=0), SimpleNamespace())  # ...and it raised
        next_one.on_train_begin(args, SimpleNamespace(global_step=0), SimpleNamespace())
        trl_logger.warning("All reward functions returned None for the following kwargs: ...")
        assert (crashed.unscored_notices.dropped, next_one.unscored_notices.dropped) == (0, 1)
        with (
            crashed.unscored_notices_filtered() as notices
        ):  # an evaluation takes them back, and gives them up
            trl_logger.warning("All reward functions returned None for the following kwargs: ...")
        assert notices.dropped == 1 and notices not in trl_logger.filters
    finally:
        for f in list(trl_logger.filters):
            trl_logger.removeFilter(f)
