"""A STAND-IN for the OpenReward platform (not the platform): a recording reverse proxy on loopback in front
of real local ORS servers, built from what the openreward SDK sends and expects
(`openreward/api/_session/http.py`, `openreward/api/environments/client.py`, `api/_session/session.py`).

What it plays:
- the sessions host (`OPENREWARD_SESSION_URL`): checks `X-API-Key` on every request (401 with a JSON
  `detail`, as the SDK's `_raise_for_status_with_auth` reads it); `POST /create_session` assigns a platform
  session id itself (SSE: `task_id`, then `end` with `{"sid": ...}`) for the deployment in `X-Deployment`
  (404 "Deployment not found." otherwise); every later request is routed by its `X-Session-ID` to that
  deployment's upstream server (or, without a session id, by `X-Deployment`); bare env paths (`/prompt`,
  `/call`, ...) get the upstream's env name put in front, as the platform routes them; `POST
  /delete_session` ends the platform session (and deletes the upstream session if `/delete` did not).
- the API host (`OPENREWARD_API_URL`): `GET /v1/environments/{owner}/{name}/required-secrets`.

On demand (`cold_start`, `rate_limit`, `drop_stream`): `503` + `X-Backend-State: starting` + `Retry-After`
while a backend "starts" (per session and path, for a given time, or forever), `429` + `Retry-After`, and a
`/call` stream cut right after its `task_id` event. Every request is recorded (`records`: time, host,
method, path, headers, JSON body, status, the platform session it belongs to); `creates` / `deletes` count
platform sessions made and ended, `live()` those still open.

What it does NOT prove: the platform's real routing, quotas, autoscaling and timings, its TLS, its answers
to anything the SDK does not send, or that the real platform still behaves as this SDK version expects.

Example (not a doctest: it starts a server; tests/ors/test_platform.py runs it)::

    from ormix.local import serve_in_thread
    with serve_in_thread(["local:echo"]) as srv, PlatformDouble({"Owner/Echo": (srv.url, "echo")}) as p:
        p.env()  # {"OPENREWARD_SESSION_URL": ..., "OPENREWARD_API_URL": ..., "OPENREWARD_API_KEY": ...}
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

#: Paths the platform routes to the deployment's environment (a bare path gets the env name in front).
ENV_PATHS = frozenset(
    {
        "/prompt",
        "/task_tools",
        "/tools",
        "/call",
        "/splits",
        "/tasks",
        "/num_tasks",
        "/task",
        "/task_range",
        "/score_group",
        "/messages",
    }
)
#: Request headers passed on to the upstream ORS server.
FORWARDED = ("X-Session-ID", "X-Secrets", "Content-Type", "Accept")
API_KEY = "sk-double-0123456789abcdef"


@dataclass
class Record:
    """One request the double received, and how it answered."""

    t: float
    host: str  # "sessions" or "api"
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    status: int = 0
    sid: str | None = None  # the platform session it belongs to (also for the /create_session that made it)
    note: str = ""  # "starting", "429", "dropped" for injected answers


@dataclass
class _Rule:
    kind: str  # "starting", "429", "drop", "slow"
    deployment: str | None
    paths: tuple[str, ...] | None
    seconds: float = 0.0
    count: int = 1
    retry_after: int = 1
    windows: dict[tuple[str, str], float] = field(default_factory=dict)


class PlatformDouble:
    """The stand-in (see the module). `deployments`: catalog name -> (upstream ORS server URL, env name)."""

    def __init__(
        self,
        deployments: dict[str, tuple[str, str]],
        *,
        api_key: str = API_KEY,
        required_secrets: dict[str, list[str]] | None = None,
        end_sid: str = "same",
    ) -> None:
        self.deployments = dict(deployments)
        self.api_key = api_key
        self.required_secrets = dict(required_secrets or {})
        #: "same": `end` carries the session id too; "none": only `task_id` does; "different": `task_id` is a
        #: decoy and only `end`'s sid is the session (a client must prefer `end`, as the SDK does).
        self.end_sid = end_sid
        self.records: list[Record] = []
        self.sessions: dict[str, str] = {}  # platform sid -> deployment
        self.ended: set[str] = set()
        self._upstream_deleted: set[str] = set()
        self._rules: list[_Rule] = []
        self._base = (0, 0)
        self._before: set[str] = set()  # sessions made before the last `clear()`
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._client: aiohttp.ClientSession | None = None
        self.session_url = self.api_url = ""

    # ── lifecycle ────────────────────────────────────────────────────

    def __enter__(self) -> PlatformDouble:
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._serve, args=(ready,), daemon=True, name="platform-double"
        )
        self._thread.start()
        assert ready.wait(10), "the platform double did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        loop = self._loop
        if loop is not None:
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join(10)

    def _serve(self, ready: threading.Event) -> None:
        loop = self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        loop.run_until_complete(self._start())
        ready.set()
        loop.run_forever()
        loop.close()

    async def _start(self) -> None:
        self._client = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_read=120))
        sessions, api = web.Application(), web.Application()
        sessions.router.add_route("*", "/{tail:.*}", self._sessions_host)
        api.router.add_route("*", "/{tail:.*}", self._api_host)
        self._runners = []
        urls = []
        for app in (sessions, api):
            runner = web.AppRunner(app, access_log=None, handle_signals=False)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            urls.append(f"http://127.0.0.1:{port}")
            self._runners.append(runner)
        self.session_url, self.api_url = urls

    async def _shutdown(self) -> None:
        for runner in self._runners:
            await runner.cleanup()
        if self._client is not None:
            await self._client.close()

    def env(self, api_key: str | None = None) -> dict[str, str]:
        """The variables that point the SDK and ormix at this double (with its key, or `api_key`)."""
        return {
            "OPENREWARD_SESSION_URL": self.session_url,
            "OPENREWARD_API_URL": self.api_url,
            "OPENREWARD_API_KEY": self.api_key if api_key is None else api_key,
        }

    # ── what tests ask for ───────────────────────────────────────────

    def cold_start(
        self, deployment: str | None, seconds: float = math.inf, *, paths=("/create",), retry_after: int = 1
    ) -> None:
        """Answer `503` + `X-Backend-State: starting` on `paths` of `deployment` (None: every one): each
        (session, path) for `seconds` from its first such request (`math.inf`: a backend that never
        starts)."""
        with self._lock:
            self._rules.append(_Rule("starting", deployment, tuple(paths), seconds, retry_after=retry_after))

    def rate_limit(self, deployment: str | None, count: int = 1, *, paths=None, retry_after: int = 1) -> None:
        """Answer the next `count` requests (on `paths`, None: any) with `429` + `Retry-After`."""
        with self._lock:
            self._rules.append(
                _Rule(
                    "429", deployment, tuple(paths) if paths else None, count=count, retry_after=retry_after
                )
            )

    def slow_answer(self, deployment: str | None, seconds: float, *, path: str = "/create_session") -> None:
        """Answer `path` of `deployment` `seconds` late: a `/create_session` makes its session first and
        answers late (as the platform does whether or not the client still waits); a forwarded path
        (`/delete`, `/call`, ...) reaches the upstream server `seconds` late."""
        with self._lock:
            self._rules.append(_Rule("slow", deployment, (path,), seconds, count=10**9))

    def drop_stream(self, deployment: str | None, count: int = 1, *, path: str = "/call") -> None:
        """Cut the next `count` `/call` streams right after their `task_id` event (the tool keeps running)."""
        with self._lock:
            self._rules.append(_Rule("drop", deployment, (path,), count=count))

    def clear(self) -> None:
        """Forget the injected faults and the records; `counts()` counts from here (sessions are kept)."""
        with self._lock:
            self._rules.clear()
            self.records.clear()
            self._base = (len(self.sessions), len(self.ended))
            self._before = set(self.sessions)

    def counts(self) -> tuple[int, int]:
        """(platform sessions created, ended) since the last `clear()`."""
        with self._lock:
            return len(self.sessions) - self._base[0], len(self.ended) - self._base[1]

    @property
    def creates(self) -> int:
        return len(self.sessions)

    @property
    def deletes(self) -> int:
        return len(self.ended)

    def live(self) -> set[str]:
        """Platform sessions created since the last `clear()` and not yet ended by `/delete_session` (one
        test's leak is its own failure, not the next test's)."""
        with self._lock:
            return set(self.sessions) - self.ended - self._before

    def trace(self, sid: str) -> list[Record]:
        """The requests of one platform session, in order (its `/create_session` first)."""
        with self._lock:
            return [r for r in self.records if r.sid == sid]

    # ── the hosts ────────────────────────────────────────────────────

    def _record(self, request: web.Request, host: str, body: Any) -> Record:
        rec = Record(time.monotonic(), host, request.method, request.path, dict(request.headers), body)
        with self._lock:
            self.records.append(rec)
        return rec

    def _authorized(self, request: web.Request) -> bool:
        return request.headers.get("X-API-Key") == self.api_key

    @staticmethod
    def _json(status: int, body: Any, rec: Record, headers: dict[str, str] | None = None) -> web.Response:
        rec.status = status
        return web.json_response(body, status=status, headers=headers)

    async def _api_host(self, request: web.Request) -> web.StreamResponse:
        rec = self._record(request, "api", None)
        if not self._authorized(request):
            return self._json(401, {"detail": "Invalid or missing API key"}, rec)
        parts = request.path.strip("/").split("/")
        if len(parts) == 5 and parts[:2] == ["v1", "environments"] and parts[4] == "required-secrets":
            name = f"{parts[2]}/{parts[3]}"
            if name not in self.deployments:
                return self._json(404, {"detail": "Deployment not found."}, rec)
            return self._json(200, {"secrets": self.required_secrets.get(name, [])}, rec)
        return self._json(404, {"detail": "Not Found"}, rec)

    def _fault(self, kind: str, deployment: str, key: str, path: str) -> _Rule | None:
        now = time.monotonic()
        with self._lock:
            for rule in self._rules:
                if rule.kind != kind or (rule.deployment not in (None, deployment)):
                    continue
                if rule.paths is not None and path not in rule.paths:
                    continue
                if kind == "starting":
                    began = rule.windows.setdefault((key, path), now)
                    if now - began < rule.seconds:
                        return rule
                    continue
                if rule.count > 0:
                    rule.count -= 1
                    return rule
        return None

    async def _sessions_host(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        rec = self._record(request, "sessions", body)
        if not self._authorized(request):
            return self._json(401, {"detail": "Invalid or missing API key"}, rec)
        path, sid = request.path, request.headers.get("X-Session-ID")
        rec.sid = sid
        if sid:
            deployment = self.sessions.get(sid)
            if deployment is None:
                return self._json(404, {"detail": f"Session {sid} not found"}, rec)
        else:
            deployment = request.headers.get("X-Deployment")
            if deployment not in self.deployments:
                return self._json(404, {"detail": "Deployment not found."}, rec)
        assert deployment is not None
        bare = "/" + path.strip("/").split("/")[-1]
        if self._fault("429", deployment, sid or "-", bare):
            rec.note = "429"
            return self._json(429, {"detail": "Rate limit exceeded"}, rec, {"Retry-After": "1"})
        rule = self._fault("starting", deployment, sid or deployment, bare)
        if rule is not None:
            rec.note = "starting"
            headers = {"X-Backend-State": "starting", "Retry-After": str(rule.retry_after)}
            return self._json(503, {"detail": "Backend is starting"}, rec, headers)
        if path == "/create_session":
            slow = self._fault("slow", deployment, "-", bare)
            return await self._create_session(request, deployment, rec, slow.seconds if slow else 0.0)
        if path == "/delete_session":
            return await self._delete_session(sid, rec)
        url, env = self.deployments[deployment]
        upstream = f"/{env}{path}" if path in ENV_PATHS else path
        if path == "/delete" and sid:
            self._upstream_deleted.add(sid)
        drop = self._fault("drop", deployment, sid or "-", bare) is not None
        slow = self._fault("slow", deployment, "-", bare)
        if slow is not None:
            await asyncio.sleep(slow.seconds)  # a forwarded request reaches the upstream late
        return await self._forward(request, url + upstream, raw, rec, drop=drop)

    async def _create_session(
        self, request: web.Request, deployment: str, rec: Record, delay_s: float = 0.0
    ) -> web.StreamResponse:
        sid = str(uuid.uuid4())
        with self._lock:
            self.sessions[sid] = deployment
        if delay_s:
            await asyncio.sleep(delay_s)
        rec.sid, rec.status = sid, 200
        task_id = f"decoy-{uuid.uuid4()}" if self.end_sid == "different" else sid
        end = "" if self.end_sid == "none" else json.dumps({"sid": sid})
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(
            f"event: task_id\r\ndata: {task_id}\r\n\r\nevent: end\r\ndata: {end}\r\n\r\n".encode()
        )
        await resp.write_eof()
        return resp

    async def _delete_session(self, sid: str | None, rec: Record) -> web.StreamResponse:
        if sid and sid not in self.ended:
            if sid not in self._upstream_deleted:  # the platform tears the environment down too
                url, _ = self.deployments[self.sessions[sid]]
                assert self._client is not None
                async with self._client.post(url + "/delete", headers={"X-Session-ID": sid}) as r:
                    await r.read()
            with self._lock:
                self.ended.add(sid)
        return self._json(200, {}, rec)

    async def _forward(
        self, request: web.Request, url: str, raw: bytes, rec: Record, *, drop: bool
    ) -> web.StreamResponse:
        headers = {k: request.headers[k] for k in FORWARDED if k in request.headers}
        assert self._client is not None
        async with self._client.request(
            request.method, url, data=raw or None, headers=headers, allow_redirects=False
        ) as up:
            rec.status = up.status
            if not up.headers.get("Content-Type", "").startswith("text/event-stream"):
                keep = {
                    k: up.headers[k]
                    for k in ("Content-Type", "Retry-After", "X-Backend-State")
                    if k in up.headers
                }
                return web.Response(status=up.status, body=await up.read(), headers=keep)
            resp = web.StreamResponse(status=up.status, headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            seen = b""
            async for chunk in up.content.iter_any():
                if drop:
                    seen += chunk
                    cut = seen.find(b"event: task_id")
                    if cut >= 0 and b"\n\n" in seen[cut:].replace(b"\r\n", b"\n"):
                        end = seen.index(b"\n", seen.index(b"data:", cut)) + 1
                        await resp.write(seen[:end] + b"\r\n")
                        rec.note = "dropped"
                        assert request.transport is not None
                        request.transport.close()  # the client sees the stream end without `end`
                        return resp
                    continue
                await resp.write(chunk)
            await resp.write_eof()
            return resp
