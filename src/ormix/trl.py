"""The TRL side of ormix: trainer callbacks and checks of the trainer's configuration.

Imported only when a trainer is built (it imports transformers).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from transformers import TrainerCallback


class SessionCleanupCallback(TrainerCallback):
    """Closes every ORS session still open when training ends (TRL never closes its environments).

    Example:
        >>> GRPOTrainer(..., callbacks=spec.callbacks)   # doctest: +SKIP
    """

    def __init__(self, specs: Iterable[Any]) -> None:
        self.specs = list(specs)

    def on_train_end(self, args, state, control, **kwargs):  # noqa: D401 - TrainerCallback hook
        for spec in self.specs:
            spec.close_sessions()
        return control


class TrainerConfigError(ValueError):
    """The trainer's configuration would silently break the mixture's plan."""


def prompts_per_step_of(args: Any, world_size: int | None = None) -> int | None:
    """Unique prompts per optimizer step for a `GRPOConfig` (per-device batch × processes × accumulation / G)."""
    if world_size is None:
        world_size = getattr(args, "world_size", 1) or 1
    num_generations = getattr(args, "num_generations", None)
    per_device = getattr(args, "per_device_train_batch_size", None)
    if not num_generations or not per_device:
        return None
    total = per_device * world_size * (getattr(args, "gradient_accumulation_steps", 1) or 1)
    return total // num_generations if total % num_generations == 0 else None


def check_trainer_args(mixture: Any, args: Any, world_size: int | None = None) -> list[str]:
    """Problems between a mixture and a trainer configuration, each naming the setting to change.

    Example:
        >>> check_trainer_args(mix, GRPOConfig(shuffle_dataset=True))   # doctest: +SKIP
        ['the mixture plan carries an order (...): set shuffle_dataset=False in GRPOConfig ...']
    """
    problems = []
    if mixture.order_matters and getattr(args, "shuffle_dataset", True):
        problems.append(
            "the mixture's plan carries an order (exact per-step quotas, a schedule or round robin) and "
            "shuffle_dataset=True would silently shuffle it away: set shuffle_dataset=False in GRPOConfig "
            "(`ormix train` does this for you)")
    if getattr(args, "remove_unused_columns", False):
        problems.append(
            "remove_unused_columns=True strips the 'environment' and 'task_index' columns every rollout needs: "
            "set remove_unused_columns=False in GRPOConfig")
    wanted = getattr(mixture, "prompts_per_step", None)
    if wanted:
        actual = prompts_per_step_of(args, world_size)
        if actual is not None and actual != wanted:
            problems.append(
                f"the mixture plans prompts_per_step={wanted} but the trainer takes {actual} unique prompts per "
                "step (per_device_train_batch_size × processes × gradient_accumulation_steps / num_generations): "
                "make them equal, or the per-step composition will not hold")
    return problems


class MixtureConfigCheck(TrainerCallback):
    """Stops training before the first step when the trainer's settings would break the mixture's plan."""

    def __init__(self, mixture: Any) -> None:
        self.mixture = mixture

    def on_train_begin(self, args, state, control, **kwargs):
        problems = check_trainer_args(self.mixture, args)
        if problems:
            raise TrainerConfigError("ormix cannot train this mixture with these settings:\n- "
                                     + "\n- ".join(problems))
        return control
