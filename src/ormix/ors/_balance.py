"""Which of a member's servers gets the next session, and when a server leaves and rejoins the rotation.

Pure: no I/O.

`ormix.ors._pool.ServerPool` drives one environment on several ORS servers. The decisions it makes are here,
free of I/O, so they can be tested exhaustively:

- `pick_server`: the least-busy server in rotation (fewest sessions open or opening); ties go round-robin
  from `turn`, so equal servers fill evenly;
- `Rotation`: one server's place in the rotation. A probe that is refused (connection refused or reset, a
  non-200 answer) takes an in-rotation server out at once; probes that time out take it out after
  `timeouts_to_down` in a row (one slow answer from a busy server is not a dead server). A server out of
  rotation is probed again after a delay that doubles from `retry_s` up to `max_retry_s`, and one good
  probe brings it back.

Example:
    >>> pick_server([2, 0, 1], [True, False, True])
    2
    >>> r = Rotation()
    >>> r.probed("refused", now=10.0, interval_s=2.0), r.up, r.next_probe_at
    ('down', False, 11.0)
    >>> r.probed("ok", now=11.0, interval_s=2.0), r.up
    ('up', True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

#: What one health probe of a server found.
ProbeResult = Literal["ok", "refused", "timeout"]


def pick_server(loads: Sequence[int], up: Sequence[bool], turn: int = 0) -> int | None:
    """The index of the least-loaded server in rotation (`None` when none is); ties go to the first at or
    after `turn`, counting round.

    Example:
        >>> pick_server([1, 1, 1], [True, True, True], turn=1)
        1
        >>> pick_server([0, 0], [False, False]) is None
        True
    """
    n = len(loads)
    if len(up) != n:
        raise ValueError(f"{n} loads but {len(up)} up flags")
    candidates = [i for i in range(n) if up[i]]
    if not candidates:
        return None
    return min(candidates, key=lambda i: (loads[i], (i - turn) % n))


@dataclass
class Rotation:
    """One server's place in the rotation, moved by the results of its health probes.

    `up`: in rotation; `timeouts`: probes in a row that timed out; `down_probes`: failed probes since it
    left the rotation (they set the retry delay); `downs`: how many times it left; `next_probe_at`: when it is
    due for a probe (the caller's clock).

    Example:
        >>> r = Rotation(timeouts_to_down=2)
        >>> r.probed("timeout", now=0.0, interval_s=1.0), r.probed("timeout", now=1.0, interval_s=1.0)
        ('same', 'down')
    """

    up: bool = True
    timeouts: int = 0
    down_probes: int = 0
    downs: int = 0
    next_probe_at: float = 0.0
    timeouts_to_down: int = 2
    retry_s: float = 1.0
    max_retry_s: float = 30.0

    def retry_delay_s(self) -> float:
        """How long after a failed probe a server out of rotation is probed again.

        Example:
            >>> [Rotation(down_probes=k).retry_delay_s() for k in (0, 1, 2, 10)]
            [1.0, 2.0, 4.0, 30.0]
        """
        return min(self.max_retry_s, self.retry_s * 2 ** min(self.down_probes, 30))

    def probed(self, result: ProbeResult, *, now: float, interval_s: float) -> Literal["up", "down", "same"]:
        """Record a probe's `result` at time `now`; returns the change: `"up"` (back in rotation), `"down"`
        (taken out) or `"same"`."""
        if result == "ok":
            was_up = self.up
            self.up, self.timeouts, self.down_probes = True, 0, 0
            self.next_probe_at = now + interval_s
            return "same" if was_up else "up"
        if not self.up:
            self.down_probes += 1
            self.next_probe_at = now + self.retry_delay_s()
            return "same"
        if result == "timeout":
            self.timeouts += 1
            if self.timeouts < self.timeouts_to_down:
                self.next_probe_at = now  # probe again at once: a second timeout confirms it
                return "same"
        return self.take_down(now)

    def take_down(self, now: float) -> Literal["down", "same"]:
        """Take the server out of rotation (a probe or a request found it dead); `"same"` if it was out.

        Example:
            >>> r = Rotation()
            >>> r.take_down(0.0), r.take_down(0.5), r.downs
            ('down', 'same', 1)
        """
        if not self.up:
            return "same"
        self.up, self.timeouts, self.down_probes = False, 0, 0
        self.downs += 1
        self.next_probe_at = now + self.retry_delay_s()
        return "down"
