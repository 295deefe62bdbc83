"""Tests for ormix.mixture.sampling: pure planning logic, so hypothesis properties plus worked examples."""

from __future__ import annotations

import doctest
import math
import random
from collections import Counter

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ormix.mixture import sampling
from ormix.mixture.sampling import (
    Phase,
    PlanRow,
    SamplingError,
    TaskCycler,
    composition,
    member_probabilities,
    plan_rows,
    quota_sequence,
    starvation_probability,
    step_quotas,
    validate_schedule,
    weights_at_step,
)

NAMES = ["alpha", "beta", "gamma", "delta", "eps", "zeta"]

weight_maps = st.integers(2, 6).flatmap(
    lambda m: st.lists(st.floats(0.001, 10.0), min_size=m, max_size=m).map(
        lambda ws: dict(zip(NAMES[: len(ws)], ws, strict=False))
    )
)


# Every Hypothesis test here is derandomized: the same examples on every run, so CI never fails (or passes) by
# luck; max_examples sets how many cases each explores.
DETERMINISTIC = settings(derandomize=True, deadline=None, database=None)


def _norm(ws: dict[str, float]) -> dict[str, float]:
    total = math.fsum(ws.values())
    return {m: w / total for m, w in ws.items()}


def test_doctests() -> None:
    result = doctest.testmod(sampling)
    assert result.attempted > 10 and result.failed == 0


# ---------------------------------------------------------------------------------------------- probabilities


def test_weights_normalised_missing_is_zero_and_none_is_uniform() -> None:
    assert member_probabilities({"a": 5, "b": 5, "c": 1}, weights={"a": 3, "b": 1}) == {
        "a": 0.75,
        "b": 0.25,
        "c": 0.0,
    }
    assert member_probabilities({"b": 1, "a": 100}) == {"a": 0.5, "b": 0.5}
    assert member_probabilities({"a": 1, "b": 9}, strategy="round_robin") == {"a": 0.5, "b": 0.5}


def test_temperature_limits() -> None:
    counts = {"a": 10, "b": 90, "c": 900}
    assert member_probabilities(counts, strategy="temperature", temperature=1.0) == pytest.approx(
        {"a": 0.01, "b": 0.09, "c": 0.9}
    )
    hot = member_probabilities(counts, strategy="temperature", temperature=1e6)
    assert all(abs(p - 1 / 3) < 1e-4 for p in hot.values())
    assert member_probabilities(counts, strategy="temperature", temperature=math.inf) == pytest.approx(
        {m: 1 / 3 for m in counts}
    )
    cold = member_probabilities(counts, strategy="temperature", temperature=0.01)  # no overflow
    assert cold["c"] == pytest.approx(1.0)
    mid = member_probabilities(counts, strategy="temperature", temperature=2.0)
    assert mid["a"] == pytest.approx(math.sqrt(10) / (math.sqrt(10) + math.sqrt(90) + math.sqrt(900)))


@settings(DETERMINISTIC)
@given(st.dictionaries(st.sampled_from(NAMES), st.integers(1, 10_000), min_size=1), st.floats(0.05, 50.0))
def test_temperature_is_a_distribution_and_monotone(counts: dict[str, int], t: float) -> None:
    p = member_probabilities(counts, strategy="temperature", temperature=t)
    assert math.isclose(math.fsum(p.values()), 1.0)
    for a in counts:
        for b in counts:
            if counts[a] > counts[b]:
                assert p[a] >= p[b]


@pytest.mark.parametrize(
    ("kwargs", "needles"),
    [
        ({"counts": {}}, ["no members", "add"]),
        ({"counts": {"a": 1}, "strategy": "softmax"}, ["'softmax'", "round_robin"]),
        ({"counts": {"a": 1, "b": 1}, "weights": {"a": -1}}, ["'a'", "negative", ">= 0"]),
        ({"counts": {"a": 1, "b": 1}, "weights": {"a": 0, "b": 0}}, ["all weights", "positive"]),
        ({"counts": {"a": 1}, "weights": {"sета": 1}}, ["unknown", "'sета'", "fix the name"]),
        ({"counts": {"a": 1}, "strategy": "temperature", "temperature": 0}, ["temperature", "> 0"]),
        ({"counts": {"a": 1}, "strategy": "temperature", "temperature": -2}, ["temperature", "> 0"]),
        ({"counts": {"a": 0, "b": 3}, "weights": {"a": 1, "b": 1}}, ["'a'", "0 tasks", "weight to 0"]),
        ({"counts": {"a": 0, "b": 3}}, ["'a'", "0 tasks", "remove"]),
        ({"counts": {"a": 1}, "weights": {"a": float("nan")}}, ["'a'", "finite"]),
        ({"counts": {"a": 1}, "strategy": "temperature", "weights": {"a": 1}}, ["ignores", "drop"]),
    ],
)
def test_probability_errors_name_the_problem_and_fix(kwargs: dict, needles: list[str]) -> None:
    counts = kwargs.pop("counts")
    with pytest.raises(SamplingError) as info:
        member_probabilities(counts, **kwargs)
    for needle in needles:
        assert needle in str(info.value)
    assert isinstance(info.value, ValueError)


def test_zero_task_member_with_zero_weight_is_fine() -> None:
    assert member_probabilities({"a": 0, "b": 3}, weights={"b": 1}) == {"a": 0.0, "b": 1.0}


# ---------------------------------------------------------------------------------------------- quotas


@settings(DETERMINISTIC)
@given(weight_maps, st.integers(1, 64), st.integers(0, 2**32))
def test_step_quotas_exact(ws: dict[str, float], k: int, seed: int) -> None:
    probs = _norm(ws)
    q = step_quotas(probs, k, rng=random.Random(seed))
    assert sum(q.values()) == k
    for m, p in probs.items():
        assert math.floor(p * k - 1e-9) <= q[m] <= math.ceil(p * k + 1e-9)


def test_step_quotas_ties_are_seeded() -> None:
    probs = {"a": 1 / 3, "b": 1 / 3, "c": 1 / 3}
    winners = {tuple(sorted(step_quotas(probs, 1, rng=random.Random(s)).items())) for s in range(30)}
    assert len(winners) == 3  # every member can win the tie, depending on the seed
    again = [step_quotas(probs, 4, rng=random.Random(7)) for _ in range(2)]
    assert again[0] == again[1]


def _assert_quota_guarantee(
    per_step: list[dict[str, float]], k: int, seq: list[dict[str, int]], resets: list[int] | tuple = ()
) -> None:
    """quota_sequence's documented guarantee, checked exactly (integers) for the probabilities as the module
    reads them: every step sums to k, each quota is floor/ceil of p*k, and each member's count since the
    last reset is floor/ceil of its summed target."""
    assert len(seq) == len(per_step)
    starts = sorted({0, *(r for r in resets if 0 < r < len(per_step))})
    for a, b in zip(starts, [*starts[1:], len(per_step)], strict=True):
        quant, scale = sampling._segment_weights(per_step[a:b])
        cum, target = Counter(), Counter()
        for s in range(a, b):
            q, w = seq[s], quant[s - a]
            assert sorted(q) == sorted(w) and sum(q.values()) == k, (s, q)
            for m in w:
                x = w[m] * k  # p*k in units of 1/scale
                assert x // scale <= q[m] <= -(-x // scale), (s, m, q[m], x / scale)
                cum[m] += q[m]
                target[m] += x
                lo, hi = target[m] // scale, -(-target[m] // scale)
                assert lo <= cum[m] <= hi, (s, m, cum[m], target[m] / scale)


@settings(DETERMINISTIC, max_examples=1000)
@given(weight_maps, st.integers(1, 16), st.integers(0, 1000))
# Found by this test against the former hand-tuned heuristic: gamma fell 1.04 rows behind at step 16.
@example(ws={"alpha": 4.0, "beta": 4.0, "gamma": 4.0, "delta": 0.5, "eps": 0.5, "zeta": 0.5}, k=1, seed=0)
def test_quota_sequence_per_step_and_cumulative_bounds(ws: dict[str, float], k: int, seed: int) -> None:
    probs = _norm(ws)
    steps = 80
    seq = quota_sequence([probs] * steps, k, seed=seed)
    _assert_quota_guarantee([probs] * steps, k, seq)
    cum = Counter()  # and against the floats themselves, within float precision
    for s, q in enumerate(seq):
        assert sum(q.values()) == k
        for m, p in probs.items():
            assert math.floor(p * k - 1e-9) <= q[m] <= math.ceil(p * k + 1e-9), (s, m, q)
            cum[m] += q[m]
            target = p * k * (s + 1)
            assert abs(cum[m] - target) < 1 + 1e-6, (s, m, cum[m], target)


def test_quota_sequence_former_failure_is_exact() -> None:
    # ws = 4, 4, 4, 0.5, 0.5, 0.5 at k=1: shares 8/27 and 1/27, so every 27 steps each member is exactly on
    # target.
    probs = _norm({"alpha": 4.0, "beta": 4.0, "gamma": 4.0, "delta": 0.5, "eps": 0.5, "zeta": 0.5})
    for seed in range(20):
        seq = quota_sequence([probs] * 81, 1, seed=seed)
        _assert_quota_guarantee([probs] * 81, 1, seq)
        for end in (27, 54, 81):
            counts = Counter(m for q in seq[:end] for m, n in q.items() for _ in range(n))
            assert counts == {m: (8 if p > 0.1 else 1) * end // 27 for m, p in probs.items()}


@settings(DETERMINISTIC, max_examples=500)
@given(
    st.lists(st.sampled_from([0.0, 0.05, 0.1, 0.3, 0.5, 1.0, 2.5, 7.0]), min_size=4, max_size=4),
    st.lists(st.sampled_from([0.0, 0.05, 0.1, 0.3, 0.5, 1.0, 2.5, 7.0]), min_size=4, max_size=4),
    st.integers(1, 60),
    st.integers(1, 16),
    st.integers(0, 1000),
)
def test_quota_sequence_bounds_with_interpolated_probabilities(
    start: list[float], end: list[float], length: int, k: int, seed: int
) -> None:
    # Linearly changing probabilities exactly as an interpolated phase produces them (members may enter or
    # leave: weight 0 at one end), then the next phase's constant ones; with and without a reset between.
    names = NAMES[:4]
    start, end = [start[0] or 1.0, *start[1:]], [end[0], *end[1:-1], end[-1] or 1.0]
    sched = [
        Phase(length, dict(zip(names, start, strict=True)), True),
        Phase(None, dict(zip(names, end, strict=True))),
    ]
    per_step = [weights_at_step(sched, s) for s in range(length + 5)]
    for resets in ([length], []):
        seq = quota_sequence(per_step, k, seed=seed, reset_at=resets)
        _assert_quota_guarantee(per_step, k, seq, resets)
        for s, q in enumerate(seq):
            assert all(q[m] == 0 for m in names if per_step[s][m] == 0), (s, q)


@settings(DETERMINISTIC, max_examples=500)
@given(
    st.integers(2, 6).flatmap(
        lambda n: st.lists(
            st.lists(st.integers(0, 5), min_size=n, max_size=n).filter(any), min_size=1, max_size=40
        )
    ),
    st.integers(1, 9),
    st.integers(0, 1000),
    st.lists(st.integers(1, 39), max_size=3),
)
def test_quota_sequence_bounds_with_arbitrary_probabilities(
    weights: list[list[int]], k: int, seed: int, resets: list[int]
) -> None:
    # The guarantee needs no structure at all: new probabilities every step, members dropping to 0 and back.
    per_step = [{f"m{i}": w / sum(ws) for i, w in enumerate(ws)} for ws in weights]
    seq = quota_sequence(per_step, k, seed=seed, reset_at=resets)
    _assert_quota_guarantee(per_step, k, seq, resets)


def test_quota_sequence_reroutes_when_the_greedy_choice_is_stuck(monkeypatch: pytest.MonkeyPatch) -> None:
    # Step 0 (k=2, all 1/4): earliest deadline gives a and b the two extras, since c and d owe nothing later.
    # Step 1 (a 3/4, b 1/4, c and d 0): its one extra can only go to a or b, which got their share at step 0;
    # so one of step 0's extras must move to c or d. The augmenting path does that.
    calls = []
    real = sampling._reroute
    monkeypatch.setattr(sampling, "_reroute", lambda *a: calls.append(a[-2:]) or real(*a))
    per_step = [dict.fromkeys("abcd", 0.25), {"a": 0.75, "b": 0.25, "c": 0.0, "d": 0.0}]
    for seed in range(10):
        seq = quota_sequence(per_step, 2, seed=seed)
        _assert_quota_guarantee(per_step, 2, seq)
        assert (
            seq[0]["c"] + seq[0]["d"] == 1 and sum(q["a"] for q in seq) == 2 and sum(q["b"] for q in seq) == 1
        )
    assert calls  # the repair path really ran


@settings(DETERMINISTIC, max_examples=300)
@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from([0.0, 0.05, 0.3, 1.0, 2.5, 7.0]), min_size=4, max_size=4),
            st.integers(1, 25),
            st.booleans(),
        ),
        min_size=1,
        max_size=4,
    ),
    st.integers(1, 12),
    st.integers(0, 100),
)
def test_schedule_plans_keep_per_step_and_per_phase_bounds(
    phases: list[tuple[list[float], int, bool]], k: int, seed: int
) -> None:
    # Real schedules: constant or linearly interpolated phases, members entering and leaving (weight 0).
    names = NAMES[:4]
    sched, until = [], 0
    for i, (ws, length, interp) in enumerate(phases):
        if sum(ws) == 0:
            ws = [1.0, *ws[1:]]
        until += length
        last = i == len(phases) - 1
        sched.append(Phase(None if last else until, dict(zip(names, ws, strict=True)), interp and not last))
    steps = until + 5
    rows = plan_rows(
        {m: [0, 1, 2] for m in names}, schedule=sched, prompts_per_step=k, num_steps=steps, seed=seed
    )
    comp = composition(rows, k, members=names)
    starts = {0, *(ph.until_step for ph in sched[:-1])}
    cum, target = Counter(), Counter()
    for s, q in enumerate(comp):
        if s in starts:
            cum, target = Counter(), Counter()
        p = weights_at_step(sched, s)
        assert sum(q.values()) == k
        for m in names:
            if p[m] == 0:
                assert q[m] == 0, (s, m)
            assert math.floor(p[m] * k - 1e-9) <= q[m] <= math.ceil(p[m] * k + 1e-9), (s, m, q, p)
            cum[m] += q[m]
            target[m] += p[m] * k
            assert abs(cum[m] - target[m]) < 1 + 1e-6, (s, m, cum[m], target[m])


def test_small_probability_member_is_not_starved() -> None:
    # p=0.1, k=4: plain per-step rounding gives 0 every step; carried credit gives 2 rows every 5 steps.
    probs = {"big": 0.9, "tiny": 0.1}
    plain = [step_quotas(probs, 4, rng=random.Random(s))["tiny"] for s in range(50)]
    assert sum(plain) == 0
    seq = quota_sequence([probs] * 50, 4, seed=0)
    tiny = [q["tiny"] for q in seq]
    assert sum(tiny) == 20
    for start in range(0, 50, 5):
        assert sum(tiny[start : start + 5]) == 2  # evenly spread, not bunched


@settings(DETERMINISTIC, max_examples=30)
@given(weight_maps, st.integers(1, 16), st.integers(0, 10_000))
def test_plan_no_starvation(ws: dict[str, float], k: int, seed: int) -> None:
    tasks = {m: list(range(5)) for m in ws}
    rows = plan_rows(tasks, weights=ws, prompts_per_step=k, num_steps=40, seed=seed)
    probs = _norm(ws)
    comp = composition(rows, k, members=list(ws))
    assert len(comp) == 40
    for m, p in probs.items():
        if p * k >= 1:
            assert all(step[m] >= 1 for step in comp), m
        total = sum(step[m] for step in comp)
        assert abs(total - p * k * 40) < 1 + 1e-6


# ---------------------------------------------------------------------------------------------- schedules


def test_schedule_boundaries_are_exact() -> None:
    sched = [Phase(3, {"a": 1.0}), Phase(None, {"b": 1.0})]
    assert weights_at_step(sched, 2) == {"a": 1.0, "b": 0.0}
    assert weights_at_step(sched, 3) == {"a": 0.0, "b": 1.0}
    rows = plan_rows({"a": [0, 1], "b": [0, 1]}, schedule=sched, prompts_per_step=4, num_steps=6)
    assert {r.member for r in rows if r.step == 2} == {"a"}
    assert {r.member for r in rows if r.step == 3} == {"b"}
    assert [r.step for r in rows] == sorted(r.step for r in rows)
    assert rows[11].step == 2 and rows[12].step == 3


def test_interpolation_midpoint_and_end() -> None:
    sched = [
        Phase(10, {"a": 1.0, "b": 0.0}, interpolate=True),
        Phase(20, {"a": 0.0, "b": 1.0}),
        Phase(None, {"a": 1}),
    ]
    assert weights_at_step(sched, 0) == {"a": 1.0, "b": 0.0}
    assert weights_at_step(sched, 5) == pytest.approx({"a": 0.5, "b": 0.5})
    assert weights_at_step(sched, 9) == pytest.approx({"a": 0.1, "b": 0.9})
    assert weights_at_step(sched, 10) == {"a": 0.0, "b": 1.0}
    assert weights_at_step(sched, 25) == {"a": 1.0, "b": 0.0}
    rows = plan_rows({"a": [0], "b": [0]}, schedule=sched, prompts_per_step=10, num_steps=10)
    comp = composition(rows, 10)
    assert [c["a"] for c in comp] == [10, 9, 8, 7, 6, 5, 4, 3, 2, 1]


def test_closed_last_phase_keeps_its_weights() -> None:
    assert weights_at_step([Phase(5, {"a": 1, "b": 3})], 100) == {"a": 0.25, "b": 0.75}


@pytest.mark.parametrize(
    ("schedule", "needles"),
    [
        ([], ["empty", "add phases"]),
        ([Phase(None, {"a": 1}), Phase(10, {"a": 1})], ["phase 0", "open-ended", "last"]),
        ([Phase(10, {"a": 1}), Phase(5, {"a": 1}), Phase(None, {"a": 1})], ["phase 1", "increasing"]),
        ([Phase(10, {"a": 1}), Phase(None, {"c": 1})], ["phase 1", "'c'", "unknown", "fix the name"]),
        ([Phase(10, {"a": -1, "b": 2}), Phase(None, {"a": 1})], ["phase 0", "'a'", "negative"]),
        ([Phase(10, {"a": 0, "b": 0}), Phase(None, {"a": 1})], ["phase 0", "zero", "positive"]),
        ([Phase(10, {"a": 1}), Phase(None, {"a": 1}, interpolate=True)], ["phase 1", "remove interpolate"]),
        ([Phase(0, {"a": 1}), Phase(None, {"a": 1})], ["phase 0", "increasing"]),
    ],
)
def test_schedule_errors_name_the_phase_and_fix(schedule: list[Phase], needles: list[str]) -> None:
    with pytest.raises(SamplingError) as info:
        validate_schedule(schedule, ["a", "b"])
    for needle in needles:
        assert needle in str(info.value)


def test_schedule_needs_prompts_per_step() -> None:
    with pytest.raises(SamplingError, match="set prompts_per_step"):
        plan_rows({"a": [0]}, schedule=[Phase(None, {"a": 1})], num_samples=4)
    with pytest.raises(SamplingError, match="replaces weights"):
        plan_rows({"a": [0]}, schedule=[Phase(None, {"a": 1})], weights={"a": 1}, prompts_per_step=2)
    with pytest.raises(SamplingError, match="needs a schedule"):
        plan_rows({"a": [0]}, strategy="schedule", prompts_per_step=2)


def test_schedule_phase_with_zero_task_member_is_refused_naming_step() -> None:
    with pytest.raises(SamplingError, match=r"'b' has 0 tasks.*at step 2"):
        plan_rows(
            {"a": [0], "b": []},
            schedule=[Phase(2, {"a": 1}), Phase(None, {"b": 1})],
            prompts_per_step=2,
            num_steps=4,
        )


# ---------------------------------------------------------------------------------------------- plans


def test_plan_sizes_and_defaults() -> None:
    tasks = {"a": [0, 1, 2], "b": [5, 6]}
    assert len(plan_rows(tasks)) == 5
    assert len(plan_rows(tasks, num_samples=7)) == 7
    rows = plan_rows(tasks, prompts_per_step=3, num_steps=4)
    assert len(rows) == 12 and [r.position for r in rows] == list(range(12))
    cut = plan_rows(tasks, prompts_per_step=4, num_samples=10)
    assert len(cut) == 10 and cut[-1].step == 2
    assert all(r.step is None for r in plan_rows(tasks, num_samples=6))
    with pytest.raises(SamplingError, match="give only one"):
        plan_rows(tasks, num_samples=5, prompts_per_step=2, num_steps=2)
    with pytest.raises(SamplingError, match="needs prompts_per_step"):
        plan_rows(tasks, num_steps=3)
    with pytest.raises(SamplingError, match="prompts_per_step"):
        plan_rows(tasks, prompts_per_step=0)


@settings(DETERMINISTIC, max_examples=30)
@given(weight_maps, st.integers(0, 2**40), st.sampled_from([None, 1, 3, 8]))
def test_plan_determinism(ws: dict[str, float], seed: int, k: int | None) -> None:
    tasks = {m: list(range(3 + i)) for i, m in enumerate(ws)}
    a = plan_rows(tasks, weights=ws, num_samples=48, prompts_per_step=k, seed=seed)
    b = plan_rows(
        dict(reversed(list(tasks.items()))),
        weights=dict(reversed(list(ws.items()))),
        num_samples=48,
        prompts_per_step=k,
        seed=seed,
    )
    assert a == b  # same content in another dict order → same rows
    c = plan_rows(tasks, weights=ws, num_samples=48, prompts_per_step=k, seed=seed + 1)
    assert a != c


def test_plan_is_stable_across_processes() -> None:
    # Pinned values: guards against any dependence on hash() randomisation or dict order.
    rows = plan_rows({"b": [0, 1, 2], "a": [0, 1, 2]}, num_samples=6, prompts_per_step=2, seed=0)
    assert rows == plan_rows({"a": [0, 1, 2], "b": [0, 1, 2]}, num_samples=6, prompts_per_step=2, seed=0)
    assert sampling.derive_seed(0, "tasks", "a") == int.from_bytes(
        __import__("hashlib").sha256(b"0\x1ftasks\x1fa").digest()[:8], "big"
    )


def test_iid_mode_follows_probabilities() -> None:
    rows = plan_rows({"a": [0], "b": [0]}, weights={"a": 0.8, "b": 0.2}, num_samples=5000, seed=3)
    share = sum(r.member == "a" for r in rows) / len(rows)
    assert abs(share - 0.8) < 0.03


def test_round_robin_cycles_exactly() -> None:
    tasks = {"c": [0, 1], "a": [0], "b": [0, 1, 2]}
    rows = plan_rows(tasks, strategy="round_robin", num_samples=9)
    assert [r.member for r in rows] == ["a", "b", "c"] * 3
    stepped = plan_rows(tasks, strategy="round_robin", prompts_per_step=2, num_steps=3)
    assert [r.member for r in stepped] == ["a", "b", "c", "a", "b", "c"]
    assert [r.step for r in stepped] == [0, 0, 1, 1, 2, 2]


def test_within_step_positions_are_shuffled_but_composition_exact() -> None:
    tasks = {"a": list(range(10)), "b": list(range(10))}
    rows = plan_rows(tasks, prompts_per_step=10, num_steps=20, seed=1)
    comp = composition(rows, 10)
    assert all(c == {"a": 5, "b": 5} for c in comp)
    firsts = {tuple(r.member for r in rows[s * 10 : s * 10 + 10]) for s in range(20)}
    assert len(firsts) > 1  # not always the same layout (e.g. all a's first)


@settings(DETERMINISTIC)
@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=30, unique=True), st.integers(0, 10**6))
def test_tasks_without_replacement_per_cycle(task_ids: list[int], seed: int) -> None:
    c = TaskCycler(task_ids, seed=seed, member="m")
    n = len(task_ids)
    first, second = c.take(n), c.take(n)
    assert sorted(first) == sorted(task_ids)
    assert sorted(second) == sorted(task_ids)


def test_plan_rows_draw_tasks_without_replacement() -> None:
    tasks = {"a": list(range(7)), "b": list(range(100, 113))}
    rows = plan_rows(tasks, weights={"a": 1, "b": 1}, prompts_per_step=4, num_steps=10, seed=5)
    a = [r.task_index for r in rows if r.member == "a"]
    assert sorted(a[:7]) == list(range(7)) and sorted(a[7:14]) == list(range(7))
    assert (
        a[:7] != a[7:14] or len(set(tuple(a[i : i + 7]) for i in (0, 7))) == 1
    )  # re-permuted (may coincide)


@settings(DETERMINISTIC, max_examples=20)
@given(st.integers(0, 10**6))
def test_member_task_order_independent_of_other_members(seed: int) -> None:
    ta = list(range(20))
    one = plan_rows({"a": ta, "b": [0, 1]}, strategy="round_robin", num_samples=40, seed=seed)
    two = plan_rows({"a": ta, "z": [5, 6, 7], "b": [9]}, strategy="round_robin", num_samples=60, seed=seed)
    seq1 = [r.task_index for r in one if r.member == "a"]
    seq2 = [r.task_index for r in two if r.member == "a"]
    assert seq1 == seq2[: len(seq1)]


def test_plan_errors() -> None:
    with pytest.raises(SamplingError, match="no members"):
        plan_rows({})
    with pytest.raises(SamplingError, match=r"'b'.*0 tasks"):
        plan_rows({"a": [1], "b": []}, strategy="round_robin")
    with pytest.raises(SamplingError, match="unknown sampling strategy"):
        plan_rows({"a": [1]}, strategy="random")
    with pytest.raises(SamplingError, match="num_samples"):
        plan_rows({"a": [1]}, num_samples=0)


# ---------------------------------------------------------------------------------------------- inspection


def test_composition_and_starvation() -> None:
    rows = [PlanRow("a", 0, None, 0), PlanRow("a", 1, None, 1), PlanRow("b", 0, None, 2)]
    assert composition(rows, 2, members=["a", "b", "c"]) == [
        {"a": 2, "b": 0, "c": 0},
        {"a": 0, "b": 1, "c": 0},
    ]
    iid = starvation_probability({"a": 0.9, "b": 0.1}, 4)
    assert iid["b"] == pytest.approx(0.9**4) and iid["a"] == pytest.approx(0.1**4)
    exact = starvation_probability({"a": 0.9, "b": 0.1}, 4, mode="quotas")
    assert exact == pytest.approx({"a": 0.0, "b": 0.6})
    # The reported exact-quota starvation matches the plan.
    plan = plan_rows({"a": [0], "b": [0]}, weights={"a": 0.9, "b": 0.1}, prompts_per_step=4, num_steps=50)
    empty = sum(step["b"] == 0 for step in composition(plan, 4, members=["a", "b"])) / 50
    assert empty == pytest.approx(exact["b"])
