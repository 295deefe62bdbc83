"""Per-environment telemetry: metrics in TRL's logs, rollout records, coverage alarm.

The end-to-end test trains GRPO (tiny model, scripted policy) on a mixture of `local:faulty` (sessions that
fail to open or to set up, a submit tool that raises) and `local:echo`, and checks the trainer's log against
the rollout records written next to it. The rest are pure tests of the aggregation.
"""

from __future__ import annotations

import logging
import math
import re
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ormix.config import MixtureConfig, MixtureConfigError, TelemetryConfig
from ormix.ors._errors import redact_text as redact
from ormix.telemetry._alarm import (
    AlarmTracker,
    CoverageAlarmWarning,
    LearningTracker,
    unchanged_weights_alarm,
)
from ormix.telemetry._metrics import (
    METRICS,
    batch_metrics,
    dominant_cause,
    group_ids,
    member_values,
    metric_key,
    pooled_informative,
    summarize,
)
from ormix.telemetry._records import read_records, rollout_record
from support.trl_args import cpu_grpo_config, scripted_trainer

SECRET = "tok-SECRET-7f3a9c2e1d"
API_KEY = "sk-ormix-APIKEY-5b8d0e4f"


# ── end to end ──────────────────────────────────────────────────────────────────────────────────────────────


def _script(ctx):
    """Echo: sample 0 submits the word (1.0), sample 1 a wrong one (0.0). Faulty: the same with its answer;
    where the session could not start, the call still goes out (and is recorded as a session_open error)."""
    from ormix.workbench._scripted import tool_call

    if ctx.turn > 0:
        return "done"
    word = re.search(r"word '(\w+)'", ctx.user)
    if word:
        return tool_call("submit", text=word.group(1) if ctx.sample == 0 else "nope")
    answer = re.search(r"answer '(\d+)'", ctx.user)
    if answer:
        return tool_call("submit", answer=answer.group(1) if ctx.sample == 0 else "0")
    assert "could not start" in ctx.user, ctx.user
    return tool_call("submit", answer="42")


@pytest.mark.slow
def test_faulty_mixture_logs_match_records_and_alarm_fires_for_faulty_only(
    tiny_model, tmp_path, caplog, monkeypatch
):

    from ormix import MixtureSpec, OpenRewardSpec
    from ormix.trl._callbacks import TelemetryCallback

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    # Faulty tasks: 0 plain, 3 submit raises (unscored), 2/5/8 fail at open, 9 fails in setup().
    faulty = OpenRewardSpec(
        "local:faulty",
        indices=[0, 2, 3, 5, 8, 9],
        local_serve="thread",
        secrets={"token": SECRET},
        api_key=API_KEY,
    )
    echo = OpenRewardSpec("local:echo", num_tasks=4, local_serve="thread")
    mix = MixtureSpec(
        {"faulty": faulty, "echo": echo},
        weights={"faulty": 2, "echo": 1},
        prompts_per_step=3,
        num_samples=9,
        seed=3,
        telemetry={"min_coverage": 0.6, "max_error_rate": None, "consecutive_steps": 2, "stop": True},
    )
    out = tmp_path / "run"
    args = cpu_grpo_config(
        str(out),
        per_device_train_batch_size=6,
        max_steps=3,
        max_completion_length=256,
        max_tool_calling_iterations=2,
    )
    trainer = scripted_trainer(mix, tiny_model, args, _script)
    caplog.set_level(logging.INFO)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train()

    # The alarm: the faulty member's coverage stays below 0.6 (only task 0 scores); echo's is 1.0.
    # It fires at step 2 (k = 2) for faulty only, and stop: true ends training there instead of at step 3.
    alarm_warnings = [str(w.message) for w in caught if issubclass(w.category, CoverageAlarmWarning)]
    assert len(alarm_warnings) == 1 and "'faulty'" in alarm_warnings[0] and "'echo'" not in alarm_warnings[0]
    assert "Stopping training" in alarm_warnings[0]
    callback = next(c for c in mix.callbacks if isinstance(c, TelemetryCallback))
    assert [(a.member, a.step) for a in callback.alarms] == [("faulty", 2)]
    assert callback.alarms[0].cause is not None and callback.alarms[0].cause[0] in (
        "session_open",
        "unscored",
    )
    assert trainer.state.global_step == 2
    assert any("'faulty' is failing" in r.getMessage() for r in caplog.records if r.name.startswith("ormix"))
    # Said once on a console: the warning; the log line stays below WARNING (no second copy on stderr).
    assert not [r for r in caplog.records if "is failing" in r.getMessage() and r.levelno >= logging.WARNING]
    assert (out / "alarms.jsonl").read_text().count("faulty") >= 1

    records = read_records(out)
    assert len(records) == 2 * 6 and {r["step"] for r in records} == {1, 2}
    errors = [r for r in records if r["outcome"] == "error"]
    assert errors and all(r["reward"] is None and r["env_reward"] is None for r in errors)
    assert {r["error_kind"] for r in errors} == {"session_open"}
    assert all(r["calls"][0]["error"] == "session_open" for r in errors)  # the call was still recorded
    behaviour = {0: "plain", 2: "open", 3: "raise", 5: "open", 8: "open", 9: "open"}
    for r in records:
        if r["member"] == "faulty":
            expected = {"plain": "scored", "open": "error", "raise": "unscored"}[behaviour[r["task_index"]]]
            assert r["outcome"] == expected, r
        else:
            assert r["outcome"] == "scored" and r["reward"] in (0.0, 1.0)

    logs = {h["step"]: h for h in trainer.state.log_history if "ormix/faulty/share" in h}
    assert sorted(logs) == [1, 2]
    for step, log in logs.items():
        batch = [r for r in records if r["step"] == step]
        expected = batch_metrics(batch, ["faulty", "echo"])
        logged = {k: v for k, v in log.items() if k.startswith("ormix/") and v is not None}
        assert set(logged) == set(expected), step
        for key, value in expected.items():
            assert logged[key] == pytest.approx(value, rel=1e-5, abs=1e-6), (step, key)
        # TRL's own per-member reward: the mean over rollouts whose reward is not None (errors are not 0s).
        for member in ("faulty", "echo"):
            rewards = [r["reward"] for r in batch if r["member"] == member and r["reward"] is not None]
            logged_reward = log.get(f"rewards/{member}/mean")
            if rewards:
                assert logged_reward == pytest.approx(sum(rewards) / len(rewards))
            else:
                assert logged_reward is None or math.isnan(logged_reward)
        assert log["ormix/faulty/share"] == pytest.approx(4 / 6)
        assert log["ormix/echo/coverage"] == 1.0 and log["ormix/echo/informative_groups"] == 1.0

    # No secret or API key anywhere: records, alarms, logs, warnings.
    written = "".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())
    said = caplog.text + "".join(str(w.message) for w in caught)
    for secret in (SECRET, API_KEY):
        assert secret not in written and secret not in said


@pytest.mark.slow
def test_a_run_that_learns_nothing_says_so_through_the_python_api_and_the_alarm_survives_a_resume(
    tiny_model, tmp_path, monkeypatch
):
    """A policy that never calls a tool: no rollout is scored (coverage 0), so every group is uninformative,
    grad_norm is 0 and the weights never move. Built as a Python user builds it (TRL's trainer with
    ``callbacks=mix.callbacks``, no ormix console), with ``no_learning_steps: 2``: step 1, then a resume to
    step 2, where the streaks (and the start's fingerprint) restored from checkpoint-1 fire."""
    import json

    from transformers import AutoModelForCausalLM

    from ormix import MixtureSpec, OpenRewardSpec
    from ormix.app._report import write_report
    from ormix.telemetry._alarm import NoLearningWarning, UnscoredRolloutsWarning
    from ormix.trl._callbacks import STATE_FILE, TelemetryCallback

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    mix = MixtureSpec(
        {"echo": OpenRewardSpec("local:echo", num_tasks=2, local_serve="thread")},
        prompts_per_step=2,
        num_samples=8,
        telemetry={"no_learning_steps": 2},
    )
    out = tmp_path / "run"

    def train(max_steps: int, resume: str | None = None) -> list[warnings.WarningMessage]:
        args = cpu_grpo_config(
            str(out),
            max_steps=max_steps,
            max_completion_length=24,
            max_tool_calling_iterations=1,
            save_strategy="steps",
            save_steps=1,
        )
        model = AutoModelForCausalLM.from_pretrained(tiny_model)
        trainer = scripted_trainer(mix, model, args, lambda ctx: "I will not call a tool.")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            trainer.train(resume_from_checkpoint=resume)
        return list(caught)

    first = train(1)
    said = {w.category: str(w.message) for w in first}
    # TRL's "All reward functions returned None" dumps are left out, and said in ormix's words instead.
    assert (
        "ended without a reward" in said[UnscoredRolloutsWarning]
        and "coverage" in said[UnscoredRolloutsWarning]
    )
    # One step of no_learning_steps=2: no streak alarm yet; the unchanged weights are said at the end.
    kept = json.loads((out / "checkpoint-1" / STATE_FILE).read_text())
    assert kept["learning"]["streak"] == {"echo": 1, "grad_norm": 1} and kept["learning"]["start"]
    callback = next(c for c in mix.callbacks if isinstance(c, TelemetryCallback))
    assert [a.kind for a in callback.no_learning] == ["unchanged_weights"]

    second = train(2, resume=str(out / "checkpoint-1"))
    alarms = [str(w.message) for w in second if issubclass(w.category, NoLearningWarning)]
    resumed = callback.no_learning[1:]  # the callbacks keep every trainer's alarms, as `alarms` does
    assert [a.kind for a in resumed] == ["uninformative", "zero_grad", "unchanged_weights"]
    assert [a.step for a in resumed] == [2, 2, 2]
    assert "nothing to learn from 'echo'" in alarms[0] and "coverage 0" in alarms[0], alarms
    assert "grad_norm 0 for 2 consecutive logging step(s)" in alarms[1]
    assert "trained weights equal the weights training started from" in alarms[2]
    # In the run directory's alarms, and so in the report.
    written = [json.loads(line) for line in (out / "alarms.jsonl").read_text().splitlines()]
    assert [a["kind"] for a in written] == [
        "unchanged_weights",
        "uninformative",
        "zero_grad",
        "unchanged_weights",
    ]
    with (out / "log_history.jsonl").open("w") as fh:  # what `ormix train` writes (ProgressLine)
        fh.write(json.dumps({"step": 1, "loss": 0.0}) + "\n")
    write_report(out)
    assert "nothing to learn from 'echo'" in (out / "report" / "report.md").read_text()


def test_the_no_learning_alarm_counts_streaks_and_fires_once_per_streak():
    t = LearningTracker(TelemetryConfig(no_learning_steps=2), ["a", "b"])
    bad = {
        "ormix/a/informative_groups": 0.0,
        "ormix/a/coverage": 1.0,
        "ormix/a/reward": 1.0,
        "grad_norm": 0.1,
    }
    assert t.update(1, bad) == []
    assert (
        t.update(2, {"ormix/b/informative_groups": 1.0}) == []
    )  # a absent: its streak neither grows nor ends
    (fired,) = t.update(3, bad)
    assert (fired.member, fired.kind, fired.step) == ("a", "uninformative", 3)
    assert "same reward within each group (mean reward 1.00)" in fired.message
    assert t.update(4, bad) == []  # said once per streak
    assert t.update(5, {**bad, "ormix/a/informative_groups": 0.5}) == [] and t.streak["a"] == 0
    assert [a.kind for a in t.update(6, {"grad_norm": 0.0, "loss": 0.0})] == []
    assert [a.kind for a in t.update(7, {"grad_norm": 0.0, "loss": 0.0})] == ["zero_grad"]
    off = LearningTracker(TelemetryConfig(no_learning_steps=None), ["a"])
    assert off.update(1, bad) == [] and off.update(2, bad) == []


step_logs_st = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "ormix/a/informative_groups": st.sampled_from([0.0, 0.5]),
            "ormix/b/informative_groups": st.sampled_from([0.0, 1.0]),
            "grad_norm": st.sampled_from([0.0, 0.3]),
        },
    ),
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(step_logs_st, st.integers(0, 12), st.integers(1, 4))
def test_the_no_learning_alarm_fires_the_same_when_a_run_is_resumed_anywhere(logs, cut, steps):
    """The state saved with a checkpoint (as JSON) and restored into a fresh tracker continues every streak:
    split anywhere, the alarms are those of the uninterrupted run."""
    import json

    config = TelemetryConfig(no_learning_steps=steps)
    whole = LearningTracker(config, ["a", "b"])
    expected = [(a.step, a.member, a.kind) for i, log in enumerate(logs) for a in whole.update(i + 1, log)]
    before = LearningTracker(config, ["a", "b"])
    got = [(a.step, a.member, a.kind) for i, log in enumerate(logs[:cut]) for a in before.update(i + 1, log)]
    after = LearningTracker(config, ["a", "b"])
    after.load_state(json.loads(json.dumps(before.state())))
    got += [
        (a.step, a.member, a.kind)
        for i, log in enumerate(logs[cut:], start=cut)
        for a in after.update(i + 1, log)
    ]
    assert got == expected


def test_unchanged_weights_are_told_from_changed_ones_by_their_fingerprint():
    import torch

    from ormix.trl._callbacks import weight_fingerprint

    layer = torch.nn.Linear(3, 2)
    start = weight_fingerprint(layer)
    assert unchanged_weights_alarm(start, weight_fingerprint(layer), 3) is not None
    with torch.no_grad():
        layer.weight[0, 0] += 1e-6  # the smallest update an optimizer makes still shows
    assert unchanged_weights_alarm(start, weight_fingerprint(layer), 3) is None
    assert unchanged_weights_alarm(None, weight_fingerprint(layer), 3) is None  # nothing to compare with


# ── pure aggregation ────────────────────────────────────────────────────────────────────────────────────────


def rec(
    member="a", outcome="scored", reward=1.0, group=0, calls=(), finished=False, open_ms=5.0, env_reward=None
):
    return {
        "member": member,
        "outcome": outcome,
        "reward": reward,
        "group": group,
        "finished": finished,
        "open_ms": open_ms,
        "env_reward": reward if env_reward is None and outcome == "scored" else env_reward,
        "calls": [{"tool": t, "latency_ms": ms, "error": e} for t, ms, e in calls],
    }


def test_member_values_counts_each_kind_of_rollout():
    batch = [
        rec(reward=1.0, group=0, calls=[("submit", 10.0, None)], finished=True),
        rec(reward=0.0, group=0, calls=[("b__x", 0.0, "wrong_env"), ("submit", 30.0, None)]),
        rec(outcome="unscored", reward=None, group=2, calls=[("submit", 20.0, "tool_failed")]),
        rec(outcome="error", reward=None, group=2, calls=[("submit", 0.0, "session_open")], open_ms=None),
        rec(member="b", outcome="scored", reward=1.0, group=4),
    ]
    v = summarize(member_values(batch, "a", batch_size=6))
    assert v["share"] == pytest.approx(4 / 6)
    assert v["coverage"] == 0.5 and v["unscored_rate"] == 0.25 and v["error_rate"] == 0.25
    assert v["reward"] == 0.5 and v["finished_rate"] == 0.25
    assert v["tool_calls"] == 5 / 4 and v["tool_errors"] == 3 / 4 and v["wrong_env_calls"] == 1 / 4
    assert v["tool_ms"] == pytest.approx(20.0)  # wrong-env and never-sent calls carry no latency
    assert v["session_open_ms"] == 5.0
    assert v["informative_groups"] == 0.5  # group 0 has {1, 0}; group 2 has no reward at all


def test_absent_member_logs_only_a_zero_share_and_scaled_rewards_keep_raw_env_reward():
    assert member_values([rec(member="b")], "a", batch_size=3) == {"share": [0.0, 0.0, 0.0]}
    scaled = rec(reward=2.0, env_reward=1.0)
    assert member_values([scaled], "a", 1)["reward"] == [1.0]


record_st = st.builds(
    rec,
    member=st.sampled_from(["a", "b"]),
    outcome=st.sampled_from(["scored", "unscored", "error"]),
    reward=st.one_of(st.none(), st.sampled_from([0.0, 0.5, 1.0])),
    group=st.integers(0, 3),
    calls=st.lists(
        st.tuples(
            st.sampled_from(["x", "y"]),
            st.floats(0, 100),
            st.sampled_from([None, "wrong_env", "tool_failed"]),
        ),
        max_size=3,
    ),
    finished=st.booleans(),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(record_st, min_size=1, max_size=12), st.integers(1, 3))
def test_pooling_over_ranks_equals_the_whole_batch(batch, ranks):
    """TRL pools log_metric as sum / count over processes: splitting a batch anywhere gives the same means."""
    whole = member_values(batch, "a", len(batch))
    cut = sorted({len(batch) * k // ranks for k in range(ranks + 1)})
    pooled: dict[str, list[float]] = {}
    for lo, hi in zip(cut, cut[1:], strict=False):
        for metric, values in member_values(batch[lo:hi], "a", hi - lo).items():
            pooled.setdefault(metric, []).extend(values)
    for metric in set(whole) - {"informative_groups"}:  # groups cut in two are counted on both sides
        assert sum(pooled[metric]) == pytest.approx(sum(whole[metric]))
        assert len(pooled[metric]) == len(whole[metric])
    # ... so the telemetry callback judges each group on every process's rewards of it instead.
    parts = [
        [("a", 1, r["group"], r["reward"]) for r in batch[lo:hi] if r["member"] == "a"]
        for lo, hi in zip(cut, cut[1:], strict=False)
    ]
    assert pooled_informative(parts, "a") == summarize(whole).get("informative_groups")
    share = summarize(whole).get("share")
    mine = sum(r["member"] == "a" for r in batch)
    assert share == pytest.approx(mine / len(batch))
    cov = summarize(whole).get("coverage")
    if mine:
        assert 0.0 <= cov <= 1.0
        total = summarize(whole)
        assert total["coverage"] + total["unscored_rate"] + total["error_rate"] == pytest.approx(1.0)
    assert set(whole) <= set(METRICS)


def test_a_group_split_over_processes_is_judged_on_all_its_rewards_as_on_one_process():
    """`ormix train`'s default geometry on 2 processes (G=8, one prompt a step: 4 rollouts each): half the
    group solves the task, on rank 0. Each rank alone sees equal rewards; the group teaches all the same."""
    from ormix.trl._callbacks import _GroupsRun

    rewards = [1.0] * 4 + [0.0] * 4
    runs, per_rank = [], []
    for rank in (0, 1):
        run = _GroupsRun(None, rank=rank, num_generations=8)
        ids = group_ids(4, rank=rank, num_generations=8)
        records = [
            {**rec(reward=r, group=g), "mode": "train", "step": 1}
            for r, g in zip(rewards[4 * rank : 4 * rank + 4], ids, strict=True)
        ]
        run.note("a", records)
        runs.append(run)
        per_rank += member_values(records, "a", 4)["informative_groups"]
    assert per_rank == [0.0, 0.0]  # what TRL pools: one group counted twice, uninformative each time
    parts = [run.take_groups() for run in runs]
    assert pooled_informative(parts, "a") == 1.0
    # A window of two steps: TRL's mean of its per-step figures, each group judged whole.
    second = [[("a", 2, 0, 1.0)] * 4, [("a", 2, 0, 1.0)] * 4]
    both = [a + b for a, b in zip(parts, second, strict=True)]
    assert pooled_informative(both, "a") == 0.5 and pooled_informative(both, "b") is None


def test_a_member_on_several_servers_counts_group_scored_rollouts_as_covered_per_server():
    scored = {"outcome": "unscored", "group_status": "scored", "group_reward": 0.7}
    batch = [
        {**rec(outcome="unscored", reward=0.7, group=0), **scored, "server": "http://h1:8000"},
        {**rec(outcome="unscored", reward=0.2, group=0), **scored, "server": "http://h2:8000"},
        rec(outcome="error", reward=None, group=2) | {"server": "http://h2:8000"},
    ]
    v = summarize(member_values(batch, "a", 3))
    assert v["coverage"] == pytest.approx(2 / 3)
    assert v["server/h1:8000/coverage"] == 1.0 and v["server/h2:8000/coverage"] == 0.5


def test_an_evaluation_entry_leaves_the_training_causes_to_the_coverage_alarm():
    """eval_steps not aligned with logging_steps: an evaluation logged between two training entries does not
    take the failure causes the next training entry's alarm counts."""
    from types import SimpleNamespace

    from ormix.telemetry._records import TelemetryObserver, TelemetryRun
    from ormix.trl._callbacks import TelemetryCallback

    callback = TelemetryCallback({"a": TelemetryObserver("a")}, {"min_coverage": 0.5, "consecutive_steps": 1})
    callback.run = TelemetryRun(None, num_generations=2)
    callback.run.note("a", [{"mode": "train", "outcome": "error", "error_kind": "session_open"}] * 3)
    control = SimpleNamespace(should_training_stop=False)
    evaluation = {"eval_loss": 0.0}
    state = SimpleNamespace(
        global_step=1, log_history=[{**evaluation, "step": 1}], is_world_process_zero=True
    )
    callback.on_log(None, state, control, logs=evaluation)
    training = {"loss": 0.0, metric_key("a", "coverage"): 0.0, metric_key("a", "error_rate"): 1.0}
    state.log_history.append({**training, "step": 1})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CoverageAlarmWarning)
        callback.on_log(None, state, control, logs=training)
    (alarm,) = callback.alarms
    assert alarm.cause == ("session_open", 3, 3) and "(3 of 3" in alarm.message


@given(st.integers(1, 16), st.integers(0, 3), st.integers(1, 4))
def test_group_ids_follow_trl_global_grouping(n, rank, g):
    ids = group_ids(n, rank=rank, num_generations=g)
    for i, gid in enumerate(ids):
        assert gid == ((rank * n + i) // g) * g  # the first global position of the group
    assert group_ids(4, keys=["p", "p", "q", "q"]) == [0, 0, 2, 2]


def test_alarm_needs_k_consecutive_bad_steps_and_ignores_absent_steps():
    t = AlarmTracker(TelemetryConfig(min_coverage=0.5, max_error_rate=0.5, consecutive_steps=2), ["a", "b"])
    key = metric_key
    assert (
        t.update(1, {key("a", "coverage"): 0.2, key("b", "coverage"): 0.9}, {"a": {"session_open": 3}}) == []
    )
    assert t.update(2, {key("b", "coverage"): 0.9}) == []  # a absent: streak kept
    fired = t.update(
        3,
        {key("a", "coverage"): 0.4, key("a", "error_rate"): 0.6, key("b", "coverage"): 0.9},
        {"a": {"session_open": 2, "unscored": 1}},
    )
    assert [(x.member, x.step) for x in fired] == [("a", 3)]
    assert fired[0].cause == ("session_open", 5, 5) and "session_open" in fired[0].message
    assert len(fired[0].reasons) == 2
    assert t.update(4, {key("a", "coverage"): 0.1}) == []  # quiet until it recovers
    assert t.update(5, {key("a", "coverage"): 0.9}) == []
    t.update(6, {key("a", "coverage"): 0.1})
    assert len(t.update(7, {key("a", "coverage"): 0.1})) == 1
    # A bad streak broken by a good step does not fire.
    t2 = AlarmTracker(TelemetryConfig(min_coverage=0.5, consecutive_steps=2), ["a"])
    assert t2.update(1, {key("a", "coverage"): 0.1}) == [] and t2.update(2, {key("a", "coverage"): 0.9}) == []
    assert t2.update(3, {key("a", "coverage"): 0.1}) == []


def test_dominant_cause_prefers_errors_over_unscored():
    assert dominant_cause({}) is None
    assert dominant_cause({"unscored": 9, "transport": 1}) == ("transport", 1, 1)


def test_an_alarm_on_a_tool_that_raises_on_every_call_names_the_failed_calls():
    from ormix.telemetry._records import TelemetryRun

    run = TelemetryRun(None)
    failed = [{"tool": "answer", "error": "tool_failed"}] * 2
    run.note("mine", [{"mode": "train", "outcome": "unscored", "calls": failed} for _ in range(2)])
    t = AlarmTracker(TelemetryConfig(min_coverage=0.5, consecutive_steps=1), ["mine"])
    (alarm,) = t.update(1, {metric_key("mine", "coverage"): 0.0}, run.take_causes())
    assert alarm.cause == ("unscored", 2, 2)  # the failed calls are no rollout error kind
    assert "no infrastructure errors" not in alarm.message
    assert "every one of their tool calls failed (tool_failed 4" in alarm.message
    quiet = TelemetryRun(None)
    quiet.note("mine", [{"mode": "train", "outcome": "unscored", "calls": [{"tool": "a", "error": None}]}])
    t = AlarmTracker(TelemetryConfig(min_coverage=0.5, consecutive_steps=1), ["mine"])
    (alarm,) = t.update(1, {metric_key("mine", "coverage"): 0.0}, quiet.take_causes())
    assert "no infrastructure errors, but 1 rollout(s) came back unscored" in alarm.message


def test_telemetry_config_validates_every_key():
    cfg = TelemetryConfig(
        min_coverage=0.5, max_error_rate=0.25, consecutive_steps=2, stop=True, records=False
    )
    assert (cfg.min_coverage, cfg.max_error_rate, cfg.consecutive_steps, cfg.stop, cfg.records) == (
        0.5,
        0.25,
        2,
        True,
        False,
    )
    members = {"a": {"target": "local:echo"}}
    with pytest.raises(
        MixtureConfigError,
        match="telemetry.max_eror_rate: unknown key 'max_eror_rate'; did you mean 'max_error_rate'",
    ):
        MixtureConfig.from_dict({"members": members, "telemetry": {"max_eror_rate": 0.5}})
    with pytest.raises(MixtureConfigError) as e:
        MixtureConfig.from_dict(
            {"members": members, "telemetry": {"min_coverage": 1.5, "consecutive_steps": 0, "stop": "yes"}}
        )
    assert all(f"telemetry.{k}" in str(e.value) for k in ("min_coverage", "consecutive_steps", "stop"))


def test_mixture_refuses_an_unknown_telemetry_key_before_any_io():
    from ormix import MixtureSpec, OpenRewardSpec
    from ormix._errors import MixtureError

    with pytest.raises(MixtureError, match="min_coverag"):
        MixtureSpec({"a": OpenRewardSpec("http://127.0.0.1:9", env_name="x")}, telemetry={"min_coverag": 0.3})


def test_records_redact_secrets_in_error_text():
    from ormix.rollout._episode import CallRecord

    # A stand-in for an Episode whose server echoed a secret into an error (cannot be forced).
    class FakeEpisode:
        from ormix.rollout._outcome import classify_outcome

        outcome = classify_outcome([], error_kind="transport", error=f"502 from proxy for key {API_KEY}")
        calls = [CallRecord("submit", 12.5, error="transport", detail=f"X-Secrets had {SECRET}")]
        rewards = [None]
        finished = False
        open_ms = 3.0
        task_index = 4

    r = rollout_record(
        FakeEpisode(),
        member="a",
        training_reward=None,
        step=1,
        rank=0,
        mode="train",
        group=0,
        secrets=[SECRET, API_KEY],
    )
    assert API_KEY not in str(r) and SECRET not in str(r) and "[redacted]" in r["error"]
    assert r["reward"] is None and r["outcome"] == "error" and r["calls"][0]["latency_ms"] == 12.5
    assert redact("abc", ["ab"]) == "abc"  # too short to be a secret: left alone


def test_an_evaluations_log_entry_gets_each_members_pass_at_k_from_its_own_records():
    # What a plain GRPOTrainer's evaluate() goes through (ConcurrentGRPOTrainer adds them before logging).
    from types import SimpleNamespace

    from ormix.telemetry._records import TelemetryObserver, TelemetryRun
    from ormix.trl._callbacks import TelemetryCallback

    callback = TelemetryCallback({"a": TelemetryObserver("a"), "b": TelemetryObserver("b")})
    callback.run = TelemetryRun(None, num_generations=2, num_generations_eval=2)
    rollout = {"member": "a", "mode": "eval", "outcome": "scored", "step": 3}
    # 2 tasks × 2 samples, the first of each succeeding; a training rollout is not the evaluation's.
    callback.run.note(
        "a", [{**rollout, "task_index": t, "env_reward": float(s == 0)} for t in (0, 1) for s in (0, 1)]
    )
    callback.run.note("b", [{**rollout, "member": "b", "mode": "train", "task_index": 0, "env_reward": 1.0}])
    logs = {"eval_loss": 0.0, "eval_rewards/a/mean": 0.5}
    state = SimpleNamespace(global_step=3, log_history=[{**logs, "step": 3}], is_world_process_zero=True)
    callback.on_log(None, state, SimpleNamespace(should_training_stop=False), logs=logs)
    assert logs["eval/a/pass@1"] == 0.5 and logs["eval/a/pass@2"] == 1.0 and logs["eval/a/pass^2"] == 0.0
    assert state.log_history[-1]["eval/a/coverage"] == 1.0 and state.log_history[-1]["eval/a/tasks"] == 2
    assert not any(k.startswith("eval/b/") for k in logs)
    # Taken with that entry: the next evaluation starts from its own records only.
    again = {"eval_loss": 0.0}
    callback.on_log(None, state, SimpleNamespace(should_training_stop=False), logs=again)
    assert again == {"eval_loss": 0.0}


@pytest.mark.parametrize("shuffle", [True, False])
def test_the_missing_callbacks_error_blames_shuffling_only_when_the_trainer_shuffles(shuffle):
    from types import SimpleNamespace

    from ormix._errors import UsageError
    from ormix.rollout._rewards import ScoredBatch
    from ormix.telemetry._records import TelemetryObserver

    class Trainer:  # what TRL's bound `_log_metric` points at: the trainer, with its args
        args = SimpleNamespace(shuffle_dataset=shuffle)

        def log_metric(self, key, value):
            pass

    observer = TelemetryObserver("a", callbacks_required=True)
    batch = ScoredBatch("a", [], [], [], log_metric=Trainer().log_metric)
    with pytest.raises(UsageError, match=r"callbacks=mix\.callbacks") as info:
        observer._missing_callbacks(batch)
    assert ("shuffles away" in str(info.value)) is shuffle
    assert shuffle or "per-step quotas or schedule" in str(info.value)
