"""The task filter's platform prior: what the OpenReward platform's logged rollouts say of a mixture's tasks.

`platform_evidence` asks the platform (the SDK's ``get_task_difficulty``, through each member's
`ormix._connection.Connection`) for the train members whose task filter has ``prior: platform`` and whose
target is a catalog environment, for the member's split, and pools the answer per task
(`ormix.mixture._planner.evidence_of`); the planner turns it into decisions (`prior_decisions`, pure).
`prior_lines` says what those decisions are, for `ormix inspect`.

Example:
    >>> from ormix.config import MixtureConfig
    >>> from ormix.mixture._planner import Evidence
    >>> cfg = MixtureConfig(members={"a": {"target": "Owner/A", "filter": {"prior": "platform"}}},
    ...                     strategy="adaptive", prompts_per_step=2)
    >>> seen = {"a": {0: Evidence(1.0, 1.0, 9), 1: Evidence(0.0, 0.0, 2)}}
    >>> for line in prior_lines(cfg, seen, {"a": [0, 1]}):  # doctest: +NORMALIZE_WHITESPACE
    ...     print(line)
      a: the platform prior sets 1 of 2 task(s) aside for steps 1-8: task 0 (all 9 logged rollouts solved it)
      a: 1 task(s) start with their logged rollouts as credit (too few to set them aside; they count
      toward the filter's first decision): task 1 (2 rollouts, all failed)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from ormix.config import MixtureConfig, PlatformPriorConfig
from ormix.mixture._planner import Evidence, evidence_of, prior_decisions
from ormix.ors._bridge import run_sync

# How many tasks a line names before it says "and N more".
_SHOWN = 8


def platform_prior_members(config: MixtureConfig) -> list[str]:
    """The train members whose task filter has ``prior: platform`` and whose target is a catalog environment
    (the only ones with rollouts logged on the platform).

    Example:
        >>> from ormix.config import MixtureConfig
        >>> cfg = MixtureConfig(members={"a": {"target": "Owner/A"}, "b": {"target": "local:echo"}},
        ...                     strategy="adaptive", prompts_per_step=2,
        ...                     adaptive={"filter": {"prior": "platform"}})
        >>> platform_prior_members(cfg)
        ['a']
    """
    out = []
    for name in config.train_members:
        rule = config.task_filter(name)
        if rule is not None and isinstance(rule.prior, PlatformPriorConfig):
            if config.members[name].parsed_target.kind == "catalog":
                out.append(name)
    return out


def platform_evidence(config: MixtureConfig, specs: Mapping[str, Any]) -> dict[str, dict[int, Evidence]]:
    """Member → task index → `Evidence` from the platform, for `platform_prior_members` (asked at once,
    each of its connection once per query). ``specs``: member → its `ormix.OpenRewardSpec`. Raises the
    connection's `ormix.ors.ORSError` when the platform cannot answer: a prior that is asked for and
    missing would change the plan (and could differ between ranks)."""
    names = [n for n in platform_prior_members(config) if n in specs]
    if not names:
        return {}
    found: dict[str, dict[int, Evidence]] = {}
    failed: dict[int, Exception] = {}

    async def ask(i: int, name: str) -> None:
        rule = config.task_filter(name)
        assert rule is not None and isinstance(rule.prior, PlatformPriorConfig)
        prior, spec = rule.prior, specs[name]
        try:
            rows = await spec.connection.task_difficulty(
                split=spec.split,
                model_name=prior.model_name,
                min_model_params=prior.min_model_params,
                max_model_params=prior.max_model_params,
                training_stage=prior.training_stage,
            )
        except Exception as e:  # noqa: BLE001 - raised below, the first member's first
            failed[i] = e
            return
        found[name] = evidence_of(rows)

    async def ask_all() -> None:
        async with anyio.create_task_group() as tg:
            for i, name in enumerate(names):
                tg.start_soon(ask, i, name)

    run_sync(ask_all)
    if failed:
        raise failed[min(failed)]
    return {n: found[n] for n in names}


def _named(tasks: Sequence[str]) -> str:
    more = len(tasks) - _SHOWN
    return ", ".join(tasks[:_SHOWN]) + (f" and {more} more" if more > 0 else "")


def prior_lines(
    config: MixtureConfig,
    evidence: Mapping[str, Mapping[int, Evidence]],
    tasks: Mapping[str, Sequence[int]],
) -> list[str]:
    """What the platform prior does with each member's tasks (`ormix inspect`): which it sets aside from
    the start and why (every logged rollout solved or failed them, and how many there were), and which
    count their rollouts toward the filter's first decision. ``tasks``: member → its task indices."""
    lines: list[str] = []
    for name in platform_prior_members(config):
        rule = config.task_filter(name)
        assert rule is not None
        mine = set(tasks.get(name, ()))
        seen = {t: e for t, e in evidence.get(name, {}).items() if t in mine}
        decisions = prior_decisions(seen, rule)
        aside = [
            f"task {t} (all {d.rollouts} logged rollouts {d.outcome} it)"
            for t, d in decisions.items()
            if d.aside
        ]
        credit = [
            f"task {t} ({d.rollouts} rollouts, all {d.outcome})" for t, d in decisions.items() if not d.aside
        ]
        if not seen:
            lines.append(f"  {name}: the platform has no logged rollouts of its tasks: no prior")
            continue
        if aside:
            lines.append(
                f"  {name}: the platform prior sets {len(aside)} of {len(mine)} task(s) aside for steps "
                f"1-{rule.cooldown_steps}: {_named(aside)}"
            )
        else:
            enough = max(rule.min_rollouts, rule.window)
            lines.append(
                f"  {name}: the platform prior sets no task aside (none of its {len(seen)} tasks with logged "
                f"rollouts has {enough} that all solved or all failed it)"
            )
        if credit:
            lines.append(
                f"  {name}: {len(credit)} task(s) start with their logged rollouts as credit (too few to set "
                f"them aside; they count toward the filter's first decision): {_named(credit)}"
            )
    return lines
