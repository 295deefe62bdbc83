"""A `GRPOConfig` consistent with a mixture: defaults, checked overrides, derived batch geometry.

Example:
    >>> check_settings({"max_steps": "4", "learning_rate": "1e-5"}, "train.")
    {'max_steps': 4, 'learning_rate': 1e-05}
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from ormix._errors import TrainConfigError
from ormix.config._problems import suggest
from ormix.config._trainer_rules import (
    columns_problem,
    eval_settings_problem,
    generation_problem,
    max_steps_problem,
    range_problem,
    shuffle_problem,
)
from ormix.trl._compat import grpo_config_fields

#: Settings ormix chooses when neither the file nor the caller does (reasoning next to `build_grpo_config`).
DEFAULTS: dict[str, Any] = {
    "report_to": "none",
    "logging_steps": 1,
    "log_completions": True,  # completions land in <run dir>/completions/*.parquet
    "num_completions_to_print": 0,  # ...but are not printed as a table every step
    "disable_tqdm": True,  # one compact line per step instead
    "max_tool_calling_iterations": 10,
    "save_strategy": "no",
    # transformers' Trainer copies this into model.config; without it GRPO's transformers-backend generation
    # runs without a KV cache: quadratic in the episode length (2x slower at 128 tokens, worse beyond).
    "use_cache": True,
}


def _coerce_setting(name: str, value: Any, default: Any) -> Any:
    """``value`` converted to the type of the setting's ``default`` (YAML reads ``1e-5`` as text, flags arrive
    untyped); raises ``ValueError`` saying what was expected.

    Example:
        >>> _coerce_setting("max_steps", "4", -1), _coerce_setting("learning_rate", 1, 1e-6)
        (4, 1.0)
    """
    if isinstance(default, bool) or default is None or isinstance(value, bool):
        return value
    try:
        if isinstance(default, float) and isinstance(value, (int, str)):
            return float(value)
        if isinstance(default, int) and isinstance(value, str):
            return int(value)
        if isinstance(default, int) and isinstance(value, float) and value.is_integer():
            return int(value)
    except ValueError:
        raise ValueError(
            f"expected {'an' if isinstance(default, int) else 'a'} {type(default).__name__}"
        ) from None
    return value


def setting_problems(settings: Mapping[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Checked GRPOConfig keyword arguments, and ``(key, message)`` for every one that is wrong.

    Example:
        >>> for problem in setting_problems({"max_step": 4, "num_generations": "x", "max_steps": 0})[1]:
        ...     print(problem[0], "|", problem[1][:38])
        max_step | not a GRPOConfig setting; did you mean
        num_generations | expected an int
        max_steps | a run trains at least 1 step, not 0 (0
    """
    fields = grpo_config_fields()
    out: dict[str, Any] = {}
    problems: list[tuple[str, str]] = []
    for key, value in settings.items():
        if key not in fields:
            problems.append((key, f"not a GRPOConfig setting{suggest(key, fields)}"))
            continue
        try:
            out[key] = _coerce_setting(key, value, fields[key])
        except ValueError as e:
            problems.append((key, str(e)))
            continue
        problem = max_steps_problem(out[key]) if key == "max_steps" else range_problem(key, out[key])
        if problem:
            problems.append((key, problem))
    return out, problems


def check_settings(settings: Mapping[str, Any], where: str) -> dict[str, Any]:
    """GRPOConfig keyword arguments, each checked to be a setting and converted to its type.

    ``where`` prefixes messages (``"train."`` for a file's section, ``"--set "`` for flags); every problem is
    named in one `TrainConfigError`.
    """
    out, problems = setting_problems(settings)
    if problems:
        raise TrainConfigError("\n".join(f"{where}{key}: {message}" for key, message in problems))
    return out


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``["key=value", ...]`` (the CLI's ``--set``) as a dict; values are read as YAML scalars.

    Example:
        >>> parse_overrides(["max_steps=4", "report_to=none", "learning_rate=1e-5", "bf16=false"])
        {'max_steps': 4, 'report_to': 'none', 'learning_rate': '1e-5', 'bf16': False}
    """
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise TrainConfigError(f"--set {item!r} is not key=value; write e.g. --set learning_rate=1e-5")
        try:
            out[key] = yaml.safe_load(value.strip())
        except yaml.YAMLError:
            out[key] = value.strip()
    return out


#: The two settings whose product (× processes) is one optimizer step's completions.
_BATCH_SETTINGS = ("per_device_train_batch_size", "gradient_accumulation_steps")


def derive_batch(settings: dict[str, Any], prompts_per_step: int, world_size: int, where: str) -> list[str]:
    """Fill per_device_train_batch_size / gradient_accumulation_steps so one optimizer step takes exactly
    `prompts_per_step` unique prompts; explain what to change where the given values cannot."""
    notes: list[str] = []
    generations = int(settings.get("num_generations") or 8)
    completions = prompts_per_step * generations  # completions per optimizer step, over all processes
    if completions % world_size:
        raise TrainConfigError(
            f"prompts_per_step={prompts_per_step} × num_generations={generations} = {completions} "
            f"completions per step cannot be split over {world_size} processes: change "
            "prompts_per_step or num_generations"
        )
    per_rank = completions // world_size
    batch = settings.get("per_device_train_batch_size")
    accum = settings.get("gradient_accumulation_steps")
    explain = (
        f"the mixture plans prompts_per_step={prompts_per_step}, so one step needs {completions} completions "
        f"(prompts_per_step × num_generations={generations}) = per_device_train_batch_size × "
        f"gradient_accumulation_steps × processes ({world_size})"
    )
    if batch is not None and accum is not None:
        if batch * accum != per_rank:
            raise TrainConfigError(
                f"{where}per_device_train_batch_size={batch} × gradient_accumulation_steps={accum}"
                f" = {batch * accum}, but {explain}: set them so their product is {per_rank}, or "
                "leave one out and ormix derives it"
            )
    elif batch is not None or accum is not None:
        # One of the two given: the other follows, when the given one divides the step.
        given, derived = _BATCH_SETTINGS if batch is not None else _BATCH_SETTINGS[::-1]
        value = settings[given]
        if per_rank % value:
            raise TrainConfigError(
                f"{where}{given}={value} does not divide {per_rank}: {explain}; pick a divisor, or leave it "
                "out and ormix derives it"
            )
        settings[derived] = per_rank // value
        notes.append(f"{derived}={per_rank // value} (derived from prompts_per_step)")
    else:
        # The largest batch of at most 8 completions dividing the step: modest memory, few accumulations.
        batch = max(d for d in range(1, min(per_rank, 8) + 1) if per_rank % d == 0)
        settings["per_device_train_batch_size"] = batch
        settings["gradient_accumulation_steps"] = per_rank // batch
        notes.append(
            f"per_device_train_batch_size={batch}, gradient_accumulation_steps={per_rank // batch} "
            "(derived from prompts_per_step)"
        )
    return notes


def derive_eval(
    settings: dict[str, Any], eval_members: Sequence[str], world_size: int, where: str = ""
) -> list[str]:
    """Periodic evaluation settings that agree with the mixture's eval sets (`settings` changed in place).

    - ``eval_strategy``: ``steps`` when ``eval_steps`` is given and a member has an eval set, else ``no``
      unless given (a final evaluation runs anyway); asking for evaluation with no eval set is refused;
    - ``per_device_eval_batch_size``: whole groups of ``num_generations_eval`` (TRL's default: the training
      ``num_generations``) rollouts, about as many as a training batch; a given one that cannot hold whole
      groups over the processes is refused.

    Example:
        >>> settings = {"eval_steps": 5, "num_generations": 4, "per_device_train_batch_size": 8}
        >>> for note in derive_eval(settings, ["echo"], world_size=1):
        ...     print(note)
        eval_strategy=steps (eval_steps=5; members with an eval set: echo)
        per_device_eval_batch_size=8 (2 tasks × num_generations_eval=4)
    """
    notes: list[str] = []
    strategy, steps = settings.get("eval_strategy"), settings.get("eval_steps")
    problem = eval_settings_problem(strategy, steps, list(eval_members))
    if problem:
        raise TrainConfigError(f"{where}{problem}")
    if not eval_members:
        return notes
    if strategy is None:
        settings["eval_strategy"] = "steps" if steps is not None else "no"
        if steps is not None:
            notes.append(
                f"eval_strategy=steps (eval_steps={steps}; members with an eval set: "
                f"{', '.join(eval_members)})"
            )
    if str(getattr(settings["eval_strategy"], "value", settings["eval_strategy"])) == "no":
        return notes
    generations = int(settings.get("num_generations_eval") or settings.get("num_generations") or 8)
    batch = settings.get("per_device_eval_batch_size")
    if batch is None:
        tasks = max(1, int(settings.get("per_device_train_batch_size") or generations) // generations)
        settings["per_device_eval_batch_size"] = tasks * generations
        notes.append(
            f"per_device_eval_batch_size={tasks * generations} ({tasks} task{'s' if tasks > 1 else ''} × "
            f"num_generations_eval={generations})"
        )
    elif (batch * world_size) % generations:
        raise TrainConfigError(
            f"{where}per_device_eval_batch_size={batch} × {world_size} process(es) does not hold whole "
            f"groups of num_generations_eval={generations} rollouts of a task: make it a multiple of "
            f"{generations} (or leave it out and ormix derives it)"
        )
    return notes


def _name_activation_checkpointing(settings: dict[str, Any], config_class: Any) -> None:
    # transformers 5 renamed gradient_checkpointing* to activation_checkpointing* and warns (FutureWarning) on
    # every config whose new name is unset, which TRL's own default (gradient_checkpointing=True) always is.
    # Passing the value under the new name keeps what the file asks for and the run free of the notice.
    fields = {f.name for f in dataclasses.fields(config_class)}
    for old, new in (
        ("gradient_checkpointing", "activation_checkpointing"),
        ("gradient_checkpointing_kwargs", "activation_checkpointing_kwargs"),
    ):
        if new not in fields or old not in fields:
            continue
        value = settings.pop(old, None)
        if settings.get(new) is None:
            default = next(f.default for f in dataclasses.fields(config_class) if f.name == old)
            settings[new] = value if value is not None else default
        if settings[new] is None or settings[new] is dataclasses.MISSING:
            settings.pop(new)


def _planned_steps(config: Any) -> int | None:
    """The steps a mixture config plans (rows / prompts_per_step), when known without asking a server."""
    k = getattr(config, "prompts_per_step", None)
    if not isinstance(k, int) or not k:
        return None
    num_samples, num_steps = getattr(config, "num_samples", None), getattr(config, "num_steps", None)
    rows = (
        num_samples if isinstance(num_samples, int) else (num_steps * k if isinstance(num_steps, int) else 0)
    )
    return rows // k or None


def build_grpo_config(
    mixture: Any,
    settings: Mapping[str, Any] | None = None,
    *,
    output_dir: str | Path,
    model: str | None = None,
    world_size: int = 1,
    where: str = "",
) -> tuple[Any, list[str]]:
    """A `GRPOConfig` for training `mixture`, plus notes on what ormix set and why.

    `settings` are GRPOConfig keyword arguments (the file's ``train:`` section merged with the caller's
    overrides); an unknown key is an error naming it. ormix then sets, unless given:

    - ``shuffle_dataset=False`` when the mixture's plan carries an order (quotas, schedule, round robin);
      ``True`` given explicitly is refused, as is ``remove_unused_columns=True`` (rows need their
      ``environment`` and ``task_index`` columns), and so are ``num_iterations`` other than 1 and a
      ``steps_per_generation`` other than ``gradient_accumulation_steps`` (`generation_problem`);
    - the batch geometry, so that one optimizer step takes exactly ``prompts_per_step`` prompts;
    - ``max_steps`` = the steps the mixture plans (``num_samples`` or ``num_steps`` over
      ``prompts_per_step``), where TRL would otherwise train epochs and replay the plan;
    - evaluation during training (`derive_eval`): ``eval_strategy=steps`` when ``eval_steps`` is given and a
      member has an eval set, and an eval batch of whole ``num_generations_eval`` groups;
    - ``use_cpu`` (and no bf16/fp16/vLLM) without a GPU; ``use_vllm`` (colocate) with a GPU, vLLM installed
      and a model other than the tiny one;
    - ``report_to="none"``, ``logging_steps=1``, ``log_completions=True`` (files, not printed tables),
      ``max_tool_calling_iterations=10``, ``save_strategy="no"`` (the final model is saved anyway),
      ``use_cache=True`` (generation with a KV cache),
      ``seed`` = the mixture's seed.

    Example:
        >>> import tempfile
        >>> from ormix import MixtureSpec, OpenRewardSpec
        >>> mix = MixtureSpec({"echo": OpenRewardSpec("local:echo", num_tasks=4, local_serve="thread")},
        ...                   prompts_per_step=2)
        >>> with tempfile.TemporaryDirectory() as out:
        ...     args, notes = build_grpo_config(mix, {"num_generations": 2}, output_dir=out)
        >>> args.shuffle_dataset, args.remove_unused_columns, args.per_device_train_batch_size
        (False, False, 4)
        >>> notes
        ['per_device_train_batch_size=4, gradient_accumulation_steps=1 (derived from prompts_per_step)']
    """
    from trl import GRPOConfig

    given = check_settings(dict(settings or {}), where)
    merged: dict[str, Any] = {**DEFAULTS, "seed": getattr(mixture, "seed", 0), **given}
    if "save_steps" in given and "save_strategy" not in given:
        merged["save_strategy"] = "steps"  # asking for save_steps means checkpoints
    notes: list[str] = []

    _keep_rows_as_planned(mixture, merged, given, where)
    notes += _plan_geometry(mixture, merged, given, world_size, where)
    notes += _hardware(merged, given, model)

    _name_activation_checkpointing(merged, GRPOConfig)
    merged["output_dir"] = str(output_dir)
    try:
        args = GRPOConfig(**merged)
    except (TypeError, ValueError) as e:
        raise TrainConfigError(f"GRPOConfig rejected the training settings: {e}") from None
    if problem := generation_problem(bool(getattr(mixture, "order_matters", False)), args):
        raise TrainConfigError(f"{where}{problem}")
    return args, notes


def _keep_rows_as_planned(mixture: Any, merged: dict[str, Any], given: Mapping[str, Any], where: str) -> None:
    """No shuffling when the plan carries an order, and the ``environment``/``task_index`` columns kept;
    asking for either the other way is refused."""
    order_matters = bool(getattr(mixture, "order_matters", False))
    for problem in (
        shuffle_problem(order_matters, given.get("shuffle_dataset")),
        columns_problem(given.get("remove_unused_columns")),
    ):
        if problem:
            raise TrainConfigError(f"{where}{problem}")
    if order_matters:
        merged["shuffle_dataset"] = False
    merged["remove_unused_columns"] = False


def _plan_geometry(
    mixture: Any, merged: dict[str, Any], given: Mapping[str, Any], world_size: int, where: str
) -> list[str]:
    """The batch geometry, ``max_steps`` and evaluation the mixture's plan implies; notes on each."""
    notes: list[str] = []
    pps = getattr(mixture, "prompts_per_step", None)
    if pps:
        notes += derive_batch(merged, pps, world_size, where)
    config = getattr(mixture, "config", None)
    planned = _planned_steps(config)
    if "max_steps" not in given and planned:
        # TRL's default (-1: epochs over the dataset) would replay the plan from its first step.
        merged["max_steps"] = planned
        notes.append(f"max_steps={planned} (the mixture plans {planned} steps of {pps} prompts)")
    notes += derive_eval(merged, list(getattr(config, "eval_members", None) or []), world_size, where)
    return notes


def _hardware(merged: dict[str, Any], given: Mapping[str, Any], model: str | None) -> list[str]:
    """CPU settings without a GPU; colocated vLLM with one (installed, a real model); notes on each."""
    import torch

    notes: list[str] = []
    if not torch.cuda.is_available():
        merged.setdefault("use_cpu", True)
        for key in ("bf16", "fp16", "use_vllm"):
            if given.get(key):
                notes.append(f"{key}=false: no GPU here (the file asks for {key}=true)")
            merged[key] = False
    elif "use_vllm" not in given and model is not None and importlib.util.find_spec("vllm") is not None:
        merged["use_vllm"] = True
        merged.setdefault("vllm_mode", "colocate")
        notes.append("use_vllm=true, vllm_mode=colocate (vLLM is installed and a GPU is present)")
    return notes
