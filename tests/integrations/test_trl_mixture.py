"""GRPO end to end on a mixture of `local:terminals` and `local:seta`, in both routing modes.

Sample 0 of each GRPO group replays the task's reference solution (reward 1.0); sample 1 replays a known
near miss (terminals: 0.0; seta: the partial score recorded with it). So the per-member reward the trainer
must log is known exactly.
"""

from __future__ import annotations

import pytest

from ormix import MixtureSpec, OpenRewardSpec
from ormix.server._shared import server_for
from ormix.workbench._scripted import ScriptContext, ScriptedPolicy, tool_call
from ormix.workbench.envs.tasks.seta_tasks import TASKS as SETA_TASKS
from ormix.workbench.envs.tasks.terminals_tasks import TASKS as TERMINAL_TASKS
from support.solutions_seta import REFERENCE as SETA_REF
from support.solutions_seta import WRONG as SETA_WRONG
from support.solutions_terminals import REFERENCE as TERM_REF
from support.solutions_terminals import WRONG as TERM_WRONG
from support.trl_args import cpu_grpo_config

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")


def identify(user: str) -> tuple[str, str]:
    """(member, task_id) from the prompt text the environment's reset() returned."""
    for member, tasks in (("seta", SETA_TASKS), ("terminals", TERMINAL_TASKS)):
        for task in tasks:
            if task.instructions in user:
                return member, task.task_id
    raise AssertionError(f"unknown task in prompt: {user[:200]}")


def plan_calls(member: str, task_id: str, sample: int, namespaced: bool) -> list[tuple[str, dict]]:
    if member == "terminals":
        calls = (TERM_REF[task_id] if sample == 0 else TERM_WRONG[task_id]) + [("submit", {})]
    else:
        calls = (SETA_REF[task_id] if sample == 0 else SETA_WRONG[task_id][1]) + [("submit_solution", {})]
    if not namespaced:
        return calls
    calls = [(f"{member}__{name}", args) for name, args in calls]
    if sample == 1:  # one call to the other member's tool: answered with an error, counted
        other = "seta__ls" if member == "terminals" else "terminals__view"
        calls.insert(0, (other, {"path": "."}))
    return calls


def expected_reward(member: str, task_id: str, sample: int) -> float:
    if sample == 0:
        return 1.0
    return 0.0 if member == "terminals" else SETA_WRONG[task_id][0]


@pytest.mark.parametrize("routing", ["per_env", "namespaced"])
def test_mixture_grpo_logs_each_members_reward(tiny_model, tmp_path, routing):
    from trl import GRPOTrainer

    mix = MixtureSpec(
        {
            "terminals": OpenRewardSpec("local:terminals", num_tasks=6, local_serve="thread"),
            "seta": OpenRewardSpec("local:seta", num_tasks=6, local_serve="thread"),
        },
        weights={"terminals": 0.5, "seta": 0.5},
        prompts_per_step=2,
        num_samples=4,
        routing=routing,
        seed=1,
    )
    seen: list[dict] = []

    def script(ctx: ScriptContext) -> str:
        member, task_id = identify(ctx.user)
        if ctx.turn == 0:
            seen.append({"member": member, "task": task_id, "sample": ctx.sample, "tools": ctx.tools})
        calls = plan_calls(member, task_id, ctx.sample, routing == "namespaced")
        if ctx.turn < len(calls):
            name, args = calls[ctx.turn]
            return tool_call(name, **args)
        return "done"

    wrong_env: list[int] = []

    def wrong_env_calls(environments, **_):
        wrong_env.extend(sum(c.error == "wrong_env" for c in e.calls) for e in environments)
        return [None] * len(environments)

    args = cpu_grpo_config(str(tmp_path / "out"), max_completion_length=1024, max_tool_calling_iterations=5)
    trainer = GRPOTrainer(
        model=tiny_model,
        args=args,
        train_dataset=mix.train_dataset,
        environment_factory=mix.environment_factory,
        reward_funcs=[*mix.reward_funcs, wrong_env_calls],
        callbacks=mix.callbacks,
    )
    ScriptedPolicy(script).attach(trainer)
    trainer.train()

    logs = [h for h in trainer.state.log_history if "rewards/terminals/mean" in h]
    assert len(logs) == 2
    for step, log in enumerate(logs):
        rollouts = seen[step * 4 : (step + 1) * 4]
        for member in ("terminals", "seta"):
            values = [
                expected_reward(r["member"], r["task"], r["sample"])
                for r in rollouts
                if r["member"] == member
            ]
            assert values, f"step {step} has no {member} prompt: the per-step quota failed"
            assert log[f"rewards/{member}/mean"] == pytest.approx(sum(values) / len(values))
    if routing == "per_env":
        for r in seen:  # each prompt shows only its own environment's tools
            own = {
                "terminals": {"bash", "view", "create_file", "str_replace", "submit"},
                "seta": {
                    "bash",
                    "glob",
                    "grep",
                    "ls",
                    "read",
                    "write",
                    "edit",
                    "multi_edit",
                    "todo_write",
                    "submit_solution",
                },
            }[r["member"]]
            assert set(r["tools"]) == own
        assert sum(wrong_env) == 0
    else:
        assert all(t.startswith(("terminals__", "seta__")) for r in seen for t in r["tools"])
        assert wrong_env == [0, 1] * 4  # sample 1 of every group made one cross-member call
    for target in ("local:terminals", "local:seta"):
        assert server_for(target, mode="thread").active_sessions() == []


def test_shuffled_plan_is_refused_when_training_starts(tiny_model, tmp_path):
    from trl import GRPOTrainer

    from ormix._errors import TrainConfigError

    mix = MixtureSpec(
        {
            "a": OpenRewardSpec("local:echo", num_tasks=4, local_serve="thread"),
            "b": OpenRewardSpec("local:echo", indices=[5, 6], local_serve="thread"),
        },
        prompts_per_step=2,
        num_samples=4,
    )
    args = cpu_grpo_config(str(tmp_path / "out"), max_steps=1, max_completion_length=32, shuffle_dataset=True)
    trainer = GRPOTrainer(
        model=tiny_model,
        args=args,
        train_dataset=mix.train_dataset,
        environment_factory=mix.environment_factory,
        reward_funcs=mix.reward_funcs,
        callbacks=mix.callbacks,
    )
    with pytest.raises(TrainConfigError, match="shuffle_dataset=False"):
        trainer.train()
    assert trainer.state.global_step == 0
