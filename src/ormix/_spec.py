"""`OpenRewardSpec`: one ORS environment as TRL's three inputs, a drop-in for TRL's own spec.

    from ormix import OpenRewardSpec          # instead of trl.experimental.openreward
    spec = OpenRewardSpec("Eigent/SETA", num_tasks=64)
    GRPOTrainer(..., train_dataset=spec.train_dataset,
                environment_factory=spec.environment_factory, reward_funcs=spec.reward_funcs)

Same arguments and semantics as TRL's spec, plus `local:NAME` / `module:Class` targets served
automatically, `where=` metadata filters, `unscored_reward`, per-call deadlines and keepalive pings
(through ormix's own ORS client), exec-free tool binding and an `outcome` on every episode.

A spec is its `SpecConfig` (every option, validated once) plus a `Connection` (the server, and what it
answered): specs naming the same server share one when given the same connection, as a mixture's members do.
Derived specs (a mixture member, an eval selection) are built through the constructor (`derive`).

Example:
    >>> spec = OpenRewardSpec("local:echo", num_tasks=2, call_timeout_s=30)
    >>> spec.name, spec.split, spec.config.call_timeout_s
    ('echo', 'train', 30.0)
    >>> spec.derive(name="echo_eval", split="test").split
    'test'
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Any

from pydantic import ValidationError

from ormix._connection import Connection
from ormix._dataset import RESERVED_COLUMNS, rows_to_dataset
from ormix._errors import SpecError
from ormix.config import Secret, SpecConfig
from ormix.config._problems import problems_from, render_path
from ormix.ors._bridge import run_sync
from ormix.ors._models import ToolSpec
from ormix.rollout._episode import Episode, EpisodeConfig, make_episode_class
from ormix.rollout._group_scorer import GroupScorer
from ormix.rollout._group_scoring import GroupScoringRule
from ormix.rollout._rewards import RewardFunction, SessionCloser
from ormix.telemetry._records import TelemetryObserver
from ormix.tools import BindingReport

logger = logging.getLogger(__name__)


class EpisodeFactory:
    """What `OpenRewardSpec.environment_factory` is: a picklable zero-argument callable making `Episode`s.

    Example:
        >>> factory = OpenRewardSpec("local:echo").environment_factory
        >>> factory.__name__
        'echo_environment'
    """

    def __init__(self, spec: OpenRewardSpec) -> None:
        self.spec = spec
        self.__name__ = f"{spec.name}_environment"

    def __call__(self) -> Episode:
        return self.spec.episode_class()

    def episode_config_for(self, row: Mapping[str, Any]) -> EpisodeConfig:
        """The `EpisodeConfig` whose episode will reset with `row` (for opening its session ahead)."""
        return self.spec.episode_config

    def __repr__(self) -> str:
        return f"EpisodeFactory({self.spec!r})"


def _default_name(target: str, env_name: str | None) -> str:
    base = env_name or target.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    name = re.sub(r"[^a-z0-9_]+", "_", base.lower()).strip("_")
    return name or "env"


class OpenRewardSpec:
    """One ORS environment wired into TRL's `GRPOTrainer`: `train_dataset`, `environment_factory`,
    `reward_funcs`.

    Args:
        target: catalog name (`"Eigent/SETA"`), ORS server URL (`"http://localhost:8080"`), `"local:NAME"`
            (an environment that ships with ormix) or `"module:Class"` (your own
            `openreward.environments.Environment`); the last two are served on loopback automatically. A
            list of URLs is one environment on several ORS servers (`ormix.ors.ServerPool`): sessions go to
            the least busy, stay there, and a server that stops answering leaves the rotation until it
            answers again.
        num_tasks: cap on the number of tasks (the first `num_tasks` that pass `where`); exclusive with
            `indices`.
        split: the split to draw tasks from.
        indices: explicit task indices. Exclusive with `num_tasks`.
        api_key: OpenReward API key for catalog targets (default `OPENREWARD_API_KEY`); forwarded as the
            `api_key` session secret when `secrets` is not given, as TRL does.
        secrets: per-session secrets (sent as `X-Secrets`, never logged).
        env_name: the environment's name on the server (default: the target's, or the server's first).
        include_metadata: fold task-spec fields into dataset columns.
        discover_task_tools: open probe session(s) so task-specific tools are bound (TRL's semantics).
        task_tools_discovery_index: the one task index to probe; overrides probing every index in `indices`.
        where: metadata filter, e.g. `{"difficulty": ["Easy", "Medium"]}`.
        unscored_reward: reward for a rollout whose session worked but returned no reward (default `None`:
            left out of GRPO). Infrastructure errors are always `None`.
        name: short name used for the reward function and metrics (default: from the target).
        close_after_scoring: close each rollout's session as soon as its reward is read.
        call_timeout_s: per-call deadline; `ping_interval_s`: keepalive period (`None` disables pings).
        open_timeout_s: deadline of opening a session, riding out a platform backend that is still starting
            (default `None`: 900 s for catalog targets, else `call_timeout_s`).
        max_output_chars: longest tool output shown to the model (the full size is recorded).
        local_serve: `"process"` or `"thread"` for `local:`/`module:` targets.
        open_retries: how many times a failed session open is retried before the rollout is an `error`.
        api_key_env: the environment variable holding the API key (default `OPENREWARD_API_KEY` for catalog
            targets), read when the key is needed.
        max_concurrent_sessions: most of this spec's sessions being opened or running a tool call at once (a
            deployment's quota); more wait their turn. `None`: no bound.
        stragglers: when a tool round abandons this spec's slowest calls (a `StragglerConfig` or its fields
            as a mapping, e.g. ``{"median_multiple": 10, "after_fraction": 0.9}``); `None` (default): never.
        group_scoring: the environment scores each GRPO group of this spec's rollouts (ORS ``score_group``):
            a `GroupScoringConfig`, its fields as a mapping, or ``"auto"`` / ``"on"`` / ``"off"``; `None`
            (default): off. The group score combines with the pointwise reward (``combine``).
        connection: share another spec's `Connection` (its client and what its server answered).

    Every option is also a read-only attribute (`spec.split`, `spec.call_timeout_s`, ...); `spec.config` is
    the validated `SpecConfig`. A bad argument raises `SpecError` naming every problem.

    Example:
        >>> spec = OpenRewardSpec("local:echo", num_tasks=4, local_serve="thread")
        >>> spec.train_dataset.column_names      # serves local:echo on loopback, fetches 4 tasks
        ['prompt', 'task_index', 'index', 'word', 'difficulty']
        >>> OpenRewardSpec("local:echo", num_tasks=2, indices=[0])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ormix._errors.SpecError: OpenRewardSpec('local:echo'): num_tasks: num_tasks and indices are both...
    """

    def __init__(
        self,
        target: str | Sequence[str],
        *,
        name: str | None = None,
        connection: Connection | None = None,
        **options: Any,
    ) -> None:
        # The options are `SpecConfig`'s fields, declared (with their defaults) there and only there. A key
        # given in Python is a literal (in a mixture file, "${VAR}" names an environment variable).
        secrets = options.get("secrets")
        if isinstance(options.get("api_key"), str):
            options["api_key"] = Secret.literal(options["api_key"])
        if secrets is not None:
            options["secrets"] = {
                k: v if isinstance(v, Secret) else Secret.literal(v) for k, v in secrets.items()
            }
        for key, empty in (("where", dict), ("secrets", dict)):
            if key in options and options[key] is None:
                options[key] = empty()
        if options.get("indices") is not None:
            options["indices"] = list(options["indices"])
        options["target"] = target if isinstance(target, str) else list(target)
        try:
            self.config = SpecConfig.model_validate(options, context={"resolve_targets": True})
        except ValidationError as e:
            problems = problems_from(e, SpecConfig)
            raise SpecError(
                "\n".join(f"OpenRewardSpec({target!r}): {render_path(p.path)}: {p.message}" for p in problems)
            ) from None
        # Secrets given as a mapping (even empty) replace TRL's api_key forwarding; None means "not given".
        self._secrets_given = secrets is not None
        self.name = name or _default_name(self.config.target, self.config.env_name)
        self.connection = connection if connection is not None else Connection(self.config)
        self.connection.members.add(self.name)  # named when the platform keeps it waiting
        #: Identifies this spec's episodes to its reward function (kept through pickling).
        self.token = f"{self.name}-{uuid.uuid4().hex[:12]}"

    @classmethod
    def from_config(
        cls, config: SpecConfig, *, name: str | None = None, connection: Connection | None = None
    ) -> OpenRewardSpec:
        """A spec from a validated `SpecConfig` (or a `MemberConfig`: its spec options are used).

        Example:
            >>> config = SpecConfig(target="local:seta", num_tasks=3)
            >>> OpenRewardSpec.from_config(config, name="seta_easy").name
            'seta_easy'
        """
        options = {k: getattr(config, k) for k in SpecConfig.model_fields}
        options["target"] = options.pop("targets") or options["target"]
        # Secrets stay `Secret`s (a deferred one fails only when sent); an empty mapping means "not given".
        options["secrets"] = options["secrets"] or None
        return cls(**options, name=name, connection=connection)

    def derive(self, *, name: str | None = None, **changes: Any) -> OpenRewardSpec:
        """A spec with some options changed (through the constructor), sharing this spec's connection.

        Example:
            >>> spec = OpenRewardSpec("local:seta", num_tasks=8)
            >>> held_out = spec.derive(name="seta_eval", indices=[8, 9], num_tasks=None)
            >>> held_out.connection is spec.connection, held_out.indices
            (True, [8, 9])
        """
        # A key given here is a literal, as the constructor takes it; the secrets stay `Secret`s through the
        # validation (dumped to their text they would be expanded again: a literal holding "${" changed).
        if isinstance(changes.get("api_key"), str):
            changes["api_key"] = Secret.literal(changes["api_key"])
        if changes.get("secrets") is not None:
            given = changes["secrets"]
            changes["secrets"] = {
                k: v if isinstance(v, Secret) else Secret.literal(v) for k, v in given.items()
            }
        updated = self.config.model_copy(update=changes)
        data = {**updated.model_dump(), "secrets": dict(updated.secrets), "api_key": updated.api_key}
        try:
            config = SpecConfig.model_validate(data)
        except ValidationError as e:
            raise SpecError(
                f"{self!r}.derive({changes}): {problems_from(e, SpecConfig)[0].message}"
            ) from None
        derived = type(self).from_config(config, name=name or self.name, connection=self.connection)
        derived._secrets_given = self._secrets_given
        return derived

    def __getattr__(self, name: str) -> Any:
        # Every option is a read-only attribute that reads the validated config (its one source of truth).
        config = self.__dict__.get("config")  # absent while unpickling: no recursion
        if config is not None and name in SpecConfig.model_fields:
            return getattr(config, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __repr__(self) -> str:
        return f"OpenRewardSpec({self.target!r}, split={self.split!r}, name={self.name!r})"

    def __getstate__(self) -> dict[str, Any]:
        # What another process needs to rebuild this spec: its options, name, token, connection (which
        # points a worker at the server this process already serves) and the answers fetched so far.
        keep = ("config", "name", "token", "connection", "_secrets_given", "task_specs", "tool_specs")
        return {k: v for k, v in self.__dict__.items() if k in keep}

    # ── public surface ────────────────────────────────────────────────

    @cached_property
    def task_specs(self) -> list[tuple[int, dict[str, Any]]]:
        """The selected tasks as `(task_index, task_spec)`, fetched concurrently, only those needed."""
        return run_sync(self._select_tasks)

    @property
    def task_indices(self) -> list[int]:
        """The task indices this spec trains on, in dataset order."""
        return [i for i, _ in self.task_specs]

    @cached_property
    def train_dataset(self) -> Any:
        """A `datasets.Dataset`: `prompt` (empty user message), `task_index`, and task metadata columns."""
        return rows_to_dataset(self.dataset_rows())

    def dataset_rows(self) -> list[dict[str, Any]]:
        """The dataset as plain rows (`MixtureSpec` interleaves members' rows).

        Example:
            >>> rows = OpenRewardSpec("local:echo", num_tasks=1, local_serve="thread").dataset_rows()
            >>> rows[0]["task_index"], rows[0]["word"]
            (0, 'apple')
        """
        rows = []
        for index, task in self.task_specs:
            row: dict[str, Any] = {"prompt": [{"role": "user", "content": ""}], "task_index": index}
            if self.include_metadata:
                for key, value in task.items():
                    if key not in RESERVED_COLUMNS:
                        row[key] = value
            rows.append(row)
        return rows

    @cached_property
    def tool_specs(self) -> list[ToolSpec]:
        """The tools bound for the model (shared tools, plus task tools found by probe sessions)."""
        return run_sync(self._discover_tools)

    @cached_property
    def episode_config(self) -> EpisodeConfig:
        """What this spec's episodes share: how to open a session, the output cap, the token."""
        return EpisodeConfig(
            member=self.name,
            token=self.token,
            open_session=self._open_session,
            max_output_chars=self.max_output_chars,
            open_retries=self.open_retries,
            split=self.split,
            max_concurrent_sessions=self.max_concurrent_sessions,
            stragglers=self.stragglers,
        )

    @cached_property
    def episode_class(self) -> type[Episode]:
        """This spec's own `Episode` subclass, with one method per tool."""
        class_name = re.sub(r"\W", "", self.name.title()) or "Env"
        cls = make_episode_class(class_name, self.episode_config, self.tool_specs)
        for note in cls.binding.notes:
            logger.info("ormix %s: %s", self.name, note)
        return cls

    @property
    def binding(self) -> BindingReport:
        """What the tool binding did: name map, renames, skips."""
        return self.episode_class.binding

    @cached_property
    def environment_factory(self) -> EpisodeFactory:
        """Zero-argument callable returning a fresh `Episode` (one per rollout; TRL pools and resets them).

        It pickles (with its spec), so TRL's AsyncGRPOTrainer can send it to a worker process.
        """
        return EpisodeFactory(self)

    @cached_property
    def telemetry(self) -> TelemetryObserver:
        """The observer that logs this spec's metrics and, under a trainer callback, writes its records."""
        return TelemetryObserver(self.name)

    def reward_function(
        self, *, name: str | None = None, scale: float = 1.0, unscored_reward: float | None = None
    ) -> RewardFunction:
        """A fresh reward function for this spec's episodes, with the telemetry and session-closing observers.

        Example:
            >>> OpenRewardSpec("local:echo").reward_function(name="echo", scale=2.0).scale
            2.0
        """
        observers: list[Any] = [self.telemetry]
        if self.close_after_scoring:
            observers.append(SessionCloser())
        return RewardFunction(
            name or self.name,
            token=self.token,
            scale=scale,
            unscored_reward=self.unscored_reward if unscored_reward is None else unscored_reward,
            observers=observers,
            group_scorer=self.group_scorer(),
        )

    def group_scorer(self) -> GroupScorer | None:
        """What scores this spec's GRPO groups on the environment (`None` when ``group_scoring`` is off).

        Example:
            >>> OpenRewardSpec("local:ranked", group_scoring="on").group_scorer().rule.mode
            'on'
            >>> OpenRewardSpec("local:ranked").group_scorer() is None
            True
        """
        config = self.config.group_scoring
        if config is None or config.mode == "off":
            return None
        rule = GroupScoringRule(
            mode=config.mode, combine=config.combine, weight=config.weight, candidates=config.candidates
        )
        return GroupScorer(rule, timeout_s=self.call_timeout_s)

    @cached_property
    def reward_funcs(self) -> RewardFunction:
        """Outcome-only reward: the last non-null reward; `None` when unscored (unless `unscored_reward`) or
        error.

        Named after the spec (`__name__ == spec.name`), so TRL logs `rewards/<name>/mean`.
        """
        return self.reward_function()

    @cached_property
    def callbacks(self) -> list[Any]:
        """Trainer callbacks (need transformers): per-environment telemetry (rollout records under
        `<output_dir>/rollouts/`, coverage alarm with the default thresholds) and closing every session of
        this spec when training ends."""
        from ormix.trl._callbacks import SessionCleanupCallback, TelemetryCallback

        return [
            TelemetryCallback({self.name: self.telemetry}, secrets=self.secret_values()),
            SessionCleanupCallback([self]),
        ]

    def close_sessions(self) -> int:
        """Close every session still open by this spec's episodes; returns how many."""
        if "episode_config" not in self.__dict__:
            return 0
        return self.episode_config.close_all()

    def close(self) -> None:
        """Close all sessions and the connection. The spec can be used again afterwards (it reconnects)."""
        self.close_sessions()
        self.connection.close()

    def secret_values(self) -> list[str]:
        """Every secret value this spec sends (secrets and API key), for redaction. Never log them."""
        values = list((self.effective_secrets() or {}).values())
        key = self.config.resolve_api_key()
        return [v for v in [*values, key] if isinstance(v, str) and v]

    def effective_secrets(self) -> dict[str, str] | None:
        """The session secrets sent: `secrets`, or (TRL's rule, catalog targets) the API key as `api_key`.

        Example:
            >>> OpenRewardSpec("Eigent/SETA", api_key="sk-test").effective_secrets()
            {'api_key': 'sk-test'}
        """
        if self._secrets_given or self.config.parsed_target.kind != "catalog":
            return self.config.secret_values() if self._secrets_given else None
        key = self.config.resolve_api_key()
        return {"api_key": key} if key else None

    def manifest_entry(self) -> dict[str, Any]:
        """This spec's part of a manifest (target, selection, tools); secrets appear by name only."""
        entry: dict[str, Any] = {
            "target": self.target,
            "split": self.split,
            "env_name": self.env_name,
            "num_tasks": self.num_tasks,
            "indices": self.indices,
            "where": self.where or None,
            "include_metadata": self.include_metadata,
            "tools": [t.name for t in self.tool_specs],
            "secret_names": sorted(self.effective_secrets() or {}),
        }
        if self.targets:
            entry["targets"] = list(self.targets)
        if self.group_scoring is not None:
            entry["group_scoring"] = self.group_scoring.model_dump()
        return entry

    # ── internals ─────────────────────────────────────────────────────

    async def _open_session(
        self, task_index: int | None, task_spec: dict | None, split: str | None = None
    ) -> Any:
        split = split or self.split
        secrets = self.effective_secrets()
        client = await self.connection.client()
        if task_spec is not None:
            return await client.open_session(task_spec=task_spec, secrets=secrets)
        return await client.open_session(split=split, index=int(task_index or 0), secrets=secrets)

    async def select_tasks(self) -> list[tuple[int, dict[str, Any]]]:
        """`task_specs`, from async code (on the ORS portal's loop)."""
        if "task_specs" not in self.__dict__:
            self.__dict__["task_specs"] = await self._select_tasks()
        return list(self.__dict__["task_specs"])

    async def _select_tasks(self) -> list[tuple[int, dict[str, Any]]]:
        return await self.connection.select_tasks(
            split=self.split,
            num_tasks=self.num_tasks,
            indices=self.indices,
            where=self.where,
            label=self.name,
        )

    async def _discover_tools(self) -> list[ToolSpec]:
        probes: list[int] | None
        if self.task_tools_discovery_index is not None:
            probes = [self.task_tools_discovery_index]
        elif self.indices is not None:
            probes = sorted(set(self.indices))
        elif self.where and self.discover_task_tools:
            # With a filter, task 0 may not be one this spec trains on: probe one that is.
            probes = [(await self.select_tasks())[0][0]]
        else:
            probes = None
        return await self.connection.discover_tools(
            split=self.split,
            discover_task_tools=self.discover_task_tools,
            probes=probes,
            secrets=self.effective_secrets(),
            label=self.name,
        )
