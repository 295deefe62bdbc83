"""The trainer settings a mixture's plan needs, each rule written once (pure: no I/O, nothing of TRL).

Each function returns the problem in words, naming the setting and the fix, or ``None``. They are checked
wherever the settings become known: a mixture file's ``train:`` section (`MixtureConfig.from_yaml`),
`ormix train` before any server is contacted (plan length), `build_grpo_config` (shuffling, columns), and
`mix.callbacks`' check of any trainer's arguments at its first step (all three).

Example:
    >>> print(plan_length_problem(max_steps=10, prompts_per_step=4, num_samples=20)[:66])
    the mixture plans 20 rows = 5 steps of 4 prompts, but max_steps=10
    >>> shuffle_problem(order_matters=False, shuffle_dataset=True) is None
    True
"""

from __future__ import annotations

__all__ = ["columns_problem", "plan_length_problem", "shuffle_problem"]


def plan_length_problem(
    max_steps: int | None,
    prompts_per_step: int | None,
    num_samples: int | None = None,
    num_steps: int | None = None,
) -> str | None:
    """A run longer than its plan would start the dataset over: the plan replayed from its first step.

    The plan has ``num_samples`` rows, else ``num_steps × prompts_per_step``; without a plan laid out by
    steps (no ``prompts_per_step``) or a step limit, there is nothing to check.
    """
    k = prompts_per_step
    rows = num_samples if num_samples is not None else (num_steps * k if num_steps and k else None)
    if not (k and rows and max_steps and max_steps > 0) or rows // k >= max_steps:
        return None
    return (
        f"the mixture plans {rows} rows = {rows // k} steps of {k} prompts, but max_steps={max_steps}: the "
        "run would replay the plan from its first step (a schedule from phase 1); set num_samples >= "
        f"{max_steps * k} (or num_steps) in the mixture, or lower max_steps"
    )


def shuffle_problem(order_matters: bool, shuffle_dataset: bool | None) -> str | None:
    """A shuffled dataset loses a plan whose order carries meaning (quotas, a schedule, round robin)."""
    if not (order_matters and shuffle_dataset):
        return None
    return (
        "shuffle_dataset=True would shuffle away the mixture's plan (exact per-step quotas, a schedule or "
        "round robin): set shuffle_dataset=False (`ormix train` does unless told otherwise), or drop "
        "prompts_per_step / schedule from the mixture"
    )


def columns_problem(remove_unused_columns: bool | None) -> str | None:
    """Every rollout needs its row's ``environment`` and ``task_index`` columns."""
    if not remove_unused_columns:
        return None
    return (
        "remove_unused_columns=True strips the 'environment' and 'task_index' columns every rollout needs: "
        "set remove_unused_columns=False (`ormix train` does)"
    )
