"""`MixtureSpec`: several ORS environments in one GRPO run.

Members (each an `OpenRewardSpec` plus per-member options) are interleaved into one dataset keyed by an
`environment` column, following a plan from `ormix.mixture.sampling` (weights, temperature, round robin, step
schedules, exact per-step quotas). Tool calls are routed to the member's session, either per environment
(TRL's dict `environment_factory`) or through one `RoutingEnvironment` with namespaced methods. Rewards
come back as one function per member, so TRL logs `rewards/<member>/mean`.

Example:
    >>> mix = MixtureSpec({"terminals": OpenRewardSpec("local:terminals", num_tasks=16),
    ...                    "seta": OpenRewardSpec("local:seta", num_tasks=16)},
    ...                   weights={"terminals": 0.7, "seta": 0.3}, prompts_per_step=4, num_samples=64)  # doctest: +SKIP
    >>> mix.train_dataset["environment"][:4]      # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Literal

from ormix.mixture import sampling
from ormix.rollout.routing import make_routing_class
from ormix.spec import OpenRewardSpec, make_reward_func, rows_to_dataset

logger = logging.getLogger(__name__)

MEMBER_NAME = re.compile(r"^[a-z](?:[a-z0-9_]{0,30}[a-z0-9])?$")
Role = Literal["train", "eval", "both"]


class MixtureError(ValueError):
    """A mixture that cannot work; raised before any server is contacted, naming the fix."""


@dataclass
class Member:
    """One environment of a mixture: its spec plus per-member options.

    Example:
        >>> Member(OpenRewardSpec("local:seta", num_tasks=8), weight=0.3, scale=2.0)   # doctest: +SKIP
    """

    spec: OpenRewardSpec
    weight: float | None = None
    role: Role = "train"
    scale: float = 1.0
    unscored_reward: float | None = None
    eval_split: str | None = None
    eval_indices: Sequence[int] | None = None
    eval_num_tasks: int | None = None
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def trains(self) -> bool:
        return self.role in ("train", "both")

    @property
    def evaluates(self) -> bool:
        return self.role in ("eval", "both") or self.eval_split is not None or self.eval_indices is not None


def _trl_accepts_dict_factory() -> bool:
    try:
        from trl import GRPOTrainer
    except ImportError:
        return False
    annotation = str(
        inspect.signature(GRPOTrainer.__init__)
        .parameters.get("environment_factory", inspect.Parameter("x", 1))
        .annotation
    )
    return "dict" in annotation


class MixtureSpec:
    """Several ORS environments as TRL's inputs: `train_dataset`, `eval_dataset`, `environment_factory`,
    `reward_funcs`, `callbacks`.

    Args:
        members: member name → `OpenRewardSpec` or `Member`. Names are short identifiers (`[a-z][a-z0-9_]*`,
            no `__`). Members may share a target (then they share one connection and tool surface).
        weights: member → weight (alternative to `Member.weight`); default uniform.
        strategy: `weights`, `temperature` (p ∝ n_i^(1/T) over task counts) or `round_robin`.
        temperature: T for the `temperature` strategy.
        schedule: curriculum phases (`sampling.Phase` or dicts with `until_step`, `weights`, `interpolate`);
            needs `prompts_per_step`.
        num_samples: rows in the training dataset (default: `num_steps * prompts_per_step`, else all tasks).
        prompts_per_step: unique prompts per optimizer step; every step then gets its exact quota.
        num_steps: planned training steps (sizes the dataset with `prompts_per_step`).
        routing: `auto` (per_env where the installed TRL accepts a dict factory), `per_env` or `namespaced`.
        seed: plan seed; same config and seed → same rows on every rank and run.
        name: a label for manifests and run directories.
    """

    def __init__(
        self,
        members: Mapping[str, OpenRewardSpec | Member],
        *,
        weights: Mapping[str, float] | None = None,
        strategy: str = "weights",
        temperature: float = 1.0,
        schedule: Sequence[sampling.Phase | Mapping[str, Any]] | None = None,
        num_samples: int | None = None,
        prompts_per_step: int | None = None,
        num_steps: int | None = None,
        routing: str = "auto",
        seed: int = 0,
        name: str | None = None,
        telemetry: Mapping[str, Any] | None = None,
    ) -> None:
        if not members:
            raise MixtureError("a mixture needs at least one member")
        self.members: dict[str, Member] = {}
        for member_name, value in members.items():
            if not isinstance(member_name, str) or not MEMBER_NAME.match(member_name) or "__" in member_name:
                raise MixtureError(
                    f"member name {member_name!r} is not a short identifier: use lower-case letters, "
                    "digits and single underscores, starting with a letter and not ending in '_' (e.g. 'seta_easy')"
                )
            member = value if isinstance(value, Member) else Member(value)
            if not isinstance(member.spec, OpenRewardSpec):
                raise MixtureError(
                    f"member {member_name!r} must be an OpenRewardSpec or a Member, "
                    f"not {type(member.spec).__name__}"
                )
            self.members[member_name] = member
        if weights is not None:
            unknown = sorted(set(weights) - set(self.members))
            if unknown:
                raise MixtureError(
                    f"weights name unknown member(s) {unknown}; members are {sorted(self.members)}"
                )
            if any(m.weight is not None for m in self.members.values()):
                raise MixtureError("give weights either in `weights=` or per member, not both")
            for member_name, w in weights.items():
                self.members[member_name] = replace(self.members[member_name], weight=float(w))
        if routing not in ("auto", "per_env", "namespaced"):
            raise MixtureError(f"routing must be 'auto', 'per_env' or 'namespaced', not {routing!r}")
        self.strategy = strategy
        self.temperature = temperature
        self.schedule = [
            p if isinstance(p, sampling.Phase) else sampling.Phase(**dict(p)) for p in schedule or []
        ]
        self.num_samples = num_samples
        self.prompts_per_step = prompts_per_step
        self.num_steps = num_steps
        self.routing_requested = routing
        self.seed = seed
        self.name = name or "mixture"
        self.telemetry = dict(telemetry or {})
        from ormix.telemetry import TelemetryConfig, TelemetryConfigError

        try:
            TelemetryConfig.from_mapping(self.telemetry)
        except TelemetryConfigError as e:
            raise MixtureError(f"telemetry: {e}") from None
        if not self.train_members:
            raise MixtureError("no member has role 'train' or 'both': nothing to train on")
        self._validate_weights()
        # Members share connections (and tool surfaces) when they name the same server.
        self._specs: dict[str, OpenRewardSpec] = {}
        owners: dict[tuple, OpenRewardSpec] = {}
        for member_name, member in self.members.items():
            spec = member.spec._member_copy(member_name)
            key = spec._connection_key()
            if key in owners:
                spec._share_connection(owners[key])
            else:
                owners[key] = spec
            self._specs[member_name] = spec

    # ── validation (no I/O) ───────────────────────────────────────────

    @property
    def train_members(self) -> list[str]:
        """Members that appear in the training dataset, in declaration order."""
        return [n for n, m in self.members.items() if m.trains]

    def _weights(self) -> dict[str, float] | None:
        given = {n: self.members[n].weight for n in self.train_members if self.members[n].weight is not None}
        if not given:
            return None
        return {n: float(given.get(n, 0.0)) for n in self.train_members}

    def _validate_weights(self) -> None:
        weights = self._weights()
        if weights is not None:
            negative = sorted(n for n, w in weights.items() if w < 0)
            if negative:
                raise MixtureError(f"negative weight for {negative}: weights must be >= 0")
            if sum(weights.values()) <= 0:
                raise MixtureError("all weights are zero: give at least one train member a positive weight")
        if self.schedule:
            if self.prompts_per_step is None:
                raise MixtureError(
                    "a schedule needs prompts_per_step (unique prompts per training step) to know "
                    "which step each row belongs to"
                )
            try:
                sampling.validate_schedule(self.schedule, self.train_members)
            except sampling.SamplingError as e:
                raise MixtureError(str(e)) from None

    # ── plan and datasets ─────────────────────────────────────────────

    def spec(self, member: str) -> OpenRewardSpec:
        """The (member-named) spec of one member."""
        try:
            return self._specs[member]
        except KeyError:
            raise MixtureError(f"unknown member {member!r}; members are {sorted(self.members)}") from None

    @cached_property
    def plan(self) -> list[sampling.PlanRow]:
        """The ordered rows (member, task_index, step) this mixture trains on."""
        tasks = {n: self.spec(n).task_indices for n in self.train_members}
        empty = sorted(n for n, t in tasks.items() if not t)
        if empty:
            raise MixtureError(f"member(s) {empty} have no tasks: check num_tasks / indices / where")
        try:
            return sampling.plan_rows(
                tasks,
                strategy=self.strategy,
                weights=self._weights(),
                temperature=self.temperature,
                schedule=self.schedule or None,
                num_samples=self.num_samples,
                prompts_per_step=self.prompts_per_step,
                num_steps=self.num_steps,
                seed=self.seed,
            )
        except sampling.SamplingError as e:
            raise MixtureError(str(e)) from None

    @property
    def order_matters(self) -> bool:
        """Whether the dataset order carries meaning (quotas, schedule, round robin): then shuffling breaks it."""
        return bool(self.prompts_per_step or self.schedule or self.strategy == "round_robin")

    @cached_property
    def train_dataset(self):
        """Interleaved rows: `prompt`, `environment`, `task_index`, then task metadata.

        Metadata keys whose types clash across members (say `difficulty` an int in one and a string in
        another) are stored as JSON text in that column, so the Arrow schema always builds.
        """
        by_member = {
            n: {row["task_index"]: row for row in self.spec(n).dataset_rows()} for n in self.train_members
        }
        rows = []
        for planned in self.plan:
            base = by_member[planned.member][planned.task_index]
            rows.append(
                {
                    "prompt": base["prompt"],
                    "environment": planned.member,
                    "task_index": planned.task_index,
                    **{k: v for k, v in base.items() if k not in ("prompt", "task_index", "environment")},
                }
            )
        return rows_to_dataset(rows)

    @cached_property
    def eval_dataset(self) -> dict[str, Any]:
        """One dataset per evaluating member (its eval split or held-out indices), keyed by member name."""
        out: dict[str, Any] = {}
        for member_name, member in self.members.items():
            if not member.evaluates:
                continue
            spec = self.spec(member_name)
            if (
                member.eval_split is not None
                or member.eval_indices is not None
                or member.eval_num_tasks is not None
            ):
                spec = spec._eval_copy(
                    split=member.eval_split, indices=member.eval_indices, num_tasks=member.eval_num_tasks
                )
            extra = {"ors_split": spec.split} if spec.split != self.spec(member_name).split else {}
            rows = [{"environment": member_name, **row, **extra} for row in spec.dataset_rows()]
            out[member_name] = rows_to_dataset(rows)
        return out

    # ── TRL surfaces ──────────────────────────────────────────────────

    @property
    def single(self) -> bool:
        """A mixture of one member behaves exactly like that member's spec."""
        return len(self.members) == 1

    @cached_property
    def routing(self) -> str:
        """The routing actually used: `single`, `per_env` or `namespaced`."""
        if self.single:
            return "single"
        if self.routing_requested == "auto":
            return "per_env" if _trl_accepts_dict_factory() else "namespaced"
        return self.routing_requested

    @cached_property
    def routing_class(self):
        """The `RoutingEnvironment` subclass (namespaced routing)."""
        return make_routing_class({n: self.spec(n).episode_class for n in self.members})

    @cached_property
    def environment_factory(self) -> Callable[[], Any] | dict[str, Callable[[], Any]]:
        """`per_env`: `{member: factory}`; `namespaced`: one factory of `RoutingEnvironment`; single: the spec's."""
        if self.routing == "single":
            return self.spec(next(iter(self.members))).environment_factory
        if self.routing == "per_env":
            return {n: self.spec(n).environment_factory for n in self.members}
        cls = self.routing_class

        def factory():
            return cls()

        factory.__name__ = "routing_environment"
        return factory

    @cached_property
    def reward_funcs(self) -> list[Callable[..., list[float | None]]]:
        """One outcome-only reward function per member, `__name__` = member name (TRL logs
        `rewards/<member>/mean`); other members' rollouts get `None`."""
        funcs = []
        for member_name, member in self.members.items():
            config = self.spec(member_name).episode_class._config
            unscored = (
                member.unscored_reward if member.unscored_reward is not None else member.spec.unscored_reward
            )
            funcs.append(make_reward_func(member_name, config, scale=member.scale, unscored_reward=unscored))
        return funcs

    @cached_property
    def callbacks(self) -> list[Any]:
        """The trainer-configuration check, per-environment telemetry (rollout records, coverage alarm as set
        by `telemetry=`) and session cleanup at train end (needs transformers).

        Raises `ormix.telemetry.TelemetryConfigError` for an unknown or invalid `telemetry` setting.
        """
        from ormix.integrations.trl import MixtureConfigCheck, SessionCleanupCallback, TelemetryCallback

        return [
            MixtureConfigCheck(self),
            TelemetryCallback(self._specs, self.telemetry),
            SessionCleanupCallback(self._specs.values()),
        ]

    def close_sessions(self) -> int:
        """Close every session still open by this mixture's episodes."""
        return sum(spec.close_sessions() for spec in self._specs.values())

    # ── ablations and manifest ────────────────────────────────────────

    def _derive(self, members: Mapping[str, Member], **changes: Any) -> MixtureSpec:
        kwargs = dict(
            weights=None,
            strategy=self.strategy,
            temperature=self.temperature,
            schedule=self.schedule or None,
            num_samples=self.num_samples,
            prompts_per_step=self.prompts_per_step,
            num_steps=self.num_steps,
            routing=self.routing_requested,
            seed=self.seed,
            name=self.name,
            telemetry=self.telemetry,
        )
        kwargs.update(changes)
        derived = MixtureSpec(dict(members), **kwargs)
        # The file's `train:` and `telemetry:` sections still apply to an ablation of it.
        if getattr(self, "config", None) is not None:
            derived.config = self.config
        # Reuse fetched tasks, tool surfaces and connections of the members kept.
        for member_name in derived._specs:
            derived._specs[member_name] = self._specs[member_name]
        return derived

    def _filtered_schedule(self, keep: Sequence[str]) -> list[sampling.Phase] | None:
        train_kept = [n for n in keep if self.members[n].trains]
        if not self.schedule or len(train_kept) <= 1:
            return None  # one train member left: nothing to schedule
        phases = []
        for phase in self.schedule:
            weights = {k: v for k, v in phase.weights.items() if k in keep}
            if sum(weights.values()) <= 0:
                raise MixtureError(
                    f"removing members leaves a schedule phase (until_step={phase.until_step}) "
                    "with no positive weight; edit the schedule instead"
                )
            phases.append(replace(phase, weights=weights))
        return phases

    def without(self, *names: str) -> MixtureSpec:
        """A new mixture without these members (leave-one-out ablation).

        Example:
            >>> mix.without("seta").train_members   # doctest: +SKIP
            ['terminals']
        """
        self._check_names(names)
        keep = {n: m for n, m in self.members.items() if n not in names}
        if not any(m.trains for m in keep.values()):
            raise MixtureError(f"without({', '.join(names)}) leaves no train member")
        return self._derive(
            keep, schedule=self._filtered_schedule(list(keep)), name=f"{self.name}-without-" + "-".join(names)
        )

    def only(self, *names: str) -> MixtureSpec:
        """A new mixture of only these members (only-one ablation)."""
        self._check_names(names)
        keep = {n: m for n, m in self.members.items() if n in names}
        return self._derive(
            keep, schedule=self._filtered_schedule(list(keep)), name=f"{self.name}-only-" + "-".join(names)
        )

    def reweight(self, **weights: float) -> MixtureSpec:
        """A new mixture with these weights (members not named keep theirs); drops any schedule.

        Example:
            >>> mix.reweight(seta=0.5, terminals=0.5)   # doctest: +SKIP
        """
        self._check_names(weights)
        eval_only = sorted(n for n in weights if not self.members[n].trains)
        if eval_only:
            raise MixtureError(
                f"reweight names eval-only member(s) {eval_only}: they have no training weight"
            )
        current = self._weights() or {n: 1.0 for n in self.train_members}
        current.update({k: float(v) for k, v in weights.items()})
        members = {
            n: replace(m, weight=current.get(n) if m.trains else None) for n, m in self.members.items()
        }
        label = "-".join(f"{k}{v:g}" for k, v in sorted(weights.items()))
        return self._derive(members, schedule=None, strategy="weights", name=f"{self.name}-reweight-{label}")

    def _check_names(self, names) -> None:
        unknown = sorted(set(names) - set(self.members))
        if unknown:
            raise MixtureError(f"unknown member(s) {unknown}; members are {sorted(self.members)}")

    def manifest(self) -> dict[str, Any]:
        """What exactly this run trains on: config, seed, per-member task indices and tools, versions, and a hash.

        The hash covers everything but the versions, so the same composition hashes the same on every machine.
        """

        members = {}
        for member_name, member in self.members.items():
            spec = self.spec(member_name)
            members[member_name] = {
                **spec.manifest_entry(),
                "weight": member.weight,
                "role": member.role,
                "scale": member.scale,
                "unscored_reward": member.unscored_reward,
                "task_indices": spec.task_indices if member.trains else [],
            }
        body = {
            "name": self.name,
            "seed": self.seed,
            "strategy": self.strategy,
            "temperature": self.temperature,
            "schedule": [
                {"until_step": p.until_step, "weights": dict(p.weights), "interpolate": p.interpolate}
                for p in self.schedule
            ],
            "num_samples": self.num_samples,
            "prompts_per_step": self.prompts_per_step,
            "num_steps": self.num_steps,
            "routing": self.routing,
            "members": members,
            "plan": [[r.member, r.task_index] for r in self.plan],
        }
        digest = hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()
        versions = _versions()
        return {**body, "versions": versions, "hash": digest}

    @classmethod
    def from_config(
        cls, config: Any, *, environ: Mapping[str, str] | None = None, **overrides: Any
    ) -> MixtureSpec:
        """Build a mixture from a validated `ormix.config.MixtureConfig` (what a mixture file holds).

        `overrides` replace top-level arguments (e.g. `num_samples=`, `prompts_per_step=`, `seed=`).
        """
        members: dict[str, Member] = {}
        for member_name, m in config.members.items():
            spec = OpenRewardSpec(
                m.target,
                num_tasks=m.num_tasks,
                split=m.split,
                indices=m.indices,
                api_key=m.api_key(environ),
                secrets=m.secret_values() or None,
                env_name=m.env_name,
                include_metadata=m.include_metadata,
                discover_task_tools=m.discover_task_tools,
                task_tools_discovery_index=m.task_tools_discovery_index,
                where=m.where or None,
                unscored_reward=m.unscored_reward,
                name=member_name,
                transport=m.transport,
            )
            ev = m.eval
            members[member_name] = Member(
                spec,
                role=m.role,
                scale=m.scale,
                unscored_reward=m.unscored_reward,
                eval_split=ev.split if ev else None,
                eval_indices=ev.indices if ev else None,
                eval_num_tasks=ev.num_tasks if ev else None,
            )
        weights = config.static_weights() if config.strategy == "weights" and not config.schedule else None
        kwargs: dict[str, Any] = dict(
            weights=weights,
            strategy=config.strategy,
            temperature=config.temperature,
            schedule=[
                sampling.Phase(until_step=p.until_step, weights=dict(p.weights), interpolate=p.interpolate)
                for p in config.schedule
            ]
            if config.schedule
            else None,
            num_samples=config.num_samples,
            prompts_per_step=config.prompts_per_step,
            routing=config.routing,
            seed=config.seed,
            name=config.name,
            telemetry=config.telemetry,
        )
        kwargs.update(overrides)
        mixture = cls(members, **kwargs)
        mixture.config = config
        return mixture

    def __repr__(self) -> str:
        return f"MixtureSpec({self.name!r}, members={list(self.members)}, strategy={self.strategy!r})"


def _versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for dist in ("ormix", "openreward", "trl", "transformers", "datasets"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def load_mixture(path: str, **overrides: Any) -> MixtureSpec:
    """Build a `MixtureSpec` from a mixture file (`mixtures/*.yaml`), validated before any server is contacted.

    Example:
        >>> mix = load_mixture("mixtures/local-demo.yaml")   # doctest: +SKIP
    """
    from ormix.config import load_mixture_config

    return MixtureSpec.from_config(load_mixture_config(path), **overrides)
