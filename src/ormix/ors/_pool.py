"""`ServerPool`: one environment on several ORS servers, driven as one client.

A self-hosted deployment runs one ORS server per machine (or `ormix serve --workers N` runs N on one): a
member lists them all (`targets: [...]`) and its sessions spread over them. The pool answers what
`ORSClient` answers (task lists, tools, sessions), with these rules:

- **least busy**: a session opens on the server in rotation with the fewest sessions open or opening (ties
  round-robin), and **stays there**: every call, ping and the close of a session go to its own server;
- **out of rotation**: a background prober sends `GET /health` to every server every `probe_interval_s`
  (with the key, `X-API-Key`, when the member has one). A server that refuses the connection, answers
  non-200, or times out twice in a row (`probe_timeout_s`) is taken out of rotation, and the calls in flight
  on it end at once with a `TransportError` (their rollouts are `error` / `transport`, not left to run into
  their deadline); its sessions close without waiting on it. A failed open, or a call that failed to reach
  its server or ran past its deadline, makes its server due for a probe at once;
- **probed back in**: a server out of rotation is probed again after 1 s, 2 s, 4 s, ... (at most 30 s), and
  one good probe brings it back;
- task lists and tool surfaces come from any server in rotation (the servers serve the same environment).

Every decision (which server, when out, when back) is `ormix.ors._balance`'s, which does no I/O. `stats()`
tells, per server, whether it is in rotation and how many sessions it holds and has held.

Example:
    >>> import anyio
    >>> from ormix.server import serve_in_thread
    >>> async def spread(urls):
    ...     async with ServerPool([Endpoint.for_url(u, "echo") for u in urls]) as pool:
    ...         sessions = [await pool.open_session(split="train", index=i) for i in range(4)]
    ...         servers = sorted(s.server for s in sessions)
    ...         for s in sessions:
    ...             await s.close()
    ...         return servers
    >>> with serve_in_thread(["local:echo"]) as a, serve_in_thread(["local:echo"]) as b:
    ...     sorted(set(anyio.run(spread, [a.url, b.url]))) == sorted([a.url, b.url])
    True
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import anyio.abc

from ormix.ors import _bridge as bridge
from ormix.ors._balance import ProbeResult, Rotation, pick_server
from ormix.ors._client import DEFAULT_MAX_KEPT_CHARS, ORSClient
from ormix.ors._endpoint import Endpoint
from ormix.ors._errors import DeadlineExceeded, ORSError, TransportError
from ormix.ors._http import HTTPClient, HTTPFailure
from ormix.ors._models import Split, ToolSpec
from ormix.ors._session import Session

logger = logging.getLogger("ormix.ors")

T = TypeVar("T")


@dataclass(eq=False)
class PoolServer:
    """One server of a `ServerPool`: its client, its place in the rotation and what it holds."""

    endpoint: Endpoint
    client: ORSClient
    rotation: Rotation
    #: Sessions open or being opened on it now (what "least busy" compares).
    active: int = 0
    #: Sessions opened on it so far.
    opened: int = 0
    #: Why it was last taken out of rotation.
    down_reason: str | None = None
    #: Due for a probe as soon as the prober wakes (a request to it just failed).
    suspect: bool = False
    # Cancel scopes (with their loops) of the requests in flight on it, cancelled when it leaves the rotation.
    inflight: set[tuple[anyio.CancelScope, asyncio.AbstractEventLoop]] = field(default_factory=set)

    @property
    def url(self) -> str:
        """The server's URL."""
        return self.endpoint.session_url

    def stats(self) -> dict[str, Any]:
        """What a metric or a message says about this server."""
        return {
            "url": self.url,
            "in_rotation": self.rotation.up,
            "sessions": self.active,
            "opened": self.opened,
            "downs": self.rotation.downs,
        }


class ServerPool:
    """Several ORS servers of one environment as one client (see the module): sessions spread least-busy,
    stay on their server, and a server that stops answering leaves the rotation until it answers again.

    Args:
        endpoints: the servers (`Endpoint.for_url`), all serving the same environment.
        timeout_s, connect_timeout_s, retries, ping_interval_s, max_concurrency, max_kept_chars: as for
            `ORSClient` (each server gets one).
        probe_interval_s: period of the health probes (default: `ping_interval_s`, else 10 s).
        probe_timeout_s: how long a probe waits for `/health` (default: a quarter of `timeout_s`, within
            0.5 s to 5 s; two in a row time out before a server leaves the rotation).

    Example:
        >>> pool = ServerPool([Endpoint.for_url(u, "echo") for u in ("http://h1:1", "http://h2:1")])
        >>> [s["url"] for s in pool.stats()], pool.probe_interval_s
        (['http://h1:1', 'http://h2:1'], 10.0)
    """

    def __init__(
        self,
        endpoints: Sequence[Endpoint],
        *,
        timeout_s: float | None = 300.0,
        open_timeout_s: float | None = None,
        connect_timeout_s: float = 10.0,
        retries: int = 3,
        ping_interval_s: float | None = 10.0,
        max_concurrency: int = 16,
        max_kept_chars: int | None = DEFAULT_MAX_KEPT_CHARS,
        probe_interval_s: float | None = None,
        probe_timeout_s: float | None = None,
    ) -> None:
        if not endpoints:
            raise ValueError("a ServerPool needs at least one endpoint")
        self.timeout_s = timeout_s
        self.probe_interval_s = float(probe_interval_s or ping_interval_s or 10.0)
        # Two probes in a row time out before a server leaves the rotation: with a quarter of the call
        # deadline each (0.5 s to 5 s), a hung server's calls end well before their deadline.
        self.probe_timeout_s = float(probe_timeout_s or min(5.0, max(0.5, (timeout_s or 20.0) / 4)))
        self.servers = [
            PoolServer(
                ep,
                ORSClient(
                    ep,
                    timeout_s=timeout_s,
                    open_timeout_s=open_timeout_s,
                    connect_timeout_s=min(connect_timeout_s, self.probe_timeout_s),
                    retries=retries,
                    ping_interval_s=ping_interval_s,
                    max_concurrency=max_concurrency,
                    max_kept_chars=max_kept_chars,
                ),
                Rotation(next_probe_at=time.monotonic() + self.probe_interval_s),
            )
            for ep in endpoints
        ]
        self._turn = 0
        self._closed = False
        self._prober: anyio.CancelScope | None = None
        self._prober_started = False
        self._wake: anyio.Event | None = None

    def __repr__(self) -> str:
        return f"ServerPool({[s.url for s in self.servers]!r})"

    @property
    def endpoint(self) -> Endpoint:
        """The first server's endpoint (the env name discovered there: the servers serve one environment)."""
        return self.servers[0].client.endpoint

    def stats(self) -> list[dict[str, Any]]:
        """Per server: URL, whether in rotation, sessions held now, sessions opened, times taken out.

        Example:
            >>> ServerPool([Endpoint.for_url("http://h:1", "echo")]).stats()[0]["in_rotation"]
            True
        """
        return [s.stats() for s in self.servers]

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> ServerPool:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop probing, close every session and each server's client. A server out of rotation is not
        waited on (its sessions are dropped here, and it deletes them itself when it comes back or restarts).
        Idempotent."""
        if self._closed:
            return
        self._closed = True
        scope = self._prober
        if scope is not None:
            bridge.call_soon(scope.cancel)

        async def close(server: PoolServer) -> None:
            with anyio.move_on_after(None if server.rotation.up else 0.2):
                await server.client.aclose()

        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for server in self.servers:
                    tg.start_soon(close, server)

    # ------------------------------------------------------------------ rotation

    def _pick(self, exclude: set[int] = frozenset()) -> PoolServer | None:  # type: ignore[assignment]
        up = [s.rotation.up and i not in exclude for i, s in enumerate(self.servers)]
        i = pick_server([s.active for s in self.servers], up, self._turn)
        if i is None:
            return None
        self._turn = (i + 1) % len(self.servers)
        return self.servers[i]

    def _took_down(self, server: PoolServer, why: str) -> None:
        server.down_reason = why
        # Before the calls in flight are cut: the cleanup their cut starts (deleting a session, waiting for
        # a `/create`'s answer) must not wait on this server either.
        server.client.set_out_of_rotation(True)
        logger.warning(
            "ormix: ORS server %s taken out of rotation (%s); its %d call(s) in flight end now, new sessions "
            "go to the other servers, and it is probed back in when it answers.",
            server.url,
            why,
            len(server.inflight),
        )
        for scope, loop in list(server.inflight):
            with contextlib.suppress(RuntimeError):  # a closed loop: nothing left to cancel there
                loop.call_soon_threadsafe(scope.cancel)

    def _apply(self, server: PoolServer, result: ProbeResult, why: str) -> None:
        change = server.rotation.probed(result, now=time.monotonic(), interval_s=self.probe_interval_s)
        if change == "down":
            self._took_down(server, why)
        elif change == "up":
            server.down_reason = None
            server.client.set_out_of_rotation(False)
            logger.warning("ormix: ORS server %s answers again; back in rotation.", server.url)

    async def _probe(self, server: PoolServer, http: HTTPClient) -> None:
        """One `GET /health` of `server`; moves it in or out of the rotation."""
        server.suspect = False
        result: ProbeResult
        try:
            with anyio.fail_after(self.probe_timeout_s):
                resp = await http.request("GET", server.url + "/health", headers=server.endpoint.headers())
            result, why = (
                ("ok", "") if resp.status_code == 200 else ("refused", f"/health {resp.status_code}")
            )
        except (TimeoutError, HTTPFailure) as e:
            if isinstance(e, HTTPFailure) and e.kind != "read-timeout":
                result, why = "refused", f"{e.label}: {e}"
            else:  # the probe's deadline, or the wire's silence
                result, why = "timeout", f"/health did not answer within {self.probe_timeout_s:g}s"
        self._apply(server, result, why)

    async def _check_now(self, server: PoolServer) -> None:
        """Probe `server` now (a request to it failed), on a connection of this loop's own."""
        if not server.rotation.up:
            return
        async with HTTPClient(connect_timeout_s=self.probe_timeout_s) as http:
            await self._probe(server, http)

    def suspect(self, server: PoolServer) -> None:
        """Make `server` due for a probe at once (a request to it failed or ran past its deadline)."""
        if not server.rotation.up:
            return
        server.suspect = True
        wake = self._wake
        if wake is not None:
            bridge.call_soon(wake.set)

    async def _ensure_prober(self) -> None:
        if self._prober_started or self._closed:
            return
        self._prober_started = True
        await bridge.start_service_task(self._probe_loop, name=f"ormix-probe-{self.servers[0].url}")

    async def _probe_loop(self, *, task_status: anyio.abc.TaskStatus = anyio.TASK_STATUS_IGNORED) -> None:
        """Probe every due server, sleep until the next is due (or a failed request wakes it), repeat."""
        async with HTTPClient(connect_timeout_s=self.probe_timeout_s) as http:
            with anyio.CancelScope() as scope:
                self._prober = scope
                self._wake = anyio.Event()
                task_status.started()
                while not self._closed:
                    now = time.monotonic()
                    due = [
                        s
                        for s in self.servers
                        if s.rotation.next_probe_at <= now or (s.suspect and s.rotation.up)
                    ]
                    if due:
                        async with anyio.create_task_group() as tg:
                            for server in due:
                                tg.start_soon(self._probe, server, http)
                    next_at = min(s.rotation.next_probe_at for s in self.servers)
                    with anyio.move_on_after(max(0.0, next_at - time.monotonic())):
                        await self._wake.wait()
                    self._wake = anyio.Event()

    # ------------------------------------------------------------------ guarded requests

    async def guarded(
        self, server: PoolServer, what: str, fn: Callable[[], Awaitable[T]], *, session_id: str | None = None
    ) -> T:
        """Run `fn()` (a request to `server`), ending it with a `TransportError` the moment the server leaves
        the rotation; a failure to reach it, or a deadline, makes it due for a probe at once."""
        env = server.endpoint.env_name
        if not server.rotation.up:
            raise TransportError(
                f"{what} not sent: ORS server {server.url} is out of rotation ({server.down_reason})",
                env=env,
                session_id=session_id,
            )
        scope = anyio.CancelScope()
        entry = (scope, asyncio.get_running_loop())
        server.inflight.add(entry)
        try:
            with scope:
                try:
                    return await fn()
                except (TransportError, DeadlineExceeded):
                    self.suspect(server)
                    raise
        finally:
            server.inflight.discard(entry)
        raise TransportError(
            f"{what} abandoned: ORS server {server.url} was taken out of rotation ({server.down_reason}); "
            f"ended now rather than at its deadline. The member's other servers go on.",
            env=env,
            session_id=session_id,
        )

    async def _any(self, what: str, fn: Callable[[ORSClient], Awaitable[T]]) -> T:
        """A stateless request on a server in rotation; another one when it cannot be reached."""
        return await self._first_reachable(
            what, lambda server: self.guarded(server, what, functools.partial(fn, server.client))
        )

    async def _first_reachable(self, what: str, attempt: Callable[[PoolServer], Awaitable[T]]) -> T:
        """`attempt(server)` on the least-busy server in rotation, then on the next one while a server cannot
        be reached (each such server is probed at once); `TransportError` when none is left."""
        await self._ensure_prober()
        tried: set[int] = set()
        last: ORSError | None = None
        while True:
            server = self._pick(tried)
            if server is None:
                raise last or self._none_in_rotation(what)
            try:
                return await attempt(server)
            except TransportError as e:
                last = e
                tried.add(self.servers.index(server))
                await self._check_now(server)

    def _none_in_rotation(self, what: str) -> TransportError:
        out = "; ".join(f"{s.url}: {s.down_reason}" for s in self.servers)
        return TransportError(
            f"{what}: none of the {len(self.servers)} ORS servers is in rotation ({out}). Check they run and "
            f"are reachable; they are probed back in when they answer.",
            env=self.servers[0].endpoint.env_name,
        )

    # ------------------------------------------------------------------ what ORSClient answers

    async def health(self) -> dict:
        """`GET /health` of a server in rotation."""
        return await self._any("GET /health", lambda c: c.health())

    async def version(self) -> dict:
        """`GET /version` of a server in rotation."""
        return await self._any("GET /version", lambda c: c.version())

    async def list_environments(self) -> list[str]:
        """The environments a server in rotation hosts."""
        return await self._any("GET /list_environments", lambda c: c.list_environments())

    async def splits(self) -> list[Split]:
        """The environment's splits."""
        return await self._any("GET /splits", lambda c: c.splits())

    async def num_tasks(self, split: str) -> int:
        """Number of tasks in `split`."""
        return await self._any("POST /num_tasks", lambda c: c.num_tasks(split))

    async def task(self, split: str, index: int) -> dict:
        """The task spec at `index` of `split`."""
        return await self._any("POST /task", lambda c: c.task(split, index))

    async def task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list[dict]:
        """Task specs `[start, stop)` of `split`."""
        return await self._any("POST /task_range", lambda c: c.task_range(split, start, stop))

    async def tasks(self, split: str) -> list[dict]:
        """Every task spec of `split`."""
        return await self._any("POST /tasks", lambda c: c.tasks(split))

    async def get_tasks(
        self, split: str, indices: Sequence[int], *, concurrency: int | None = None
    ) -> list[dict]:
        """Many tasks, from one server in rotation (another one if it cannot be reached)."""
        return await self._any("POST /task", lambda c: c.get_tasks(split, indices, concurrency=concurrency))

    async def tools_info(self) -> dict:
        """The raw `/tools` answer of a server in rotation."""
        return await self._any("GET /tools", lambda c: c.tools_info())

    async def tools(self) -> list[ToolSpec]:
        """The environment's shared tools."""
        return await self._any("GET /tools", lambda c: c.tools())

    async def open_session(self, **kwargs: Any) -> PooledSession:
        """Open a session (`ORSClient.open_session`'s arguments) on the least-busy server in rotation; on
        another one when that server cannot be reached. Raises `TransportError` when none can."""

        async def attempt(server: PoolServer) -> PooledSession:
            server.active += 1  # counted while it opens: "least busy" sees opens in progress
            try:
                session = await self.guarded(
                    server, "opening a session", functools.partial(server.client.open_session, **kwargs)
                )
            except BaseException:
                server.active -= 1
                raise
            server.opened += 1
            return PooledSession(session, server, self)

        return await self._first_reachable("opening a session", attempt)

    @contextlib.asynccontextmanager
    async def session(self, **kwargs: Any) -> AsyncIterator[PooledSession]:
        """`open_session(...)` as an async context manager that always closes the session."""
        s = await self.open_session(**kwargs)
        try:
            yield s
        finally:
            with anyio.CancelScope(shield=True):
                await s.close()


class PooledSession:
    """A `Session` on one server of a `ServerPool`: the same methods, every request to its own server, and
    each ends at once when that server leaves the rotation. `server` is the server's URL.

    Example:
        >>> import anyio
        >>> from ormix.server import serve_in_thread
        >>> async def one(url):
        ...     async with ServerPool([Endpoint.for_url(url, "echo")]) as pool:
        ...         async with pool.session(split="train", index=0) as s:
        ...             return s.server == url, (await s.call("echo", {"text": "hi"})).text
        >>> with serve_in_thread(["local:echo"]) as srv:
        ...     anyio.run(one, srv.url)
        (True, 'hi')
    """

    def __init__(self, session: Session, server: PoolServer, pool: ServerPool) -> None:
        self._session = session
        self._server = server
        self._pool = pool
        self._released = False
        self.id = session.id
        self.env_name = session.env_name

    def __repr__(self) -> str:
        return f"PooledSession({self._session!r}, server={self.server!r})"

    @property
    def server(self) -> str:
        """The URL of the server this session lives on."""
        return self._server.url

    @property
    def server_up(self) -> bool:
        """True while this session's server is in rotation (False: its calls would end at once)."""
        return bool(self._server.rotation.up)

    def __getattr__(self, name: str) -> Any:  # closed, dead, timings, dead_reason, pinging: the session's own
        return getattr(self._session, name)

    def _guard(self, what: str, fn: Callable[[], Awaitable[T]]) -> Awaitable[T]:
        return self._pool.guarded(self._server, what, fn, session_id=self.id)

    async def call(self, name: str, input: Any = None, *, timeout_s: float | None = None) -> Any:
        """`Session.call` on this session's server."""
        return await self._guard(
            f"tool call {name!r}", lambda: self._session.call(name, input, timeout_s=timeout_s)
        )

    async def prompt(self, *, timeout_s: float | None = None) -> list[dict]:
        """`Session.prompt` on this session's server."""
        return await self._guard("GET /prompt", lambda: self._session.prompt(timeout_s=timeout_s))

    async def prompt_text(self, *, timeout_s: float | None = None) -> str:
        """`Session.prompt_text` on this session's server."""
        return await self._guard("GET /prompt", lambda: self._session.prompt_text(timeout_s=timeout_s))

    async def tools(self, *, timeout_s: float | None = None) -> list[ToolSpec]:
        """`Session.tools` on this session's server."""
        return await self._guard("GET /task_tools", lambda: self._session.tools(timeout_s=timeout_s))

    async def supports_score_group(self, *, timeout_s: float | None = None) -> bool:
        """`Session.supports_score_group` on this session's server."""
        return await self._guard(
            "GET /tools", lambda: self._session.supports_score_group(timeout_s=timeout_s)
        )

    async def score_group(self, candidates: Any, *, timeout_s: float | None = None) -> Any:
        """`Session.score_group` on this session's server."""
        return await self._guard(
            "score_group", lambda: self._session.score_group(candidates, timeout_s=timeout_s)
        )

    async def ping(self) -> None:
        """`Session.ping` on this session's server."""
        await self._guard("POST /ping", self._session.ping)

    async def close(self) -> None:
        """Delete the session on its server; one out of rotation is not waited on. Idempotent; never
        raises."""
        if not self._released:
            self._released = True
            self._server.active -= 1
        with anyio.move_on_after(None if self._server.rotation.up else 0.2):
            await self._session.close()

    async def __aenter__(self) -> PooledSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        with anyio.CancelScope(shield=True):
            await self.close()
