"""Sampling plans for a mixture: pure functions from (members, strategy, seed, sizes) to ordered rows.

Nothing here does I/O or imports anything of ormix; only the standard library (``random``, ``hashlib``).

Determinism: every plan depends on the *content* of its inputs, never on dict order. Members are always
processed in sorted-name order, and every random stream is a ``random.Random`` seeded with an integer derived
by SHA-256 from ``(seed, purpose[, member])`` (never Python's randomized ``hash()``), so the same inputs and seed
give the same rows on every rank, run and Python process. A member's task order depends only on
``(seed, member name, its task list)``: adding or removing another member never changes it.

Strategies:

- ``weights``: p_i ∝ w_i (``weights=None`` → uniform over members; a member missing from ``weights`` gets 0).
- ``temperature``: p_i ∝ n_i ** (1/T) over task counts n_i (T=1 proportional, T→∞ uniform, T→0 largest).
- ``round_robin``: members cycle in sorted-name order, one row each.
- ``schedule``: a sequence of :class:`Phase` (by training step, optionally interpolated); needs
  ``prompts_per_step``.

Exact per-step composition ("no environment starves"): with ``prompts_per_step=k`` known, each step's rows are
apportioned by :func:`quota_sequence`: member i gets ``floor(p_i*k)`` or ``ceil(p_i*k)`` rows, the quotas sum
to ``k``, and the leftover fractions are *carried* across steps so that, for every member and every step s
since the start of the current phase, the cumulative count ``C_i(s)`` satisfies
``floor(T_i(s)) <= C_i(s) <= ceil(T_i(s))`` where ``T_i(s) = sum over steps t<=s of p_i(t)*k`` — i.e. less
than one row off target, and exactly on it whenever ``T_i(s)`` is whole. All three hold for any per-step
probabilities (constant, interpolated, or otherwise; proof in :func:`quota_sequence`). A member with p=0.1 at
k=4 therefore appears in exactly 2 of every 5 steps (steps 0-4, 5-9, ...), instead of never (plain per-step
largest remainder) or at random (i.i.d. draws: starved in (0.9)^4 ≈ 66% of steps).
Probabilities are read as the simplest fractions within float precision (0.1 → 1/10) over a common
denominator (falling back to 2**32 if that would be huge), so the bookkeeping is exact integer arithmetic.
"""

from __future__ import annotations

import bisect
import hashlib
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

__all__ = [
    "STRATEGIES",
    "Phase",
    "PlanRow",
    "SamplingError",
    "TaskCycler",
    "composition",
    "derive_seed",
    "member_probabilities",
    "plan_members",
    "plan_rows",
    "quota_sequence",
    "starvation_probability",
    "step_quotas",
    "schedule_problems",
    "validate_schedule",
    "weight_problems",
    "weights_at_step",
]

STRATEGIES: tuple[str, ...] = ("weights", "temperature", "round_robin", "schedule")

# Probabilities become integers summing to _SCALE so quota bookkeeping is exact (no float drift over many steps).
_SCALE = 1 << 32
_MAX_DENOM = 10**9
_MAX_COMMON = 1 << 96


class SamplingError(ValueError):
    """A mixture's sampling settings are invalid; the message names the member/phase and the fix.

    Example:
        >>> try:
        ...     member_probabilities({"a": 3}, weights={"a": -1.0})
        ... except SamplingError as err:
        ...     print("negative" in str(err))
        True
    """


@dataclass(frozen=True)
class Phase:
    """One phase of a curriculum schedule.

    ``until_step`` is the exclusive upper bound in training steps (``None`` = open end, only allowed last);
    the phase starts where the previous one ended (step 0 for the first). With ``interpolate=True`` the weights
    move linearly from this phase's weights (at its first step) toward the next phase's weights (reached at
    ``until_step``, which belongs to the next phase).

    Example:
        >>> sched = [Phase(100, {"terminals": 0.9, "seta": 0.1}), Phase(None, {"terminals": 0.3, "seta": 0.7})]
        >>> weights_at_step(sched, 100)["seta"]
        0.7
    """

    until_step: int | None
    weights: Mapping[str, float]
    interpolate: bool = False


@dataclass(frozen=True)
class PlanRow:
    """One planned dataset row: which member, which of its task indices, at which step and position.

    ``step`` is the training step the row belongs to when ``prompts_per_step`` is known, else ``None``.

    Example:
        >>> PlanRow("seta", 7, 0, 0).member
        'seta'
    """

    member: str
    task_index: int
    step: int | None
    position: int


def derive_seed(seed: int, *parts: str) -> int:
    """A 64-bit seed derived from ``seed`` and string parts by SHA-256 (stable across processes).

    Example:
        >>> derive_seed(0, "tasks", "seta") == derive_seed(0, "tasks", "seta")
        True
        >>> derive_seed(0, "tasks", "seta") != derive_seed(1, "tasks", "seta")
        True
    """
    text = "\x1f".join([str(int(seed)), *parts])
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


# --------------------------------------------------------------------------------------------------------------
# Probabilities
# --------------------------------------------------------------------------------------------------------------


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def weight_problems(
    weights: Mapping[str, object], members: Sequence[str], where: str = ""
) -> list[tuple[str | None, str]]:
    """Everything wrong with a weight map over ``members``, as ``(member or None, message)`` pairs.

    The rules, written once (mixture files report them with their key path, the pure functions here raise
    the first): a weight names a known member, is a finite number >= 0, and not every weight is zero.

    Example:
        >>> [m for m, _ in weight_problems({"a": -1, "zz": 1}, ["a", "b"])]
        ['a', 'zz']
        >>> weight_problems({"a": 0, "b": 0.0}, ["a", "b"])[0][1][:21]
        'all weights are zero '
    """
    known = sorted(members)
    out: list[tuple[str | None, str]] = []
    values: list[float] = []
    for member in sorted(weights, key=str):
        value = weights[member]
        if member not in known:
            out.append(
                (
                    member,
                    f"weights{where} name unknown member {member!r}; members are {known}: "
                    "fix the name or add the member",
                )
            )
            continue
        w = _number(value)
        if w is None:
            out.append(
                (
                    member,
                    f"weight of member {member!r}{where} is {value!r}, not a number; set a "
                    "non-negative number",
                )
            )
        elif math.isnan(w) or math.isinf(w):
            out.append(
                (member, f"weight of member {member!r}{where} is {w}; set a finite non-negative number")
            )
        elif w < 0:
            out.append(
                (
                    member,
                    f"weight of member {member!r}{where} is negative ({w}); weights must be >= 0 "
                    "(0 leaves it out)",
                )
            )
        else:
            values.append(w)
    if not out and math.fsum(values) <= 0:
        out.append(
            (
                None,
                f"all weights{where} are zero (members {known}); give at least one member a positive weight",
            )
        )
    return out


def _raise_first(problems: Sequence[tuple[object, str]]) -> None:
    if problems:
        raise SamplingError(problems[0][1])


def _normalise_weights(
    counts: Mapping[str, int], weights: Mapping[str, float], where: str = ""
) -> dict[str, float]:
    members = sorted(counts)
    _raise_first(weight_problems(weights, members, where))
    ws = {m: float(weights.get(m, 0.0)) for m in members}
    total = math.fsum(ws.values())
    for m in members:
        if ws[m] > 0 and counts[m] <= 0:
            raise SamplingError(
                f"member {m!r} has 0 tasks but weight {ws[m]}{where}; set its weight to 0, remove it, "
                "or fix its task selection (num_tasks/split/where)"
            )
    return {m: ws[m] / total for m in members}


def member_probabilities(
    counts: Mapping[str, int],
    *,
    strategy: str = "weights",
    weights: Mapping[str, float] | None = None,
    temperature: float = 1.0,
) -> dict[str, float]:
    """Probability of each member (keys in sorted order, values sum to 1).

    - ``weights``: normalised ``weights``; a member missing from ``weights`` gets 0; ``weights=None`` means
      uniform over members.
    - ``temperature``: p_i ∝ n_i ** (1/T) for task counts n_i (``math.inf`` allowed: exactly uniform).
    - ``round_robin``: uniform (the cycling order is :func:`plan_rows`' business).

    Raises :class:`SamplingError` for: no members, unknown strategy, negative/non-finite/all-zero weights,
    weights naming an unknown member, weights given with a strategy that ignores them, T <= 0, or a member with
    0 tasks that would be sampled.

    Example:
        >>> member_probabilities({"a": 10, "b": 30}, strategy="temperature", temperature=1.0)
        {'a': 0.25, 'b': 0.75}
        >>> member_probabilities({"a": 10, "b": 30}, weights={"a": 1, "b": 3})
        {'a': 0.25, 'b': 0.75}
        >>> member_probabilities({"a": 10, "b": 30})
        {'a': 0.5, 'b': 0.5}
    """
    if not counts:
        raise SamplingError("the mixture has no members; add at least one environment")
    for m, n in counts.items():
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise SamplingError(f"task count of member {m!r} is {n!r}; it must be an integer >= 0")
    members = sorted(counts)
    if strategy not in STRATEGIES:
        raise SamplingError(f"unknown sampling strategy {strategy!r}; use one of {list(STRATEGIES)}")
    if strategy == "schedule":
        raise SamplingError(
            "strategy 'schedule' has per-step probabilities; use weights_at_step(schedule, step) "
            "or plan_rows(..., schedule=...)"
        )
    if weights is not None and strategy != "weights":
        raise SamplingError(
            f"weights were given with strategy {strategy!r}, which ignores them; "
            "drop the weights or use strategy='weights'"
        )
    if strategy == "weights" and weights is not None:
        return _normalise_weights(counts, weights)
    empty = [m for m in members if counts[m] == 0]
    if empty:
        raise SamplingError(
            f"member(s) {empty} have 0 tasks but strategy {strategy!r} would sample them; remove them or "
            "fix their task selection (num_tasks/split/where)"
        )
    if strategy == "temperature":
        t = float(temperature)
        if math.isnan(t) or t <= 0:
            raise SamplingError(
                f"temperature is {temperature!r}; it must be > 0 (1 = proportional to task counts, "
                "larger = closer to uniform)"
            )
        if t == 1.0:
            raw = {m: float(counts[m]) for m in members}  # exact proportional, no log round trip
        else:
            # Log space keeps small temperatures (huge exponents) from overflowing.
            logs = {m: math.log(counts[m]) / t for m in members}
            top = max(logs.values())
            raw = {m: math.exp(v - top) for m, v in logs.items()}
        total = math.fsum(raw.values())
        return {m: raw[m] / total for m in members}
    return {m: 1.0 / len(members) for m in members}


# --------------------------------------------------------------------------------------------------------------
# Schedules
# --------------------------------------------------------------------------------------------------------------


def _phase_label(i: int, phase: Phase) -> str:
    return f"phase {i} (until_step={phase.until_step})"


def schedule_problems(
    until_steps: Sequence[object], interpolates: Sequence[object]
) -> list[tuple[int | None, str, str]]:
    """Everything wrong with a schedule's phase boundaries, as ``(phase index, field, message)``.

    The rules, written once: at least one phase; only the last phase may be open-ended (``until_step``
    ``None``); boundaries strictly increase; the last phase cannot interpolate (nothing comes after it).
    Mixture files report these with their key path; `validate_schedule` raises the first.

    Example:
        >>> schedule_problems([None, 10], [False, True])[0][2]
        'only the last phase may be open-ended; give this phase an until_step or move it last'
    """
    if not until_steps:
        return [(None, "", "the schedule is empty; add phases (the last may be open-ended) or remove it")]
    out: list[tuple[int | None, str, str]] = []
    last = len(until_steps) - 1
    prev: int | None = None
    for i, until in enumerate(until_steps):
        step = until if isinstance(until, int) and not isinstance(until, bool) else None
        if until is None and i != last:
            out.append(
                (
                    i,
                    "until_step",
                    "only the last phase may be open-ended; give this phase an until_step or move it last",
                )
            )
        if step is not None and step <= (prev if prev is not None else 0):
            after = f"the previous phase's {prev}" if prev is not None else "step 0"
            out.append(
                (
                    i,
                    "until_step",
                    f"until_step {step} does not come after {after}; order phases by "
                    "strictly increasing until_step",
                )
            )
        if step is not None:
            prev = step
        if i == last and interpolates[i] is True:
            out.append(
                (
                    i,
                    "interpolate",
                    "the last phase has no next phase to interpolate toward; remove interpolate",
                )
            )
    return out


def validate_schedule(schedule: Sequence[Phase], members: Sequence[str] | Mapping[str, object]) -> None:
    """Raise :class:`SamplingError` unless ``schedule`` is a usable curriculum over ``members``.

    Checks `schedule_problems` (boundaries) and `weight_problems` (each phase's weights).

    Example:
        >>> validate_schedule([Phase(10, {"a": 1.0}), Phase(None, {"b": 1.0})], ["a", "b"])
        >>> try:
        ...     validate_schedule([Phase(None, {"a": 1.0}), Phase(10, {"a": 1.0})], ["a"])
        ... except SamplingError as err:
        ...     print("open-ended" in str(err))
        True
    """
    for i, phase in enumerate(schedule):
        if not isinstance(phase, Phase):
            raise SamplingError(f"schedule entry {i} is {type(phase).__name__}, not a Phase")
    problems = schedule_problems([p.until_step for p in schedule], [p.interpolate for p in schedule])
    if problems:
        index, _, message = problems[0]
        raise SamplingError(
            message if index is None else f"{_phase_label(index, schedule[index])}: {message}"
        )
    for i, phase in enumerate(schedule):
        _raise_first(weight_problems(phase.weights, list(members), f" in {_phase_label(i, phase)}"))


def weights_at_step(schedule: Sequence[Phase], step: int) -> dict[str, float]:
    """The schedule's normalised weights at training ``step`` (keys: every member named in the schedule).

    A step equal to a phase's ``until_step`` belongs to the next phase. With ``interpolate=True`` the weights
    are ``(1-a)*w_this + a*w_next`` with ``a = (step - start) / (until_step - start)`` (both normalised first).
    Steps past a closed last phase keep its weights.

    Example:
        >>> s = [Phase(10, {"a": 1.0, "b": 0.0}, interpolate=True), Phase(None, {"a": 0.0, "b": 1.0})]
        >>> weights_at_step(s, 5)
        {'a': 0.5, 'b': 0.5}
        >>> weights_at_step(s, 10)
        {'a': 0.0, 'b': 1.0}
    """
    if not schedule:
        raise SamplingError("the schedule has no phases; give at least one Phase")
    if step < 0:
        raise SamplingError(f"step {step} is negative; steps start at 0")
    names = sorted({m for ph in schedule for m in ph.weights})

    def norm(ph: Phase) -> dict[str, float]:
        total = math.fsum(float(ph.weights.get(m, 0.0)) for m in names)
        if total <= 0:
            raise SamplingError(f"all weights are zero in phase until_step={ph.until_step}")
        return {m: float(ph.weights.get(m, 0.0)) / total for m in names}

    start = 0
    for i, phase in enumerate(schedule):
        end = phase.until_step
        if end is None or step < end:
            here = norm(phase)
            if phase.interpolate and end is not None and i + 1 < len(schedule):
                nxt = norm(schedule[i + 1])
                a = (step - start) / (end - start)
                return {m: (1.0 - a) * here[m] + a * nxt[m] for m in names}
            return here
        start = end
    return norm(schedule[-1])


# --------------------------------------------------------------------------------------------------------------
# Quotas
# --------------------------------------------------------------------------------------------------------------


def _check_probs(probs: Mapping[str, float]) -> dict[str, float]:
    vals = {m: float(probs[m]) for m in sorted(probs)}
    for m, v in vals.items():
        if math.isnan(v) or math.isinf(v) or v < 0:
            raise SamplingError(f"probability of member {m!r} is {v}; it must be finite and >= 0")
    if math.fsum(vals.values()) <= 0:
        raise SamplingError(f"all probabilities are zero (members {sorted(vals)}); give one a positive value")
    return vals


def _quantise_equal(probs: Mapping[str, float]) -> tuple[dict[str, int], int]:
    """Integer weights and their sum: equal probabilities stay exactly equal (so ties stay ties)."""
    vals = _check_probs(probs)
    total = math.fsum(vals.values())
    q = {m: round(v * _SCALE / total) for m, v in vals.items()}
    return q, sum(q.values())


def _segment_weights(seg: Sequence[Mapping[str, float]]) -> tuple[list[dict[str, int]], int]:
    """Integer weights per step sharing one denominator, so credits are exact integers.

    Probabilities are read as the simplest fractions within float precision (0.1 → 1/10, 1/3 → 1/3), so
    "nice" mixtures are apportioned exactly; when the common denominator would be huge, fall back to 2**32.
    """
    checked = [_check_probs(p) for p in seg]
    rational: list[dict[str, Fraction]] = []
    denom = 1
    for vals in checked:
        fr = {m: Fraction(v).limit_denominator(_MAX_DENOM) for m, v in vals.items()}
        total = sum(fr.values(), Fraction(0))
        if total == 0:
            break
        fr = {m: f / total for m, f in fr.items()}
        for f in fr.values():
            denom = math.lcm(denom, f.denominator)
        if denom > _MAX_COMMON:
            break
        rational.append(fr)
    if len(rational) == len(checked):
        return [{m: int(f * denom) for m, f in fr.items()} for fr in rational], denom
    if all(vals == checked[0] for vals in checked):
        q, scale = _quantise_equal(checked[0])
        return [q] * len(checked), scale
    return [_quantise(vals) for vals in checked], _SCALE


def _quantise(probs: Mapping[str, float]) -> dict[str, int]:
    """Integers summing to exactly _SCALE (largest remainder, ties by name): a common denominator for steps
    whose probabilities differ, such as an interpolated phase."""
    vals = _check_probs(probs)
    members = sorted(vals)
    total = math.fsum(vals.values())
    raw = {m: vals[m] * _SCALE / total for m in members}
    out = {m: int(raw[m]) for m in members}
    left = _SCALE - sum(out.values())
    for m in sorted(members, key=lambda m: (-(raw[m] - out[m]), m))[:left]:
        out[m] += 1
    return out


def step_quotas(probs: Mapping[str, float], prompts_per_step: int, *, rng: random.Random) -> dict[str, int]:
    """One step's quotas by largest remainder (Hamilton), ties broken by ``rng``; no carry between calls.

    The quotas sum to ``prompts_per_step`` and each is ``floor(p*k)`` or ``ceil(p*k)``. Used alone, a member
    with ``p*k < 1`` can get 0 every step; :func:`quota_sequence` carries remainders to prevent that.

    Example:
        >>> step_quotas({"a": 0.5, "b": 0.25, "c": 0.25}, 8, rng=random.Random(0))
        {'a': 4, 'b': 2, 'c': 2}
    """
    k = _check_k(prompts_per_step)
    (q,), scale = _segment_weights([probs])
    members = sorted(q)
    base = {m: q[m] * k // scale for m in members}
    frac = {m: q[m] * k % scale for m in members}
    left = k - sum(base.values())
    ties = {m: rng.random() for m in members}
    for m in sorted(members, key=lambda m: (-frac[m], ties[m]))[:left]:
        base[m] += 1
    return base


def _check_k(prompts_per_step: int) -> int:
    if isinstance(prompts_per_step, bool) or not isinstance(prompts_per_step, int) or prompts_per_step < 1:
        raise SamplingError(f"prompts_per_step is {prompts_per_step!r}; it must be an integer >= 1")
    return prompts_per_step


def quota_sequence(
    probs_per_step: Sequence[Mapping[str, float]],
    prompts_per_step: int,
    *,
    seed: int = 0,
    reset_at: Sequence[int] = (),
) -> list[dict[str, int]]:
    """Per-step quotas for a whole run, carrying remainders across steps (the no-starvation guarantee).

    Write ``x_i(s) = p_i(s)*k`` for member i's target at step s, ``T_i(s)`` for the sum of its targets and
    ``C_i(s)`` for its rows over the steps since the last reset, through s. For *any* per-step probabilities
    (constant, interpolated or arbitrary), every member i and every step s:

    - the step's quotas sum to ``k``, and a member with ``p_i(s) = 0`` gets 0 rows at that step;
    - the quota is ``floor(x_i(s))`` or ``ceil(x_i(s))``;
    - ``floor(T_i(s)) <= C_i(s) <= ceil(T_i(s))``: less than one row off target, and exactly on it whenever
      ``T_i(s)`` is a whole number (so a member with ``p*k >= 1`` appears in every step, and one with
      ``p*k = 0.4`` in exactly 2 of the steps 0-4 after a reset, 2 of the steps 5-9, and so on).

    The bounds are exact for the probabilities as read: the simplest fractions within float precision, or,
    when a segment's common denominator would be huge, integers over about ``2**32`` (off by ~``2**-32``).

    Why they always hold: step s gives every member ``floor(x_i(s))`` rows plus one extra row to each of
    ``F(s) = k - sum of floors`` members with fractional ``x_i(s)``. Choosing the extras is an integral flow
    problem with integer bounds (step s hands out ``F(s)`` extras, at most one per member with fractional
    ``x_i(s)``; member i's running count of extras stays between floor and ceil of its running fractional
    target). The fractional parts of the ``x_i(s)`` are a feasible fractional flow, so an integral one exists
    (Hoffman's circulation theorem) for the steps through any s. Steps are filled in order, earliest deadline
    first (the deadline: the first step at which the member, without an extra, would drop below floor; ties:
    a member whose following extra is already owed at its deadline, then a generator seeded from ``seed``).
    When that greedy choice breaks a bound at the current step (more members due than extras, or fewer
    members with credit than extras; rare), extras of earlier steps are moved along an augmenting path, which
    exists by the same theorem and breaks no other bound. So the guarantee never rests on the greedy.

    ``reset_at`` lists steps where the carried credit starts over (``plan_rows`` passes phase starts, so each
    phase of a schedule is exact on its own).

    Example:
        >>> seq = quota_sequence([{"a": 0.9, "b": 0.1}] * 5, 4, seed=0)
        >>> sum(q["b"] for q in seq)     # 0.1 * 4 * 5 = 2 rows, not 0
        2
        >>> all(sum(q.values()) == 4 and q["a"] in (3, 4) for q in seq)  # 0.9 * 4 = 3.6 rows per step
        True
    """
    k = _check_k(prompts_per_step)
    n_steps = len(probs_per_step)
    if n_steps == 0:
        return []
    members = sorted(probs_per_step[0])
    for s, q in enumerate(probs_per_step):
        if sorted(q) != members:
            raise SamplingError(
                f"step {s} has members {sorted(q)} but step 0 has {members}; give every step the same members"
            )
    rng = random.Random(derive_seed(seed, "quotas"))
    resets = sorted({0, *(int(r) for r in reset_at if 0 < int(r) < n_steps)})
    out: list[dict[str, int]] = []
    for seg_i, seg_start in enumerate(resets):
        seg_end = resets[seg_i + 1] if seg_i + 1 < len(resets) else n_steps
        quant, scale = _segment_weights(probs_per_step[seg_start:seg_end])
        out.extend(_quota_segment(quant, k, members, rng, scale))
    return out


def _quota_segment(
    quant: Sequence[Mapping[str, int]], k: int, members: list[str], rng: random.Random, scale: int
) -> list[dict[str, int]]:
    # Exact integers: member i's target at step t is p_i(t)*k = base + frac/scale rows (base its floor,
    # 0 <= frac < scale). The step's `k - sum(base)` extra rows go one each to members with frac > 0, so the
    # per-step floor/ceil bound holds by construction; what is left is to keep every member's extras through
    # step t, ext[i][t], within floor/ceil of its fractional targets through t, phi[i][t] / scale.
    n, n_steps = len(members), len(quant)
    base = [[q[m] * k // scale for m in members] for q in quant]
    frac = [[q[m] * k % scale for m in members] for q in quant]
    phi: list[list[int]] = []
    for i in range(n):
        acc, run = [], 0
        for t in range(n_steps):
            run += frac[t][i]
            acc.append(run)
        phi.append(acc)
    got = [[0] * n for _ in range(n_steps)]  # got[t][i]: 1 when member i has an extra row at step t
    ext = [[0] * n_steps for _ in range(n)]
    for s in range(n_steps):
        seats = k - sum(base[s])
        prev = [ext[i][s - 1] if s else 0 for i in range(n)]
        # Earliest deadline first among members with credit (an extra keeps them <= ceil): the deadline is the
        # first step at which, without an extra, the member would fall below floor. Ties: a member whose
        # following extra is already owed at that deadline first, then the seeded generator.
        ranked: list[tuple[int, int, float, int]] = []
        spare: list[tuple[int, float, int]] = []
        for i in range(n):
            if frac[s][i] == 0:
                continue
            need = (prev[i] + 1) * scale
            if prev[i] * scale < phi[i][s]:
                d = bisect.bisect_left(phi[i], need, s)
                ranked.append((d, -int(d < n_steps and phi[i][d] > need), rng.random(), i))
            else:
                spare.append((prev[i] * scale - phi[i][s], rng.random(), i))
        ranked.sort()
        spare.sort()
        chosen = [i for *_, i in ranked[:seats]] + [i for *_, i in spare[: max(0, seats - len(ranked))]]
        for i in chosen:
            got[s][i] = 1
        for i in range(n):
            ext[i][s] = prev[i] + got[s][i]
        # The greedy choice can leave a member due now without an extra (more due than extras: it is one
        # below floor) or give one to a member without credit (fewer with credit than extras: one above
        # ceil). Each such member is fixed by one move along an augmenting path through the earlier steps,
        # from a member with room above floor, or to one with room below ceil (see quota_sequence for why
        # one always exists); a move changes no other member's total at step s.
        for i in range(n):
            if ext[i][s] < phi[i][s] // scale:
                slack = [j for j in range(n) if ext[j][s] > phi[j][s] // scale]
                _reroute(got, ext, phi, frac, scale, s, slack, [i])
            elif ext[i][s] > -(-phi[i][s] // scale):
                room = [j for j in range(n) if ext[j][s] < -(-phi[j][s] // scale)]
                _reroute(got, ext, phi, frac, scale, s, [i], room)
    return [{m: base[t][i] + got[t][i] for i, m in enumerate(members)} for t in range(n_steps)]


def _reroute(
    got: list[list[int]],
    ext: list[list[int]],
    phi: list[list[int]],
    frac: list[list[int]],
    scale: int,
    s: int,
    sources: Sequence[int],
    targets: Sequence[int],
) -> None:
    """Move one extra (of the totals through step ``s``) from a member in ``sources`` to one in ``targets``.

    Breadth-first search for an augmenting path in the residual graph of the quota flow: node ``(i, t)`` is
    member i at step t, node ``(n, t)`` is step t's pool of extras. Residual moves: ``(i, t) -> (i, t+1)``
    raises ``ext[i][t]`` (needs room below ceil), ``(i, t) -> (i, t-1)`` lowers ``ext[i][t-1]`` (needs room
    above floor), ``(i, t) -> pool t`` takes member i's extra at t back, ``pool t -> (j, t)`` gives it to a
    member j with ``frac > 0`` and no extra at t. Pushing one unit along the path keeps every step's extras
    count and every bound at steps < s; at step s only the source loses one and the target gains one.
    """
    n = len(ext)
    width = n + 1
    parent: dict[int, int] = {}
    queue: list[int] = []
    for j in sources:
        parent[s * width + j] = -1
        queue.append(s * width + j)
    goal = {s * width + i for i in targets}
    head, found = 0, -1
    while head < len(queue):
        node = queue[head]
        head += 1
        if node in goal:
            found = node
            break
        t, i = divmod(node, width)
        if i == n:
            nxt = [t * width + j for j in range(n) if not got[t][j] and frac[t][j] > 0]
        else:
            nxt = []
            if t < s and ext[i][t] < -(-phi[i][t] // scale):
                nxt.append(node + width)
            if t > 0 and ext[i][t - 1] > phi[i][t - 1] // scale:
                nxt.append(node - width)
            if got[t][i]:
                nxt.append(t * width + n)
        for v in nxt:
            if v not in parent:
                parent[v] = node
                queue.append(v)
    if found < 0:
        raise RuntimeError(
            "quota_sequence found no augmenting path; this is a bug in ormix, please report it"
        )
    path = [found]
    while parent[path[-1]] >= 0:
        path.append(parent[path[-1]])
    path.reverse()
    ext[path[0] % width][s] -= 1
    for u, v in zip(path, path[1:], strict=False):
        tu, iu = divmod(u, width)
        tv, iv = divmod(v, width)
        if iu == n:
            got[tv][iv] = 1
        elif iv == n:
            got[tu][iu] = 0
        elif tv == tu + 1:
            ext[iu][tu] += 1
        else:
            ext[iu][tv] -= 1
    ext[found % width][s] += 1


# --------------------------------------------------------------------------------------------------------------
# Tasks
# --------------------------------------------------------------------------------------------------------------


@dataclass
class TaskCycler:
    """Draws a member's task indices without replacement, re-permuting (seeded) after each full cycle.

    The permutation stream depends only on ``(seed, member, tasks)``, so other members never affect it.

    Example:
        >>> c = TaskCycler([10, 11, 12], seed=0, member="a")
        >>> sorted(c.take(3)) == [10, 11, 12]
        True
    """

    tasks: Sequence[int]
    seed: int = 0
    member: str = ""
    _rng: random.Random = field(init=False, repr=False)
    _order: list[int] = field(init=False, repr=False)
    _pos: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.tasks = list(self.tasks)
        self._rng = random.Random(derive_seed(self.seed, "tasks", self.member))
        self._order = []
        self._pos = 0

    def next(self) -> int:
        """The next task index (a fresh permutation starts whenever the previous one is used up)."""
        if not self.tasks:
            raise SamplingError(f"member {self.member!r} has no tasks to draw from; fix its task selection")
        if self._pos >= len(self._order):
            self._order = list(self.tasks)
            self._rng.shuffle(self._order)
            self._pos = 0
        value = self._order[self._pos]
        self._pos += 1
        return value

    def take(self, n: int) -> list[int]:
        """The next ``n`` task indices."""
        return [self.next() for _ in range(n)]


# --------------------------------------------------------------------------------------------------------------
# Plans
# --------------------------------------------------------------------------------------------------------------


def _phase_starts(schedule: Sequence[Phase]) -> list[int]:
    return [0] + [ph.until_step for ph in schedule[:-1] if ph.until_step is not None]


def plan_members(
    counts: Mapping[str, int],
    *,
    strategy: str = "weights",
    weights: Mapping[str, float] | None = None,
    temperature: float = 1.0,
    schedule: Sequence[Phase] | None = None,
    num_samples: int | None = None,
    prompts_per_step: int | None = None,
    num_steps: int | None = None,
    seed: int = 0,
) -> list[tuple[str, int | None]]:
    """The member (and step) of each row of a mixture's training dataset; tasks are `plan_rows`' business.

    Needs only each member's task count (for ``temperature``, the default size and the zero-task checks), so
    a plan's composition can be shown before any server answered. Arguments as for `plan_rows`.

    Example:
        >>> plan_members({"a": 3, "b": 2}, weights={"a": 0.5, "b": 0.5}, prompts_per_step=2, num_steps=2)
        [('a', 0), ('b', 0), ('a', 1), ('b', 1)]
    """
    return _plan_members(
        counts,
        strategy=strategy,
        weights=weights,
        temperature=temperature,
        schedule=schedule,
        num_samples=num_samples,
        prompts_per_step=prompts_per_step,
        num_steps=num_steps,
        seed=seed,
    )


def plan_rows(
    tasks: Mapping[str, Sequence[int]],
    *,
    strategy: str = "weights",
    weights: Mapping[str, float] | None = None,
    temperature: float = 1.0,
    schedule: Sequence[Phase] | None = None,
    num_samples: int | None = None,
    prompts_per_step: int | None = None,
    num_steps: int | None = None,
    seed: int = 0,
) -> list[PlanRow]:
    """The ordered rows of a mixture's training dataset.

    Size: ``num_samples`` rows, else ``num_steps * prompts_per_step``, else the sum of task counts. (Giving both
    ``num_samples`` and ``num_steps`` requires them to agree.)

    With ``prompts_per_step=k``: rows come in steps of ``k``; every step gets the exact quotas of
    :func:`quota_sequence` (members' rows shuffled within the step, so the composition is exact but positions
    mix). If the size is not a multiple of ``k`` the last step is cut short. Without it: i.i.d. draws with the
    seeded generator (``step=None``). ``round_robin`` always cycles members in sorted-name order.
    ``schedule`` (strategy ``weights`` or ``schedule``, no ``weights``) needs ``prompts_per_step``; its credit
    starts over at each phase boundary.

    Within a member, task indices come from :class:`TaskCycler` (without replacement, cycling).

    Example:
        >>> rows = plan_rows({"a": [0, 1, 2], "b": [0, 1]}, weights={"a": 0.5, "b": 0.5},
        ...                  prompts_per_step=2, num_steps=3, seed=0)
        >>> [sorted(r.member for r in rows if r.step == s) for s in range(3)]
        [['a', 'b'], ['a', 'b'], ['a', 'b']]
    """
    if not tasks:
        raise SamplingError("the mixture has no members; add at least one environment")
    seq = _plan_members(
        {m: len(tasks[m]) for m in tasks},
        strategy=strategy,
        weights=weights,
        temperature=temperature,
        schedule=schedule,
        num_samples=num_samples,
        prompts_per_step=prompts_per_step,
        num_steps=num_steps,
        seed=seed,
    )
    cyclers = {m: TaskCycler(tasks[m], seed=seed, member=m) for m in sorted(tasks)}
    return [PlanRow(m, cyclers[m].next(), step, pos) for pos, (m, step) in enumerate(seq)]


def _plan_members(
    counts: Mapping[str, int],
    *,
    strategy: str,
    weights: Mapping[str, float] | None,
    temperature: float,
    schedule: Sequence[Phase] | None,
    num_samples: int | None,
    prompts_per_step: int | None,
    num_steps: int | None,
    seed: int,
) -> list[tuple[str, int | None]]:
    if not counts:
        raise SamplingError("the mixture has no members; add at least one environment")
    members = sorted(counts)
    counts = {m: counts[m] for m in members}
    if strategy not in STRATEGIES:
        raise SamplingError(f"unknown sampling strategy {strategy!r}; use one of {list(STRATEGIES)}")
    if strategy == "schedule" and schedule is None:
        raise SamplingError("strategy 'schedule' needs a schedule; pass schedule=[Phase(...), ...]")
    if schedule is not None:
        if strategy not in ("weights", "schedule"):
            raise SamplingError(
                f"a schedule was given with strategy {strategy!r}; a schedule replaces the strategy: "
                "use strategy='schedule' (or drop the schedule)"
            )
        if weights is not None:
            raise SamplingError(
                "both weights and a schedule were given; a schedule replaces weights: drop one"
            )
        if prompts_per_step is None:
            raise SamplingError(
                "a schedule is defined by training step, so it needs prompts_per_step: set prompts_per_step "
                "(prompts per optimizer step, i.e. per_device_train_batch_size * gradient_accumulation_steps "
                "* num_processes / num_generations)"
            )
        validate_schedule(schedule, members)
    if prompts_per_step is not None:
        _check_k(prompts_per_step)
    if num_steps is not None:
        if prompts_per_step is None:
            raise SamplingError("num_steps needs prompts_per_step to size the plan; set prompts_per_step")
        if isinstance(num_steps, bool) or not isinstance(num_steps, int) or num_steps < 1:
            raise SamplingError(f"num_steps is {num_steps!r}; it must be an integer >= 1")
    if num_samples is not None:
        if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 1:
            raise SamplingError(f"num_samples is {num_samples!r}; it must be an integer >= 1")
        if (
            num_steps is not None
            and prompts_per_step is not None
            and num_samples != num_steps * prompts_per_step
        ):
            raise SamplingError(
                f"num_samples={num_samples} disagrees with num_steps*prompts_per_step="
                f"{num_steps * prompts_per_step}; give only one of num_samples and num_steps"
            )
        size = num_samples
    elif num_steps is not None and prompts_per_step is not None:
        size = num_steps * prompts_per_step
    else:
        size = sum(counts.values())
        if size == 0:
            raise SamplingError(f"no member has any task (members {members}); fix their task selection")

    # Member sequence first, tasks second: a member's task stream depends only on how many rows it gets.
    # Member sequence first, tasks second: a member's task stream depends only on how many rows it gets.
    seq: list[tuple[str, int | None]]
    if strategy == "round_robin":
        member_probabilities(counts, strategy="round_robin")  # validates empty members
        seq = [
            (members[i % len(members)], i // prompts_per_step if prompts_per_step else None)
            for i in range(size)
        ]
    elif prompts_per_step is None:
        probs = member_probabilities(counts, strategy=strategy, weights=weights, temperature=temperature)
        draws = random.Random(derive_seed(seed, "draws"))
        names = [m for m in members if probs[m] > 0]
        picked = draws.choices(names, weights=[probs[m] for m in names], k=size)
        seq = [(m, None) for m in picked]
    else:
        k = prompts_per_step
        n_steps = -(-size // k)
        resets: list[int] = []
        if schedule is not None:
            per_step = []
            for s in range(n_steps):
                w = weights_at_step(schedule, s)
                per_step.append(_normalise_weights(counts, w, where=f" at step {s}"))
            resets = _phase_starts(schedule)
        else:
            probs = member_probabilities(counts, strategy=strategy, weights=weights, temperature=temperature)
            per_step = [probs] * n_steps
        quotas = quota_sequence(per_step, k, seed=seed, reset_at=resets)
        order = random.Random(derive_seed(seed, "positions"))
        seq = []
        for s, q in enumerate(quotas):
            block = [m for m in members for _ in range(q[m])]
            order.shuffle(block)
            seq.extend((m, s) for m in block)
        seq = seq[:size]
    return seq


# --------------------------------------------------------------------------------------------------------------
# Inspection
# --------------------------------------------------------------------------------------------------------------


def composition(
    rows: Sequence[PlanRow], prompts_per_step: int, *, members: Sequence[str] | None = None
) -> list[dict[str, int]]:
    """Rows per member for each step (``row.step`` when set, else ``position // prompts_per_step``).

    Every listed member (default: every member seen) appears in every step's dict, 0 when absent.

    Example:
        >>> rows = [PlanRow("a", 0, 0, 0), PlanRow("b", 0, 0, 1), PlanRow("a", 1, 1, 2), PlanRow("a", 2, 1, 3)]
        >>> composition(rows, 2)
        [{'a': 1, 'b': 1}, {'a': 2, 'b': 0}]
    """
    k = _check_k(prompts_per_step)
    names = sorted(members) if members is not None else sorted({r.member for r in rows})
    steps: list[dict[str, int]] = []
    for r in rows:
        s = r.step if r.step is not None else r.position // k
        while len(steps) <= s:
            steps.append(dict.fromkeys(names, 0))
        steps[s][r.member] = steps[s].get(r.member, 0) + 1
    return steps


def starvation_probability(
    probs: Mapping[str, float], prompts_per_step: int, *, mode: str = "iid"
) -> dict[str, float]:
    """Long-run fraction of steps in which each member gets no prompt.

    - ``mode="iid"`` (no ``prompts_per_step`` in the plan: independent draws): ``(1 - p) ** k``.
    - ``mode="quotas"`` (exact per-step quotas, :func:`quota_sequence`): 0 when ``p*k >= 1``, else
      ``1 - p*k`` (the member gets one row in a ``p*k`` fraction of steps, evenly spread); 1 when p = 0.

    Example:
        >>> starvation_probability({"a": 0.9, "b": 0.1}, 4)["b"]  # doctest: +ELLIPSIS
        0.656...
        >>> starvation_probability({"a": 0.9, "b": 0.1}, 4, mode="quotas")["b"]  # doctest: +ELLIPSIS
        0.6...
    """
    k = _check_k(prompts_per_step)
    if mode not in ("iid", "quotas"):
        raise SamplingError(f"unknown mode {mode!r}; use 'iid' or 'quotas'")
    total = math.fsum(float(v) for v in probs.values())
    if total <= 0:
        raise SamplingError("all probabilities are zero; give one member a positive value")
    out: dict[str, float] = {}
    for m in sorted(probs):
        p = float(probs[m]) / total
        if mode == "iid":
            out[m] = (1.0 - p) ** k
        else:
            out[m] = max(0.0, 1.0 - p * k)
    return out
