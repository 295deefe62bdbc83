"""Stragglers cut by rule: when a tool round stops waiting for its slowest calls (pure logic, no I/O).

A tool round runs every rollout's calls at once and TRL generates the next turn only when all are back, so a
round lasts as long as its slowest call. With heavy-tailed tool latencies (a test suite that usually takes 2 s
and sometimes 60 s) one hung call holds the whole batch. A member's ``stragglers:``
(`ormix.config.StragglerConfig`) says when the round gives up on the calls still running:

- ``deadline_s``: an absolute bound, seconds after the round started;
- ``median_multiple`` (with ``after_fraction``): once that fraction of the round's calls are back, the calls
  still running get until ``median_multiple`` × the median latency of those back (never less than
  ``min_wait_s``).

The earlier of the two applies. `cut_at` gives the moment (seconds after the round started) at which the calls
still running are abandoned, from what is back so far; the round (`ormix.rollout._batch.ToolRound`) asks it
again each time a call comes back. Abandoned rollouts end as ``error`` / ``straggler`` and score ``None``:
TRL leaves them out of their group's baseline and gives them advantage 0.

Example:
    >>> from ormix.config import StragglerConfig
    >>> policy = StragglerConfig(median_multiple=4.0, after_fraction=0.75)
    >>> cut_at(policy, done=[0.2, 0.3], total=4) is None       # half back: keep waiting
    True
    >>> cut_at(policy, done=[0.2, 0.3, 0.4], total=4)          # 3 of 4 back: 4 × median 0.3
    1.2
    >>> cut_at(StragglerConfig(deadline_s=5.0), done=[], total=8)
    5.0
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from ormix.config import StragglerConfig


def cut_at(policy: StragglerConfig | None, done: Sequence[float], total: int) -> float | None:
    """Seconds after the round's start at which the calls still running are cut, or ``None`` (wait for all).

    `done`: the latencies (s) of the calls back so far; `total`: the calls of the round. A time already past
    means: cut now.
    """
    if policy is None or total <= 0 or len(done) >= total:
        return None
    times = []
    if policy.deadline_s is not None:
        times.append(max(policy.min_wait_s, policy.deadline_s))
    if policy.median_multiple is not None and done:
        needed = max(1, math.ceil(policy.after_fraction * total))
        if len(done) >= needed:
            times.append(max(policy.min_wait_s, policy.median_multiple * statistics.median(done)))
    return min(times) if times else None


def tail_wait(latencies: Sequence[float], fraction: float = 0.05) -> float:
    """The time a round spent waiting on its last `fraction` of calls (at least its last call): slowest
    latency minus the latency at which all the others were back (0 for a round of one call or none).

    Example:
        >>> tail_wait([1.0] * 19 + [10.0])           # 20 calls: the last 5% is the one of 10 s
        9.0
    """
    if len(latencies) < 2:
        return 0.0
    ordered = sorted(latencies)
    keep = max(1, min(len(ordered) - 1, math.floor((1.0 - fraction) * len(ordered))))
    return ordered[-1] - ordered[keep - 1]
