"""The pure logic of sessions opened ahead (`ormix.rollout._lookahead`) and of stragglers cut by rule
(`ormix.rollout._stragglers`), property-tested."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ormix.config import MixtureConfig, MixtureConfigError, StragglerConfig
from ormix.rollout._lookahead import choose_ahead, generation_batches, locate
from ormix.rollout._stragglers import cut_at, tail_wait

members = st.lists(st.lists(st.sampled_from(["a", "b", None]), max_size=8), max_size=4)
caps = st.dictionaries(st.sampled_from(["a", "b"]), st.one_of(st.none(), st.integers(0, 5)))


@given(members, caps, st.integers(0, 20))
def test_choose_ahead_stays_within_every_bound_and_takes_the_nearest_rows_first(steps, member_caps, budget):
    chosen = choose_ahead(steps, member_caps=member_caps, max_in_flight=budget)
    assert len(chosen) == len(steps)
    picked = [(s, i) for s, positions in enumerate(chosen) for i in positions]
    assert len(picked) <= budget
    for member, cap in member_caps.items():
        if cap is not None:
            assert sum(steps[s][i] == member for s, i in picked) <= cap
    assert all(steps[s][i] is not None for s, i in picked)  # only ormix's rows
    # Greedy in order: a row left out had no room (its member at its cap, or the budget spent).
    for s, row in enumerate(steps):
        for i, member in enumerate(row):
            if member is None or i in chosen[s]:
                continue
            before = [(t, j) for t, j in picked if (t, j) < (s, i)]
            cap = member_caps.get(member)
            full = cap is not None and sum(steps[t][j] == member for t, j in before) >= cap
            assert full or len(before) >= budget


@given(members)
def test_without_bounds_every_row_of_ours_is_opened_ahead(steps):
    chosen = choose_ahead(steps, max_in_flight=10**6)
    assert chosen == [[i for i, m in enumerate(row) if m is not None] for row in steps]


@given(st.lists(st.integers(0, 5), max_size=40), st.integers(1, 6), st.integers(1, 3))
def test_generation_batches_are_the_dataloaders_batches_generated_for(indices, size, repeat):
    batches = generation_batches(indices, size, repeat)
    chunks = [indices[i : i + size] for i in range(0, len(indices), size)]
    assert batches == chunks[::repeat]


@given(st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=3), max_size=6), st.integers(0, 8))
def test_locate_finds_a_batch_that_is_there_and_nothing_else(schedule, start):
    for i, batch in enumerate(schedule):
        found = locate(schedule, batch, start)
        assert found is not None and schedule[found] == batch
        if i >= start:
            assert found <= i  # from the expected place on, the first match
    assert locate(schedule, [99]) is None


@given(
    st.lists(st.floats(0.001, 100), max_size=40),
    st.integers(1, 40),
    st.one_of(st.none(), st.floats(0.1, 50)),
    st.one_of(st.none(), st.floats(1.1, 20)),
    st.floats(0.05, 1.0),
)
def test_cut_at_follows_its_rule(done, total, deadline, multiple, fraction):
    done = done[: total - 1] if total > 1 else []
    rules = deadline is not None or multiple is not None
    policy = (
        StragglerConfig(deadline_s=deadline, median_multiple=multiple, after_fraction=fraction)
        if rules
        else None
    )
    at = cut_at(policy, done, total)
    candidates = []
    if deadline is not None:
        candidates.append(deadline)
    if multiple is not None and done and len(done) >= max(1, -(-fraction * total // 1)):
        candidates.append(multiple * statistics.median(done))
    if not candidates:
        assert at is None
    else:
        assert at is not None and abs(at - min(candidates)) < 1e-9
    assert cut_at(policy, [1.0] * total, total) is None  # all back: nothing to cut
    assert cut_at(None, done, total) is None  # no rule: never


@given(st.lists(st.floats(0, 100), max_size=50))
def test_tail_wait_is_the_wait_for_the_last_calls(latencies):
    wait = tail_wait(latencies)
    assert wait >= 0
    if len(latencies) >= 2:
        ordered = sorted(latencies)
        assert wait <= ordered[-1] - ordered[0] + 1e-9
        assert wait >= ordered[-1] - ordered[-2] - 1e-9  # at least the last call's lead


def test_the_straggler_rule_and_lookahead_in_a_mixture_file():
    cfg = MixtureConfig.from_dict(
        {
            "members": {"a": {"target": "local:echo", "stragglers": {"median_multiple": 8}}},
            "lookahead": 2,
        }
    )
    assert cfg.lookahead == 2 and cfg.members["a"].stragglers.after_fraction == 0.9
    plain = MixtureConfig.from_dict({"members": {"a": {"target": "local:echo"}}})
    # Lookahead says when sessions open, not what is trained: the hash is the same; no rule: no key at all.
    again = MixtureConfig.from_dict({"members": {"a": {"target": "local:echo"}}, "lookahead": 3})
    assert plain.config_hash() == again.config_hash()
    assert "stragglers" not in plain.manifest_dict()["members"]["a"]
    with pytest.raises(MixtureConfigError, match="deadline_s and/or median_multiple"):
        MixtureConfig.from_dict({"members": {"a": {"target": "local:echo", "stragglers": {}}}})


def test_the_progress_line_says_when_the_lookahead_bounds_the_wait_and_what_was_cut():
    from types import SimpleNamespace

    from ormix.trl._lifecycle import ProgressLine

    line = ProgressLine(["a"], None, ".")
    state = SimpleNamespace(global_step=2, max_steps=4)
    logs = {"ormix/env/opened_ahead": 8.0, "ormix/env/ahead_wait_s": 1.2, "ormix/a/straggler_rate": 0.0625}
    text = " | ".join(line.parts(state, logs))
    assert "8 opened ahead, waited 1.2s: opens slower than a step, lookahead bounds the wait" in text
    assert "cut 6%" in text
    hidden = " | ".join(line.parts(state, {"ormix/env/opened_ahead": 8.0, "ormix/env/ahead_wait_s": 0.01}))
    assert "8 opened ahead" in hidden and "bounds the wait" not in hidden
