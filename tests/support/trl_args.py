"""One `GRPOConfig` for the suite's CPU runs: the tiny offline model, no saving, no shuffling, quiet."""

from __future__ import annotations

from typing import Any


def cpu_grpo_config(output_dir: str, **overrides: Any) -> Any:
    """TRL's `GRPOConfig` for a short CPU run on the tiny model; `overrides` set anything else.

    `shuffle_dataset=False` keeps ormix's per-step composition (the dataset order carries the plan).
    """
    from trl import GRPOConfig

    settings: dict[str, Any] = dict(
        output_dir=output_dir,
        per_device_train_batch_size=4,
        num_generations=2,
        max_steps=2,
        max_completion_length=96,
        learning_rate=1e-5,
        logging_steps=1,
        report_to="none",
        bf16=False,
        use_cpu=True,
        save_strategy="no",
        shuffle_dataset=False,
        disable_tqdm=True,
    )
    settings.update(overrides)
    return GRPOConfig(**settings)


def scripted_trainer(mix: Any, model: Any, args: Any, script: Any, trainer_class: Any = None) -> Any:
    """A trainer on the mixture `mix` (its dataset, environments, reward functions and callbacks) whose
    policy plays `script` (`ormix.workbench._scripted.ScriptedPolicy`); TRL's `GRPOTrainer` unless
    `trainer_class` is given."""
    from trl import GRPOTrainer

    from ormix.workbench._scripted import ScriptedPolicy

    trainer = (trainer_class or GRPOTrainer)(
        model=model,
        args=args,
        train_dataset=mix.train_dataset,
        environment_factory=mix.environment_factory,
        reward_funcs=mix.reward_funcs,
        callbacks=mix.callbacks,
    )
    ScriptedPolicy(script).attach(trainer)
    return trainer
