"""`ormix.evaluation._summary`: eval records → per-member metrics with intervals, as plan.md defines them."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ormix.evaluation._stats import mean_interval, pass_at_k
from ormix.evaluation._summary import (
    metric_names,
    summarize,
    summary_markdown,
    summary_table,
    task_metric,
    task_samples,
)


def record(member, task, outcome="scored", reward=1.0, kind=None, split="test"):
    return {
        "v": 1,
        "mode": "eval",
        "member": member,
        "split": split,
        "task_index": task,
        "outcome": outcome,
        "error_kind": kind if outcome == "error" else None,
        "env_reward": reward if outcome == "scored" else None,
    }


def test_errors_are_left_out_unscored_samples_are_failures_and_short_tasks_are_counted():
    records = [
        # task 0: 2 successes, 1 failure (reward 0), 1 infrastructure error -> n=3, c=2
        record("seta", 0),
        record("seta", 0),
        record("seta", 0, reward=0.0),
        record("seta", 0, "error", kind="sandbox"),
        # task 1: 1 unscored (a failure), 3 successes -> n=4, c=3
        record("seta", 1, "unscored"),
        *[record("seta", 1) for _ in range(3)],
        # task 2: 3 errors, 1 success -> n=1 < 4: no pass@4, counted short
        *[record("seta", 2, "error", kind="timeout") for _ in range(3)],
        record("seta", 2, reward=0.5),
    ]
    s = summarize(records, ks=(1, 3, 4))
    m = s["members"]["seta"]
    assert (m["tasks"], m["samples"], m["tasks_short"]) == (3, 12, 2)
    assert m["pass@1"]["value"] == pytest.approx((2 / 3 + 3 / 4 + 0.0) / 3)
    assert m["pass@1"]["n"] == 3
    assert m["pass@3"]["n"] == 2 and m["pass@3"]["value"] == pytest.approx((1.0 + 1.0) / 2)
    assert m["pass^3"]["value"] == pytest.approx((0.0 + 1 / 4) / 2)
    assert m["pass@4"]["n"] == 1 and m["pass@4"]["value"] == 1.0  # task 1 only
    # mean reward over scored samples only: task 0 = 2/3, task 1 = 1.0 (its unscored sample has none), 0.5
    assert m["mean_reward"]["value"] == pytest.approx((2 / 3 + 1.0 + 0.5) / 3)
    assert m["coverage"]["value"] == pytest.approx((3 / 4 + 3 / 4 + 1 / 4) / 3)
    assert m["error_rate"]["value"] == pytest.approx((1 / 4 + 0 + 3 / 4) / 3)
    assert m["error_mix"] == {"sandbox": 1, "timeout": 3}
    # Each metric carries the interval over the tasks that have a value.
    assert m["pass@1"]["low"] == pytest.approx(mean_interval([2 / 3, 3 / 4, 0.0]).low)
    json.dumps(s, allow_nan=False)  # JSON-ready


def test_the_success_threshold_decides_what_a_success_is():
    records = [record("a", 0, reward=0.5), record("a", 1, reward=1.0)]
    assert summarize(records)["members"]["a"]["pass@1"]["value"] == 0.5
    lenient = summarize(records, success_threshold=0.5)
    assert lenient["members"]["a"]["pass@1"]["value"] == 1.0 and lenient["success_threshold"] == 0.5


def test_the_schema_is_the_plans():
    s = summarize([record("b", 1), record("a", 0)], ks=(4, 1), confidence=0.9)
    assert s["k"] == [1, 4] and s["confidence"] == 0.9 and isinstance(s["interval"], str)
    assert list(s["members"]) == ["a", "b"]
    entry = s["members"]["a"]
    assert set(entry) == {"tasks", "samples", "tasks_short", "error_mix", *metric_names([1, 4])}
    for name in metric_names([1, 4]):
        assert set(entry[name]) == {"value", "low", "high", "n"}
    assert entry["pass@4"] == {"value": None, "low": None, "high": None, "n": 0}


def test_tasks_are_keyed_by_member_split_and_index_and_a_missing_split_is_none():
    records = [record("a", 0, split="test"), record("a", 0, split="train"), record("a", 0, split=None)]
    del records[2]["split"]
    tasks = task_samples(records)["a"]
    assert [t.key for t in tasks] == [("a", None, 0), ("a", "test", 0), ("a", "train", 0)]
    assert summarize(records)["members"]["a"]["tasks"] == 3


@given(
    st.lists(
        st.tuples(
            st.integers(0, 5),
            st.sampled_from(["scored", "unscored", "error"]),
            st.sampled_from([0.0, 0.5, 1.0]),
        ),
        min_size=1,
        max_size=60,
    ),
    st.sampled_from([(1,), (1, 2), (2, 4)]),
)
def test_summaries_of_any_records_are_bounded_and_consistent(samples, ks):
    records = [record("m", t, outcome, reward) for t, outcome, reward in samples]
    m = summarize(records, ks=ks)["members"]["m"]
    assert m["samples"] == len(samples)
    for k in ks:
        at, hat = m[f"pass@{k}"], m[f"pass^{k}"]
        assert at["n"] == hat["n"] <= m["tasks"]
        if at["value"] is not None:
            assert 0.0 <= hat["value"] <= at["value"] <= 1.0
            assert at["low"] <= at["value"] <= at["high"]
    assert m["coverage"]["n"] == m["error_rate"]["n"] == m["tasks"]
    assert m["coverage"]["value"] + m["error_rate"]["value"] <= 1.0 + 1e-12
    assert sum(m["error_mix"].values()) == sum(1 for _, o, _ in samples if o == "error")
    # A task has pass@k when at least k of its samples are not errors.
    valid = {}
    for t, outcome, _ in samples:
        valid[t] = valid.get(t, 0) + (outcome != "error")
    for k in ks:
        assert m[f"pass@{k}"]["n"] == sum(1 for n in valid.values() if n >= k)
    assert m["tasks_short"] == sum(1 for n in valid.values() if n < max(ks))


def test_task_metric_matches_the_estimator_per_task():
    records = [record("a", 0, reward=r) for r in (1.0, 0.0, 1.0, 0.0, 0.0)]
    (task,) = task_samples(records)["a"]
    assert task_metric(task, "pass@2") == pass_at_k(5, 2, 2)
    with pytest.raises(ValueError, match="unknown metric"):
        task_metric(task, "accuracy")


def test_table_and_markdown_show_each_metric_with_its_interval():
    records = [record("a", t, reward=float(t % 2)) for t in range(8) for _ in range(2)]
    records += [record("a", 9, "error", kind="timeout")]
    s = summarize(records, ks=(1, 2))
    rows = summary_table(s)
    assert rows[0][:4] == ["member", "tasks", "pass@1", "pass@2"]  # no pass^1: it is pass@1
    iv = s["members"]["a"]["pass@1"]
    assert rows[1][0] == "a" and rows[1][1] == "9 (1 short)"
    assert rows[1][2] == f"{iv['value']:.2f} [{iv['low']:.2f}, {iv['high']:.2f}]"
    md = summary_markdown(s, "Eval of tiny")
    assert md.startswith("# Eval of tiny\n") and "| a | 9 (1 short) |" in md
    assert "timeout 1" in md and "95% intervals" in md
