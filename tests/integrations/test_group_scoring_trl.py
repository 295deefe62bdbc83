"""Group scoring (ORS ``score_group``) end to end: a 2-member mixture, one pointwise member (`local:echo`) and
one whose groups the environment scores (`local:ranked`: the shortest correct answer is preferred), trained
through ormix's `ConcurrentGRPOTrainer` and TRL's `AsyncGRPOTrainer` (ormix's vLLM stand-in), and evaluated
by `ormix eval`. Real local servers, the tiny model, scripted sampling.

The script answers every task right; in each `ranked` group sample 0 answers ``"8"`` and sample 1 ``" 8 "``
(right, longer): pointwise 1.0 each, group scores 1.0 and 0.5, so with ``combine: add`` GRPO sees 2.0 and
1.5, and the per-member metrics say so. A judge that raises (split ``judge_fails``) leaves the pointwise
rewards and is counted.
"""

from __future__ import annotations

import re
import textwrap

import pytest

from ormix.mixture import load_mixture
from ormix.server._shared import server_for
from ormix.telemetry._metrics import batch_metrics
from ormix.telemetry._records import read_records
from ormix.workbench._scripted import ScriptContext, tool_call
from support.trl_args import cpu_grpo_config, scripted_trainer

pytestmark = pytest.mark.slow

MEMBERS = ("echo", "ranked")


def mixture(tmp_path, split: str = "train", name: str = "gs") -> str:
    file = tmp_path / f"{name}.yaml"
    file.write_text(
        textwrap.dedent(
            f"""\
            name: {name}
            members:
              echo: {{target: "local:echo", indices: [0, 1], local_serve: thread}}
              ranked:
                target: "local:ranked"
                split: {split}
                # One group a task: a stand-in's script numbers a prompt's samples in arrival order, and two
                # groups of one prompt in flight at once would interleave them.
                indices: [0, 1, 2, 3, 4, 5, 6, 7]
                local_serve: thread
                group_scoring: {{mode: auto, combine: add, candidates: trajectory}}
            prompts_per_step: 2
            num_samples: 8
            seed: 1
            """
        )
    )
    return str(file)


def answer(text: str, sample: int) -> str:
    """The scripted first turn for a prompt (the text `reset` appended to it) and the sample of its group."""
    sums = re.findall(r"What is (\d+) \+ (\d+)\?", text)
    if sums:
        a, b = sums[-1]
        total = str(int(a) + int(b))
        return tool_call("submit", answer=total if sample % 2 == 0 else f" {total} ")
    word = re.findall(r"word '(\w+)'", text)[-1]
    return tool_call("submit", text=word)


def sync_script(ctx: ScriptContext) -> str:
    return answer(ctx.user, ctx.sample) if ctx.turn == 0 else "done"


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")


def _check_records(records: list[dict], *, judge_fails: bool) -> None:
    echo = [r for r in records if r["member"] == "echo"]
    ranked = [r for r in records if r["member"] == "ranked"]
    assert echo and ranked
    # The pointwise member is untouched: no group fields, its reward is the environment's.
    assert all("group_status" not in r and r["reward"] == r["env_reward"] == 1.0 for r in echo)
    assert all(r["outcome"] == "scored" and r["env_reward"] == 1.0 for r in ranked)
    if judge_fails:
        # The judge raised: every ranked rollout keeps its pointwise reward, and says why.
        assert {r["group_status"] for r in ranked} == {"failed"}
        assert all(r["reward"] == 1.0 and r["group_reward"] is None for r in ranked)
        assert all("the judge failed" in r["group_error"] for r in ranked)
    else:
        assert {r["group_status"] for r in ranked} == {"scored"}
        assert sorted({r["group_reward"] for r in ranked}) == [0.5, 1.0]
        assert all(r["reward"] == pytest.approx(1.0 + r["group_reward"]) for r in ranked)
        # The environment's judging detail is kept: the answer it read from the candidate's submit call.
        assert all(
            (r["group_metadata"]["answer"] == r["group_metadata"]["answer"].strip())
            == (r["group_reward"] == 1.0)
            for r in ranked
        )


@pytest.mark.parametrize("split", ["train", "judge_fails"])
def test_the_sync_trainer_scores_groups_and_logs_the_combination(tiny_model, tmp_path, split):
    from ormix.trl import ConcurrentGRPOTrainer
    from ormix.trl._lifecycle import ProgressLine

    mix = load_mixture(mixture(tmp_path, split))
    args = cpu_grpo_config(str(tmp_path / "out"), max_completion_length=64, max_tool_calling_iterations=1)
    trainer = scripted_trainer(mix, tiny_model, args, sync_script, ConcurrentGRPOTrainer)
    trainer.train()

    records = read_records(tmp_path / "out")
    _check_records(records, judge_fails=split == "judge_fails")
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 2
    for step, log in enumerate(logs, start=1):
        batch = [r for r in records if r["step"] == step]
        for key, value in batch_metrics(batch, MEMBERS).items():
            assert log[key] == pytest.approx(value), (step, key)
        assert "ormix/echo/group_scored" not in log
        assert log["ormix/ranked/coverage"] == 1.0
        if split == "judge_fails":
            # Counted, never a 0: the failure is a metric, and GRPO saw the pointwise rewards.
            assert log["ormix/ranked/group_score_failed"] == 1.0 and log["ormix/ranked/group_scored"] == 0.0
            assert "ormix/ranked/group_reward" not in log
            assert log["rewards/ranked/mean"] == 1.0
        else:
            assert log["ormix/ranked/group_score_failed"] == 0.0 and log["ormix/ranked/group_scored"] == 1.0
            assert log["ormix/ranked/group_reward"] == pytest.approx(0.75)
            assert log["ormix/ranked/combined_reward"] == pytest.approx(1.75)
            assert log["rewards/ranked/mean"] == pytest.approx(1.75)
            assert log["ormix/ranked/informative_groups"] == 1.0  # the group score makes them teach
    # The step line says it.
    line = " │ ".join(ProgressLine(list(MEMBERS), None, tmp_path).parts(trainer.state, logs[-1]))
    if split == "judge_fails":
        assert "ranked[/cyan] r  1.00 cov  1.00 group scoring failed 100%" in line, line
    else:
        assert "ranked[/cyan] r  1.00 cov  1.00 group  0.75 combined  1.75" in line, line
    # Each group was scored on one of its own sessions, then every session was closed.
    for target in ("local:echo", "local:ranked"):
        assert server_for(target, mode="thread").active_sessions() == []


def standin_script(prompt: str, sample: int) -> str:
    return "done" if "<tool_response>" in prompt else answer(prompt, sample)


def test_the_async_trainer_scores_groups_in_its_worker(tiny_model, tmp_path):
    from trl.experimental.async_grpo import AsyncGRPOConfig

    from ormix.trl._async_grpo import AsyncMixtureTrainer
    from ormix.workbench._vllm_standin import StandInWeightTransfer, VLLMStandIn

    mix = load_mixture(mixture(tmp_path))
    run_dir = tmp_path / "run"
    with VLLMStandIn(tiny_model, script=standin_script) as standin:
        args = AsyncGRPOConfig(
            output_dir=str(run_dir),
            per_device_train_batch_size=4,
            num_generations=2,
            max_steps=3,
            max_completion_length=48,
            learning_rate=1e-4,
            logging_steps=1,
            report_to="none",
            bf16=False,
            use_cpu=True,
            dtype="float32",
            save_strategy="no",
            disable_tqdm=True,
            vllm_server_base_url=standin.url,
            token_budget=0,
            max_inflight_tasks=4,
            queue_maxsize=8,
            weight_sync_steps=1,
            max_tool_calling_iterations=1,
        )
        trainer = AsyncMixtureTrainer(
            tiny_model, mix, args, weight_transfer=StandInWeightTransfer(standin), score_queue_maxsize=1
        )
        trainer.train()

    records = read_records(run_dir)
    _check_records(records, judge_fails=False)
    # Each ranked group: both rollouts scored together, on the group's own sessions.
    groups: dict = {}
    for r in records:
        if r["member"] == "ranked":
            groups.setdefault((r["policy_version"], r["group"]), []).append(r["group_reward"])
    assert all(sorted(g) == [0.5, 1.0] for g in groups.values()), groups
    steps = [h for h in trainer.state.log_history if "loss" in h]
    shown = 0
    for entry in steps:
        batch = [r for r in records if r["step"] == entry["step"]]
        for key, value in batch_metrics(batch, MEMBERS).items():
            assert entry[key] == pytest.approx(value), (entry["step"], key)
        if any(r["member"] == "ranked" for r in batch):
            shown += 1
            assert entry["ormix/ranked/group_reward"] == pytest.approx(0.75)
            assert entry["ormix/ranked/combined_reward"] == pytest.approx(1.75)
    assert shown >= 1
    for target in ("local:echo", "local:ranked"):
        assert server_for(target, mode="thread").active_sessions() == []


REFERENCE = """\
def solve(row):
    return [("submit", {"answer": str(row["a"] + row["b"])})]
"""


def test_ormix_eval_scores_groups_and_reports_them(tmp_path, monkeypatch):
    from ormix._runs import read_jsonl
    from ormix.app._eval import run_eval

    monkeypatch.setenv("ORMIX_LOCAL_SERVE", "thread")
    (tmp_path / "gs_reference.py").write_text(REFERENCE)
    file = tmp_path / "gs-eval.yaml"
    file.write_text(
        textwrap.dedent(
            """\
            name: gs-eval
            members:
              echo: {target: "local:echo", num_tasks: 2}
              ranked:
                target: "local:ranked"
                num_tasks: 2
                reference: "gs_reference:solve"
                group_scoring: {mode: on, combine: weighted, weight: 0.5, candidates: trajectory}
            """
        )
    )
    # Chunks of 2 tasks: each chunk's groups start at 0 again, and are still told apart.
    result = run_eval(str(file), policy="reference", samples=2, tasks_per_chunk=2, out_dir=tmp_path / "eval")

    records = list(read_jsonl(tmp_path / "eval" / "rollouts.jsonl"))
    ranked = [r for r in records if r["member"] == "ranked"]
    assert len(ranked) == 4 * 2  # the test split's 4 tasks, 2 samples each
    # Both samples of a task give the same right answer: both preferred (1.0), weighted with pointwise 1.0.
    assert all(
        r["group_status"] == "scored" and r["group_reward"] == 1.0 and r["reward"] == 1.0 for r in ranked
    )
    grouped = result.summary["members"]["ranked"]["group_scoring"]
    assert grouped["groups"] == {"scored": 4}
    assert grouped["group_reward"]["value"] == 1.0 and grouped["combined_reward"]["value"] == 1.0
    assert "group_scoring" not in result.summary["members"]["echo"]
    report = (tmp_path / "eval" / "report.md").read_text()
    assert "- ranked: group scoring: 4 of 4 groups scored; group_reward 1.00" in report
