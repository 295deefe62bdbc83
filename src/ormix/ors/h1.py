"""A lean HTTP/1.1 client for the per-session hot path: plain TCP, keep-alive, one request at a time.

Why not httpx here: on loopback an ORS tool call costs the server ~1.3 ms of CPU, and httpx/httpcore
add ~0.5 ms of client CPU per call plus connection-pool contention when 32 sessions share a pool; even
h11 alone costs ~0.2 ms per call. This module parses responses with a small hand-written parser fed from
an `asyncio.Protocol` (no stream reader, no per-event objects) and gives each session its own connection.

Scope, on purpose: `http://` only (TLS and the hosted platform stay on httpx), no redirects, no
compression, no proxies, no request pipelining. Everything else a keep-alive client must get right is
here: `Content-Length`, chunked and close-delimited bodies, `1xx` interim answers, `Connection: close`,
stale idle connections, write back-pressure, and read timeouts. Failures raise httpx's exception
classes (`ConnectError`, `ReadTimeout`, `RemoteProtocolError`, ...) so callers share one error
vocabulary with the httpx path.

The objects that `Session` and `Transport` use (`H1Session.request` / `H1Session.stream` and
`H1Response`) mirror the small subset of `httpx.AsyncClient` / `httpx.Response` they need.

Example:
    >>> p = ResponseParser(); p.start()
    >>> p.feed(b"HTTP/1.1 200 OK\\r\\ncontent-length: 2\\r\\n\\r\\nok")
    >>> p.status, p.take(), p.done
    (200, b'ok', True)
"""

from __future__ import annotations

import asyncio
import codecs
import json
import os
import socket
import time
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlsplit

import httpx

__all__ = ["H1Connection", "H1Pool", "H1Response", "H1Session", "Headers", "ResponseParser"]

# A connection idle for longer than this is not reused: uvicorn closes idle keep-alive connections
# after 5 s by default (ORS servers set 60 s), and a request written just as the server closes the
# socket fails with no answer: for a tool call that cannot be retried safely. A fresh connect costs one
# round trip, nothing next to a pause of seconds.
IDLE_REUSE_S = 4.0
MAX_HEAD_BYTES = 64 * 1024
# Pause reading when this much body is buffered and not consumed (a slow consumer of a huge output).
_HIGH_WATER = 4 * 1024 * 1024

# Parser states.
_IDLE, _HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_CRLF, _TRAILERS, _UNTIL_CLOSE, _DONE = range(9)
_HEX = frozenset(b"0123456789abcdefABCDEF")


class Headers(dict):
    """Response headers: names lower-cased; `get`, `[]` and `in` ignore case. Repeated fields are joined
    with ", " (RFC 9110 5.3).

    Example:
        >>> h = Headers({"retry-after": "3"}); h.get("Retry-After"), "RETRY-AFTER" in h
        ('3', True)
    """

    __slots__ = ()

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return dict.get(self, key.lower(), default)

    def __getitem__(self, key: str) -> str:
        return dict.__getitem__(self, key.lower())

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key.lower() if isinstance(key, str) else key)


class ProtocolViolation(Exception):
    """The server's bytes are not a valid HTTP/1.1 response."""


class ResponseParser:
    """Sans-IO parser of the responses on one HTTP/1.1 connection.

    `start()` arms it for the answer to one request; `feed(bytes)` consumes what arrived; then `status`,
    `headers` (`head_done`), body bytes (`take()`) and `done` report progress. `keep_alive` says whether
    the connection may carry another request afterwards. Raises `ProtocolViolation` on malformed input.

    Example:
        >>> p = ResponseParser(); p.start()
        >>> p.feed(b"HTTP/1.1 200 OK\\r\\ntransfer-encoding: chunked\\r\\n\\r\\n3\\r\\nabc\\r\\n0\\r\\n\\r\\n")
        >>> p.take(), p.done, p.keep_alive
        (b'abc', True, True)
    """

    __slots__ = (
        "_buf",
        "_state",
        "_remaining",
        "_head_only",
        "status",
        "reason",
        "headers",
        "head_done",
        "done",
        "keep_alive",
        "_pieces",
        "buffered",
        "http10",
    )

    def __init__(self) -> None:
        self._buf = bytearray()
        self._state = _IDLE
        self._remaining = 0
        self._head_only = False
        self.status = 0
        self.reason = ""
        self.headers: Headers = Headers()
        self.head_done = False
        self.done = False
        self.keep_alive = True
        self._pieces: list[bytes] = []
        self.buffered = 0
        self.http10 = False

    @property
    def idle(self) -> bool:
        """No response outstanding and no stray bytes buffered: the connection can carry a request."""
        return (self._state == _IDLE or self._state == _DONE) and not self._buf and self.keep_alive

    def start(self, head_request: bool = False) -> None:
        """Expect the response to a new request (`head_request`: it was a HEAD, so no body)."""
        if not self.idle:
            raise RuntimeError("the connection still has a response in progress")
        self._state = _HEAD
        self._head_only = head_request
        self.status = 0
        self.reason = ""
        self.headers = Headers()
        self.head_done = False
        self.done = False
        self._pieces = []
        self.buffered = 0

    def take(self) -> bytes:
        """The body bytes received since the last `take()`."""
        pieces = self._pieces
        if not pieces:
            return b""
        self._pieces = []
        self.buffered = 0
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def feed_eof(self) -> None:
        """The server closed its side: ends a close-delimited body, otherwise leaves `done` False."""
        if self._state == _UNTIL_CLOSE:
            self._finish()
        self.keep_alive = False

    def _finish(self) -> None:
        self._state = _DONE
        self.done = True

    def _body(self, piece: bytes) -> None:
        self._pieces.append(piece)
        self.buffered += len(piece)

    def feed(self, data: bytes) -> None:
        """Consume bytes from the connection."""
        buf = self._buf
        buf += data
        while buf:
            st = self._state
            if st == _CHUNK_DATA or st == _LENGTH:
                n = self._remaining
                if len(buf) <= n:
                    piece = bytes(buf)
                    buf.clear()
                else:
                    piece = bytes(buf[:n])
                    del buf[:n]
                self._body(piece)
                n -= len(piece)
                self._remaining = n
                if n == 0:
                    if st == _LENGTH:
                        self._finish()
                    else:
                        self._state = _CHUNK_CRLF
            elif st == _CHUNK_SIZE:
                i = buf.find(b"\r\n")
                if i < 0:
                    if len(buf) > 1024:
                        raise ProtocolViolation("chunk size line too long")
                    return
                size_text = bytes(buf[:i]).split(b";", 1)[0].strip(b" \t")
                if not size_text or len(size_text) > 16 or not _HEX.issuperset(size_text):
                    raise ProtocolViolation(f"bad chunk size line {bytes(buf[:i])[:40]!r}")
                del buf[: i + 2]
                size = int(size_text, 16)
                if size == 0:
                    self._state = _TRAILERS
                else:
                    self._remaining = size
                    self._state = _CHUNK_DATA
            elif st == _CHUNK_CRLF:
                if len(buf) < 2:
                    if buf[0] != 13:
                        raise ProtocolViolation("chunk data not followed by CRLF")
                    return
                if buf[0] != 13 or buf[1] != 10:
                    raise ProtocolViolation("chunk data not followed by CRLF")
                del buf[:2]
                self._state = _CHUNK_SIZE
            elif st == _HEAD:
                i = buf.find(b"\r\n\r\n")
                if i < 0:
                    if len(buf) > MAX_HEAD_BYTES:
                        raise ProtocolViolation("response head larger than 64 KiB")
                    return
                head = bytes(buf[:i])
                del buf[: i + 4]
                self._head(head)
            elif st == _TRAILERS:
                i = buf.find(b"\r\n")
                if i < 0:
                    if len(buf) > MAX_HEAD_BYTES:
                        raise ProtocolViolation("chunked trailers larger than 64 KiB")
                    return
                del buf[: i + 2]
                if i == 0:
                    self._finish()
            elif st == _UNTIL_CLOSE:
                self._body(bytes(buf))
                buf.clear()
            else:
                # Bytes with no request outstanding (_IDLE / _DONE): the stream is out of step; the
                # connection must not carry another request.
                self.keep_alive = False
                return

    def _head(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if (
            len(parts) < 2
            or not parts[0].startswith(b"HTTP/1.")
            or len(parts[1]) != 3
            or not parts[1].isdigit()
        ):
            raise ProtocolViolation(f"bad status line {lines[0][:80]!r}")
        status = int(parts[1])
        headers = Headers()
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep or not name or name[-1] in b" \t" or line[0] in b" \t":
                raise ProtocolViolation(f"bad header line {line[:80]!r}")
            key = name.decode("latin-1").lower()
            text = value.strip(b" \t").decode("latin-1")
            old = dict.get(headers, key)
            dict.__setitem__(headers, key, text if old is None else f"{old}, {text}")
        if 100 <= status < 200:
            if status == 101:
                raise ProtocolViolation("unexpected 101 Switching Protocols")
            return  # interim answer (100 Continue, 103 Early Hints): the real one follows
        self.status = status
        self.reason = parts[2].decode("latin-1") if len(parts) > 2 else ""
        self.headers = headers
        self.head_done = True
        self.http10 = parts[0] == b"HTTP/1.0"
        # HTTP/1.0 answers are never reused (as h11 does): keep-alive there is opt-in and rare.
        keep = not self.http10 and "close" not in {
            t.strip().lower() for t in dict.get(headers, "connection", "").split(",")
        }
        te = dict.get(headers, "transfer-encoding")
        cl = dict.get(headers, "content-length")
        if self._head_only or status == 204 or status == 304:
            self.keep_alive = keep
            self._finish()
        elif te is not None:
            if te.rsplit(",", 1)[-1].strip().lower() == "chunked":
                self._state = _CHUNK_SIZE
                # RFC 9112 6.3: both framings present is a smuggling risk; do not reuse the connection.
                self.keep_alive = keep and cl is None
            else:
                self._state = _UNTIL_CLOSE
                self.keep_alive = False
        elif cl is not None:
            values = {v.strip() for v in cl.split(",")}
            value = values.pop()
            if values or not value.isdigit():
                raise ProtocolViolation(f"bad Content-Length {cl[:40]!r}")
            self.keep_alive = keep
            self._remaining = int(value)
            if self._remaining == 0:
                self._finish()
            else:
                self._state = _LENGTH
        else:
            self._state = _UNTIL_CLOSE
            self.keep_alive = False


class H1Connection(asyncio.Protocol):
    """One keep-alive TCP connection driven as an `asyncio.Protocol`; one request at a time.

    Open with `await H1Connection.open(host, port, connect_timeout_s)`. Callers normally go through
    `H1Session`, which picks connections and returns them.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._transport: asyncio.Transport | None = None
        self.parser = ResponseParser()
        self._waiter: asyncio.Future | None = None
        self._drain: asyncio.Future | None = None
        self._write_paused = False
        self._read_paused = False
        self._exc: BaseException | None = None
        self.closed = False
        self.eof = False
        self.busy = False
        self.requests = 0
        self.last_used = time.monotonic()
        # Body consumer called from data_received (see `H1Session.sse`); None: bytes are buffered.
        self.sink: Callable[[bytes], None] | None = None
        self._sink_exc: BaseException | None = None
        # Stall detection: one timer re-armed lazily instead of one per wait (they are many per second).
        self._rx_at = loop.time()
        self._watch: asyncio.TimerHandle | None = None
        self._watch_s: float | None = None

    @classmethod
    async def open(cls, host: str, port: int, connect_timeout_s: float | None) -> H1Connection:
        """Connect (TCP_NODELAY) or raise `httpx.ConnectError` / `httpx.ConnectTimeout`."""
        loop = asyncio.get_running_loop()
        conn = cls(loop)
        try:
            fut = loop.create_connection(lambda: conn, host, port)
            if connect_timeout_s is None:
                await fut
            else:
                await asyncio.wait_for(fut, connect_timeout_s)
        except (TimeoutError, asyncio.TimeoutError) as e:
            raise httpx.ConnectTimeout(
                f"connecting to {host}:{port} timed out after {connect_timeout_s}s"
            ) from e
        except OSError as e:
            raise httpx.ConnectError(f"cannot connect to {host}:{port}: {e}") from e
        return conn

    # ---------------------------------------------------------------- asyncio.Protocol callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                # Small request, small answer, strictly alternating: Nagle would hold our writes.
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass

    def data_received(self, data: bytes) -> None:
        self._rx_at = self._loop.time()
        p = self.parser
        try:
            p.feed(data)
        except ProtocolViolation as e:
            self._fail(httpx.RemoteProtocolError(f"invalid HTTP response from the server: {e}"))
            return
        sink = self.sink
        if sink is not None:
            # A 200 body goes to the sink now; another status is buffered for the caller. Either way the
            # waiting task wakes once, when the answer is complete.
            if p.buffered and p.status == 200:
                try:
                    sink(p.take())
                except Exception as e:  # noqa: BLE001 - re-raised in the waiting task
                    self._sink_exc = e
                    self._fail(e)
                    return
            if p.done:
                self._wake()
            return
        if p.buffered > _HIGH_WATER and not self._read_paused and self._transport is not None:
            self._read_paused = True
            self._transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self.parser.feed_eof()
        self._wake()
        return False  # let the transport close

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.eof = True
        self.parser.keep_alive = False
        if exc is not None and self._exc is None:
            self._exc = exc
        self._wake()
        d = self._drain
        if d is not None and not d.done():
            d.set_result(None)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        d = self._drain
        if d is not None and not d.done():
            d.set_result(None)

    # ---------------------------------------------------------------- internals

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _fail(self, exc: BaseException) -> None:
        if self._exc is None:
            self._exc = exc
        self.parser.keep_alive = False
        self.close()
        self._wake()

    def _lost(self) -> httpx.TransportError:
        exc = self._exc
        if isinstance(exc, httpx.TransportError):
            return exc
        why = f" ({type(exc).__name__}: {exc})" if exc is not None else ""
        return httpx.RemoteProtocolError(f"the server closed the connection before the response ended{why}")

    async def _wait(self, timeout_s: float | None) -> None:
        fut = self._loop.create_future()
        self._waiter = fut
        self._watch_s = timeout_s
        if timeout_s is not None and self._watch is None:
            self._watch = self._loop.call_at(self._rx_at + timeout_s, self._check_stall)
        try:
            await fut
        finally:
            self._waiter = None

    def _check_stall(self) -> None:
        self._watch = None
        w, limit = self._waiter, self._watch_s
        if w is None or w.done() or limit is None:
            return  # nobody waiting: the next wait re-arms
        due = self._rx_at + limit
        if self._loop.time() >= due:
            w.set_exception(httpx.ReadTimeout(f"no data from the server for {limit:g}s"))
        else:
            self._watch = self._loop.call_at(due, self._check_stall)

    # ---------------------------------------------------------------- API

    def reusable(self, now: float | None = None) -> bool:
        """Idle, open, in step with the server, and not idle long enough to risk the server closing it."""
        if self.closed or self.eof or self.busy or not self.parser.idle:
            return False
        return ((time.monotonic() if now is None else now) - self.last_used) < IDLE_REUSE_S

    async def send(self, data: bytes, head_request: bool = False, write_timeout_s: float = 60.0) -> None:
        """Write one whole request (head and body) and arm the parser for its answer."""
        if self.closed or self.eof:
            raise self._lost()
        self.parser.start(head_request)
        self.requests += 1
        self._rx_at = self._loop.time()
        self._transport.write(data)  # type: ignore[union-attr]
        if self._write_paused:
            fut = self._loop.create_future()
            self._drain = fut
            timer = self._loop.call_later(
                write_timeout_s,
                lambda: (
                    fut.done()
                    or fut.set_exception(
                        httpx.WriteTimeout(f"could not send the request within {write_timeout_s:g}s")
                    )
                ),
            )
            try:
                await fut
            finally:
                self._drain = None
                timer.cancel()
            if self.closed:
                raise self._lost()

    async def receive_head(self, read_timeout_s: float | None) -> None:
        """Wait until the response's status line and headers are in."""
        p = self.parser
        while not p.head_done:
            if self._exc is not None or self.closed or self.eof:
                if not p.head_done:
                    raise self._lost()
            await self._wait(read_timeout_s)

    async def receive_body(self, read_timeout_s: float | None) -> bytes | None:
        """The next body bytes (possibly several network reads joined), or None when the body ended."""
        p = self.parser
        while True:
            if p.buffered:
                data = p.take()
                if self._read_paused and self._transport is not None:
                    self._read_paused = False
                    self._transport.resume_reading()
                return data
            if p.done:
                self.last_used = time.monotonic()
                return None
            if self._exc is not None or self.closed or self.eof:
                raise self._lost()
            await self._wait(read_timeout_s)

    async def receive_all(self, read_timeout_s: float | None) -> None:
        """Wait until the whole answer is in (sink mode: the body went to `sink`, or is buffered when the
        status is not 200)."""
        p = self.parser
        while not p.done:
            if self._sink_exc is not None:
                raise self._sink_exc
            if self._exc is not None or self.closed or self.eof:
                raise self._lost()
            await self._wait(read_timeout_s)
        if self._sink_exc is not None:
            raise self._sink_exc
        self.last_used = time.monotonic()

    def close(self) -> None:
        """Close the socket (idempotent)."""
        self.parser.keep_alive = False
        w, self._watch = self._watch, None
        if w is not None:
            w.cancel()
        t = self._transport
        if t is not None and not self.closed:
            self.closed = True
            t.close()


class H1Response:
    """An answer on an `H1Connection`, shaped like the parts of `httpx.Response` ormix uses.

    `status_code`, `headers` (case-insensitive), `aread()`, `aiter_bytes()`, `aiter_text()`, and after a
    read `content`, `text`, `json()`.
    """

    __slots__ = ("status_code", "reason_phrase", "headers", "_conn", "_read_timeout_s", "_content")

    def __init__(self, conn: H1Connection, read_timeout_s: float | None) -> None:
        p = conn.parser
        self.status_code = p.status
        self.reason_phrase = p.reason
        self.headers = p.headers
        self._conn = conn
        self._read_timeout_s = read_timeout_s
        self._content: bytes | None = None

    async def aread(self) -> bytes:
        """The whole body (read once, then cached)."""
        if self._content is None:
            pieces = []
            conn, timeout = self._conn, self._read_timeout_s
            while (piece := await conn.receive_body(timeout)) is not None:
                pieces.append(piece)
            self._content = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        return self._content

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """Body bytes as they arrive."""
        conn, timeout = self._conn, self._read_timeout_s
        while (piece := await conn.receive_body(timeout)) is not None:
            yield piece

    async def aiter_text(self) -> AsyncIterator[str]:
        """Body text as it arrives (UTF-8, the only encoding SSE allows; split characters are rejoined)."""
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        conn, timeout = self._conn, self._read_timeout_s
        while (piece := await conn.receive_body(timeout)) is not None:
            text = decoder.decode(piece)
            if text:
                yield text
        tail = decoder.decode(b"", final=True)
        if tail:
            yield tail

    @property
    def content(self) -> bytes:
        if self._content is None:
            raise RuntimeError("the body was not read; await aread() first")
        return self._content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


class H1Pool:
    """Idle keep-alive connections to one `http://host:port` server, bound to one event loop and process.

    Sessions take a connection at open and give it back at close, so sequential episodes reuse warm
    sockets and concurrent sessions never wait on each other.

    Example:
        >>> pool = H1Pool("http://127.0.0.1:8080", connect_timeout_s=10.0)
        >>> pool.host_header
        '127.0.0.1:8080'
    """

    def __init__(self, base_url: str, connect_timeout_s: float | None, max_idle: int = 256) -> None:
        u = urlsplit(base_url)
        if u.scheme != "http" or not u.hostname:
            raise ValueError(f"H1Pool serves plain http:// URLs only, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        # Requests name the path from the origin on: a server mounted under a prefix keeps its prefix.
        self.origin = f"{u.scheme}://{u.netloc}"
        self.host = u.hostname
        self.port = u.port or 80
        self.host_header = u.netloc
        self.connect_timeout_s = connect_timeout_s
        self.max_idle = max_idle
        self._idle: list[H1Connection] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = os.getpid()

    def _check(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._pid != os.getpid():
            # Connections of another loop or process (fork) cannot be driven here; abandon them.
            self._idle = []
            self._loop = loop
            self._pid = os.getpid()
        return loop

    async def acquire(self) -> H1Connection:
        """An idle reusable connection, else a new one."""
        self._check()
        idle = self._idle
        if idle:
            now = time.monotonic()
            while idle:
                c = idle.pop()
                if c.reusable(now):
                    return c
                c.close()
        return await H1Connection.open(self.host, self.port, self.connect_timeout_s)

    def release(self, conn: H1Connection) -> None:
        """Keep `conn` for reuse when it is clean, else close it."""
        if (
            conn.reusable()
            and len(self._idle) < self.max_idle
            and self._loop is conn._loop
            and self._pid == os.getpid()
        ):
            self._idle.append(conn)
        else:
            conn.close()

    def close(self) -> None:
        """Close every idle connection (connections in use close when their session gives them back)."""
        idle, self._idle = self._idle, []
        # Only on the loop that owns them: closing a transport from another loop (or after fork) would
        # act on a loop that is not running here. Abandoned sockets close with their loop.
        if self._pid == os.getpid() and self._loop is asyncio._get_running_loop():
            for c in idle:
                c.close()


def _encode_json(body: Any) -> bytes:
    # Same encoding as httpx 0.28: compact, UTF-8, no NaN.
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


_METHODS_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})


class H1Session:
    """The HTTP side of one ORS session on plain HTTP: a connection of its own, kept for its lifetime.

    A second request while the session's connection is busy (a keepalive ping during a long tool call,
    or user code running two requests of one session at once) borrows another connection from the pool:
    a connection carries one request at a time. Mirrors `httpx.AsyncClient.request` / `.stream` for
    the arguments ormix uses; raises httpx's exception classes.

    Example:
        >>> async def call(pool):                                                   # doctest: +SKIP
        ...     http = H1Session(pool)
        ...     resp = await http.request("POST", pool.base_url + "/ping", headers={"X-Session-ID": "s"})
        ...     return resp.status_code
    """

    def __init__(self, pool: H1Pool) -> None:
        self.pool = pool
        self.conn: H1Connection | None = None  # the session's own connection
        self._prefix = pool.origin
        self._host_line = f"Host: {pool.host_header}\r\n"

    def _encode(self, method: str, url: str, json_body: Any, headers: dict[str, str] | None) -> bytes:
        if not url.startswith(self._prefix):
            raise ValueError(f"{url!r} is not on {self._prefix}")
        path = url[len(self._prefix) :] or "/"
        if path[0] != "/":
            raise ValueError(f"{url!r} is not on {self._prefix}")
        lines = [method, " ", path, " HTTP/1.1\r\n", self._host_line]
        if headers:
            for k, v in headers.items():
                if "\n" in v or "\r" in v or "\n" in k or "\r" in k:
                    raise ValueError(f"header {k!r} holds a line break; refusing to send it")
                lines += (k, ": ", v, "\r\n")
        if json_body is not None:
            body = _encode_json(json_body)
            lines += ("Content-Type: application/json\r\nContent-Length: ", str(len(body)), "\r\n\r\n")
            try:
                return "".join(lines).encode("latin-1") + body
            except UnicodeEncodeError as e:
                raise ValueError(f"a request header is not Latin-1 text: {e}") from None
        lines.append("Content-Length: 0\r\n\r\n" if method in _METHODS_WITH_BODY else "\r\n")
        try:
            return "".join(lines).encode("latin-1")
        except UnicodeEncodeError as e:
            raise ValueError(f"a request header is not Latin-1 text: {e}") from None

    async def _take(self) -> H1Connection:
        c = self.conn
        if c is not None:
            if not c.busy:
                if c.reusable():
                    c.busy = True
                    return c
                c.close()
                self.conn = None
        else:
            c = None
        new = await self.pool.acquire()
        if self.conn is None:
            self.conn = new
        new.busy = True
        return new

    def _give(self, conn: H1Connection) -> None:
        conn.busy = False
        conn.last_used = time.monotonic()
        if conn is self.conn:
            if not conn.reusable():
                conn.close()
                self.conn = None
        else:
            self.pool.release(conn)

    async def _roundtrip(
        self, method: str, data: bytes, read_timeout_s: float | None
    ) -> tuple[H1Connection, H1Response]:
        conn = await self._take()
        try:
            await conn.send(data, method == "HEAD")
            await conn.receive_head(read_timeout_s)
        except BaseException:
            conn.close()
            self._give(conn)
            raise
        return conn, H1Response(conn, read_timeout_s)

    async def request(
        self,
        method: str,
        url: str,
        *,
        json: Any = None,
        headers: dict[str, str] | None = None,
        timeout: httpx.Timeout | None = None,
    ) -> H1Response:
        """Send a request and read its whole answer."""
        data = self._encode(method, url, json, headers)
        read_timeout = timeout.read if timeout is not None else None
        conn, resp = await self._roundtrip(method, data, read_timeout)
        try:
            await resp.aread()
        finally:
            self._give(conn)
        return resp

    def stream(
        self,
        method: str,
        url: str,
        *,
        json: Any = None,
        headers: dict[str, str] | None = None,
        timeout: httpx.Timeout | None = None,
    ) -> _Stream:
        """`async with http.stream(...) as resp:` the answer with its body still to read."""
        return _Stream(
            self,
            method,
            self._encode(method, url, json, headers),
            timeout.read if timeout is not None else None,
        )

    async def sse(
        self,
        url: str,
        json_body: Any,
        headers: dict[str, str] | None,
        read_timeout_s: float | None,
        sink: Callable[[bytes], None],
    ) -> H1Response | None:
        """POST `json_body` and hand the 200 answer's body to `sink(bytes)` as it arrives, from the
        connection's data callback (no task switch per network read). Returns None for a 200 answer,
        else the response with its body read. `sink` must not block; what it raises is re-raised here.
        """
        data = self._encode("POST", url, json_body, headers)
        conn = await self._take()
        resp = None
        try:
            conn.sink = sink
            await conn.send(data)
            await conn.receive_all(read_timeout_s)
            if conn.parser.status != 200:
                resp = H1Response(conn, read_timeout_s)
                resp._content = conn.parser.take()
        except BaseException:
            conn.close()
            raise
        finally:
            conn.sink = None
            self._give(conn)
        return resp

    def release(self) -> None:
        """Give the session's connection back to the pool (at session close)."""
        c, self.conn = self.conn, None
        if c is not None and not c.busy:
            self.pool.release(c)
        elif c is not None:
            c.close()


class _Stream:
    __slots__ = ("_http", "_method", "_data", "_timeout", "_conn")

    def __init__(self, http: H1Session, method: str, data: bytes, timeout: float | None) -> None:
        self._http = http
        self._method = method
        self._data = data
        self._timeout = timeout
        self._conn: H1Connection | None = None

    async def __aenter__(self) -> H1Response:
        self._conn, resp = await self._http._roundtrip(self._method, self._data, self._timeout)
        return resp

    async def __aexit__(self, *exc: object) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            # A body left unread leaves the parser mid-response: `_give` then closes the connection.
            self._http._give(conn)
