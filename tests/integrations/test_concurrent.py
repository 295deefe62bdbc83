"""`ConcurrentGRPOTrainer`: a batch's sessions and tool rounds in flight at once, training signal unchanged.

Real TRL, real local servers, the tiny offline model; only sampling is scripted (`ScriptedPolicy`). The same
script runs through TRL's own sequential loop and through the concurrent one, and what GRPO trains on is
compared token for token.
"""

from __future__ import annotations

import json
import pickle
import re
import threading
import time

import pytest
from openreward.environments import Environment, TextBlock, ToolOutput, tool
from pydantic import BaseModel

from ormix import MixtureSpec, OpenRewardSpec
from ormix.server import serve_in_thread
from ormix.server._shared import server_for
from ormix.telemetry._records import read_records
from ormix.workbench._scripted import ScriptContext, ScriptedPolicy, tool_call
from ormix.workbench.envs.latency import Latency
from support.trl_args import cpu_grpo_config

pytestmark = pytest.mark.slow

T = {"local_serve": "thread"}
#: Per-call facts a record keeps that depend on timing, not on what the rollout did.
TIMING = ("time", "latency_ms", "open_ms", "seq")


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    # The latency environment's server runs in this process (thread mode) and reads these.
    monkeypatch.setenv("ORMIX_LATENCY_OPEN_S", "0.05")
    monkeypatch.setenv("ORMIX_LATENCY_TOOL_S", "0.02")


def grpo_args(tmp_path, name, **overrides):
    settings = dict(per_device_train_batch_size=8, max_completion_length=200, max_tool_calling_iterations=3)
    return cpu_grpo_config(str(tmp_path / name), **{**settings, **overrides})


def script(ctx: ScriptContext) -> str:
    """Several rounds, an episode that ends early, two calls in one message, an overflowing tool result."""
    prefix = "latency__" if "latency__work" in ctx.tools else ""
    faulty = "faulty__" if "faulty__big" in ctx.tools else ""
    if "Faulty task" in ctx.user:
        if ctx.turn == 0:
            # sample 1: a tool result far longer than max_completion_length (TRL drops it after the call ran)
            return tool_call(f"{faulty}big", n=4000) if ctx.sample else tool_call(f"{faulty}echo", text="hi")
        if ctx.turn == 1:
            return tool_call(f"{faulty}submit", answer=re.search(r"answer '(\d+)'", ctx.user).group(1))
        return "done"
    word = re.search(r"word '(\w+)'", ctx.user).group(1)
    if ctx.turn == 0:
        if ctx.sample == 0:  # ends at once
            return tool_call(f"{prefix}submit", text=word)
        # two calls in one message: they must reach the session in this order
        return tool_call(f"{prefix}work", text="first") + "\n" + tool_call(f"{prefix}work", text=word)
    if ctx.turn == 1 and ctx.sample == 1:
        return tool_call(f"{prefix}submit", text=word)
    return "done"


class Capture:
    """Keeps what each batch's `_generate_and_score_completions` returned, as plain lists."""

    @staticmethod
    def subclass(base):
        class Captured(base):
            batches: list[dict] = []

            def _generate_and_score_completions(self, inputs):
                out = super()._generate_and_score_completions(inputs)
                keep = {}
                for key in ("prompt_ids", "completion_ids", "tool_mask", "completion_mask"):
                    keep[key] = out[key].tolist()
                type(self).batches.append(keep)
                return out

        Captured.batches = []
        return Captured


def run(trainer_class, mix, tiny_model, tmp_path, name, **args):
    trainer = trainer_class(
        model=tiny_model,
        args=grpo_args(tmp_path, name, **args),
        train_dataset=mix.train_dataset,
        environment_factory=mix.environment_factory,
        reward_funcs=mix.reward_funcs,
        callbacks=mix.callbacks,
    )
    ScriptedPolicy(script).attach(trainer)
    trainer.train()
    return trainer


def comparable(records):
    out = []
    for r in records:
        r = {k: v for k, v in r.items() if k not in TIMING}
        r["calls"] = [{k: v for k, v in c.items() if k not in TIMING} for c in r["calls"]]
        out.append(r)
    return out


def mixture(routing):
    return MixtureSpec(
        {
            "latency": OpenRewardSpec("local:latency", num_tasks=6, **T),
            "faulty": OpenRewardSpec("local:faulty", indices=[0, 6, 10], **T),
        },
        weights={"latency": 0.5, "faulty": 0.5},
        prompts_per_step=4,
        num_samples=8,
        routing=routing,
    )


@pytest.mark.parametrize("routing", ["per_env", "namespaced"])
def test_concurrent_loop_trains_on_exactly_what_trls_sequential_loop_does(tiny_model, tmp_path, routing):
    from trl import GRPOTrainer

    from ormix.trl._trainer import ConcurrentGRPOTrainer

    sequential, concurrent = Capture.subclass(GRPOTrainer), Capture.subclass(ConcurrentGRPOTrainer)
    a = run(sequential, mixture(routing), tiny_model, tmp_path, "seq")
    b = run(concurrent, mixture(routing), tiny_model, tmp_path, "conc")

    assert len(sequential.batches) == len(concurrent.batches) == 2
    for x, y in zip(sequential.batches, concurrent.batches, strict=True):
        assert x == y  # prompt ids, completion ids, tool-result masks: token for token
    # The batch really had several rounds and an overflowing result (its tokens are not in the completion).
    assert any(0 in row for batch in sequential.batches for row in batch["tool_mask"])
    key = (
        "rewards/latency/mean",
        "rewards/faulty/mean",
        "ormix/latency/finished_rate",
        "tools/call_frequency",
    )
    logs_a = [{k: h[k] for k in key if k in h} for h in a.state.log_history if "loss" in h]
    logs_b = [{k: h[k] for k in key if k in h} for h in b.state.log_history if "loss" in h]
    assert logs_a == logs_b and all(len(h) == len(key) for h in logs_a)
    ra, rb = read_records(tmp_path / "seq"), read_records(tmp_path / "conc")
    assert comparable(ra) == comparable(rb) and len(ra) == 16
    calls = [c["tool"] for r in rb if r["member"] == "latency" for c in r["calls"]]
    assert "work" in calls and "submit" in calls
    assert any(c["truncated"] is False and c["output_chars"] == 4000 for r in rb for c in r["calls"])
    # Where the time went is logged per batch; nothing was run outside its round.
    steps = [h for h in b.state.log_history if "loss" in h]
    assert all(
        h["ormix/env/open_s"] > 0 and "ormix/env/tools_s" in h and "ormix/env/generate_s" in h for h in steps
    )
    assert not any("ormix/env/calls_not_run_ahead" in h or "ormix/env/unused_sessions" in h for h in steps)
    # With lookahead on (the default, 1): the second batch's sessions were all opened during the first.
    assert b.lookahead == 1 and steps[1]["ormix/env/opened_ahead"] == 8 and b.ahead_unused == 0
    assert server_for("local:latency", mode="thread").active_sessions() == []


def test_a_batch_waits_about_one_open_and_one_call_per_round(tiny_model, tmp_path, monkeypatch):
    # Sequentially, 8 opens of 0.4 s and 8 calls of 0.25 s cost > 5 s; concurrently about 0.65 s.
    from ormix.trl._trainer import ConcurrentGRPOTrainer

    monkeypatch.setenv("ORMIX_LATENCY_OPEN_S", "0.4")
    monkeypatch.setenv("ORMIX_LATENCY_TOOL_S", "0.25")
    spec = OpenRewardSpec("local:latency", num_tasks=4, **T)

    def one_round(ctx):
        word = re.search(r"word '(\w+)'", ctx.user).group(1)
        return tool_call("work", text=word) if ctx.turn == 0 else "done"

    trainer = ConcurrentGRPOTrainer(
        model=tiny_model,
        args=grpo_args(tmp_path, "t", max_steps=1, max_tool_calling_iterations=1),
        train_dataset=spec.train_dataset,
        environment_factory=spec.environment_factory,
        reward_funcs=spec.reward_funcs,
        callbacks=spec.callbacks,
    )
    ScriptedPolicy(one_round).attach(trainer)
    trainer.train()
    step = next(h for h in trainer.state.log_history if "loss" in h)
    assert 0.4 <= step["ormix/env/open_s"] < 0.4 * 8 / 2  # far below 8 opens one after another
    assert 0.25 <= step["ormix/env/tools_s"] < 0.25 * 8 / 2


def test_max_concurrent_sessions_is_backpressure_not_failure(tiny_model, tmp_path):
    from ormix.trl._trainer import ConcurrentGRPOTrainer

    spec = OpenRewardSpec("local:latency", num_tasks=4, max_concurrent_sessions=2, **T)
    Latency.reset_peak()
    trainer = ConcurrentGRPOTrainer(
        model=tiny_model,
        args=grpo_args(tmp_path, "b", max_steps=1),
        train_dataset=spec.train_dataset,
        environment_factory=spec.environment_factory,
        reward_funcs=spec.reward_funcs,
        callbacks=spec.callbacks,
    )
    ScriptedPolicy(script).attach(trainer)
    trainer.train()
    step = next(h for h in trainer.state.log_history if "loss" in h)
    assert step["ormix/latency/coverage"] == 1.0  # every rollout ran, none failed
    assert Latency.peak == 2  # never more than two sessions opening or working at once


def test_faults_under_concurrency(tiny_model, tmp_path):
    # Failed opens (a third of the faulty tasks), a session that dies mid-episode, a tool past its deadline:
    # the same outcomes as TRL's sequential loop, and the round waits about one deadline, not one per rollout.
    from trl import GRPOTrainer

    from ormix.trl._trainer import ConcurrentGRPOTrainer

    def faulty_script(ctx):
        if ctx.turn == 0:
            if "Faulty task 4:" in ctx.user:  # die_after 2: the server forgets it after the second call
                return "\n".join(tool_call("echo", text=x) for x in "abc")
            if "Faulty task 1:" in ctx.user:
                return tool_call("slow", seconds=3.0)  # past the 0.5 s deadline
            answer = re.search(r"answer '(\d+)'", ctx.user)
            return tool_call("submit", answer=answer.group(1)) if answer else "the task did not start"
        return "done"

    outcomes, tools_s = [], None
    for trainer_class, name in ((GRPOTrainer, "seq"), (ConcurrentGRPOTrainer, "conc")):
        spec = OpenRewardSpec("local:faulty", indices=[0, 1, 2, 4], call_timeout_s=0.5, **T)
        trainer = trainer_class(
            model=tiny_model,
            args=grpo_args(tmp_path, name, max_steps=1, max_tool_calling_iterations=1),
            train_dataset=spec.train_dataset,
            environment_factory=spec.environment_factory,
            reward_funcs=spec.reward_funcs,
            callbacks=spec.callbacks,
        )
        ScriptedPolicy(faulty_script).attach(trainer)
        trainer.train()
        records = read_records(tmp_path / name)
        outcomes.append(sorted((r["task_index"], r["outcome"], r["error_kind"]) for r in records))
        if name == "conc":
            tools_s = next(h for h in trainer.state.log_history if "loss" in h)["ormix/env/tools_s"]
        assert server_for("local:faulty", mode="thread").active_sessions() == []
    assert outcomes[0] == outcomes[1]
    kinds = {(t, o, k) for t, o, k in outcomes[1]}
    assert (2, "error", "session_open") in kinds and (1, "error", "deadline") in kinds
    assert (4, "error", "session_died") in kinds and (0, "scored", None) in kinds
    assert 0.5 <= tools_s < 2 * 0.5 + 1.0  # two slow rollouts, one deadline of waiting


class _TallyParams(BaseModel, extra="forbid"):
    key: str = "no key"


class Tally(Environment):
    """Counts, in this process, the calls of its one tool per key (served in a thread: the test reads it)."""

    counts: dict[str, int] = {}

    @classmethod
    def list_splits(cls) -> list[str]:
        return ["train"]

    @classmethod
    def list_tasks(cls, split: str) -> list[dict]:
        return [{"n": i} for i in range(2)]

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text=f"Tally task {self.task_spec['n']}.")]

    @tool
    def tally(self, params: _TallyParams) -> ToolOutput:
        """Count one call of `key`."""
        Tally.counts[params.key] = Tally.counts.get(params.key, 0) + 1
        return ToolOutput(blocks=[TextBlock(text=str(Tally.counts[params.key]))], reward=1.0, finished=False)


def test_a_call_trl_cannot_make_is_not_run_ahead_and_the_next_runs_once(tiny_model, tmp_path):
    # `"arguments": []` fails in TRL's own `tool(**arguments)` before any tool runs: it must not have run
    # ahead either, and the rollout's next call must be answered from its round, not run a second time.
    from ormix.trl._trainer import ConcurrentGRPOTrainer

    def script(ctx):
        if ctx.turn == 0:
            key = f"{ctx.user.split('Tally task ')[1][0]}/{ctx.sample}"
            not_a_mapping = '<tool_call>\n{"name": "tally", "arguments": []}\n</tool_call>'
            return not_a_mapping + "\n" + tool_call("tally", key=key)
        assert "must be a mapping" in ctx.tool_results[0] and ctx.tool_results[1] == "1"
        return "done"

    Tally.counts.clear()
    with serve_in_thread([Tally]) as server:
        spec = OpenRewardSpec(server.url, env_name="tally", discover_task_tools=False)
        trainer = ConcurrentGRPOTrainer(
            model=tiny_model,
            args=grpo_args(tmp_path, "t", max_steps=1, per_device_train_batch_size=4),
            train_dataset=spec.train_dataset,
            environment_factory=spec.environment_factory,
            reward_funcs=spec.reward_funcs,
            callbacks=spec.callbacks,
        )
        ScriptedPolicy(script).attach(trainer)
        trainer.train()
        assert server.active_sessions() == []
    assert Tally.counts == {"0/0": 1, "0/1": 1, "1/0": 1, "1/1": 1}  # no "no key": the first call never ran
    records = read_records(tmp_path / "t")
    assert [[c["tool"] for c in r["calls"]] for r in records] == [["tally"]] * 4
    step = next(h for h in trainer.state.log_history if "loss" in h)
    assert "ormix/env/calls_not_run_ahead" not in step


def test_factories_and_reward_functions_survive_a_spawned_process():
    # TRL's AsyncGRPOTrainer pickles them into a spawned worker; there they must work against the same server.
    import multiprocessing

    mix = MixtureSpec(
        {
            "echo": OpenRewardSpec("local:echo", num_tasks=2, **T),
            "latency": OpenRewardSpec("local:latency", num_tasks=2, **T),
        },
        prompts_per_step=2,
        num_samples=4,
    )
    rows = mix.train_dataset.to_list()  # tasks and tools fetched here: the child reuses what was answered
    callbacks = mix.callbacks
    payload = pickle.dumps((mix.environment_factory, mix.reward_funcs, callbacks, rows))
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        rewards, callback_types = pool.apply(_child_episode, (payload,))
    assert rewards == {"echo": 1.0, "latency": 1.0}
    assert callback_types == [type(c).__name__ for c in callbacks] and callback_types


def test_an_ordered_mixture_passes_the_trainer_check_under_async_grpo_config(tmp_path):
    # AsyncGRPOConfig has no `shuffle_dataset`: TRL's async worker reads the dataset in order.
    from trl.experimental.async_grpo import AsyncGRPOConfig

    from ormix.trl._callbacks import check_trainer_args

    mix = MixtureSpec(
        {"echo": OpenRewardSpec("local:echo", num_tasks=2, **T), "seta": OpenRewardSpec("local:seta", **T)},
        prompts_per_step=2,
        num_samples=4,
    )
    assert mix.order_matters
    args = AsyncGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none")
    assert not hasattr(args, "shuffle_dataset")
    problems = check_trainer_args(mix, args)
    assert not any("shuffle_dataset" in p for p in problems)
    assert any(
        "remove_unused_columns=True" in p for p in problems
    )  # AsyncGRPOConfig's default strips columns
    args = AsyncGRPOConfig(
        output_dir=str(tmp_path), use_cpu=True, report_to="none", remove_unused_columns=False
    )
    assert not any("remove_unused_columns" in p for p in check_trainer_args(mix, args))


def _child_episode(payload: bytes) -> tuple[dict[str, float], list[str]]:
    factories, reward_funcs, callbacks, rows = pickle.loads(payload)
    out = {}
    for row in rows:
        member = row["environment"]
        if member in out:
            continue
        episode = factories[member]()
        prompt = episode.reset(**{k: v for k, v in row.items() if k != "environment"})
        word = re.search(r"word '(\w+)'", prompt).group(1)
        episode.submit(text=word)
        func = next(f for f in reward_funcs if f.__name__ == member)
        out[member] = func(environments=[episode])[0]
    return out, [type(c).__name__ for c in callbacks]


def test_episodes_are_safe_when_32_threads_drive_them_at_once():
    spec = OpenRewardSpec("local:latency", num_tasks=32, **T)
    factory, reward = spec.environment_factory, spec.reward_funcs
    words = {i: f"w{i}" for i in range(32)}
    results: dict[int, float] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(32)

    def drive(i: int) -> None:
        try:
            episode = factory()
            barrier.wait()
            episode.reset(task_index=i)
            episode.work(text="warm")
            episode.submit(text=words[i])
            results[i] = reward(environments=[episode])[0]
        except BaseException as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=drive, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and results == dict.fromkeys(range(32), 1.0)
    assert time.perf_counter() - t0 < 32 * 0.07  # they really ran at once (0.05 s open + 0.02 s call each)
    assert server_for("local:latency", mode="thread").active_sessions() == []


def test_a_changed_trl_is_refused_at_construction():
    from ormix.trl._trainer import check_trl_internals

    class Changed:
        def _generate_and_score_completions(self, inputs, extra):  # a new parameter
            pass

    problems = check_trl_internals(Changed)
    assert any("_generate_and_score_completions takes (inputs, extra)" in p for p in problems)
    assert any("_tool_call_loop does not exist" in p for p in problems)
    assert json.dumps(problems)  # plain strings, for the error message
