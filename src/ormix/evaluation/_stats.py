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
- Values outside [0, 1] (a mean reward on another scale): the t-interval. When every task has the same
  value (no spread seen, to rounding), there is **no interval** (``low`` and ``high`` are ``None``): no spread
  seen is not a claim of none, and such values have no binomial width to fall back on, so a point would
  claim a certainty the tasks do not give.

Measured (``benchmarks/eval_calibration.py``, 2000 repetitions a figure): a member's 95% interval covers
the truth in 94.0–96.3% of repetitions in all 27 figures (16/32/64 tasks, 1/4 samples, hard/mid/easy
members, pass@1 and pass@4).

The paired difference of two evals over the same tasks (`paired_interval`) combines the two members'
limits by the method of variance estimates recovery (MOVER; Newcombe's interval for paired proportions,
generalised) with the correlation of the two evals' per-task values. It inherits the score intervals'
behaviour near 0 and 1 (a paired t-interval collapses to 0 when nearly every task agrees and misses a
small true difference: 15–80% coverage on nearly solved members), and equals the paired t-interval for
values outside [0, 1] (no interval when the per-task differences have no spread: every task changed by the
same amount). Inside it, each member's limits use the t quantile with T−1 degrees of freedom,
binary values too (the correlation is estimated from the same tasks; with Wilson's normal quantile it
covers 92–93% at 16 tasks of mid-range members). Measured: 93.7–97.5% in the judged paired figures; it errs
on the wide side (97–97.5%) for binary values at 16–32 tasks, so a verdict of change is not over-claimed.
Below `MIN_TASKS_FOR_CORRELATION` tasks a positive correlation of values in [0, 1] is not used (2 tasks
always correlate ±1: on the demo's 2 tasks a member, it once claimed a change of +0.25 [0.01, 0.50] that one
task made).

Every interval above is closed-form: deterministic, no resampling, so no seed is needed.

**Several runs (training seeds) of one procedure** (`hierarchical_interval`, `paired_hierarchical_interval`):
RL outcomes vary with the training seed, and an interval over one run's tasks ignores that. With S runs
evaluated on the same T tasks (a seeds × tasks matrix; rliable's setting), the mean's variance has a seed
part σ²_seed/S, a task part σ²_task/T and their interaction; it is estimated as (MS_seed − MS_interaction)
/ (ST) (at least 0) plus MS_task/(ST), and the quantile is Student's t with Satterthwaite's degrees of
freedom, in which the seed part counts `SEED_DF_WEIGHT` times (so with a material seed effect the df stay
near S − 1: a percentile bootstrap over 2–3 seeds treats them as the whole population and under-covers).
Values in [0, 1] use the score form (`mean_interval`'s, with that variance). A difference of two groups
pairs the tasks and draws the seeds independently per group. The interquartile mean (IQM: the mean of the
middle half of all runs' values, robust to a few outlying tasks or runs) has no closed form: its variance
is a seeded two-level bootstrap's (runs drawn with replacement, then one draw of the tasks shared by every
run), rescaled by the ratio of the mean's closed-form variance to the same replicates' variance of the
mean (the bootstrap shrinks a variance over S seeds by (S − 1)/S: half at two seeds). Such an interval
covers the procedure's expected value over training seeds and the task distribution ("seeds and tasks");
one run gives the interval over tasks only ("tasks"). With no spread seen (a variance of 0, to rounding),
values in [0, 1] count each task as one trial (Wilson's width at T tasks); other values get no interval.
Measured (``benchmarks/eval_calibration.py``, two-level world, `MIN_SEEDS_CALIBRATED` = 3 seeds or more):
93–97% (figures in docs/guides/evaluation.md).

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


#: A standard deviation below this fraction of the values' size is rounding, not spread: 16 values of 0.01
#: averaged by seed and then by task have a variance of about 1e-35, and a "spread" of that size gave a
#: zero-width interval.
_ROUNDING = 1e-9


def _no_spread(sd: float, *values: np.ndarray) -> bool:
    """Whether a standard deviation (or standard error) is no spread at all, to the values' rounding (NaN
    counts as none)."""
    scale = max((float(np.max(np.abs(v))) for v in values if v.size), default=0.0)
    return not sd > _ROUNDING * scale


def mean_interval(values: Sequence[float] | np.ndarray, confidence: float = 0.95) -> Interval:
    """The mean of per-task values with its interval over tasks (method: the module docstring). Values
    outside [0, 1] that are all alike get no interval (``low`` and ``high`` ``None``), never a point.

    Example:
        >>> iv = mean_interval([0.0] * 16)          # every task failed: the interval still has an upper end
        >>> iv.value, iv.low, round(iv.high, 3)
        (0.0, 0.0, 0.194)
        >>> iv = mean_interval([0.25, 0.5, 0.75, 1.0, 0.0, 0.25])
        >>> round(iv.low, 3), round(iv.high, 3)
        (0.168, 0.78)
        >>> mean_interval([]).as_dict()
        {'value': None, 'low': None, 'high': None, 'n': 0}
        >>> mean_interval([-1.0] * 16).as_dict()   # a reward on another scale, every task alike
        {'value': -1.0, 'low': None, 'high': None, 'n': 16}
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
        sd = float(x.std(ddof=1))
        if _no_spread(sd, x):
            # No spread seen is not a claim of none, and there is no binomial width to fall back on: no
            # interval. A paired interval takes this side as a point; the differences' spread decides there.
            return (m, m) if paired else (None, None)
        h = t_quantile(0.5 + confidence / 2.0, t - 1) * sd / math.sqrt(t)
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
        variance = float(x.var(ddof=1))
        phi = variance / spread
        # Every task the same fraction (e.g. 2 tasks at 1/4): no spread seen does not mean none. Count each
        # task as one trial (the binomial's width at t tasks) rather than claim a zero-width interval.
        n_eff = float(t) if _no_spread(math.sqrt(variance), x) else t / phi
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
    both is task i), with its paired interval (MOVER, the module docstring). Values outside [0, 1] whose
    per-task differences are all alike get no interval (``low`` and ``high`` ``None``), never a point.

    Example:
        >>> a = [0, 0, 1, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 1, 0]
        >>> b = [1, 0, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1]
        >>> iv = paired_interval(a, b)
        >>> iv.value, round(iv.low, 3), round(iv.high, 3), iv.n
        (0.4375, 0.145, 0.624, 16)
        >>> paired_interval(a, a).covers(0.0)
        True
        >>> paired_interval([-1.5, -1.0] * 2, [-1.0, -0.5] * 2).as_dict()   # every task +0.5: no spread seen
        {'value': 0.5, 'low': None, 'high': None, 'n': 4}
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
    bounded = _bounded(xa, xb)
    if not bounded and _no_spread(float((xb - xa).std()), xa, xb):
        # Every task changed by the same amount: the paired t-interval would be a point, a certainty that
        # tasks showing no spread do not give (values in [0, 1] keep their score limits' width).
        return Interval(d, None, None, t)
    sa, sb = float(xa.std()), float(xb.std())
    r = float(np.mean((xa - ma) * (xb - mb)) / (sa * sb)) if sa > 0.0 and sb > 0.0 else 0.0
    r = min(1.0, max(-1.0, r))
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


# --- Several runs (seeds) of the same procedure: intervals over seeds and tasks -------------------------

#: What an interval's variance includes, as results record it (``"covers"``).
COVERS_SEEDS_AND_TASKS = "seeds and tasks"
#: One run a side: the interval is over tasks only; it says nothing about another training seed.
COVERS_TASKS = "tasks"
#: Seeds a group needs before its interval includes seed-to-seed variance (one run has none to show).
MIN_SEEDS = 2
#: Seeds a group needs for its interval's coverage to be measured at 93-97% (``benchmarks/
#: eval_calibration.py``). With 2 the seed variance is estimated from one difference: coverage falls to
#: about 92% when seeds vary strongly (the interval is still reported, over seeds and tasks).
MIN_SEEDS_CALIBRATED = 3
#: Statistics of `hierarchical_interval`: the mean, and the interquartile mean (rliable's IQM).
STATISTICS = ("mean", "iqm")
#: Bootstrap resamples for the IQM (the mean's interval is closed-form).
DEFAULT_RESAMPLES = 2000
#: The name of `hierarchical_interval`'s method.
HIERARCHICAL_METHOD = (
    "over seeds and tasks: two-level variance (seeds, tasks, less their interaction), Student t with "
    "Satterthwaite degrees of freedom (score form for values in [0, 1]); IQM: two-level bootstrap"
)


@dataclass(frozen=True)
class GroupInterval(Interval):
    """An `Interval` from several runs: ``seeds`` = runs that contributed (``(baseline, other)`` for a
    difference), ``over`` (``"covers"`` in `as_dict`) = the variance the interval includes
    (`COVERS_SEEDS_AND_TASKS` or `COVERS_TASKS`), ``statistic`` = ``"mean"`` or ``"iqm"``; ``n`` = tasks.

    Example:
        >>> GroupInterval(0.5, 0.3, 0.7, 16, seeds=3, over="seeds and tasks").as_dict()
        {'value': 0.5, 'low': 0.3, 'high': 0.7, 'n': 16, 'seeds': 3, 'covers': 'seeds and tasks'}
        >>> GroupInterval(0.1, -0.1, 0.3, 16, seeds=(3, 2)).as_dict()["seeds"]
        [3, 2]
    """

    seeds: int | tuple[int, int] = 1
    over: str = COVERS_TASKS  # ("covers" in the JSON form; `Interval.covers` is the method)
    statistic: str = "mean"

    def as_dict(self) -> dict[str, Any]:
        """`Interval.as_dict` plus ``seeds`` (a list for a difference) and ``covers``."""
        seeds: int | list[int] = list(self.seeds) if isinstance(self.seeds, tuple) else self.seeds
        return {**super().as_dict(), "seeds": seeds, "covers": self.over}


def iqm(values: Sequence[float] | np.ndarray) -> float:
    """The interquartile mean: the mean of the middle half of the values (a quarter, rounded down, cut
    from each end, as ``scipy.stats.trim_mean(x, 0.25)`` and rliable do); all values pooled.

    Example:
        >>> iqm([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 100.0])
        0.35
        >>> iqm([[1.0, 2.0], [3.0, 4.0]])
        2.5
    """
    x = np.sort(np.asarray(values, dtype=float).reshape(-1))
    if len(x) == 0:
        raise ValueError("iqm needs at least one value")
    cut = int(0.25 * len(x))
    return float(x[cut : len(x) - cut].mean())


def _matrix(values: Sequence[Sequence[float]] | np.ndarray, what: str) -> np.ndarray:
    y = np.asarray(values, dtype=float)
    if y.ndim != 2:
        raise ValueError(
            f"{what}: one row of per-task values per run (seeds x tasks), got an array of shape {y.shape}"
        )
    if not np.all(np.isfinite(y)):
        raise ValueError(f"{what}: values must be finite (keep only tasks with a value in every run)")
    return y


def _check_statistic(statistic: str, confidence: float) -> None:
    if statistic not in STATISTICS:
        raise ValueError(f"statistic is one of {', '.join(STATISTICS)} (got {statistic!r})")
    _check_confidence(confidence)


#: In the degrees of freedom only, a seed component counts this many times its estimate. An estimate from
#: 2-3 seeds is often far below the truth, and Satterthwaite's df, computed from that estimate, then
#: claims the task component dominates (df ~ tasks) exactly when the interval is already too narrow:
#: 89-91% coverage at 2 seeds of a strong seed effect. Weighting the seed part in the df keeps the
#: t quantile near seeds - 1 whenever seeds plausibly matter (`benchmarks/eval_calibration.py`).
SEED_DF_WEIGHT = 4.0


def _combine(
    seed_parts: Sequence[tuple[float, float]], task_part: float, task_df: float
) -> tuple[float, float]:
    """The variance of a mean: seed components (each an estimate of σ²_seed/S with its df) plus the task
    component; with Satterthwaite's degrees of freedom (seed parts weighted by `SEED_DF_WEIGHT`), rounded
    down (fewer df: a wider, conservative t quantile)."""
    total = task_part + sum(v for v, _ in seed_parts)
    weighted = task_part + SEED_DF_WEIGHT * sum(v for v, _ in seed_parts)
    spread = sum((SEED_DF_WEIGHT * v) ** 2 / df for v, df in seed_parts if v > 0.0)
    spread += task_part**2 / task_df if task_part > 0.0 else 0.0
    df = weighted * weighted / spread if spread > 0.0 else max(task_df, 1.0)
    # Satterthwaite's df can exceed the tasks' own (a small extra component adds "information"); seeds add
    # variance, not evidence about the tasks' spread, so a seed effect never narrows the interval.
    df = min(df, max(task_df, 1.0))
    return total, max(1.0, math.floor(df + 1e-9))  # 13.999999 is 14


def _group_terms(y: np.ndarray) -> tuple[float, float]:
    """A seeds × tasks matrix (tasks crossed with seeds: the same tasks in every run) → the per-run seed
    variance σ²_seed (the variance of the runs' task means, less the part the tasks' own noise puts there:
    MS_interaction/T; at least 0) and the variance of the seed-averaged task values (NaN where undefined)."""
    s, t = y.shape
    rows, cols = y.mean(axis=1), y.mean(axis=0)
    task_var = float(cols.var(ddof=1)) if t >= 2 else math.nan
    if s < 2:
        return math.nan, task_var
    seed_var = float(rows.var(ddof=1))
    if t >= 2:
        resid = y - rows[:, None] - cols[None, :] + y.mean()
        seed_var -= float(np.sum(resid * resid)) / ((s - 1) * (t - 1)) / t
    return max(seed_var, 0.0), task_var


def _mean_variance(y: np.ndarray) -> tuple[float, float]:
    """Variance of the grand mean of a seeds × tasks matrix: σ²_seed/S + σ²_task/T + σ²_interaction/(ST),
    estimated as (MS_seed − MS_interaction)/(ST) (the seed part, at least 0, S − 1 df) plus MS_task/(ST)
    (T − 1 df); and its degrees of freedom."""
    s, t = y.shape
    seed_var, task_var = _group_terms(y)
    task_part = task_var / t if t >= 2 else 0.0
    return _combine([(seed_var / s, s - 1)], task_part, t - 1)


def _pair_variance(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Variance of mean(b) − mean(a): each group's seed part (seeds drawn independently per group; a
    one-run group borrows the other's σ²_seed, assuming seeds vary as much in both) plus the variance over
    tasks of the per-task difference of the seed-averaged values (tasks paired)."""
    sa, t = a.shape
    sb = b.shape[0]
    va, _ = _group_terms(a)
    vb, _ = _group_terms(b)
    if sa >= 2 and sb >= 2:
        seed_parts = [(va / sa, sa - 1), (vb / sb, sb - 1)]
    else:
        # One side has a single run: its seed variance cannot be seen, so both sides share the other's.
        v, s = (vb, sb) if sa < 2 else (va, sa)
        seed_parts = [(v * (1.0 / sa + 1.0 / sb), s - 1)]
    task_part = float((b.mean(axis=0) - a.mean(axis=0)).var(ddof=1)) / t if t >= 2 else 0.0
    return _combine(seed_parts, task_part, t - 1)


def _bootstrap_variance(
    groups: Sequence[np.ndarray], signs: Sequence[float], variance: float, resamples: int, seed: int
) -> float:
    """The IQM's variance: its two-level bootstrap variance, rescaled by how far the same replicates'
    mean strays from the mean's estimated variance (the bootstrap shrinks a variance over S seeds by
    (S−1)/S, half at two seeds, and counts the interaction twice; the ratio corrects both).

    Two-level bootstrap: per replicate, the seeds of each group drawn with replacement (independently
    per group), and one draw of the tasks with replacement shared by every run (the tasks are the same
    tasks in every run and group, so a task's draw keeps its pairing); ``signs`` weigh the groups."""
    rng = np.random.default_rng(seed)
    t = groups[0].shape[1]
    tasks = rng.integers(0, t, size=(resamples, t))
    stats = np.empty((resamples, len(groups)))
    means = np.empty((resamples, len(groups)))
    for g, y in enumerate(groups):
        seeds = rng.integers(0, y.shape[0], size=(resamples, y.shape[0]))
        draws = y[seeds[:, :, None], tasks[:, None, :]].reshape(resamples, -1)
        means[:, g] = draws.mean(axis=1)
        ordered = np.sort(draws, axis=1)
        cut = int(0.25 * ordered.shape[1])
        stats[:, g] = ordered[:, cut : ordered.shape[1] - cut].mean(axis=1)
    w = np.asarray(signs, dtype=float)
    boot_stat = float(np.var(stats @ w, ddof=1))
    boot_mean = float(np.var(means @ w, ddof=1))
    return boot_stat * (variance / boot_mean) if boot_mean > 0.0 else boot_stat


def _bounded(*ys: np.ndarray) -> bool:
    return all(bool(np.all((y >= 0.0) & (y <= 1.0))) for y in ys)


def _t_interval(
    value: float, variance: float, q: float, floor: float | None, t: int, **group: Any
) -> GroupInterval:
    """``value`` ± ``q`` standard errors, clipped to [``floor``, 1] (values in [0, 1]; no clip: ``None``)."""
    half = q * math.sqrt(max(variance, 0.0))
    low, high = value - half, value + half
    if floor is not None:
        low, high = max(floor, low), min(1.0, high)
    return GroupInterval(value, min(low, value), max(high, value), t, **group)


def hierarchical_interval(
    values: Sequence[Sequence[float]] | np.ndarray,
    *,
    statistic: str = "mean",
    confidence: float = 0.95,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
) -> GroupInterval:
    """The mean (or IQM) of several runs' per-task values with an interval that includes seed-to-seed
    variance: ``values[s][t]`` is run s's value of task t (the same tasks, in the same order, in every run).

    What it covers: the procedure's expected value over training seeds and over the task distribution. The
    variance of the mean has three parts (seeds, tasks, their interaction), estimated from the matrix and
    combined with Satterthwaite's degrees of freedom, so at 2–5 seeds the quantile is Student's t with
    about seeds − 1 df where seed variance dominates (a percentile bootstrap over 2–3 seeds treats them as
    the whole population and under-covers). Values in [0, 1] use the score (Wilson) form with that
    variance and quantile, as `mean_interval` does. ``statistic="iqm"``: the interquartile mean of all
    values, its variance from a seeded two-level bootstrap (seeds, then tasks shared by every run)
    rescaled as the module docstring says. One run (fewer than `MIN_SEEDS`): exactly `mean_interval`
    (mean) — an interval over tasks only, ``covers="tasks"``. No spread seen (a variance of 0, to rounding)
    is not a claim of none: values in [0, 1] count each task as one trial, other values get no interval
    (``low`` and ``high`` ``None``). Deterministic for a given ``seed``.

    Example:
        >>> runs = [[1, 0, 1, 1, 0, 1, 0, 1], [1, 0, 0, 1, 0, 1, 0, 1], [1, 1, 1, 1, 0, 1, 0, 1]]
        >>> iv = hierarchical_interval(runs)
        >>> round(iv.value, 3), round(iv.low, 3), round(iv.high, 3), iv.n, iv.seeds, iv.over
        (0.625, 0.267, 0.884, 8, 3, 'seeds and tasks')
        >>> one = hierarchical_interval(runs[:1])
        >>> task_only = mean_interval(runs[0])
        >>> (one.low, one.high, one.over) == (task_only.low, task_only.high, "tasks")
        True
        >>> hierarchical_interval([[-1.0] * 4] * 3).as_dict()["low"] is None   # every value alike
        True
    """
    y = _matrix(values, "hierarchical_interval")
    _check_statistic(statistic, confidence)
    s, t = y.shape
    if s == 0 or t == 0:
        return GroupInterval(None, None, None, 0, seeds=s, statistic=statistic)
    covers = COVERS_SEEDS_AND_TASKS if s >= MIN_SEEDS else COVERS_TASKS
    m = float(y.mean())
    if s < MIN_SEEDS:
        if statistic == "mean":
            one = mean_interval(y[0], confidence)
            return GroupInterval(one.value, one.low, one.high, t, seeds=1, over=covers)
        # The IQM of one run: a variance over tasks only.
        variance, df = (float(y[0].var(ddof=1)) / t, float(t - 1)) if t >= 2 else (0.0, 1.0)
    else:
        variance, df = _mean_variance(y)
    value = m
    if statistic == "iqm":
        if t < 2 and s < MIN_SEEDS:
            return GroupInterval(float(y[0, 0]), None, None, t, seeds=s, over=covers, statistic=statistic)
        value = iqm(y)
        if t >= 2:
            variance = _bootstrap_variance([y], [1.0], variance, resamples, seed)
    q = t_quantile(0.5 + confidence / 2.0, int(df))
    unspread = _no_spread(math.sqrt(max(variance, 0.0)), y)
    if _bounded(y) and (statistic == "mean" or unspread):
        if not unspread and 0.0 < m < 1.0:
            low, high = _wilson(m, m * (1.0 - m) / variance, q)
        else:
            # No spread seen (every value equal): not a claim of none. Count each task as one trial.
            low, high = _wilson(value, float(t), _z(confidence))
        return GroupInterval(value, low, high, t, seeds=s, over=covers, statistic=statistic)
    if unspread:
        # Not bounded to [0, 1]: no binomial width to fall back on, and a point would claim certainty.
        return GroupInterval(value, None, None, t, seeds=s, over=covers, statistic=statistic)
    floor = 0.0 if _bounded(y) else None
    return _t_interval(value, variance, q, floor, t, seeds=s, over=covers, statistic=statistic)


def _unspread(ya: np.ndarray, yb: np.ndarray, value: float, confidence: float) -> tuple[float, float] | None:
    """Limits for two groups of values in [0, 1] with no spread seen (every run of each group alike), which is
    not a claim of none: as `hierarchical_interval` does, each task counts as one trial, through the paired
    interval of the seed-averaged tasks, centred on ``value``. ``None`` for unbounded values: they have no
    binomial width to fall back on, so they get no interval."""
    if not _bounded(ya, yb):
        return None
    one = paired_interval(ya.mean(axis=0), yb.mean(axis=0), confidence)
    if one.value is None or one.low is None or one.high is None:
        return None
    low, high = value - (one.value - one.low), value + (one.high - one.value)
    return max(-1.0, min(low, value)), min(1.0, max(high, value))


def paired_hierarchical_interval(
    baseline: Sequence[Sequence[float]] | np.ndarray,
    other: Sequence[Sequence[float]] | np.ndarray,
    *,
    statistic: str = "mean",
    confidence: float = 0.95,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    same_runs: bool = False,
) -> GroupInterval:
    """The difference ``stat(other) − stat(baseline)`` of two groups of runs evaluated on the SAME tasks
    (column t of both is task t; the groups may hold different numbers of runs), with an interval that
    includes seed-to-seed variance: seeds vary independently in each group, tasks are paired across them.

    The variance: each group's seed component, the variance over tasks of the per-task difference of the
    groups' seed-averaged values, less both interactions; Student t with Satterthwaite df (about the two
    groups' seeds − 2 where seed variance dominates). A group of one run borrows the other's seed variance
    (the interval still ``covers`` seeds); both of one run: exactly `paired_interval` (mean),
    ``covers="tasks"``. ``same_runs``: the caller says both groups are the same runs (not merely equal
    values): 0 with a zero-width interval, since nothing was drawn independently. Values in [0, 1] with no
    spread seen (every run of each group alike) are not a claim of none: the interval is the paired one of
    the seed-averaged tasks (`paired_interval`), each task one trial; other values with no spread seen (a
    variance of 0, to rounding) get no interval (``low`` and ``high`` ``None``), never a point. IQM: the
    two-level bootstrap (one task draw shared by both groups), rescaled as in `hierarchical_interval`.

    Example:
        >>> a = [[0, 0, 1, 0, 1, 0, 0, 1, 0, 0], [0, 0, 1, 0, 1, 0, 0, 1, 0, 1],
        ...      [0, 1, 1, 0, 1, 0, 0, 1, 0, 0]]
        >>> b = [[1, 0, 1, 1, 1, 0, 1, 1, 0, 1], [1, 0, 1, 1, 1, 0, 1, 1, 1, 1],
        ...      [1, 1, 1, 1, 1, 0, 1, 1, 0, 1]]
        >>> iv = paired_hierarchical_interval(a, b)
        >>> round(iv.value, 3), round(iv.low, 3), round(iv.high, 3), iv.seeds, iv.over
        (0.4, 0.067, 0.733, (3, 3), 'seeds and tasks')
        >>> same = paired_hierarchical_interval(a, a[::-1], same_runs=True)
        >>> same.value, same.low, same.high
        (0.0, 0.0, 0.0)
        >>> alike = paired_hierarchical_interval([[0] * 16] * 3, [[1] * 16] * 3)   # no spread: not certainty
        >>> round(alike.low, 2), alike.high
        (0.69, 1.0)
        >>> shifted = paired_hierarchical_interval([[-1.5, -1.0] * 2] * 3, [[-1.0, -0.5] * 2] * 3)
        >>> shifted.value, shifted.low, shifted.high   # every task +0.5 in every run: no interval
        (0.5, None, None)
    """
    ya, yb = _matrix(baseline, "paired_hierarchical_interval"), _matrix(other, "paired_hierarchical_interval")
    _check_statistic(statistic, confidence)
    if ya.shape[1] != yb.shape[1]:
        raise ValueError(
            f"paired values need the same tasks in both groups (got {ya.shape[1]} and {yb.shape[1]} tasks)"
        )
    sa, sb, t = ya.shape[0], yb.shape[0], ya.shape[1]
    seeds = (sa, sb)
    if sa == 0 or sb == 0 or t == 0:
        return GroupInterval(None, None, None, 0, seeds=seeds, statistic=statistic)
    covers = COVERS_SEEDS_AND_TASKS if max(sa, sb) >= MIN_SEEDS else COVERS_TASKS
    if same_runs:
        return GroupInterval(0.0, 0.0, 0.0, t, seeds=seeds, over=covers, statistic=statistic)
    if covers == COVERS_TASKS and statistic == "mean":
        one = paired_interval(ya[0], yb[0], confidence)
        return GroupInterval(one.value, one.low, one.high, t, seeds=seeds, over=covers)
    if covers == COVERS_TASKS:
        d = yb[0] - ya[0]
        variance, df = (float(d.var(ddof=1)) / t, float(t - 1)) if t >= 2 else (0.0, 1.0)
    else:
        variance, df = _pair_variance(ya, yb)
    if statistic == "iqm":
        value = iqm(yb) - iqm(ya)
        if t >= 2:
            variance = _bootstrap_variance([ya, yb], [-1.0, 1.0], variance, resamples, seed)
    else:
        value = float(yb.mean() - ya.mean())
    if _no_spread(math.sqrt(max(variance, 0.0)), ya, yb):
        seen = _unspread(ya, yb, value, confidence)
        low, high = seen if seen is not None else (None, None)
        return GroupInterval(value, low, high, t, seeds=seeds, over=covers, statistic=statistic)
    q = t_quantile(0.5 + confidence / 2.0, int(df))
    floor = -1.0 if _bounded(ya, yb) else None
    return _t_interval(value, variance, q, floor, t, seeds=seeds, over=covers, statistic=statistic)
