"""Group scoring below the trainers: the pure rules (hypothesis), ORS ``score_group`` on real local servers
(ormix's client and the SDK transport), and a member's reward function scoring whole GRPO groups.

`local:ranked` scores a group by preferring the shortest correct answer; its split ``judge_fails`` raises in
``score_group`` (a judge that fails); `local:echo` has no ``score_group``.
"""

from __future__ import annotations

from types import SimpleNamespace

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from openreward.environments import Message

from ormix import OpenRewardSpec
from ormix._errors import SpecError
from ormix.config._models import GroupScoringConfig, MixtureConfig
from ormix.config._trainer_rules import group_scoring_problem
from ormix.ors import ORSClient, ScoreGroupFailed, ScoreGroupUnsupported
from ormix.rollout._episode import close_episodes
from ormix.rollout._group_scoring import GroupScoringRule, candidate_messages, combine_rewards, groups_of
from ormix.server import serve_in_thread
from ormix.telemetry._alarm import Alarm
from ormix.telemetry._metrics import dominant_cause, group_ids
from ormix.telemetry._records import TelemetryRun, rollout_record

rewards = st.one_of(st.none(), st.floats(-10, 10, allow_nan=False))
rules = st.builds(
    GroupScoringRule,
    combine=st.sampled_from(["replace", "add", "weighted"]),
    weight=st.floats(0, 1, allow_nan=False),
)


# ── the pure rules ──────────────────────────────────────────────────────


@given(rewards, rules)
def test_a_group_that_was_not_scored_leaves_the_pointwise_reward(pointwise, rule):
    assert combine_rewards(pointwise, None, rule) == pointwise


@given(st.floats(-10, 10, allow_nan=False), rewards, rules)
def test_the_combination_is_what_the_rule_says(group, pointwise, rule):
    combined = combine_rewards(pointwise, group, rule)
    if pointwise is None or rule.combine == "replace":
        assert combined == group  # an unscored rollout takes the group score alone
    elif rule.combine == "add":
        assert combined == pytest.approx(pointwise + group)
    else:
        assert min(pointwise, group) - 1e-9 <= combined <= max(pointwise, group) + 1e-9
        assert combined == pytest.approx((1 - rule.weight) * pointwise + rule.weight * group)


@given(st.lists(st.integers(0, 5), min_size=1, max_size=20).map(sorted), st.data())
def test_groups_of_keeps_every_position_once_in_order(ids, data):
    positions = sorted(data.draw(st.sets(st.integers(0, len(ids) - 1))))
    groups = groups_of(ids, positions)
    assert [p for g in groups for p in g] == positions
    assert all(len({ids[p] for p in g}) == 1 for g in groups)
    assert len({ids[g[0]] for g in groups}) == len(groups)


COMPLETION = [
    {
        "role": "assistant",
        "content": "Let me add.",
        "tool_calls": [
            {"type": "function", "function": {"name": "calc", "arguments": {"expr": "2+2"}}},
            {"type": "function", "function": {"name": "submit", "arguments": '{"answer": "4"}'}},
        ],
    },
    {"role": "tool", "name": "calc", "content": "4"},
    {"role": "tool", "name": "submit", "content": "{'error': 'episode over'}"},
    {"role": "assistant", "content": [{"type": "text", "text": "It is 4."}]},
]


@given(
    st.integers(1, 8),
    st.integers(1, 4),
    st.integers(1, 6),
    st.integers(2, 4),
    st.sampled_from(["on", "auto"]),
)
def test_group_scoring_on_several_processes_is_allowed_exactly_when_every_group_is_whole_on_a_rank(
    per_device, steps, size, world, mode
):
    # The rule (`group_scoring_problem`) against the grouping the reward function uses on each rank
    # (`group_ids`, TRL's layout: rank k holds global slots [k*n, (k+1)*n) of a generation batch).
    n = per_device * steps
    whole = True
    for rank in range(world):
        ids = group_ids(n, rank=rank, num_generations=size)
        whole &= all(ids.count(g) == size for g in set(ids))
    members = {"r": SimpleNamespace(group_scoring=SimpleNamespace(mode=mode))}
    mix = SimpleNamespace(config=SimpleNamespace(members=members, prompts_per_step=None))
    args = SimpleNamespace(
        num_generations=size, per_device_train_batch_size=per_device, steps_per_generation=steps
    )
    problem = group_scoring_problem(mix, args, world)
    assert (problem is None) == whole
    if problem is not None:
        assert (
            f"= {per_device} × {steps} = {n} rollouts) is not a multiple of num_generations ({size})"
            in problem
        )
    assert group_scoring_problem(mix, args, 1) is None  # one process holds every group whole


def test_a_trainers_geometry_that_splits_groups_over_two_processes_is_refused_for_training_and_eval():
    # TRL's own GRPOConfig, as `mix.callbacks` check it when training starts (and `ormix train` before any
    # model loads): 3 prompts a step cannot be split whole over 2 processes.
    from ormix.trl._callbacks import check_trainer_args
    from support.trl_args import cpu_grpo_config

    cfg = MixtureConfig(
        members={"ranked": {"target": "local:ranked", "group_scoring": "on"}},
        prompts_per_step=3,
        num_samples=6,
    )
    mix = SimpleNamespace(config=cfg, prompts_per_step=3, order_matters=True, num_rows=6)
    split = cpu_grpo_config("/tmp/x", per_device_train_batch_size=4, num_generations=2)
    # 3 a process: TRL takes it on 2 processes (6 rollouts a step), not on the 1 this test runs.
    split.per_device_train_batch_size = 3
    problems = check_trainer_args(mix, split, world_size=2)
    assert any("make prompts_per_step (3) a multiple of the 2 processes" in p for p in problems), problems
    cfg = cfg.model_copy(update={"prompts_per_step": 4, "num_samples": 8})
    mix = SimpleNamespace(config=cfg, prompts_per_step=4, order_matters=True, num_rows=8)
    whole = cpu_grpo_config("/tmp/x", per_device_train_batch_size=4, num_generations=2)
    assert not any("group scoring" in p for p in check_trainer_args(mix, whole, world_size=2))
    evals = cpu_grpo_config(
        "/tmp/x",
        per_device_train_batch_size=4,
        num_generations=2,
        eval_strategy="steps",
        eval_steps=1,
        per_device_eval_batch_size=4,
        num_generations_eval=4,
    )
    evals.per_device_eval_batch_size = 2  # 2 a process: a group of 4 over the 2 processes
    assert any("per_device_eval_batch_size = 2" in p for p in check_trainer_args(mix, evals, world_size=2))


def test_candidates_are_ors_messages_the_sdk_accepts():
    output = candidate_messages(COMPLETION)
    assert output == [{"role": "assistant", "blocks": [{"type": "text", "text": "It is 4."}]}]
    trajectory = candidate_messages(COMPLETION, "trajectory")
    # The SDK's own message model (what a server validates) takes every one.
    assert [Message.model_validate(m).role for m in trajectory] == ["assistant", "user", "assistant"]
    calls = [b for b in trajectory[0]["blocks"] if b["type"] == "tool_call"]
    results = trajectory[1]["blocks"]
    assert [c["name"] for c in calls] == ["calc", "submit"] and calls[1]["input"] == {"answer": "4"}
    assert [r["tool_call_id"] for r in results] == [c["id"] for c in calls]
    assert [r["is_error"] for r in results] == [False, True]
    assert candidate_messages("plain text") == [
        {"role": "assistant", "blocks": [{"type": "text", "text": "plain text"}]}
    ]


def test_group_scoring_options_and_their_short_forms():
    assert GroupScoringConfig.model_validate("auto").mode == "auto"
    members = MixtureConfig.from_yaml_text(
        "members:\n"
        "  a: {target: 'local:ranked', group_scoring: on}\n"
        "  b: {target: 'local:ranked', group_scoring: {mode: off}}\n"
        "  c: {target: 'local:echo'}\n"
    ).members
    assert members["a"].group_scoring.mode == "on" and members["b"].group_scoring.mode == "off"
    assert members["c"].group_scoring is None
    with pytest.raises(SpecError, match="weight is used by combine: weighted only"):
        OpenRewardSpec("local:ranked", group_scoring={"weight": 0.2})
    with pytest.raises(SpecError, match="combine"):
        OpenRewardSpec("local:ranked", group_scoring={"combine": "max"})


# ── score_group on the wire ─────────────────────────────────────────────


def answer(text: str) -> list[dict]:
    return [{"role": "assistant", "blocks": [{"type": "text", "text": text}]}]


@pytest.fixture(scope="module")
def servers():
    with serve_in_thread(["local:ranked", "local:echo"]) as server:
        yield server.url


def test_score_group_on_a_session_and_what_a_failure_leaves(servers):
    async def run():
        async with ORSClient(servers, env_name="ranked") as client:
            async with client.session(split="train", index=0) as session:  # 2 + 2
                assert await session.supports_score_group()
                scores = await session.score_group(
                    [answer("4"), {"messages": answer("44"), "metadata": {"k": 1}}, answer(" 4 ")]
                )
                assert [s.reward for s in scores] == [1.0, 0.0, 0.5]
                assert scores[2].metadata == {"answer": " 4 ", "length": 3}
            async with client.session(split="judge_fails", index=0) as session:
                with pytest.raises(ScoreGroupFailed, match="the judge failed") as info:
                    await session.score_group([answer("4"), answer("5")])
                assert "the judge failed" in info.value.detail
                # Scoring reads the candidates only: the session is as usable as before.
                assert (await session.call("submit", {"answer": "4"})).reward == 1.0
        async with ORSClient(servers, env_name="echo") as client:
            async with client.session(split="train", index=0) as session:
                assert not await session.supports_score_group()
                with pytest.raises(ScoreGroupUnsupported, match="does not score groups"):
                    await session.score_group([answer("a"), answer("b")])
                assert (await session.call("echo", {"text": "apple"})).reward == 1.0

    anyio.run(run)


# ── a member's reward function scores its groups ────────────────────────


def played(spec: OpenRewardSpec, plays: list[tuple[int, str]]) -> list:
    """Episodes of `spec`, one per (task_index, answer): reset and submitted."""
    episodes = []
    for task, text in plays:
        episode = spec.environment_factory()
        episode.reset(task_index=task)
        episode.submit(answer=text)
        episodes.append(episode)
    return episodes


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"mode": "auto", "combine": "add"}, [2.0, 0.0, 1.5, 2.0]),
        ({"mode": "on", "combine": "replace"}, [1.0, 0.0, 0.5, 1.0]),
        ({"mode": "on", "combine": "weighted", "weight": 0.25}, [1.0, 0.0, 0.875, 1.0]),
    ],
)
def test_the_reward_function_scores_each_group_and_combines(servers, options, expected):
    spec = OpenRewardSpec(servers, env_name="ranked", num_tasks=2, group_scoring=options)
    reward = spec.reward_funcs
    # Two GRPO groups of 2: task 0 (2 + 2) and task 1 (3 + 5). Without a trainer, groups are equal prompts.
    episodes = played(spec, [(0, "4"), (0, "5"), (1, " 8"), (1, "8")])
    try:
        got = reward(environments=episodes, prompts=["a", "a", "b", "b"], completions=["4", "5", " 8", "8"])
    finally:
        close_episodes(episodes)
    assert got == pytest.approx(expected)
    assert [e.group_status for e in episodes] == ["scored"] * 4
    assert [e.group_reward for e in episodes] == [1.0, 0.0, 0.5, 1.0]
    values = spec.telemetry.last_values
    assert values["group_reward"] == [1.0, 0.0, 0.5, 1.0] and values["combined_reward"] == pytest.approx(
        expected
    )
    assert values["group_scored"] == [1.0] * 4 and values["group_score_failed"] == [0.0, 0.0]
    record = rollout_record(
        episodes[2], member="ranked", training_reward=got[2], step=1, rank=0, mode="train", group=2
    )
    assert (record["env_reward"], record["group_reward"], record["reward"]) == (1.0, 0.5, expected[2])
    assert record["group_metadata"] == {"answer": " 8", "length": 2}


def test_a_judge_that_raises_leaves_the_pointwise_rewards_and_is_counted(servers):
    spec = OpenRewardSpec(servers, env_name="ranked", split="judge_fails", num_tasks=1, group_scoring="on")
    episodes = played(spec, [(0, "4"), (0, "5")])
    try:
        got = spec.reward_funcs(environments=episodes, prompts=["a", "a"], completions=["4", "5"])
    finally:
        close_episodes(episodes)
    assert got == [1.0, 0.0]  # the pointwise rewards, never a fabricated 0 for the failure
    assert all(e.group_status == "failed" and "the judge failed" in e.group_error for e in episodes)
    values = spec.telemetry.last_values
    assert values["group_score_failed"] == [1.0] and values["group_scored"] == [0.0, 0.0]
    assert "group_reward" not in values and values["coverage"] == [1.0, 1.0]


def test_auto_asks_only_an_environment_that_scores_groups_and_on_counts_one_that_does_not(servers):
    for mode, status in (("auto", None), ("on", "unsupported")):
        spec = OpenRewardSpec(servers, env_name="echo", num_tasks=1, group_scoring=mode)
        episodes = [spec.environment_factory() for _ in range(2)]
        for episode in episodes:
            episode.reset(task_index=0)
            episode.submit(text="apple")
        try:
            got = spec.reward_funcs(environments=episodes, prompts=["a", "a"], completions=["x", "y"])
        finally:
            close_episodes(episodes)
        assert got == [1.0, 1.0]
        assert [e.group_status for e in episodes] == [status, status]
        assert ("group_score_failed" in spec.telemetry.last_values) == (mode == "on")


def test_a_rollout_that_failed_for_infrastructure_is_no_candidate(servers):
    spec = OpenRewardSpec(servers, env_name="ranked", num_tasks=1, group_scoring={"combine": "replace"})
    episodes = played(spec, [(0, "4"), (0, "44"), (0, "4")])
    episodes[1].error_kind = "transport"  # as a dropped connection leaves it
    try:
        got = spec.reward_funcs(environments=episodes, prompts=["a"] * 3, completions=["4", "44", "4"])
    finally:
        close_episodes(episodes)
    assert got == [1.0, None, 1.0]
    assert [e.group_status for e in episodes] == ["scored", None, "scored"]


# ── what the alarm says ─────────────────────────────────────────────────


def test_the_alarm_names_a_failed_group_scoring_of_rollouts_without_a_pointwise_reward():
    run = TelemetryRun(None)
    covered = {"mode": "train", "outcome": "unscored", "group_status": "scored", "reward": 0.5}
    uncovered = {"mode": "train", "outcome": "unscored", "group_status": "failed", "reward": None}
    run.note("judged", [covered, uncovered, uncovered])
    causes = run.take_causes()["judged"]
    assert causes["unscored"] == 2 and causes["group:failed"] == 2  # the group-scored one has a reward
    cause = dominant_cause(causes)
    assert cause == ("group:failed", 2, 2)
    alarm = Alarm(3, "judged", 0.33, 0.0, ("coverage 0.33 < min_coverage 0.50",), cause, 1, False)
    assert "their group's scoring was failed (ormix/judged/group_score_failed)" in alarm.message


# ── TRL's environment-owned reward ──────────────────────────────────────


def test_episodes_do_not_own_their_reward(servers):
    # TRL adds a reward column for every environment class with a `get_reward` method and sums it with the
    # reward functions (weight 1): an Episode with one would count its reward twice beside ormix's reward
    # function (measured: logged reward 1.0 for 0.5, reward_std doubled) and skip the group combination.
    spec = OpenRewardSpec(servers, env_name="ranked", num_tasks=1, group_scoring="on")
    assert not hasattr(spec.episode_class, "get_reward")


def test_an_eval_summary_counts_each_tasks_group_once_across_chunks():
    from ormix.evaluation._summary import summarize

    def record(task, status, group_reward):
        return {
            "member": "m",
            "step": 0,
            "rank": 0,
            "group": 0,
            "task_index": task,
            "outcome": "scored",
            "env_reward": 1.0,
            "group_status": status,
            "group_reward": group_reward,
            "reward": 1.0 + (group_reward or 0.0),
        }

    # Two chunks, each one group at position 0 of its batch: two tasks, two groups.
    records = [
        record(0, "scored", 1.0),
        record(0, "scored", 0.5),
        record(1, "failed", None),
        record(1, "failed", None),
    ]
    grouped = summarize(records, ks=(1, 2))["members"]["m"]["group_scoring"]
    assert grouped["groups"] == {"scored": 1, "failed": 1}
    assert grouped["group_reward"]["value"] == 0.75 and grouped["group_reward"]["n"] == 1
