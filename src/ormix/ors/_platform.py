"""What one ORS client shares across its requests on the OpenReward platform: rate limits and cold starts.

The openreward SDK (`openreward/api/_session/http.py`) is the reference for both rules:

- **Cold starts.** While an environment's backend warms up, the platform answers `503` with
  `X-Backend-State: starting` and `Retry-After`. Nothing ran, so the request is sent again after
  `Retry-After` (capped at 10 s, as the SDK caps it) until the backend answers or the caller's deadline
  passes (the SDK rides it out for 600 s, `OPENREWARD_STARTING_RIDE_OUT_S`; its comments give a p50 of
  ~4.6 min and a tail of ~9 min under an autoscale ramp). ormix does so on every request, and bounds an
  open by the member's `open_timeout_s` (900 s by default for catalog targets).
- **Rate limits.** A `429` with `Retry-After` pauses *every* request of the client (one member's
  deployment) until then, not only the one that got it, so 64 rollouts do not each hammer a deployment
  that already said "slow down".

`BackendGate` holds both, per client: the pause (`pause`, `wait_turn`) and the cold-start waits in
progress (`StartingWait`), which `ormix train` and `ormix check` show live ("seta: backend starting,
40 s") and which the env-time metrics count (`OpenWait.starting_s`), never as an error.

Example:
    >>> gate = BackendGate(clock=lambda: 100.0)
    >>> gate.pause(3.0); gate.delay()
    3.0
    >>> wait = gate.begin_starting(); gate.starting_for()
    0.0
    >>> gate.end_starting(wait)
    0.0
    >>> gate.starting_for() is None, gate.starting_waits
    (True, 1)
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import anyio

#: Longest single wait a `Retry-After` is honoured for (the SDK's `_ENV_SERVER_WAIT_CAP_S`).
MAX_RETRY_AFTER_S = 10.0


def is_starting(status: int, headers: object) -> bool:
    """True for the platform's "backend still starting" answer (`503` + `X-Backend-State: starting`).

    Example:
        >>> is_starting(503, {"X-Backend-State": "starting"}), is_starting(503, {}), is_starting(502, {})
        (True, False, False)
    """
    get = getattr(headers, "get", None)
    return status == 503 and get is not None and get("X-Backend-State") == "starting"


@dataclasses.dataclass(slots=True)
class StartingWait:
    """One request riding out a starting backend, from its first "starting" answer."""

    since: float


@dataclasses.dataclass(slots=True)
class OpenWait:
    """What one session open spent waiting for a starting backend (seconds), and whether it still is.

    Example:
        >>> w = OpenWait(); w.add(1.5); w.add(0.5); w.starting_s
        2.0
    """

    starting_s: float = 0.0
    waiting: bool = False
    #: A request of the open was cut (its deadline, a cancel) while the backend was still starting.
    gave_up: bool = False

    def add(self, seconds: float) -> None:
        """Count `seconds` more of riding out a starting backend."""
        self.starting_s += max(0.0, seconds)


class BackendGate:
    """Rate-limit pause and cold-start waits shared by every request of one client (see the module).

    Attributes: `paused_until` (clock time before which no request is sent), `rate_limited` (429s seen),
    `starting_waits` (waits that ended), `starting_total_s` (their summed length), `gave_up` (requests
    that hit their deadline while the backend was still starting).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.paused_until = 0.0
        self.rate_limited = 0
        self.starting_waits = 0
        self.starting_total_s = 0.0
        self.gave_up = 0
        self._waits: list[StartingWait] = []

    def __repr__(self) -> str:
        return (
            f"BackendGate(paused_for={self.delay():.1f}s, starting={len(self._waits)}, "
            f"rate_limited={self.rate_limited})"
        )

    # ── 429 + Retry-After ────────────────────────────────────────────

    def pause(self, seconds: float) -> None:
        """No request of this client goes out for `seconds` (a 429's `Retry-After`, capped)."""
        self.rate_limited += 1
        until = self._clock() + min(max(0.0, seconds), MAX_RETRY_AFTER_S)
        self.paused_until = max(self.paused_until, until)

    def delay(self) -> float:
        """Seconds until requests may go out again (0 when not paused)."""
        return max(0.0, self.paused_until - self._clock())

    async def wait_turn(self) -> None:
        """Sleep while the client is paused by a rate limit (a pause that grows meanwhile is waited too)."""
        while (d := self.delay()) > 0:
            await anyio.sleep(d)

    # ── cold starts ──────────────────────────────────────────────────

    def begin_starting(self) -> StartingWait:
        """A request got its first "backend starting" answer: it rides it out from now."""
        wait = StartingWait(self._clock())
        self._waits.append(wait)
        return wait

    def elapsed(self, wait: StartingWait) -> float:
        """Seconds since `wait` began."""
        return max(0.0, self._clock() - wait.since)

    def end_starting(self, wait: StartingWait, *, gave_up: bool = False) -> float:
        """That request's wait is over (answered, or its deadline passed: `gave_up`); returns its length."""
        elapsed = max(0.0, self._clock() - wait.since)
        if wait in self._waits:
            self._waits.remove(wait)
            self.starting_waits += 1
            self.starting_total_s += elapsed
            self.gave_up += int(gave_up)
        return elapsed

    def starting_for(self) -> float | None:
        """How long the longest wait in progress has lasted (seconds); None when no request waits."""
        if not self._waits:
            return None
        return max(0.0, self._clock() - min(w.since for w in self._waits))
