"""Adaptive mixing: member weights that follow what the policy can learn, and task-level difficulty filtering.

Pure: no I/O, nothing of ormix's I/O; the statistics come in through `AdaptivePlanner.observe` (pooled over
every rank by the trainer callback), the rows go out through `AdaptivePlanner.rows`.

Why: a GRPO group whose rollouts all succeed, or all fail, has zero advantage — it teaches nothing. A member
whose groups are all solved (saturated) or all failed (not learnable yet) wastes its share of the batch. The
planner moves budget toward members whose groups teach, with a floor so nothing starves (and a member that
becomes learnable later is noticed) and a bound on how fast weights move.

Signals (``signal``; see `signal_scores`). Each starts from a member's *informative rate*: the chance that
one of its groups is informative (its rewards differ), over the last ``window`` steps, estimated with a prior
of ``prior_groups`` pseudo-groups at the member's own rate over the last ``progress_window`` steps, itself
shrunk the same way toward the mixture-wide rate (so a member with two groups in the window, or none, as a
member on the floor of a small batch may have, is judged on its longer record, not on those two alone).

- ``informative`` (default): budget follows the informative rate minus a *noise baseline*, the least
  informative member's rate (reward noise alone makes a member that teaches nothing look informative now and
  then: with 4 rollouts and 5% flipped rewards, about 18% of its groups), raised to ``sharpness``.
- ``progress``: budget follows expected learning progress per row: the informative rate times the member's
  *learnability*, the success gained per informative group trained on (the slope of its groups' mean reward
  against the informative groups it had trained on, over the last ``progress_window`` steps). Slopes are
  noisy, so each is shrunk toward 0 by a normal prior whose spread is fitted across the members (empirical
  Bayes); the score is the expected absolute slope under that posterior (a member whose success falls needs
  practice too, and one with little data keeps an uncertain, hence non-zero, score), raised to
  ``sharpness``. Why a product: how often a member's groups teach changes fast (a member unlocks, saturates)
  and is measured well in a short window; how much a teaching group is worth changes slowly and needs a long
  one. A member that is as informative as another but learns more slowly gets less.
- ``thompson``: Thompson sampling on the same quantity. Each of ``thompson_draws`` draws (seeded by
  ``(seed, step)``) samples every member's informative rate (its Beta posterior) and learnability (its normal
  posterior) and credits the member whose product is the largest; weights follow the share of draws each
  member wins (one Thompson draw per row, in expectation), so uncertain members are explored in proportion to
  their chance of being the best.

Every signal is weighed by the member's *headroom* raised to ``headroom`` (1 by default; 0 turns it off): the
reward it has left to gain, ``(best - mean) / (best - worst)`` with its recent mean reward (shrunk like the
informative rate) and the best and worst rewards seen in the mixture over the long window, so it does not
depend on the reward scale (one scale for the mixture: members scored on different ranges should share one
through their ``scale``, or run with ``headroom: 0``). Why: how often a member's groups teach says where GRPO has a gradient, not how much
reward is left to win there; of two members whose groups teach equally often, the one at 0.25 mean reward has
three times the room of the one at 0.75. (In ``thompson`` it multiplies each draw.) A member that has just
unlocked, or whose hardest tasks are still failing, keeps its budget; one that is nearly solved, whose noisy
rewards still make a group look informative now and then, loses it.

Every step's weights are `constrain`ed: at least ``floor`` each, at most ``max_change`` away from the previous
step's, summing to 1. The first ``warmup_steps`` use the static weights; so do the first ``lag`` steps in any
case, which have no statistics yet (a ``warmup_steps`` of ``lag`` or less, like the default 2, adds no
warm-up). The rows of a step keep the exact per-step quotas (largest remainder, remainders carried across
steps, ties seeded): every step has exactly ``prompts_per_step`` rows, and a member's rows through any step
are never a whole row above its target (the sum of its weights times ``prompts_per_step``) and, with the
bounded weights the planner makes, less than one row below it. (Weights that swing without bound between steps
can leave a member slightly more than a row behind for a while: no online apportionment can promise one row
for arbitrary weight sequences.)

Determinism and lag: the rows of step *t* (its weights, its quotas, its tasks, the tasks set aside) are a pure
function of the seed and the pooled statistics of the steps up to *t - lag* (``lag`` = 2: when a trainer
fetches the rows of step *t*, step *t - 1* may still be running, step *t - 2* is complete on every rank).
Asking for step *t* before step *t - lag* was observed raises `SamplingError` (a loader prefetching deeper
than the lag would make ranks disagree). Seeds come from `derive_seed` (SHA-256), never from ``hash()``.

Task filtering (per member, optional): a task whose last ``window`` groups were all solved or all failed is
set aside for ``cooldown_steps`` steps, then comes back; a prior from task metadata (``prior``: pass rates by a
metadata value, e.g. difficulty) can set tasks aside from the start. A decision made from the statistics of
step *s* applies from step *s + lag* (like the weights), so it too is a pure function of the lagged history.

Example:
    >>> planner = AdaptivePlanner({"a": [0, 1], "b": [0, 1]}, prompts_per_step=4, seed=0,
    ...                           settings=AdaptiveSettings(warmup_steps=1))
    >>> sorted(m for m, _ in planner.rows(1))
    ['a', 'a', 'b', 'b']
    >>> planner.observe(1, {"a": [(0, [1.0, 1.0]), (1, [1.0, 1.0])], "b": [(0, [0.0, 1.0]), (1, [1.0, 0.0])]})
    >>> w = planner.weights(3)
    >>> w["b"] > w["a"]
    True
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ormix.mixture.sampling import SamplingError, derive_seed

__all__ = [
    "LAG",
    "SIGNALS",
    "AdaptivePlanner",
    "AdaptiveSettings",
    "TaskFilterSettings",
    "constrain",
    "group_is_informative",
    "signal_scores",
]

#: Steps the statistics are behind the rows they decide (see the module docstring).
LAG = 2

Signal = Literal["informative", "progress", "thompson"]
#: The adaptive signals, in the order the docs list them.
SIGNALS: tuple[str, ...] = ("informative", "progress", "thompson")
Group = tuple[int, Sequence[float | None]]


@dataclass(frozen=True)
class AdaptiveSettings:
    """How adaptive weights move (mirrors the mixture file's ``adaptive:`` section).

    ``signal``, ``warmup_steps``, ``floor`` and ``max_change`` as in the module docstring; ``window``: steps of
    statistics the informative rate reads; ``progress_window``: steps the learnability of ``progress`` and
    ``thompson`` reads; ``sharpness``: target weights are proportional to ``score ** sharpness``
    (``informative`` and ``progress``; 1 = proportional, larger concentrates budget on the best members);
    ``prior_groups``: strength, in groups, of the prior each member's informative rate is shrunk toward;
    ``thompson_draws``: posterior draws per decision of the ``thompson`` signal; ``headroom``: the exponent
    of the reward a member has left to gain, which weighs every signal (0 turns it off). Invalid values raise
    `SamplingError`.

    Example:
        >>> AdaptiveSettings().floor, AdaptiveSettings(signal="progress").window
        (0.05, 16)
    """

    signal: Signal = "informative"
    warmup_steps: int = 2
    floor: float = 0.05
    max_change: float = 0.25
    window: int = 16
    progress_window: int = 64
    sharpness: float = 2.0
    prior_groups: float = 4.0
    thompson_draws: int = 256
    headroom: float = 1.0

    def __post_init__(self) -> None:
        if self.signal not in SIGNALS:
            raise SamplingError(f"unknown adaptive signal {self.signal!r}; use one of {list(SIGNALS)}")
        for name, least in (("warmup_steps", 0), ("thompson_draws", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise SamplingError(f"adaptive {name} is {value!r}; it must be a whole number >= {least}")
        for name in ("window", "progress_window"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SamplingError(f"adaptive {name} is {value!r}; it must be a whole number of steps >= 1")
        if not 0.0 <= self.floor <= 1.0:
            raise SamplingError(f"adaptive floor is {self.floor!r}; it must be in [0, 1]")
        if not 0.0 < self.max_change <= 1.0:
            raise SamplingError(f"adaptive max_change is {self.max_change!r}; it must be in (0, 1]")
        if not self.sharpness > 0.0:
            raise SamplingError(f"adaptive sharpness is {self.sharpness!r}; it must be > 0")
        if not self.prior_groups >= 0.0:
            raise SamplingError(f"adaptive prior_groups is {self.prior_groups!r}; it must be >= 0")
        if not self.headroom >= 0.0:
            raise SamplingError(f"adaptive headroom is {self.headroom!r}; it must be >= 0 (0 turns it off)")


@dataclass(frozen=True)
class TaskFilterSettings:
    """Task-level difficulty filtering inside one member (a member's ``filter:`` section).

    ``solved`` is the reward at or above which a rollout counts as solved (at or below ``failed``: failed).
    ``prior`` maps a task-metadata value of ``prior_field`` to a prior pass rate; a prior >= 0.9 or <= 0.1 sets
    the task aside from the start (for ``cooldown_steps``).

    Example:
        >>> TaskFilterSettings(window=2, cooldown_steps=4).window
        2
    """

    window: int = 2
    cooldown_steps: int = 8
    solved: float = 1.0
    failed: float = 0.0
    prior_field: str | None = None
    prior: Mapping[str, float] = field(default_factory=dict)


def _present(rewards: Sequence[float | None]) -> list[float]:
    out = []
    for r in rewards:
        if r is None:
            continue
        value = float(r)
        if not math.isnan(value):
            out.append(value)
    return out


def group_is_informative(rewards: Sequence[float | None]) -> bool:
    """Whether a GRPO group's rewards differ (``None``, an error or unscored, is left out).

    Example:
        >>> group_is_informative([1.0, 0.0]), group_is_informative([1.0, 1.0, None])
        (True, False)
    """
    present = _present(rewards)
    return len(present) >= 2 and max(present) - min(present) > 1e-9


# ── signals ───────────────────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class _StepStats:
    """One member's groups of one step, summarised (what the signals read)."""

    groups: int = 0  # groups with >= 2 present rewards (the informative rate's denominator)
    informative: int = 0  # ... of which informative (these are the groups GRPO trains on)
    scored: int = 0  # groups with >= 1 present reward
    total: float = 0.0  # the sum of those groups' mean rewards
    squares: float = 0.0  # ... and of their squares
    low: float = math.inf  # the lowest and highest reward seen (the scale headroom is measured on)
    high: float = -math.inf


def _step_stats(groups: Sequence[Group]) -> _StepStats:
    n2 = informative = scored = 0
    total = squares = 0.0
    low, high = math.inf, -math.inf
    for _, rewards in groups:
        present = _present(rewards)
        if present:
            low, high = min(low, *present), max(high, *present)
        if len(present) >= 2:
            n2 += 1
            informative += max(present) - min(present) > 1e-9
        if present:
            mean = sum(present) / len(present)
            scored += 1
            total += mean
            squares += mean * mean
    return _StepStats(n2, informative, scored, total, squares, low, high)


@dataclass(frozen=True)
class _Slope:
    estimate: float  # least-squares slope of success on practice (reward per informative group)
    variance: float  # its sampling variance (math.inf when the window cannot tell)


def _slopes(steps: Sequence[Mapping[str, _StepStats]], members: Sequence[str]) -> dict[str, _Slope]:
    """Each member's success (group mean reward) regressed on its practice: the informative groups it was
    trained on before each step, plus half of the step's own (every group of a step shares one value)."""
    sums = {}
    for m in members:
        n = sx = sxx = sy = sxy = syy = done = 0.0
        for step in steps:
            st = step.get(m)
            if st is None:
                continue
            x = done + st.informative / 2
            n += st.scored
            sx += st.scored * x
            sxx += st.scored * x * x
            sy += st.total
            sxy += x * st.total
            syy += st.squares
            done += st.informative
        sums[m] = (n, sx, sxx, sy, sxy, syy)
    # Residual variance is pooled with the mixture-wide spread of group means (2 pseudo-points), so a member
    # with three points does not get a near-zero variance by luck.
    df = sum(max(0.0, n - 1) for n, *_ in sums.values())
    ss = sum(max(0.0, syy - sy * sy / n) for n, _, _, sy, _, syy in sums.values() if n > 0)
    pooled = ss / df if df > 0 and ss > 0 else 0.25
    out = {}
    for m, (n, sx, sxx, sy, sxy, syy) in sums.items():
        cxx = sxx - sx * sx / n if n >= 2 else 0.0
        if cxx <= 1e-12 * max(1.0, sxx):
            out[m] = _Slope(0.0, math.inf)
            continue
        cxy = sxy - sx * sy / n
        cyy = max(0.0, syy - sy * sy / n)
        b = cxy / cxx
        ssr = max(0.0, cyy - b * cxy)
        sigma2 = (ssr + 2 * pooled) / (max(0.0, n - 2) + 2)
        out[m] = _Slope(b, sigma2 / cxx)
    return out


def _posteriors(slopes: Mapping[str, _Slope]) -> dict[str, tuple[float, float]]:
    """Normal posteriors (mean, variance) of every member's slope under an empirical-Bayes N(0, tau²) prior."""
    known = [s for s in slopes.values() if math.isfinite(s.variance)]
    if known:
        excess = sum(s.estimate**2 - s.variance for s in known) / len(known)
        raw = sum(s.estimate**2 for s in known) / len(known)
        tau2 = max(excess, 0.25 * raw, 1e-12)
    else:
        tau2 = 1e-12
    out = {}
    for member, s in slopes.items():
        if not math.isfinite(s.variance):
            out[member] = (0.0, tau2)
        else:
            shrink = tau2 / (tau2 + s.variance)
            out[member] = (s.estimate * shrink, s.variance * shrink)
    return out


def _expected_abs(mean: float, variance: float) -> float:
    """E|X| for X ~ N(mean, variance)."""
    if variance <= 0:
        return abs(mean)
    sd = math.sqrt(variance)
    z = mean / sd
    return sd * math.sqrt(2 / math.pi) * math.exp(-z * z / 2) + mean * math.erf(z / math.sqrt(2))


def signal_scores(
    signal: Signal,
    history: Sequence[Mapping[str, Sequence[Group]]],
    members: Sequence[str],
    rng: random.Random,
    *,
    settings: AdaptiveSettings | None = None,
) -> dict[str, float | None]:
    """Each member's score from the statistics of past steps (oldest first; the last ``window`` of them for
    the informative rate, the last ``progress_window`` for learnability): the planner's target weights are
    proportional to the scores (before `constrain`). ``None`` for every member when no member had a group.

    See the module docstring for the signals; ``settings`` gives the windows, ``sharpness``, ``prior_groups``
    and ``thompson_draws`` (defaults: `AdaptiveSettings`; its ``signal`` is not read). ``rng`` is only used
    by ``thompson``.

    Example:
        >>> hist = [{"a": [(0, [1.0, 1.0])] * 4, "b": [(0, [0.0, 1.0])] * 4}]
        >>> s = signal_scores("informative", hist, ["a", "b"], random.Random(0))
        >>> s["a"], s["b"] > 0
        (0.0, True)
    """
    cfg = settings or AdaptiveSettings()
    steps = [{m: _step_stats(step.get(m, ())) for m in members} for step in history]
    return _scores(signal, steps, members, rng, cfg)


def _scores(
    signal: str,
    steps: Sequence[Mapping[str, _StepStats]],
    members: Sequence[str],
    rng: random.Random,
    cfg: AdaptiveSettings,
) -> dict[str, float | None]:
    if signal not in SIGNALS:
        raise SamplingError(f"unknown adaptive signal {signal!r}; use one of {list(SIGNALS)}")

    # Two levels of shrinkage: a member's recent rate toward its own rate over the long window, and that
    # toward the mixture's. A member at the floor may have no group in a short window; it is then judged on
    # its longer record, not on the other members'.
    recent, longer = steps[-cfg.window :], steps[-max(cfg.window, cfg.progress_window) :]
    groups, informative = _sums(recent, members, "groups"), _sums(recent, members, "informative")
    long_groups, long_informative = _sums(longer, members, "groups"), _sums(longer, members, "informative")
    total = math.fsum(long_groups.values())
    if not total:
        return dict.fromkeys(members)
    pooled = math.fsum(long_informative.values()) / total
    a = cfg.prior_groups
    own = {m: _shrunk(long_informative[m], long_groups[m], pooled, a) for m in members}
    hits = {m: informative[m] + a * own[m] for m in members}
    misses = {m: groups[m] - informative[m] + a * (1 - own[m]) for m in members}
    rate = {m: hits[m] / (hits[m] + misses[m]) if hits[m] + misses[m] > 0 else own[m] for m in members}
    room = _headroom(recent, longer, members, a)
    gain = {m: room[m] ** cfg.headroom for m in members}
    if signal == "informative":
        baseline = min(rate.values())
        return {m: max(0.0, rate[m] - baseline) ** cfg.sharpness * gain[m] for m in members}
    posterior = _posteriors(_slopes(steps[-cfg.progress_window :], members))
    if signal == "progress":
        return {m: (rate[m] * _expected_abs(*posterior[m])) ** cfg.sharpness * gain[m] for m in members}
    wins = dict.fromkeys(members, 0)
    spread = {m: (mean, math.sqrt(var)) for m, (mean, var) in posterior.items()}
    for _ in range(cfg.thompson_draws):
        draws = {m: _beta(rng, hits[m], misses[m]) * abs(rng.gauss(*spread[m])) * gain[m] for m in members}
        wins[max(members, key=lambda m: (draws[m], m))] += 1
    return {m: wins[m] / cfg.thompson_draws for m in members}


def _headroom(
    recent: Sequence[Mapping[str, _StepStats]],
    longer: Sequence[Mapping[str, _StepStats]],
    members: Sequence[str],
    prior: float,
) -> dict[str, float]:
    """Each member's reward left to gain, in [0, 1]: (best reward seen - its recent mean reward) / (the range
    of rewards seen), mixture-wide over the longer window. The recent mean is shrunk like the informative rate
    (toward the member's longer record, that toward the mixture's), so a member with few groups is judged on
    more than those. 1 for every member while the rewards seen have no range (nothing to measure it on)."""
    low = min((st[m].low for st in longer for m in members if m in st), default=math.inf)
    high = max((st[m].high for st in longer for m in members if m in st), default=-math.inf)
    if not high - low > 1e-9:
        return dict.fromkeys(members, 1.0)

    totals, scored = _sums(recent, members, "total"), _sums(recent, members, "scored")
    long_totals, long_scored = _sums(longer, members, "total"), _sums(longer, members, "scored")
    n = math.fsum(long_scored.values())
    pooled = math.fsum(long_totals.values()) / n if n else (low + high) / 2
    out = {}
    for m in members:
        own = _shrunk(long_totals[m], long_scored[m], pooled, prior)
        mean = _shrunk(totals[m], scored[m], own, prior)
        out[m] = min(1.0, max(0.0, (high - mean) / (high - low)))
    return out


def _sums(window: Sequence[Mapping[str, _StepStats]], members: Sequence[str], name: str) -> dict[str, float]:
    """Each member's `_StepStats` field ``name`` summed over the steps of ``window``."""
    return {m: math.fsum(getattr(st[m], name) for st in window if m in st) for m in members}


def _shrunk(value: float, count: float, toward: float, prior: float) -> float:
    """The mean of ``value`` over ``count`` observations with ``prior`` pseudo-observations at ``toward``."""
    return (value + prior * toward) / (count + prior) if count + prior > 0 else toward


def _beta(rng: random.Random, a: float, b: float) -> float:
    return rng.betavariate(a, b) if a > 0 and b > 0 else (1.0 if a > 0 else 0.0)


# ── weights ───────────────────────────────────────────────────────────────────────────────────────────────


def constrain(
    target: Mapping[str, float], previous: Mapping[str, float], *, floor: float, max_change: float
) -> dict[str, float]:
    """Weights near ``target`` that sum to 1, are each >= ``floor`` and move at most ``max_change`` from ``previous``.

    The result is the closest point (Euclidean) to the normalised target among the weights that keep those
    bounds. The floor wins over the bound when they conflict (a previous weight below the floor, e.g. a
    static weight of 0 after warm-up), so no member ever starves; ``floor`` above ``1 / members`` counts as
    ``1 / members``.

    Example:
        >>> w = constrain({"a": 1.0, "b": 0.0}, {"a": 0.5, "b": 0.5}, floor=0.1, max_change=0.2)
        >>> round(w["a"], 6), round(w["b"], 6)
        (0.7, 0.3)
    """
    members = sorted(target)
    n = len(members)
    if n == 0:
        return {}
    floor = min(max(0.0, floor), 1.0 / n)
    total = math.fsum(max(0.0, target[m]) for m in members)
    wanted = {m: (max(0.0, target[m]) / total if total > 0 else 1.0 / n) for m in members}
    prev_total = math.fsum(max(0.0, previous.get(m, wanted[m])) for m in members)
    prev = {
        m: (max(0.0, previous.get(m, wanted[m])) / prev_total if prev_total > 0 else 1.0 / n) for m in members
    }
    lo = {m: max(floor, prev[m] - max_change) for m in members}
    hi = {m: max(lo[m], min(1.0, prev[m] + max_change)) for m in members}
    lo_sum, hi_sum = math.fsum(lo.values()), math.fsum(hi.values())
    if lo_sum > 1.0:
        # Only possible when a previous weight sat below the floor: lift it to the floor and take the excess
        # from the others' lower bounds, in proportion to how far above the floor they are.
        extra = math.fsum(lo[m] - floor for m in members)
        keep = (1.0 - n * floor) / extra if extra > 0 else 0.0
        return {m: floor + (lo[m] - floor) * keep for m in members}
    if hi_sum < 1.0:  # cannot happen for a previous that sums to 1; kept total for safety
        return {m: hi[m] / hi_sum for m in members}

    # The Euclidean projection onto {sum = 1, lo <= w <= hi} is clip(wanted + shift) for the one shift whose
    # clipped sum is 1; the clipped sum is continuous and non-decreasing in the shift, so bisect it.
    def clipped(shift: float) -> dict[str, float]:
        return {m: min(hi[m], max(lo[m], wanted[m] + shift)) for m in members}

    low, high = -1.0, 1.0
    for _ in range(200):
        mid = (low + high) / 2
        if math.fsum(clipped(mid).values()) > 1.0:
            high = mid
        else:
            low = mid
        if high - low < 1e-15:
            break
    out = clipped((low + high) / 2)
    # Bisection leaves the sum off by ~1e-15: give the difference to a member with room inside its bounds.
    gap = 1.0 - math.fsum(out.values())
    for m in sorted(members, key=lambda m: -(hi[m] - lo[m])):
        room = hi[m] - out[m] if gap > 0 else out[m] - lo[m]
        if room > abs(gap):
            out[m] += gap
            break
    return out


# ── the planner ───────────────────────────────────────────────────────────────────────────────────────────


class AdaptivePlanner:
    """The rows of each training step of an adaptive mixture, decided from pooled statistics (pure).

    Args:
        tasks: train member → its task indices.
        prompts_per_step: unique prompts per step (each step gets its exact quota).
        seed: plan seed.
        settings: `AdaptiveSettings`.
        base_weights: the static weights used for warm-up and as the starting point (default: uniform).
        filters: member → `TaskFilterSettings`, for the members that filter tasks.
        metadata: member → task index → task spec (for a filter's prior).
        lag: steps between the statistics and the rows they decide (`LAG`).

    Steps count from 1, as training does. Decisions are made in step order, each the first time a step (or a
    later one) is asked for. `state_dict` / `load_state_dict` carry everything across a resume.

    Example:
        >>> p = AdaptivePlanner({"a": [0, 1, 2], "b": [0, 1, 2]}, prompts_per_step=3, seed=1)
        >>> [len(p.rows(s)) for s in (1, 2)], p.weights(1)
        ([3, 3], {'a': 0.5, 'b': 0.5})
        >>> try:
        ...     p.rows(3)
        ... except SamplingError as err:
        ...     print("step(s) [1]" in str(err))
        True
    """

    def __init__(
        self,
        tasks: Mapping[str, Sequence[int]],
        *,
        prompts_per_step: int,
        seed: int = 0,
        settings: AdaptiveSettings | None = None,
        base_weights: Mapping[str, float] | None = None,
        filters: Mapping[str, TaskFilterSettings] | None = None,
        metadata: Mapping[str, Mapping[int, Mapping[str, Any]]] | None = None,
        lag: int = LAG,
    ) -> None:
        if (
            isinstance(prompts_per_step, bool)
            or not isinstance(prompts_per_step, int)
            or prompts_per_step < 1
        ):
            raise SamplingError("adaptive mixing needs prompts_per_step >= 1")
        if not tasks:
            raise SamplingError("the mixture has no members; add at least one environment")
        empty = sorted(m for m, t in tasks.items() if not t)
        if empty:
            raise SamplingError(f"member(s) {empty} have no tasks; fix their task selection")
        self.members = sorted(tasks)
        self.tasks = {m: list(tasks[m]) for m in self.members}
        self.k = prompts_per_step
        self.seed = seed
        self.settings = settings or AdaptiveSettings()
        self.lag = max(1, lag)
        base = dict(base_weights or dict.fromkeys(self.members, 1.0))
        total = math.fsum(max(0.0, float(base.get(m, 0.0))) for m in self.members)
        self.base = {
            m: max(0.0, float(base.get(m, 0.0))) / total if total > 0 else 1.0 / len(self.members)
            for m in self.members
        }
        self.filters = {m: f for m, f in (filters or {}).items() if m in self.tasks}
        # Pooled statistics, by step: member → [(task, rewards)].
        self.history: dict[int, dict[str, list[Group]]] = {}
        self._weights: dict[int, dict[str, float]] = {}
        self._rows: dict[int, list[tuple[str, int]]] = {}
        self._credit = dict.fromkeys(self.members, 0.0)
        self._cursor = dict.fromkeys(self.members, 0)  # position in the member's current task permutation
        self._cycle = dict.fromkeys(self.members, 0)
        self._perms: dict[tuple[str, int], list[int]] = {}  # cache; derived from (seed, member, cycle)
        self._summary: dict[int, dict[str, _StepStats]] = {}  # cache; derived from history
        # Filter state, advanced as each step is decided (from the statistics of step - lag):
        self._task_history: dict[str, dict[int, list[str]]] = {m: {} for m in self.members}
        # member → task → (first step set aside, first step back)
        self._aside: dict[str, dict[int, tuple[int, int]]] = {m: {} for m in self.members}
        for member, rule in self.filters.items():
            if rule.prior_field:
                for index, spec in (metadata or {}).get(member, {}).items():
                    rate = rule.prior.get(str(spec.get(rule.prior_field)))
                    if rate is not None and (rate >= 0.9 or rate <= 0.1):
                        self._aside[member][int(index)] = (1, 1 + rule.cooldown_steps)

    # ── statistics in ─────────────────────────────────────────────────

    def observe(self, step: int, groups: Mapping[str, Sequence[Group]]) -> None:
        """The pooled groups of a completed training step: member → [(task index, rewards of its rollouts)].

        Members the planner does not train are ignored; a NaN reward is kept as ``None``. Observing a step
        again is allowed until a decision used it; after that only with the same groups.

        Example:
            >>> p = AdaptivePlanner({"a": [0], "b": [0]}, prompts_per_step=2)
            >>> p.observe(1, {"a": [(0, [1.0, float("nan")])], "elsewhere": [(0, [0.0])]})
            >>> p.history[1]
            {'a': [(0, [1.0, None])], 'b': []}
        """
        if isinstance(step, bool) or not isinstance(step, int) or step < 1:
            raise SamplingError(f"steps count from 1, not {step!r}")
        recorded: dict[str, list[Group]] = {
            m: [
                (int(t), [None if r is None or math.isnan(float(r)) else float(r) for r in rewards])
                for t, rewards in groups.get(m, ())
            ]
            for m in self.members
        }
        decided = max(self._rows, default=0)
        if step <= decided - self.lag and step in self.history and self.history[step] != recorded:
            raise SamplingError(
                f"step {step}'s statistics were already used to decide the rows of step {step + self.lag}; "
                "they cannot change now (is the trainer replaying a step?)"
            )
        self.history[step] = recorded
        self._summary.pop(step, None)

    # ── rows out ──────────────────────────────────────────────────────

    def weights(self, step: int) -> dict[str, float]:
        """The member weights in force at `step` (deciding the steps before it first).

        Example:
            >>> AdaptivePlanner({"a": [0], "b": [0]}, prompts_per_step=2, base_weights={"a": 3, "b": 1}).weights(1)
            {'a': 0.75, 'b': 0.25}
        """
        self._decide_through(step)
        return dict(self._weights[step])

    def rows(self, step: int) -> list[tuple[str, int]]:
        """The (member, task index) rows of `step`, in their order within the step.

        Example:
            >>> sorted(AdaptivePlanner({"a": [0, 1], "b": [5]}, prompts_per_step=4).rows(1))
            [('a', 0), ('a', 1), ('b', 5), ('b', 5)]
        """
        self._decide_through(step)
        return list(self._rows[step])

    def tasks_set_aside(self, member: str, step: int) -> int:
        """How many of a member's tasks are set aside at `step` (deciding the steps before it first).

        Example:
            >>> rule = TaskFilterSettings(cooldown_steps=1, prior_field="level", prior={"easy": 0.95})
            >>> p = AdaptivePlanner({"a": [0, 1]}, prompts_per_step=1, filters={"a": rule},
            ...                     metadata={"a": {0: {"level": "easy"}, 1: {"level": "hard"}}})
            >>> p.tasks_set_aside("a", 1), p.tasks_set_aside("a", 2)
            (1, 0)
        """
        self._decide_through(step)
        return sum(1 for start, back in self._aside.get(member, {}).values() if start <= step < back)

    def _decide_through(self, step: int) -> None:
        if isinstance(step, bool) or not isinstance(step, int) or step < 1:
            raise SamplingError(f"steps count from 1, not {step!r}")
        first = max(self._rows, default=0) + 1
        for s in range(first, step + 1):
            self._decide(s)

    def _decide(self, step: int) -> None:
        cfg = self.settings
        previous = self._weights.get(step - 1, self.base)
        seen_through = step - self.lag
        if seen_through >= 1:
            if seen_through not in self.history:
                missing = [s for s in range(1, seen_through + 1) if s not in self.history]
                raise SamplingError(
                    f"the rows of step {step} need the statistics of step(s) {missing[-8:]}, which were not "
                    f"observed: adaptive mixing decides step t from steps <= t-{self.lag}; keep "
                    "dataloader_num_workers=0 so the trainer does not fetch rows further ahead"
                )
            self._filter_from(seen_through, step)
        if step <= cfg.warmup_steps or seen_through < 1:
            weights = dict(self.base)
        else:
            first = max(1, seen_through - max(cfg.window, cfg.progress_window) + 1)
            window = [self._stats(s) for s in range(first, seen_through + 1) if s in self.history]
            rng = random.Random(derive_seed(self.seed, "adaptive", str(step)))
            scores = _scores(cfg.signal, window, self.members, rng, cfg)
            if all(v is None for v in scores.values()):
                target = dict(previous)  # nothing to go on: stay
            else:
                target = {m: (scores[m] or 0.0) + 1e-12 for m in self.members}
            weights = constrain(target, previous, floor=cfg.floor, max_change=cfg.max_change)
        self._weights[step] = weights
        quotas = self._quotas(weights, step)
        order = random.Random(derive_seed(self.seed, "adaptive-positions", str(step)))
        block = [m for m in self.members for _ in range(quotas[m])]
        order.shuffle(block)
        self._rows[step] = [(m, self._next_task(m, step)) for m in block]

    def _stats(self, step: int) -> dict[str, _StepStats]:
        if step not in self._summary:
            self._summary[step] = {m: _step_stats(self.history[step].get(m, ())) for m in self.members}
            self._summary.pop(step - max(self.settings.window, self.settings.progress_window) - 1, None)
        return self._summary[step]

    def _filter_from(self, observed: int, step: int) -> None:
        """Advance task filtering with the groups of step `observed`; what it sets aside applies from `step`."""
        for member, rule in self.filters.items():
            past = self._task_history[member]
            for task, rewards in self.history[observed].get(member, []):
                present = _present(rewards)
                if not present:
                    continue
                kind = (
                    "solved"
                    if min(present) >= rule.solved
                    else "failed"
                    if max(present) <= rule.failed
                    else "mixed"
                )
                recent = past.setdefault(task, [])
                recent.append(kind)
                del recent[: -rule.window]
                if len(recent) == rule.window and len(set(recent)) == 1 and recent[0] != "mixed":
                    self._aside[member][task] = (step, step + rule.cooldown_steps)
                    recent.clear()

    def _quotas(self, weights: Mapping[str, float], step: int) -> dict[str, int]:
        # Largest remainder with the remainders carried: a member's credit is its target rows through this
        # step minus the rows it got. Each step hands out exactly k rows: the floor of every (non-negative)
        # credit first, then one more each to the largest remainders. A member never gets more than the
        # ceiling of its credit, so no credit goes to -1 or below (never a row ahead of target).
        for m in self.members:
            self._credit[m] += weights[m] * self.k
        quotas = {m: max(0, int(math.floor(self._credit[m] + 1e-9))) for m in self.members}
        ties = random.Random(derive_seed(self.seed, "adaptive-ties", str(step)))
        tie = {m: ties.random() for m in self.members}
        left = self.k - sum(quotas.values())
        if left > 0:
            rank = sorted(self.members, key=lambda m: (-(self._credit[m] - quotas[m]), tie[m]))
            for m in rank[:left]:
                quotas[m] += 1
        elif left < 0:  # members in debt from earlier extras hold more than the step's spare: take back
            rank = sorted(
                (m for m in self.members if quotas[m] > 0),
                key=lambda m: (self._credit[m] - quotas[m], tie[m]),
            )
            for m in rank[:-left]:
                quotas[m] -= 1
        for m in self.members:
            self._credit[m] -= quotas[m]
        return quotas

    def _next_task(self, member: str, step: int) -> int:
        tasks = self.tasks[member]
        aside = {t for t, (start, back) in self._aside[member].items() if start <= step < back}
        every = len(aside) >= len(set(tasks))
        for _ in range(2 * len(tasks) + 1):
            task = self._permutation(member)[self._cursor[member]]
            self._advance(member)
            if every or task not in aside:
                return task
        return task  # unreachable in practice: the loop sees every task twice

    def _permutation(self, member: str) -> list[int]:
        key = (member, self._cycle[member])
        if key not in self._perms:
            order = list(self.tasks[member])
            random.Random(derive_seed(self.seed, "adaptive-tasks", member, str(key[1]))).shuffle(order)
            self._perms = {k: v for k, v in self._perms.items() if k[0] != member}  # keep one per member
            self._perms[key] = order
        return self._perms[key]

    def _advance(self, member: str) -> None:
        self._cursor[member] += 1
        if self._cursor[member] >= len(self.tasks[member]):
            self._cursor[member] = 0
            self._cycle[member] += 1

    # ── checkpoints ───────────────────────────────────────────────────

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly, as JSON data.

        Example:
            >>> p = AdaptivePlanner({"a": [0]}, prompts_per_step=1)
            >>> q = AdaptivePlanner({"a": [0]}, prompts_per_step=1); q.load_state_dict(p.state_dict())
            >>> q.rows(2) == p.rows(2)
            True
        """
        return {
            "history": {
                str(s): {m: [[t, list(r)] for t, r in g] for m, g in h.items()}
                for s, h in self.history.items()
            },
            "weights": {str(s): dict(w) for s, w in self._weights.items()},
            "rows": {str(s): [list(r) for r in rows] for s, rows in self._rows.items()},
            "credit": dict(self._credit),
            "cursor": dict(self._cursor),
            "cycle": dict(self._cycle),
            "task_history": {
                m: {str(t): list(k) for t, k in h.items()} for m, h in self._task_history.items()
            },
            "aside": {m: {str(t): list(b) for t, b in a.items()} for m, a in self._aside.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from `state_dict` (of a planner built from the same mixture).

        Example:
            >>> p = AdaptivePlanner({"a": [0, 1]}, prompts_per_step=2); _ = p.rows(1)
            >>> q = AdaptivePlanner({"a": [0, 1]}, prompts_per_step=2); q.load_state_dict(p.state_dict())
            >>> q.rows(2) == p.rows(2)
            True
        """
        self.history = {
            int(s): {m: [(int(t), list(r)) for t, r in g] for m, g in h.items()}
            for s, h in state["history"].items()
        }
        self._weights = {int(s): {m: float(v) for m, v in w.items()} for s, w in state["weights"].items()}
        self._rows = {int(s): [(str(m), int(t)) for m, t in rows] for s, rows in state["rows"].items()}
        self._credit = {m: float(v) for m, v in state["credit"].items()}
        self._cursor = {m: int(v) for m, v in state["cursor"].items()}
        self._cycle = {m: int(v) for m, v in state["cycle"].items()}
        self._perms = {}
        self._summary = {}
        self._task_history = {
            m: {int(t): list(k) for t, k in h.items()} for m, h in state["task_history"].items()
        }
        self._aside = {
            m: {int(t): ((1, int(b)) if isinstance(b, int) else (int(b[0]), int(b[1]))) for t, b in a.items()}
            for m, a in state["aside"].items()
        }
        for m in self.members:
            self._task_history.setdefault(m, {})
            self._aside.setdefault(m, {})
