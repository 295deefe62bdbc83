"""`OpenRewardSpec`: one ORS environment as TRL's three inputs, a drop-in for TRL's own spec.

    from ormix import OpenRewardSpec          # instead of trl.experimental.openreward
    spec = OpenRewardSpec("Eigent/SETA", num_tasks=64)
    GRPOTrainer(..., train_dataset=spec.train_dataset,
                environment_factory=spec.environment_factory, reward_funcs=spec.reward_funcs)

Same arguments and semantics as TRL's spec, plus `local:NAME` / `module:Class` targets served
automatically, `where=` metadata filters, `unscored_reward`, per-call deadlines and keepalive pings
(through ormix's own ORS client), exec-free tool binding and an `outcome` on every episode.
"""

from __future__ import annotations

import logging
import os
import re
import weakref
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import Any

import anyio

from ormix.ors import ORSClient
from ormix.ors.bridge import run_sync
from ormix.ors.models import ToolSpec
from ormix.rollout.episode import Episode, EpisodeConfig, make_episode_class
from ormix.rollout.outcome import training_reward
from ormix.targets import parse_target
from ormix.tools.binding import BindingReport, merge_tool_specs

logger = logging.getLogger(__name__)

#: Reserved dataset columns: a task-spec key never overwrites them.
RESERVED_COLUMNS = ("prompt", "task_index", "environment", "ors_split")

WhereValue = Any

_open_specs: weakref.WeakSet[OpenRewardSpec] = weakref.WeakSet()


class SpecError(ValueError):
    """An `OpenRewardSpec` argument that cannot work; the message says which and what to do."""


def _default_name(target: str, env_name: str | None) -> str:
    base = env_name or target.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    name = re.sub(r"[^a-z0-9_]+", "_", base.lower()).strip("_")
    return name or "env"


def matches_where(task: Mapping[str, Any], where: Mapping[str, WhereValue]) -> bool:
    """Whether a task spec passes a metadata filter (pure).

    Each key must match: a list of allowed values matches when the task's value is one of them (or, for a
    list-valued field such as `tags`, when any element is); a scalar must be equal.

    Example:
        >>> matches_where({"difficulty": "Easy", "tags": ["git"]}, {"difficulty": ["Easy", "Medium"], "tags": "git"})
        True
    """
    for key, wanted in where.items():
        if key not in task:
            return False
        value = task[key]
        allowed = list(wanted) if isinstance(wanted, (list, tuple, set, frozenset)) else [wanted]
        values = value if isinstance(value, list) else [value]
        if not any(v in allowed for v in values):
            return False
    return True


class OpenRewardSpec:
    """One ORS environment wired into TRL's `GRPOTrainer`: `train_dataset`, `environment_factory`, `reward_funcs`.

    Args:
        target: catalog name (`"Eigent/SETA"`), ORS server URL (`"http://localhost:8080"`), `"local:NAME"`
            (an environment that ships with ormix) or `"module:Class"` (your own
            `openreward.environments.Environment`); the last two are served on loopback automatically.
        num_tasks: cap on the number of tasks (the first `num_tasks` that pass `where`). Exclusive with `indices`.
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
        max_output_chars: longest tool output shown to the model (the full size is recorded).
        local_serve: `"process"` or `"thread"` for `local:`/`module:` targets.
        transport: `"ormix"` (ormix's ORS client) or `"sdk"` (sessions through the openreward SDK's async
            client; task and tool listing still use ormix's client).
        open_retries: how many times a failed session open is retried before the rollout is an `error`
            (counted on the episode as `open_retries`).

    Example:
        >>> spec = OpenRewardSpec("local:echo", num_tasks=4)     # doctest: +SKIP
        >>> spec.train_dataset.column_names                     # doctest: +SKIP
        ['prompt', 'task_index', 'difficulty', 'index', 'word']
    """

    def __init__(
        self,
        target: str,
        *,
        num_tasks: int | None = None,
        split: str = "train",
        indices: Sequence[int] | None = None,
        api_key: str | None = None,
        secrets: Mapping[str, str] | None = None,
        env_name: str | None = None,
        include_metadata: bool = True,
        discover_task_tools: bool = True,
        task_tools_discovery_index: int | None = None,
        where: Mapping[str, WhereValue] | None = None,
        unscored_reward: float | None = None,
        name: str | None = None,
        close_after_scoring: bool = True,
        call_timeout_s: float | None = 300.0,
        ping_interval_s: float | None = 10.0,
        max_output_chars: int = 16_384,
        local_serve: str | None = None,
        open_retries: int = 0,
        transport: str = "ormix",
    ) -> None:
        if num_tasks is not None and indices is not None:
            raise SpecError("Provide num_tasks or indices, not both.")
        if num_tasks is not None and num_tasks < 0:
            raise SpecError(f"num_tasks must be >= 0, got {num_tasks}.")
        if indices is not None and any((not isinstance(i, int)) or i < 0 for i in indices):
            raise SpecError("indices must be non-negative integers.")
        try:
            self._target = parse_target(target)
        except ValueError as e:
            raise SpecError(str(e)) from None
        self.target = str(self._target)
        self.split = split
        self.num_tasks = num_tasks
        self.indices = list(indices) if indices is not None else None
        self.env_name = env_name
        self.include_metadata = include_metadata
        self.discover_task_tools = discover_task_tools
        self.task_tools_discovery_index = task_tools_discovery_index
        self.where = dict(where) if where else None
        self.unscored_reward = unscored_reward
        self.name = name or _default_name(target, env_name)
        self.close_after_scoring = close_after_scoring
        self.call_timeout_s = call_timeout_s
        self.ping_interval_s = ping_interval_s
        self.max_output_chars = max_output_chars
        self.local_serve = local_serve
        if transport not in ("ormix", "sdk"):
            raise SpecError(
                f"transport must be 'ormix' (ormix's ORS client) or 'sdk' (the openreward SDK), "
                f"not {transport!r}."
            )
        self.transport = transport
        self._sdk: Any = None
        if open_retries < 0:
            raise SpecError(f"open_retries must be >= 0, got {open_retries}.")
        self.open_retries = open_retries
        self._api_key = api_key
        self._secrets = dict(secrets) if secrets is not None else None
        self._client: ORSClient | None = None
        _open_specs.add(self)

    def __repr__(self) -> str:
        return f"OpenRewardSpec({self.target!r}, split={self.split!r}, name={self.name!r})"

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
    def train_dataset(self):
        """A `datasets.Dataset`: `prompt` (empty user message), `task_index`, and task metadata columns."""
        return rows_to_dataset(self.dataset_rows())

    def dataset_rows(self) -> list[dict[str, Any]]:
        """The dataset as plain rows (used by `MixtureSpec` to interleave members)."""
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
        owner = self.__dict__.get("_tools_owner")
        if owner is not None:
            return owner.tool_specs
        return run_sync(self._discover_tools)

    @cached_property
    def episode_class(self) -> type[Episode]:
        """This spec's own `Episode` subclass, with one method per tool."""
        config = EpisodeConfig(
            member=self.name,
            open_session=self._open_session,
            close_after_scoring=self.close_after_scoring,
            max_output_chars=self.max_output_chars,
            open_retries=self.open_retries,
        )
        class_name = re.sub(r"\W", "", self.name.title()) or "Env"
        cls = make_episode_class(class_name, config, self.tool_specs)
        for note in cls._binding.notes:
            logger.info("ormix %s: %s", self.name, note)
        return cls

    @property
    def binding(self) -> BindingReport:
        """What the tool binding did: name map, renames, skips."""
        return self.episode_class._binding

    @cached_property
    def environment_factory(self) -> Callable[[], Episode]:
        """Zero-argument callable returning a fresh `Episode` (one per rollout; TRL pools and resets them)."""
        cls = self.episode_class

        def factory() -> Episode:
            return cls()

        factory.__name__ = f"{self.name}_environment"
        return factory

    @cached_property
    def reward_funcs(self) -> Callable[..., list[float | None]]:
        """Outcome-only reward: the last non-null reward; `None` when unscored (unless `unscored_reward`) or error.

        Named after the spec (`__name__ == spec.name`), so TRL logs `rewards/<name>/mean`.
        """
        return make_reward_func(self.name, self.episode_class._config, unscored_reward=self.unscored_reward)

    @cached_property
    def callbacks(self) -> list[Any]:
        """Trainer callbacks (need transformers): per-environment telemetry (rollout records under
        `<output_dir>/rollouts/`, coverage alarm with the default thresholds) and closing every session of
        this spec when training ends."""
        from ormix.integrations.trl import SessionCleanupCallback, TelemetryCallback

        return [TelemetryCallback({self.name: self}), SessionCleanupCallback([self])]

    def close_sessions(self) -> int:
        """Close every session still open by this spec's episodes; returns how many."""
        if "episode_class" not in self.__dict__:
            return 0
        return self.episode_class._config.close_all()

    def close(self) -> None:
        """Close all sessions and the client. The spec can be used again afterwards (it reconnects)."""
        self.close_sessions()
        client, self._client = self._client, None
        if client is not None:
            try:
                run_sync(client.aclose)
            except Exception as e:  # noqa: BLE001
                logger.debug("closing client failed: %s", e)

    def manifest_entry(self) -> dict[str, Any]:
        """This spec's part of a manifest: target, selection, tools. Secret values never appear (names only)."""
        secrets = self._effective_secrets()
        return {
            "target": self.target,
            "split": self.split,
            "env_name": self.env_name,
            "num_tasks": self.num_tasks,
            "indices": self.indices,
            "where": self.where,
            "include_metadata": self.include_metadata,
            "tools": [t.name for t in self.tool_specs],
            "secret_names": sorted(secrets or {}),
        }

    # ── sharing and derived copies (used by MixtureSpec) ──────────────

    _CACHES = ("episode_class", "environment_factory", "reward_funcs", "callbacks", "train_dataset")

    def _copy(self, **changes: Any) -> OpenRewardSpec:
        new = object.__new__(type(self))
        new.__dict__.update({k: v for k, v in self.__dict__.items() if k not in self._CACHES})
        new.__dict__.update(changes)
        new._client = None
        new._sdk = None
        new._connection_owner = self
        _open_specs.add(new)
        return new

    def _member_copy(self, name: str) -> OpenRewardSpec:
        """A copy named after a mixture member: own episode class and reward function, shared connection."""
        return self._copy(name=name)

    def _eval_copy(
        self, *, split: str | None, indices: Sequence[int] | None, num_tasks: int | None
    ) -> OpenRewardSpec:
        """A copy selecting the evaluation tasks (another split or held-out indices)."""
        changes: dict[str, Any] = {"split": split or self.split}
        if indices is not None or num_tasks is not None or changes["split"] != self.split:
            # Another split: the training selection means nothing there (its whole split, unless told).
            changes.update(indices=list(indices) if indices is not None else None, num_tasks=num_tasks)
        new = self._copy(**changes)
        new.__dict__.pop("task_specs", None)
        return new

    def _connection_key(self) -> tuple:
        return (self.target, self.env_name, self.local_serve, self.call_timeout_s, self.ping_interval_s)

    def _share_connection(self, owner: OpenRewardSpec) -> None:
        """Use `owner`'s connection, and its tool surface when both discover tools the same way."""
        self._connection_owner = owner
        same_surface = (owner.split, owner.discover_task_tools, owner.task_tools_discovery_index) == (
            self.split,
            self.discover_task_tools,
            self.task_tools_discovery_index,
        )
        if same_surface and self.indices is None and owner.indices is None:
            self._tools_owner = owner

    # ── internals ─────────────────────────────────────────────────────

    def _effective_secrets(self) -> dict[str, str] | None:
        """TRL's rule: catalog targets forward the API key as the `api_key` secret unless secrets are given."""
        if self._secrets is not None or self._target.kind != "catalog":
            return self._secrets
        key = self._api_key or os.environ.get("OPENREWARD_API_KEY")
        return {"api_key": key} if key else None

    async def _get_client(self) -> ORSClient:
        owner = self.__dict__.get("_connection_owner")
        if owner is not None:
            return await owner._get_client()
        if self._client is None:
            _register_exit_hook()
            if self._target.kind in ("local", "module"):
                from ormix.local.server.shared import server_for

                server = await anyio.to_thread.run_sync(
                    lambda: server_for(self.target, mode=self.local_serve)
                )
                url, env_name = server.url, self.env_name or server.env_names[0]
            else:
                url, env_name = self.target, self.env_name
            api_key = self._api_key or (
                os.environ.get("OPENREWARD_API_KEY") if self._target.kind == "catalog" else None
            )
            # The client keeps at most this much of one tool output (bounded memory under a 50 MB answer);
            # 8x: the model sees `max_output_chars` of text even when every character is a JSON escape.
            self._client = ORSClient(
                url,
                env_name=env_name,
                api_key=api_key,
                timeout_s=self.call_timeout_s,
                ping_interval_s=self.ping_interval_s,
                max_kept_chars=max(8 * self.max_output_chars, 65_536),
            )
        return self._client

    async def _open_session(self, task_index: int | None, task_spec: dict | None, split: str | None = None):
        client = await self._get_client()
        split = split or self.split
        if self.transport == "sdk":
            if self._sdk is None:
                from ormix.ors.sdk import SdkConnection

                endpoint = client.endpoint
                target = self.target if self._target.kind == "catalog" else endpoint.api_url
                self._sdk = SdkConnection(
                    target, env_name=endpoint.env_name, api_key=self._api_key, timeout_s=self.call_timeout_s
                )
            return await self._sdk.open_session(
                split=None if task_spec is not None else split,
                index=None if task_spec is not None else int(task_index or 0),
                task_spec=task_spec,
                secrets=self._effective_secrets(),
            )
        if task_spec is not None:
            return await client.open_session(task_spec=task_spec, secrets=self._effective_secrets())
        return await client.open_session(
            split=split, index=int(task_index or 0), secrets=self._effective_secrets()
        )

    async def _select_tasks(self) -> list[tuple[int, dict[str, Any]]]:
        client = await self._get_client()
        if self.where:
            all_tasks = await self._all_tasks(client)
            chosen = [(i, t) for i, t in enumerate(all_tasks) if matches_where(t, self.where)]
            if self.indices is not None:
                wanted = set(self.indices)
                chosen = [(i, t) for i, t in chosen if i in wanted]
            elif self.num_tasks is not None:
                chosen = chosen[: self.num_tasks]
            if not chosen:
                raise SpecError(
                    f"{self.name}: no task of split {self.split!r} matches where={self.where!r}. "
                    "Check the metadata keys and values (`ormix inspect` lists them)."
                )
            return chosen
        from ormix.ors import errors

        if self.indices is not None:
            indexes = list(self.indices)
            specs = await client.get_tasks(self.split, indexes)
        else:
            total = await client.num_tasks(self.split)
            indexes = list(range(total if self.num_tasks is None else min(self.num_tasks, total)))
            try:
                # One round trip for a contiguous range; big environments serve only `task` (400 here).
                specs = list(await client.task_range(self.split, 0, len(indexes))) if indexes else []
                if len(specs) != len(indexes):
                    raise errors.ServerError(
                        "task_range returned a different number of tasks", status_code=200
                    )
            except errors.ORSError:
                specs = await client.get_tasks(self.split, indexes)
        return [(i, s if isinstance(s, dict) else {}) for i, s in zip(indexes, specs, strict=True)]

    async def _all_tasks(self, client: ORSClient) -> list[dict[str, Any]]:
        from ormix.ors import errors

        try:
            return list(await client.tasks(self.split))
        except errors.ORSError:
            # Big environments serve only num_tasks + task (no list_tasks).
            total = await client.num_tasks(self.split)
            return list(await client.get_tasks(self.split, list(range(total))))

    def _probe_indices(self, total: int, first_selected: int | None = None) -> list[int]:
        if self.task_tools_discovery_index is not None:
            probes = [self.task_tools_discovery_index]
        elif self.indices is not None:
            probes = sorted(set(self.indices))
        elif first_selected is not None:
            # With a filter, task 0 may not be one this spec trains on: probe one that is.
            probes = [first_selected]
        else:
            probes = [0]
        bad = [i for i in probes if not 0 <= i < total]
        if bad:
            logger.warning(
                "ormix %s: task tool probe index(es) %s out of range for split=%r (num_tasks=%s); "
                "ignoring them.",
                self.name,
                bad,
                self.split,
                total,
            )
        return [i for i in probes if 0 <= i < total]

    async def _discover_tools(self) -> list[ToolSpec]:
        from ormix.ors import errors

        client = await self._get_client()
        shared = list(await client.tools())
        if not self.discover_task_tools:
            return shared
        try:
            total = await client.num_tasks(self.split)
        except errors.ORSError as e:
            logger.warning("ormix %s: num_tasks failed (%s); binding shared tools only.", self.name, e)
            return shared
        first_selected = None
        if self.where:
            if "task_specs" not in self.__dict__:  # cached_property's slot; we are on the loop already
                self.__dict__["task_specs"] = await self._select_tasks()
            first_selected = self.__dict__["task_specs"][0][0]
        probes = self._probe_indices(total, first_selected)
        if not probes:
            return shared
        found: dict[int, list[ToolSpec]] = {}

        async def probe(index: int) -> None:
            try:
                async with client.session(
                    split=self.split, index=index, secrets=self._effective_secrets()
                ) as s:
                    found[index] = list(await s.tools())
            except errors.ORSError as e:
                logger.warning(
                    "ormix %s: task tool probe failed for task_index=%s (%s); skipping it.",
                    self.name,
                    index,
                    e,
                )

        limiter = anyio.CapacityLimiter(8)

        async def limited(index: int) -> None:
            async with limiter:
                await probe(index)

        async with anyio.create_task_group() as tg:
            for index in probes:
                tg.start_soon(limited, index)
        if not found:
            logger.warning("ormix %s: every task tool probe failed; binding shared tools only.", self.name)
            return shared
        merged, conflicts = merge_tool_specs([found[i] for i in sorted(found)])
        for conflict in conflicts:
            logger.warning("ormix %s: %s", self.name, conflict)
        return [s if isinstance(s, ToolSpec) else ToolSpec.model_validate(s) for s in merged]


def make_reward_func(
    name: str, config: EpisodeConfig, *, scale: float = 1.0, unscored_reward: float | None = None
) -> Callable[..., list[float | None]]:
    """An outcome-only reward function for the episodes of one spec (or mixture member), named `name`.

    Other members' rollouts get `None`; an infrastructure error is always `None`. Each call also logs the
    member's telemetry (`ormix/<name>/...` through TRL's `log_metric`) and appends its rollout records
    when a `TelemetryCallback` is training (see `ormix.telemetry`). When the config says so, each scored
    rollout's session is closed right after its reward is read.
    """
    from ormix.telemetry import observe_batch

    def reward(
        environments: Sequence[Any] | None = None,
        prompts: Sequence[Any] | None = None,
        trainer_state: Any = None,
        log_metric: Callable[[str, float], None] | None = None,
        **_: Any,
    ) -> list[float | None]:
        environments = list(environments or [])
        values: list[float | None] = []
        mine: list[Episode] = []
        for env in environments:
            # A RoutingEnvironment answers for the episode of its active member.
            env = getattr(env, "episode", env)
            if env is None or getattr(type(env), "_config", None) is not config:
                values.append(None)
                continue
            values.append(training_reward(env.outcome, scale=scale, unscored_reward=unscored_reward))
            mine.append(env)
        observe_batch(
            name,
            config,
            environments,
            values,
            prompts=prompts,
            log_metric=log_metric,
            trainer_state=trainer_state,
        )
        for env in mine:
            env.scored = True
            if config.close_after_scoring:
                env._close()
        return values

    reward.__name__ = name
    reward.__qualname__ = name
    return reward


def rows_to_dataset(rows: list[dict[str, Any]]):
    """Rows → `datasets.Dataset`; a metadata column whose values Arrow cannot unify is stored as JSON text."""
    import json

    from datasets import Dataset

    columns: dict[str, list[Any]] = {}
    keys: list[str] = []
    for row in rows:
        for key in row:
            if key not in columns:
                columns[key] = []
                keys.append(key)
    for key in keys:
        columns[key] = [row.get(key) for row in rows]
    try:
        return Dataset.from_dict(columns)
    except Exception:  # noqa: BLE001 - pyarrow raises several types for mixed columns
        pass
    import pyarrow as pa

    for key in keys:
        if key in RESERVED_COLUMNS:
            continue
        try:
            pa.array(columns[key])
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            columns[key] = [
                None if v is None else json.dumps(v, sort_keys=True, default=str) for v in columns[key]
            ]
    return Dataset.from_dict(columns)


def _close_open_specs() -> None:
    # close(), not only close_sessions(): the client also closes sessions whose episodes are already gone
    # (episodes are tracked weakly), which a remote server would otherwise keep until its reaper runs.
    for spec in list(_open_specs):
        try:
            spec.close()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


_exit_hook_registered = False


def _register_exit_hook() -> None:
    """Close every spec at exit, ahead of the local servers' own shutdown (registered later, runs earlier)."""
    global _exit_hook_registered
    if not _exit_hook_registered:
        from ormix.local.server.serving import at_exit_early

        at_exit_early(_close_open_specs)
        _exit_hook_registered = True
