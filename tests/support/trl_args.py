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
