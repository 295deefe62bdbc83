"""`ORSClient`: the async ORS client ormix uses to drive many sessions at once.

What it adds over the openreward SDK: per-call deadlines, retries that never run a tool twice
(`task_id` replay, and the keep-alive rules of `ormix.ors._http`), keepalive pings also during long calls,
one round trip per call (env name in the path), typed errors, bounded concurrency for bulk task fetches,
and bounded memory for huge tool outputs. Every request, stateless or of a session, plain or TLS, goes
through one `ormix.ors._http.HTTPClient` per client (aiohttp, one keep-alive connection pool).

Keepalive pings of every session run in the portal's service task group (`ormix.ors._bridge`), whatever
loop opened the session (a session of another loop than the portal's pings over an HTTP client of the
portal's loop, its ping loop's own); each ping loop is cancelled when its session closes.

Example:
    >>> import anyio
    >>> from ormix.server import serve_in_thread
    >>> async def main(url):
    ...     async with ORSClient(url, env_name="echo") as client:
    ...         print([split.name for split in await client.splits()])
    ...         async with client.session(split="train", index=0) as s:
    ...             print((await s.call("echo", {"text": "apple"})).reward)
    >>> with serve_in_thread(["local:echo"]) as srv:
    ...     anyio.run(main, srv.url)
    ['train', 'test']
    1.0
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import anyio
import anyio.lowlevel
from pydantic import BaseModel, Field, StrictInt, StrictStr, TypeAdapter, ValidationError

from ormix.ors import _bridge as bridge
from ormix.ors._bridge import run_in_new_loop
from ormix.ors._endpoint import Endpoint
from ormix.ors._errors import (
    DeadlineExceeded,
    ORSError,
    ProtocolError,
    ServerError,
    SessionOpenError,
    TransportError,
)
from ormix.ors._http import HTTPClient, Response
from ormix.ors._models import Split, ToolSpec, invalid_because
from ormix.ors._platform import BackendGate, OpenWait
from ormix.ors._secrets import encode_secrets
from ormix.ors._session import Session, tool_specs_of
from ormix.ors._sse import CallStream, SSEParser
from ormix.ors._transport import GONE_OK, Transport, detail_of, json_of


class _NumTasks(BaseModel):
    num_tasks: StrictInt = Field(ge=0)


class _Task(BaseModel):
    task: dict[str, Any]


class _Tasks(BaseModel):
    tasks: list[Any]


# The shapes of the stateless answers ormix reads (anything else they hold is ignored).
_SPLITS = TypeAdapter(list[Split | StrictStr])
_NUM_TASKS = TypeAdapter(_NumTasks)
_TASK = TypeAdapter(_Task)
_TASKS = TypeAdapter(_Tasks)
_OBJECT = TypeAdapter(dict[str, Any])

#: Default cap on the characters of one tool result a client keeps in memory (not what a model is shown:
#: that is `OpenRewardSpec(max_output_chars=...)`, far smaller).
DEFAULT_MAX_KEPT_CHARS = 4_000_000

# How long an open that was cut (a deadline, a Ctrl-C, a closed client) still waits for the answer to the
# `/create` it already sent: only that answer tells whether the server made the session, and a `/delete`
# that arrives before the server has made it deletes nothing.
_CUT_CREATE_WAIT_S = 10.0
# How long any cleanup waits on a server that a `ServerPool` took out of rotation: it is not waited on.
_OUT_OF_ROTATION_WAIT_S = 0.2


class ORSClient:
    """Async client for one ORS environment: a server's URL, or an `Endpoint` (`Endpoint.for_catalog`).

    Args:
        target: `http(s)://host:port` (scheme in any case), or an `Endpoint`.
        env_name: environment name on a multi-env server (URL targets: discovered when None).
        api_key: key sent as `X-API-Key` with a URL target (an `Endpoint` carries its own). Never logged.
        timeout_s: default deadline of each call (None: no deadline).
        connect_timeout_s: TCP (and TLS) connect timeout.
        retries: retries of a failed request (transport errors, 429/502/503/504).
        open_timeout_s: deadline of opening a session (`/create_session`, `/create`, and the prompt the
            session waits for), which rides out a backend that is still starting (`ormix.ors._platform`);
            None: `timeout_s`.
        ping_interval_s: keepalive period of open sessions (None: no pings).
        max_concurrency: parallel requests of bulk helpers such as `get_tasks`.
        max_kept_chars: most characters of one tool result kept in memory (None: no limit). A larger
            result keeps the head of each long string (`ToolResult.truncated`, `.full_chars`), so a
            server that sends 50 MB costs a few MB here.

    Example:
        >>> client = ORSClient("http://127.0.0.1:8080", env_name="echo")
        >>> client.endpoint.env_name, client.endpoint.session_url
        ('echo', 'http://127.0.0.1:8080')
    """

    def __init__(
        self,
        target: str | Endpoint,
        *,
        env_name: str | None = None,
        api_key: str | None = None,
        timeout_s: float | None = 300.0,
        connect_timeout_s: float = 10.0,
        retries: int = 3,
        ping_interval_s: float | None = 10.0,
        max_concurrency: int = 16,
        max_kept_chars: int | None = DEFAULT_MAX_KEPT_CHARS,
        open_timeout_s: float | None = None,
    ) -> None:
        self.timeout_s = timeout_s
        self.open_timeout_s = timeout_s if open_timeout_s is None else open_timeout_s
        #: Shared by every request of this client: the 429 pause and the cold-start waits in progress.
        self.gate = BackendGate()
        self.connect_timeout_s = connect_timeout_s
        self.retries = max(0, int(retries))
        self.ping_interval_s = ping_interval_s
        self.max_concurrency = max(1, int(max_concurrency))
        self.max_kept_chars = None if max_kept_chars is None else max(1, int(max_kept_chars))
        self._http = HTTPClient(connect_timeout_s=connect_timeout_s)
        self._endpoint: Endpoint | None = None
        self._unresolved: Endpoint | None = None
        self._transport: Transport | None = None
        # Held strongly until they close (`forget`): a session its caller never received (a Ctrl-C cancels
        # the waiting call as the open returns) or dropped unclosed is still deleted by `aclose()`.
        self._sessions: set[Session] = set()
        # Session ids created on the server whose open has not finished: deleted if it fails or is cut.
        self._pending: set[str] = set()
        self._creating = 0  # `/create_session` requests in flight
        self._deleting = 0  # deletions of unopened sessions in flight (a cut open's cleanup)
        self._opening: set[anyio.CancelScope] = set()  # opens in flight: `aclose()` cuts them
        # Session ids whose `/create` is in flight: their open deletes them once it is answered (a deletion
        # sent before would arrive first and delete nothing), so `aclose()` waits for them instead.
        self._sending: set[str] = set()
        # Set by a `ServerPool` while it holds the server out of rotation: cleanup does not wait on it.
        self._out_of_rotation = False
        # The cleanups in progress (with their loops): cut when the server leaves a pool's rotation.
        self._cleanups: set[tuple[anyio.CancelScope, asyncio.AbstractEventLoop]] = set()
        self._closed = False
        endpoint = target if isinstance(target, Endpoint) else Endpoint.for_url(target, env_name, api_key)
        if endpoint.env_name or endpoint.is_platform:
            self._set_endpoint(endpoint)
        else:
            self._unresolved = endpoint  # its env name is discovered on first use

    def __repr__(self) -> str:
        return (
            f"ORSClient({self._endpoint!r})"
            if self._endpoint
            else f"ORSClient({self._unresolved!r}, unresolved)"
        )

    def _set_endpoint(self, ep: Endpoint) -> None:
        self._endpoint = ep
        self._transport = Transport(
            ep, self._http, self.retries, gate=self.gate, starting_limit_s=self.open_timeout_s or 900.0
        )

    @property
    def endpoint(self) -> Endpoint:
        """The resolved endpoint (discovering the env name of a URL target makes one blocking request)."""
        if self._endpoint is None:
            self._set_endpoint(run_in_new_loop(self._discover, None))
        assert self._endpoint is not None
        return self._endpoint

    async def _discover(self, http: HTTPClient | None) -> Endpoint:
        """The endpoint with the first environment its server lists (`GET /list_environments`)."""
        ep = self._unresolved
        assert ep is not None
        async with contextlib.AsyncExitStack() as stack:
            if http is None:  # a blocking call on a private loop: an HTTP client of that loop
                http = await stack.enter_async_context(HTTPClient(connect_timeout_s=self.connect_timeout_s))
            resp = await Transport(ep, http, self.retries).request("GET", "/list_environments")
        names = json_of(resp, "GET /list_environments", ep.target)
        if not isinstance(names, list) or not names:
            raise ORSError(f"the ORS server at {ep.target} lists no environments; pass env_name=")
        return Endpoint.for_url(ep.session_url, str(names[0]), ep.api_key)

    async def _tr(self) -> Transport:
        if self._closed:
            raise ORSError("this ORSClient is closed; create a new one")
        if self._transport is None:
            self._set_endpoint(await self._discover(self._http))
        assert self._transport is not None
        return self._transport

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> ORSClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every session this client opened, then its HTTP connections. Idempotent."""
        if self._closed:
            return
        with anyio.CancelScope(shield=True):
            sessions = [s for s in list(self._sessions) if not s.closed]
            self._closed = True
            with anyio.move_on_after(self._wait_s(10.0)):
                while self._creating:  # their ids join `_pending`, deleted below
                    await anyio.sleep(0.01)
            # An open still riding out a cold start would go on retrying `/create` for its whole deadline
            # (the catalog's is 10 minutes), holding up the exit; it cannot succeed now, so it is cut, and
            # its session deleted (counted in `_deleting`, waited for below).
            for opening in list(self._opening):
                opening.cancel()
            async with anyio.create_task_group() as tg:
                for s in sessions:
                    tg.start_soon(s.close)
                if self._transport is not None:
                    for sid in list(self._pending - self._sending):
                        tg.start_soon(self._delete_unopened, self._transport, sid)
            # A Ctrl-C cancels an open in its own task and the exit hook closes this client at once: that
            # open's deletion may still be on the wire (or its `/create`, whose answer it waits for before
            # deleting), and closing the connections under it would leak its session. Bounded as each
            # deletion is.
            with anyio.move_on_after(self._wait_s(30.0)):
                while self._deleting or self._sending:
                    await anyio.sleep(0.01)
            await self._http.aclose()

    def set_out_of_rotation(self, out: bool) -> None:
        """A `ServerPool` took this client's server out of rotation (`True`) or back in (`False`).

        While it is out, cleanup against it (closing and deleting sessions, waiting for the answer of a cut
        open's `/create`) waits at most 0.2 s, and the cleanup in progress ends now: the server is not waited
        on (it deletes what is left itself, by its idle reaper, once it answers again or restarts).
        """
        self._out_of_rotation = out
        if out:
            for scope, loop in list(self._cleanups):
                with contextlib.suppress(RuntimeError):  # a closed loop: nothing left to cut there
                    loop.call_soon_threadsafe(scope.cancel)

    def _wait_s(self, limit_s: float) -> float:
        # How long cleanup may wait on the server now.
        return min(limit_s, _OUT_OF_ROTATION_WAIT_S) if self._out_of_rotation else limit_s

    @contextlib.contextmanager
    def cleanup_scope(self, limit_s: float, *, shield: bool = True) -> Iterator[anyio.CancelScope]:
        """A cancel scope for cleanup against the server (a deletion, a close): shielded unless told, ending
        after `limit_s`, or at once when the server leaves a pool's rotation (`set_out_of_rotation`)."""
        scope = anyio.CancelScope(shield=shield, deadline=anyio.current_time() + self._wait_s(limit_s))
        entry = (scope, asyncio.get_running_loop())
        self._cleanups.add(entry)
        try:
            with scope:
                yield scope
        finally:
            self._cleanups.discard(entry)

    def forget(self, session: Session) -> None:
        """Drop a closed session from the ones `aclose()` closes (sessions call it when they close)."""
        self._sessions.discard(session)

    # ------------------------------------------------------------------ stateless calls

    @contextlib.asynccontextmanager
    async def _throwaway_sid(self, tr: Transport) -> AsyncIterator[str | None]:
        # The platform routes even stateless calls by a session id, as the SDK does (matrix_sid_provider).
        if not tr.endpoint.is_platform:
            yield None
            return
        sid = await self._platform_sid(tr)
        self._pending.discard(sid)  # deleted here, not by `aclose()`
        try:
            yield sid
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(30.0), contextlib.suppress(Exception):
                await tr.request(
                    "POST", "/delete_session", headers=tr.headers(sid, routed=False), ok_statuses=GONE_OK
                )

    async def _stateless(self, method: str, suffix: str, body: Any = None, *, env_path: bool = True) -> Any:
        tr = await self._tr()
        path = tr.endpoint.path(suffix) if env_path else suffix
        try:
            with anyio.fail_after(self.timeout_s):
                async with self._throwaway_sid(tr) as sid:
                    try:
                        resp = await tr.request(method, path, json_body=body, sid=sid)
                    except ServerError as e:
                        if e.status_code != 404 or not env_path or tr.endpoint.is_platform:
                            raise
                        raise await self._unknown_environment(tr, e) from None
        except DeadlineExceeded:
            raise
        except TimeoutError as e:
            raise DeadlineExceeded(
                f"{method} {path} to {tr.endpoint.target} did not answer within {self.timeout_s:g}s "
                f"(timeout_s): the server is overloaded or hung. Check it answers GET /health, or pass a "
                f"larger timeout_s.",
                env=tr.endpoint.env_name or tr.endpoint.deployment,
            ) from e
        try:
            return json_of(
                resp,
                f"{method} {path}",
                tr.endpoint.target,
                env=tr.endpoint.env_name or tr.endpoint.deployment,
            )
        except ProtocolError as e:
            raise e.redact(tr.sensitive) from e.__cause__

    async def _unknown_environment(self, tr: Transport, e: ServerError) -> ServerError:
        """A 404 on an environment's path: when the server does not host that environment, an error that
        lists the ones it does (a misspelt ``env_name``); else ``e`` unchanged (a route it lacks)."""
        env = tr.endpoint.env_name
        try:
            names = await self.list_environments()
        except ORSError:
            return e
        if not env or not isinstance(names, list) or env in names:
            return e
        listed = ", ".join(map(repr, names)) or "none"
        return ServerError(
            f"the ORS server at {tr.endpoint.target} has no environment {env!r}; it serves {listed}: "
            "fix env_name",
            status_code=404,
            detail=e.detail,
            env=env,
        )

    async def _read(self, method: str, suffix: str, body: Any, shape: TypeAdapter) -> Any:
        """A stateless answer validated as `shape`; `ProtocolError` when it is not of that shape."""
        answer = await self._stateless(method, suffix, body)
        try:
            return shape.validate_python(answer)
        except ValidationError as e:
            ep = self.endpoint
            raise ProtocolError(
                f"{method} {ep.path(suffix)} to {ep.target} answered something ormix cannot read "
                f"({invalid_because(e)}). The server does not speak ORS as ormix expects: check the URL, "
                f"env_name and the server's version (GET /version).",
                env=ep.env_name or ep.deployment,
            ) from None

    async def health(self) -> dict:
        """`GET /health` → `{"status": "ok"}`."""
        return await self._stateless("GET", "/health", env_path=False)

    async def version(self) -> dict:
        """`GET /version` → `{version, build_sha}` of the server's openreward package."""
        return await self._stateless("GET", "/version", env_path=False)

    async def list_environments(self) -> list[str]:
        """Environment names the server hosts."""
        return await self._stateless("GET", "/list_environments", env_path=False)

    async def splits(self) -> list[Split]:
        """The environment's splits (a bare name is a validation split, as the SDK reads it)."""
        splits = await self._read("GET", "/splits", None, _SPLITS)
        return [Split(name=s, type="validation") if isinstance(s, str) else s for s in splits]

    async def num_tasks(self, split: str) -> int:
        """Number of tasks in `split`."""
        return (await self._read("POST", "/num_tasks", {"split": split}, _NUM_TASKS)).num_tasks

    async def task(self, split: str, index: int) -> dict:
        """The task spec at `index` of `split`."""
        return (await self._read("POST", "/task", {"split": split, "index": int(index)}, _TASK)).task

    async def task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list[dict]:
        """Task specs `[start, stop)` of `split` (Python slice conventions)."""
        body: dict[str, Any] = {"split": split}
        if start is not None:
            body["start"] = start
        if stop is not None:
            body["stop"] = stop
        return (await self._read("POST", "/task_range", body, _TASKS)).tasks

    async def tasks(self, split: str) -> list[dict]:
        """Every task spec of `split` (large environments may only serve `num_tasks` + `task`)."""
        return (await self._read("POST", "/tasks", {"split": split}, _TASKS)).tasks

    async def tools_info(self) -> dict:
        """The raw `/tools` answer: `tools`, `terminal_tool`, `supports_score_group`, ..."""
        return await self._read("GET", "/tools", None, _OBJECT)

    async def tools(self) -> list[ToolSpec]:
        """The environment's shared tools (a session may add task tools: `Session.tools()`)."""
        ep = self.endpoint
        return tool_specs_of(
            await self.tools_info(),
            f"GET {ep.path('/tools')} to {ep.target}",
            {"env": ep.env_name or ep.deployment},
        )

    async def get_tasks(
        self, split: str, indices: Sequence[int], *, concurrency: int | None = None
    ) -> list[dict]:
        """Fetch many tasks with at most `concurrency` (default `max_concurrency`) requests in flight.

        Results are in the order of `indices`.

        Example:
            >>> import anyio
            >>> from ormix.server import serve_in_thread
            >>> async def words(url):
            ...     async with ORSClient(url, env_name="echo") as client:
            ...         return [task["word"] for task in await client.get_tasks("train", [3, 1, 2])]
            >>> with serve_in_thread(["local:echo"]) as srv:
            ...     anyio.run(words, srv.url)
            ['cloud', 'river', 'stone']
        """
        idx = [int(i) for i in indices]
        out: list[Any] = [None] * len(idx)
        limit = anyio.Semaphore(max(1, concurrency or self.max_concurrency))

        async def one(k: int, i: int) -> None:
            async with limit:
                out[k] = await self.task(split, i)

        async with anyio.create_task_group() as tg:
            for k, i in enumerate(idx):
                tg.start_soon(one, k, i)
        return out

    # ------------------------------------------------------------------ sessions

    async def _platform_sid(
        self, tr: Transport, extra: dict[str, str] | None = None, waited: OpenWait | None = None
    ) -> str:
        """A session id from the platform (`POST /create_session`, SSE): the `end` event's `{"sid"}`
        when it carries one (the SDK prefers it), else the `task_id` event's."""
        headers = tr.headers(extra={"Accept": "text/event-stream", **(extra or {})})
        # Once /create_session is sent the platform makes a session whether or not this client still waits,
        # and only its answer names it. So a cancel (Ctrl-C, SIGTERM, a caller's scope) waits for the answer,
        # up to the open's own deadline, and the id is recorded for deletion before the cancel goes on.
        # `aclose()` waits for these too: closing the HTTP client under them would leak their sessions.
        self._creating += 1
        try:
            with anyio.CancelScope(shield=True, deadline=anyio.current_effective_deadline()):
                resp = await tr.request(
                    "POST", "/create_session", json_body={}, headers=headers, waited=waited
                )
                stream = CallStream()
                for event, data in SSEParser().feed(resp.text + "\r\n\r\n"):
                    stream.on_event(event, data)
                sid = _end_sid(stream.result) or stream.task_id
                if not sid:
                    raise SessionOpenError(
                        f"POST /create_session to {tr.endpoint.target} returned no session id",
                        env=tr.endpoint.deployment,
                    )
                self._pending.add(sid)
                return sid
        finally:
            self._creating -= 1
        # The shield's deadline (the open's) passed: the enclosing `fail_after` raises at this checkpoint.
        await anyio.lowlevel.checkpoint()
        raise TimeoutError("POST /create_session did not answer within the open deadline")

    async def _delete_unopened(self, tr: Transport, sid: str) -> None:
        """Delete a session whose open failed or was cut (the server may hold it; the platform does)."""
        self._pending.discard(sid)
        paths = ("/delete", "/delete_session") if tr.endpoint.is_platform else ("/delete",)
        self._deleting += 1  # `aclose()` waits for it
        try:
            with self.cleanup_scope(30.0):
                for path in paths:
                    try:
                        await tr.request(
                            "POST", path, headers=tr.headers(sid, routed=False), ok_statuses=GONE_OK
                        )
                    except Exception:  # noqa: BLE001 - the next path still goes; the caller's error stands
                        continue
        finally:
            self._deleting -= 1

    async def open_session(
        self,
        *,
        split: str | None = None,
        index: int | None = None,
        task_spec: dict | None = None,
        secrets: dict[str, Any] | None = None,
        session_id: str | None = None,
        timeout_s: float | None = None,
    ) -> Session:
        """Open a session for a task (`split` + `index`, or a `task_spec`) and start its keepalive.

        The session id is a client-chosen uuid on a self-hosted server (one round trip) and comes from
        `/create_session` on the platform. `secrets` travel once, in `X-Secrets` at `/create`.
        Raises `SessionOpenError` when the server refuses or the environment's constructor raises.

        Example:
            >>> import anyio
            >>> from ormix.server import serve_in_thread
            >>> async def open_and_close(url):
            ...     async with ORSClient(url, env_name="echo") as client:
            ...         s = await client.open_session(split="train", index=0)
            ...         await s.close()
            ...         return s.closed
            >>> with serve_in_thread(["local:echo"]) as srv:
            ...     anyio.run(open_and_close, srv.url)
            True
        """
        if (task_spec is None) == (split is None or index is None):
            raise ValueError("open_session needs either task_spec=... or both split=... and index=...")
        tr = await self._tr()
        start = time.perf_counter()
        extra, redact = _secret_headers(tr.endpoint, secrets)
        waited = OpenWait()
        sid = await self._open_on_server(
            tr,
            session_id,
            split=split,
            index=index,
            task_spec=task_spec,
            extra=extra,
            redact=redact,
            waited=waited,
            deadline=self.open_timeout_s if timeout_s is None else timeout_s,
        )
        session = Session(
            transport=tr,
            sid=sid,
            env_name=tr.endpoint.env_name,
            timeout_s=self.timeout_s,
            ping_interval_s=self.ping_interval_s,
            owner=self,
            max_kept_chars=self.max_kept_chars,
            redact=redact,
            ready_timeout_s=self.open_timeout_s,
        )
        session.timings.open_ms = (time.perf_counter() - start) * 1000.0
        session.timings.starting_ms = waited.starting_s * 1000.0
        self._sessions.add(session)
        try:
            if self.ping_interval_s and self.ping_interval_s > 0:
                own_http = not bridge.on_portal_thread()  # aiohttp connections belong to one loop
                await bridge.start_service_task(session.keepalive, own_http, name=f"ormix-ping-{session.id}")
        except BaseException:
            # Cancelled once the session exists (Ctrl-C cancels the call waiting for this open): no caller
            # will get it, so it is closed here, not left to `aclose()` or the server's reaper.
            with anyio.CancelScope(shield=True), anyio.move_on_after(30.0):
                await session.close()
            raise
        return session

    async def _open_on_server(
        self,
        tr: Transport,
        session_id: str | None,
        *,
        split: str | None,
        index: int | None,
        task_spec: dict | None,
        extra: dict[str, str],
        redact: tuple[str, ...],
        waited: OpenWait,
        deadline: float | None,
    ) -> str:
        """Get a session id (unless the caller chose `session_id`) and `/create` the session within
        `deadline`; returns the id. When that fails, or is cut, a session the server may hold is deleted."""
        ep = tr.endpoint
        label = ep.env_name or ep.deployment
        sid: str | None = session_id
        opened = False
        refused = True  # the server answered (or could not be reached): no session was made there
        opening = anyio.CancelScope()  # cut by `aclose()`
        self._opening.add(opening)
        try:
            with opening, anyio.fail_after(deadline):
                if sid is None:
                    if ep.is_platform:
                        sid = await self._platform_sid(tr, extra, waited)
                    else:
                        sid = str(uuid.uuid4())
                    self._pending.add(sid)
                body: dict[str, Any] = {"env_name": ep.env_name} if ep.env_name else {}
                if task_spec is not None:
                    body["task_spec"] = task_spec
                else:
                    body.update(split=split, index=int(index))  # type: ignore[arg-type]
                await self._create(
                    tr, sid, body, tr.headers(sid, extra), label, own_sid=session_id is None, waited=waited
                )
            if self._closed or opening.cancelled_caught:
                refused = False  # a /create cut short (or one that went through) may have made the session
                raise ORSError("the ORSClient was closed while the session opened", env=label, session_id=sid)
            assert sid is not None  # the block ran to its end
            opened = True
            return sid
        except TimeoutError as e:
            refused = False
            raise _open_timed_out(ep, deadline, waited) from e
        except ORSError as e:
            e.redact(redact)
            raise
        except BaseException:
            refused = False  # cancelled (Ctrl-C, SIGTERM, a caller's scope): /create may have gone through
            raise
        finally:
            self._opening.discard(opening)
            # Not in `_pending` any more: `aclose()` has deleted it already.
            if not opened and sid in self._pending and session_id is None and (ep.is_platform or not refused):
                # The platform holds the id from /create_session whatever /create did; a self-hosted server
                # holds one only if a /create that was cut short went through. Shielded, bounded.
                await self._delete_unopened(tr, sid)
            elif sid is not None:
                self._pending.discard(sid)

    async def _create(
        self,
        tr: Transport,
        sid: str,
        body: dict,
        headers: dict[str, str],
        label: str | None,
        *,
        own_sid: bool,
        waited: OpenWait | None = None,
    ) -> None:
        what = f"task {body['split']}[{body['index']}]" if "split" in body else "the given task_spec"
        try:
            resp = await self._send_create(tr, sid, body, headers, waited)
        except TransportError:
            raise
        except ORSError as e:
            detail = getattr(e, "detail", None) or e.message
            code = getattr(e, "status_code", None)
            cause = (
                "the environment's constructor raised"
                if code == 500
                else "the request was malformed"
                if code == 422
                else "the server refused it"
            )
            raise SessionOpenError(
                f"could not open a session for {what}: {cause} ({code}: {detail}). "
                f"Skip this task or fix the environment.",
                detail=detail,
                status_code=code,
                env=label,
                session_id=sid,
            ) from None
        if resp.status_code == 400:
            detail = detail_of(resp)
            # A retried /create whose first attempt went through: the fresh uuid exists, so it is ours.
            if "already exists" in detail and own_sid:
                return
            raise SessionOpenError(
                f"could not open a session for {what}: {detail} (400). Check the split "
                f"and index (see num_tasks()).",
                detail=detail,
                status_code=400,
                env=label,
                session_id=sid,
            )

    async def _send_create(
        self, tr: Transport, sid: str, body: dict, headers: dict[str, str], waited: OpenWait | None
    ) -> Response:
        """`POST /create`, which a cancel of the open (its deadline, a Ctrl-C, `aclose()`) does not cut short.

        The server makes the session when the request arrives, whether or not this client still waits, and
        it deletes only a session it has made: a `/delete` sent as the cancel lands (on another connection)
        can arrive before the `/create` and delete nothing, and the `/create` then makes a session no one
        deletes. So the request runs in a shielded task; a cancel lets it finish (bounded: 10 s, nothing
        while the backend still answers "starting", which makes no session) before it goes on, and the
        open's cleanup sends its `/delete` only after the answer. A server that does not answer in time is
        sent the deletion anyway (its idle reaper removes a session made later).
        """
        outcome: list[Response | Exception] = []
        answered = anyio.Event()
        request = anyio.CancelScope(shield=True)

        async def send() -> None:
            try:
                with request:
                    try:
                        outcome.append(
                            await tr.request(
                                "POST",
                                "/create",
                                json_body=body,
                                headers=headers,
                                ok_statuses=frozenset({200, 400}),
                                waited=waited,
                            )
                        )
                    except Exception as e:  # noqa: BLE001 - raised in the open's own task below
                        outcome.append(e)
            finally:
                answered.set()

        self._sending.add(sid)
        entry = (request, asyncio.get_running_loop())
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(send)
                try:
                    await answered.wait()
                except anyio.get_cancelled_exc_class():
                    # Registered before the bound is read: a server that leaves a pool's rotation meanwhile
                    # either shortens the bound or cuts the request.
                    self._cleanups.add(entry)
                    starting = waited is not None and waited.waiting
                    request.deadline = anyio.current_time() + self._wait_s(
                        0.0 if starting else _CUT_CREATE_WAIT_S
                    )
                    raise  # once the task group has waited for the request
        finally:
            self._cleanups.discard(entry)
            # No checkpoint from here to the open's deletion of the session, which counts in `_deleting`
            # before its first await: `aclose()`, waiting for both, cannot miss it in between.
            self._sending.discard(sid)
        if isinstance(outcome[0], Exception):
            raise outcome[0]
        return outcome[0]

    @contextlib.asynccontextmanager
    async def session(
        self,
        *,
        split: str | None = None,
        index: int | None = None,
        task_spec: dict | None = None,
        secrets: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> AsyncIterator[Session]:
        """`open_session(...)` as an async context manager that always closes the session.

        Example:
            >>> import anyio
            >>> from ormix.server import serve_in_thread
            >>> async def echo(url):
            ...     async with ORSClient(url, env_name="echo") as client:
            ...         async with client.session(split="train", index=0) as s:
            ...             return (await s.call("echo", {"text": "hi"})).text
            >>> with serve_in_thread(["local:echo"]) as srv:
            ...     anyio.run(echo, srv.url)
            'hi'
        """
        s = await self.open_session(
            split=split, index=index, task_spec=task_spec, secrets=secrets, session_id=session_id
        )
        try:
            yield s
        finally:
            with anyio.CancelScope(shield=True):
                await s.close()


def _end_sid(result: str | None) -> str | None:
    """The `sid` of a `/create_session` stream's `end` event (`{"sid": "..."}`), when it has one.

    Example:
        >>> _end_sid('{"sid": "abc"}'), _end_sid(""), _end_sid("[1]"), _end_sid(None)
        ('abc', None, None, None)
    """
    if not result:
        return None
    try:
        body = json.loads(result)
    except ValueError:
        return None
    sid = body.get("sid") if isinstance(body, dict) else None
    return sid.strip() if isinstance(sid, str) and sid.strip() else None


def _secret_headers(ep: Endpoint, secrets: dict[str, Any] | None) -> tuple[dict[str, str], tuple[str, ...]]:
    """The extra headers of a session's opening (`X-Secrets`, sent on `/create_session` and on `/create`, as
    the SDK sends them) and every string that must never show up in its errors."""
    all_secrets = dict(secrets or {})
    if ep.is_platform and ep.api_key:
        # The SDK adds the key, allowed to reach the platform's own hosts from a sandbox.
        from openreward.api.sandboxes.secrets import augment_secrets_with_api_key

        all_secrets = (
            augment_secrets_with_api_key(
                secrets, ep.api_key, base_url=ep.session_url, api_base_url=ep.api_url
            )
            or {}
        )
    if not all_secrets:
        return {}, _sensitive(None, None, ep.api_key)
    header = encode_secrets(all_secrets)
    return {"X-Secrets": header}, _sensitive(all_secrets, header, ep.api_key)


def _open_timed_out(ep: Endpoint, deadline: float | None, waited: OpenWait) -> SessionOpenError:
    """The error for an open that ran past its deadline: a backend that never started, or a slow open."""
    label = ep.env_name or ep.deployment
    if waited.waiting or waited.gave_up:
        return SessionOpenError(
            f"the backend of {ep.target} did not start within the open deadline ({deadline:g} s): "
            f"the server kept answering 503 X-Backend-State: starting. Allow longer "
            f"(open_timeout_s) or check the environment's status.",
            detail="backend starting",
            status_code=503,
            env=label,
        )
    return SessionOpenError(f"opening a session did not finish within the deadline ({deadline}s)", env=label)


def _sensitive(secrets: dict[str, Any] | None, header: str | None, api_key: str | None) -> tuple[str, ...]:
    """Every string a session sends that must never show up in an error: secret values, the encoded
    `X-Secrets` header, the API key."""
    values = [v[0] if isinstance(v, tuple) else v for v in (secrets or {}).values()]
    return tuple(v for v in [*values, header, api_key] if isinstance(v, str))
