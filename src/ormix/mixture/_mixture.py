"""`MixtureSpec`: several ORS environments in one GRPO run, built from one `MixtureConfig`.

A mixture is described once, by its config (`ormix.config.MixtureConfig`, what a mixture file holds): the
Python constructor builds that same config from its arguments, and everything else — member specs, the
plan, datasets, routing, reward functions, ablations, the manifest — is built from it. Every rule (member
names, weights, schedules, strategies) is checked there, once, with every problem reported together.

Members (each an `OpenRewardSpec` plus per-member options) are interleaved into one dataset keyed by an
`environment` column, following the mixture's `ormix.mixture._planner.Planner` (weights, temperature, round
robin, step schedules, adaptive weights; exact per-step quotas). Tool calls are routed to the member's
session, either per
environment (TRL's dict `environment_factory`) or through one `RoutingEnvironment` with namespaced methods.
Rewards come back as one function per member, so TRL logs `rewards/<member>/mean`.

Example:
    >>> mix = MixtureSpec({"terminals": OpenRewardSpec("local:terminals", num_tasks=16),
    ...                    "seta": OpenRewardSpec("local:seta", num_tasks=16)},
    ...                   weights={"terminals": 0.7, "seta": 0.3}, prompts_per_step=4, num_samples=64)
    >>> mix.config.weights, mix.train_members
    ({'terminals': 0.7, 'seta': 0.3}, ['terminals', 'seta'])
    >>> mix.without("seta").name
    'mixture-without-seta'
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import anyio
from pydantic import ValidationError

from ormix._connection import Connection, connection_key
from ormix._dataset import rows_to_dataset
from ormix._errors import MixtureError
from ormix._hashing import content_hash
from ormix._runs import installed_versions
from ormix._spec import OpenRewardSpec
from ormix.config import (
    AdaptiveConfig,
    MemberConfig,
    MixtureConfig,
    MixtureConfigError,
    PhaseConfig,
    SpecConfig,
    TelemetryConfig,
)
from ormix.config._checks import eval_overlap_note, held_out
from ormix.config._models import TEST_SPLIT
from ormix.config._problems import Problem, problems_from
from ormix.mixture._adaptive_run import AdaptiveRun
from ormix.mixture._planner import Planner, PlanRow
from ormix.mixture._prior import platform_evidence
from ormix.ors._bridge import run_sync
from ormix.ors._errors import ORSError
from ormix.rollout._batch import SPLIT_COLUMN
from ormix.rollout._rewards import RewardFunction
from ormix.rollout._routing import RoutingEnvironment, make_routing_class

#: The options a `Member` takes besides its spec: `MemberConfig`'s own fields, and the spec's reward for an
#: unscored rollout (a member may score its spec's rollouts differently).
MEMBER_OPTIONS = tuple(sorted(set(MemberConfig.model_fields) - set(SpecConfig.model_fields))) + (
    "unscored_reward",
)


class Member:
    """One environment of a mixture built in Python: its spec (the runtime side: connection, tasks, tools)
    and its `MemberConfig` (the spec's options plus the member's, as a mixture file's member holds them).

    The member is modelled once, by `MemberConfig`: the options are its fields (`MEMBER_OPTIONS`:
    ``weight``, ``role``, ``scale``, ``eval``, ``filter``, ``reference``, and ``unscored_reward`` over the
    spec's), checked here. ``eval_split``, ``eval_indices`` and ``eval_num_tasks`` are short for
    ``eval={"split": ...}``.

    Raises:
        `ormix.config.MixtureConfigError` (a `MixtureError`) listing every problem of the options.

    Example:
        >>> seta = OpenRewardSpec("local:seta", num_tasks=8)
        >>> member = Member(seta, weight=0.3, scale=2.0, eval_num_tasks=2)
        >>> member.config.scale, member.config.eval.num_tasks, member.config.num_tasks
        (2.0, 2, 8)
    """

    __slots__ = ("config", "spec")

    def __init__(
        self,
        spec: OpenRewardSpec,
        *,
        eval_split: str | None = None,
        eval_indices: Sequence[int] | None = None,
        eval_num_tasks: int | None = None,
        **options: Any,
    ) -> None:
        source = f"Member({spec.target!r})"
        if options.get("unscored_reward", 0) is None:  # None: the spec's own (as when not given)
            del options["unscored_reward"]
        unknown = [k for k in options if k not in MEMBER_OPTIONS]
        if unknown:
            allowed = ", ".join(MEMBER_OPTIONS)
            problems = [Problem((k,), f"not a member option; use one of: {allowed}") for k in unknown]
            raise MixtureConfigError(problems, source)
        if eval_split is not None or eval_indices is not None or eval_num_tasks is not None:
            if "eval" in options:
                raise MixtureConfigError(
                    [Problem(("eval",), "give eval= or eval_split/eval_indices/eval_num_tasks, not both")],
                    source,
                )
            options["eval"] = {
                "split": eval_split,
                "indices": list(eval_indices) if eval_indices is not None else None,
                "num_tasks": eval_num_tasks,
            }
        data = {k: getattr(spec.config, k) for k in SpecConfig.model_fields}
        try:
            self.config: MemberConfig = MemberConfig.model_validate({**data, **options})
        except ValidationError as e:
            raise MixtureConfigError(problems_from(e, MemberConfig), source) from None
        self.spec = spec

    def __repr__(self) -> str:
        return f"Member({self.spec!r}, role={self.config.role!r})"


@dataclass(frozen=True)
class EvalSet:
    """One member's eval tasks, as its server answered: which, why those, and how many it trains on.

    Attributes:
        member: the member's name.
        split: the split the tasks are drawn from.
        task_indices: the tasks, in dataset order.
        source: how they were chosen, in words (``held out: ...``, ``split 'test'``, ...).
        overlap: how many of them the member also trains on (same split, same index).
        notes: what a user should know (an overlap with training, fewer tasks than asked for).
        kind: which rule of `MixtureSpec.eval_selection` chose them: ``eval set`` (its ``eval:``),
            ``eval member`` (``role: eval``/``both`` without ``eval:``), ``test split``, ``train tasks``
            (nothing held out: the training tasks) or ``split S (--split)``.

    Example:
        >>> EvalSet("echo", "test", (0, 1), "split 'test' (all its tasks)", 0).as_dict()["tasks"]
        2
    """

    member: str
    split: str
    task_indices: tuple[int, ...]
    source: str
    overlap: int
    notes: tuple[str, ...] = field(default=())
    kind: str = "eval set"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (the run manifest's ``eval`` entry of the member)."""
        return {
            "split": self.split,
            "tasks": len(self.task_indices),
            "task_indices": list(self.task_indices),
            "source": self.source,
            "overlap": self.overlap,
            "notes": list(self.notes),
        }


async def _split_facts(spec: OpenRewardSpec, split: str) -> tuple[list[str] | None, int | None]:
    """The environment's split names (``None``: it does not list them) and the size of ``split`` (``None``:
    the split is not among the names)."""
    client = await spec.connection.client()
    try:
        names: list[str] | None = [s.name for s in await client.splits()]
    except ORSError:
        names = None
    if names is not None and split not in names:
        return names, None
    return names, await client.num_tasks(split)


class RoutingFactory:
    """The namespaced `environment_factory`: a picklable callable making one `RoutingEnvironment` per rollout.

    Example:
        >>> factory = RoutingFactory({"echo": OpenRewardSpec("local:echo")})
        >>> factory.__name__
        'routing_environment'
    """

    __name__ = "routing_environment"

    def __init__(self, specs: Mapping[str, OpenRewardSpec]) -> None:
        self.specs = dict(specs)

    @cached_property
    def routing_class(self) -> type[RoutingEnvironment]:
        """The `RoutingEnvironment` subclass with every member's namespaced tools."""
        return make_routing_class({n: s.episode_class for n, s in self.specs.items()})

    def __call__(self) -> RoutingEnvironment:
        return self.routing_class()

    def episode_config_for(self, row: Mapping[str, Any]) -> Any:
        """The `EpisodeConfig` of the member a row belongs to (its `environment` column), or ``None``."""
        spec = self.specs.get(row.get("environment"))  # type: ignore[arg-type]
        return None if spec is None else spec.episode_config

    def __getstate__(self) -> dict[str, Any]:
        return {"specs": self.specs}


def _member(name: str, value: Any) -> Member:
    if isinstance(value, Member):
        return value
    if isinstance(value, OpenRewardSpec):
        return Member(value)
    raise MixtureError(f"member {name!r} must be an OpenRewardSpec or a Member, not {type(value).__name__}")


class MixtureSpec:
    """Several ORS environments as TRL's inputs: `train_dataset`, `eval_dataset`, `environment_factory`,
    `reward_funcs`, `callbacks`.

    Args:
        members: member name → `OpenRewardSpec` or `Member`. Names are short identifiers (`[a-z][a-z0-9_]*`,
            no `__`). Members may share a target (then they share one connection and tool surface).
        weights: member → weight (alternative to `Member.weight`); default uniform.
        strategy: `weights`, `temperature` (p ∝ n_i^(1/T) over task counts), `round_robin` or `adaptive`
            (weights move toward the members whose groups are informative; needs `prompts_per_step` and
            `callbacks=mix.callbacks`).
        temperature: T for the `temperature` strategy.
        schedule: curriculum phases (dicts with `until_step`, `weights`, `interpolate`, or
            `ormix.config.PhaseConfig`); needs `prompts_per_step`. Steps count from 1; a phase holds until
            its `until_step` (exclusive).
        num_samples: rows in the training dataset (default: `num_steps * prompts_per_step`, else all tasks).
        prompts_per_step: unique prompts per optimizer step; every step then gets its exact quota.
        num_steps: planned training steps (sizes the dataset with `prompts_per_step`).
        routing: `auto` (per_env where the installed TRL accepts a dict factory), `per_env` or `namespaced`.
        seed: plan seed; same config and seed → same rows on every rank and run.
        name: a label for manifests and run directories.
        telemetry: the coverage alarm's settings (`ormix.config.TelemetryConfig` fields).
        adaptive: how adaptive weights move, with ``strategy="adaptive"`` (`ormix.config.AdaptiveConfig`
            fields).

    The arguments become a `MixtureConfig` (`mix.config`), validated like a mixture file: a bad one raises
    `ormix.config.MixtureConfigError` (a `MixtureError`) listing every problem.
    """

    def __init__(
        self,
        members: Mapping[str, OpenRewardSpec | Member],
        *,
        weights: Mapping[str, float] | None = None,
        strategy: str = "weights",
        temperature: float = 1.0,
        schedule: Sequence[PhaseConfig | Mapping[str, Any]] | None = None,
        num_samples: int | None = None,
        prompts_per_step: int | None = None,
        num_steps: int | None = None,
        routing: str = "auto",
        seed: int = 0,
        name: str | None = None,
        telemetry: Mapping[str, Any] | TelemetryConfig | None = None,
        adaptive: Mapping[str, Any] | AdaptiveConfig | None = None,
    ) -> None:
        given = {str(n): _member(str(n), v) for n, v in members.items()}
        phases = None
        if schedule is not None:
            phases = [p.model_dump() if isinstance(p, PhaseConfig) else dict(p) for p in schedule]
        data = {
            "name": name or "mixture",
            "members": {n: m.config for n, m in given.items()},
            "weights": dict(weights) if weights is not None else None,
            "strategy": strategy,
            "temperature": temperature,
            "schedule": phases,
            "num_samples": num_samples,
            "num_steps": num_steps,
            "prompts_per_step": prompts_per_step,
            "routing": routing,
            "seed": seed,
            "telemetry": telemetry if telemetry is not None else {},
            "adaptive": adaptive,
        }
        config = MixtureConfig.from_dict(
            {k: v for k, v in data.items() if v is not None}, source=f"MixtureSpec({data['name']!r})"
        )
        self._setup(config, {n: m.spec for n, m in given.items()})

    @classmethod
    def from_config(
        cls, config: MixtureConfig, *, specs: Mapping[str, OpenRewardSpec] | None = None
    ) -> MixtureSpec:
        """The mixture a validated `MixtureConfig` describes (what a mixture file holds).

        ``specs``: existing specs to share connections (and what their servers answered) with, by member name.

        Example:
            >>> cfg = MixtureConfig(members={"a": {"target": "local:echo"}, "b": {"target": "local:seta"}})
            >>> MixtureSpec.from_config(cfg).train_members
            ['a', 'b']
        """
        mixture = cls.__new__(cls)
        mixture._setup(config, specs or {})
        return mixture

    def _setup(self, config: MixtureConfig, specs: Mapping[str, OpenRewardSpec]) -> None:
        self.config = config
        self._eval_sets: dict[tuple[str, str | None], tuple[EvalSet, OpenRewardSpec]] = {}
        self._split_facts: dict[tuple[str, str], tuple[list[str] | None, int | None]] = {}
        if config.base_dir is not None:  # a config built in Python: a loaded file has added it already
            from ormix.server._registry import add_search_dir

            add_search_dir(config.base_dir)
        # Members naming the same server share one connection: one client, one task list per selection,
        # one tool surface.
        connections: dict[tuple[Any, ...], Connection] = {}
        for spec in specs.values():
            connections.setdefault(spec.connection.key, spec.connection)
        self._specs: dict[str, OpenRewardSpec] = {}
        for member_name, member in config.members.items():
            key = connection_key(member)
            spec = OpenRewardSpec.from_config(member, name=member_name, connection=connections.get(key))
            connections.setdefault(key, spec.connection)
            spec.connection.note_secrets(member_name, member)  # each member's, checked against the platform's
            self._specs[member_name] = spec

    # ── the config, read ──────────────────────────────────────────────

    @property
    def name(self) -> str:
        """The mixture's name (run directories, manifests)."""
        return self.config.name

    @property
    def members(self) -> dict[str, MemberConfig]:
        """Member name → its `MemberConfig` (the member's spec: `spec(name)`)."""
        return dict(self.config.members)

    @property
    def train_members(self) -> list[str]:
        """Members that appear in the training dataset, in declaration order."""
        return self.config.train_members

    @property
    def seed(self) -> int:
        """The plan seed."""
        return self.config.seed

    @property
    def strategy(self) -> str:
        """The sampling strategy (`weights`, `temperature`, `round_robin`)."""
        return self.config.strategy

    @property
    def prompts_per_step(self) -> int | None:
        """Unique prompts per optimizer step, when the plan is laid out by steps."""
        return self.config.prompts_per_step

    @property
    def telemetry_config(self) -> TelemetryConfig:
        """The coverage alarm's settings."""
        return self.config.telemetry

    def spec(self, member: str) -> OpenRewardSpec:
        """The (member-named) spec of one member."""
        try:
            return self._specs[member]
        except KeyError:
            raise MixtureError(f"unknown member {member!r}; members are {sorted(self._specs)}") from None

    def connect(self) -> None:
        """Reach every member's server at once, starting the local ones (each local server's child process
        spends seconds importing its environment, so three start in about the time of one). Raises the
        first member's error, as its own first use would.

        Example:
            >>> mix = MixtureSpec({m: OpenRewardSpec("local:echo", num_tasks=1, local_serve="thread")
            ...                    for m in ("a", "b")})
            >>> mix.connect()
        """
        connections = list({id(s.connection): s.connection for s in self._specs.values()}.values())
        failed: dict[int, Exception] = {}

        async def attempt(i: int, call: Callable[[], Awaitable[object]]) -> None:
            try:
                await call()
            except Exception as e:  # noqa: BLE001 - raised below, the first member's first
                failed[i] = e

        async def reach_all() -> None:
            # Required secrets first (the platform's API only): a missing one stops here, before any server.
            for method in ("check_secrets", "client"):
                if failed:
                    return
                async with anyio.create_task_group() as tg:
                    for i, connection in enumerate(connections):
                        tg.start_soon(attempt, i, getattr(connection, method))

        run_sync(reach_all)
        if failed:
            raise failed[min(failed)]

    # ── plan and datasets ─────────────────────────────────────────────

    @property
    def adaptive(self) -> bool:
        """Whether the weights follow training (``strategy: adaptive``): then rows are decided on fetch."""
        return self.config.strategy == "adaptive"

    @property
    def num_rows(self) -> int:
        """Rows of the training dataset."""
        return self.planner.num_rows

    @cached_property
    def planner(self) -> Planner:
        """The mixture's `Planner` over its train members' task indices (the one training uses)."""
        specs = {n: self.spec(n) for n in self.train_members}
        with_prior = [n for n in specs if (rule := self.config.task_filter(n)) and rule.prior]
        try:
            return Planner(
                self.config,
                {n: s.task_indices for n, s in specs.items()},
                metadata={n: dict(specs[n].task_specs) for n in with_prior},
                difficulty=platform_evidence(self.config, specs),
            )
        except MixtureError as e:
            raise MixtureError(f"mixture {self.name!r}: {e}") from None

    @cached_property
    def adaptive_run(self) -> AdaptiveRun:
        """The planner in a trainer's data flow (`AdaptiveRun`: rows decided on fetch); adaptive only."""
        if not self.adaptive:
            raise MixtureError(f"mixture {self.name!r} is not adaptive (strategy: {self.config.strategy})")
        rows = {n: {r["task_index"]: r for r in self.spec(n).dataset_rows()} for n in self.train_members}
        return AdaptiveRun(self.planner, rows)

    @cached_property
    def plan(self) -> list[PlanRow]:
        """The rows (member, task_index, step) known before training: all of a static plan; an adaptive plan's
        first steps (the rest are decided during training and written to the rollout records)."""
        return self.planner.plan()

    @property
    def order_matters(self) -> bool:
        """Whether the dataset order carries meaning (quotas, schedule, round robin): shuffling breaks it."""
        cfg = self.config
        return bool(cfg.prompts_per_step or cfg.schedule or cfg.strategy in ("round_robin", "adaptive"))

    @cached_property
    def train_dataset(self) -> Any:
        """Interleaved rows: `prompt`, `environment`, `task_index`, then task metadata.

        Metadata keys whose types clash across members (say `difficulty` an int in one and a string in
        another) are stored as JSON text in that column, so the Arrow schema always builds. An adaptive
        mixture's rows are placeholders, filled in when the trainer fetches them.
        """
        if self.adaptive:
            return self.adaptive_run.dataset(self.num_rows)
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

    def eval_spec(self, member: str) -> OpenRewardSpec:
        """The spec selecting a member's eval tasks (`eval_set`: another split, held-out or given indices; its
        own tasks otherwise, and for a member without an eval set)."""
        config = self.config.members.get(member)
        if config is not None and not config.evaluates:
            return self.spec(member)
        self.eval_set(member)  # a member without an eval set is named as such
        return self._eval_selections(member, None)[1]

    def eval_set(self, member: str) -> EvalSet:
        """A member's eval tasks as its ``eval:`` section (or ``role: eval``/``both``) chooses them, checked
        against its server (asked once per member):

        - no ``eval:`` section (``role: eval`` or ``both``): the member's own tasks;
        - ``eval: {split: S}`` on another split: that split's tasks (``num_tasks`` / ``indices`` of it, else
          all);
        - ``eval: {indices: [...]}``: exactly those (each must exist in the split);
        - ``eval: {num_tasks: N}`` on the member's own split: N tasks held out, the first N of the split
          outside its task selection (the tasks it trains on; the same for ``role: eval``, so dropping a
          member to eval-only keeps its eval tasks); when fewer remain, the split's first N, said in
          `EvalSet.notes`;
        - ``eval: {}`` on its own split: its training tasks;
        - ``eval: {split: S, fallback: own_tasks}`` on an environment without split S: its own tasks.

        Raises `MixtureError` naming the member when it has no eval set, its eval split does not exist on the
        environment or an eval index is out of range. `eval_selection` also chooses for members without one.

        Example:
            >>> mix = MixtureSpec({"echo": Member(OpenRewardSpec("local:echo", num_tasks=4,
            ...                    local_serve="thread"), eval_num_tasks=2)})
            >>> found = mix.eval_set("echo")
            >>> found.task_indices, found.overlap, found.source
            ((4, 5), 0, "held out: the first 2 tasks of split 'train' that echo does not train on")
        """
        config = self.config.members.get(member)
        if config is None or not config.evaluates:
            raise MixtureError(
                f"member {member!r} has no eval set; members with one: {self.config.eval_members}"
            )
        return self.eval_selection(member)

    def eval_selection(self, member: str, split: str | None = None) -> EvalSet:
        """The one choice of a member's eval tasks, the set `ormix eval` and `ormix train` evaluate on (asks
        its server, once per member and split): its eval set (`eval_set`) when it has one, else its
        environment's ``test`` split (`TEST_SPLIT`), else its training tasks. ``split`` (``ormix eval
        --split``, a split the caller checked exists) evaluates on that split instead, the ``eval:`` set's
        ``num_tasks``/``indices`` still applying. `EvalSet.kind` says which rule chose.

        Example:
            >>> mix = MixtureSpec({"echo": OpenRewardSpec("local:echo", num_tasks=2, local_serve="thread")})
            >>> found = mix.eval_selection("echo")
            >>> found.kind, found.split, found.task_indices, found.overlap
            ('test split', 'test', (0, 1, 2, 3), 0)
        """
        return self._eval_selections(member, split)[0]

    def eval_selection_spec(self, member: str, split: str | None = None) -> OpenRewardSpec:
        """The spec selecting `eval_selection`'s tasks (its rows: `eval_rows`)."""
        return self._eval_selections(member, split)[1]

    def _eval_selections(self, member: str, split: str | None) -> tuple[EvalSet, OpenRewardSpec]:
        key = (member, split)
        if key not in self._eval_sets:
            self._eval_sets[key] = self._select_eval(member, split)
        return self._eval_sets[key]

    def _select_eval(self, member: str, split: str | None) -> tuple[EvalSet, OpenRewardSpec]:
        spec = self.spec(member)
        config = self.config.members[member]
        evaluation = config.eval
        if split is not None:
            derived = spec.derive(
                split=split,
                indices=evaluation.indices if evaluation else None,
                num_tasks=evaluation.num_tasks if evaluation else None,
            )
            return self._by_default(member, derived, f"split {split} (--split)", f"split {split!r} (--split)")
        if config.evaluates:
            return self._eval_section(member, config)
        if self.split_facts(member, TEST_SPLIT)[1] is not None:
            derived = spec.derive(split=TEST_SPLIT, indices=None, num_tasks=None)
            words = f"split {TEST_SPLIT!r}: no eval: set, so its environment's test split"
            return self._by_default(member, derived, "test split", words)
        words = "its training tasks: no eval: set and no test split"
        return self._by_default(member, spec, "train tasks", words)

    def _by_default(
        self, member: str, derived: OpenRewardSpec, kind: str, source: str
    ) -> tuple[EvalSet, OpenRewardSpec]:
        """A member's eval tasks chosen without its ``eval:`` set: said when it trains on them."""
        spec, indices = self.spec(member), tuple(derived.task_indices)
        trained = set(spec.task_indices) if derived.split == spec.split else set()
        overlap = len(trained & set(indices))
        said = f"{member}: evaluated on the tasks it trains on (no eval: set, no test split)"
        notes = (said,) if overlap else ()
        return EvalSet(member, derived.split, indices, source, overlap, notes, kind=kind), derived

    def _eval_section(self, member: str, config: MemberConfig) -> tuple[EvalSet, OpenRewardSpec]:
        """A member's eval set (`eval_set`'s rules), its split checked against its server."""
        spec, evaluation = self.spec(member), config.eval
        split = (evaluation.split if evaluation is not None else None) or spec.split
        names, total = self.split_facts(member, split)
        if total is None and evaluation is not None and evaluation.fallback == "own_tasks":
            return self._own_tasks(member, config, split)
        if total is None:
            raise MixtureError(
                f"member {member!r}: eval split {split!r} does not exist on {spec.target} (its splits: "
                f"{', '.join(names or [])}): set the member's eval.split to one of them"
            )
        # The member's own selection on that split: held-out tasks stay outside it whatever the role, so a
        # member turned eval-only (an ablation arm that drops it) keeps the eval tasks of the full mixture.
        selection = spec.task_indices if split == spec.split else []
        trained = selection if config.trains else []
        notes: list[str] = []
        if evaluation is None:
            derived = spec
            source = "its training tasks (role: both)" if config.trains else "its own tasks (role: eval)"
        elif evaluation.indices is not None:
            wrong = sorted(i for i in evaluation.indices if i >= total)
            if wrong:
                raise MixtureError(
                    f"member {member!r}: eval index(es) {wrong} do not exist: split {split!r} has {total} "
                    f"tasks (0-{total - 1}); fix the member's eval.indices"
                )
            derived = spec.derive(split=split, indices=list(evaluation.indices), num_tasks=None)
            source = f"eval.indices of split {split!r}"
        elif evaluation.num_tasks is not None and selection:
            derived, source = self._held_out(member, split, total, evaluation.num_tasks, selection, trained)
        elif evaluation.num_tasks is not None or split != spec.split:
            derived = spec.derive(split=split, indices=evaluation.indices, num_tasks=evaluation.num_tasks)
            source = (
                f"the first {evaluation.num_tasks} tasks of split {split!r}"
                if evaluation.num_tasks is not None
                else f"split {split!r} (all its tasks)"
            )
            if evaluation.num_tasks is not None and evaluation.num_tasks > total:
                notes.append(
                    f"{member}: eval asks for {evaluation.num_tasks} tasks; split {split!r} has {total}"
                )
        elif evaluation.fallback == "own_tasks":
            # What the full mixture evaluates a train member without `eval:` on: the whole test split, even
            # the member's own split with a task selection.
            derived = spec.derive(split=split, indices=None, num_tasks=None)
            source = f"split {split!r} (all its tasks)"
        else:
            derived = spec.derive(split=split)
            source = "its training tasks (eval: {} on its own split)"
        indices = tuple(derived.task_indices)
        overlap = len(set(indices) & set(trained))
        if evaluation is not None and evaluation.num_tasks is not None and trained and overlap:
            notes.append(eval_overlap_note(member, split, total, len(trained), evaluation.num_tasks, overlap))
        elif overlap and evaluation is not None:
            notes.append(f"{member}: {overlap} of its {len(indices)} eval tasks are training tasks")
        kind = "eval set" if evaluation is not None else "eval member"
        return EvalSet(member, split, indices, source, overlap, tuple(notes), kind=kind), derived

    def _own_tasks(self, member: str, config: MemberConfig, split: str) -> tuple[EvalSet, OpenRewardSpec]:
        """``eval: {split: S, fallback: own_tasks}`` on an environment without split S: the member's own
        tasks, as a train member without ``eval:`` whose environment has no test split is evaluated."""
        spec = self.spec(member)
        indices = tuple(spec.task_indices)
        overlap = len(set(indices)) if config.trains else 0
        source = f"its own tasks: its environment has no split {split!r} (eval.fallback: own_tasks)"
        notes = (f"{member}: evaluated on the tasks it trains on (no split {split!r})",) if overlap else ()
        return EvalSet(member, spec.split, indices, source, overlap, notes, kind="eval set"), spec

    def _held_out(
        self, member: str, split: str, total: int, wanted: int, selection: list[int], trained: list[int]
    ) -> tuple[OpenRewardSpec, str]:
        """``eval: {num_tasks: N}`` on the member's own split: the first N tasks outside its selection, else
        (too few remain) the split's first N."""
        spec = self.spec(member)
        if spec.where:
            candidates = spec.derive(split=split, indices=None, num_tasks=None).task_indices
        else:
            candidates = list(range(total))
        kept = held_out(selection, candidates, wanted)
        if kept is not None:
            outside = "does not train on" if trained else "does not select (role: eval)"
            source = f"held out: the first {wanted} tasks of split {split!r} that {member} {outside}"
            return spec.derive(split=split, indices=kept, num_tasks=None), source
        source = f"the first {wanted} tasks of split {split!r}" + (" (overlapping training)" * bool(trained))
        return spec.derive(split=split, indices=None, num_tasks=wanted), source

    def eval_sets(self) -> dict[str, EvalSet]:
        """`eval_set` of every member with an eval set, in file order (asks their servers)."""
        return {m: self.eval_set(m) for m in self.config.eval_members}

    def split_facts(self, member: str, split: str) -> tuple[list[str] | None, int | None]:
        """What a member's environment says of ``split``: its split names (``None``: it does not list them)
        and the size of ``split`` (``None``: not among the names). Asked once per member and split.

        Example:
            >>> mix = MixtureSpec({"echo": OpenRewardSpec("local:echo", local_serve="thread")})
            >>> mix.split_facts("echo", "validation")
            (['train', 'test'], None)
        """
        key = (member, split)
        if key not in self._split_facts:
            self._split_facts[key] = run_sync(_split_facts, self.spec(member), split)
        return self._split_facts[key]

    def eval_rows(self, member: str, selection: OpenRewardSpec | None = None) -> list[dict[str, Any]]:
        """The rows a trainer evaluates a member on: those of ``selection`` (default: its `eval_spec`), each
        with its ``environment`` and, on a split that is not the member's own, the split its session opens
        on (``ors_split``).

        Example:
            >>> mix = MixtureSpec({"echo": OpenRewardSpec("local:echo", local_serve="thread")})
            >>> test = mix.spec("echo").derive(split="test", indices=[0], num_tasks=None)
            >>> row = mix.eval_rows("echo", test)[0]
            >>> row["environment"], row["task_index"], row["ors_split"]
            ('echo', 0, 'test')
        """
        spec = self.eval_spec(member) if selection is None else selection
        extra = {SPLIT_COLUMN: spec.split} if spec.split != self.spec(member).split else {}
        return [{"environment": member, **row, **extra} for row in spec.dataset_rows()]

    @cached_property
    def eval_dataset(self) -> dict[str, Any]:
        """One dataset per evaluating member (its eval split or held-out indices), keyed by member name."""
        return {m: rows_to_dataset(self.eval_rows(m)) for m in self.config.eval_members}

    # ── TRL surfaces ──────────────────────────────────────────────────

    @property
    def single(self) -> bool:
        """A mixture of one member behaves exactly like that member's spec."""
        return len(self._specs) == 1

    @cached_property
    def routing(self) -> str:
        """The routing actually used: `single`, `per_env` or `namespaced`."""
        if self.single:
            return "single"
        if self.config.routing == "auto":
            from ormix.trl._compat import accepts_dict_factory

            return "per_env" if accepts_dict_factory() else "namespaced"
        return self.config.routing

    @cached_property
    def _routing_factory(self) -> RoutingFactory:
        return RoutingFactory(self._specs)

    @cached_property
    def environment_factory(self) -> Callable[[], Any] | dict[str, Callable[[], Any]]:
        """per_env: `{member: factory}`; namespaced: a `RoutingEnvironment` factory; single: its spec's."""
        if self.routing == "single":
            return self.spec(next(iter(self._specs))).environment_factory
        if self.routing == "per_env":
            return {n: self.spec(n).environment_factory for n in self._specs}
        return self._routing_factory

    @cached_property
    def reward_funcs(self) -> list[RewardFunction]:
        """One outcome-only reward function per member, `__name__` = member name (TRL logs
        `rewards/<member>/mean`); other members' rollouts get `None`."""
        funcs = [
            self.spec(n).reward_function(name=n, scale=m.scale, unscored_reward=m.unscored_reward)
            for n, m in self.config.members.items()
        ]
        if self.order_matters or self.adaptive:
            # Without its callbacks a trainer would shuffle this plan away: the first scored batch says so.
            for n in self._specs:
                self.spec(n).telemetry.callbacks_required = True
        if self.adaptive:
            for func in funcs:
                if func.member in self.train_members:
                    # Before the session closer: the observer reads the episodes' tasks.
                    func.observers.insert(1, self.adaptive_run.observer(func.member))
        return funcs

    @cached_property
    def callbacks(self) -> list[Any]:
        """The trainer-configuration check, per-environment telemetry (rollout records, coverage alarm as set
        by `telemetry=`) and session cleanup at train end (needs transformers)."""
        from ormix.trl._callbacks import (
            MixtureConfigCheck,
            SessionCleanupCallback,
            TelemetryCallback,
        )

        callbacks: list[Any] = [
            MixtureConfigCheck(self),
            TelemetryCallback(
                {n: s.telemetry for n, s in self._specs.items()},
                self.telemetry_config,
                secrets=self.secret_values(),
                # Uploads name their environment: a catalog member's is its target.
                environments={
                    n: m.target for n, m in self.config.members.items() if m.parsed_target.kind == "catalog"
                },
            ),
            SessionCleanupCallback(self._specs.values()),
        ]
        if self.adaptive:
            from ormix.trl._callbacks import AdaptiveCallback

            # Before the telemetry: its state is saved first, and a checkpoint is complete once the
            # telemetry's is there (`ormix._runs.TELEMETRY_STATE`).
            callbacks.insert(1, AdaptiveCallback(self.adaptive_run))
        return callbacks

    def secret_values(self) -> list[str]:
        """Every secret value the members send (secrets and API keys), for redaction. Never log them.

        Example:
            >>> MixtureSpec({"echo": OpenRewardSpec("local:echo", secrets={"k": "v"})}).secret_values()
            ['v']
        """
        return sorted({v for spec in self._specs.values() for v in spec.secret_values()})

    def close_sessions(self) -> int:
        """Close every session still open by this mixture's episodes."""
        return sum(spec.close_sessions() for spec in self._specs.values())

    def close(self) -> None:
        """Close every session and every member's connection (a later use reconnects)."""
        self.close_sessions()
        for spec in self._specs.values():
            spec.connection.close()

    # ── ablations and manifest ────────────────────────────────────────

    def _derived(self, config: MixtureConfig) -> MixtureSpec:
        # The kept members reuse this mixture's connections (tasks and tool surfaces already fetched).
        return MixtureSpec.from_config(
            config, specs={n: s for n, s in self._specs.items() if n in config.members}
        )

    def without(self, *names: str, as_eval: bool = True) -> MixtureSpec:
        """A new mixture that does not train on these members (leave-one-out ablation): they stay as
        eval-only members unless ``as_eval=False``; see `MixtureConfig.without`."""
        return self._derived(self.config.without(*names, as_eval=as_eval))

    def only(self, *names: str, as_eval: bool = True) -> MixtureSpec:
        """A new mixture that trains on only these members (only-one ablation), the others eval-only unless
        ``as_eval=False``; see `MixtureConfig.only`."""
        return self._derived(self.config.only(*names, as_eval=as_eval))

    def reweight(self, **weights: float) -> MixtureSpec:
        """A new mixture with these static weights (others keep theirs); see `MixtureConfig.reweight`. A
        ``temperature`` mixture's others keep the weights its planner gives them (from their task counts).
        """
        current = self.planner.weights(1) if self.config.strategy == "temperature" else None
        return self._derived(self.config.reweighted(weights, current))

    def manifest(self) -> dict[str, Any]:
        """What exactly this run trains on: the config, per-member task indices and tools, the plan, versions.

        ``hash`` is the config's (`MixtureConfig.config_hash`: what was asked for, the same hash `ormix
        ablate` writes into derived files); ``resolved_hash`` also covers what the servers answered (task
        indices, tools) and the plan. Neither covers the versions, so the same composition hashes the same
        on every machine. ``eval`` holds each evaluating member's `EvalSet` (split, task indices, how they
        were chosen, overlap with training); its servers are asked for it.
        """
        self.connect()
        members = {}
        for member_name, member in self.config.members.items():
            spec = self.spec(member_name)
            members[member_name] = {
                **spec.manifest_entry(),
                "weight": member.weight,
                "role": member.role,
                "scale": member.scale,
                "unscored_reward": member.unscored_reward,
                "task_indices": spec.task_indices if member.trains else [],
            }
        resolved = {
            "members": members,
            "routing": self.routing,
            "plan": [[r.member, r.task_index] for r in self.plan],
        }
        config_hash = self.config.config_hash()
        resolved_hash = content_hash({"config": config_hash, **resolved})
        return {
            "name": self.name,
            "seed": self.seed,
            "config": self.config.manifest_dict(),
            # Outside the hashes: where the secrets are read from is not what is trained.
            "secret_env": self.config.secret_sources(),
            **resolved,
            "eval": {m: found.as_dict() for m, found in self.eval_sets().items()},
            "versions": installed_versions(("ormix", "openreward", "trl", "transformers", "datasets")),
            "hash": config_hash,
            "resolved_hash": resolved_hash,
        }

    def __repr__(self) -> str:
        return f"MixtureSpec({self.name!r}, members={list(self._specs)}, strategy={self.strategy!r})"


def trainer_settings_check() -> Any:
    """The check of a file's ``train:`` section against the installed trainer's settings (``None``
    without TRL)."""
    try:
        from ormix.trl._args import setting_problems
    except ImportError:
        return None
    return lambda settings: setting_problems(settings)[1]


def load_mixture(path: str, *, defer_missing_secrets: bool = False, **overrides: Any) -> MixtureSpec:
    """Build a `MixtureSpec` from a mixture file (`mixtures/*.yaml`), validated before any server is
    contacted.

    ``overrides`` replace top-level config keys (e.g. ``num_samples=``, ``seed=``), validated again.
    ``defer_missing_secrets``: see `ormix.config.load_mixture_config`.

    Example:
        >>> mix = load_mixture("mixtures/local-demo.yaml")
        >>> mix.name, mix.train_members
        ('local-demo', ['echo', 'terminals', 'seta'])
    """
    from ormix.config import load_mixture_config

    config = load_mixture_config(
        path, defer_missing_secrets=defer_missing_secrets, train_check=trainer_settings_check()
    )
    if overrides:
        config = config.updated(**overrides)
    return MixtureSpec.from_config(config)
