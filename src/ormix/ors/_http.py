"""ormix's one HTTP interface: every HTTP request ormix makes goes through `HTTPClient` (aiohttp behind it).

Stateless calls, session calls, the SSE stream of `POST /{env}/call`, plain `http://` and TLS `https://`
targets, endpoint discovery and the readiness probe of ormix's local servers all use it. No module of
ormix parses HTTP itself; SSE *events* are parsed from the text this module hands out (`ormix.ors._sse`).

Why aiohttp: measured by `benchmarks/http_client_cpu.py` (client CPU per sequential request against a
local ORS server in a child process, medians of repetitions; three runs on this project's 2-core machine,
shared with other work): aiohttp 0.30-0.40 ms per JSON request and 0.5-0.8 ms per SSE tool call; httpx 0.28
1.15-1.5 / 1.7-2.1 ms; httpcore 1.05-1.1 / 1.5-1.8 ms. This module on aiohttp (reuse tracing included)
costs 10-20% over bare aiohttp (0.39 vs 0.34 ms per JSON request, 0.70 vs 0.58 ms per tool call,
2026-12-01). aiohttp is also what the openreward SDK installs.

The interface is small on purpose: `HTTPClient.request(method, url, json=, headers=) -> Response` reads
the whole answer; `HTTPClient.stream(...)` hands the text of a 200 answer to a callback as it arrives (the
SSE `/call` stream, with memory bounded by the caller). Failures that are not HTTP answers raise
`HTTPFailure`, whose `kind` says how far the request got, which is what the retry rules need.

## Keep-alive connections the server closes

Servers close idle keep-alive connections on their own clocks (uvicorn 5 s by default, gunicorn 2 s,
nginx and load balancers their own). ormix loses no call to that, and runs no tool twice:

(a) A connection the server closed while it sat in the pool is not reused: aiohttp's pool drops closed
    connections when a request acquires one (the close was seen by the event loop), and connections idle
    for longer than `keepalive_s` (15 s) are not reused at all.
(b) What is left is a race: the request is written onto a reused connection just as the server's idle
    timer closes it. The client then sees the peer close or reset the connection before any byte of the
    response (kind `no-response` with `reused=True`; `HTTPFailure.idle_race`). An ORS server process closes a
    connection without answering only when the connection was idle, i.e. it had not read the request. If
    the process died instead, its sessions died with it (they live in server memory), so a retry gets a
    404 or "connection refused" and cannot run a tool twice. So a request that fails this way on a
    *reused* connection is resent once on a *fresh* one (`fresh=True`, a connection opened for that
    request alone), for every endpoint, `POST /{env}/call` included.
(c) On a fresh connection the same failure is not an idle close: the request may have reached a server
    that then died mid-request, or a proxy in between may have forwarded it before the connection dropped.
    A `/call` that fails so is not retried (the session reports that the tool may have run). Once the
    server's `task_id` event has arrived, retries carry that `task_id` and the server replays the result
    instead of running the tool again.

Caveat: (b) assumes that whoever closes the client's connection has not read the request. A middlebox
(a proxy or load balancer between ormix and the ORS server) that reads a request, forwards it, and then
closes the client's idle-looking connection without answering breaks that assumption; a tool call caught
that way on a reused connection could run twice. Proxies normally answer 502/504 in that case (which is
not retried for `/call` once the stream has started) rather than close silently.

Reuse is observed through aiohttp's public tracing API (`TraceConfig.on_connection_reuseconn`), per
request; no private attribute of aiohttp is touched.

## Loops and processes

aiohttp's sessions belong to the event loop that created them. An `HTTPClient` opens its aiohttp session
on first use in a loop; used from another loop, or in a child after `fork`, it opens a new one, and the
old one is closed on its own loop (in a child after fork it is left alone while the child runs: its sockets
are the parent's; a child that ends through `sys.exit` after using the parent's client drops them at exit,
which can cost the parent those pooled connections, while `os._exit`, as multiprocessing ends its children,
does not). Connections are closed by `aclose()`; those of a client dropped without it, or still open at
exit, are closed on their loop when it runs, and released when collected when that loop has closed. A
request sent `fresh=True` opens a connection of its own.

TLS uses the default CA store (`ssl.create_default_context()`, which honours `SSL_CERT_FILE` and
`SSL_CERT_DIR`), built once per process and per value of those variables; where the system has no CA
store at all, certifi's bundle when it is installed. Schemes are case-insensitive (`HTTPS://` is TLS).

Example:
    >>> import anyio
    >>> from ormix.server import serve_in_thread
    >>> async def health(url):
    ...     async with HTTPClient() as http:
    ...         return (await http.request("GET", url + "/health")).json()
    >>> with serve_in_thread(["local:echo"]) as srv:
    ...     anyio.run(health, srv.url)
    {'status': 'ok'}
"""

from __future__ import annotations

import asyncio
import atexit
import codecs
import contextlib
import dataclasses
import functools
import json as _json
import os
import ssl
import types
import weakref
from collections.abc import Callable, Mapping
from typing import Any, Literal

import aiohttp

#: Seconds an idle pooled connection may wait before it is no longer reused (aiohttp's default).
DEFAULT_KEEPALIVE_S = 15.0


@dataclasses.dataclass(slots=True)
class Response:
    """An HTTP answer: `status_code`, `headers` (case-insensitive), `content` (bytes), `reused` (whether
    it came over a reused keep-alive connection).

    Example:
        >>> r = Response(200, {"content-type": "application/json"}, b'{"a": 1}')
        >>> r.status_code, r.json(), r.text
        (200, {'a': 1}, '{"a": 1}')
    """

    status_code: int
    headers: Mapping[str, str] = dataclasses.field(repr=False)
    content: bytes = dataclasses.field(default=b"", repr=False)
    reused: bool = False

    @property
    def text(self) -> str:
        """The body decoded as UTF-8 (undecodable bytes replaced)."""
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        """The body parsed as JSON; raises `ValueError` (or `UnicodeDecodeError`) when it is not JSON."""
        return _json.loads(self.content)


#: How far a failed request got (`HTTPFailure.kind`):
#: - `connect`: the connection could not be opened (refused, unreachable, name not resolved, connect
#:   timeout, TLS handshake): the request never left this machine;
#: - `certificate`: the server's TLS certificate did not verify against the CA store (`SSL_CERT_FILE` names
#:   another bundle): never left either, and not worth retrying;
#: - `no-response`: the connection was closed or reset after the request was (maybe) written and before the
#:   response head arrived; on a reused connection that is the idle-close race;
#: - `cut`: the connection failed while the response body was arriving (the server had read the request);
#: - `read-timeout`: no byte arrived for longer than the request's read timeout (a stalled server or
#:   stream); not a `TimeoutError`: per-call deadlines (`DeadlineExceeded`) are the caller's, this is the
#:   wire's;
#: - `bad-response`: the server's bytes are not a valid HTTP response.
FailureKind = Literal["connect", "certificate", "no-response", "cut", "read-timeout", "bad-response"]

# The name each kind goes by in messages (the class names of the exceptions it replaces, which logs,
# tests and users' greps know).
_LABELS: dict[str, str] = {
    "connect": "ConnectFailed",
    "certificate": "CertificateError",
    "no-response": "NoResponse",
    "cut": "ResponseCut",
    "read-timeout": "ReadTimeout",
    "bad-response": "BadResponse",
}


class HTTPFailure(Exception):
    """A request that got no complete HTTP answer. `kind` (a `FailureKind`) says how far it got; so do:

    - `unsent`: it provably never reached the server (the connection could not be opened);
    - `answered`: the response head had arrived before the failure;
    - `reused`: it went out on a reused keep-alive connection;
    - `idle_race`: the idle-close race of a reused connection (see the module docstring): the server never
      read the request, so sending it again on a fresh connection is safe;
    - `retryable`: whether sending it again can help at all (False for a certificate that does not verify).

    Not a `TimeoutError`, even for `read-timeout`: deadlines are the caller's.

    Example:
        >>> HTTPFailure("server disconnected", kind="no-response", reused=True).idle_race
        True
        >>> HTTPFailure("server disconnected", kind="no-response", reused=False).idle_race
        False
        >>> e = HTTPFailure("self-signed certificate", kind="certificate")
        >>> e.unsent, e.retryable, e.label
        (True, False, 'CertificateError')
        >>> e
        CertificateError('self-signed certificate')
    """

    def __init__(
        self, message: str, *, kind: FailureKind, reused: bool = False, answered: bool = False
    ) -> None:
        super().__init__(message)
        self.kind: FailureKind = kind
        self.reused = reused
        self.answered = answered

    def __repr__(self) -> str:
        # As the exceptions of each kind printed before they were one class (messages quote it: `{e!r}`).
        return f"{self.label}({str(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # `kind` is keyword-only: the default pickling (the class called with `args`) would lose it.
        return (_rebuild_failure, (str(self), self.kind, self.reused, self.answered))

    @property
    def unsent(self) -> bool:
        """True when the connection could not be opened: the request never left this machine."""
        return self.kind in ("connect", "certificate")

    @property
    def retryable(self) -> bool:
        """False for a certificate that does not verify (it cannot get better), else True."""
        return self.kind != "certificate"

    @property
    def idle_race(self) -> bool:
        """True for a connection closed or reset before any response byte on a reused connection: the
        server's idle timer closed it, unread."""
        return self.kind == "no-response" and self.reused

    @property
    def label(self) -> str:
        """The failure's name in messages: `ConnectFailed`, `CertificateError`, `NoResponse`,
        `ResponseCut`, `ReadTimeout` or `BadResponse`."""
        return _LABELS[self.kind]


def _rebuild_failure(message: str, kind: FailureKind, reused: bool, answered: bool) -> HTTPFailure:
    return HTTPFailure(message, kind=kind, reused=reused, answered=answered)


def error_name(e: BaseException) -> str:
    """The name of an error in messages: an `HTTPFailure`'s `label`, else its class name.

    Example:
        >>> error_name(HTTPFailure("no data for 45 s", kind="read-timeout")), error_name(KeyError("k"))
        ('ReadTimeout', 'KeyError')
    """
    return e.label if isinstance(e, HTTPFailure) else type(e).__name__


def is_tls(url: str) -> bool:
    """True for an `https://` URL, whatever the case of its scheme.

    Example:
        >>> is_tls("HTTPS://example.test"), is_tls("http://example.test")
        (True, False)
    """
    return url[:6].lower() == "https:"


def ssl_context() -> ssl.SSLContext:
    """The verifying TLS context every https request uses: the default CA store, honouring
    `SSL_CERT_FILE` / `SSL_CERT_DIR`; certifi's bundle when the system has no CA store and certifi is
    installed. Built once per process and per value of those variables (loading a store takes ~20 ms).

    Example:
        >>> ssl_context().verify_mode == ssl.CERT_REQUIRED and ssl_context().check_hostname
        True
    """
    return _ssl_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.cache
def _ssl_context(_cert_file: str | None, _cert_dir: str | None) -> ssl.SSLContext:
    # The arguments are the cache key: create_default_context reads the variables itself.
    ctx = ssl.create_default_context()
    if not _has_ca_store(ctx):
        try:
            import certifi
        except ImportError:
            pass
        else:
            ctx.load_verify_locations(certifi.where())
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def _has_ca_store(ctx: ssl.SSLContext) -> bool:
    if ctx.cert_store_stats().get("x509_ca", 0):
        return True
    capath = ssl.get_default_verify_paths().capath
    try:
        return bool(capath and os.path.isdir(capath) and os.listdir(capath))
    except OSError:
        return False


async def _on_reuse(_session: Any, ctx: Any, _params: Any) -> None:
    # The request's `trace_request_ctx` (a namespace with `reused`) learns its connection was reused.
    if ctx.trace_request_ctx is not None:
        ctx.trace_request_ctx.reused = True


class _Pool:
    """The pooled aiohttp session of one `HTTPClient`, with the loop and process it belongs to (shared
    with the client's finalizer)."""

    __slots__ = ("loop", "pid", "session", "__weakref__")

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.pid: int | None = None
        self.session: aiohttp.ClientSession | None = None


_LIVE: weakref.WeakSet[_Pool] = weakref.WeakSet()
# aiohttp sessions of a parent process (after fork), kept referenced so that their finalizers never run
# here: closing them would unregister the parent's sockets from the epoll instance the child shares.
_FORKED: list[aiohttp.ClientSession] = []


def _dispose(pool: _Pool, wait_s: float = 0.0) -> None:
    """Close a pool's session from outside its loop (another loop, a finalizer, interpreter exit).

    On its loop when that loop runs (waited for up to `wait_s`, never from that loop's own thread); when
    it no longer runs, at once: closing a connector shuts its connections synchronously, and the
    awaitable its `close()` returns is stepped once so that it does not report itself as never awaited.
    """
    session, loop, pool.session = pool.session, pool.loop, None
    if session is None:
        return
    if pool.pid != os.getpid():
        _FORKED.append(session)
        return
    if loop is not None and loop.is_running():
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            future = asyncio.run_coroutine_threadsafe(session.close(), loop)
            if wait_s and not _on_loop(loop):
                with contextlib.suppress(Exception):
                    future.result(wait_s)
            return
    connector = session.connector
    session.detach()
    if connector is not None:
        with contextlib.suppress(StopIteration):
            connector.close().__await__().send(None)


def _on_loop(loop: asyncio.AbstractEventLoop | None) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


@atexit.register
def _settle_at_exit() -> None:
    # Clients still referenced at exit (a cache, the portal's) would each print aiohttp's "Unclosed client
    # session" when torn down. Runs before the portal stops (registered after it), so theirs close there.
    for session in _FORKED:
        session.detach()
    for pool in list(_LIVE):
        _dispose(pool, wait_s=1.0)


_WIRE_ERRORS = (aiohttp.ClientError, OSError, asyncio.TimeoutError)


def encode_json(body: Any) -> str:
    """How request bodies are encoded: compact, UTF-8 (not `\\u` escapes), no NaN (strict JSON).

    Example:
        >>> encode_json({"text": "é", "n": 1})
        '{"text":"é","n":1}'
    """
    return _json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _failure(e: BaseException, *, reused: bool, answered: bool) -> HTTPFailure:
    """The `HTTPFailure` for an aiohttp (or socket) error, given how far the request got."""
    text = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    if isinstance(e, aiohttp.ClientConnectorCertificateError):
        return HTTPFailure(
            f"the server's TLS certificate did not verify ({text}); point SSL_CERT_FILE at a CA bundle "
            f"that holds its issuer",
            kind="certificate",
        )
    if isinstance(e, (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError, aiohttp.InvalidURL)):
        return HTTPFailure(text, kind="connect")
    if isinstance(e, (aiohttp.SocketTimeoutError, asyncio.TimeoutError)):
        return HTTPFailure(text, kind="read-timeout", reused=reused, answered=answered)
    if isinstance(e, aiohttp.ClientPayloadError):
        return HTTPFailure(text, kind="cut", reused=reused, answered=True)
    if isinstance(e, aiohttp.ClientResponseError):
        return HTTPFailure(text, kind="bad-response", reused=reused, answered=True)
    if answered:
        return HTTPFailure(text, kind="cut", reused=reused, answered=True)
    return HTTPFailure(text, kind="no-response", reused=reused)


class HTTPClient:
    """An HTTP/1.1 client with a keep-alive connection pool (aiohttp), for one event loop at a time.

    Args:
        connect_timeout_s: TCP (and TLS) connect timeout.
        keepalive_s: how long an idle pooled connection may be reused.

    No total timeout of its own: deadlines are the caller's (anyio cancel scopes); `read_timeout_s` of a
    request bounds silence on the wire. Redirects are followed; no proxies from the environment.

    Example:
        >>> import anyio
        >>> from ormix.server import serve_in_thread
        >>> async def tools(url):
        ...     async with HTTPClient() as http:
        ...         r = await http.request("GET", url + "/echo/tools")
        ...         return [t["name"] for t in r.json()["tools"]]
        >>> with serve_in_thread(["local:echo"]) as srv:
        ...     anyio.run(tools, srv.url)
        ['echo', 'submit']
    """

    def __init__(self, *, connect_timeout_s: float = 10.0, keepalive_s: float = DEFAULT_KEEPALIVE_S) -> None:
        self.connect_timeout_s = connect_timeout_s
        self.keepalive_s = keepalive_s
        self._pool = _Pool()
        _LIVE.add(self._pool)
        # Dropped without aclose(): its connections are closed anyway (see the module docstring).
        weakref.finalize(self, _dispose, self._pool).atexit = False
        self._timeouts: dict[float | None, aiohttp.ClientTimeout] = {}

    def __repr__(self) -> str:
        return f"HTTPClient(connect_timeout_s={self.connect_timeout_s}, keepalive_s={self.keepalive_s})"

    async def __aenter__(self) -> HTTPClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _timeout(self, read_timeout_s: float | None) -> aiohttp.ClientTimeout:
        t = self._timeouts.get(read_timeout_s)
        if t is None:
            t = self._timeouts[read_timeout_s] = aiohttp.ClientTimeout(
                total=None, sock_connect=self.connect_timeout_s, sock_read=read_timeout_s
            )
        return t

    def _session(self) -> aiohttp.ClientSession:
        pool = self._pool
        loop = asyncio.get_running_loop()
        if loop is not pool.loop or pool.pid != os.getpid():
            _dispose(pool)  # another loop's (or, after fork, the parent's)
            pool.loop, pool.pid = loop, os.getpid()
        if pool.session is None:
            trace = aiohttp.TraceConfig()
            trace.on_connection_reuseconn.append(_on_reuse)
            pool.session = self._new_session(
                aiohttp.TCPConnector(limit=0, keepalive_timeout=self.keepalive_s), trace_configs=[trace]
            )
        return pool.session

    def _new_session(self, connector: aiohttp.BaseConnector, **kwargs: Any) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            connector=connector, timeout=self._timeout(None), json_serialize=encode_json, **kwargs
        )

    async def _exchange(
        self,
        method: str,
        url: str,
        json: Any,
        headers: Mapping[str, str] | None,
        read_timeout_s: float | None,
        fresh: bool,
        on_text: Callable[[str], None] | None,
    ) -> Response:
        args = (method, url, json, headers, read_timeout_s, on_text)
        if fresh:  # a session of its own, whose one connection closes with it (rare: resends)
            async with self._new_session(aiohttp.TCPConnector(limit=0, force_close=True)) as session:
                return await self._send(session, *args)
        return await self._send(self._session(), *args)

    async def _send(
        self,
        session: aiohttp.ClientSession,
        method: str,
        url: str,
        json: Any,
        headers: Mapping[str, str] | None,
        read_timeout_s: float | None,
        on_text: Callable[[str], None] | None,
    ) -> Response:
        attempt = types.SimpleNamespace(reused=False)
        try:
            resp = await session.request(
                method,
                url,
                json=json,
                headers=headers,
                timeout=self._timeout(read_timeout_s),
                ssl=ssl_context() if is_tls(url) else True,
                trace_request_ctx=attempt,
            )
        except _WIRE_ERRORS as e:
            raise _failure(e, reused=attempt.reused, answered=False) from e
        try:
            if on_text is None or resp.status != 200:
                return Response(resp.status, resp.headers, await resp.read(), attempt.reused)
            decode = codecs.getincrementaldecoder("utf-8")("replace").decode
            async for piece in resp.content.iter_any():
                if text := decode(piece):
                    on_text(text)
            if tail := decode(b"", True):
                on_text(tail)
            return Response(resp.status, resp.headers, b"", attempt.reused)
        except _WIRE_ERRORS as e:
            raise _failure(e, reused=attempt.reused, answered=True) from e
        finally:
            resp.release()

    async def request(
        self,
        method: str,
        url: str,
        *,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        read_timeout_s: float | None = None,
        fresh: bool = False,
    ) -> Response:
        """Send a request (`json` is encoded as the body when not None) and read the whole answer.

        `fresh=True` sends it on a connection opened for it alone. Raises `HTTPFailure` when no complete
        answer arrives; any HTTP status is an answer (returned, not raised).

        Example:
            >>> import anyio
            >>> from ormix.server import serve_in_thread
            >>> async def num_tasks(url):
            ...     async with HTTPClient() as http:
            ...         r = await http.request("POST", url + "/echo/num_tasks", json={"split": "train"})
            ...         return r.status_code, r.json()
            >>> with serve_in_thread(["local:echo"]) as srv:
            ...     anyio.run(num_tasks, srv.url)
            (200, {'num_tasks': 16})
        """
        return await self._exchange(method, url, json, headers, read_timeout_s, fresh, None)

    async def stream(
        self,
        method: str,
        url: str,
        *,
        on_text: Callable[[str], None],
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        read_timeout_s: float | None = None,
        fresh: bool = False,
    ) -> Response:
        """Send a request; hand the body of a 200 answer to `on_text` as UTF-8 text, piece by piece as it
        arrives (nothing of it is kept here), and return the answer with an empty `content`. Any other
        status is read whole and returned. `read_timeout_s` bounds the silence between two pieces.

        Raises `HTTPFailure` as `request` does; a failure after the head arrived has `answered=True`.

        Example:
            >>> import anyio
            >>> from ormix.server import serve_in_thread
            >>> async def call_echo(url):
            ...     sid = {"X-Session-ID": "doc-1"}
            ...     async with HTTPClient() as http:
            ...         body = {"env_name": "echo", "split": "train", "index": 0}
            ...         await http.request("POST", url + "/create", json=body, headers=sid)
            ...         pieces = []
            ...         await http.stream("POST", url + "/echo/call", on_text=pieces.append, headers=sid,
            ...                           json={"name": "echo", "input": {"text": "hi"}})
            ...         await http.request("POST", url + "/delete", headers=sid)
            ...     return [line for line in "".join(pieces).splitlines() if line.startswith("event:")]
            >>> with serve_in_thread(["local:echo"]) as srv:     # the answer is a server-sent event stream
            ...     anyio.run(call_echo, srv.url)
            ['event: task_id', 'event: end']
        """
        return await self._exchange(method, url, json, headers, read_timeout_s, fresh, on_text)

    async def aclose(self) -> None:
        """Close this client's connections. Idempotent; the client can be used again afterwards."""
        pool = self._pool
        session = pool.session
        if session is not None and _on_loop(pool.loop) and pool.pid == os.getpid():
            pool.session = None
            await session.close()
        else:
            _dispose(pool)
