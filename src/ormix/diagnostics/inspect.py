"""What a mixture will do, before a GPU hour is spent: members, tasks, tools, name maps, per-step composition.

Used by `ormix inspect FILE`. Contacts each member's server (task counts, tools) but opens no training run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ormix.mixture import MixtureSpec, sampling


@dataclass
class MemberSummary:
    """One member as `ormix inspect` shows it."""

    name: str
    target: str
    role: str
    tasks: int
    tools: list[str]
    renamed: dict[str, str]
    notes: list[str]


def summarize_members(mix: MixtureSpec) -> list[MemberSummary]:
    """Task counts, tool surfaces and name maps of every member."""
    out = []
    for name, member in mix.members.items():
        spec = mix.spec(name)
        report = spec.binding
        renamed = {r.wire_name: r.method_name for r in report.renamed}
        out.append(
            MemberSummary(
                name,
                spec.target,
                member.role,
                len(spec.task_indices),
                [b.method_name for b in report.bindings],
                renamed,
                [*report.notes, *(f"skipped {s.name!r}: {s.reason}" for s in report.skipped)],
            )
        )
    return out


def step_probabilities(mix: MixtureSpec, step: int) -> dict[str, float]:
    """The sampling probabilities in force at a training step."""
    if mix.schedule:
        weights = sampling.weights_at_step(mix.schedule, step)
        total = sum(weights.values())
        return {k: v / total for k, v in weights.items()}
    counts = {n: len(mix.spec(n).task_indices) for n in mix.train_members}
    strategy = "weights" if mix.strategy == "round_robin" else mix.strategy
    weights = None if mix.strategy != "weights" else mix._weights()
    return sampling.member_probabilities(
        counts, strategy=strategy, weights=weights, temperature=mix.temperature
    )


def composition_table(mix: MixtureSpec, first_steps: int = 4) -> list[tuple[str, dict[str, int]]]:
    """(label, per-member counts) for the first steps and the first step of every schedule phase."""
    k = mix.prompts_per_step
    if not k:
        return []
    per_step = sampling.composition(mix.plan, k, members=mix.train_members)
    rows = [(f"step {i}", counts) for i, counts in enumerate(per_step[:first_steps])]
    start = 0
    for index, phase in enumerate(mix.schedule):
        if start < len(per_step) and start >= first_steps:
            rows.append((f"phase {index + 1} (step {start})", per_step[start]))
        if phase.until_step is None:
            break
        start = phase.until_step
    return rows


def starvation(mix: MixtureSpec, prompts_per_step: int | None = None) -> dict[str, dict[str, float]]:
    """Chance that a member gets no prompt in a step: with independent draws, and with ormix's exact quotas."""
    k = prompts_per_step or mix.prompts_per_step
    if not k:
        return {}
    probs = step_probabilities(mix, 0)
    return {
        "iid": sampling.starvation_probability(probs, k, mode="iid"),
        "quotas": sampling.starvation_probability(probs, k, mode="quotas"),
    }


def inspect_mixture(mix: MixtureSpec, *, first_steps: int = 4, batch: int | None = None) -> dict[str, Any]:
    """Everything `ormix inspect` prints, as data."""
    return {
        "name": mix.name,
        "routing": mix.routing,
        "strategy": mix.strategy,
        "seed": mix.seed,
        "prompts_per_step": mix.prompts_per_step,
        "rows": len(mix.plan),
        "members": summarize_members(mix),
        "probabilities": step_probabilities(mix, 0),
        "composition": composition_table(mix, first_steps),
        "starvation": starvation(mix, batch),
    }
