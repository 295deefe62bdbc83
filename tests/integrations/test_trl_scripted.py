"""Scripted GRPO runs on CPU: TRL's own tool loop calls real environment methods with scripted arguments.

The environments here are plain Python classes (the shape TRL's `environment_factory` takes); the model is the
offline tiny model; only sampling is replaced by `ScriptedPolicy`.
"""

from __future__ import annotations

import math
import pathlib

import pytest

from ormix._errors import UsageError
from ormix.workbench._scripted import ScriptContext, ScriptedPolicy, tool_call
from support.trl_args import cpu_grpo_config

pytestmark = pytest.mark.slow

WORDS = ["apple", "river", "stone", "cloud"]


@pytest.fixture(scope="module")
def tiny_path(tiny_model) -> pathlib.Path:
    return pathlib.Path(tiny_model)


@pytest.fixture(autouse=True)
def _quiet_trl(monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")


def _args(tmp_path, **overrides):
    return cpu_grpo_config(str(tmp_path / "out"), **overrides)  # 2 prompts x 2 generations per step


def _steps(trainer) -> list[dict]:
    return [h for h in trainer.state.log_history if "loss" in h]


class Shouter:
    """One tool. Every call and reset is logged on the class, so the test sees all pooled instances."""

    log: list[tuple[str, str]] = []  # (word of the row, argument the tool got)
    resets: list[str] = []

    def __init__(self) -> None:
        self.word: str | None = None
        self.calls: list[str] = []

    def reset(self, **row) -> str:
        self.word = row["word"]
        self.calls = []
        Shouter.resets.append(row["word"])
        return f" Word: {self.word}."

    def shout(self, text: str) -> str:
        """Shout the text.

        Args:
            text: What to shout.
        """
        self.calls.append(text)
        Shouter.log.append((self.word, text))
        if text == "boom":
            raise RuntimeError("the shout failed")
        return text.upper()


def test_scripted_tool_calls_reach_the_environment_and_rewards(tiny_path, tmp_path):
    from datasets import Dataset
    from trl import GRPOTrainer

    Shouter.log, Shouter.resets = [], []

    def script(ctx: ScriptContext) -> str:
        if ctx.turn == 0:
            word = ctx.user.split("Word: ")[1].rstrip(".")
            # The two members of each GRPO group differ, so every group is informative.
            return tool_call("shout", text=word if ctx.sample == 0 else "nope")
        return f"The answer is {ctx.tool_results[-1]}."

    seen = []

    def reward_match(environments, prompts, completions, word, log_metric, **kwargs):
        # Copy what we check now: TRL pools instances and the next batch's reset() reuses them.
        seen.append(([(type(e), e.word, list(e.calls)) for e in environments], list(word), completions))
        for env in environments:
            log_metric("test/calls_per_rollout", float(len(env.calls)))
        return [1.0 if env.calls == [env.word] else 0.0 for env in environments]

    dataset = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": "Shout the word."}], "word": w} for w in WORDS]
    )
    trainer = GRPOTrainer(
        model=str(tiny_path),
        args=_args(tmp_path),
        train_dataset=dataset,
        reward_funcs=[reward_match],
        environment_factory=Shouter,
    )
    policy = ScriptedPolicy(script).attach(trainer)
    trainer.train()

    # TRL called the real tool method with exactly the scripted arguments, in dataset order.
    assert Shouter.resets == ["apple", "apple", "river", "river", "stone", "stone", "cloud", "cloud"]
    assert Shouter.log == [(w, a) for w in WORDS for a in (w, "nope")]
    # The reward function got the very instances that ran the tools, aligned with the dataset column.
    assert len(seen) == 2
    for environments, words, completions in seen:
        assert [w for _, w, _ in environments] == words
        assert all(t is Shouter for t, _, _ in environments)
        assert [c for _, _, c in environments] == [
            [w] if i % 2 == 0 else ["nope"] for i, w in enumerate(words)
        ]
        # TRL's completion messages: the parsed call, the tool result, the scripted final answer.
        first = completions[0]
        assert first[0]["tool_calls"][0]["function"] == {"name": "shout", "arguments": {"text": words[0]}}
        assert first[1] == {"role": "tool", "name": "shout", "content": words[0].upper()}
        assert first[2]["content"] == f"The answer is {words[0].upper()}."

    steps = _steps(trainer)
    assert len(steps) == 2
    for step in steps:
        assert step["rewards/reward_match/mean"] == pytest.approx(0.5)
        assert step["tools/call_frequency"] == pytest.approx(1.0)
        assert step["tools/failure_frequency"] == pytest.approx(0.0)
        assert step["frac_reward_zero_std"] == pytest.approx(0.0)
        assert step["test/calls_per_rollout"] == pytest.approx(1.0)

    # Each rollout had two scripted turns; the second saw its own tool result.
    assert [(t.context.turn, t.context.sample) for t in policy.turns[:8]] == [
        (0, 0),
        (0, 1),
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
        (1, 0),
        (1, 1),
    ]
    assert [t.context.tool_results for t in policy.turns[4:8]] == [
        ("APPLE",),
        ("NOPE",),
        ("RIVER",),
        ("NOPE",),
    ]
    assert all(t.context.tools == ("shout",) for t in policy.turns)
    assert not any(t.truncated for t in policy.turns)

    policy.detach()
    assert "generate" not in trainer.model.__dict__


def test_iteration_cap_and_tool_errors_follow_trl(tiny_path, tmp_path):
    from datasets import Dataset
    from trl import GRPOTrainer

    Shouter.log, Shouter.resets = [], []

    def script(ctx: ScriptContext) -> str:
        # Never stops calling: TRL's `max_tool_calling_iterations` must end the rollout.
        return tool_call("shout", text="boom" if ctx.sample == 1 else f"call{ctx.turn}")

    def reward_calls(environments, **kwargs):
        return [float(len(e.calls)) for e in environments]

    dataset = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": "Go."}], "word": w} for w in WORDS[:2]]
    )
    trainer = GRPOTrainer(
        model=str(tiny_path),
        args=_args(tmp_path, max_steps=1, max_tool_calling_iterations=2, max_completion_length=256),
        train_dataset=dataset,
        reward_funcs=[reward_calls],
        environment_factory=Shouter,
    )
    policy = ScriptedPolicy(script).attach(trainer)
    trainer.train()

    # 2 rounds of tools, 3 generations per rollout.
    assert sorted(a for _, a in Shouter.log) == sorted(["call0", "call1"] * 2 + ["boom"] * 4)
    assert sorted(t.context.turn for t in policy.turns) == [0] * 4 + [1] * 4 + [2] * 4
    errors = [t.context.tool_results for t in policy.turns if t.context.sample == 1 and t.context.turn == 2]
    assert errors == [("{'error': 'the shout failed'}",) * 2] * 2
    (step,) = _steps(trainer)
    assert step["rewards/reward_calls/mean"] == pytest.approx(2.0)
    assert step["tools/call_frequency"] == pytest.approx(2.0)
    assert step["tools/failure_frequency"] == pytest.approx(0.5)


def test_completion_budget_is_cut_like_trl(tiny_path, tmp_path):
    from datasets import Dataset
    from trl import GRPOTrainer

    def script(ctx: ScriptContext) -> str:
        return tool_call("shout", text="hi") if ctx.turn == 0 else "word " * 200

    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": "Go."}], "word": "w"}] * 2)
    trainer = GRPOTrainer(
        model=str(tiny_path),
        args=_args(tmp_path, max_steps=1, max_completion_length=64),
        train_dataset=dataset,
        reward_funcs=[lambda completions, **kw: [0.0] * len(completions)],
        environment_factory=Shouter,
    )
    policy = ScriptedPolicy(script).attach(trainer)
    trainer.train()

    first, last = policy.turns[0], policy.turns[-1]
    assert (first.context.turn, first.truncated) == (0, False)
    assert (last.context.turn, last.truncated) == (1, True)
    (step,) = _steps(trainer)
    # Every rollout used its whole budget: TRL counts it as clipped.
    assert step["completions/clipped_ratio"] == pytest.approx(1.0)
    assert step["tools/call_frequency"] == pytest.approx(1.0)
    # The policy kept exactly what TRL kept (model tokens; the tool result is masked out of the length).
    assert step["completions/max_length"] == len(first.completion_ids) + len(last.completion_ids)
    assert step["completions/min_length"] == step["completions/max_length"]


class Alpha:
    resets: list[dict] = []

    def reset(self, **row) -> str:
        Alpha.resets.append(row)
        self.got: list[str] = []
        return f" [alpha task {row['task']}]"

    def alpha_echo(self, text: str) -> str:
        """Echo text back.

        Args:
            text: Text to echo.
        """
        self.got.append(text)
        return f"alpha:{text}"


class Beta:
    resets: list[dict] = []

    def reset(self, **row) -> str:
        Beta.resets.append(row)
        self.got: list[int] = []
        return f" [beta task {row['task']}]"

    def beta_double(self, n: int) -> str:
        """Double a number.

        Args:
            n: The number.
        """
        self.got.append(n)
        return str(2 * n)


def test_dict_environment_factory_routes_rows_and_tools(tiny_path, tmp_path):
    from datasets import Dataset
    from trl import GRPOTrainer

    Alpha.resets, Beta.resets = [], []
    rows = [
        {"prompt": [{"role": "user", "content": "Solve."}], "environment": env, "task": i}
        for i, env in enumerate(["alpha", "beta", "alpha", "beta"])
    ]

    def script(ctx: ScriptContext) -> str:
        # In dict mode each prompt renders only its own environment's tools.
        if ctx.turn > 0:
            return "done"
        task = int(ctx.user.split("task ")[1].rstrip("]"))
        if ctx.tools == ("alpha_echo",):
            return tool_call("alpha_echo", text=f"t{task}")
        assert ctx.tools == ("beta_double",), ctx.tools
        return tool_call("beta_double", n=task)

    def reward_env(environments, environment, task, log_metric, **kwargs):
        rewards = []
        for env, name, t in zip(environments, environment, task, strict=True):
            assert type(env).__name__.lower() == name
            ok = env.got == ([f"t{t}"] if name == "alpha" else [t])
            log_metric(f"test/{name}_ok", float(ok))
            rewards.append(1.0 if ok else 0.0)
        return rewards

    trainer = GRPOTrainer(
        model=str(tiny_path),
        args=_args(tmp_path),
        train_dataset=Dataset.from_list(rows),
        reward_funcs=[reward_env],
        environment_factory={"alpha": Alpha, "beta": Beta},
    )
    policy = ScriptedPolicy(script).attach(trainer)
    trainer.train()

    # `reset` got the row without the `environment` control column, each row in its own environment.
    assert [r["task"] for r in Alpha.resets] == [0, 0, 2, 2]
    assert [r["task"] for r in Beta.resets] == [1, 1, 3, 3]
    assert all("environment" not in r for r in Alpha.resets + Beta.resets)
    # The integer argument arrived typed (the parser types arguments by the tool's schema).
    assert all(isinstance(n, int) for n in trainer.environments[2].got + trainer.environments[3].got)
    assert {t.context.tools for t in policy.turns} == {("alpha_echo",), ("beta_double",)}
    for step in _steps(trainer):
        assert step["rewards/reward_env/mean"] == pytest.approx(1.0)
        assert step["test/alpha_ok"] == pytest.approx(1.0) and step["test/beta_ok"] == pytest.approx(1.0)
        assert not math.isnan(step["reward_std"])


def test_attach_errors_are_actionable(tiny_path):
    policy = ScriptedPolicy(lambda ctx: "x")
    with pytest.raises(UsageError, match="no model"):
        policy.attach(object())
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_path)
    with pytest.raises(UsageError, match="tokenizer"):
        policy.attach(model)
