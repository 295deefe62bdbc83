"""The trainer settings a mixture's plan needs, each rule written once (pure: no I/O, nothing of TRL).

Each function returns the problem in words, naming the setting and the fix, or ``None``. They are checked
wherever the settings become known: a mixture file's ``train:`` section (`MixtureConfig.from_yaml`),
`ormix train` before any server is contacted (plan length, group scoring on several processes),
`build_grpo_config` (shuffling, columns), and `mix.callbacks`' check of any trainer's arguments at its first
step (all four).

Example:
    >>> print(plan_length_problem(max_steps=10, prompts_per_step=4, num_samples=20)[:66])
    the mixture plans 20 rows = 5 steps of 4 prompts, but max_steps=10
    >>> shuffle_problem(order_matters=False, shuffle_dataset=True) is None
    True
    >>> print(max_steps_problem(0)[:40])
    a run trains at least 1 step, not 0 (0 s
"""

from __future__ import annotations

from typing import Any


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


def max_steps_problem(max_steps: object) -> str | None:
    """A step limit below 1: 0 would still train a step, and TRL's -1 (train by epochs) would run the dataset
    several times over, replaying the mixture's plan.

    Example:
        >>> max_steps_problem(4) is None, max_steps_problem(None) is None
        (True, True)
    """
    if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps >= 1:
        return None
    why = (
        "TRL's -1 (train by epochs) would run the dataset several times over and replay the mixture's plan"
        if max_steps < 0
        else "0 steps would still train one"
    )
    return f"a run trains at least 1 step, not {max_steps} ({why}): give the number of steps to train"


def pass_k_problem(ks: object, samples: int | None = None) -> str | None:
    """pass@k values that cannot be reported: each k a whole number >= 1, and at most ``samples`` (pass@k
    needs k samples of a task) when the samples are known. One rule for ``-k`` of `ormix eval` and
    `ormix ablate`, `EvalOptions` and a file's ``evaluation.k``.

    Example:
        >>> pass_k_problem((1, 4)) is None, pass_k_problem((1, 4), samples=4) is None
        (True, True)
        >>> print(pass_k_problem((0, 4)))
        k takes whole numbers >= 1 (e.g. 1,4,8), not [0, 4]
        >>> print(pass_k_problem([1, 8], samples=4))
        each k is at most the samples per task (4): pass@8 needs 8 samples of a task, not [1, 8]
    """
    values = list(ks) if isinstance(ks, (list, tuple)) else [ks]
    ints = [k for k in values if isinstance(k, int) and not isinstance(k, bool) and k >= 1]
    if not values or len(ints) != len(values):
        return f"k takes whole numbers >= 1 (e.g. 1,4,8), not {values}"
    top = max(ints)
    if samples is not None and top > samples:
        return (
            f"each k is at most the samples per task ({samples}): pass@{top} needs {top} samples of a "
            f"task, not {values}"
        )
    return None


#: Settings that are counts of at least 1 (TRL takes a negative one and fails, or loops, much later).
_AT_LEAST_ONE = (
    "max_completion_length",
    "num_generations",
    "num_generations_eval",
    "per_device_train_batch_size",
    "per_device_eval_batch_size",
    "gradient_accumulation_steps",
    "num_iterations",
)
#: Step intervals: a count, or a fraction of the run (HF reads a value below 1 so), never 0 or below.
_POSITIVE = ("logging_steps", "save_steps", "eval_steps")
#: Settings that are numbers of at least 0.
_AT_LEAST_ZERO = ("learning_rate", "warmup_steps", "weight_decay", "max_grad_norm", "save_total_limit")


def range_problem(key: str, value: object) -> str | None:
    """A trainer setting out of its range: a count below 1 (``max_completion_length=-5``), a rate or
    count below 0, a temperature that is not positive. ``None`` (TRL's default) is always fine.

    Example:
        >>> range_problem("max_completion_length", -5)
        'a whole number >= 1, not -5'
        >>> range_problem("max_completion_length", 16) is None, range_problem("temperature", 0.7) is None
        (True, True)
    """
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    if key in _AT_LEAST_ONE and value < 1:
        return f"a whole number >= 1, not {value}"
    if key in _AT_LEAST_ZERO and value < 0:
        return f"a number >= 0, not {value}"
    if key in _POSITIVE and value <= 0:
        return f"a number > 0 (steps, or a fraction of the run below 1), not {value}"
    if key == "temperature" and value <= 0:
        return f"a number > 0, not {value} (sampling needs a positive temperature)"
    return None


def eval_settings_problem(
    eval_strategy: object, eval_steps: object, eval_members: list[str] | tuple[str, ...]
) -> str | None:
    """Periodic evaluation asked for (``eval_strategy`` other than ``no``, or ``eval_steps``) on a mixture
    with nothing to evaluate on.

    Example:
        >>> print(eval_settings_problem("steps", None, [])[:44])
        eval_strategy=steps: no member has an eval s
        >>> eval_settings_problem(None, 10, ["seta"]) is None
        True
    """
    if eval_members:
        return None
    strategy = str(getattr(eval_strategy, "value", eval_strategy)) if eval_strategy is not None else None
    if strategy not in (None, "no"):
        asked = f"eval_strategy={strategy}"
    elif eval_steps is not None and strategy is None:
        asked = f"eval_steps={eval_steps}"
    else:
        return None
    return (
        f"{asked}: no member has an eval set, so there is nothing to evaluate on; give a member an "
        "`eval:` section (e.g. `eval: {split: test}`) or `role: both`, or drop the setting"
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


def generation_problem(order_matters: bool, args: Any) -> str | None:
    """A plan laid out by steps needs one generation batch per optimizer step, as TRL makes it only with
    ``num_iterations=1`` and ``steps_per_generation`` equal to ``gradient_accumulation_steps`` (TRL's
    default): otherwise a step's rows train several steps (``num_iterations``), or several steps' rows are
    shuffled into one (``steps_per_generation``), and the quotas, the schedule and the records' steps say
    other than what trained. ``args``: the trainer's configuration (a `GRPOConfig`).

    Example:
        >>> from types import SimpleNamespace
        >>> args = SimpleNamespace(num_iterations=2, steps_per_generation=1, gradient_accumulation_steps=1)
        >>> print(generation_problem(True, args)[:60])
        num_iterations=2 trains each generated batch for 2 steps, so
        >>> generation_problem(False, args) is None      # no plan by steps: nothing to keep
        True
    """
    if not order_matters:
        return None
    keep = "(quotas, a schedule, round robin or adaptive rows)"
    iterations = getattr(args, "num_iterations", 1)
    if isinstance(iterations, int) and iterations != 1:
        return (
            f"num_iterations={iterations} trains each generated batch for {iterations} steps, so the "
            f"mixture's plan {keep} would run {iterations} times slower than its steps say: set "
            "num_iterations=1, or drop prompts_per_step / schedule from the mixture"
        )
    accumulation = getattr(args, "gradient_accumulation_steps", 1)
    steps = getattr(args, "steps_per_generation", None)
    if isinstance(steps, int) and isinstance(accumulation, int) and steps != accumulation:
        return (
            f"steps_per_generation={steps} generates once every {steps} micro-steps, not once an optimizer "
            f"step ({accumulation}): the mixture's plan {keep} would mix steps: leave steps_per_generation "
            "unset (TRL then sets it to gradient_accumulation_steps)"
        )
    return None


def columns_problem(remove_unused_columns: bool | None) -> str | None:
    """Every rollout needs its row's ``environment`` and ``task_index`` columns."""
    if not remove_unused_columns:
        return None
    return (
        "remove_unused_columns=True strips the 'environment' and 'task_index' columns every rollout needs: "
        "set remove_unused_columns=False (`ormix train` does)"
    )


def group_scoring_problem(mixture: Any, args: Any, world_size: int) -> str | None:
    """Group scoring on several processes: each GRPO group must be whole on one process, or each part would be
    scored as a group of its own (preferences among fewer candidates than the group has): refused, not
    guessed.

    TRL gives process k the slice ``[k*n, (k+1)*n)`` of each generation batch, ``n`` being
    ``per_device_train_batch_size × steps_per_generation``, and a group is ``num_generations`` consecutive
    rollouts of it: every group is whole on one process exactly when ``n`` is a multiple of
    ``num_generations`` (with the batch sizes ormix derives: when ``prompts_per_step`` is a multiple of the
    processes). Evaluation during training likewise needs ``per_device_eval_batch_size`` a multiple of
    ``num_generations_eval``. A configuration that does not say its geometry (no ``steps_per_generation``)
    is refused on several processes.

    Example:
        >>> from types import SimpleNamespace
        >>> cfg = SimpleNamespace(members={"r": SimpleNamespace(group_scoring=SimpleNamespace(mode="auto"))},
        ...                       prompts_per_step=3)
        >>> mix = SimpleNamespace(config=cfg)
        >>> args = SimpleNamespace(num_generations=4, per_device_train_batch_size=6, steps_per_generation=2)
        >>> group_scoring_problem(mix, args, 2) is None              # 12 rollouts a process: 3 whole groups
        True
        >>> args.steps_per_generation = 1
        >>> import textwrap
        >>> print(textwrap.fill(group_scoring_problem(mix, args, 2), 96))  # 6: the second group is split
        group scoring (members r) on 2 processes needs every GRPO group whole on one process, and each
        process's generation batch (per_device_train_batch_size × steps_per_generation = 6 × 1 = 6
        rollouts) is not a multiple of num_generations (4): with the batch sizes ormix derives, make
        prompts_per_step (3) a multiple of the 2 processes; or train on one process, or set
        group_scoring: off
        >>> group_scoring_problem(mix, args, 1) is None
        True
    """
    config = getattr(mixture, "config", None)
    members = getattr(config, "members", None) or {}
    scored = sorted(
        name
        for name, member in members.items()
        if getattr(getattr(member, "group_scoring", None), "mode", "off") != "off"
    )
    if world_size <= 1 or not scored:
        return None
    head = (
        f"group scoring (members {', '.join(scored)}) on {world_size} processes needs every GRPO group whole "
        "on one process, and"
    )
    tail = "train on one process, or set group_scoring: off"
    names = ("num_generations", "per_device_train_batch_size", "steps_per_generation")
    geometry: list[Any] = [getattr(args, name, None) for name in names]
    if not all(isinstance(x, int) and x > 0 for x in geometry):
        return f"{head} this trainer's configuration does not say how it splits a generation batch: {tail}"
    size, per_device, steps = geometry
    if (per_device * steps) % size:
        k = getattr(config, "prompts_per_step", None)
        fix = f"make prompts_per_step ({k}) a multiple of the {world_size} processes" if k else "change them"
        return (
            f"{head} each process's generation batch (per_device_train_batch_size × steps_per_generation = "
            f"{per_device} × {steps} = {per_device * steps} rollouts) is not a multiple of num_generations "
            f"({size}): with the batch sizes ormix derives, {fix}; or {tail}"
        )
    strategy = getattr(args, "eval_strategy", "no")
    if str(getattr(strategy, "value", strategy)) != "no":
        eval_size = getattr(args, "num_generations_eval", None) or size
        batch = getattr(args, "per_device_eval_batch_size", None)
        if not isinstance(batch, int) or batch % eval_size:
            return (
                f"{head} each process's eval batch (per_device_eval_batch_size = {batch}) is not a multiple "
                f"of num_generations_eval ({eval_size}): make it one (or leave it out and ormix derives it); "
                f"or {tail}"
            )
    return None
