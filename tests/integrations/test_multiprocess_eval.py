"""Evals on two processes (`torchrun --nproc_per_node 2`, gloo on CPU) equal the eval on one, and resume.

The evals play each task's reference solution (`--policy reference`): its outcomes do not depend on
sampling, so one process and two must agree task by task. (A model's eval samples each task on whichever
process the data loader gives it, from that process's generator, so with ``--policy model`` the tasks, their
sample counts and the summary's shape are equal across process counts but the sampled completions are not.)
Each run is a real one of tests/support/mp_eval.py: `run_eval` (the path of `ormix eval`) and
`evaluate_run` (the evals of `ormix train`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from ormix._runs import read_jsonl
from support.torchrun import rank_env, torchrun

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[1] / "support" / "mp_eval.py"
DEMO = Path(__file__).resolve().parents[2] / "mixtures" / "local-demo.yaml"  # 6 eval tasks, 2 a member


def _run(out: Path, mode: str, *extra: str, processes: int = 2) -> list[dict]:
    launcher = (
        [torchrun(), "--standalone", "--nproc_per_node", str(processes)]
        if processes > 1
        else [sys.executable]
    )
    proc = subprocess.run(
        [*launcher, str(SCRIPT), str(DEMO), str(out), mode, *extra],
        env=rank_env(SCRIPT),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return [json.loads(Path(f"{out}.rank-{rank}.json").read_text()) for rank in range(processes)]


def _outcomes(out: Path) -> dict[tuple[str, int], list[tuple[str, float]]]:
    """Per task, its samples' outcomes and rewards (sorted: which sample came first is not the task's)."""
    by_task: dict[tuple[str, int], list[tuple[str, float]]] = {}
    for r in read_jsonl(out / "rollouts.jsonl"):
        by_task.setdefault((r["member"], r["task_index"]), []).append((r["outcome"], r["env_reward"]))
    return {key: sorted(values) for key, values in by_task.items()}


@pytest.fixture(scope="module")
def one_process(tiny_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("one") / "eval"
    (result,) = _run(out, "eval", processes=1)
    return out, result


def test_an_interrupted_two_process_eval_resumes_and_equals_the_one_process_eval(one_process, tmp_path):
    one, single = one_process
    out = tmp_path / "eval"
    first = _run(out, "eval", "1")  # one chunk (3 tasks), then stopped
    # Every process agrees on what ran and what is left, and returns process 0's summary.
    assert [(r["ran"], r["resumed"], r["complete"]) for r in first] == [(3, 0, False)] * 2
    assert first[0]["summary"] == first[1]["summary"]
    after_first = read_jsonl(out / "rollouts.jsonl")
    # 3 tasks over 2 processes: one process's batch was padded with a task again; the extra samples dropped.
    assert sorted(Counter((r["member"], r["task_index"]) for r in after_first).values()) == [2, 2, 2]
    assert {r["rank"] for r in after_first} == {0, 1}

    second = _run(out, "eval")
    assert [(r["ran"], r["resumed"], r["complete"]) for r in second] == [(3, 3, True)] * 2
    assert second[0]["summary"] == second[1]["summary"] == single["summary"]
    assert _outcomes(out) == _outcomes(one)
    assert len(_outcomes(one)) == 6 and all(len(v) == 2 for v in _outcomes(one).values())
    # The first chunk's records were kept as they were: resuming ran only what was left.
    assert read_jsonl(out / "rollouts.jsonl")[: len(after_first)] == after_first


def test_the_evals_of_ormix_train_on_two_processes_equal_the_one_process_eval(one_process, tmp_path):
    one, single = one_process
    out = tmp_path / "eval"
    out.mkdir()
    (out / "rollouts.jsonl").write_text('{"member": "echo", "task_index": 0}\n')  # an earlier attempt's
    ranks = _run(out, "train")
    # A run's eval replaces what an earlier attempt left (process 0 alone removes it: none races the other).
    assert ranks[0]["summary"]["members"] == single["summary"]["members"]
    assert _outcomes(out) == _outcomes(one)
    assert json.loads((out / "manifest.json").read_text())["model"] == "tiny"


# `ormix train` itself: a one-step run of the untrained tiny model (it never calls a tool, so every eval
# rollout is unscored whatever it samples: the outcomes compare across process counts), evals before and
# after training. The run exits 1 (no member was ever scored: the untrained model); its evals are complete.
TRAIN_MIXTURE = """
name: mp-evals
members:
  echo:
    target: "local:echo"
    num_tasks: 2
    unscored_reward: 0.0
    eval: {indices: [0, 1, 2]}
evaluation:
  samples: 2
  before_training: true
train:
  max_steps: 1
  num_generations: 2
  per_device_train_batch_size: 2
  max_completion_length: 32
  max_tool_calling_iterations: 1
  save_strategy: "no"
  shuffle_dataset: false
  use_cpu: true
  report_to: none
  activation_checkpointing: false
"""


def _train(mixture: Path, out: Path, processes: int) -> None:
    launcher = (
        [torchrun(), "--standalone", "--nproc_per_node", str(processes)]
        if processes > 1
        else [sys.executable]
    )
    proc = subprocess.run(
        [*launcher, "-m", "ormix.app", "train", str(mixture), "--output-dir", str(out)],
        env={**rank_env(SCRIPT), "ORMIX_LOCAL_SERVE": "thread"},
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert proc.returncode in (0, 1) and "finished in" in proc.stdout, (
        proc.stdout[-3000:] + proc.stderr[-5000:]
    )


def test_ormix_train_on_two_processes_runs_its_evals_as_one_process_does(tiny_model, tmp_path):
    mixture = tmp_path / "mp-evals.yaml"
    mixture.write_text(TRAIN_MIXTURE)
    _train(mixture, tmp_path / "one", 1)
    _train(mixture, tmp_path / "two", 2)
    for phase in ("eval-before", "eval"):
        one = json.loads((tmp_path / "one" / phase / "summary.json").read_text())
        two = json.loads((tmp_path / "two" / phase / "summary.json").read_text())
        assert two["members"] == one["members"] and one["members"]["echo"]["tasks"] == 3
        assert _outcomes(tmp_path / "two" / phase) == _outcomes(tmp_path / "one" / phase)
        assert {r["rank"] for r in read_jsonl(tmp_path / "two" / phase / "rollouts.jsonl")} == {0, 1}
    evaluation = json.loads((tmp_path / "two" / "manifest.json").read_text())["evaluation"]
    assert evaluation["before"]["ran"] and evaluation["after"]["ran"]
    assert (tmp_path / "two" / "eval-comparison").is_dir()
