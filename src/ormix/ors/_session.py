"""One ORS session: prompt, tools, tool calls with deadlines and safe retries, keepalive pings, close.

Open sessions through `ORSClient.open_session()` / `ORSClient.session()`.

## Tool calls never run twice

`POST /{env}/call` answers an SSE stream: the server's `task_id` first, then the result. A call that fails
is sent again only when that cannot run the tool a second time:

- the connection could not be opened (`HTTPFailure.unsent`): retried, the request never left;
- closed or reset before any response byte on a **reused** keep-alive connection: resent at once on a
  fresh connection (the idle-close race: the server never read it, see `ormix.ors._http`);
- the same on a **fresh** connection: not retried, `TransportError` saying the tool may have run;
- cut after the `task_id` event (a reset, a stream without `end`, a stalled stream): retried with that
  `task_id`, and the server replays the one run's result;
- cut after the response head but before `task_id`: not retried, `TransportError` (the tool may have run);
- 429/502/503/504 (before the stream starts): retried, the server has not started the tool; a 429 pauses
  every request of the client for its `Retry-After` (`ormix.ors._platform.BackendGate`), a 503 "backend
  starting" is ridden out until the call's deadline.

## Keepalive pings

An open session pings every `ping_interval_s` (`POST /ping`) in a background task of the portal's service
task group (`ormix.ors._bridge`), whatever loop opened it: a session of another loop pings over an HTTP
client of the portal's loop, owned by its ping loop (aiohttp connections belong to one loop). The ping
loop has its own cancel scope, cancelled at `close()`. Pings go over another pooled connection than a
running call, so they keep the session alive during long tool calls. A ping is sent only when no request of
the session began in the last interval (the server counts each request as a sign of life when it arrives):
a session busy with calls sends none.

Example:
    >>> import anyio
    >>> from ormix.server import serve_in_thread
    >>> from ormix.ors import ORSClient
    >>> async def episode(url):
    ...     async with ORSClient(url, env_name="echo") as client:
    ...         async with client.session(split="train", index=0) as s:
    ...             print(await s.prompt_text())
    ...             r = await s.call("submit", {"text": "apple"})
    ...             return r.reward, r.finished
    >>> with serve_in_thread(["local:echo"]) as srv:
    ...     anyio.run(episode, srv.url)
    Call the echo tool with the word 'apple'.
    (1.0, True)
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
from pydantic import BaseModel, Field, ValidationError

from ormix.ors import _bridge as bridge
from ormix.ors._errors import (
    DeadlineExceeded,
    ORSError,
    ProtocolError,
    ScoreGroupFailed,
    ScoreGroupUnsupported,
    ServerError,
    SessionDeadError,
    SessionOpenError,
    ToolFailed,
    ToolRejected,
    TransportError,
)
from ormix.ors._http import HTTPClient, HTTPFailure, Response, error_name
from ormix.ors._models import GroupScore, ToolResult, ToolSpec, bad_text_block, invalid_because, text_of
from ormix.ors._platform import is_starting
from ormix.ors._sse import CallStream, SSEParser, unclip
from ormix.ors._transport import (
    GONE_OK,
    RETRY_STATUSES,
    backoff_s,
    detail_of,
    json_of,
    kind_of,
)

if TYPE_CHECKING:  # pragma: no cover
    from ormix.ors._transport import Transport

logger = logging.getLogger("ormix.ors")

# The server sends `: ping` on SSE streams every 10 s; a stream silent for longer than this is stalled.
_STREAM_READ_TIMEOUT_S = 45.0


@dataclasses.dataclass(slots=True)
class SessionTimings:
    """Cheap counters kept on every session (milliseconds)."""

    open_ms: float | None = None
    #: Of `open_ms`, the time spent riding out a backend that was still starting (a platform cold start).
    starting_ms: float = 0.0
    calls: int = 0
    retries: int = 0
    pings: int = 0
    ping_failures: int = 0


#: The fields of an `ok` result's `output` that make a `ToolResult`.
_RESULT_FIELDS = ("blocks", "metadata", "reward", "finished")


def _infer_reason(reason: str | None, error: str) -> str:
    # Servers before the `reason` field only sent the message (same fallback as the SDK).
    if reason:
        return reason if reason in ToolRejected.REASONS else "other"
    if error.startswith("Tool input validation error"):
        return "input_validation"
    if "is not a valid tool" in error:
        return "not_found"
    if "episode has finished" in error:
        return "episode_finished"
    return "other"


_REJECT_HINT = {
    "input_validation": "fix the arguments to match the tool's input schema; the session is still usable",
    "not_found": "call one of the session's tools (see Session.tools()); the session is still usable",
    "episode_finished": "the episode is over (a tool returned finished=True); close the session",
    "other": "see the server's message",
}


class Session:
    """An open ORS session. Created by `ORSClient.open_session()`; close it with `close()`.

    Attributes: `id`, `env_name`, `closed`, `dead`, `timings` (open_ms, calls, retries, pings, ...),
    `dead_reason`, `pinging`.

    Example:
        >>> import anyio
        >>> from ormix.server import serve_in_thread
        >>> from ormix.ors import ORSClient
        >>> async def run(url):
        ...     async with ORSClient(url, env_name="echo") as client:
        ...         s = await client.open_session(split="train", index=0)
        ...         try:
        ...             return (await s.call("echo", {"text": "hi"})).text
        ...         finally:
        ...             await s.close()
        >>> with serve_in_thread(["local:echo"]) as srv:
        ...     anyio.run(run, srv.url)
        'hi'
    """

    def __init__(
        self,
        *,
        transport: Transport,
        sid: str,
        env_name: str | None,
        timeout_s: float | None,
        ping_interval_s: float | None,
        owner: Any = None,
        max_kept_chars: int | None = None,
        redact: tuple[str, ...] = (),
        ready_timeout_s: float | None = None,
    ) -> None:
        self.id = sid
        self.env_name = env_name
        self.timings = SessionTimings()
        self.dead_reason: str | None = None
        self._t = transport
        self._timeout_s = timeout_s
        # The deadline of waiting for the session to be ready (`/prompt`, `/task_tools` wait for setup):
        # part of opening it, so the open's deadline when it is longer than a call's.
        self._ready_timeout_s = (
            timeout_s if ready_timeout_s is None or timeout_s is None else max(timeout_s, ready_timeout_s)
        )
        self._headers = transport.headers(sid)
        # As the SDK sends a streamed call; `/delete` and `/delete_session` carry no X-Deployment.
        self._call_headers = {**self._headers, "Accept": "text/event-stream"}
        self._close_headers = transport.headers(sid, routed=False)
        self._closed = False
        self._ping_interval_s = ping_interval_s
        # The ping loop's cancel scope (on the portal's loop), cancelled at close.
        self._ping_scope: anyio.CancelScope | None = None
        # When this session's last request began (its open is one): the server counts any request of a
        # session as a sign of life when it arrives, so a ping is due only this long after it.
        self._last_request_s = time.monotonic()
        self._owner = owner
        self._max_kept_chars = max_kept_chars
        # Secret values and keys this session sent: scrubbed from every error it raises, in case the
        # server echoes request headers back. Never shown.
        self._redact = redact
        ep = transport.endpoint
        self._call_url = transport.url(ep.path("/call"))
        self._label = env_name or ep.deployment
        self._supports_score_group: bool | None = None

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("dead" if self.dead_reason else "open")
        return f"Session(id={self.id!r}, env={self._label!r}, {state})"

    @property
    def closed(self) -> bool:
        """True once `close()` ran."""
        return self._closed

    @property
    def dead(self) -> bool:
        """True when the server no longer has this session (found by a ping or a call)."""
        return self.dead_reason is not None

    # ------------------------------------------------------------------ keepalive

    @property
    def pinging(self) -> bool:
        """True while this session's keepalive loop runs (from open until the session closes or dies)."""
        return self._ping_scope is not None and not self._closed and self.dead_reason is None

    async def keepalive(
        self, own_http: bool, *, task_status: anyio.abc.TaskStatus = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """The keepalive loop: `POST /ping` every `ping_interval_s` until the session closes or dies.

        `ORSClient` starts it in the portal's service task group when it opens the session; `own_http`:
        ping over an HTTP client of this loop's own (the session's is of another loop). It never raises:
        a failed ping is counted (`timings.ping_failures`) and tried again at the next tick; a 404 marks
        the session dead. Its cancel scope is cancelled by `close()`.
        """
        interval = float(self._ping_interval_s or 10.0)
        async with contextlib.AsyncExitStack() as stack:
            tr = self._t
            if own_http:
                http = HTTPClient(connect_timeout_s=tr.http.connect_timeout_s)
                tr = tr.with_http(await stack.enter_async_context(http))
            with anyio.CancelScope() as scope:
                self._ping_scope = scope
                task_status.started()
                try:
                    while not self._closed and self.dead_reason is None:
                        # A session busy with calls needs no pings (a call tells the server as much): at
                        # 1,024 sessions a ping each every interval would be ~40% more requests than calls.
                        await anyio.sleep(max(0.0, self._last_request_s + interval - time.monotonic()))
                        if self._closed:
                            return
                        if time.monotonic() - self._last_request_s < interval:
                            continue
                        try:
                            with anyio.fail_after(max(5.0, interval * 3)):
                                await self._ping(tr)
                        except SessionDeadError:
                            return
                        except Exception as e:  # noqa: BLE001 - a failed ping is retried at the next tick
                            self.timings.ping_failures += 1
                            logger.debug("ormix.ors: ping failed for session %s: %s", self.id, error_name(e))
                finally:
                    self._ping_scope = None

    def _ctx(self, tool: str | None = None) -> dict[str, Any]:
        return {"env": self._label, "session_id": self.id, "tool": tool}

    def _check_usable(self, tool: str | None = None) -> None:
        if self._closed:
            raise ORSError("this session is closed; open a new one", **self._ctx(tool))
        if self.dead_reason is not None:
            raise SessionDeadError(
                f"session is dead: {self.dead_reason}. Open a new session.", **self._ctx(tool)
            )

    def _dead_from(self, err: SessionDeadError) -> SessionDeadError:
        if self.dead_reason is None:
            self.dead_reason = err.message
        return err

    # ------------------------------------------------------------------ simple endpoints

    @contextlib.contextmanager
    def _redacting(self) -> Iterator[None]:
        # A server may echo request headers back in its errors: this session's secrets never leave.
        try:
            yield
        except ORSError as e:
            e.redact(self._redact)
            raise

    async def ping(self) -> None:
        """Tell the server the session is alive (`POST /ping`). Raises SessionDeadError if it is gone."""
        await self._ping(self._t)

    async def _ping(self, tr: Transport) -> None:
        with self._redacting():
            self._check_usable()
            self._last_request_s = time.monotonic()
            try:
                await tr.request("POST", "/ping", sid=self.id, headers=self._headers)
            except SessionDeadError as e:
                raise self._dead_from(
                    SessionDeadError(
                        "the server no longer knows this session (a keepalive ping got 404): it was reaped "
                        "after idling past the server's limit, deleted, or the server restarted. Open a new "
                        "session.",
                        **self._ctx(),
                    )
                ) from e
            except ORSError as e:
                if getattr(e, "status_code", None) == 404:
                    raise self._dead_from(
                        SessionDeadError(f"ping answered 404: {e.message}", **self._ctx())
                    ) from e
                raise
            self.timings.pings += 1

    async def _get_ready(self, suffix: str, timeout_s: float | None) -> Any:
        self._check_usable()
        path = self._t.endpoint.path(suffix)
        self._last_request_s = time.monotonic()
        try:
            with anyio.fail_after(self._ready_timeout_s if timeout_s is None else timeout_s):
                resp = await self._t.request("GET", path, sid=self.id, headers=self._headers)
        except TimeoutError as e:
            raise DeadlineExceeded(
                f"GET {suffix} did not answer within the deadline: the environment may still be starting "
                f"(setup() running). Pass a larger timeout_s or check the environment's setup.",
                **self._ctx(),
            ) from e
        except SessionDeadError as e:
            raise self._dead_from(e) from None
        except ORSError as e:
            if getattr(e, "status_code", None) == 500:
                detail = getattr(e, "detail", None)
                raise SessionOpenError(
                    f"the session could not start: the environment failed ({detail}). This task cannot be "
                    f"run as is; close the session and report or skip the task.",
                    detail=detail,
                    status_code=500,
                    **self._ctx(),
                ) from None
            raise
        return json_of(resp, f"GET {path}", self._t.endpoint.target, env=self._label, session_id=self.id)

    async def prompt(self, *, timeout_s: float | None = None) -> list[dict]:
        """The task's prompt blocks (`GET /{env}/prompt`); waits out a slow `setup()` until the deadline.

        Raises `ProtocolError` when the answer is not a list of blocks.

        Example:
            >>> import anyio
            >>> from ormix.server import serve_in_thread
            >>> from ormix.ors import ORSClient
            >>> async def prompt(url):
            ...     async with ORSClient(url, env_name="echo") as client:
            ...         async with client.session(split="train", index=1) as session:
            ...             return await session.prompt()
            >>> with serve_in_thread(["local:echo"]) as srv:
            ...     [block["text"] for block in anyio.run(prompt, srv.url)]
            ["Call the echo tool with the word 'river'."]
        """
        with self._redacting():
            blocks = await self._get_ready("/prompt", timeout_s)
            if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
                raise ProtocolError(
                    f"GET /prompt answered {kind_of(blocks)}, not a list of blocks. The server does not "
                    f"speak ORS as ormix expects; check its version (GET /version).",
                    **self._ctx(),
                )
            why = bad_text_block(blocks)
            if why is not None:
                raise ProtocolError(
                    f"GET /prompt answered a prompt whose {why}. The server does not speak ORS as ormix "
                    f"expects (broken, or an incompatible version): check GET /version and the environment's "
                    f"get_prompt.",
                    **self._ctx(),
                )
            return blocks

    async def prompt_text(self, *, timeout_s: float | None = None) -> str:
        """The prompt's text blocks joined by newlines."""
        return text_of(await self.prompt(timeout_s=timeout_s))

    async def tools(self, *, timeout_s: float | None = None) -> list[ToolSpec]:
        """This session's tools: shared ones plus the task's own (`GET /{env}/task_tools`)."""
        with self._redacting():
            return tool_specs_of(
                await self._get_ready("/task_tools", timeout_s), "GET /task_tools", self._ctx()
            )

    # ------------------------------------------------------------------ tool calls

    async def call(self, name: str, input: Any = None, *, timeout_s: float | None = None) -> ToolResult:
        """Call a tool and return its result.

        Retries a dropped connection with the server's `task_id`, so the server replays the result
        instead of running the tool again. Raises `ToolRejected` (bad arguments, unknown tool, episode
        over), `ToolFailed` (the tool raised), `SessionDeadError`, `DeadlineExceeded` (after `timeout_s`,
        default: the client's), `TransportError`, `ProtocolError` (an answer that breaks the protocol).

        `input` is normally a dict of arguments; another JSON value (a tool whose input schema is not
        an object) is sent as is and the server validates it. An output longer than the client's
        `max_kept_chars` is kept as its head: `truncated` is then True and `full_chars` its full length.

        Example:
            >>> import anyio
            >>> from ormix.server import serve_in_thread
            >>> from ormix.ors import ORSClient
            >>> async def call(url):
            ...     async with ORSClient(url, env_name="echo") as client:
            ...         async with client.session(split="train", index=0) as session:
            ...             return await session.call("echo", {"text": "apple"})
            >>> with serve_in_thread(["local:echo"]) as srv:
            ...     r = anyio.run(call, srv.url)
            >>> r.text, r.reward, r.finished
            ('apple', 1.0, False)
        """
        with self._redacting():
            return await self._call(name, input, timeout_s)

    async def _call(self, name: str, input: Any, timeout_s: float | None) -> ToolResult:
        self._check_usable(name)
        if input is None:
            input = {}
        stream = CallStream(self._max_kept_chars)
        try:
            with anyio.fail_after(self._timeout_s if timeout_s is None else timeout_s):
                await self._call_stream(name, input, stream)
        except TimeoutError as e:
            t = self._timeout_s if timeout_s is None else timeout_s
            raise DeadlineExceeded(
                f"tool call {name!r} did not finish within {t:g}s. The tool may still be running on the "
                f"server (a non-concurrent tool of this session stays busy until it ends); the client and "
                f"the session are still usable. Pass a larger timeout_s for slow tools.",
                **self._ctx(name),
            ) from e
        finally:
            self.timings.calls += 1
        if stream.error is not None:
            raise ToolFailed(
                f"tool {name!r} raised inside the environment: {_clip_text(stream.error)}. The session "
                f"stays open on the server, but its state may be inconsistent.",
                detail=stream.error,
                **self._ctx(name),
            )
        return self._parse_result(name, stream)

    def _bad_result(self, name: str, what: str, stream: CallStream) -> ProtocolError:
        return ProtocolError(
            f"tool {name!r} answered {what} ({stream.received} chars received). The server does not speak "
            f"ORS as ormix expects (broken, or an incompatible version): check GET /version and the "
            f"environment's code; the session may still be usable.",
            **self._ctx(name),
        )

    def _parse_result(self, name: str, stream: CallStream) -> ToolResult:
        clip = stream.clip
        if clip is not None and clip.overflow:
            raise self._bad_result(
                name,
                f"a result whose JSON structure alone is larger than {clip.limit} "
                f"characters (long strings are cut, the rest cannot be)",
                stream,
            )
        text = stream.result or ""
        try:
            res = json.loads(text)
        except (ValueError, RecursionError) as e:
            raise self._bad_result(name, f"an `end` event that is not JSON ({text[:80]!r})", stream) from e
        if not isinstance(res, dict):
            raise self._bad_result(name, f"an `end` event holding {kind_of(res)}, not an object", stream)
        if res.get("ok"):
            out = res.get("output")
            try:
                # Null fields are the defaults; anything else the output holds is ignored.
                items = ({} if out is None else out).items()
                fields = {k: v for k, v in items if k in _RESULT_FIELDS and v is not None}
                result = ToolResult.model_validate(fields)
            except (AttributeError, ValidationError) as e:
                why = (
                    invalid_because(e) if isinstance(e, ValidationError) else f"{kind_of(out)}, not an object"
                )
                raise self._bad_result(
                    name, f"an `output` that is not a tool result ({why})", stream
                ) from None
            dropped = 0
            if clip is not None and clip.clipped > 0:
                result.truncated = True
                kept = []
                for b in result.blocks:
                    b, d = unclip(b)
                    kept.append(b)
                    if b.get("type", "text") == "text" and isinstance(b.get("text"), str):
                        dropped += d  # only what `text` is made of counts toward its full length
                result.blocks = kept
                result.metadata, _ = unclip(result.metadata)
            result.full_chars = len(result.text) + dropped
            return result
        error = res.get("error", "")
        error = _clip_text(error if isinstance(error, str) else json.dumps(error)[:2000])
        reason = _infer_reason(res.get("reason"), error)
        raise ToolRejected(
            f"tool call {name!r} rejected ({reason}): {error}. {_REJECT_HINT[reason]}.",
            reason=reason,
            detail=error,
            **self._ctx(name),
        )

    async def _attempt(
        self, body: dict[str, Any], stream: CallStream, fresh: bool, url: str | None = None
    ) -> Response:
        """One `POST /call`: feeds the SSE events of a 200 answer to `stream` as they arrive, and returns the
        answer (the body read when the status is not 200). Connection failures raise `HTTPFailure`."""
        feed = SSEParser().feed
        on_event = stream.on_event

        def sink(text: str) -> None:
            for event, data in feed(text):
                on_event(event, data)

        self._last_request_s = time.monotonic()
        resp = await self._t.http.stream(
            "POST",
            url or self._call_url,
            on_text=sink,
            json=body,
            headers=self._call_headers,
            read_timeout_s=_STREAM_READ_TIMEOUT_S,
            fresh=fresh,
        )
        return resp

    async def _call_stream(
        self,
        name: str,
        input: Any,
        stream: CallStream,
        *,
        body: dict[str, Any] | None = None,
        route: str = "/call",
    ) -> None:
        # `route`/`body`: another streamed route of the session (`/score_group`), retried by the same rules.
        body = {"name": name, "input": input} if body is None else body
        url = None if route == "/call" else self._t.url(self._t.endpoint.path(route))
        attempt = 0
        fresh = False
        while True:
            if stream.task_id:
                body["task_id"] = stream.task_id
            stream.reset_partial()
            await self._t.gate.wait_turn()
            try:
                resp = await self._attempt(body, stream, fresh, url)
            except HTTPFailure as e:
                failure: HTTPFailure = e
            else:
                if resp.status_code != 200:
                    code = resp.status_code
                    # A non-200 answer comes before the server starts the tool: retrying is safe.
                    if code in RETRY_STATUSES and (
                        attempt < self._t.retries or is_starting(code, resp.headers)
                    ):
                        await self._t.backoff(resp, attempt)
                        attempt += 1
                        fresh = False
                        self.timings.retries += 1
                        continue
                    raise self._call_refused(resp, name, route)
                if stream.done:
                    if stream.error == "unknown task_id" and "task_id" in body:
                        raise TransportError(
                            f"the connection dropped during tool call {name!r} and the server no longer "
                            f"holds its result (task_id expired or the server restarted); the tool ran "
                            f"once, its output is lost.",
                            **self._ctx(name),
                        )
                    return
                ctype = resp.headers.get("content-type", "")
                if ctype and not ctype.lower().startswith("text/event-stream"):
                    raise self._not_a_stream(name, route, ctype)
                failure = HTTPFailure("the stream ended before the `end` event", kind="cut", answered=True)
            attempt, fresh = await self._after_failure(failure, name, stream, attempt, fresh)

    def _not_a_stream(self, name: str, route: str, ctype: str) -> ProtocolError:
        # A 200 whose body is not SSE (plain JSON or an HTML page): a proxy in between, or a URL whose
        # prefix reaches something else than the ORS server. Sending it again would get the same.
        return ProtocolError(
            f"tool call {name!r}: POST {self._t.endpoint.path(route)} to {self._t.endpoint.target} answered "
            f"200 with content type {ctype.split(';')[0].strip()!r}, not an SSE stream (text/event-stream). "
            f"Something other than the ORS server answered (a proxy, or a wrong URL prefix or env_name): "
            f"check the target URL. Not retried: the tool may have run.",
            **self._ctx(name),
        )

    def _call_refused(self, resp: Response, name: str, route: str) -> ORSError:
        # The error for a call answered with a status that is not retried (the stream never started).
        err = self._t.status_error(resp, "POST", route, sid=self.id, tool=name)
        if isinstance(err, SessionDeadError):
            return self._dead_from(err)
        if resp.status_code == 500:
            # The stream never started: the session's setup() failed (the /call route waits for setup and
            # re-raises its error).
            return SessionOpenError(
                f"the session could not start, so tool {name!r} was not run: {detail_of(resp)}",
                detail=detail_of(resp),
                status_code=500,
                **self._ctx(name),
            )
        return err

    async def _after_failure(
        self, failure: HTTPFailure, name: str, stream: CallStream, attempt: int, fresh: bool
    ) -> tuple[int, bool]:
        """After a call got no complete answer: wait as its retry needs and return the next `(attempt,
        fresh)`, or raise `TransportError` when sending it again could run the tool twice (or is no use)."""
        if failure.kind == "certificate":
            raise TransportError(
                f"tool call {name!r} could not reach the server: {failure}", **self._ctx(name)
            ) from failure
        # Retry only when that cannot run the tool twice: with the server's task_id (it replays the
        # one run), when the request never left, or when a reused connection was closed before any
        # answer (the server's idle timer: it never read the request), once, on a fresh connection.
        if stream.task_id or failure.unsent:
            if attempt >= self._t.retries:
                raise TransportError(
                    f"tool call {name!r} failed after {attempt + 1} attempts ({failure.label}: "
                    f"{failure}). Check the server is reachable.",
                    **self._ctx(name),
                ) from failure
            await anyio.sleep(backoff_s(attempt))
            self.timings.retries += 1
            return attempt + 1, failure.idle_race
        if failure.idle_race and not fresh:
            self.timings.retries += 1
            return attempt, True
        where = (
            "on a fresh connection, so the request may have reached the server (or a proxy in between)"
            if not failure.answered
            else "after the server answered but before it acknowledged the call"
        )
        raise TransportError(
            f"the connection failed during tool call {name!r} {where} ({failure.label}: "
            f"{failure}); not retried because the tool may have run. Call it again only if running "
            f"it twice is harmless.",
            **self._ctx(name),
        ) from failure

    # ------------------------------------------------------------------ group scoring

    async def supports_score_group(self, *, timeout_s: float | None = None) -> bool:
        """Whether the environment scores groups (``supports_score_group`` in its ``/tools``; a server before
        SDK 0.1.157 never says so: ``False``). Asked once per session.

        Example:
            >>> import anyio
            >>> from ormix.server import serve_in_thread
            >>> from ormix.ors import ORSClient
            >>> async def supports(url):
            ...     async with ORSClient(url, env_name="echo") as client:
            ...         async with client.session(split="train", index=0) as session:
            ...             return await session.supports_score_group()
            >>> with serve_in_thread(["local:echo"]) as srv:
            ...     anyio.run(supports, srv.url)
            False
        """
        if self._supports_score_group is None:
            with self._redacting():
                answer = await self._get_ready("/tools", timeout_s)
            self._supports_score_group = isinstance(answer, dict) and bool(answer.get("supports_score_group"))
        return self._supports_score_group

    async def score_group(
        self, candidates: Sequence[Any], *, timeout_s: float | None = None
    ) -> list[GroupScore]:
        """Score a GRPO group's candidates for this session's task (``POST /{env}/score_group``, an SSE
        stream like a tool call's, retried by the same rules); one `GroupScore` per candidate, in order.

        A candidate is a list of ORS messages (``{"role", "blocks"}``) or ``{"messages": [...], "metadata":
        {...}}`` (the metadata comes back untouched to the environment's judge). Raises
        `ScoreGroupUnsupported` (the environment has no ``score_group``), `ScoreGroupFailed` (its judging
        raised, or the scores do not match the candidates): neither kills the session. Also the errors of
        `call` for the transport (`DeadlineExceeded`, `TransportError`, `SessionDeadError`).

        Example:
            >>> import anyio
            >>> from ormix.server import serve_in_thread
            >>> from ormix.ors import ORSClient
            >>> def answer(text):
            ...     return [{"role": "assistant", "blocks": [{"type": "text", "text": text}]}]
            >>> async def rank(url):
            ...     async with ORSClient(url, env_name="ranked") as client:
            ...         async with client.session(split="train", index=0) as session:
            ...             return await session.score_group([answer("4"), answer("5"), answer(" 4 ")])
            >>> with serve_in_thread(["local:ranked"]) as srv:
            ...     [score.reward for score in anyio.run(rank, srv.url)]
            [1.0, 0.0, 0.5]
        """
        with self._redacting():
            return await self._score_group(list(candidates), timeout_s)

    async def _score_group(self, candidates: list[Any], timeout_s: float | None) -> list[GroupScore]:
        what = "score_group"
        self._check_usable(what)
        wire = [c if isinstance(c, dict) else {"messages": list(c), "metadata": None} for c in candidates]
        stream = CallStream()
        t = self._timeout_s if timeout_s is None else timeout_s
        try:
            with anyio.fail_after(t):
                await self._call_stream(what, None, stream, body={"candidates": wire}, route="/score_group")
        except TimeoutError as e:
            raise DeadlineExceeded(
                f"score_group did not finish within {t:g}s (a judge may be slow); the session is still "
                f"usable. Pass a larger call_timeout_s for slow judges.",
                **self._ctx(what),
            ) from e
        except ServerError as e:
            if e.status_code == 404:
                raise ScoreGroupUnsupported(
                    f"the environment does not score groups ({e.detail}): it has no score_group, or its "
                    f"server predates SDK 0.1.157. Set group_scoring: off for it; the pointwise rewards "
                    f"stand.",
                    **self._ctx(what),
                ) from None
            raise
        if stream.error is not None:
            raise ScoreGroupFailed(
                f"score_group raised inside the environment: {_clip_text(stream.error)}. The session stays "
                f"usable; the pointwise rewards stand.",
                detail=stream.error,
                **self._ctx(what),
            )
        try:
            answer = json.loads(stream.result or "")
            scores = [GroupScore.model_validate(s) for s in answer["scores"]]
        except (ValueError, TypeError, KeyError, ValidationError) as e:
            raise ScoreGroupFailed(
                f"score_group answered something that is not a list of scores ({type(e).__name__}); check "
                f"the environment's score_group.",
                detail=_clip_text(stream.result or ""),
                **self._ctx(what),
            ) from None
        if len(scores) != len(wire):
            raise ScoreGroupFailed(
                f"score_group answered {len(scores)} scores for {len(wire)} candidates; check the "
                f"environment's score_group (it must return one score per candidate, in order).",
                **self._ctx(what),
            )
        return scores

    # ------------------------------------------------------------------ close

    async def close(self) -> None:
        """Delete the session on the server (`POST /delete`). Idempotent; never raises.

        A dead or already-deleted session closes quietly (the server answers 200 for unknown ids).
        """
        if self._closed:
            return
        self._closed = True
        if (scope := self._ping_scope) is not None:
            bridge.call_soon(scope.cancel)  # the scope belongs to the portal's loop
        # Bounded; shorter, and cut, when the owner's server leaves a pool's rotation (not waited on).
        owner = self._owner
        bound = (
            owner.cleanup_scope(30.0, shield=False)
            if hasattr(owner, "cleanup_scope")
            else anyio.CancelScope(deadline=anyio.current_time() + 30.0)
        )
        try:
            with bound as scope:
                for path in ("/delete", "/delete_session") if self._t.endpoint.is_platform else ("/delete",):
                    await self._t.request(
                        "POST", path, sid=self.id, headers=self._close_headers, ok_statuses=GONE_OK
                    )
            if scope.cancelled_caught:
                logger.debug("ormix.ors: closing session %s gave up waiting for the server", self.id)
        except Exception as e:  # noqa: BLE001 - closing must not mask the caller's own error
            logger.debug("ormix.ors: closing session %s failed: %s", self.id, type(e).__name__)
        finally:
            if self._owner is not None:
                self._owner.forget(self)

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        with anyio.CancelScope(shield=True):
            await self.close()


class _ToolList(BaseModel):
    tools: list[ToolSpec] = Field(default_factory=list)


def tool_specs_of(body: Any, what: str, ctx: dict[str, Any]) -> list[ToolSpec]:
    """The `ToolSpec`s of a `/tools` or `/task_tools` answer; `ProtocolError` when it has the wrong shape.

    Example:
        >>> [t.name for t in tool_specs_of({"tools": [{"name": "echo"}]}, "GET /tools", {})]
        ['echo']
    """
    try:
        return _ToolList.model_validate(body).tools
    except ValidationError as e:
        raise ProtocolError(
            f"{what} answered something that is not an object with a `tools` list of tool descriptions "
            f"({invalid_because(e)}). The server does not speak ORS as ormix expects; check its version "
            f"(GET /version) and the environment's tool definitions.",
            **ctx,
        ) from None


def _clip_text(text: str, limit: int = 2000) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
