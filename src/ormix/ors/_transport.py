"""Requests to one ORS endpoint: retries, riding out a starting backend, and typed errors for statuses.

Every request goes through the client's `ormix.ors._http.HTTPClient` (one connection pool per `ORSClient`).
Retried: transport failures (`HTTPFailure`, except a certificate that does not verify) and 429/502/503/504,
up to `retries` times with jittered backoff; a `503` with `X-Backend-State: starting` (a platform backend
warming up, or the environment's `setup()` still running) without counting, honouring `Retry-After`, for
at most `starting_limit_s` and within the caller's deadline (`ormix.ors._platform`). A `429` pauses every
request of the client until its `Retry-After` (the client's `BackendGate`). The idle-close race of a
reused keep-alive connection (`HTTPFailure.idle_race`, see `ormix.ors._http`) is resent at once on a fresh
connection, outside the retry budget: the server never read that request.

Tool calls (`POST /{env}/call`) have retry rules of their own (`ormix.ors._session`): they must never run a
tool twice.

The helpers `detail_of`, `retry_after_s`, `backoff_s`, `kind_of` and `json_of` read
answers for messages; they are shared by the client and its sessions.
"""

from __future__ import annotations

import json
import logging
import random
from typing import Any

import anyio

from ormix.ors._endpoint import Endpoint
from ormix.ors._errors import ORSError, ProtocolError, ServerError, SessionDeadError, TransportError
from ormix.ors._http import HTTPClient, HTTPFailure, Response
from ormix.ors._platform import MAX_RETRY_AFTER_S, BackendGate, OpenWait, StartingWait, is_starting

logger = logging.getLogger("ormix.ors")

#: Statuses a request is retried on (the server or a proxy in front of it is overloaded or restarting).
RETRY_STATUSES = frozenset({429, 502, 503, 504})
#: Answers to deleting a session that all mean it is gone.
GONE_OK = frozenset({200, 404, 410})


def detail_of(resp: Response) -> str:
    """The server's error detail (`{"detail": ...}` of FastAPI), else the body text, shortened.

    Example:
        >>> detail_of(Response(400, {}, b'{"detail": "Invalid split"}'))
        'Invalid split'
    """
    try:
        body = resp.json()
        detail = body.get("detail", body) if isinstance(body, dict) else body
        text = detail if isinstance(detail, str) else json.dumps(detail)
    except (ValueError, UnicodeDecodeError, RecursionError):
        text = resp.text
    text = text.strip()
    return text if len(text) <= 2000 else text[:2000] + "…"


def retry_after_s(resp: Response) -> float | None:
    """The `Retry-After` header in seconds, when it is a whole number.

    Example:
        >>> retry_after_s(Response(503, {"Retry-After": "3"})), retry_after_s(Response(503, {}))
        (3.0, None)
    """
    value = resp.headers.get("Retry-After", "").strip()
    return float(value) if value.isdigit() else None


def backoff_s(attempt: int, base: float = 0.05, cap: float = 2.0) -> float:
    """Jittered exponential backoff: concurrent sessions that failed together do not retry in lockstep.

    Example:
        >>> 0.025 <= backoff_s(0) <= 0.05 and backoff_s(10) <= 2.0
        True
    """
    return min(cap, base * (2**attempt)) * (0.5 + random.random() / 2)


def kind_of(value: Any) -> str:
    """A short name of a JSON value's type, for messages (never the value: it may be large or secret).

    Example:
        >>> kind_of([1]), kind_of(None), kind_of(True)
        ('a list', 'null', 'a boolean')
    """
    return {
        type(None): "null",
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
    }.get(type(value), type(value).__name__)


def _excerpt(resp: Response, limit: int = 80) -> str:
    # The size and first bytes of a body, for a message about a malformed answer.
    return f"{len(resp.content)} bytes: {resp.content[:limit]!r}"


def json_of(resp: Response, what: str, target: str, **ctx: str | None) -> Any:
    """The JSON body of an answer; `ProtocolError` (never a raw JSONDecodeError) when it is not JSON.
    `ctx` (env, session_id) names what it happened to.

    Example:
        >>> json_of(Response(200, {}, b"[1]"), "GET /x", "http://h", env="echo")
        [1]
    """
    try:
        return resp.json()
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise ProtocolError(
            f"{what} to {target} answered {resp.status_code} with a body that is not JSON "
            f"({_excerpt(resp)}). The server does not speak ORS as ormix expects: check the "
            f"URL, env_name and the server's version (GET /version).",
            status_code=resp.status_code,
            **ctx,
        ) from e


class Transport:
    """Requests to one endpoint through one `HTTPClient`, with retries and typed errors.

    Example:
        >>> tr = Transport(Endpoint.for_url("http://127.0.0.1:1", "echo"), HTTPClient(), retries=3)
        >>> tr.url(tr.endpoint.path("/call")), tr.headers("s1")["X-Session-ID"]
        ('http://127.0.0.1:1/echo/call', 's1')
    """

    def __init__(
        self,
        endpoint: Endpoint,
        http: HTTPClient,
        retries: int,
        *,
        gate: BackendGate | None = None,
        starting_limit_s: float = 900.0,
    ) -> None:
        self.endpoint = endpoint
        self.http = http
        self.retries = retries
        #: Shared by every request of the client: the 429 pause and the cold-start waits in progress.
        self.gate = gate if gate is not None else BackendGate()
        #: Longest one request rides out a starting backend (the caller's deadline may be shorter).
        self.starting_limit_s = starting_limit_s
        self.base_headers = endpoint.headers()
        # Scrubbed from every error this transport raises (a server may echo request headers back).
        self.sensitive: tuple[str, ...] = (endpoint.api_key,) if endpoint.api_key else ()

    def with_http(self, http: HTTPClient) -> Transport:
        """The same endpoint, retries and gate over another `HTTPClient` (one of another event loop)."""
        return Transport(
            self.endpoint, http, self.retries, gate=self.gate, starting_limit_s=self.starting_limit_s
        )

    def url(self, path: str) -> str:
        """The absolute URL of `path` on the endpoint's session host."""
        return self.endpoint.session_url + path

    def headers(
        self, sid: str | None = None, extra: dict[str, str] | None = None, *, routed: bool = True
    ) -> dict[str, str]:
        """The endpoint's headers, with the session id and `extra` when given.

        `routed=False` leaves `X-Deployment` out: the SDK never sends it on `/delete` and
        `/delete_session` (the platform finds the session by its id).

        Example:
            >>> tr = Transport(Endpoint.for_catalog("Owner/Name", api_key="k"), HTTPClient(), retries=0)
            >>> sorted(tr.headers("s1", routed=False))
            ['User-Agent', 'X-API-Key', 'X-Session-ID']
        """
        h = dict(self.base_headers)
        if not routed:
            h.pop("X-Deployment", None)
        if sid:
            h["X-Session-ID"] = sid
        if extra:
            h.update(extra)
        return h

    async def backoff(self, resp: Response, attempt: int, *, base: float = 0.2) -> None:
        """Wait before sending again after a retryable answer: its `Retry-After` (capped at 10 s), else
        jittered backoff; a `429` pauses every request of the client instead (the shared gate)."""
        wait = retry_after_s(resp)
        if resp.status_code == 429:
            self.gate.pause(wait if wait is not None else backoff_s(attempt, base=base))
            await self.gate.wait_turn()
            return
        await anyio.sleep(min(wait, MAX_RETRY_AFTER_S) if wait is not None else backoff_s(attempt, base=base))

    async def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        sid: str | None = None,
        headers: dict[str, str] | None = None,
        tool: str | None = None,
        ride_out_starting: bool = True,
        ok_statuses: frozenset[int] = frozenset({200}),
        waited: OpenWait | None = None,
    ) -> Response:
        """Send a request; retry transport failures and 429/502/503/504 up to `retries` times.

        A 503 with `X-Backend-State: starting` (a platform backend warming up, or environment setup still
        running: nothing ran) is retried without counting when `ride_out_starting` (the default, as the
        SDK does on every request), honouring `Retry-After`, for at most `starting_limit_s`; the caller's
        deadline bounds it too. The time spent so is added to `waited`. A `429` pauses the whole client
        for its `Retry-After`. Returns the response with a status in `ok_statuses`; raises a typed error
        otherwise.
        """
        h = headers if headers is not None else self.headers(sid)
        url = self.url(path)
        attempt = 0
        fresh = False
        wait: StartingWait | None = None
        done = False
        try:
            while True:
                await self.gate.wait_turn()
                try:
                    resp = await self.http.request(method, url, json=json_body, headers=h, fresh=fresh)
                except HTTPFailure as e:
                    if e.idle_race and not fresh:
                        fresh = True  # the server closed an idle connection as the request went out
                        continue
                    if not e.retryable or attempt >= self.retries:
                        raise self._unreachable(e, method, path, attempt, sid, tool) from e
                    await anyio.sleep(backoff_s(attempt))
                    attempt += 1
                    fresh = False
                    continue
                fresh = False
                if ride_out_starting and is_starting(resp.status_code, resp.headers):
                    if wait is None:
                        wait = self._begin_wait(waited)
                    if self.gate.elapsed(wait) < self.starting_limit_s:
                        await self.backoff(resp, attempt)
                        continue
                    raise self._never_started(method, path, sid, tool)
                if wait is not None:
                    self._end_wait(wait, waited, gave_up=False)
                    wait = None
                if resp.status_code in ok_statuses:
                    done = True
                    return resp
                if resp.status_code in RETRY_STATUSES and attempt < self.retries:
                    await self.backoff(resp, attempt)
                    attempt += 1
                    continue
                raise self.status_error(resp, method, path, sid=sid, tool=tool)
        finally:
            if wait is not None:
                # Cancelled by the caller's deadline (or an interrupt) while the backend was still starting.
                self._end_wait(wait, waited, gave_up=not done)

    def _unreachable(
        self, e: HTTPFailure, method: str, path: str, attempt: int, sid: str | None, tool: str | None
    ) -> ORSError:
        # The request got no answer and will not be sent again (retries spent, or a certificate).
        hint = "" if e.kind == "certificate" else " Check the server is running and reachable."
        return TransportError(
            f"{method} {path} to {self.endpoint.target} failed after {attempt + 1} attempt"
            f"{'s' if attempt else ''}: {e.label}: {e}.{hint}",
            env=self.endpoint.env_name or self.endpoint.deployment,
            session_id=sid,
            tool=tool,
        ).redact(self.sensitive)

    def _begin_wait(self, waited: OpenWait | None) -> StartingWait:
        # The first `503 starting` answer of a request: its wait counts in the gate (and in `waited`).
        wait = self.gate.begin_starting()
        if waited is not None:
            waited.waiting = True
        return wait

    def _end_wait(self, wait: StartingWait, waited: OpenWait | None, *, gave_up: bool) -> None:
        elapsed = self.gate.end_starting(wait, gave_up=gave_up)
        if waited is not None:
            waited.add(elapsed)
            waited.waiting = False
            waited.gave_up = waited.gave_up or gave_up

    def _never_started(self, method: str, path: str, sid: str | None, tool: str | None) -> ORSError:
        ep = self.endpoint
        return ServerError(
            f"{method} {path} to {ep.target}: the backend did not start within {self.starting_limit_s:g} s "
            f"(the server kept answering 503 X-Backend-State: starting). Check the environment's status, "
            f"or allow longer (open_timeout_s).",
            status_code=503,
            detail="backend starting",
            env=ep.env_name or ep.deployment,
            session_id=sid,
            tool=tool,
        ).redact(self.sensitive)

    def status_error(
        self, resp: Response, method: str, path: str, *, sid: str | None = None, tool: str | None = None
    ) -> ORSError:
        """The typed error for a non-success answer (the API key scrubbed from it)."""
        ctx = {"env": self.endpoint.env_name or self.endpoint.deployment, "session_id": sid, "tool": tool}
        detail = detail_of(resp)
        code = resp.status_code
        err: ORSError
        if sid and (code == 410 or (code == 404 and "Active environment not found" in detail)):
            err = SessionDeadError(
                f"session is gone on the server ({code} {detail!r}): it was reaped after idling, deleted, "
                f"or the server restarted. Open a new session.",
                **ctx,
            )
        else:
            hint = " Pass api_key= or set OPENREWARD_API_KEY." if code == 401 else ""
            err = ServerError(
                f"{method} {path} to {self.endpoint.target} answered {code}: {detail}.{hint}",
                status_code=code,
                detail=detail,
                **ctx,
            )
        return err.redact(self.sensitive)
