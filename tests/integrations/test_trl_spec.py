"""GRPO end to end on CPU: TRL's own tool loop drives ormix's OpenRewardSpec against real local servers.

The tiny offline model is real; only sampling is scripted (`ScriptedPolicy`), so the tool calls are known and
the rewards that must reach the trainer's logs are known.
"""

from __future__ import annotations

import re

import pytest

from ormix import OpenRewardSpec
from ormix.server._shared import server_for
from ormix.workbench._scripted import ScriptContext, ScriptedPolicy, tool_call
from support.trl_args import cpu_grpo_config

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")


def grpo_args(tmp_path, **overrides):
    return cpu_grpo_config(str(tmp_path / "out"), **{"max_tool_calling_iterations": 3, **overrides})


def echo_script(ctx: ScriptContext) -> str:
    """Sample 0 of each group submits the right word (reward 1), sample 1 echoes a wrong one (reward 0)."""
    if ctx.turn == 0:
        word = re.search(r"word '(\w+)'", ctx.user).group(1)
        return tool_call("submit", text=word) if ctx.sample == 0 else tool_call("echo", text="nope")
    return "done"


def test_grpo_on_local_echo_logs_rewards_and_leaves_no_session(tiny_model, tmp_path):
    from trl import GRPOTrainer

    spec = OpenRewardSpec("local:echo", num_tasks=4, local_serve="thread")
    trainer = GRPOTrainer(
        model=tiny_model,
        args=grpo_args(tmp_path),
        train_dataset=spec.train_dataset,
        environment_factory=spec.environment_factory,
        reward_funcs=spec.reward_funcs,
        callbacks=spec.callbacks,
    )
    policy = ScriptedPolicy(echo_script).attach(trainer)
    trainer.train()

    steps = [h for h in trainer.state.log_history if "rewards/echo/mean" in h]
    assert len(steps) == 2
    assert [h["rewards/echo/mean"] for h in steps] == [0.5, 0.5]
    assert all(h["tools/call_frequency"] > 0 for h in steps)
    called = [t.completion for t in policy.turns if t.context.turn == 0]
    assert len(called) == 8 and sum('"submit"' in c for c in called) == 4
    assert server_for("local:echo", mode="thread").active_sessions() == []


def test_unscored_and_error_rollouts_are_none_not_zero(tiny_model, tmp_path):
    """A rollout that never calls a tool is unscored: left out of the mean, not a 0."""
    from trl import GRPOTrainer

    spec = OpenRewardSpec("local:echo", num_tasks=2, local_serve="thread")

    def script(ctx: ScriptContext) -> str:
        word = re.search(r"word '(\w+)'", ctx.user).group(1)
        return tool_call("submit", text=word) if ctx.sample == 0 and ctx.turn == 0 else "I give up."

    seen = []

    def spy(environments, **_):
        seen.extend(e.outcome.kind for e in environments)
        return [None] * len(environments)

    trainer = GRPOTrainer(
        model=tiny_model,
        args=grpo_args(tmp_path, max_steps=1),
        train_dataset=spec.train_dataset,
        environment_factory=spec.environment_factory,
        reward_funcs=[spy, spec.reward_funcs],
        callbacks=spec.callbacks,
    )
    ScriptedPolicy(script).attach(trainer)
    trainer.train()
    step = next(h for h in trainer.state.log_history if "rewards/echo/mean" in h)
    assert seen == ["scored", "unscored", "scored", "unscored"]
    assert step["rewards/echo/mean"] == 1.0  # the unscored rollouts are NaN in TRL, not 0.0


def test_grpo_on_local_terminals_reference_vs_wrong(tiny_model, tmp_path):
    """Sample 0 replays the task's reference solution (1.0), sample 1 a near miss (0.0): mean 0.5 per step."""
    from trl import GRPOTrainer

    from ormix.workbench.envs.solutions import TERMINALS_REFERENCE, TERMINALS_WRONG
    from ormix.workbench.envs.tasks.terminals_tasks import TASKS

    spec = OpenRewardSpec("local:terminals", num_tasks=4, local_serve="thread")

    def script(ctx: ScriptContext) -> str:
        task = next(t for t in TASKS if t.instructions in ctx.user)
        calls = (TERMINALS_REFERENCE if ctx.sample == 0 else TERMINALS_WRONG)[task.task_id] + [("submit", {})]
        if ctx.turn < len(calls):
            name, args = calls[ctx.turn]
            return tool_call(name, **args)
        return "done"

    trainer = GRPOTrainer(
        model=tiny_model,
        args=grpo_args(tmp_path, max_completion_length=768, max_tool_calling_iterations=4),
        train_dataset=spec.train_dataset,
        environment_factory=spec.environment_factory,
        reward_funcs=spec.reward_funcs,
        callbacks=spec.callbacks,
    )
    ScriptedPolicy(script).attach(trainer)
    trainer.train()
    logs = [h for h in trainer.state.log_history if "rewards/terminals/mean" in h]
    assert [h["rewards/terminals/mean"] for h in logs] == [0.5, 0.5]
    assert server_for("local:terminals", mode="thread").active_sessions() == []
