"""HTTP to an ORS server: a small pool of httpx clients, retries, and mapping of statuses to typed errors.

Sessions on a plain-HTTP server do not use this pool: each drives a connection of its own through
`ormix.ors.h1` (passed to `Transport.request` as `client=`, duck-typed like an `httpx.AsyncClient`).
The pool serves stateless calls, and sessions on TLS or platform endpoints.

Why a pool: one shared `httpx.AsyncClient` collapses under ~32 concurrent sessions (its connection pool
becomes the bottleneck), while one client per few sessions holds throughput. Each httpx session is
pinned to one client of the pool; stateless calls rotate over them.

Why the loop check: an httpx client's connections belong to the event loop that opened them. The pool
remembers its loop and process; used from another loop (or after `fork`) it starts fresh clients
instead of reusing sockets it cannot drive.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import random
import ssl
import time
from typing import Any

import httpx

from ormix.ors.endpoint import Endpoint
from ormix.ors.errors import ORSError, ServerError, SessionDeadError, TransportError

logger = logging.getLogger("ormix.ors")

__all__ = ["HTTPPool", "Transport", "detail_of", "is_unsent"]

RETRY_STATUSES = frozenset({429, 502, 503, 504})
# Errors raised before a request left this machine: retrying them can never run anything twice.
_UNSENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def is_unsent(exc: BaseException) -> bool:
    """True when the request provably never reached the server (connect failed, pool wait timed out)."""
    return isinstance(exc, _UNSENT)


def detail_of(resp: httpx.Response) -> str:
    """The server's error detail (`{"detail": ...}` of FastAPI), else the body text, shortened."""
    try:
        body = resp.json()
        detail = body.get("detail", body) if isinstance(body, dict) else body
        text = detail if isinstance(detail, str) else json.dumps(detail)
    except (ValueError, UnicodeDecodeError):
        text = resp.text
    text = text.strip()
    return text if len(text) <= 2000 else text[:2000] + "…"


def retry_after_s(resp: httpx.Response) -> float | None:
    value = resp.headers.get("Retry-After", "").strip()
    return float(value) if value.isdigit() else None


def backoff_s(attempt: int, base: float = 0.05, cap: float = 2.0) -> float:
    # Jittered exponential backoff: concurrent sessions that failed together do not retry in lockstep.
    return min(cap, base * (2**attempt)) * (0.5 + random.random() / 2)


_SSL: dict[bool, ssl.SSLContext] = {}


def _ssl_context(verify: bool) -> ssl.SSLContext:
    # Building a verifying context (loading the CA bundle) costs tens of milliseconds; httpx would do it
    # for every AsyncClient. One per process, shared by the pool; plain-HTTP endpoints get a bare one.
    ctx = _SSL.get(verify)
    if ctx is None:
        ctx = _SSL[verify] = httpx.create_ssl_context() if verify else ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return ctx


class HTTPPool:
    """A few `httpx.AsyncClient`s bound to one event loop and one process.

    Sessions take the least-loaded client (`acquire`/`release`), so sequential episodes reuse one warm
    connection and concurrent ones spread over the pool.
    """

    def __init__(self, size: int, connect_timeout_s: float) -> None:
        self.size = max(1, size)
        self.connect_timeout_s = connect_timeout_s
        self.tls = True
        self._clients: list[httpx.AsyncClient] = []
        self._load = [0] * self.size
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = os.getpid()
        self._rr = itertools.count()

    def _new_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            verify=_ssl_context(self.tls),
            # No read timeout of its own: deadlines are per call (anyio cancel scopes). SSE streams carry
            # `: ping` every 10 s, so a stalled stream is caught by the stream read timeout set per request.
            timeout=httpx.Timeout(connect=self.connect_timeout_s, read=None, write=60.0, pool=None),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=256, keepalive_expiry=30.0),
            follow_redirects=True,
            trust_env=False,
        )

    def _check(self) -> None:
        loop = asyncio.get_running_loop()
        pid = os.getpid()
        if self._loop is loop and self._pid == pid:
            return
        if self._clients and self._pid == pid and self._loop is not None and not self._loop.is_closed():
            logger.debug("ormix.ors: HTTP pool used from a new event loop; opening fresh connections")
        # Sockets of another process or loop are abandoned, not closed: closing them here would touch
        # the parent's connections (fork) or a loop that is not running.
        self._clients = []
        self._load = [0] * self.size
        self._loop = loop
        self._pid = pid

    def get(self, index: int | None = None) -> httpx.AsyncClient:
        """A client of the pool: `index` pins one (sessions), None rotates (stateless calls)."""
        self._check()
        i = (next(self._rr) if index is None else index) % self.size
        while len(self._clients) <= i:
            self._clients.append(self._new_client())
        return self._clients[i]

    def acquire(self) -> int:
        """A pool index for a new session: the least-loaded client (lowest index on ties)."""
        i = min(range(self.size), key=self._load.__getitem__)
        self._load[i] += 1
        return i

    def release(self, index: int) -> None:
        self._load[index] = max(0, self._load[index] - 1)

    async def aclose(self) -> None:
        clients, self._clients = self._clients, []
        if self._loop is not asyncio.get_running_loop() or self._pid != os.getpid():
            return
        for c in clients:
            try:
                await c.aclose()
            except Exception:  # noqa: BLE001 - closing is best effort
                logger.debug("ormix.ors: error closing an HTTP client", exc_info=True)


class Transport:
    """Requests to one endpoint with retries and typed errors."""

    def __init__(self, endpoint: Endpoint, pool: HTTPPool, retries: int) -> None:
        self.endpoint = endpoint
        self.pool = pool
        self.retries = retries
        self.base_headers = endpoint.headers()
        # Scrubbed from every error this transport raises (a server may echo request headers back).
        self.sensitive: tuple[str, ...] = (endpoint.api_key,) if endpoint.api_key else ()

    def url(self, path: str) -> str:
        return self.endpoint.session_url + path

    def headers(self, sid: str | None = None, extra: dict[str, str] | None = None) -> dict[str, str]:
        h = dict(self.base_headers)
        if sid:
            h["X-Session-ID"] = sid
        if extra:
            h.update(extra)
        return h

    async def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        sid: str | None = None,
        headers: dict[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
        tool: str | None = None,
        ride_out_starting: bool = False,
        ok_statuses: frozenset[int] = frozenset({200}),
    ) -> httpx.Response:
        """Send a request; retry transport errors and 429/502/503/504 up to `retries` times.

        A 503 with `X-Backend-State: starting` (environment setup still running) is retried without
        counting when `ride_out_starting`, honouring `Retry-After`; the caller's deadline bounds it.
        Returns the response with a status in `ok_statuses`; raises a typed error otherwise.
        """
        env = self.endpoint.env_name or self.endpoint.deployment
        h = headers if headers is not None else self.headers(sid)
        url = self.url(path)
        attempt = 0
        while True:
            http = client if client is not None else self.pool.get()
            try:
                resp = await http.request(method, url, json=json_body, headers=h)
            except httpx.TransportError as e:
                if attempt >= self.retries:
                    raise TransportError(
                        f"{method} {path} to {self.endpoint.target} failed after {attempt + 1} attempts: "
                        f"{type(e).__name__}: {e or 'connection failed'}. Check the server is running and "
                        f"reachable.",
                        env=env,
                        session_id=sid,
                        tool=tool,
                    ).redact(self.sensitive) from e
                await asyncio.sleep(backoff_s(attempt))
                attempt += 1
                continue
            if resp.status_code in ok_statuses:
                return resp
            if resp.status_code in RETRY_STATUSES:
                starting = resp.headers.get("X-Backend-State") == "starting"
                if (starting and ride_out_starting) or attempt < self.retries:
                    wait = retry_after_s(resp)
                    await asyncio.sleep(min(wait, 10.0) if wait is not None else backoff_s(attempt, base=0.2))
                    if not (starting and ride_out_starting):
                        attempt += 1
                    continue
            raise self.status_error(resp, method, path, sid=sid, tool=tool)

    def status_error(
        self, resp: httpx.Response, method: str, path: str, *, sid: str | None = None, tool: str | None = None
    ) -> ORSError:
        """The typed error for a non-success answer (the API key scrubbed from it)."""
        return self._status_error(resp, method, path, sid=sid, tool=tool).redact(self.sensitive)

    def _status_error(
        self, resp: httpx.Response, method: str, path: str, *, sid: str | None = None, tool: str | None = None
    ) -> ORSError:
        env = self.endpoint.env_name or self.endpoint.deployment
        detail = detail_of(resp)
        code = resp.status_code
        if sid and (code == 410 or (code == 404 and "Active environment not found" in detail)):
            return SessionDeadError(
                f"session is gone on the server ({code} {detail!r}): it was reaped after idling, deleted, "
                f"or the server restarted. Open a new session.",
                env=env,
                session_id=sid,
                tool=tool,
            )
        if code == 401:
            return ServerError(
                f"{method} {path}: 401 unauthorized ({detail}). Pass api_key= or set OPENREWARD_API_KEY.",
                status_code=code,
                detail=detail,
                env=env,
                session_id=sid,
                tool=tool,
            )
        return ServerError(
            f"{method} {path} to {self.endpoint.target} answered {code}: {detail}",
            status_code=code,
            detail=detail,
            env=env,
            session_id=sid,
            tool=tool,
        )


def now_ms() -> float:
    return time.perf_counter() * 1000.0
