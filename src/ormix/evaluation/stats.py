"""Estimators and intervals of an evaluation: unbiased pass@k and pass^k per task, and intervals over tasks.

Pure: numbers in, numbers out (numpy and the standard library only).

**pass@k** of a task with n samples of which c succeeded is Chen et al.'s unbiased estimator
1 − C(n−c, k)/C(n, k) (the chance that k samples drawn without replacement from the n hold a success), in
the product form 1 − ∏_{i=n−c+1}^{n} (1 − k/i), which neither overflows nor loses precision at large n.
**pass^k** (all k succeed) is C(c, k)/C(n, k) = ∏_{i=0}^{k−1} (c−i)/(n−i). A member's value is the mean
over its tasks.

**Intervals are over tasks**: tasks are the unit that varies (a member's tasks are a sample of the tasks it
could have had), so each task contributes one value (its pass@k, its mean reward...) and the interval is
for the mean of those values over the task distribution, the same number one would get with infinitely many
tasks and samples. The method (`mean_interval`), measured by ``benchmarks/eval_calibration.py`` (simulated
members whose per-task success rates are drawn from a Beta, 16–64 tasks, 1 or 4 samples a task):

- Values that are all 0 or 1 (one sample a task, or pass@k with exactly k samples): the **Wilson score
  interval** — the mean of binary values is binomial, and Wilson's average coverage at 16–64 trials is
  95–96%, where the exact (Clopper–Pearson) interval covers 97–99% (too wide) and the t-interval collapses to
  a point when every task failed (coverage 87% at 16 hard tasks).
- Other values in [0, 1] (pass@1 from several samples a task, coverage...): a **dispersion-adjusted score
  interval**: Wilson's quadratic with the binomial variance μ(1−μ) scaled by the observed dispersion
  φ = s²/(m(1−m)) (s² the sample variance over tasks), i.e. an effective number of tasks T/φ, and a Student
  t quantile with T−1 degrees of freedom (the variance is estimated). It keeps Wilson's behaviour near 0
  and 1, where a t-interval under-covers (90% at 16 tasks), while the t quantile accounts for the estimated
  spread (with the normal quantile it covers 92–93% at 16 tasks).
- Values outside [0, 1] (a mean reward on another scale): the t-interval.

Measured (``benchmarks/eval_calibration.py``, 2000 repetitions a figure): a member's 95% interval covers
the truth in 94.0–96.3% of repetitions in all 27 figures (16/32/64 tasks, 1/4 samples, hard/mid/easy
members, pass@1 and pass@4).

The paired difference of two evals over the same tasks (`paired_interval`) combines the two members'
limits by the method of variance estimates recovery (MOVER; Newcombe's interval for paired proportions,
generalised) with the correlation of the two evals' per-task values. It inherits the score intervals'
behaviour near 0 and 1 (a paired t-interval collapses to 0 when nearly every task agrees and misses a
small true difference: 15–80% coverage on nearly solved members), and equals the paired t-interval for
values outside [0, 1]. Inside it, each member's limits use the t quantile with T−1 degrees of freedom,
binary values too (the correlation is estimated from the same tasks; with Wilson's normal quantile it
covers 92–93% at 16 tasks of mid-range members). Measured: 93.7–97.5% in the judged paired figures; it errs
on the wide side (97–97.5%) for binary values at 16–32 tasks, so a verdict of change is not over-claimed.
Below `MIN_TASKS_FOR_CORRELATION` tasks a positive correlation of values in [0, 1] is not used (2 tasks
always correlate ±1: on the demo's 2 tasks a member, it once claimed a change of +0.25 [0.01, 0.50] that one
task made).

Every interval is closed-form: deterministic, no resampling, so no seed is needed.

Example:
    >>> round(pass_at_k(n=4, c=1, k=2), 3), pass_hat_k(n=4, c=2, k=2)
    (0.5, 0.16666666666666666)
    >>> iv = mean_interval([1, 0, 1, 1, 0, 1, 1, 1])
    >>> iv.value, round(iv.low, 3), round(iv.high, 3), iv.n
    (0.75, 0.409, 0.929, 8)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

__all__ = [
    "INTERVAL_METHOD",
    "PAIRED_METHOD",
    "Interval",
    "mean_interval",
    "paired_interval",
    "pass_at_k",
    "pass_hat_k",
    "t_quantile",
]

#: The name of `mean_interval`'s method, as summaries record it.
INTERVAL_METHOD = "Wilson score over tasks (dispersion-adjusted, t quantile, for non-binary values)"
#: The name of `paired_interval`'s method.
PAIRED_METHOD = "paired over common tasks: MOVER from the score intervals and the per-task correlation"


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task: n samples, c successes (Chen et al. 2021, product form).

    Example:
        >>> pass_at_k(4, 0, 4), pass_at_k(4, 1, 4), pass_at_k(4, 1, 1)
        (0.0, 1.0, 0.25)
        >>> round(pass_at_k(200, 3, 10), 6)  # large n: no overflow
        0.143307
    """
    _check_counts(n, c, k)
    if n - c < k:
        return 1.0
    if k == 1:
        return c / n  # the same number, without the product's rounding
    # 1 - C(n-c, k) / C(n, k) = 1 - prod_{i=n-c+1}^{n} (1 - k / i)
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1, dtype=float)))


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased pass^k of one task (all of k samples succeed): C(c, k)/C(n, k).

    Example:
        >>> pass_hat_k(4, 4, 4), pass_hat_k(4, 3, 4), pass_hat_k(4, 3, 1)
        (1.0, 0.0, 0.75)
    """
    _check_counts(n, c, k)
    if c < k:
        return 0.0
    i = np.arange(k, dtype=float)
    return float(np.prod((c - i) / (n - i)))


def _check_counts(n: int, c: int, k: int) -> None:
    if not (k >= 1 and n >= k and 0 <= c <= n):
        raise ValueError(f"pass@k needs 1 <= k <= n and 0 <= c <= n (got n={n}, c={c}, k={k})")


@dataclass(frozen=True)
class Interval:
    """A value with its interval; ``n`` = how many tasks contributed (0: no value).

    Example:
        >>> Interval(0.5, 0.25, 0.75, 12).as_dict()
        {'value': 0.5, 'low': 0.25, 'high': 0.75, 'n': 12}
        >>> Interval.empty().covers(0.0)
        False
    """

    value: float | None
    low: float | None
    high: float | None
    n: int

    @classmethod
    def empty(cls) -> Interval:
        return cls(None, None, None, 0)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form every metric takes: ``{"value", "low", "high", "n"}``."""
        return {"value": self.value, "low": self.low, "high": self.high, "n": self.n}

    def covers(self, x: float) -> bool:
        """Whether ``x`` lies in [low, high] (False when there is no interval)."""
        return self.low is not None and self.high is not None and self.low <= x <= self.high


@functools.lru_cache(maxsize=1024)
def t_quantile(p: float, df: int) -> float:
    """The p-quantile of Student's t with integer ``df`` >= 1 degrees of freedom (no scipy needed).

    Exact CDF (the finite series for integer df) inverted by bisection; the Cornish–Fisher expansion above
    300 df (error < 1e-9).

    Example:
        >>> round(t_quantile(0.975, 1), 4), round(t_quantile(0.975, 15), 4), round(t_quantile(0.975, 1000), 4)
        (12.7062, 2.1314, 1.9623)
    """
    if not 0.0 < p < 1.0 or df < 1:
        raise ValueError(f"t_quantile needs 0 < p < 1 and df >= 1 (got p={p}, df={df})")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if df > 300:
        z = NormalDist().inv_cdf(p)
        terms = (
            (z**3 + z) / 4,
            (5 * z**5 + 16 * z**3 + 3 * z) / 96,
            (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
            (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160,
        )
        return z + sum(g / df ** (i + 1) for i, g in enumerate(terms))
    lo, hi = 0.0, 1.0
    while _t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(100):
        mid = (lo + hi) / 2.0
        if _t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2.0


def _t_cdf(t: float, df: int) -> float:
    # Abramowitz & Stegun 26.7.3/26.7.4: the finite series of Student's t CDF for integer df (t >= 0).
    theta = math.atan(t / math.sqrt(df))
    s, c = math.sin(theta), math.cos(theta)
    if df % 2 == 1:
        total, term = 0.0, c
        for j in range(1, (df - 1) // 2 + 1):
            if j > 1:
                term *= c * c * (2 * j - 2) / (2 * j - 1)
            total += term
        a = (2.0 / math.pi) * (theta + (s * total if df > 1 else 0.0))
    else:
        total, term = 1.0, 1.0
        for j in range(1, df // 2):
            term *= c * c * (2 * j - 1) / (2 * j)
            total += term
        a = s * total
    return 0.5 + 0.5 * a


def _z(confidence: float) -> float:
    _check_confidence(confidence)
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence is a fraction in (0, 1), e.g. 0.95 (got {confidence})")


def _values(values: Sequence[float] | np.ndarray) -> np.ndarray:
    x = np.asarray(values, dtype=float).reshape(-1)
    if not np.all(np.isfinite(x)):
        raise ValueError("interval values must be finite numbers (leave tasks without a value out)")
    return x


def mean_interval(values: Sequence[float] | np.ndarray, confidence: float = 0.95) -> Interval:
    """The mean of per-task values with its interval over tasks (method: the module docstring).

    Example:
        >>> iv = mean_interval([0.0] * 16)          # every task failed: the interval still has an upper end
        >>> iv.value, iv.low, round(iv.high, 3)
        (0.0, 0.0, 0.194)
        >>> iv = mean_interval([0.25, 0.5, 0.75, 1.0, 0.0, 0.25])
        >>> round(iv.low, 3), round(iv.high, 3)
        (0.168, 0.78)
        >>> mean_interval([]).as_dict()
        {'value': None, 'low': None, 'high': None, 'n': 0}
    """
    x = _values(values)
    t = len(x)
    _check_confidence(confidence)
    if t == 0:
        return Interval.empty()
    m = float(x.mean())
    low, high = _mean_limits(x, confidence)
    return Interval(m, low, high, t)


def _mean_limits(x: np.ndarray, confidence: float, paired: bool = False) -> tuple[float | None, float | None]:
    t = len(x)
    m = float(x.mean())
    if np.any(x < 0.0) or np.any(x > 1.0):
        if t < 2:
            return None, None
        h = t_quantile(0.5 + confidence / 2.0, t - 1) * float(x.std(ddof=1)) / math.sqrt(t)
        return m - h, m + h
    binary = bool(np.all((x == 0.0) | (x == 1.0)))
    spread = m * (1.0 - m)
    if binary or spread <= 0.0:
        # Binomial: Wilson. Inside a paired interval, whose correlation is estimated from the same tasks,
        # with the t quantile (the normal one under-covers at 16 tasks: 92%).
        z = t_quantile(0.5 + confidence / 2.0, t - 1) if paired and t >= 2 else _z(confidence)
        n_eff = float(t)
    else:
        if t < 2:
            return 0.0, 1.0
        z = t_quantile(0.5 + confidence / 2.0, t - 1)
        phi = float(x.var(ddof=1)) / spread
        # Every task the same fraction (e.g. 2 tasks at 1/4): no spread seen does not mean none. Count each
        # task as one trial (the binomial's width at t tasks) rather than claim a zero-width interval.
        n_eff = t / phi if phi > 0.0 else float(t)
    return _wilson(m, n_eff, z)


def _wilson(m: float, n: float, z: float) -> tuple[float, float]:
    z2 = z * z
    denominator = 1.0 + z2 / n
    centre = (m + z2 / (2.0 * n)) / denominator
    half = z * math.sqrt(max(m * (1.0 - m), 0.0) / n + z2 / (4.0 * n * n)) / denominator
    # Exact at the ends (the quadratic's root is m itself there), whatever the rounding.
    low = 0.0 if m <= 0.0 else max(0.0, centre - half)
    high = 1.0 if m >= 1.0 else min(1.0, centre + half)
    return min(low, m), max(high, m)


#: Fewer tasks than this: the paired interval does not use the tasks' correlation to narrow itself.
MIN_TASKS_FOR_CORRELATION = 10


def paired_interval(
    baseline: Sequence[float] | np.ndarray, other: Sequence[float] | np.ndarray, confidence: float = 0.95
) -> Interval:
    """The difference ``mean(other) − mean(baseline)`` of per-task values of the same tasks (position i of
    both is task i), with its paired interval (MOVER, the module docstring).

    Example:
        >>> a = [0, 0, 1, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 1, 0]
        >>> b = [1, 0, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1]
        >>> iv = paired_interval(a, b)
        >>> iv.value, round(iv.low, 3), round(iv.high, 3), iv.n
        (0.4375, 0.145, 0.624, 16)
        >>> paired_interval(a, a).covers(0.0)
        True
    """
    xa, xb = _values(baseline), _values(other)
    if len(xa) != len(xb):
        raise ValueError(f"paired values need the same tasks on both sides (got {len(xa)} and {len(xb)})")
    _check_confidence(confidence)
    t = len(xa)
    if t == 0:
        return Interval.empty()
    ma, mb = float(xa.mean()), float(xb.mean())
    d = mb - ma
    la, ua = _mean_limits(xa, confidence, paired=True)
    lb, ub = _mean_limits(xb, confidence, paired=True)
    if la is None or ua is None or lb is None or ub is None:
        return Interval(d, None, None, t)
    sa, sb = float(xa.std()), float(xb.std())
    r = float(np.mean((xa - ma) * (xb - mb)) / (sa * sb)) if sa > 0.0 and sb > 0.0 else 0.0
    r = min(1.0, max(-1.0, r))
    bounded = bool(np.all((xa >= 0.0) & (xa <= 1.0) & (xb >= 0.0) & (xb <= 1.0)))
    if bounded and t < MIN_TASKS_FOR_CORRELATION:
        # Two or three tasks always look perfectly correlated: a correlation seen on so few narrows nothing.
        # (Unbounded values keep it: there the limits are the paired t-interval's, whose t quantile counts
        # the tasks.)
        r = min(r, 0.0)
    below = (mb - lb) ** 2 + (ua - ma) ** 2 - 2.0 * r * (mb - lb) * (ua - ma)
    above = (ub - mb) ** 2 + (ma - la) ** 2 - 2.0 * r * (ub - mb) * (ma - la)
    low = d - math.sqrt(max(below, 0.0))
    high = d + math.sqrt(max(above, 0.0))
    if bounded:
        low, high = max(low, -1.0), min(high, 1.0)
    return Interval(d, min(low, d), max(high, d), t)
