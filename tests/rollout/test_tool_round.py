"""`ToolRound` against a real local server (`local:faulty` counts its `count` calls in this process), driven
the way TRL's tool loop drives it: a rollout's assistant message appended, then its calls one after another.

These cover the loops TRL 1.16 never produces (a call left out, a call ormix did not run ahead), so that a
changed TRL costs a warning, never a tool run twice.
"""

from __future__ import annotations

import uuid

import pytest

from ormix import OpenRewardSpec
from ormix.rollout._batch import ToolRound
from ormix.rollout._episode import Episode, close_episodes, set_tool_round
from ormix.workbench.envs.faulty import _count_of


@pytest.fixture
def episodes():
    spec = OpenRewardSpec("local:faulty", num_tasks=2, local_serve="thread", discover_task_tools=False)
    envs = [spec.environment_factory() for _ in range(2)]
    for env in envs:
        env.reset(task_spec={})
    yield envs
    close_episodes(envs)


def ask(completions, envs, tool_round, asked, called):
    """One round: every rollout's message asks for `asked[i]` (`count` keys); TRL then calls `called[i]`."""
    for messages, keys in zip(completions, asked, strict=True):
        calls = [{"type": "function", "function": {"name": "count", "arguments": {"key": k}}} for k in keys]
        messages.append({"role": "assistant", "content": "", "tool_calls": calls})
    for env, messages, keys in zip(envs, completions, called, strict=True):
        for key in keys:
            messages.append({"role": "tool", "name": "count", "content": env.count(key=key)})


def test_calls_trl_leaves_out_or_adds_never_run_twice(episodes):
    k = {name: f"{name}-{uuid.uuid4().hex[:8]}" for name in "abcde"}
    completions: list[list[dict]] = [[], []]
    tool_round = ToolRound(completions, episodes, is_ours=lambda e: isinstance(e, Episode))
    for env in episodes:
        set_tool_round(env, tool_round)
    try:
        # Rollout 0: TRL leaves out its first call (run ahead, never made). Rollout 1: TRL makes a call of its
        # own first, then the one its message asked for.
        ask(completions, episodes, tool_round, [[k["a"], k["b"]], [k["c"]]], [[k["b"]], [k["d"], k["c"]]])
        # The next round: the results the first one left behind are stale, not answers.
        ask(completions, episodes, tool_round, [[k["a"]], [k["e"]]], [[k["a"]], [k["e"]]])
    finally:
        for env in episodes:
            set_tool_round(env, None)
    assert {name: _count_of(key) for name, key in k.items()} == {"a": 2, "b": 1, "c": 1, "d": 1, "e": 1}
    assert completions[0][-1]["content"] == "2"  # the second round's own call of `a`, not the first's result
    assert tool_round.stats.fallbacks == 1 and tool_round.stats.rounds == 2
