"""Two processes (`torchrun --nproc_per_node 2`, gloo on CPU) train an adaptive mixture: both ranks' planners
decide the same weights and rows at every step, from statistics pooled over both ranks, and the weights move
toward the member whose GRPO groups teach.

The driver (tests/support/mp_adaptive_train.py) trains 5 steps of 4 prompts (2 per rank) on `solved`
(every rollout right: groups [1, 1], not informative) and `mixed` (sample 0 right, sample 1 wrong: groups
[1, 0], informative), warm-up 2 steps; each rank dumps its planner per step. The rollout records each rank
wrote (`rollouts/rank-<k>.jsonl`, a path independent of the planner's) are the ground truth for what each
rank generated and trained on.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

import ormix
from ormix.config import MixtureConfig
from ormix.mixture._planner import Planner
from ormix.telemetry._records import read_records
from support.mp_adaptive_train import MAX_STEPS, MIXTURE, NUM_GENERATIONS
from support.torchrun import rank_env, torchrun

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[1] / "support" / "mp_adaptive_train.py"
K = MIXTURE["prompts_per_step"]
PER_RANK = K // 2  # prompts (GRPO groups) each rank holds per step


def _planner() -> Planner:
    """A fresh planner of the driver's mixture (what one process would build)."""
    cfg = MixtureConfig.from_dict(MIXTURE)
    return Planner(cfg, {m: list(v["indices"]) for m, v in MIXTURE["members"].items()})


def _groups(records: list[dict]) -> dict[str, list[list]]:
    """member → [[task, rewards in rollout order]] of these records, in the order of their groups."""
    by_group: dict[int, dict] = {}
    for r in sorted(records, key=lambda r: (r["group"], r["seq"])):
        entry = by_group.setdefault(
            r["group"], {"member": r["member"], "task": r["task_index"], "rewards": []}
        )
        assert (entry["member"], entry["task"]) == (r["member"], r["task_index"]), r
        entry["rewards"].append(r["reward"])
    out: dict[str, list[list]] = {}
    for _, g in sorted(by_group.items()):
        out.setdefault(g["member"], []).append([g["task"], g["rewards"]])
    return out


def _canonical(groups: dict[str, list]) -> dict[str, list]:
    """Drop members without groups (the planner lists every member; a rank lists those it saw)."""
    return {m: [[int(t), [float(x) for x in r]] for t, r in g] for m, g in groups.items() if g}


def test_two_ranks_decide_the_same_adaptive_rows_from_pooled_statistics(tiny_model, tmp_path):
    out = tmp_path / "run"
    env = rank_env(SCRIPT)
    # Its own process group: a rank stuck in a collective (a deadlocked all_gather_object) is killed with
    # torchrun on timeout instead of outliving the test.
    proc = subprocess.Popen(
        [torchrun(), "--standalone", "--nproc_per_node", "2", str(SCRIPT), tiny_model, str(out)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(
            "the 2-rank run did not finish in 150 s (a rank stuck?):\n" + stdout[-3000:] + stderr[-5000:]
        )
    assert proc.returncode == 0, stdout[-3000:] + stderr[-5000:]

    dumps = [json.loads((out / "planner" / f"rank-{k}.json").read_text()) for k in (0, 1)]
    for rank, dump in enumerate(dumps):
        assert dump["rank"] == rank and dump["world_size"] == 2 and dump["backend"] == "gloo"
        assert dump["ormix"] == str(Path(ormix.__file__).resolve())
        assert [s["step"] for s in dump["steps"]] == list(range(1, MAX_STEPS + 1))
    records = [r for r in read_records(out) if r["mode"] == "train"]
    assert sorted({r["step"] for r in records}) == list(range(1, MAX_STEPS + 1))

    # (1) Same decisions: after every step, both planners hold the same state (pooled history, weights and
    # rows of every step decided so far, quota credits, task cursors), and both ended in the same state.
    for mine, theirs in zip(dumps[0]["steps"], dumps[1]["steps"], strict=True):
        assert mine["state"] == theirs["state"], f"ranks disagree after step {mine['step']}"
        assert mine["weights"] == theirs["weights"]
        # Decided through the step the loader fetched ahead (t + 1), never beyond the lag of 2.
        assert max(int(s) for s in mine["state"]["rows"]) == mine["step"] + 1
    assert dumps[0]["final"] == dumps[1]["final"]
    final = dumps[0]["final"]

    # ...and each rank trained on its own slice of those rows: global group g of a step is row g // G.
    for r in records:
        row = final["rows"][str(r["step"])][r["group"] // NUM_GENERATIONS]
        assert row == [r["member"], r["task_index"]], r
        assert r["group"] // (PER_RANK * NUM_GENERATIONS) == r["rank"]
    for step in range(1, MAX_STEPS + 1):
        assert sum(1 for r in records if r["step"] == step) == K * NUM_GENERATIONS

    # (2) Pooled statistics: what the planner observed for a step is the groups of rank 0 then rank 1,
    # each as that rank recorded it (its own share only) and as its rollout records say.
    for step in range(1, MAX_STEPS + 1):
        local = [_canonical(d["steps"][step - 1]["local_groups"]) for d in dumps]
        for rank in (0, 1):
            assert local[rank] == _groups([r for r in records if r["step"] == step and r["rank"] == rank])
            assert sum(len(g) for g in local[rank].values()) == PER_RANK
        pooled = _canonical(final["history"][str(step)])
        assert sum(len(g) for g in pooled.values()) == K == sum(len(g) for d in local for g in d.values())
        members = sorted(set(local[0]) | set(local[1]))
        assert pooled == {m: local[0].get(m, []) + local[1].get(m, []) for m in members}, step
    # Pooling is what moved step 3 (decided from step 1 alone): at step 1 each rank held groups of one member
    # only, so a planner fed one rank's groups sees no contrast and keeps 1/2 : 1/2.
    step1 = [set(_canonical(d["steps"][0]["local_groups"])) for d in dumps]
    assert step1 == [{"mixed"}, {"solved"}], "seed no longer splits step 1 by member; pick another"
    for dump in dumps:
        alone = _planner()
        alone.rows(1)
        alone.observe(1, {m: [(t, r) for t, r in g] for m, g in dump["steps"][0]["local_groups"].items()})
        assert alone.weights(3)["mixed"] == pytest.approx(0.5)
    assert final["weights"]["3"]["mixed"] == pytest.approx(0.8)

    # One process fed the pooled groups, as the records give them, decides exactly what both ranks decided.
    reference = _planner()
    for step in range(1, MAX_STEPS + 1):
        assert [list(r) for r in reference.rows(step)] == final["rows"][str(step)]
        reference.observe(step, _groups([r for r in records if r["step"] == step]))
    reference.rows(MAX_STEPS + 1)
    assert reference.state_dict() == final

    # (3) The script did what it says: `solved` groups all right, `mixed` groups one right and one wrong.
    for step in range(1, MAX_STEPS + 1):
        for member, groups in _groups([r for r in records if r["step"] == step]).items():
            for _, rewards in groups:
                assert sorted(rewards) == ([1.0, 1.0] if member == "solved" else [0.0, 1.0]), (step, member)
    # The weights move toward the informative member after warm-up: uniform for steps 1-2, then `mixed`
    # up by max_change (0.3) to 0.8, then to 1 - floor; `solved` (groups all right: nothing to learn) down to
    # its floor. The rows follow.
    weights = [dumps[0]["steps"][s - 1]["weights"] for s in range(1, MAX_STEPS + 1)]
    assert weights[0] == weights[1] == pytest.approx({"mixed": 0.5, "solved": 0.5})
    assert [w["mixed"] for w in weights[2:]] == pytest.approx([0.8, 0.95, 0.95])
    assert [w["solved"] for w in weights[2:]] == pytest.approx([0.2, 0.05, 0.05])
    late = [r["member"] for r in records if r["step"] >= 4]
    assert late.count("mixed") == len(late)  # 0.05 × 4 rows: `solved` is still owed less than a row
    # What rank 0 logged (pooled) is what the planners decided.
    history = json.loads((out / "log_history.json").read_text())
    logged = {h["step"]: h for h in history if "ormix/mixed/weight" in h}
    assert sorted(logged) == list(range(1, MAX_STEPS + 1))
    for step, log in logged.items():
        assert log["ormix/mixed/weight"] == pytest.approx(weights[step - 1]["mixed"])
        assert log["ormix/solved/weight"] == pytest.approx(weights[step - 1]["solved"])


def test_processes_whose_platform_priors_differ_start_from_process_0s_planner(tmp_path):
    script = SCRIPT.with_name("mp_planner_start.py")
    proc = subprocess.run(
        [torchrun(), "--standalone", "--nproc_per_node", "2", str(script), str(tmp_path)],
        env=rank_env(script),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    decided = [json.loads((tmp_path / f"rank-{k}.json").read_text()) for k in (0, 1)]
    assert decided[0] == decided[1]
    # Process 0's prior on both ranks: its task 0 set aside, task 1 (process 1's) drawn.
    tasks_of_a = {task for member, task in decided[0]["rows"] if member == "a"}
    assert 0 not in tasks_of_a and 1 in tasks_of_a
    assert "every process uses process 0's" in proc.stderr
