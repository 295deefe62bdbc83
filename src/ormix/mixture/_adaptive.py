"""Adaptive weights: member weights that follow what the policy can learn (pure; the `Planner` calls them).

Why: a GRPO group whose rollouts all succeed, or all fail, has zero advantage — it teaches nothing. A member
whose groups are all solved (saturated) or all failed (not learnable yet) wastes its share of the batch. The
planner moves budget toward members whose groups teach, with a floor so nothing starves (and a member that
becomes learnable later is noticed) and a bound on how fast weights move (`constrain`).

Signals (``signal``; see `scores`). Each starts from a member's *informative rate*: the chance that one of
its groups is informative (`ormix.telemetry._metrics.is_informative`: its rewards differ), over the last
``window`` steps, estimated with a prior of ``prior_groups`` pseudo-groups at the member's own rate over the
last ``progress_window`` steps, itself shrunk the same way toward the mixture-wide rate (so a member with two
groups in the window, or none, as a member on the floor of a small batch may have, is judged on its longer
record, not on those two alone).

- ``denoised`` (default): ``informative`` made robust to what fools it (`_denoised`). Each member's
  outcome noise is estimated from its own groups (`noise_estimates`: the disagreement between rollouts of one
  group, on its least disagreeing tasks), and the informativeness that noise explains (the chance that a
  group of a solved or hopeless task looks informative through flips alone) is taken off its informative
  rate. A second view weighs progress in the reward achieved: the informative rate times the member's pace
  (its slope of success on practice, relative to the fastest member's, discounted by its noise); it keeps a
  member whose every task sits mid-way (which reads as noise in the first view) and starves none that
  learns. Both views are weighed by the member's headroom on its own reward range (so partial credit or -1/+1
  rewards read like 0/1) and averaged, each by how much it says. Do no harm: a member rises above its
  uniform share only as far as its noise is known (``NOISE_SUPPORT`` pairs of rollouts measure it half-way),
  and never further than its measured noise allows (`_noise_cap`, on a high estimate of the noise: about
  1.6x uniform for a grader flipping 20%) unless it is seen to learn faster than every other member; and
  ``uniform_mix`` (0.2) of the batch is spread uniformly whatever the signal says, on top of ``floor``.
- ``informative``: budget follows the informative rate minus a *noise baseline*, the least
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
through their ``scale``, or run with ``headroom: 0``). Why: how often a member's groups teach says where GRPO
has a gradient, not how much reward is left to win there; of two members whose groups teach equally often,
the one at 0.25 mean reward has three times the room of the one at 0.75. (In ``thompson`` it multiplies each
draw.) A member that has just unlocked, or whose hardest tasks are still failing, keeps its budget; one that
is nearly solved, whose noisy rewards still make a group look informative now and then, loses it.

The settings are `ormix.config.AdaptiveConfig`'s; the lag, the warm-up, the quotas and the task filter are
the `Planner`'s (`ormix.mixture._planner`).

Example:
    >>> import random
    >>> from ormix.config import AdaptiveConfig
    >>> window = [step_stats({"a": [(0, [1.0, 1.0])] * 4, "b": [(0, [0.0, 1.0])] * 4}, ["a", "b"])]
    >>> s = scores(window, ["a", "b"], random.Random(0), AdaptiveConfig(signal="informative"))
    >>> s["a"], s["b"] > 0
    (0.0, True)
    >>> s = scores(window, ["a", "b"], random.Random(0), AdaptiveConfig())  # denoised (the default)
    >>> round(s["a"], 2), round(s["b"], 2)  # one task: b's noise is unknown, so b may not gain much yet
    (0.3, 0.7)
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ormix.config import AdaptiveConfig
from ormix.telemetry._metrics import is_informative, present_rewards

#: The adaptive signals, in the order the docs list them.
SIGNALS: tuple[str, ...] = ("denoised", "informative", "progress", "thompson")
#: One GRPO group: (task index, the rewards of its rollouts; ``None`` for an error or an unscored one).
Group = tuple[int, Sequence[float | None]]


# ── signals ───────────────────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class StepStats:
    """One member's groups of one step, summarised (what the signals read; see `step_stats`).

    Example:
        >>> StepStats().groups, StepStats().low
        (0, inf)
    """

    groups: int = 0  # groups with >= 2 present rewards (the informative rate's denominator)
    informative: int = 0  # ... of which informative (these are the groups GRPO trains on)
    scored: int = 0  # groups with >= 1 present reward
    total: float = 0.0  # the sum of those groups' mean rewards
    squares: float = 0.0  # ... and of their squares
    low: float = math.inf  # the lowest and highest reward seen (the scale headroom is measured on)
    high: float = -math.inf
    present: int = 0  # rewards present in the groups counted by ``groups`` (their mean size: present/groups)
    # Per task of those groups: (task, pairs of rollouts, sum of the pairs' squared reward differences), the
    # within-group disagreement ``denoised`` estimates the member's outcome noise from.
    pairs: tuple[tuple[int, int, float], ...] = ()


def step_stats(groups: Mapping[str, Sequence[Group]], members: Sequence[str]) -> dict[str, StepStats]:
    """Each member's groups of one step, summarised (a member without groups gets empty stats).

    Example:
        >>> step_stats({"a": [(0, [1.0, 0.0]), (1, [1.0, None])]}, ["a", "b"])["a"].informative
        1
    """
    return {m: _member_stats(groups.get(m, ())) for m in members}


def _member_stats(groups: Sequence[Group]) -> StepStats:
    n2 = informative = scored = size = 0
    total = squares = 0.0
    low, high = math.inf, -math.inf
    pairs: dict[int, tuple[int, float]] = {}
    for task, rewards in groups:
        present = present_rewards(rewards)
        if present:
            low, high = min(low, *present), max(high, *present)
            mean = sum(present) / len(present)
            scored += 1
            total += mean
            squares += mean * mean
        if len(present) >= 2:
            n2 += 1
            size += len(present)
            informative += is_informative(present)
            # Sum over pairs of (r_i - r_j)^2 = n * sum(r^2) - (sum r)^2.
            n = len(present)
            diff = max(0.0, n * math.fsum(r * r for r in present) - math.fsum(present) ** 2)
            count, sq = pairs.get(task, (0, 0.0))
            pairs[task] = (count + n * (n - 1) // 2, sq + diff)
    return StepStats(
        n2, informative, scored, total, squares, low, high, size, tuple((t, *pairs[t]) for t in sorted(pairs))
    )


@dataclass(frozen=True)
class _Slope:
    estimate: float  # least-squares slope of success on practice (reward per informative group)
    variance: float  # its sampling variance (math.inf when the window cannot tell)


def _slopes(steps: Sequence[Mapping[str, StepStats]], members: Sequence[str]) -> dict[str, _Slope]:
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
    """Normal posteriors (mean, variance) of every member's slope under an empirical-Bayes N(0, tau²)
    prior."""
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


def scores(
    steps: Sequence[Mapping[str, StepStats]],
    members: Sequence[str],
    rng: random.Random,
    cfg: AdaptiveConfig,
) -> dict[str, float | None]:
    """Each member's score from the stats of past steps (oldest first; the last ``window`` of them for the
    informative rate, the last ``progress_window`` for learnability): target weights are proportional to the
    scores (before `constrain`). ``None`` for every member when no member had a group. ``rng`` is only used by
    ``thompson``; the signal and its settings are ``cfg``'s (see the module docstring).

    Example:
        >>> from ormix.config import AdaptiveConfig
        >>> scores([{}], ["a", "b"], random.Random(0), AdaptiveConfig())
        {'a': None, 'b': None}
    """
    signal = cfg.signal
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
    if signal == "denoised":
        return _denoised(recent, longer, members, rate, cfg)
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


def noise_estimates(steps: Sequence[Mapping[str, StepStats]], members: Sequence[str]) -> dict[str, float]:
    """Each member's outcome noise: the probability that a rollout's binary outcome is flipped, estimated
    from its own groups (0 for a member without two distinct rewards seen or two tasks with groups).

    Within one group the policy and the task are the same, so two rollouts disagree with probability
    ``2q(1 - q)`` (q: the chance of success the grader reports). A task the policy always solves, or always
    fails, disagrees only through noise e: ``2e(1 - e)``; one it is learning disagrees more. Each task's
    disagreement is pooled over its groups (on the member's own reward range, so partial credit or -1/+1
    reads the same), and the noise is read off the least disagreeing third of the tasks, where learning adds
    the least: the tasks are picked on one half of the steps and measured on the other (then the other way
    round), so picking the luckiest does not bias the estimate low. Not modelled: a member whose every task
    sits mid-way, which reads as noise.

    Example:
        >>> flaky = [(t, [1.0, 0.0, 0.0, 0.0, 0.0]) for t in range(6)]  # a stray success in every group
        >>> clean = [(t, [0.0] * 5) for t in range(3)] + [(t, [1.0] * 5) for t in range(3, 6)]
        >>> steps = [step_stats({"a": flaky, "b": clean}, ["a", "b"])] * 4
        >>> e = noise_estimates(steps, ["a", "b"])
        >>> round(e["a"], 2), e["b"]
        (0.28, 0.0)
    """
    return {m: e for m, (e, _, _) in _noise_support(steps, members).items()}


def _noise_support(
    steps: Sequence[Mapping[str, StepStats]], members: Sequence[str]
) -> dict[str, tuple[float, float, float]]:
    """`noise_estimates` with the pairs of rollouts each estimate was measured on (0 when none) and a
    high estimate (the noise a member may still have, given those pairs; 0 when none: then only the trust
    rule of `_denoised` holds the member back).

    A grader's noise does not change over a run, while learning moves a task's disagreement (a policy at
    0.5 on every task disagrees as much as 25% noise, and no longer once it is at 0.9): the window's earlier
    and later halves are estimated apart and the lower estimate is kept (the one that learning inflates
    least); the high estimate bounds the disagreement of both halves pooled, so a half whose few pairs
    happened to agree cannot set it (measured: the lower of the halves' bounds read a 20%-flaky member as 10%
    now and then, under task filtering, which ends a task's record on agreeing groups, and let it take 2.3x
    its uniform share for a step)."""
    out = {}
    middle = len(steps) // 2
    for m in members:
        low = min((st[m].low for st in steps if m in st), default=math.inf)
        high = max((st[m].high for st in steps if m in st), default=-math.inf)
        halves = (steps[:middle], steps[middle:]) if high - low > 1e-9 else ()
        found = [_disagreement(part, m, (high - low) ** 2) for part in halves if part]
        known = [(d, n) for d, n in found if n > 0]
        if not known:  # no range of rewards, or no pairs measured
            out[m] = (0.0, 0.0, 0.0)
            continue
        d = min(d for d, _ in known)
        support = math.fsum(n for _, n in known)
        d_high = _high_disagreement(math.fsum(x * n for x, n in known) / support, support)
        out[m] = (_flip_chance(d), support, _flip_chance(d_high))
    return out


def _flip_chance(d: float) -> float:
    """The flip chance e for which two rollouts of a settled task disagree with chance d = 2e(1 - e)."""
    return (1 - math.sqrt(max(0.0, 1 - 2 * min(0.5, d)))) / 2


def _high_disagreement(d: float, pairs: float) -> float:
    """A high (Wilson, two standard errors) bound on a disagreement rate ``d`` measured on ``pairs`` pairs of
    rollouts. The six pairs of a group of four share their rollouts: they count as three independent ones
    (measured: counting them as one capped clean members for most of a run and slowed every world)."""
    n = max(1.0, pairs / 2)
    z2 = 4.0
    centre = d + z2 / (2 * n)
    spread = math.sqrt(z2 * (d * (1 - d) / n + z2 / (4 * n * n)))
    return min(0.5, (centre + spread) / (1 + z2 / n))


def _disagreement(steps: Sequence[Mapping[str, StepStats]], m: str, span2: float) -> tuple[float, float]:
    """The chance that two rollouts of one group disagree on the least disagreeing third of a member's
    tasks, and the pairs it was measured on ((0, 0) when fewer than two tasks were seen in both halves).

    Two halves of the steps (alternate steps): one picks the least disagreeing tasks, the other measures
    them, so the pick's luck (the least disagreeing of noisy estimates) does not bias the measure low; then
    the halves swap, and the two measures are averaged."""
    halves: list[dict[int, list[float]]] = [{}, {}]
    for i, st in enumerate(steps):
        if m in st:
            for task, pairs, sq in st[m].pairs:
                acc = halves[i % 2].setdefault(task, [0.0, 0.0])
                acc[0] += pairs
                acc[1] += sq
    both = sorted(set(halves[0]) & set(halves[1]))
    if len(both) < 2:
        return 0.0, 0.0
    measures: list[float] = []
    support = 0.0
    for pick, measure in ((halves[0], halves[1]), (halves[1], halves[0])):
        # E[(r_i - r_j)^2] on a 0/1 scale is the chance two rollouts disagree.
        order = sorted(both, key=lambda t: (pick[t][1] / pick[t][0], t))
        chosen = order[: max(1, -(-len(order) // 3))]
        count = math.fsum(measure[t][0] for t in chosen)
        support += count
        measures.append(math.fsum(measure[t][1] for t in chosen) / count / span2)
    return math.fsum(measures) / 2, support


def _denoised(
    recent: Sequence[Mapping[str, StepStats]],
    longer: Sequence[Mapping[str, StepStats]],
    members: Sequence[str],
    rate: Mapping[str, float],
    cfg: AdaptiveConfig,
) -> dict[str, float | None]:
    """The ``denoised`` scores (see the module docstring): normalised, with the uniform mix."""
    support = _noise_support(longer, members)
    noise = {m: e for m, (e, _, _) in support.items()}
    posterior = _posteriors(_slopes(longer, members))
    baseline = min(rate.values())  # what the least informative member shows: noise every member has
    # The mixture-wide reward range and totals, read by every member's headroom: summed once, not per member
    # (per member they made a step's cost grow with the square of the members).
    mixture = _Mixture(
        min((st[x].low for st in longer for x in st), default=math.inf),
        max((st[x].high for st in longer for x in st), default=-math.inf),
        math.fsum(st[x].total for st in longer for x in st),
        math.fsum(st[x].scored for st in longer for x in st),
    )
    excess, room = {}, {}
    for m in members:
        e = noise[m]
        groups = math.fsum(st[m].groups for st in longer if m in st)
        size = math.fsum(st[m].present for st in longer if m in st) / groups if groups else 2.0
        # The chance that noise alone makes a group of a solved (or hopeless) task informative.
        explained = max(baseline, 1 - (1 - e) ** size - e**size)
        excess[m] = max(0.0, rate[m] - explained)
        # Headroom on the reward seen, not corrected for the noise: a correction by an overestimated noise
        # would call a member at 0.9 on every task solved.
        room[m] = _own_headroom(recent, longer, m, cfg.prior_groups, mixture)
    raw = {m: excess[m] ** cfg.sharpness * room[m] ** cfg.headroom for m in members}
    # Progress in the reward achieved: the informative rate times the member's pace (its expected absolute
    # slope of success on practice, as ``progress`` has it), relative to the fastest member's. A member whose
    # every task sits mid-way reads as noisy in the view above but shows here, learning. A flaky grader
    # shrinks the slope it reports by (1 - 2e) and inflates the groups it calls informative, so its pace is
    # discounted by its noise, (1 - 2e)^2.
    pace = {m: _expected_abs(*posterior[m]) * (1 - 2 * noise[m]) ** 2 for m in members}
    fastest = max(pace.values())
    moved = {
        m: (rate[m] * (pace[m] / fastest if fastest > 0 else 1.0)) ** cfg.sharpness * room[m] ** cfg.headroom
        for m in members
    }
    n, mix = len(members), cfg.uniform_mix
    # The two views, each normalised, averaged by how much each says: a view in which every member is near
    # zero (below `SIGNIFICANT`) says little and weighs less; when neither says much, the rest is spread
    # evenly (tiny scores are not blown up to full shares).
    views = [(_normalised(v, n), min(1.0, math.fsum(v.values()) / SIGNIFICANT**2)) for v in (raw, moved)]
    said = math.fsum(w for _, w in views)
    joint = {
        m: math.fsum(v[m] * w for v, w in views) / max(1.0, said) + max(0.0, 1.0 - said) / n for m in members
    }
    # Do no harm: a member may rise above its uniform share in proportion to the data its noise was
    # measured on (until its noise is known, a flaky member's disagreement could be all noise; it may lose
    # share, not gain it), and a fixed ``uniform_mix`` of the batch is spread uniformly whatever the signal
    # says. Once its noise is measured, a flaky member may not rise far above its share on its inflated
    # disagreement (`_noise_cap` of the high estimate) unless it is seen to learn faster than the others:
    # its slope's low bound against the fastest other's slope (noise widens a slope's spread, and so its
    # expected size, not its mean). A slope within a millionth of its spread of zero is rounding: zero.
    rise = {m: mean if mean > 1e-6 * math.sqrt(var) else 0.0 for m, (mean, var) in posterior.items()}
    # The fastest other member's rise: the largest, or for the member holding it the second largest (the
    # same value when two share it); two values, not a pass over the others per member.
    top = sorted((rise[x] for x in members), reverse=True)[:2]
    cap = {}
    for m in members:
        mean, var = posterior[m]
        others = (top[1] if rise[m] == top[0] else top[0]) if len(top) > 1 else 0.0
        faster = (
            max(0.0, mean - 2 * math.sqrt(var)) / others if others > 0 else (math.inf if rise[m] else 1.0)
        )
        cap[m] = min(1.0, _noise_cap(support[m][2], n) * max(1.0, faster))
    score = {}
    for m in members:
        trust = support[m][1] / (support[m][1] + NOISE_SUPPORT)
        wanted = joint[m]
        score[m] = (1 - mix) * (trust * wanted + (1 - trust) * min(wanted, 1 / n)) + mix / n
        score[m] = min(score[m], cap[m])
    return dict(_spread(score, cap))


def _spread(score: Mapping[str, float], cap: Mapping[str, float]) -> dict[str, float]:
    """``score`` topped up to a sum of 1: what the untrusted and the capped gave up goes evenly to the
    members below their caps, again while a top-up meets a cap (caps sum to at least 1).

    Example:
        >>> s = _spread({"a": 0.5, "b": 0.1, "c": 0.1}, {"a": 0.5, "b": 0.2, "c": 1.0})
        >>> {m: round(v, 3) for m, v in s.items()}
        {'a': 0.5, 'b': 0.2, 'c': 0.3}
    """
    out = dict(score)
    while (spare := 1.0 - math.fsum(out.values())) > 1e-12:
        free = [m for m in out if out[m] < cap[m] - 1e-12]
        if not free:
            break
        for m in free:
            out[m] = min(cap[m], out[m] + spare / len(free))
    return out


def _noise_cap(noise: float, n: int) -> float:
    """The largest share a member whose grader flips ``noise`` (e) of its outcomes may get among ``n``: its
    uniform share, raised by the ratio of the signal its groups carry ((1 - 2e)^2, what flips leave of a
    success's squared difference) to the squared difference noise alone makes (2 * 2e(1 - e), the chance of
    a disagreement twice). No cap for a clean grader.

    Example:
        >>> round(_noise_cap(0.2, 6) * 6, 2), round(_noise_cap(0.05, 6) * 6, 2), _noise_cap(0.0, 6)
        (1.56, 5.26, 1.0)
    """
    if noise <= 0:
        return 1.0
    return min(1.0, (1 + (1 - 2 * noise) ** 2 / (4 * noise * (1 - noise))) / n)


#: Pairs of rollouts a member's noise must be measured on before it may rise well above its uniform share
#: (half-way at this many).
NOISE_SUPPORT = 100.0
#: An informative rate (beyond noise) below which a view is not trusted to pick members on its own.
SIGNIFICANT = 0.1


def _normalised(values: Mapping[str, float], n: int) -> dict[str, float]:
    total = math.fsum(values.values())
    return {m: v / total if total > 0 else 1 / n for m, v in values.items()}


@dataclass(frozen=True)
class _Mixture:
    """Every member's groups of the longer window pooled: the reward range, the summed group means, their
    number."""

    low: float
    high: float
    total: float
    scored: float


def _own_headroom(
    recent: Sequence[Mapping[str, StepStats]],
    longer: Sequence[Mapping[str, StepStats]],
    m: str,
    prior: float,
    mixture: _Mixture,
) -> float:
    """A member's reward left to gain on its own reward range (the mixture's when it has none: always
    solved, or always failed). The mean is shrunk like `_headroom`'s."""
    low = min((st[m].low for st in longer if m in st), default=math.inf)
    high = max((st[m].high for st in longer if m in st), default=-math.inf)
    if not high - low > 1e-9:
        low, high = mixture.low, mixture.high
    if not high - low > 1e-9:
        return 1.0
    scored = mixture.scored
    pooled = mixture.total / scored if scored else (low + high) / 2
    own = _shrunk(_sums(longer, [m], "total")[m], _sums(longer, [m], "scored")[m], pooled, prior)
    mean = _shrunk(_sums(recent, [m], "total")[m], _sums(recent, [m], "scored")[m], own, prior)
    return min(1.0, max(0.0, 1 - (mean - low) / (high - low)))


def _headroom(
    recent: Sequence[Mapping[str, StepStats]],
    longer: Sequence[Mapping[str, StepStats]],
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


def _sums(window: Sequence[Mapping[str, StepStats]], members: Sequence[str], name: str) -> dict[str, float]:
    """Each member's `StepStats` field ``name`` summed over the steps of ``window``."""
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
    """Weights near ``target`` that sum to 1, are each >= ``floor`` and move at most ``max_change`` from
    ``previous``.

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
