"""Two processes (`torchrun --nproc_per_node 2`, gloo on CPU): the per-member metrics TRL logs, pooled over
both ranks by `log_metric`, equal those recomputed from the merged rollout records of both ranks."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ormix.telemetry._metrics import batch_metrics
from ormix.telemetry._records import read_records
from support.torchrun import rank_env, torchrun

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[1] / "support" / "mp_telemetry_train.py"


def test_two_ranks_log_what_their_merged_records_say(tiny_model, tmp_path):
    out = tmp_path / "run"
    env = rank_env(SCRIPT)
    proc = subprocess.run(
        [torchrun(), "--standalone", "--nproc_per_node", "2", str(SCRIPT), tiny_model, str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]

    files = sorted(p.name for p in (out / "rollouts").glob("rank-*.jsonl"))
    assert files == ["rank-0.jsonl", "rank-1.jsonl"]
    records = read_records(out)
    assert len(records) == 2 * 8  # 2 steps × (2 ranks × 4 rollouts)
    for rank in (0, 1):
        mine = [r for r in records if r["rank"] == rank]
        assert len(mine) == 8 and all(
            r["group"] // 4 == rank for r in mine
        )  # rank k holds global slots 4k..4k+3
    assert {r["outcome"] for r in records} == {"scored", "unscored"}

    history = json.loads((out / "log_history.json").read_text())
    logs = {h["step"]: h for h in history if "ormix/a/share" in h}
    assert sorted(logs) == [1, 2]
    for step, log in logs.items():
        batch = [r for r in records if r["step"] == step]
        # Member a (3 of 4 prompts per step) is on both ranks: its metrics only agree if pooling is right.
        assert {r["rank"] for r in batch if r["member"] == "a"} == {0, 1}
        expected = batch_metrics(batch, ["a", "b"])
        logged = {k: v for k, v in log.items() if k.startswith("ormix/") and v is not None}
        assert set(logged) == set(expected)
        for key, value in expected.items():
            assert logged[key] == pytest.approx(value, rel=1e-5, abs=1e-6), (step, key)
        assert log["ormix/a/share"] + log["ormix/b/share"] == pytest.approx(1.0)
        assert log["ormix/a/share"] == pytest.approx(0.75)
        assert log["ormix/b/unscored_rate"] == pytest.approx(0.5)  # b's sample 1 never calls a tool


GROUP_SCRIPT = SCRIPT.with_name("mp_group_scoring_train.py")


def test_group_scoring_on_two_ranks_scores_each_group_whole_on_its_rank(tiny_model, tmp_path):
    # Each rank's generation batch (per_device_train_batch_size 4 × steps_per_generation 1) holds whole groups
    # of 2, so the environment ranks both candidates of every group; a split geometry is refused
    # (tests/rollout/test_group_scoring.py).
    out = tmp_path / "run"
    proc = subprocess.run(
        [torchrun(), "--standalone", "--nproc_per_node", "2", str(GROUP_SCRIPT), tiny_model, str(out)],
        env=rank_env(GROUP_SCRIPT),
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    records = read_records(out)
    assert len(records) == 2 * 8 and {r["rank"] for r in records} == {0, 1}
    groups: dict[tuple[int, int], list[dict]] = {}
    for r in records:
        assert r["group"] // 4 == r["rank"]  # rank k holds global slots 4k..4k+3: two whole groups
        groups.setdefault((r["step"], r["group"]), []).append(r)
    assert len(groups) == 8 and all(len(g) == 2 for g in groups.values())
    for group in groups.values():
        assert len({r["task_index"] for r in group}) == 1
        # Both candidates ranked together: the exact answer 1.0, the spaced one 0.5; GRPO got the sum.
        assert sorted(r["group_reward"] for r in group) == [0.5, 1.0]
        assert all(r["group_status"] == "scored" and r["env_reward"] == 1.0 for r in group)
        assert all(r["reward"] == pytest.approx(1.0 + r["group_reward"]) for r in group)


SPLIT_SCRIPT = Path(__file__).with_name("mp_split_group_train.py")


def test_a_group_split_over_two_ranks_is_logged_and_alarmed_as_one_group(tiny_model, tmp_path):
    # G=8 over 4 rollouts a rank: rank 0's half scores 1.0, rank 1's 0.0. TRL pools each rank's judgement of
    # its half (0.0 twice); the telemetry callback judges the group whole, as one process would.
    out = tmp_path / "run"
    proc = subprocess.run(
        [torchrun(), "--standalone", "--nproc_per_node", "2", str(SPLIT_SCRIPT), tiny_model, str(out)],
        env=rank_env(SPLIT_SCRIPT),
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    for trainer in ("GRPOTrainer", "ConcurrentGRPOTrainer"):
        where = out / trainer
        records = read_records(where)
        assert len(records) == 2 * 8 and {r["group"] for r in records} == {0}
        history = json.loads((where / "log_history.json").read_text())
        logs = {h["step"]: h for h in history if "ormix/a/share" in h}
        assert sorted(logs) == [1, 2]
        for step, log in logs.items():
            batch = [r for r in records if r["step"] == step]
            assert sorted(r["reward"] for r in batch) == [0.0] * 4 + [1.0] * 4
            assert batch_metrics(batch, ["a"])["ormix/a/informative_groups"] == 1.0
            assert log["ormix/a/informative_groups"] == 1.0, (trainer, step)
        assert "uninformative" not in json.loads((where / "no_learning.json").read_text())
        # A `report_to` logger (wandb, tensorboard) sees the whole-group figure with ormix's own trainer,
        # which puts ormix's telemetry before it; with TRL's, it sees TRL's per-process one (as the docs say).
        seen = [
            e["ormix/a/informative_groups"]
            for e in json.loads((where / "logged.json").read_text())
            if "ormix/a/share" in e
        ]
        assert seen == ([1.0, 1.0] if trainer == "ConcurrentGRPOTrainer" else [0.0, 0.0]), trainer
