"""Rollout record files on disk: what a record can hold (a server's NaN), a fresh trainer over an earlier
run's records (set aside, never appended to), and a resume on fewer processes (every rank's file cut back).

Real parts: `local:ranked` served in a thread scores the groups, TRL trains the tiny model, and the files are
read back by the readers `ormix report` and `ormix show` use.
"""

from __future__ import annotations

import json
import logging

import pytest

from ormix import OpenRewardSpec
from ormix.ors import GroupScore
from ormix.rollout._episode import close_episodes
from ormix.server import serve_in_thread
from ormix.telemetry._records import (
    TelemetryRun,
    read_record_table,
    read_records,
    record_files,
    rollout_record,
)


def _record(step: int, outcome: str = "scored", **fields):
    return {"mode": "train", "step": step, "member": "a", "outcome": outcome, **fields}


# ── a NaN from a server ─────────────────────────────────────────────────


def test_a_nan_in_a_servers_group_metadata_is_written_as_null(tmp_path, caplog):
    # A Python server's json.dumps sends NaN; the client's parse of a score_group answer keeps it (what the
    # record got before, and `allow_nan=False` refused: the ValueError ended the training step).
    answer = json.loads(
        '{"scores": [{"reward": 1, "metadata": {"confidence": NaN, "spread": [Infinity, 0.5]}}]}'
    )
    (score,) = [GroupScore.model_validate(s) for s in answer["scores"]]
    with serve_in_thread(["local:ranked"]) as server:
        spec = OpenRewardSpec(
            server.url, env_name="ranked", num_tasks=1, group_scoring={"combine": "replace"}
        )
        episodes = []
        for text in ("4", "44"):
            episode = spec.environment_factory()
            episode.reset(task_index=0)
            episode.submit(answer=text)
            episodes.append(episode)
        try:
            rewards = spec.reward_funcs(environments=episodes, prompts=["a", "a"], completions=["4", "44"])
        finally:
            close_episodes(episodes)
    assert [e.group_status for e in episodes] == ["scored", "scored"]
    episodes[0].group_metadata = score.metadata  # the judging detail such a server sent
    records = [
        rollout_record(e, member="ranked", training_reward=r, step=1, rank=0, mode="train", group=0)
        for e, r in zip(episodes, rewards, strict=True)
    ]
    run = TelemetryRun(tmp_path)
    with caplog.at_level(logging.WARNING):
        run.write(records)
    assert "cannot write" not in caplog.text
    got = read_records(tmp_path)
    assert [r["group_metadata"] for r in got] == [
        {"confidence": None, "spread": [None, 0.5]},
        {"answer": "44", "length": 2},
    ]


def test_a_record_json_cannot_hold_is_logged_once_and_training_goes_on(tmp_path, caplog):
    run = TelemetryRun(tmp_path)
    with caplog.at_level(logging.WARNING):
        run.write([_record(1, reward=float("nan"))])  # raised ValueError into the training step
        run.write([_record(2, reward=float("inf"))])
        run.write([_record(3, reward=1.0)])
    said = [r.getMessage() for r in caplog.records if "cannot write rollout records" in r.getMessage()]
    assert len(said) == 1 and "ValueError" in said[0], said
    assert [(r["step"], r["seq"]) for r in read_records(tmp_path)] == [(3, 0)]


# ── a fresh start over an earlier run's records ─────────────────────────


def test_a_fresh_run_sets_an_earlier_runs_records_aside_torn_line_and_all(tmp_path, caplog):
    earlier = TelemetryRun(tmp_path, rank=0)
    earlier.write([_record(1), _record(2)])
    with open(earlier.records_path, "a", encoding="utf-8") as fh:
        fh.write('{"mode": "train", "step": 3, "mem')  # killed mid-write
    before = earlier.records_path.read_bytes()

    fresh = TelemetryRun(tmp_path, rank=0)
    with caplog.at_level(logging.WARNING):
        fresh.write([_record(1, "error"), _record(2, "error")])
        fresh.write([_record(3, "error")])  # its own records are appended to, not set aside again
    # Only this run's records are read: its first one was not swallowed by the torn line, seq starts at 0.
    assert [(r["step"], r["outcome"], r["seq"]) for r in read_records(tmp_path)] == [
        (1, "error", 0),
        (2, "error", 1),
        (3, "error", 2),
    ]
    assert record_files(tmp_path) == [fresh.records_path]
    table = read_record_table(record_files(tmp_path))
    assert table.column("outcome").to_pylist() == ["error"] * 3
    # Nothing lost: the earlier run's file, byte for byte, beside it; the warning names it.
    (moved,) = [p for p in fresh.records_path.parent.iterdir() if p != fresh.records_path]
    assert moved.name.startswith("rank-0.jsonl.before-") and moved.name.endswith("Z")
    assert moved.read_bytes() == before
    (said,) = [r.getMessage() for r in caplog.records if "earlier run" in r.getMessage()]
    assert moved.name in said and "Resume from a checkpoint" in said

    # A resumed run continues its records (cut back to the checkpoint); an empty file is no earlier run.
    TelemetryRun(tmp_path, rank=0, resume_step=2).write([_record(3)])
    assert [(r["step"], r["outcome"], r["seq"]) for r in read_records(tmp_path)] == [
        (1, "error", 0),
        (2, "error", 1),
        (3, "scored", 2),
    ]
    empty = TelemetryRun(tmp_path, rank=1)
    empty.records_path.write_text("")
    empty.write([_record(1, rank=1)])
    assert len(list(fresh.records_path.parent.iterdir())) == 3  # rank-0, rank-1 and the one set aside


@pytest.mark.slow
def test_a_second_python_api_trainer_on_the_same_output_dir_reports_its_own_steps_once(
    tiny_model, tmp_path, monkeypatch
):
    from transformers import AutoModelForCausalLM

    from ormix import MixtureSpec
    from ormix.workbench._scripted import tool_call
    from support.trl_args import cpu_grpo_config, scripted_trainer

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    out = tmp_path / "run"

    def train(answer: str) -> None:
        mix = MixtureSpec(
            {"echo": OpenRewardSpec("local:echo", num_tasks=2, local_serve="thread")},
            prompts_per_step=2,
            num_samples=2,
        )
        args = cpu_grpo_config(str(out), max_steps=1, max_completion_length=24, max_tool_calling_iterations=1)
        model = AutoModelForCausalLM.from_pretrained(tiny_model)
        script = lambda ctx: tool_call("submit", text=answer) if ctx.turn == 0 else "done"  # noqa: E731
        scripted_trainer(mix, model, args, script).train()

    train("nope")  # every rollout scored 0
    first = (out / "rollouts" / "rank-0.jsonl").read_bytes()
    train("nope again")
    records = read_records(out)
    assert records and [r["seq"] for r in records] == list(range(len(records)))
    assert {r["step"] for r in records} == {1}  # step 1 once, not twice
    (moved,) = (out / "rollouts").glob("rank-0.jsonl.before-*")
    assert moved.read_bytes() == first


# ── a resume on fewer processes ─────────────────────────────────────────


def _two_ranks_to_step_4(run_dir):
    for rank in (0, 1):
        TelemetryRun(run_dir, rank=rank).write([_record(s, rank=rank) for s in (1, 2, 3, 4)])


def test_a_resume_on_fewer_processes_cuts_every_ranks_records_back_to_the_checkpoint(tmp_path):
    _two_ranks_to_step_4(tmp_path)  # 2 processes ran steps 1..4, the checkpoint is step 2, then a crash
    resumed = TelemetryRun(tmp_path, rank=0, resume_step=2)  # resumed on 1 process
    resumed.write([_record(3, "error", rank=0)])
    assert [(r["step"], r["rank"], r["outcome"]) for r in read_records(tmp_path)] == [
        (1, 0, "scored"),
        (1, 1, "scored"),
        (2, 0, "scored"),
        (2, 1, "scored"),
        (3, 0, "error"),
    ]


def test_a_resume_on_fewer_processes_cuts_every_ranks_records_back_but_leaves_a_live_rank_its_own(
    tmp_path, monkeypatch
):
    _two_ranks_to_step_4(tmp_path / "fewer")
    TelemetryRun(tmp_path / "fewer", rank=0, resume_step=2)  # on 1 process: rank 1's file is nobody's
    _two_ranks_to_step_4(tmp_path / "same")
    monkeypatch.setenv("WORLD_SIZE", "2")  # as `accelerate launch` / `torchrun` set it: rank 1 is live
    TelemetryRun(tmp_path / "same", rank=0, resume_step=2)

    def steps(run_dir):
        return {k: [r["step"] for r in read_records(run_dir) if r["rank"] == k] for k in (0, 1)}

    assert steps(tmp_path / "fewer") == {0: [1, 2], 1: [1, 2]}
    assert steps(tmp_path / "same") == {0: [1, 2], 1: [1, 2, 3, 4]}  # rank 1 cuts its own as it resumes
    TelemetryRun(tmp_path / "same", rank=1, resume_step=2)
    assert steps(tmp_path / "same") == {0: [1, 2], 1: [1, 2]}


def test_a_fresh_run_on_fewer_processes_sets_aside_every_earlier_ranks_records(tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    _two_ranks_to_step_4(tmp_path)
    monkeypatch.delenv("WORLD_SIZE")
    TelemetryRun(tmp_path, rank=0).write([_record(1, "error", rank=0)])  # a fresh run on 1 process
    assert [(r["rank"], r["outcome"]) for r in read_records(tmp_path)] == [(0, "error")]
    moved = sorted(p.name.split(".before-")[0] for p in (tmp_path / "rollouts").glob("*.before-*"))
    assert moved == ["rank-0.jsonl", "rank-1.jsonl"]


def test_a_run_built_fresh_beside_a_checkpoint_sets_nothing_aside_so_it_can_still_resume(tmp_path):
    # Python API: a trainer built on the run's directory evaluates, then `train(resume_from_checkpoint=...)`:
    # its telemetry learns it resumes only then, after the evaluation wrote.
    _two_ranks_to_step_4(tmp_path)
    (tmp_path / "checkpoint-2").mkdir()
    TelemetryRun(tmp_path, rank=0).write([{**_record(4, rank=0), "mode": "eval"}])
    TelemetryRun(tmp_path, rank=0, resume_step=2)
    assert not list((tmp_path / "rollouts").glob("*.before-*"))
    assert [r["step"] for r in read_records(tmp_path) if r["rank"] == 0 and r["mode"] == "train"] == [1, 2]
