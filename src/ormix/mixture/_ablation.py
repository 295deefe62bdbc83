"""The arms of an ablation study: the full mixture, leave one out, only one; each a mixture file.

An arm trains on some of the full mixture's members. A member an arm does not train on stays in it as an
eval-only member (``role: eval``, `MixtureConfig.without`), so the effect of not training on it can be
measured on it. The budget rule says what happens to the prompts the dropped members had:

- ``same-total`` keeps ``prompts_per_step``: the members left share the dropped member's prompts, so each
  gets more rollouts per step than in the full mixture (more compute per member: the effect of dropping a
  member includes that);
- ``same-per-member`` scales ``prompts_per_step`` by the share of the step the members left had in the
  full mixture (rounded half up, at least 1), so each keeps about the rollouts per step it had (less compute
  in all); the batch size settings of ``train:`` are left out, for ormix to derive from it.

The share of a member is its weight over the train members' weights (``weights:``, or each member's
``weight``, or equal; for ``strategy: adaptive`` the starting weights; ``round_robin`` equal; ``temperature``
from the task counts the file gives). A ``schedule`` has no one share, so ``same-per-member`` refuses it.

No server is contacted: each file is stamped with the hash its run's manifest gets
(`MixtureConfig.config_hash` of the config as `ormix train` sizes it), and with a ``base_dir`` (the original
file's directory) so that ``module:Class`` targets resolve wherever the file is written.

Example:
    >>> from ormix.config import load_mixture_config
    >>> cfg = load_mixture_config("mixtures/local-demo.yaml")
    >>> [(a.name, a.config.prompts_per_step) for a in arms(cfg, leave_one_out=True, budget="same-per-member")]
    [('full', 4), ('without-echo', 3), ('without-terminals', 2), ('without-seta', 2)]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from ormix._choices import Budget
from ormix._errors import MixtureError
from ormix.config import MixtureConfig

#: The budget rules, in the order `ormix ablate --budget` lists them.
BUDGETS: tuple[str, ...] = get_args(Budget)
#: The name of the arm that trains on the whole mixture.
FULL = "full"


@dataclass(frozen=True)
class Arm:
    """One arm of a study: its name (``full``, ``without-<member>``, ``only-<member>``), its mixture, the
    train members of the full mixture it does not train on, the budget rule as applied to it, and what else
    it changed (``notes``: weights that were 0 for every member it trains on, made equal).

    Example:
        >>> cfg = MixtureConfig(members={"a": {"target": "local:echo"}, "b": {"target": "local:seta"}})
        >>> arm = arms(cfg, leave_one_out=True)[1]
        >>> arm.name, arm.dropped, arm.config.members["a"].role
        ('without-a', ('a',), 'eval')
    """

    name: str
    config: MixtureConfig
    dropped: tuple[str, ...]
    budget: str
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: name, mixture name, trained and dropped members, prompts per step, budget rule."""
        return {
            "name": self.name,
            "mixture": self.config.name,
            "trained": self.config.train_members,
            "dropped": list(self.dropped),
            "prompts_per_step": self.config.prompts_per_step,
            "budget": self.budget,
        }


def member_shares(config: MixtureConfig) -> dict[str, float]:
    """Each train member's share of a step's prompts as the file plans them (see the module docstring).

    Example:
        >>> cfg = MixtureConfig(members={"a": {"target": "local:echo"}, "b": {"target": "local:seta"}},
        ...                     weights={"a": 1, "b": 3})
        >>> member_shares(cfg)
        {'a': 0.25, 'b': 0.75}
    """
    train = config.train_members
    if config.schedule is not None:
        raise MixtureError(
            "the budget rule same-per-member needs each member's share of a step, and a schedule changes "
            "it from phase to phase: use --budget same-total, or write the arms' prompts_per_step yourself"
        )
    if config.strategy == "round_robin":
        raw = {n: 1.0 for n in train}
    elif config.strategy == "temperature":
        raw = {}
        for n in train:
            m = config.members[n]
            count = m.num_tasks if m.num_tasks is not None else (len(m.indices) if m.indices else None)
            if count is None:
                raise MixtureError(
                    f"the budget rule same-per-member needs member {n!r}'s task count for temperature "
                    "mixing: give it num_tasks or indices, or use --budget same-total"
                )
            raw[n] = count ** (1.0 / config.temperature)
    else:
        raw = dict(config.static_weights() or {n: 1.0 for n in train})
    total = sum(raw.values())
    return {n: raw[n] / total for n in train}


def scaled_prompts(prompts_per_step: int, kept_share: float) -> int:
    """``prompts_per_step × kept_share``, rounded half up, at least 1.

    Example:
        >>> scaled_prompts(4, 0.8), scaled_prompts(4, 0.625), scaled_prompts(4, 0.05)
        (3, 3, 1)
    """
    return max(1, math.floor(prompts_per_step * kept_share + 0.5))


def _fit_batch(train: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The ``train:`` settings for a changed ``prompts_per_step``, the batch sizes left out (ormix derives
    them from it), and what was left out.

    Whether a kept batch size still fits depends on the number of processes, which only ``ormix train``
    knows: a size that divides the step's completions on one may not on two (8 and 3 × 8 = 24 completions
    over 2 processes: 12 each).
    """
    settings = dict(train)
    dropped = []
    for key in ("gradient_accumulation_steps", "per_device_train_batch_size"):
        if key in settings:
            dropped.append(f"{key}={settings.pop(key)}")
    return settings, dropped


def _equal_weights_note(full: MixtureConfig, train: Sequence[str]) -> str | None:
    """What an arm training on ``train`` says when weights of the full mixture (``weights:``, the members'
    ``weight``, a schedule phase) were 0 for all of them: `MixtureConfig.without` made those equal."""
    if len(train) < 2:
        return None  # one member left trains without weights
    where = []
    if full.weights is not None:
        if not any(full.weights.get(n) for n in train):
            where.append("weights")
    elif any(m.weight is not None for m in full.members.values()):
        if not any(full.members[n].weight for n in train):
            where.append("the members' weight")
    for i, phase in enumerate(full.schedule or []):
        if not any(phase.weights.get(n) for n in train):
            until = f" (until step {phase.until_step})" if phase.until_step is not None else ""
            where.append(f"schedule phase {i}{until}")
    if not where:
        return None
    return (
        f"{', '.join(where)}: 0 for every member this arm trains on ({', '.join(train)}), so they have "
        "equal weights there"
    )


def _budgeted(full: MixtureConfig, derived: MixtureConfig, budget: Budget) -> tuple[MixtureConfig, str]:
    """The derived config under the budget rule, and the rule as applied, in words."""
    pps = full.prompts_per_step
    if budget == "same-total":
        kept = f"prompts_per_step {pps} as in the full mixture" if pps else "the file's batch as it is"
        return derived, f"same-total: {kept}; the members trained on share the dropped members' prompts"
    if budget != "same-per-member":
        raise MixtureError(f"unknown budget rule {budget!r}; use one of {', '.join(BUDGETS)}")
    if pps is None:
        raise MixtureError(
            "the budget rule same-per-member scales prompts_per_step, which the mixture does not set: add "
            "`prompts_per_step: N`, or use --budget same-total"
        )
    shares = member_shares(full)
    kept_share = sum(shares[n] for n in derived.train_members)
    new = scaled_prompts(pps, kept_share)
    if new == pps:
        return (
            derived,
            f"same-per-member: prompts_per_step {pps} (the members trained on had {kept_share:.3g})",
        )
    train, left_out = _fit_batch(derived.train)
    note = (
        f"same-per-member: prompts_per_step {pps} → {new} ({pps} × {kept_share:.3g}, the share of a step "
        "the members trained on had in the full mixture, rounded)"
    )
    if left_out:
        note += f"; train: {', '.join(left_out)} left out (ormix derives the batch from prompts_per_step)"
    return derived.updated(prompts_per_step=new, train=train), note


def arms(
    config: MixtureConfig,
    *,
    leave_one_out: bool = False,
    only: Sequence[str] = (),
    budget: Budget = "same-total",
) -> list[Arm]:
    """The arms of a study: ``full`` first, then one per train member left out (``leave_one_out``), then
    one per ``only`` name; each under the budget rule.

    Example:
        >>> from ormix.config import load_mixture_config
        >>> cfg = load_mixture_config("mixtures/local-demo.yaml")
        >>> [a.name for a in arms(cfg, leave_one_out=True, only=["seta"])]
        ['full', 'without-echo', 'without-terminals', 'without-seta', 'only-seta']
        >>> only_seta = arms(cfg, only=["seta"])[1].config     # the others stay, evaluated, not trained
        >>> only_seta.train_members, [only_seta.members[m].role for m in ("echo", "terminals")]
        (['seta'], ['eval', 'eval'])
    """
    found = [n for n in only if n not in config.members]
    if found:
        config.only(*found)  # raises, naming the unknown member(s) and the known ones
    pps = config.prompts_per_step
    out = [Arm(FULL, config, (), f"{budget}: the full mixture as the file has it (prompts_per_step {pps})")]
    derived: list[tuple[str, MixtureConfig]] = []
    if leave_one_out:
        derived += [(f"without-{n}", config.without(n)) for n in config.train_members]
    derived += [(f"only-{n}", config.only(n)) for n in only]
    for name, cfg in derived:
        budgeted, note = _budgeted(config, cfg, budget)
        dropped = tuple(n for n in config.train_members if n not in cfg.train_members)
        evened = _equal_weights_note(config, cfg.train_members)
        out.append(Arm(name, budgeted, dropped, note, (evened,) if evened else ()))
    return out


def select_arms(all_arms: Sequence[Arm], names: Sequence[str]) -> list[Arm]:
    """The arms named (all when ``names`` is empty), in study order; `MixtureError` naming an unknown one.

    Example:
        >>> cfg = MixtureConfig(members={"a": {"target": "local:echo"}, "b": {"target": "local:seta"}})
        >>> [a.name for a in select_arms(arms(cfg, leave_one_out=True), ["without-b"])]
        ['without-b']
    """
    known = [a.name for a in all_arms]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise MixtureError(
            f"no arm named {', '.join(map(repr, unknown))}; this study's arms are {', '.join(known)} "
            "(--leave-one-out and --only NAME add arms)"
        )
    return [a for a in all_arms if not names or a.name in names]


def arm_file_text(arm: Arm, source: str) -> tuple[str, str]:
    """An arm's mixture file (header: where it comes from, its manifest hash, the budget rule) and its hash.

    Example:
        >>> cfg = MixtureConfig(name="m", members={"a": {"target": "local:echo"},
        ...                                        "b": {"target": "local:seta"}})
        >>> text, digest = arm_file_text(arms(cfg, leave_one_out=True)[1], "<python>")
        >>> text.splitlines()[0], f"manifest hash: {digest}" in text
        ('# Derived from <python> by `ormix ablate` (arm without-a).', True)
    """
    config = arm.config
    if config.base_dir is None and not source.startswith("<"):  # modules are found where the source's were
        config = config.updated(base_dir=str(Path(source).resolve().parent))
    # The hash its run's manifest gets: trained with the file's own `train.max_steps`.
    digest = config.sized_for().config_hash()
    dropped = (
        f"{', '.join(arm.dropped)} eval-only (not trained on)" if arm.dropped else "every member trained on"
    )
    header = (
        f"Derived from {source} by `ormix ablate` (arm {arm.name}).\n"
        f"{dropped}\n"
        f"budget: {arm.budget}\n" + "".join(f"{note}\n" for note in arm.notes) + f"manifest hash: {digest}"
    )
    warm = config.warm_start
    if warm is not None and warm.sft_steps > 0:
        # Arms compare only from one start: this file's own warm start would be SFT on its members alone.
        header += (
            "\nwarm start: arms compare only from ONE start (`ormix ablate --run` makes it, on the full "
            "mixture);\ntrain this file alone with `--model STUDY/start --warmup-sft 0`"
        )
    return config.to_yaml(header=header), digest


def arm_file_name(arm: Arm) -> str:
    """The file an arm is written to: ``<mixture name>.yaml``, ``<name>-full.yaml`` for the full arm (so it
    never replaces the original).

    Example:
        >>> cfg = MixtureConfig(name="m", members={"a": {"target": "local:echo"},
        ...                                        "b": {"target": "local:seta"}})
        >>> [arm_file_name(a) for a in arms(cfg, leave_one_out=True)]
        ['m-full.yaml', 'm-without-a.yaml', 'm-without-b.yaml']
    """
    return f"{arm.config.name}-full.yaml" if arm.name == FULL else f"{arm.config.name}.yaml"


def write_ablations(
    config: MixtureConfig,
    out_dir: Path,
    *,
    source: str,
    leave_one_out: bool = False,
    only: Sequence[str] = (),
    budget: Budget = "same-total",
) -> list[tuple[Path, str]]:
    """Write each arm's mixture (`arm_file_name`) under ``out_dir``; returns (path, manifest hash) pairs.

    Raises `MixtureError` when nothing is asked for (neither ``leave_one_out`` nor ``only``).
    """
    if not leave_one_out and not only:
        raise MixtureError("nothing to derive: pass --leave-one-out and/or --only NAME")
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for arm in arms(config, leave_one_out=leave_one_out, only=only, budget=budget):
        text, digest = arm_file_text(arm, source)
        path = out_dir / arm_file_name(arm)
        path.write_text(text)
        written.append((path, digest))
    return written
