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
- the API host (`OPENREWARD_API_URL`): `GET /v1/environments/{owner}/{name}/required-secrets` and
  `.../task-difficulty` (the rows a test sets in `task_difficulty`, filtered by `split` and `variant`);
  the SDK's rollout routes (`openreward/api/rollouts/`): `GET /v1/environments/{owner}/{name}` (`{"id": ...}`,
  no key needed, as the SDK sends none) and `POST /v1/rollouts` (`{"events": [...]}`: `rollout`, `message`,
  `rollout_update` events, stored by `eventId` as an idempotent server would; a copy of a stored id is
  counted in `upload_duplicates`, a message of a rollout never started in `upload_orphans`; `uploaded()`
  gives each stored rollout with its messages). `upload_fault` refuses the next uploads (`429`/`500`/`503`,
  nothing stored), or stores them and then answers `500` or cuts the connection without an answer.

On demand (`cold_start`, `rate_limit`, `drop_stream`): `503` + `X-Backend-State: starting` + `Retry-After`
while a backend "starts" (per session and path, for a given time, or forever), `429` + `Retry-After`, and a
`/call` stream cut right after its `task_id` event. Every request is recorded (`records`: time, host,
method, path, headers, JSON body, status, the platform session it belongs to); `creates` / `deletes` count
platform sessions made and ended, `live()` those still open.

What it does NOT prove: the platform's real routing, quotas, autoscaling and timings, its TLS, its answers
to anything the SDK does not send, or that the real platform still behaves as this SDK version expects.

Example (not a doctest: it starts a server; tests/ors/test_platform.py runs it)::

    from ormix.server import serve_in_thread
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
#: The SDK's `ResponseChars` fields (a task-difficulty row carries them).
_CHARS = ("mean", "p1", "p10", "p25", "p50", "p75", "p90", "p99")


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
        #: Catalog name -> its task-difficulty rows, as the platform's materialized view holds them (dicts of
        #: task_index, avg/min/max_reward, num_rollouts, response_chars, split, variant), set by tests.
        self.task_difficulty: dict[str, list[dict[str, Any]]] = {}
        #: Uploaded rollout events by `eventId` (the first copy), copies of stored ids, messages of rollouts
        #: never started, and the injected upload faults still to play (see `upload_fault`).
        self.upload_events: dict[str, dict[str, Any]] = {}
        self.upload_duplicates = 0
        self.upload_orphans = 0
        self._upload_faults: list[str] = []
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
        """Forget the injected faults, the records and the uploads; `counts()` counts from here (sessions are
        kept)."""
        with self._lock:
            self._rules.clear()
            self.records.clear()
            self.upload_events.clear()
            self.upload_duplicates = self.upload_orphans = 0
            self._upload_faults.clear()
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
        parts = request.path.strip("/").split("/")
        if request.method == "GET" and len(parts) == 4 and parts[:2] == ["v1", "environments"]:
            # The SDK's `_fetch_environment_id` sends no key: an environment's page is public.
            name = f"{parts[2]}/{parts[3]}"
            if name not in self.deployments:
                return self._json(404, {"detail": "Environment not found."}, rec)
            return self._json(200, {"id": f"env-{name.replace('/', '-').lower()}", "name": name}, rec)
        if not self._authorized(request):
            return self._json(401, {"detail": "Invalid or missing API key"}, rec)
        parts = request.path.strip("/").split("/")
        if len(parts) == 5 and parts[:2] == ["v1", "environments"] and parts[4] == "required-secrets":
            name = f"{parts[2]}/{parts[3]}"
            if name not in self.deployments:
                return self._json(404, {"detail": "Deployment not found."}, rec)
            return self._json(200, {"secrets": self.required_secrets.get(name, [])}, rec)
        if len(parts) == 5 and parts[:2] == ["v1", "environments"] and parts[4] == "task-difficulty":
            return self._task_difficulty(f"{parts[2]}/{parts[3]}", request, rec)
        if request.method == "POST" and parts == ["v1", "rollouts"]:
            return await self._rollouts(request, rec)
        return self._json(404, {"detail": "Not Found"}, rec)

    # ── rollout upload (the SDK's `POST /v1/rollouts`) ───────────────

    def upload_fault(self, kind: str, count: int = 1) -> None:
        """Play `kind` on the next `count` uploads: ``"429"``, ``"500"``, ``"503"`` (refused, nothing stored),
        ``"stored-500"`` (stored, then answered 500) or ``"stored-cut"`` (stored, then the connection closed
        without an answer: the client cannot know it arrived)."""
        with self._lock:
            self._upload_faults.extend([kind] * count)

    def uploaded(self) -> dict[str, dict[str, Any]]:
        """Every stored rollout: its `rollout` event (`start`), its `rollout_update` (`update`, or None) and
        its `message` events in `index` order (`messages`)."""
        with self._lock:
            events = list(self.upload_events.values())
        out: dict[str, dict[str, Any]] = {}
        for e in events:
            if e.get("eventType") == "rollout":
                out[e["eventId"]] = {"start": e, "update": None, "messages": []}
        for e in events:
            if e.get("eventType") == "rollout_update" and e["eventId"] in out:
                out[e["eventId"]]["update"] = e
            elif e.get("eventType") == "message" and e.get("rolloutEventId") in out:
                out[e["rolloutEventId"]]["messages"].append(e)
        for r in out.values():
            r["messages"].sort(key=lambda m: m["index"])
        return out

    async def _rollouts(self, request: web.Request, rec: Record) -> web.StreamResponse:
        try:
            body = await request.json()
            events = body["events"]
            assert isinstance(events, list) and all(isinstance(e, dict) and "eventId" in e for e in events)
        except (ValueError, KeyError, TypeError, AssertionError):
            return self._json(422, {"detail": 'expected {"events": [...]} with an eventId each'}, rec)
        rec.body = {"events": len(events)}  # the count: a run's upload bodies would fill the records
        with self._lock:
            fault = self._upload_faults.pop(0) if self._upload_faults else None
        if fault in ("429", "500", "503"):
            rec.note = fault
            headers = {"Retry-After": "0"} if fault == "429" else None
            return self._json(int(fault), {"detail": "injected"}, rec, headers)
        kinds = {"rollout", "message", "rollout_update"}
        if any(e.get("eventType") not in kinds for e in events):
            return self._json(422, {"detail": "unknown eventType"}, rec)
        with self._lock:
            for e in events:
                key = e["eventId"] if e["eventType"] != "rollout_update" else "update:" + e["eventId"]
                if key in self.upload_events:
                    self.upload_duplicates += 1
                    continue
                if e["eventType"] != "rollout":
                    started = e.get("rolloutEventId", e["eventId"])
                    if started not in self.upload_events:
                        self.upload_orphans += 1
                self.upload_events[key] = e
        if fault == "stored-500":
            rec.note = fault
            return self._json(500, {"detail": "injected after storing"}, rec)
        if fault == "stored-cut":
            rec.note = fault
            assert request.transport is not None
            request.transport.close()
            return web.Response(status=200)  # never reaches the client: its connection is gone
        return self._json(200, {"accepted": len(events)}, rec)

    def _task_difficulty(self, name: str, request: web.Request, rec: Record) -> web.Response:
        """The SDK's `get_task_difficulty` route: the rows of `name` that match the query's `split` and
        `variant` (the model filters are recorded, not applied: the double keeps no per-model rollouts)."""
        rec.body = dict(request.query)
        if name not in self.deployments:
            return self._json(404, {"detail": "Deployment not found."}, rec)
        known = {"variant", "split", "model_name", "min_model_params", "max_model_params", "training_stage"}
        odd = sorted(set(request.query) - known)
        if odd:
            return self._json(422, {"detail": f"unknown query parameter(s) {odd}"}, rec)
        stage = request.query.get("training_stage")
        if stage is not None and stage not in ("pretrained", "sft", "rl"):
            return self._json(422, {"detail": f"training_stage {stage!r} is not pretrained, sft or rl"}, rec)
        rows = [
            {"split": None, "variant": None, "response_chars": dict.fromkeys(_CHARS, 0.0), **row}
            for row in self.task_difficulty.get(name, [])
        ]
        for key in ("split", "variant"):
            if key in request.query:
                rows = [r for r in rows if r[key] == request.query[key]]
        rows.sort(key=lambda r: (r["split"] or "", r["variant"] or "", r["task_index"]))
        return self._json(200, {"tasks": rows}, rec)

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
