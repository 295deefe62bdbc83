"""An eval interrupted between chunks and resumed samples as the same eval run without a stop: each chunk
keeps its planned tasks and its seed, whatever a run before it finished."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from ormix._runs import read_jsonl
from ormix.app._eval import run_eval

pytestmark = pytest.mark.slow

# One echo member, 3 test tasks: a chunk a task, so a stop after chunk 0 leaves chunks 1 and 2 for the resume.
MIXTURE = (
    "members:\n"
    "  echo: {target: 'local:echo', num_tasks: 2, local_serve: thread,\n"
    "         eval: {split: test, indices: [0, 1, 2]}}\n"
    "seed: 0\n"
    "train: {use_cpu: true, max_completion_length: 16, temperature: 1.0}\n"
)


def _samples(out: Path) -> dict[int, list[tuple[str, float | None]]]:
    """Each task's (completion, reward) pairs, in record order."""
    found: dict[int, list[tuple[str, float | None]]] = defaultdict(list)
    for record in read_jsonl(out / "rollouts.jsonl"):
        found[record["task_index"]].append((str(record.get("completion")), record.get("env_reward")))
    return dict(found)


def test_a_resumed_eval_samples_as_an_uninterrupted_one(tiny_model, tmp_path, monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    mixture = tmp_path / "echo.yaml"
    mixture.write_text(MIXTURE)
    options = dict(samples=2, tasks_per_chunk=1)
    whole = run_eval(mixture, out_dir=tmp_path / "whole", **options)
    stopped = run_eval(mixture, out_dir=tmp_path / "resumed", max_chunks=1, **options)
    resumed = run_eval(mixture, out_dir=tmp_path / "resumed", **options)
    assert (whole.complete, stopped.complete, resumed.complete) == (True, False, True)
    assert (resumed.resumed_tasks, resumed.ran_tasks) == (1, 2)
    expected = _samples(whole.out_dir)
    assert sorted(expected) == [0, 1, 2] and all(len(pairs) == 2 for pairs in expected.values())
    assert _samples(resumed.out_dir) == expected
