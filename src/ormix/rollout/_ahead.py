"""Sessions opened ahead (the I/O of `ormix.rollout._lookahead`): opened in the background while a step
generates and trains, kept alive, handed to the step that needs them, closed and counted when unused.

`SessionsAhead.start(position, requests)` starts opening one coming batch's sessions on the ORS portal (the
open of each is the spec's own, with its retries, its `max_concurrent_sessions` and its keepalive pings, so a
session waiting for its step is kept alive by the server's reaper rules like any other) and returns at once.
`take(position, requests)` is called when that batch starts: it waits for the opens still running (the time
is ``ahead_wait_s``: the part of the opens that the lookahead did not hide), parks each session with its spec
for the episode whose `reset(**row)` asks for it, and returns the requests it had nothing for (opened then,
as without lookahead). A session the server reaped while it waited (or whose server left the rotation) is
closed and opened again, and so is an open that failed ahead.
`discard(keep)` closes the batches opened ahead that will not be used (a plan that changed, a resumed run);
`close()` cancels the opens still running and closes everything (run end, ``max_steps``, Ctrl-C, SIGTERM).
Both count what they closed (`unused`).

Example:
    >>> from ormix import OpenRewardSpec
    >>> from ormix.rollout._batch import OpenRequest
    >>> spec = OpenRewardSpec("local:echo", num_tasks=2, local_serve="thread")
    >>> factory = spec.environment_factory
    >>> config = factory.episode_config_for({"task_index": 0})
    >>> ahead = SessionsAhead()
    >>> ahead.start(1, [OpenRequest(config, {"task_index": 0})])     # returns at once
    >>> taken = ahead.take(1, [OpenRequest(config, {"task_index": 0})])
    >>> taken.used, taken.remaining
    (1, [])
    >>> episode = factory()
    >>> episode.reset(task_index=0)                                   # the session opened ahead
    "Call the echo tool with the word 'apple'."
    >>> config.discard_parked(), ahead.close()
    (0, 0)
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from ormix.ors._bridge import call_soon, portal
from ormix.rollout._batch import DEFAULT_MAX_IN_FLIGHT, OpenRequest, row_key
from ormix.rollout._episode import all_at_once

logger = logging.getLogger(__name__)


@dataclass
class _Batch:
    requests: list[OpenRequest]
    results: list[tuple[OpenRequest, Any]] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)
    cancelled: bool = False
    scope: Any = None


@dataclass
class Taken:
    """What `SessionsAhead.take` did for one batch: sessions handed over (`used`), requests it had nothing
    for (`remaining`), the wait for opens still running (`wait_s`), sessions found reaped (`reaped`), opens
    that had failed (`failed`; both opened again, so in `remaining`) and sessions it had that the batch did
    not ask for (`unused`, closed)."""

    used: int = 0
    remaining: list[OpenRequest] = field(default_factory=list)
    wait_s: float = 0.0
    reaped: int = 0
    failed: int = 0
    unused: int = 0


def _key(request: OpenRequest) -> tuple[int, tuple[Any, ...]]:
    return id(request.config), row_key(request.row)


class SessionsAhead:
    """The sessions of coming batches, by the batch's position in the schedule (see the module docstring).

    Args:
        max_in_flight: opens in flight at once for one batch (each spec's `max_concurrent_sessions` applies
            too).
    """

    def __init__(self, max_in_flight: int = DEFAULT_MAX_IN_FLIGHT) -> None:
        self.max_in_flight = max(1, int(max_in_flight))
        self._batches: dict[Any, _Batch] = {}
        self._lock = threading.Lock()
        #: Sessions opened ahead so far, and those closed without being used.
        self.opened = 0
        self.unused = 0

    def positions(self) -> list[Any]:
        """The batches opened (or opening) ahead."""
        with self._lock:
            return list(self._batches)

    def held(self) -> dict[int, int]:
        """Sessions opened or opening ahead per spec (`id` of its `EpisodeConfig`)."""
        counts: dict[int, int] = defaultdict(int)
        with self._lock:
            for batch in self._batches.values():
                for request in batch.requests:
                    counts[id(request.config)] += 1
        return dict(counts)

    def sessions(self) -> list[Any]:
        """The sessions opened ahead and not yet handed over (those still opening are not in it)."""
        with self._lock:
            batches = list(self._batches.values())
        return [o.session for b in batches for _, o in list(b.results) if o.session is not None]

    def start(self, position: Any, requests: Sequence[OpenRequest]) -> None:
        """Start opening `requests` (one coming batch's rows) in the background; returns at once."""
        if not requests:
            return
        batch = _Batch(list(requests))
        with self._lock:
            if position in self._batches:
                return
            self._batches[position] = batch
        portal().start_task_soon(self._open, batch)

    async def _open(self, batch: _Batch) -> None:
        # Cancelled (from another thread) through `batch.cancelled` and the scope, both read on this loop: a
        # cancel before this starts is seen here, one after it cancels the scope.
        if batch.cancelled:
            batch.done.set()
            return
        limiter = anyio.CapacityLimiter(self.max_in_flight)

        async def one(request: OpenRequest) -> None:
            async with limiter:
                opened = await request.config.open_for(request.row)
            batch.results.append((request, opened))

        try:
            with anyio.CancelScope() as batch.scope:
                async with anyio.create_task_group() as tg:
                    for request in batch.requests:
                        tg.start_soon(one, request)
        finally:
            # Set once no open can still finish: a cancelled open has closed its own session (shielded).
            batch.done.set()

    def take(self, position: Any, requests: Sequence[OpenRequest]) -> Taken:
        """Hand the sessions opened ahead for the batch at `position` to its specs (parked for `reset`)."""
        with self._lock:
            batch = self._batches.get(position)
        taken = Taken()
        t0 = time.perf_counter()
        if batch is not None:
            # Taken out only once its opens are done: a Ctrl-C during the wait leaves it where `close()`
            # finds it (its sessions are pinged: the server would never reap them).
            batch.done.wait()
        with self._lock:
            if self._batches.get(position) is batch:
                self._batches.pop(position, None)
            else:
                batch = None  # discarded meanwhile (another thread): closed there
        if batch is None:
            taken.remaining = list(requests)
            return taken
        taken.wait_s = time.perf_counter() - t0
        self.opened += len(batch.results)
        pool: dict[tuple[int, tuple[Any, ...]], list[Any]] = defaultdict(list)
        for request, opened in batch.results:
            pool[_key(request)].append(opened)
        stale = []
        for request in requests:
            found = pool.get(_key(request))
            opened = found.pop(0) if found else None
            if opened is None:
                taken.remaining.append(request)
            elif opened.error is not None:
                # Failed ahead (its server died meanwhile, a flaky open): opened again now, as it would have
                # been without lookahead, rather than handing the old failure to the rollout.
                taken.failed += 1
                taken.remaining.append(request)
            elif opened.session is not None and _gone(opened.session):
                # Reaped by the server (or its server left the rotation) while it waited: opened again now.
                stale.append(opened)
                taken.reaped += 1
                taken.remaining.append(request)
            else:
                request.config.park(request.row, opened)
                taken.used += 1
        left = [opened for found in pool.values() for opened in found]
        taken.unused = sum(o.session is not None for o in left)
        self.unused += taken.unused
        _close([*stale, *left])
        if taken.reaped:
            logger.warning(
                "ormix: %d session(s) opened ahead were gone when their step started (the server reaped "
                "them); opened again. If this repeats, compare the server's idle limit with the member's "
                "ping_interval_s, or lower the lookahead",
                taken.reaped,
            )
        return taken

    def discard(self, keep: Sequence[Any] = ()) -> int:
        """Close the batches opened ahead whose position is not in `keep`; returns the sessions closed."""
        with self._lock:
            gone = [p for p in self._batches if p not in keep]
            batches = [self._batches.pop(p) for p in gone]
        return self._drop(batches)

    def close(self) -> int:
        """Cancel the opens still running and close every session opened ahead; returns how many."""
        return self.discard(())

    def _drop(self, batches: Sequence[_Batch]) -> int:
        for batch in batches:
            batch.cancelled = True
            call_soon(_cancel, batch)
        opened: list[Any] = []
        for batch in batches:
            batch.done.wait()
            opened.extend(o for _, o in batch.results)
        self.opened += len(opened)
        closed = sum(o.session is not None for o in opened)
        self.unused += closed
        _close(opened)
        return closed


def _gone(session: Any) -> bool:
    """A session that can no longer serve its rollout: the server forgot it, or (a member on several
    servers) its server is out of rotation."""
    return bool(getattr(session, "dead", False)) or getattr(session, "server_up", True) is False


def _cancel(batch: _Batch) -> None:
    if batch.scope is not None:
        batch.scope.cancel()


def _close(opened: Sequence[Any]) -> None:
    all_at_once([o.session.close for o in opened if o.session is not None])
