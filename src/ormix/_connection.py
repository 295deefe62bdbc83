"""`Connection`: one ORS server as ormix's specs see it — a client, and what the server already answered.

Every `OpenRewardSpec` drives its sessions through a `Connection`. Specs that name the same server share one
(a mixture's members on one target, a member's eval copy): one client and its connections, one local server
for a `local:`/`module:` target, and the task lists and tool surfaces fetched so far (keyed by what was
asked, so two members with different `where=` filters share the surface but not the selection).

What lives here and nowhere else: how a selection (`split`, `num_tasks` / `indices`, `where`) becomes task
specs (one `task_range` request where the server allows it, else bounded concurrent `task` requests), and
how the tool surface is discovered (shared tools, plus task tools from probe sessions, merged).

Process-wide state: the connections still open, closed at interpreter exit (before the local servers stop).

Example:
    >>> conn = Connection(SpecConfig(target="local:echo"))
    >>> conn
    Connection('local:echo', env_name=None)
    >>> conn.close()
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from ormix._errors import EnvironmentCodeError, SpecError
from ormix.config import SpecConfig
from ormix.ors import Endpoint, ORSClient, ServerPool, ToolSpec
from ormix.ors import _errors as errors
from ormix.ors._bridge import run_sync
from ormix.ors._catalog import TaskDifficulty, required_secrets, task_difficulty
from ormix.tools import merge_tool_specs

#: Secrets every session of a catalog environment gets from the API key (the SDK's
#: `augment_secrets_with_api_key`, which ormix's client applies too): never missing when a key is set.
AUTO_SECRETS = frozenset({"api_key", "OPENREWARD_API_KEY"})


def missing_secrets(required: Sequence[str], given: Mapping[str, Any], *, has_api_key: bool) -> list[str]:
    """The required secret names a member does not give (pure): not in its ``secrets:`` (a ``${VAR}`` one
    whose variable is unset counts as not given), and not sent from the API key (`AUTO_SECRETS`).

    Example:
        >>> from ormix.config import Secret
        >>> given = {"A": Secret.literal("x"), "B": Secret.expand("${UNSET_HERE}", {}, defer_missing=True)}
        >>> missing_secrets(["A", "B", "C", "api_key"], given, has_api_key=True)
        ['B', 'C']
    """
    auto = AUTO_SECRETS if has_api_key else frozenset()
    return [
        name
        for name in dict.fromkeys(required)
        if name not in auto and (given.get(name) is None or bool(getattr(given[name], "missing", ())))
    ]


logger = logging.getLogger(__name__)


def _fewer_tasks(
    name: str, wanted: int, total: int, split: str, where: Mapping[str, Any] | None = None
) -> None:
    """Say that ``num_tasks`` asked for more tasks than there are (the member trains on all of them)."""
    which = f"match where={dict(where)!r} in split {split!r}" if where else f"are in split {split!r}"
    logger.warning(
        "ormix %s: num_tasks is %d but only %d task(s) %s: using those %d", name, wanted, total, which, total
    )


#: Longest the platform's API may take to say which secrets an environment requires (then: not checked).
_PLATFORM_API_S = 30.0
#: How many probe sessions (task-tool discovery) and `task` requests run at once.
_PROBE_CONCURRENCY = 8

_open: weakref.WeakSet[Connection] = weakref.WeakSet()
_exiting = threading.Event()  # set by the exit hook: no connection opens a client after it


def matches_where(task: Mapping[str, Any], where: Mapping[str, Any]) -> bool:
    """Whether a task spec passes a metadata filter (pure).

    Each key must match: a list of allowed values matches when the task's value is one of them (or, for a
    list-valued field such as `tags`, when any element is); a scalar must be equal.

    Example:
        >>> task = {"difficulty": "Easy", "tags": ["git"]}
        >>> matches_where(task, {"difficulty": ["Easy", "Medium"], "tags": "git"})
        True
        >>> matches_where({"difficulty": "Hard"}, {"difficulty": ["Easy"]})
        False
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


def connection_key(config: SpecConfig) -> tuple[Any, ...]:
    """What makes two specs able to share a `Connection`: same server, same client settings, same key.

    Example:
        >>> a, b = SpecConfig(target="local:seta"), SpecConfig(target="local:seta", num_tasks=3)
        >>> connection_key(a) == connection_key(b)
        True
    """
    return (
        config.target,
        tuple(config.targets or ()),
        config.env_name,
        config.local_serve,
        config.call_timeout_s,
        config.resolved_open_timeout_s,
        config.ping_interval_s,
        # The key's source (a variable reference, or a literal), not its value: reading a deferred secret here
        # would fail for a mixture only being looked at.
        config.api_key.source if config.api_key is not None else config.resolved_api_key_env,
    )


class Connection:
    """A client for one ORS server plus the task lists and tool surfaces it answered (shared by specs).

    Built from the connection-level options of a `SpecConfig` (target, env_name, local_serve, deadlines,
    pings, API key); the selection-level options are passed per request. Everything is lazy: no
    server is contacted until a spec asks for tasks, tools or a session. `close()` closes every session of the
    client and the client; a later request reconnects.

    Example:
        >>> from ormix.ors import run_sync
        >>> conn = Connection(SpecConfig(target="local:echo", local_serve="thread"))  # lazy: nothing served
        >>> [index for index, _ in run_sync(conn.select_tasks, split="train", num_tasks=2)]
        [0, 1]
        >>> conn.close()
    """

    def __init__(self, config: SpecConfig) -> None:
        self.target = config.target
        self.env_name = config.env_name
        self.key = connection_key(config)
        self._config = config
        self._client: ORSClient | ServerPool | None = None
        # (url, env_name) of the local server this connection started: a pickled copy in another process
        # (TRL's AsyncGRPOTrainer worker) talks to the same server instead of starting its own.
        self._served: tuple[str, str] | None = None
        self._tasks: dict[tuple[Any, ...], list[tuple[int, dict[str, Any]]]] = {}
        self._tools: dict[tuple[Any, ...], list[ToolSpec]] = {}
        # One lock per request key, so concurrent members fetch different things at once but never twice.
        self._locks: dict[tuple[Any, ...], anyio.Lock] = {}
        # Concurrent first uses (a mixture reaching its servers ahead, an episode) make one client.
        self._client_lock = anyio.Lock()
        #: Names of the specs (members) using this connection, for what `BackendWatch` shows.
        self.members: set[str] = set()
        # Whose secrets are checked against what the platform requires: name -> its config (`note_secrets`);
        # the config this connection was made from until a spec names itself.
        self._secret_holders: dict[str | None, SpecConfig] = {None: config}
        self._required: list[str] | None = None
        self._secrets_checked = False
        self._difficulty: dict[tuple[Any, ...], list[TaskDifficulty]] = {}

    def __repr__(self) -> str:
        return f"Connection({self.target!r}, env_name={self.env_name!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {
            "config": self._config,
            "served": self._served,
            "tasks": self._tasks,
            "tools": self._tools,
            "secrets_checked": self._secrets_checked,  # a worker process does not ask the platform again
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["config"])  # type: ignore[misc]
        self._served = state["served"]
        self._tasks, self._tools = dict(state["tasks"]), dict(state["tools"])
        self._secrets_checked = bool(state.get("secrets_checked", False))

    # ── required secrets and task difficulty (catalog targets) ────────

    def note_secrets(self, name: str, config: SpecConfig) -> None:
        """Check `config`'s secrets as member `name`'s when the client is made (`check_secrets`)."""
        self._secret_holders.pop(None, None)
        if self._secret_holders.get(name) != config:
            self._secret_holders[name] = config
            self._secrets_checked = False  # checked again (the platform's list is kept) when next asked

    def _catalog_endpoint(self) -> Endpoint:
        return Endpoint.for_catalog(self.target, self.env_name, self._config.resolve_api_key())

    async def required_secrets(self) -> list[str]:
        """The secret names the environment requires (the platform's list, asked once); ``[]`` for a target
        that is not a catalog environment (a self-hosted server declares none)."""
        if self._config.parsed_target.kind != "catalog":
            return []
        async with self._locks.setdefault(("required-secrets",), anyio.Lock()):
            if self._required is None:
                self._required = await required_secrets(self._catalog_endpoint())
            return list(self._required)

    async def check_secrets(self) -> None:
        """Every member on this connection gives every secret its environment requires, else `SpecError`
        naming the member and the secret (one line), before any session opens. Asked of the platform once;
        when it cannot answer, nothing is checked (a warning says so) and the first session tells."""
        if self._secrets_checked or self._config.parsed_target.kind != "catalog":
            return
        try:
            # Bounded: an API host that does not answer must not hold up a run the check cannot help.
            with anyio.fail_after(_PLATFORM_API_S):
                required = await self.required_secrets()
        except (errors.ORSError, TimeoutError) as e:
            logger.warning(
                "ormix %s: could not ask the platform which secrets it requires (%s); not checked",
                self.target,
                e,
            )
            self._secrets_checked = True
            return
        for name, config in sorted(self._secret_holders.items(), key=lambda kv: kv[0] or ""):
            missing = missing_secrets(required, config.secrets, has_api_key=config.has_api_key())
            if missing:
                who = f"member {name!r} ({self.target})" if name else self.target
                first = missing[0]
                unset = [v for m in missing if m in config.secrets for v in config.secrets[m].missing]
                fix = (
                    f"export {unset[0]}=..."
                    if unset
                    else f"add secrets: {{{first}: '${{{first}}}'}} and export it"
                )
                raise SpecError(
                    f"{who}: the environment requires secret(s) {', '.join(missing)}, which its secrets: do "
                    f"not give; {fix}"
                )
        self._secrets_checked = True

    async def task_difficulty(
        self,
        *,
        split: str | None,
        model_name: str | None = None,
        min_model_params: int | None = None,
        max_model_params: int | None = None,
        training_stage: str | None = None,
    ) -> list[TaskDifficulty]:
        """Per-task reward statistics of the rollouts logged on this catalog environment (the platform's
        task difficulty, its variant this connection's ``env_name``), asked once per query; ``[]`` for a
        target that is not a catalog environment (no rollouts are logged there)."""
        if self._config.parsed_target.kind != "catalog":
            return []
        key = (split, model_name, min_model_params, max_model_params, training_stage)
        async with self._locks.setdefault(("difficulty", *key), anyio.Lock()):
            if key not in self._difficulty:
                deadline = self._config.call_timeout_s or _PLATFORM_API_S
                try:
                    with anyio.fail_after(deadline):
                        self._difficulty[key] = await task_difficulty(
                            self._catalog_endpoint(),
                            split=split,
                            model_name=model_name,
                            min_model_params=min_model_params,
                            max_model_params=max_model_params,
                            training_stage=training_stage,
                        )
                except TimeoutError:
                    raise errors.DeadlineExceeded(
                        f"{self.target}: the platform's task difficulty did not answer within {deadline:g} s "
                        "(call_timeout_s); try again, or remove prior: platform from the member's filter",
                        env=self.target,
                    ) from None
            return list(self._difficulty[key])

    # ── the client ────────────────────────────────────────────────────

    async def client(self) -> ORSClient | ServerPool:
        """The ORS client (starting the local server of a `local:`/`module:` target on first use); a
        `ServerPool` over every server of a member with several (`targets`)."""
        if self._client is None:
            async with self._client_lock:
                if self._client is None:
                    client = await self._new_client()
                    if _exiting.is_set():  # the exit hook ran while it was made: it closes nothing new
                        await client.aclose()
                        raise errors.ORSError(
                            f"{self.target}: the process is exiting; no new session is opened"
                        )
                    self._client = client
        return self._client

    async def _new_client(self) -> ORSClient | ServerPool:
        if _exiting.is_set():
            # The exit hook closed this process's connections: a client made now (a rollout thread
            # retrying an open the hook cut) would make platform sessions nothing is left to delete.
            raise errors.ORSError(f"{self.target}: the process is exiting; no new session is opened")
        target = self._config.parsed_target
        if target.kind == "catalog":
            await self.check_secrets()  # before the first session: a missing secret would fail each one
        _register_exit_hook()
        _open.add(self)
        env_name: str | None
        if self._served is not None:
            url, env_name = self._served
        elif target.kind in ("local", "module"):
            from ormix.server._shared import server_for

            server = await anyio.to_thread.run_sync(
                lambda: server_for(self.target, mode=self._config.local_serve)
            )
            url, env_name = server.url, self.env_name or server.env_names[0]
            self._served = (url, env_name)
        else:
            url, env_name = self.target, self.env_name
        api_key = self._config.resolve_api_key()
        endpoint = (
            Endpoint.for_catalog(self.target, env_name, api_key)
            if target.kind == "catalog"
            else Endpoint.for_url(url, env_name, api_key)
        )
        # The client keeps at most this much of one tool output in memory (bounded under a 50 MB
        # answer); 8x: the model still sees `max_output_chars` of text when every character is escaped.
        kept = max(8 * self._config.max_output_chars, 65_536)
        options: dict[str, Any] = {
            "timeout_s": self._config.call_timeout_s,
            "open_timeout_s": self._config.resolved_open_timeout_s,
            "ping_interval_s": self._config.ping_interval_s,
            "max_kept_chars": kept,
        }
        if self._config.targets:
            servers = [Endpoint.for_url(u, env_name, api_key) for u in self._config.targets]
            return ServerPool(servers, **options)
        return ORSClient(endpoint, **options)

    def server_stats(self) -> list[dict[str, Any]]:
        """Per server of a member on several (`targets`): URL, in rotation, sessions held now, opened,
        times taken out; `[]` for one server, or before the first request.

        Example:
            >>> Connection(SpecConfig(target="local:echo")).server_stats()
            []
        """
        return self._client.stats() if isinstance(self._client, ServerPool) else []

    def close(self) -> None:
        """Close every session of this connection's client, then the client (a later use reconnects)."""
        client, self._client = self._client, None
        _open.discard(self)
        if client is not None:
            try:
                run_sync(client.aclose)
            except Exception as e:  # noqa: BLE001 - closing is best effort
                logger.debug("closing the client of %s failed: %s", self.target, e)

    # ── tasks ─────────────────────────────────────────────────────────

    async def select_tasks(
        self,
        *,
        split: str,
        num_tasks: int | None = None,
        indices: Sequence[int] | None = None,
        where: Mapping[str, Any] | None = None,
        label: str = "",
    ) -> list[tuple[int, dict[str, Any]]]:
        """The selected tasks as ``(task_index, task_spec)``, fetched once per selection.

        ``num_tasks``: the first N (that pass ``where``); ``indices``: exactly these; neither: the whole
        split.
        Raises `SpecError` when ``where`` matches no task (``label`` names the spec in the message).
        """
        key = (split, num_tasks, tuple(indices) if indices is not None else None, _frozen(where or {}))
        async with self._locks.setdefault(("tasks", *key), anyio.Lock()):
            if key not in self._tasks:
                try:
                    self._tasks[key] = await self._fetch_tasks(split, num_tasks, indices, where or {}, label)
                except errors.ServerError as e:
                    raise self.own_code_error(e, split, label) from None
            return list(self._tasks[key])

    def own_code_error(self, e: errors.ServerError, split: str, label: str = "") -> Exception:
        """A task listing that failed inside the user's own `module:Class` (the server answered 500 with its
        exception): an `EnvironmentCodeError` naming list_tasks and the exception; anything else unchanged."""
        if e.status_code != 500 or self._config.parsed_target.kind != "module":
            return e
        module, _, cls = self.target.partition(":")
        return EnvironmentCodeError(
            f"{label or self.target}: listing the tasks of split {split!r} raised {e.detail or e}: that is "
            f"your {cls}.list_tasks (or num_tasks / get_task); "
            f'`python -c "from {module} import {cls}; {cls}.list_tasks({split!r})"` shows its traceback'
        )

    async def _fetch_tasks(
        self,
        split: str,
        num_tasks: int | None,
        indices: Sequence[int] | None,
        where: Mapping[str, Any],
        label: str,
    ) -> list[tuple[int, dict[str, Any]]]:
        client = await self.client()
        if where:
            try:
                all_tasks = list(await client.tasks(split))
            except errors.ORSError:
                # Big environments serve only num_tasks + task (no list_tasks).
                all_tasks = await client.get_tasks(split, list(range(await client.num_tasks(split))))
            chosen = [(i, t) for i, t in enumerate(all_tasks) if matches_where(t, where)]
            if indices is not None:
                wanted = set(indices)
                chosen = [(i, t) for i, t in chosen if i in wanted]
            elif num_tasks is not None:
                if num_tasks > len(chosen) > 0:
                    _fewer_tasks(label or self.target, num_tasks, len(chosen), split, where)
                chosen = chosen[:num_tasks]
            if not chosen:
                raise SpecError(
                    f"{label or self.target}: no task of split {split!r} matches where={dict(where)!r}. "
                    "Check the metadata keys and values (`ormix inspect` lists them)."
                )
            return chosen
        if indices is not None:
            wanted_indices = list(indices)
            specs = await client.get_tasks(split, wanted_indices)
        else:
            total = await client.num_tasks(split)
            if num_tasks is not None and num_tasks > total:
                _fewer_tasks(label or self.target, num_tasks, total, split)
            wanted_indices = list(range(total if num_tasks is None else min(num_tasks, total)))
            try:
                # One round trip for a contiguous range; big environments serve only `task` (400 here).
                specs = list(await client.task_range(split, 0, len(wanted_indices))) if wanted_indices else []
                if len(specs) != len(wanted_indices):
                    raise errors.ServerError(
                        "task_range returned a different number of tasks", status_code=200
                    )
            except errors.ORSError:
                specs = await client.get_tasks(split, wanted_indices)
        odd = next((s for s in specs if s is not None and not isinstance(s, dict)), None)
        if odd is not None:
            # Read as an empty task, every session would fail later in the constructor, blamed on it.
            shown = repr(odd)[:40]
            where_from = (
                f"{self.target.partition(':')[2]}.list_tasks"
                if self._config.parsed_target.kind == "module"
                else "the environment's list_tasks"
            )
            raise EnvironmentCodeError(
                f"{label or self.target}: {where_from} returned {type(odd).__name__} items ({shown}), "
                f"not one dict per task of split {split!r}: return each task as a dict (its task_spec); "
                "the constructor gets that dict"
            )
        return [(i, s if isinstance(s, dict) else {}) for i, s in zip(wanted_indices, specs, strict=True)]

    # ── tools ─────────────────────────────────────────────────────────

    async def discover_tools(
        self,
        *,
        split: str,
        discover_task_tools: bool,
        probes: Sequence[int] | None,
        secrets: Mapping[str, str] | None,
        label: str = "",
    ) -> list[ToolSpec]:
        """The tool surface: shared tools, plus (``discover_task_tools``) the task tools of probe sessions.

        ``probes``: task indices to open probe sessions on (``None``: task 0). Indices out of range are
        skipped with a warning; a probe that fails is skipped; conflicting task-tool schemas are merged
        (warned).
        Fetched once per ``(split, discover_task_tools, probes)``.
        """
        key = (split, discover_task_tools, tuple(probes) if probes is not None else None)
        async with self._locks.setdefault(("tools", *key), anyio.Lock()):
            if key not in self._tools:
                self._tools[key] = await self._fetch_tools(split, discover_task_tools, probes, secrets, label)
            return list(self._tools[key])

    async def _fetch_tools(
        self,
        split: str,
        discover_task_tools: bool,
        probes: Sequence[int] | None,
        secrets: Mapping[str, str] | None,
        label: str,
    ) -> list[ToolSpec]:
        client = await self.client()
        shared = list(await client.tools())
        if not discover_task_tools:
            return shared
        name = label or self.target
        try:
            total = await client.num_tasks(split)
        except errors.ORSError as e:
            if isinstance(e, errors.ServerError) and self.own_code_error(e, split, label) is not e:
                raise self.own_code_error(e, split, label) from None
            logger.warning("ormix %s: num_tasks failed (%s); binding shared tools only.", name, e)
            return shared
        wanted = list(probes) if probes is not None else [0]
        bad = [i for i in wanted if not 0 <= i < total]
        if bad:
            logger.warning(
                "ormix %s: task tool probe index(es) %s out of range for split=%r (num_tasks=%s); "
                "ignoring them.",
                name,
                bad,
                split,
                total,
            )
        wanted = [i for i in wanted if 0 <= i < total]
        if not wanted:
            return shared
        found: dict[int, list[ToolSpec]] = {}
        limiter = anyio.CapacityLimiter(_PROBE_CONCURRENCY)

        async def probe(index: int) -> None:
            async with limiter:
                try:
                    async with client.session(split=split, index=index, secrets=dict(secrets or {})) as s:
                        found[index] = list(await s.tools())
                except errors.ORSError as e:
                    logger.warning(
                        "ormix %s: task tool probe failed for task_index=%s (%s); skipping it.",
                        name,
                        index,
                        e,
                    )

        async with anyio.create_task_group() as tg:
            for index in wanted:
                tg.start_soon(probe, index)
        if not found:
            logger.warning("ormix %s: every task tool probe failed; binding shared tools only.", name)
            return shared
        merged, conflicts = merge_tool_specs([found[i] for i in sorted(found)])
        for conflict in conflicts:
            logger.warning("ormix %s: %s", name, conflict)
        return [s if isinstance(s, ToolSpec) else ToolSpec.model_validate(s) for s in merged]


def _frozen(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _frozen(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple, set, frozenset)):
        return tuple(_frozen(v) for v in value)
    return value


@dataclass(frozen=True)
class BackendWait:
    """A connection whose server keeps its requests waiting: a backend still starting, or a rate limit.

    `members` names the specs using it; `starting_s` is how long the longest cold-start wait in progress has
    lasted (None: none), `paused_s` how long its 429 pause still holds.

    Example:
        >>> BackendWait(("seta",), "Eigent/SETA", 40.2, 0.0).line
        'seta: backend starting, 40 s'
    """

    members: tuple[str, ...]
    target: str
    starting_s: float | None
    paused_s: float = 0.0

    @property
    def line(self) -> str:
        """What `ormix train` and `ormix check` print while it lasts."""
        who = ", ".join(self.members) or self.target
        parts = []
        if self.starting_s is not None:
            parts.append(f"backend starting, {self.starting_s:.0f} s")
        if self.paused_s > 0:
            parts.append(f"rate limited (429), resuming in {self.paused_s:.0f} s")
        return f"{who}: {'; '.join(parts)}"


def _gates() -> list[tuple[tuple[str, ...], str, Any]]:
    out: list[tuple[tuple[str, ...], str, Any]] = []
    for conn in list(_open):
        client = conn._client
        if isinstance(client, ServerPool):  # a member on several servers: each server's client has its gate
            out += [
                (tuple(sorted(conn.members)), s.endpoint.session_url, s.client.gate) for s in client.servers
            ]
        elif client is not None:
            out.append((tuple(sorted(conn.members)), conn.target, client.gate))
    return out


def _notice_s() -> float:
    try:
        return max(0.0, float(os.environ.get("ORMIX_WAIT_NOTICE_S", "10")))
    except ValueError:
        return 10.0


class BackendWatch:
    """While open (a context manager), a daemon thread tells `notify` which members wait for their server.

    A wait is announced once it has lasted `first_s` (default: ``ORMIX_WAIT_NOTICE_S``, 10 s), then every
    `every_s` (3 × `first_s`, at least 1 s) while it lasts: ``"seta: backend starting, 40 s"``. A member whose
    opens hit their deadline while the backend was still starting is announced once per such open (see
    `ormix.ors._platform.BackendGate.gave_up`). `ormix train` and `ormix check` print these lines.

    Example:
        >>> lines = []
        >>> with BackendWatch(lines.append, first_s=0.0):
        ...     pass
        >>> lines
        []
    """

    def __init__(
        self,
        notify: Any,
        *,
        first_s: float | None = None,
        every_s: float | None = None,
        poll_s: float = 0.2,
    ) -> None:
        self.notify = notify
        self.first_s = _notice_s() if first_s is None else first_s
        self.every_s = max(1.0, 3 * self.first_s) if every_s is None else every_s
        self.poll_s = poll_s
        self.lines: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last: dict[tuple[str, ...], float] = {}  # members -> the wait length last announced
        self._gave_up: dict[int, int] = {}

    def __enter__(self) -> BackendWatch:
        for _, _, gate in _gates():
            self._gave_up[id(gate)] = gate.gave_up
        self._thread = threading.Thread(target=self._run, daemon=True, name="ormix-backend-watch")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.poll()  # what happened since the last look (a give-up at the very end)

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.poll()
            except Exception as e:  # noqa: BLE001 - a notice must never break a run
                logger.debug("ormix: backend watch failed: %s", e)

    def _say(self, line: str) -> None:
        self.lines.append(line)
        self.notify(line)

    def poll(self) -> None:
        """Look once and announce what is due."""
        for members, target, gate in _gates():
            who = ", ".join(members) or target
            gave_up = gate.gave_up - self._gave_up.get(id(gate), 0)
            if gave_up > 0:
                self._gave_up[id(gate)] = gate.gave_up
                self._say(
                    f"{who}: backend of {target} did not start within the open deadline; "
                    f"{gave_up} open(s) failed (counted as session_open errors)"
                )
            starting = gate.starting_for()
            if starting is None:
                self._last.pop(members, None)
                continue
            last = self._last.get(members)
            if last is not None and starting < last:
                last = None  # a new wait
            if starting >= self.first_s and (last is None or starting - last >= self.every_s):
                self._last[members] = starting
                self._say(BackendWait(members, target, starting, gate.delay()).line)


def close_all_connections() -> None:
    """Close every open connection of this process (a later use reconnects).

    Closing a connection also closes the sessions no episode tracks any more, which a remote server would
    otherwise keep until its reaper runs. At exit (before local servers stop) the same is done for good:
    after it no connection makes a new client.
    """
    for conn in list(_open):
        try:
            conn.close()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


def _close_at_exit() -> None:
    _exiting.set()
    close_all_connections()


@functools.cache
def _register_exit_hook() -> None:
    from ormix.server._serving import at_exit_early

    at_exit_early(_close_at_exit)
