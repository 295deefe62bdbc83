"""`Episode`: the per-rollout adapter TRL's tool loop drives, for one ORS environment.

TRL builds one instance per rollout slot, calls `reset(**row)` before generation and then the tool
methods the model asks for, on plain threads. Each call crosses into the async ORS client through the
process-wide portal (`ormix.ors.bridge`). Tool methods are bound per spec onto a fresh subclass
(`make_episode_class`), so two specs never share bound methods.

Nothing here raises into TRL's loop for an infrastructure fault: a failed session open, a dead session,
a transport failure or a deadline is recorded, reported to the model as a short error, and makes the
rollout's outcome `error` (reward `None`).
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ormix.ors import errors as ors_errors
from ormix.ors.bridge import run_sync
from ormix.rollout.outcome import Outcome, classify_outcome
from ormix.tools import BindingReport, bind_tools

logger = logging.getLogger(__name__)

#: Instance attributes of an episode: a tool with one of these names is bound under another name, or the
#: attribute would hide the method from TRL.
EPISODE_STATE = (
    "reward",
    "rewards",
    "metadata",
    "finished",
    "last_output",
    "calls",
    "error_kind",
    "error",
    "open_ms",
    "open_retries",
    "member",
    "task_index",
    "scored",
    "episode",
    "split",
)

#: Dataset column naming the split of a row's task when it is not the spec's own (eval rows).
SPLIT_COLUMN = "ors_split"

#: What the model sees at most of one tool result; the full size is recorded on the call.
DEFAULT_MAX_OUTPUT_CHARS = 16_384


@dataclass
class CallRecord:
    """One tool call of a rollout: what was called, how long it took, and how it ended.

    `output_chars` is the full size of the tool's text output (also when the model saw a truncated
    head: `truncated`). `error` is `None` for a successful call, else a kind: `rejected:<reason>` (the server refused the
    arguments or the tool), `tool_failed` (the environment raised), `wrong_env` (namespaced routing), or an
    infrastructure kind (`transport`, `session_died`, `deadline`, `session_open`).
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
    """

    member: str
    open_session: Callable[..., Any]
    close_after_scoring: bool = True
    open_retries: int = 0
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS
    live: weakref.WeakSet = field(default_factory=weakref.WeakSet, repr=False)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def close_all(self) -> int:
        """Close every session still open by an episode of this spec; returns how many were closed."""
        with self.lock:
            episodes = list(self.live)
        closed = 0
        for ep in episodes:
            if ep._session is not None:
                ep._close()
                closed += 1
        return closed


_INFRA_ERRORS: tuple[tuple[type[BaseException], str], ...] = (
    (ors_errors.SessionOpenError, "session_open"),
    (ors_errors.SessionDeadError, "session_died"),
    (ors_errors.DeadlineExceeded, "deadline"),
    (ors_errors.TransportError, "transport"),
)


def infra_error_kind(exc: BaseException) -> str | None:
    """The outcome error kind of an infrastructure exception, or `None` if it is not one."""
    for cls, kind in _INFRA_ERRORS:
        if isinstance(exc, cls):
            return kind
    if isinstance(exc, ors_errors.ServerError):
        return "transport"
    return None


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

    Example:
        >>> factory = spec.environment_factory              # doctest: +SKIP
        >>> ep = factory(); ep.reset(task_index=0)           # doctest: +SKIP
        'Call the echo tool with ...'
        >>> ep.echo(text="apple"); ep.reward                 # doctest: +SKIP
    """

    _config: ClassVar[EpisodeConfig]
    _binding: ClassVar[BindingReport]
    _tool_specs: ClassVar[list[Any]]

    def __init__(self) -> None:
        self._session: Any = None
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
        self.member = self._config.member
        self.task_index = row.get("task_index")
        task_spec = row.get("task_spec") if isinstance(row.get("task_spec"), dict) else None
        # Eval rows of another split say so (SPLIT_COLUMN); training rows use the spec's split.
        split = row.get(SPLIT_COLUMN) if isinstance(row.get(SPLIT_COLUMN), str) else None
        t0 = time.perf_counter()
        try:
            self._session, prompt, self.open_retries = run_sync(
                _open_and_prompt,
                self._config.open_session,
                self.task_index,
                task_spec,
                split,
                self._config.open_retries,
            )
        except _OpenFailed as failed:
            e = failed.error
            self.open_retries = failed.retries
            self.open_ms = (time.perf_counter() - t0) * 1000
            kind = infra_error_kind(e) or "session_open"
            # Anything that stops the session from starting is a failed open, whatever the transport said.
            self._record_infra("session_open" if kind != "deadline" else "deadline", e)
            return f"[ormix] The environment {self.member!r} could not start this task. Tool calls will fail."
        self.open_ms = (time.perf_counter() - t0) * 1000
        return prompt

    def _call_tool(self, wire_name: str, arguments: dict[str, Any]) -> str:
        """Call one ORS tool by its wire name and update the episode state; returns text for the model."""
        t0 = time.perf_counter()
        if self._session is None:
            reason = self.error or "no session: reset() was not called or the session could not open"
            self.calls.append(
                CallRecord(wire_name, 0.0, error=self.error_kind or "session_open", detail=reason)
            )
            self.rewards.append(None)
            self.metadata.append(None)
            self.last_output = f"Error: {reason}"
            return self.last_output
        try:
            result = run_sync(self._session.call, wire_name, arguments)
        except ors_errors.ToolRejected as e:
            return self._tool_error(wire_name, t0, f"rejected:{e.reason or 'unknown'}", e)
        except ors_errors.ToolFailed as e:
            return self._tool_error(wire_name, t0, "tool_failed", e)
        except ors_errors.ORSError as e:
            kind = infra_error_kind(e) or "transport"
            self._record_infra(kind, e)
            return self._tool_error(wire_name, t0, kind, e)
        latency = (time.perf_counter() - t0) * 1000
        text = result.text or "(no output)"
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
        self.reward: float | None = None
        self.rewards: list[float | None] = []
        self.metadata: list[dict[str, Any] | None] = []
        self.finished = False
        self.last_output = ""
        self.calls: list[CallRecord] = []
        self.error_kind: str | None = None
        self.error: str | None = None
        self.open_ms: float | None = None
        self.open_retries = 0
        self.member: str = self._config.member
        self.task_index: int | None = None
        self.scored = False

    def _record_infra(self, kind: str, exc: BaseException) -> None:
        if self.error_kind is None:
            self.error_kind = kind
            self.error = _short(exc)

    def _tool_error(self, wire_name: str, t0: float, kind: str, exc: BaseException) -> str:
        latency = (time.perf_counter() - t0) * 1000
        self.calls.append(CallRecord(wire_name, latency, error=kind, detail=_short(exc)))
        self.rewards.append(None)
        self.metadata.append(None)
        self.last_output = model_message(kind, exc)
        return self.last_output

    def _close(self) -> None:
        """Close the session (best effort, idempotent). Leading underscore: TRL does not expose it as a tool."""
        session, self._session = self._session, None
        if session is None:
            return
        try:
            run_sync(session.close)
        except Exception as e:  # noqa: BLE001 - closing must never raise into TRL
            logger.debug("closing session %s failed: %s", getattr(session, "id", "?"), e)

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} member={self.member!r} task_index={self.task_index} "
            f"session={self.session_id} outcome={self.outcome.kind}>"
        )


class _OpenFailed(Exception):
    def __init__(self, error: ors_errors.ORSError, retries: int) -> None:
        self.error, self.retries = error, retries


#: Failures worth another open: the environment or the link failed, not the deadline.
_RETRYABLE_OPEN = (
    ors_errors.SessionOpenError,
    ors_errors.TransportError,
    ors_errors.SessionDeadError,
    ors_errors.ServerError,
)


async def _open_and_prompt(
    open_session: Callable[..., Any],
    task_index: Any,
    task_spec: dict | None,
    split: str | None = None,
    retries: int = 0,
):
    """Open a session and read its prompt, retrying a failed open up to `retries` times."""
    attempt = 0
    while True:
        session = None
        try:
            session = await open_session(task_index, task_spec, split)
            return session, await session.prompt_text(), attempt
        except ors_errors.ORSError as e:
            if session is not None:
                await session.close()
            if attempt >= retries or not isinstance(e, _RETRYABLE_OPEN):
                raise _OpenFailed(e, attempt) from e
            attempt += 1
        except BaseException:
            if session is not None:
                await session.close()
            raise


_MODEL_MESSAGES = {
    "deadline": "Error: the tool did not finish within its time limit.",
    "session_died": "Error: the environment session has ended; no further tool call can succeed.",
    "transport": "Error: the environment could not be reached.",
    "session_open": "Error: the environment could not start this task.",
}


def model_message(kind: str, exc: BaseException) -> str:
    """The short text the model sees for a failed call (the full cause goes to the call record).

    Rejections and tool failures carry the environment's own words (they are about the model's call);
    infrastructure failures get a fixed sentence, so operator advice and ids never enter the transcript.
    """
    if isinstance(exc, ors_errors.ProtocolError):
        return "Error: the environment sent an answer that could not be read."
    if kind in _MODEL_MESSAGES:
        return _MODEL_MESSAGES[kind]
    detail = getattr(exc, "detail", None) or str(exc)
    return f"Error: {_short(Exception(detail), 500)}"


def _short(exc: BaseException, limit: int = 300) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def make_episode_class(name: str, config: EpisodeConfig, tool_specs: Iterable[Any]) -> type[Episode]:
    """A fresh `Episode` subclass with one method per tool spec bound on it (no exec/eval).

    Example:
        >>> cls = make_episode_class("Echo", config, specs)   # doctest: +SKIP
        >>> sorted(cls._binding.names.items())               # doctest: +SKIP
    """
    specs = list(tool_specs)
    cls = type(
        f"{name}Episode", (Episode,), {"_config": config, "__module__": __name__, "_tool_specs": specs}
    )
    cls._binding = bind_tools(cls, specs, dispatch="_call_tool", reserved=EPISODE_STATE)
    return cls
