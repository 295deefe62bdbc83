"""`Episode`: the per-rollout adapter TRL's tool loop drives, for one ORS environment.

TRL builds one instance per rollout slot, calls `reset(**row)` before generation and then the tool
methods the model asks for, on plain threads. Each call crosses into the async ORS client through the
process-wide portal (`ormix.ors._bridge`). Tool methods are bound per spec onto a fresh subclass
(`make_episode_class`), so two specs never share bound methods.

Nothing here raises into TRL's loop for an infrastructure fault: a failed session open, a dead session,
a transport failure or a deadline is recorded, reported to the model as a short error, and makes the
rollout's outcome `error` (reward `None`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

import anyio

from ormix._errors import OrmixRuntimeError
from ormix.ors import _errors as ors_errors
from ormix.ors._bridge import call_soon, run_sync
from ormix.rollout._batch import row_key, row_task
from ormix.rollout._outcome import Outcome, classify_outcome
from ormix.tools import BindingReport, bind_tools

logger = logging.getLogger(__name__)


@dataclass
class CallRecord:
    """One tool call of a rollout: what was called, how long it took, and how it ended.

    `output_chars` is the full size of the tool's text output (also when the model saw a truncated
    head: `truncated`). `error` is `None` for a successful call, else a kind: `rejected:<reason>` (the server
    refused the arguments or the tool), `tool_failed` (the environment raised), `wrong_env` (namespaced
    routing), or an infrastructure kind (`transport`, `session_died`, `deadline`, `session_open`, `straggler`:
    abandoned by the round's `ormix.rollout._stragglers` rule). `detail` is the cause of a failed call; of a
    successful one, the blocks the model was not shown (it reads text only: images...), if any.
    """

    tool: str
    latency_ms: float
    error: str | None = None
    reward: float | None = None
    finished: bool = False
    output_chars: int = 0
    detail: str | None = None
    truncated: bool = False


@dataclass
class EpisodeConfig:
    """What every episode of one spec shares: how to open a session and how to behave.

    `open_session` is an async callable `(task_index, task_spec, split) -> Session`; `secrets` never leave it.
    `token` identifies the spec's episodes (its reward function scores exactly the episodes carrying it).
    `max_output_chars` is the most characters of one tool result the model sees (the full size is recorded).
    """

    member: str
    token: str
    open_session: Callable[..., Any]
    max_output_chars: int
    open_retries: int = 0
    #: The split the spec's tasks come from (a row naming another split, an eval row, overrides it).
    split: str | None = None
    #: Sessions of this spec being opened or running a tool call at once (None: no bound).
    max_concurrent_sessions: int | None = None
    #: When a tool round stops waiting for this spec's slowest calls (a `StragglerConfig`; None: never).
    stragglers: Any = None
    live: weakref.WeakSet = field(default_factory=weakref.WeakSet, repr=False)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _parked: dict[tuple[Any, ...], deque[_Opened]] = field(default_factory=dict, repr=False)
    _limiter: Any = field(default=None, repr=False)

    def limiter(self) -> Any:
        """The bound on this spec's opens and calls in flight (an anyio limiter; on the portal's loop)."""
        if self._limiter is None:
            total = self.max_concurrent_sessions
            self._limiter = anyio.CapacityLimiter(total) if total else contextlib.nullcontext()
        return self._limiter

    async def open_ahead(self, row: Mapping[str, Any]) -> None:
        """Open the session `row` asks for and park it until an episode's `reset(**row)` takes it."""
        self.park(row, await self.open_for(row))

    async def open_for(self, row: Mapping[str, Any]) -> _Opened:
        """Open the session `row` asks for (with this spec's retries); a failed open is returned, not
        raised."""
        return await _open(self, row)

    def park(self, row: Mapping[str, Any], opened: _Opened) -> None:
        """Park a session opened for `row` until an episode's `reset(**row)` takes it."""
        with self.lock:
            self._parked.setdefault(row_key(row), deque()).append(opened)

    def take_parked(self, row: Mapping[str, Any]) -> _Opened | None:
        """The session parked for this row, if any (first parked, first taken)."""
        with self.lock:
            queue = self._parked.get(row_key(row))
            return queue.popleft() if queue else None

    def discard_parked(self) -> int:
        """Close the parked sessions nobody took; returns how many were closed (failed opens are dropped,
        not counted: they hold no session)."""
        with self.lock:
            sessions = [o.session for queue in self._parked.values() for o in queue if o.session is not None]
            self._parked.clear()
        all_at_once([session.close for session in sessions])
        return len(sessions)

    def close_all(self) -> int:
        """Close every session still open by an episode of this spec; returns how many were closed."""
        with self.lock:
            episodes = list(self.live)
        open_ = [ep for ep in episodes if ep.session_id is not None]
        for ep in open_:
            close_episode(ep)
        return len(open_)


_INFRA_ERRORS: tuple[tuple[type[BaseException], str], ...] = (
    (ors_errors.SessionOpenError, "session_open"),
    (ors_errors.SessionDeadError, "session_died"),
    (ors_errors.DeadlineExceeded, "deadline"),
    (ors_errors.TransportError, "transport"),
    (ors_errors.ServerError, "transport"),
)


def infra_error_kind(exc: BaseException) -> str | None:
    """The outcome error kind of an infrastructure exception, or `None` if it is not one."""
    return next((kind for cls, kind in _INFRA_ERRORS if isinstance(exc, cls)), None)


class Episode:
    """One rollout's view of one ORS environment (TRL's `environment_factory` product).

    Attributes read by reward functions and telemetry:
        reward: last non-null reward (`None` if none came).
        rewards: per-call rewards in call order.
        metadata: per-call `metadata` dicts.
        finished: a tool returned `finished: true`.
        last_output: text of the most recent tool result.
        outcome: `Outcome` (scored / unscored / error).
        calls: `CallRecord` per tool call.
        task_index, split: the task of the last `reset` (the split is the row's when it names one, else
            the spec's).
        observation: the text the last `reset` returned (the task's prompt, as the model sees it).
        server: the URL of the server the session is on, for a member on several servers (else `None`).
        group_status, group_reward, group_metadata, group_error: the rollout's group scoring, when its member
            scores groups (`ormix.rollout._group_scorer`; `None` otherwise).

    Example:
        >>> from ormix import OpenRewardSpec
        >>> spec = OpenRewardSpec("local:echo", num_tasks=2, local_serve="thread")
        >>> ep = spec.environment_factory()
        >>> ep.reset(task_index=0)
        "Call the echo tool with the word 'apple'."
        >>> ep.echo(text="apple"), ep.reward, ep.outcome.kind
        ('apple', 1.0, 'scored')
        >>> close_episode(ep)                                # TRL never closes its environments
    """

    _config: ClassVar[EpisodeConfig]
    #: What the tool binding did (bindings with their wire names, renames, skips) and the specs it bound.
    binding: ClassVar[BindingReport]
    tool_specs: ClassVar[list[Any]]

    # Per-episode state, reset by every `reset` (see `_clear`).
    reward: float | None
    rewards: list[float | None]
    metadata: list[dict[str, Any] | None]
    finished: bool
    last_output: str
    calls: list[CallRecord]
    error_kind: str | None
    error: str | None
    open_ms: float | None
    #: Of `open_ms`, the time the open waited for a platform backend that was still starting.
    starting_ms: float | None
    open_retries: int
    member: str
    task_index: int | None
    split: str | None
    observation: str
    server: str | None
    group_status: str | None
    group_reward: float | None
    group_metadata: dict[str, Any] | None
    group_error: str | None

    def __init__(self) -> None:
        self._session: Any = None
        self._round: Any = None  # a ToolRound while a trainer runs a batch's tool rounds together
        self._scope: Any = None  # the cancel scope of the call in flight (a straggler cut cancels it)
        self._cut = False
        self._clear()
        with self._config.lock:
            self._config.live.add(self)

    # ── TRL contract ──────────────────────────────────────────────────

    def reset(self, **row: Any) -> str:
        """Open a fresh session for this row's task and return the task's prompt text.

        Accepts the whole dataset row (TRL passes it); reads `task_index` (or `task_spec`).
        """
        self._close()
        self._clear()
        self.task_index = row.get("task_index")
        self.split = row_task(row)[2] or self._config.split
        # A session a trainer opened ahead for this row (ormix.rollout._batch), else one opened now.
        opened = self._config.take_parked(row) or run_sync(_open, self._config, row)
        self.open_ms, self.open_retries = opened.open_ms, opened.retries
        self.starting_ms = opened.starting_ms
        if opened.error is not None:
            kind = infra_error_kind(opened.error) or "session_open"
            # Anything that stops the session from starting is a failed open, whatever the transport said.
            self._record_infra("session_open" if kind != "deadline" else "deadline", opened.error)
            self.observation = (
                f"[ormix] The environment {self.member!r} could not start this task. Tool calls will fail."
            )
            return self.observation
        self._session = opened.session
        # The server it lives on, for a member on several servers (`ormix.ors.PooledSession`), else None.
        self.server = getattr(opened.session, "server", None)
        self.observation = opened.prompt
        return opened.prompt

    def _call_tool(self, wire_name: str, arguments: dict[str, Any]) -> str:
        """Call one ORS tool by its wire name and update the episode state; returns text for the model.

        The dispatch target of every bound tool method (`ormix.tools._binding`); runs `_acall_tool` on the
        ORS portal, unless a `ToolRound` already ran it with the rest of its round.
        """
        if self._round is not None:
            run = functools.partial(run_sync, self._acall_tool, wire_name, arguments)
            return self._round.intercept(self, ("call", wire_name, arguments), run)
        return run_sync(self._acall_tool, wire_name, arguments)

    async def _acall_tool(self, wire_name: str, arguments: dict[str, Any]) -> str:
        t0 = time.perf_counter()
        if self._cut:
            raise failed_call(self, wire_name, "straggler", self.error or "cut", _MODEL_MESSAGES["straggler"])
        if self._session is None:
            reason = self.error or "no session: reset() was not called or the session could not open"
            kind = self.error_kind or "session_open"
            # The open's error carries operator advice and the session id: the record keeps it, the model
            # gets its kind's fixed sentence (as `model_message` gives every infrastructure failure).
            message = _MODEL_MESSAGES.get(kind, reason) if self.error else reason
            raise failed_call(self, wire_name, kind, reason, message)
        try:
            with anyio.CancelScope() as scope:
                # Set and read on the portal's loop only, as `cut_straggler`'s cancel is: no cut is missed.
                self._scope = scope
                if self._cut:
                    scope.cancel()
                async with self._config.limiter():
                    result = await self._session.call(wire_name, arguments)
            self._scope = None
            if scope.cancelled_caught:
                latency = (time.perf_counter() - t0) * 1000
                detail = self.error or "cut as a straggler"
                raise failed_call(self, wire_name, "straggler", detail, _MODEL_MESSAGES["straggler"], latency)
        except ors_errors.ToolRejected as e:
            raise self._tool_error(wire_name, t0, f"rejected:{e.reason or 'unknown'}", e) from None
        except ors_errors.ToolFailed as e:
            raise self._tool_error(wire_name, t0, "tool_failed", e) from None
        except ors_errors.ORSError as e:
            kind = infra_error_kind(e) or "transport"
            self._record_infra(kind, e)
            raise self._tool_error(wire_name, t0, kind, e) from None
        except ToolCallError:
            raise
        except Exception as e:  # noqa: BLE001 - never into TRL's loop (Ctrl-C and cancellation still pass)
            # Not an ORS error (a bug, arguments the client could not send): the call did not happen, and
            # the rollout must not look scored or unscored for it.
            unexpected = _unexpected(e)
            self._record_infra("transport", unexpected)
            raise self._tool_error(wire_name, t0, "transport", unexpected) from None
        latency = (time.perf_counter() - t0) * 1000
        dropped = result.dropped()
        text = result.text or (_not_shown(dropped) if dropped else "(no output)")
        # The client may already have kept only the head of a huge output (bounded memory): its full
        # size is what the model and the record are told.
        clipped = bool(getattr(result, "truncated", False))
        full = max(len(text), getattr(result, "full_chars", None) or 0) if clipped else len(text)
        truncated = clipped or full > self._config.max_output_chars
        if truncated:
            keep = min(self._config.max_output_chars, len(text))
            text = text[:keep] + f"\n[ormix: output truncated, {keep} of {full} characters shown]"
        reward = None if result.reward is None else float(result.reward)
        self.rewards.append(reward)
        if reward is not None:
            self.reward = reward
        self.metadata.append(result.metadata if isinstance(result.metadata, dict) else None)
        self.finished = self.finished or bool(result.finished)
        self.last_output = text
        self.calls.append(
            CallRecord(
                wire_name,
                latency,
                reward=reward,
                finished=bool(result.finished),
                output_chars=full,
                truncated=truncated,
                detail=_not_shown(dropped) if dropped else None,
            )
        )
        return text

    # ── state ─────────────────────────────────────────────────────────

    @property
    def outcome(self) -> Outcome:
        """Scored / unscored / error, from the rewards seen and the first infrastructure error."""
        return classify_outcome(self.rewards, error_kind=self.error_kind, error=self.error)

    @property
    def session_id(self) -> str | None:
        """The id of the open session, if any."""
        return None if self._session is None else self._session.id

    def _clear(self) -> None:
        self.reward = None
        self.rewards = []
        self.metadata = []
        self.finished = False
        self.last_output = ""
        self.calls = []
        self.error_kind = None
        self.error = None
        self.open_ms = None
        self.starting_ms = None
        self.open_retries = 0
        self.member = self._config.member
        self.task_index = None
        self.split = None
        self.observation = ""
        self.server = None
        self.group_status = None
        self.group_reward = None
        self.group_metadata = None
        self.group_error = None
        self._cut = False

    def _record_infra(self, kind: str, exc: BaseException) -> None:
        if self.error_kind is None:
            self.error_kind = kind
            self.error = _short(exc)

    def _tool_error(self, wire_name: str, t0: float, kind: str, exc: BaseException) -> ToolCallError:
        latency = (time.perf_counter() - t0) * 1000
        return failed_call(self, wire_name, kind, _short(exc), model_message(kind, exc), latency)

    # Closing is part of the episode protocol (`close_episode` / `aclose_episode`), not a public method: TRL
    # exposes every public method as a tool to the model.
    def _close(self) -> None:
        if self._session is not None:
            run_sync(self._aclose)

    async def _aclose(self) -> None:
        session, self._session = self._session, None
        if session is None:
            return
        try:
            await session.close()
        except Exception as e:  # noqa: BLE001 - closing must never raise into TRL
            logger.debug("closing session %s failed: %s", getattr(session, "id", "?"), e)

    @property
    def token(self) -> str:
        """The spec's token (see `EpisodeConfig.token`): its reward function scores this episode."""
        return self._config.token

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} member={self.member!r} task_index={self.task_index} "
            f"session={self.session_id} outcome={self.outcome.kind}>"
        )


#: Names a tool may not take on an episode (it is bound under another name): the per-rollout state, whose
#: instance attribute would hide the method from TRL, and `episode`, which reward functions read
#: (`ormix.rollout._rewards.episode_of`). Methods and properties are reserved by `bind_tools` itself.
EPISODE_STATE = (*Episode.__annotations__, "episode")


def close_episode(environment: Any) -> None:
    """Close the session(s) of an `Episode` or `RoutingEnvironment`, if any (idempotent, never raises)."""
    if environment is not None:
        environment._close()


def open_session_of(episode: Any) -> Any:
    """The session an episode holds, while it is open and alive (else `None`): what a group is scored on
    (`ormix.rollout._group_scorer`).

    Example:
        >>> class Closed:
        ...     class _session:
        ...         closed = True
        >>> open_session_of(Closed()) is None
        True
    """
    session = getattr(episode, "_session", None)
    if session is None or getattr(session, "closed", False) or getattr(session, "dead", False):
        return None
    return session


def detach_session(episode: Any) -> Any:
    """Take an episode's open session out of it (the episode no longer closes it; the caller does): a
    session that must outlive the episode's next `reset`, as a group waiting to be scored does.

    Example:
        >>> class Unopened:
        ...     _session = None
        >>> detach_session(Unopened()) is None
        True
    """
    held = getattr(episode, "_session", None)
    session = open_session_of(episode)
    episode._session = None
    if held is not None and session is None:
        # Dead (the server forgot it): nobody else would close it, and its client would keep it until the
        # run ends. Closed without waiting: the caller may be on an event loop.
        call_soon(_close_soon, held)
    return session


_closing: set[Any] = set()


def _close_soon(session: Any) -> None:
    # On the portal's loop: a task of its own, kept referenced until it ends.
    task = asyncio.get_running_loop().create_task(session.close())
    _closing.add(task)
    task.add_done_callback(_closing.discard)


def close_episodes(episodes: Sequence[Episode]) -> None:
    """Close these episodes' sessions all at once (an error closing one is logged, never raised)."""
    all_at_once([episode._aclose for episode in episodes])


def call_tool(episode: Episode, wire_name: str, arguments: dict[str, Any]) -> str:
    """Call one tool of an episode by its wire name, as every bound tool method does; text for the model."""
    return episode._call_tool(wire_name, arguments)


def failed_call(
    episode: Episode, tool: str, kind: str, detail: str, message: str, latency_ms: float = 0.0
) -> ToolCallError:
    """Record a tool call of `episode` that failed (`kind`, the cause in `detail`) and return the error to
    raise into the trainer's tool loop: `message` is what the model reads."""
    episode.calls.append(CallRecord(tool, latency_ms, error=kind, detail=detail))
    episode.rewards.append(None)
    episode.metadata.append(None)
    episode.last_output = message
    return ToolCallError(message)


class ToolCallError(OrmixRuntimeError):
    """A tool call that failed, raised into the trainer's tool loop: the message is what the model reads.

    TRL turns an exception from a tool into ``{"error": str(e)}`` for the model and counts it in
    ``tools/failure_frequency``, so raising (rather than returning the text) keeps TRL's own metric truthful.
    The episode has already recorded the failure (`CallRecord.error`) and, for an infrastructure failure,
    its outcome.
    """


@dataclass
class _Opened:
    """A session opened for a row (or why it could not be), with what it took."""

    session: Any = None
    prompt: str = ""
    error: ors_errors.ORSError | None = None
    retries: int = 0
    open_ms: float = 0.0
    starting_ms: float = 0.0


async def _open(config: EpisodeConfig, row: Mapping[str, Any]) -> _Opened:
    """Open the session of a row's task and read its prompt, retrying a failed open `open_retries` times."""
    task_index, task_spec, split = row_task(row)  # split: None for the spec's own
    t0 = time.perf_counter()
    attempt = 0
    async with config.limiter():
        while True:
            session = None
            try:
                session = await config.open_session(task_index, task_spec, split)
                prompt = await session.prompt_text()
                open_ms = (time.perf_counter() - t0) * 1000
                starting = float(getattr(getattr(session, "timings", None), "starting_ms", 0.0) or 0.0)
                return _Opened(session, prompt, retries=attempt, open_ms=open_ms, starting_ms=starting)
            except ors_errors.ORSError as e:
                if session is not None:
                    await session.close()
                # Worth another open: the environment or the link failed, not the deadline
                if attempt >= config.open_retries or infra_error_kind(e) in (None, "deadline"):
                    open_ms = (time.perf_counter() - t0) * 1000
                    # A backend that never started kept the whole open waiting.
                    starting = open_ms if getattr(e, "detail", None) == "backend starting" else 0.0
                    return _Opened(error=e, retries=attempt, open_ms=open_ms, starting_ms=starting)
                attempt += 1
            except Exception as e:  # noqa: BLE001 - recorded as a failed open, never raised into TRL
                # Not an ORS error (a bug, a task spec the client could not send): not worth another open.
                if session is not None:
                    await session.close()
                open_ms = (time.perf_counter() - t0) * 1000
                return _Opened(error=_unexpected(e), retries=attempt, open_ms=open_ms)
            except BaseException:
                if session is not None:
                    with anyio.CancelScope(shield=True):
                        await session.close()
                raise


def _not_shown(dropped: Mapping[str, int]) -> str:
    """What the model is told of the blocks it does not see (it reads text only).

    Example:
        >>> _not_shown({"image": 1})
        '[ormix: the tool returned 1 image block, which is not shown]'
        >>> _not_shown({"image": 2, "audio": 1})
        '[ormix: the tool returned 2 image blocks and 1 audio block, which are not shown]'
    """
    parts = [f"{n} {kind} block{'s' if n != 1 else ''}" for kind, n in dropped.items()]
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    verb = "is" if sum(dropped.values()) == 1 else "are"
    return f"[ormix: the tool returned {listed}, which {verb} not shown]"


def _unexpected(exc: Exception) -> ors_errors.ORSError:
    """An exception that is not the ORS client's, as an ORS error naming it (`infra_error_kind` gives it no
    kind: the caller says which its failure is).

    Example:
        >>> str(_unexpected(TypeError("Object of type set is not JSON serializable")))
        'unexpected TypeError: Object of type set is not JSON serializable'
    """
    return ors_errors.ORSError(f"unexpected {type(exc).__name__}: {exc}")


def all_at_once(closers: Sequence[Callable[[], Coroutine[Any, Any, Any]]]) -> None:
    """Run these coroutine functions (closers) concurrently on the ORS portal and wait for all of them; one
    that raises is logged and does not stop the others (closing must never raise into the trainer)."""

    async def guarded(close: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        try:
            await close()
        except Exception as e:  # noqa: BLE001 - see the docstring
            logger.debug("ormix: closing failed: %s", e)

    async def run() -> None:
        async with anyio.create_task_group() as tg:
            for close in closers:
                tg.start_soon(guarded, close)

    if closers:
        run_sync(run)


def episode_of(environment: Any) -> Episode | None:
    """The `Episode` behind an environment (itself, or a `RoutingEnvironment`'s active one)."""
    return environment if isinstance(environment, Episode) else getattr(environment, "episode", None)


def cut_straggler(environment: Any, why: str) -> Episode | None:
    """Abandon the rollout of `environment` (from any thread): its call in flight is cancelled, it and any
    later call fail as ``straggler``, and its outcome is ``error`` / ``straggler``. The caller closes its
    session (`close_episodes`) once the call has returned. Returns the episode cut, if any."""
    episode = episode_of(environment)
    if episode is None:
        return None
    episode._cut = True
    if episode.error_kind is None:
        episode.error_kind, episode.error = "straggler", why

    def cancel() -> None:
        if episode._scope is not None:
            episode._scope.cancel()

    call_soon(cancel)
    return episode


def set_tool_round(environment: Any, tool_round: Any) -> None:
    """Install (or, with ``None``, remove) a `ToolRound` on an `Episode` or `RoutingEnvironment`."""
    environment._round = tool_round


_MODEL_MESSAGES = {
    "deadline": "the tool did not finish within its time limit.",
    "session_died": "the environment session has ended; no further tool call can succeed.",
    "transport": "the environment could not be reached.",
    "session_open": "the environment could not start this task.",
    "straggler": "the tool took far longer than the rest of its round and was abandoned; this episode ends.",
}


def model_message(kind: str, exc: BaseException) -> str:
    """The short text the model sees for a failed call (the full cause goes to the call record).

    Rejections and tool failures carry the environment's own words (they are about the model's call);
    infrastructure failures get a fixed sentence, so operator advice and ids never enter the transcript.
    """
    if isinstance(exc, ors_errors.ProtocolError):
        return "the environment sent an answer that could not be read."
    if kind in _MODEL_MESSAGES:
        return _MODEL_MESSAGES[kind]
    detail = getattr(exc, "detail", None) or str(exc)
    return _short(Exception(detail), 500)


def _short(exc: BaseException, limit: int = 300) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def make_episode_class(name: str, config: EpisodeConfig, tool_specs: Iterable[Any]) -> type[Episode]:
    """A fresh `Episode` subclass with one method per tool spec bound on it (no exec/eval).

    Example:
        >>> config = EpisodeConfig("echo", token="t", open_session=None, max_output_chars=100)
        >>> specs = [{"name": "echo", "description": "Echo a word.", "input_schema": {"type": "object",
        ...           "properties": {"text": {"type": "string"}}, "required": ["text"]}}]
        >>> cls = make_episode_class("Echo", config, specs)
        >>> cls.__name__, cls.binding.method_names
        ('EchoEpisode', ('echo',))
    """
    specs = list(tool_specs)
    cls = cast(
        "type[Episode]",
        type(f"{name}Episode", (Episode,), {"_config": config, "__module__": __name__, "tool_specs": specs}),
    )
    cls.binding = bind_tools(cls, specs, dispatch="_call_tool", reserved=EPISODE_STATE)
    return cls
