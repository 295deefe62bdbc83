"""Rollout upload to the OpenReward platform, on the wire as the openreward SDK sends it.

The reference is the SDK's `RolloutAPI` (`openreward/api/rollouts/rollout.py`, `background.py`,
`openreward/models.py`): every rollout is a `rollout` event (its run name, environment, split, task spec,
metadata and run info), then one `message` event per message (`index` 0, 1, ... under the rollout's
`rolloutEventId`; the last one carries the reward and `isFinished`), and a `rollout_update` event with the
rollout's info (task index, step). Events go as JSON, `None` fields left out, in batches
``{"events": [...]}`` of at most 128 events and 1 MB to ``POST {api_url}/v1/rollouts`` with `x-api-key`.
As in the SDK, a rollout's `rollout` event is accepted before its messages are sent (a rollout whose start
was refused sends nothing more), and an environment's platform id is looked up once
(``GET /v1/environments/{owner}/{name}``, best effort).

What ormix does differently: the SDK sends each rollout's start synchronously from the caller's thread and
queues without bound (a ring of 100,000 events that evicts the oldest); `RolloutUploader` never blocks its
caller: `submit` puts whole rollouts on a bounded queue and, when it is full, drops them and counts them.
Everything else happens on one daemon thread with its own event loop (not the ORS portal's: a slow platform
never delays a tool call).

**Never sent twice into duplicates.** Each event gets its id (a UUID) once, when the rollout is built; a
batch is only ever sent again with the same events and ids, and only when it provably did not reach the
platform or the platform said so: the connection could not be opened (`HTTPFailure.unsent`), or an answer of
`429` or `5xx` (retried with the SDK's backoff, 0.5 s doubling up to 30 s, at
most 4 times, as the SDK retries 5xx; the same ids let the platform drop a copy it already stored). A batch
that may have arrived but got no answer (connection cut after it was written, even on a reused connection,
where a load balancer may have forwarded it; no answer in time) is never sent again, as the SDK never
resends one: its rollouts are counted `unconfirmed`. Any other answer (`401`, `400`, ...) counts them
`failed`.

Counts (`UploadCounts`): `submitted`, `sent` (every event of the rollout accepted), `dropped` (queue full),
`failed`, `unconfirmed`, `abandoned` (still queued or unsent when `close` ran out of time), `queued`.

Example:
    >>> r = PlatformRollout("run-1", [Message("user_message", "hi"), Message("assistant_message", "ok")],
    ...                     environment="Owner/Env", reward=1.0)
    >>> start, rest = rollout_events(r, timestamp_ms=0)
    >>> start["eventType"], start["runName"], [e["eventType"] for e in rest]
    ('rollout', 'run-1', ['message', 'message'])
    >>> rest[-1]["reward"], rest[-1]["isFinished"], rest[0]["isFinished"]
    (1.0, True, False)
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ormix.ors._endpoint import Endpoint
from ormix.ors._http import HTTPClient, HTTPFailure, encode_json

logger = logging.getLogger("ormix.upload")

#: The SDK's `max_batch_items` and `max_batch_bytes`: what one `POST /v1/rollouts` carries at most.
MAX_BATCH_EVENTS = 128
MAX_BATCH_BYTES = 1_000_000
#: The SDK's retry rule for an upload answered 5xx (`max_retries`, `backoff_base`, `_factor`, `_cap`).
MAX_RETRIES, BACKOFF_BASE_S, BACKOFF_FACTOR, BACKOFF_CAP_S = 4, 0.5, 2.0, 30.0

#: The SDK's normalized message types (`openreward.api.rollouts.serializers.models.NormalizedType`).
MESSAGE_TYPES = frozenset(
    {"reasoning", "tool_call", "tool_result", "user_message", "assistant_message", "system_message"}
)


@dataclasses.dataclass(frozen=True, slots=True)
class Message:
    """One message of a rollout, in the SDK's normalized form (`NormalizedEvent`): `type` one of
    `MESSAGE_TYPES`; `name` and `call_id` for a `tool_call` (whose `content` is its JSON arguments);
    `call_id` for a `tool_result`.

    Example:
        >>> Message("tool_call", '{"text": "apple"}', name="echo", call_id="call_0").name
        'echo'
    """

    type: str
    content: str | None = None
    name: str | None = None
    call_id: str | None = None


@dataclasses.dataclass(slots=True)
class PlatformRollout:
    """One rollout to upload: what `client.rollout.create(...)` takes, the messages `.log(...)` sends and
    the reward the last one carries. `event_id` (the rollout's id on the platform) is made once.

    Example:
        >>> PlatformRollout("run", []).event_id != PlatformRollout("run", []).event_id
        True
    """

    run_name: str
    messages: list[Message]
    environment: str | None = None
    split: str | None = None
    task_spec: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    run_info: dict[str, Any] | None = None
    rollout_info: dict[str, Any] | None = None
    step: int | None = None
    reward: float | None = None
    rollout_name: str | None = None
    event_id: str = dataclasses.field(default_factory=lambda: str(uuid.uuid4()))


def _strip_none(d: Mapping[str, Any]) -> dict[str, Any]:
    # The SDK's `_strip_none`: None values go, recursively through dicts.
    return {k: _strip_none(v) if isinstance(v, Mapping) else v for k, v in d.items() if v is not None}


def _sanitise(text: str | None) -> str | None:
    # The SDK's `_sanitise_content`: no NUL bytes, lone surrogates escaped.
    if text is None:
        return None
    return text.replace("\x00", "").encode("utf-8", "backslashreplace").decode("utf-8")


def rollout_events(
    rollout: PlatformRollout, *, timestamp_ms: int | None = None, environment_id: str | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The SDK's events for one rollout: its `rollout` event, then its `rollout_update` (when it has
    `rollout_info`) and one `message` event per message, as JSON-ready dicts (None fields left out).

    Example:
        >>> r = PlatformRollout("run", [Message("assistant_message", "a\\x00b")])
        >>> r.rollout_info = {"task_index": 3}
        >>> start, rest = rollout_events(r, timestamp_ms=5)
        >>> [e["eventType"] for e in rest], rest[0]["rollout_info"], rest[1]["content"], rest[1]["index"]
        (['rollout_update', 'message'], {'task_index': 3}, 'ab', 0)
    """
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    start = _strip_none(
        {
            "eventId": rollout.event_id,
            "timestamp": ts,
            "runName": rollout.run_name,
            "step": rollout.step,
            "environment": rollout.environment,
            "environment_id": environment_id,
            "rolloutName": rollout.rollout_name,
            "split": rollout.split,
            "metadata": rollout.metadata,
            "task_spec": rollout.task_spec,
            "run_info": rollout.run_info,
            "eventType": "rollout",
        }
    )
    rest: list[dict[str, Any]] = []
    if rollout.rollout_info is not None:
        rest.append(
            _strip_none(
                {
                    "eventId": rollout.event_id,
                    "timestamp": ts,
                    "rollout_info": rollout.rollout_info,
                    "eventType": "rollout_update",
                }
            )
        )
    last = len(rollout.messages) - 1
    for i, m in enumerate(rollout.messages):
        rest.append(
            _strip_none(
                {
                    "eventId": _event_id(rollout.event_id, i),
                    "timestamp": ts,
                    "index": i,
                    "rolloutEventId": rollout.event_id,
                    "type": m.type,
                    "content": _sanitise(m.content),
                    "name": m.name,
                    "callId": m.call_id,
                    "environment_id": environment_id,
                    "reward": rollout.reward if i == last else None,
                    "isFinished": i == last,
                    "metadata": {},
                    "eventType": "message",
                }
            )
        )
    return start, rest


def _event_id(rollout_id: str, index: int) -> str:
    # Derived from the rollout's id, so building a rollout's events again gives the same ids (a resend is
    # recognisable as one). The SDK draws a fresh uuid4 per message; any unique id will do for the platform.
    return str(uuid.uuid5(uuid.UUID(rollout_id), str(index)))


@dataclasses.dataclass(slots=True)
class UploadCounts:
    """What became of the rollouts handed to a `RolloutUploader` (see the module).

    Example:
        >>> UploadCounts(submitted=3, sent=2, dropped=1).lost
        1
    """

    submitted: int = 0
    sent: int = 0
    dropped: int = 0
    failed: int = 0
    unconfirmed: int = 0
    abandoned: int = 0
    queued: int = 0
    #: Requests sent again (a refused or unanswered-before-sending batch), and events sent in all.
    resends: int = 0
    events: int = 0

    @property
    def lost(self) -> int:
        """Rollouts that are not (known to be) on the platform: dropped, failed, unconfirmed, abandoned."""
        return self.dropped + self.failed + self.unconfirmed + self.abandoned

    def as_dict(self) -> dict[str, int]:
        """The counts as a plain dict (`lost` included)."""
        return {**dataclasses.asdict(self), "lost": self.lost}


class _Outcome:
    SENT, UNCONFIRMED, FAILED = 0, 1, 2


class RolloutUploader:
    """Uploads rollouts in the background (see the module): `submit` never blocks, `flush` waits until
    what was submitted is done, `close` flushes (bounded) and stops the thread.

    Args:
        api_url: the platform API (`OPENREWARD_API_URL`, by default ``https://api.openreward.ai``).
        api_key: sent as ``x-api-key``.
        convert: turns each submitted item into a `PlatformRollout` (or None to skip it), on the upload
            thread (default: items already are `PlatformRollout`s).
        max_queued: rollouts waiting at most; more are dropped (and counted).
        concurrency: requests in flight at once.
        retry_delay: the wait before resend `n` (1, 2, ...) of a refused batch (default: the SDK's backoff;
            a `Retry-After` answer waits that long, capped at 30 s).

    Example (with a platform, ``.start()`` it and ``close()`` at the end; tests/ors/test_upload.py runs it
    against the platform double):
        >>> up = RolloutUploader("http://127.0.0.1:9", "sk-...", max_queued=1)   # not started: no sending
        >>> up.submit([PlatformRollout("run-1", [Message("user_message", "hi")])] * 2)
        1
        >>> up.counts.dropped, up.close(timeout_s=0).abandoned
        (1, 1)
    """

    def __init__(
        self,
        api_url: str,
        api_key: str | None,
        *,
        convert: Callable[[Any], PlatformRollout | None] | None = None,
        max_queued: int = 10_000,
        concurrency: int = 4,
        max_retries: int = MAX_RETRIES,
        retry_delay: Callable[[int], float] | None = None,
        timeout_s: float = 60.0,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        # ormix's User-Agent (as on every request of its own); the key as the SDK sends it.
        self._headers = {**Endpoint.for_url(self.api_url).headers(), "x-api-key": api_key or ""}
        self._convert = convert or (lambda item: item)
        self.max_queued = max(1, int(max_queued))
        self.concurrency = max(1, int(concurrency))
        self.max_retries = max_retries
        self._retry_delay = retry_delay or _sdk_backoff
        self.timeout_s = timeout_s
        self.counts = UploadCounts()
        self._lock = threading.Lock()
        self._queue: deque[Any] = deque()
        self._busy = 0  # rollouts taken off the queue and not yet settled
        self._idle = threading.Condition(self._lock)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._main_task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._closed = False  # counts are final (a batch still in flight at close is counted abandoned)
        self._env_ids: dict[str, str | None] = {}
        self._said: set[str] = set()

    def __repr__(self) -> str:
        return f"RolloutUploader({self.api_url!r}, queued={len(self._queue)}, counts={self.counts})"

    # ── the caller's side ────────────────────────────────────────────

    def start(self) -> RolloutUploader:
        """Start the upload thread (idempotent); returns self."""
        if self._thread is not None:
            return self
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="ormix-upload", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def submit(self, items: Iterable[Any]) -> int:
        """Queue rollouts for upload without blocking; returns how many were queued (the rest, beyond
        `max_queued`, are dropped and counted)."""
        taken = dropped = 0
        with self._lock:
            for item in items:
                self.counts.submitted += 1
                if len(self._queue) >= self.max_queued or self._stopping:
                    dropped += 1
                    continue
                self._queue.append(item)
                taken += 1
            self.counts.dropped += dropped
            self.counts.queued = len(self._queue)
        if dropped:
            self._say(
                "dropped",
                f"rollout upload queue full ({self.max_queued} waiting); {dropped} rollout(s) dropped, "
                "counted in ormix/upload/dropped (the platform is slower than training)",
            )
        if taken:
            self._poke()
        return taken

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait until every rollout submitted so far is settled (sent, failed or unconfirmed); False when
        `timeout_s` passed first."""
        self._poke()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._idle:
            while self._queue or self._busy:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._idle.wait(left if left is not None else 1.0)
        return True

    def close(self, timeout_s: float = 30.0) -> UploadCounts:
        """Flush (at most `timeout_s`), stop the thread, and count what is left as `abandoned`; later
        submits are dropped. Idempotent; returns the final counts."""
        self.flush(timeout_s)
        with self._lock:
            self._stopping = self._closed = True
            left = len(self._queue) + self._busy
            self._queue.clear()
            self.counts.abandoned += left
            self._busy = 0
            self.counts.queued = 0
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            loop.call_soon_threadsafe(self._stop_loop)
            thread.join(5)
        return self.counts

    def snapshot(self) -> UploadCounts:
        """A copy of the counts, taken under the lock."""
        with self._lock:
            return dataclasses.replace(self.counts, queued=len(self._queue))

    def _poke(self) -> None:
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(wake.set)
            except RuntimeError:  # closed meanwhile
                pass

    # ── the upload thread ────────────────────────────────────────────

    def _run(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop, self._wake = loop, asyncio.Event()
        ready.set()
        self._main_task = loop.create_task(self._main())
        try:
            loop.run_until_complete(self._main_task)
        except asyncio.CancelledError:
            pass  # `close` ran out of time: what was in flight is counted abandoned
        finally:
            loop.close()

    def _stop_loop(self) -> None:
        self._stopping = True
        if self._wake is not None:
            self._wake.set()
        # A request in flight would otherwise hold the end of the run past `close`'s bound (the HTTP
        # timeouts are longer): `close` has already counted it abandoned.
        if self._main_task is not None:
            self._main_task.cancel()

    async def _main(self) -> None:
        assert self._wake is not None
        # Idle connections are reused for 3 s only: below the usual idle timeouts of servers and load
        # balancers (uvicorn 5 s), so an upload rarely meets a connection closing under it (which, having
        # maybe been read, would be counted unconfirmed rather than sent again).
        http = HTTPClient(connect_timeout_s=10.0, keepalive_s=3.0)
        try:
            while not self._stopping:
                await self._wake.wait()
                self._wake.clear()
                while not self._stopping:
                    with self._lock:
                        items = [self._queue.popleft() for _ in range(min(len(self._queue), 256))]
                        self._busy += len(items)
                        self.counts.queued = len(self._queue)
                    if not items:
                        break
                    try:
                        await self._send_items(http, items)
                    except Exception as e:  # noqa: BLE001 - a bug here must not end the uploads of the run
                        self._say(
                            "bug", f"{len(items)} rollout(s) were not uploaded ({type(e).__name__}: {e})"
                        )
                        with self._lock:
                            self.counts.failed += len(items)
                            self._busy = max(0, self._busy - len(items))
                            self._idle.notify_all()
        finally:
            await http.aclose()

    async def _send_items(self, http: HTTPClient, items: list[Any]) -> None:
        rollouts: list[PlatformRollout] = []
        for item in items:
            try:
                r = self._convert(item)
            except Exception as e:  # noqa: BLE001 - one bad rollout must not stop the uploads
                self._say("convert", f"a rollout could not be prepared for upload ({e}); counted failed")
                with self._lock:
                    self.counts.failed += 1
                continue
            if r is not None:
                rollouts.append(r)
        outcome: dict[str, int] = {r.event_id: _Outcome.SENT for r in rollouts}
        starts: list[tuple[str, dict[str, Any], int]] = []
        rests: dict[str, list[tuple[str, dict[str, Any], int]]] = {}
        for r in rollouts:
            env_id = await self._environment_id(http, r.environment)
            try:
                # Encoded here, one rollout at a time (for the batches' sizes): a value JSON cannot hold
                # (NaN, an object in the metadata) fails this rollout, not the batch and the thread.
                start, rest = rollout_events(r, environment_id=env_id)
                sized = [(r.event_id, e, len(encode_json(e))) for e in (start, *rest)]
            except (TypeError, ValueError) as e:
                self._say("encode", f"a rollout could not be encoded for upload ({e}); counted failed")
                outcome[r.event_id] = _Outcome.FAILED
                continue
            starts.append(sized[0])
            rests[r.event_id] = sized[1:]
        # Starts first: a rollout's messages go only once the platform has accepted its start (as the SDK).
        await self._send_batches(http, starts, outcome)
        messages = [m for rid, _, _ in starts if outcome[rid] == _Outcome.SENT for m in rests[rid]]
        await self._send_batches(http, messages, outcome)
        with self._lock:
            if self._closed:
                return
            results = list(outcome.values())
            self.counts.sent += results.count(_Outcome.SENT)
            self.counts.unconfirmed += results.count(_Outcome.UNCONFIRMED)
            self.counts.failed += results.count(_Outcome.FAILED)
            self._busy = max(0, self._busy - len(items))
            self._idle.notify_all()

    async def _send_batches(
        self, http: HTTPClient, events: list[tuple[str, dict[str, Any], int]], outcome: dict[str, int]
    ) -> None:
        batches: list[list[tuple[str, dict[str, Any]]]] = []
        size = 0
        for rid, e, n in events:
            if (
                not batches
                or len(batches[-1]) >= MAX_BATCH_EVENTS
                or (batches[-1] and size + n > MAX_BATCH_BYTES)
            ):
                batches.append([])
                size = 0
            batches[-1].append((rid, e))
            size += n
        limit = asyncio.Semaphore(self.concurrency)

        async def one(batch: list[tuple[str, dict[str, Any]]]) -> None:
            async with limit:
                result = await self._post(http, [e for _, e in batch])
            for rid, _ in batch:
                outcome[rid] = max(outcome[rid], result)

        await asyncio.gather(*(one(b) for b in batches))

    async def _post(self, http: HTTPClient, events: list[dict[str, Any]]) -> int:
        body = {"events": events}
        url = f"{self.api_url}/v1/rollouts"
        for attempt in range(self.max_retries + 2):
            if attempt:
                with self._lock:
                    self.counts.resends += 1
            try:
                resp = await asyncio.wait_for(
                    http.request("POST", url, json=body, headers=self._headers), self.timeout_s
                )
            except HTTPFailure as e:
                if e.unsent:  # never left this machine: safe to send again
                    if not e.retryable or attempt >= self.max_retries or self._stopping:
                        self._say("connect", f"cannot reach {self.api_url} ({e})")
                        return _Outcome.FAILED
                    await asyncio.sleep(self._retry_delay(attempt + 1))
                    continue
                # Even the idle-close race of a reused connection: the platform's API sits behind load
                # balancers, which may have read and forwarded it (see ormix.ors._http's caveat).
                self._say(
                    "unconfirmed", f"an upload got no answer ({e}); not sent again (it may have arrived)"
                )
                return _Outcome.UNCONFIRMED
            except asyncio.TimeoutError:
                self._say("unconfirmed", f"an upload got no answer in {self.timeout_s:.0f} s; not sent again")
                return _Outcome.UNCONFIRMED
            status = resp.status_code
            if 200 <= status < 300:
                with self._lock:
                    self.counts.events += len(events)
                return _Outcome.SENT
            if (status == 429 or status >= 500) and attempt < self.max_retries and not self._stopping:
                await asyncio.sleep(_retry_after(resp.headers) or self._retry_delay(attempt + 1))
                continue
            self._say(f"http-{status}", f"the platform refused an upload: HTTP {status} {resp.text[:200]}")
            return _Outcome.FAILED
        return _Outcome.FAILED

    async def _environment_id(self, http: HTTPClient, environment: str | None) -> str | None:
        # The SDK's `_fetch_environment_id`: once per catalog environment, best effort (None on any failure).
        if not environment or "/" not in environment:
            return None
        if environment not in self._env_ids:
            found = None
            try:
                resp = await asyncio.wait_for(
                    http.request(
                        "GET", f"{self.api_url}/v1/environments/{environment}", headers=self._headers
                    ),
                    10,
                )
                if resp.status_code == 200:
                    value = resp.json().get("id")
                    found = value if isinstance(value, str) else None
            except (HTTPFailure, asyncio.TimeoutError, ValueError, AttributeError):
                pass
            self._env_ids[environment] = found
        return self._env_ids[environment]

    def _say(self, key: str, message: str) -> None:
        if key not in self._said:  # once per kind: a dead platform must not flood the log
            self._said.add(key)
            logger.warning("ormix: %s", message)


def _sdk_backoff(n: int) -> float:
    # tenacity's wait_exponential(multiplier=0.5, exp_base=2, max=30), as the SDK configures it, jittered.
    return min(BACKOFF_CAP_S, BACKOFF_BASE_S * BACKOFF_FACTOR ** (n - 1)) * random.uniform(0.8, 1.0)


def _retry_after(headers: Mapping[str, str]) -> float | None:
    try:
        value = float(headers.get("Retry-After", ""))
    except ValueError:
        return None
    return min(max(0.0, value), BACKOFF_CAP_S)
