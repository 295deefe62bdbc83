"""`ormix report` read by columns (`ormix.app._scan`): the report the records in memory give, exactly.

The reference is the record-at-a-time path (tests/support/report_reference.py),
which holds every record as a dict; the columnar path reads the files with pyarrow and pools step by step.
"""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ormix._runs import RunDirectory
from ormix.app._report import write_report
from ormix.app._scan import scan_run
from ormix.rollout._episode import CallRecord, close_episode
from ormix.rollout._outcome import Outcome
from ormix.telemetry._records import (
    TelemetryRun,
    read_record_table,
    read_records,
    record_files,
    rollout_record,
)
from support.report_reference import eval_series, member_summary, reference_scan, step_series, trend


def _real_episode(spec, rng: random.Random):
    """A `local:echo` rollout: echo some words, then submit the right word, a wrong one, or nothing."""
    episode = spec.environment_factory()
    prompt = episode.reset(task_index=rng.randrange(4))
    word = prompt.split("'")[1]
    for _ in range(rng.randrange(3)):
        episode.echo(text=rng.choice(("apple", word)))
    choice = rng.random()
    if choice < 0.7:
        episode.submit(text=word if choice < 0.4 else "wrong")
    close_episode(episode)
    return episode


def _failed_episode(rng: random.Random, server: str | None = None):
    """An infrastructure failure (a real `Outcome`, real `CallRecord`s), as the transport reports it."""
    kind = rng.choice(("transport", "session_open"))
    calls = [CallRecord("echo", 0.0 if kind == "session_open" else 12.5, error=kind)]
    return SimpleNamespace(
        outcome=Outcome("error", None, kind, "connection reset"),
        calls=calls,
        rewards=[],
        finished=False,
        open_ms=rng.uniform(1, 30),
        starting_ms=0.0,
        task_index=rng.randrange(4),
        split="train",
        server=server,
    )


def _make_run(run_dir: Path, messy: bool) -> None:
    """Two ranks, 7 steps (the 7th never completed), evals at steps 2 and 5 with 2 samples a task, a resume
    from step 4 (rank 0 redoes 5-7), lines written twice; ``messy``: a torn last line and a line that is not
    an object (the reader's slow path)."""
    from ormix import OpenRewardSpec

    spec = OpenRewardSpec("local:echo", num_tasks=4, local_serve="thread")
    rng = random.Random(7)

    def batch(step: int, rank: int, mode: str) -> list[dict]:
        out = []
        members = ("easy", "hard") if mode == "train" else ("easy", "hard", "hard")
        for i in range(6):
            member = members[(i // 2) % len(members)]
            if rng.random() < 0.15:
                server = "http://10.0.0.7:8081" if member == "hard" and rng.random() < 0.5 else None
                episode = _failed_episode(rng, server)
            else:
                episode = _real_episode(spec, rng)
            record = rollout_record(
                episode,
                member=member,
                training_reward=episode.outcome.reward if mode == "train" else None,
                step=step,
                rank=rank,
                mode=mode,
                group=(rank * 6 + i) // 2 * 2,
            )
            if mode == "eval":
                record["prompt"] = [{"role": "user", "content": "say it " * 50}]
                record["completion"] = [{"role": "assistant", "content": "ok"}]
            if member == "hard" and i % 2 and mode == "train":  # a member whose groups are scored
                record.update(group_status="scored", group_reward=0.5, reward=(record["reward"] or 0) + 0.5)
            out.append(record)
        return out

    runs = [TelemetryRun(run_dir, rank=k, num_generations=2) for k in range(2)]
    for step in range(1, 8):
        for run in runs:
            run.write(batch(step, run.rank, "train"))
            if step in (2, 5):
                run.write(batch(step, run.rank, "eval"))
    # Rank 0 stopped and resumed from its checkpoint at step 4: steps 5-7 are cut and written again. The run
    # has 2 processes (simulated in this one), so rank 1's file is rank 1's to cut, not rank 0's.
    with pytest.MonkeyPatch.context() as env:
        env.setenv("WORLD_SIZE", "2")
        resumed = TelemetryRun(run_dir, rank=0, num_generations=2, resume_step=4)
    for step in range(5, 8):
        resumed.write(batch(step, 0, "train"))
    rank1 = run_dir / "rollouts" / "rank-1.jsonl"
    lines = rank1.read_text().splitlines(keepends=True)
    with open(rank1, "a", encoding="utf-8") as fh:
        fh.writelines(lines[3:6])  # the same lines twice (same seq): kept, as the reader keeps them
        if messy:
            fh.write("[1, 2]\n")
            fh.write('{"mode": "train", "step": 6, "member": "ea')  # a crash mid-write
    RunDirectory(run_dir).write_progress(6)


def _outputs(run_dir: Path, result) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in result.files}


@pytest.mark.parametrize("messy", [False, True])
def test_the_columnar_report_is_the_report_of_the_records_byte_for_byte(tmp_path, messy):
    run_dir = tmp_path / "run"
    _make_run(run_dir, messy)
    columnar = _outputs(run_dir, write_report(run_dir))
    in_memory = _outputs(run_dir, write_report(run_dir, reference_scan(run_dir)))
    assert sorted(columnar) == sorted(in_memory)
    assert {"summary.json", "report.md", "share.png", "eval.png"} <= set(columnar)
    for name in columnar:
        assert columnar[name] == in_memory[name], name
    summary = json.loads(columnar["summary.json"])
    # What the run holds: both members, the unfinished step left out, evals apart, a member on a server.
    assert list(summary["members"]) == ["easy", "hard"]
    assert summary["unfinished_step_records"] == 12 and sorted(summary["eval"]["steps"]) == ["2", "5"]
    assert summary["train_records"] == 6 * 12 + 3  # steps 1-6 of both ranks, and the lines written twice
    assert any("server/10.0.0.7:8081" in key for values in summary["steps"].values() for key in values)


def test_the_columns_hold_what_read_records_holds(tmp_path):
    run_dir = tmp_path / "run"
    _make_run(run_dir, messy=True)
    table = read_record_table(record_files(run_dir))
    records = [r for path in record_files(run_dir) for r in _jsonl_objects(path)]
    assert table.num_rows == len(records)
    for row, record in zip(table.to_pylist(), records, strict=True):
        assert row["seq"] == record.get("seq") and row["member"] == record.get("member")
        assert row["calls"] == [
            {"tool": c["tool"], "latency_ms": c["latency_ms"], "error": c["error"]} for c in record["calls"]
        ]
        assert "prompt" not in row  # an eval's texts are not read


def _jsonl_objects(path: Path) -> list[dict]:
    out = []
    for line in path.read_text().splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


_CALL = st.fixed_dictionaries(
    {
        "tool": st.sampled_from(["submit", "ls"]),
        "latency_ms": st.floats(0, 1e4),
        "error": st.sampled_from([None, None, "tool_failed", "wrong_env", "session_open"]),
    }
)
_RECORD = st.fixed_dictionaries(
    {
        "member": st.sampled_from(["a", "b", "c"]),
        "outcome": st.sampled_from(["scored", "unscored", "error"]),
        "env_reward": st.none() | st.floats(-1, 1),
        "reward": st.none() | st.floats(-2, 2),
        "rank": st.integers(0, 2),
        "group": st.none() | st.integers(0, 6),
        "task_index": st.integers(0, 3),
        "finished": st.booleans(),
        "calls": st.lists(_CALL, max_size=3),
    },
    optional={
        "mode": st.sampled_from(["train", "train", "eval"]),
        "step": st.none() | st.integers(0, 6),
        "open_ms": st.floats(0, 500),
        "error_kind": st.sampled_from(["transport", "deadline"]),
        "server": st.sampled_from(["http://h1:1", "http://h2:2"]),
        "group_status": st.sampled_from(["scored", "failed"]),
        "group_reward": st.floats(0, 1),
        "split": st.sampled_from(["train", "test"]),
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(_RECORD, min_size=1, max_size=40),
    files=st.integers(1, 3),
    completed=st.none() | st.integers(0, 6),
)
def test_scan_equals_the_record_functions_on_any_records(records, files, completed):
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp)
        (run_dir / "rollouts").mkdir()
        for i, record in enumerate(records):  # spread over rank files, each numbering its own lines
            with open(run_dir / "rollouts" / f"rank-{i % files}.jsonl", "a") as fh:
                fh.write(json.dumps({**record, "seq": i // files}) + "\n")
        if completed is not None:
            RunDirectory(run_dir).write_progress(completed)
        kept = [
            r
            for r in read_records(run_dir)
            if completed is None or not isinstance(r.get("step"), int) or r["step"] <= completed
        ]
        if not kept:
            with pytest.raises(FileNotFoundError):
                scan_run(run_dir)
            return
        scan = scan_run(run_dir)
    train = [r for r in kept if r.get("mode", "train") == "train"]
    evals = [r for r in kept if r.get("mode") == "eval"]
    # As summary.json writes them: the same values, bit for bit, in the same order.
    assert json.dumps(scan["summary"]) == json.dumps(member_summary(train))
    assert json.dumps(scan["series"]) == json.dumps(step_series(train))
    assert json.dumps(scan["evaluated"]) == json.dumps(eval_series(evals))
    assert json.dumps(scan["trend"]) == json.dumps(trend(train))
    assert (scan["records"], scan["train"], scan["evals"]) == (len(kept), len(train), len(evals))


def test_eval_summaries_and_comparisons_read_columns_and_give_the_same_figures(tmp_path):
    from ormix.app._compare import compare, load_eval
    from ormix.app._eval_dir import EvalDirectory
    from ormix.evaluation._summary import summarize

    run_dir = tmp_path / "run"
    _make_run(run_dir, messy=False)
    records = [r for r in read_records(run_dir) if r.get("mode") == "eval"]
    out = EvalDirectory(tmp_path / "eval")
    out.append([dict(r) for r in records], seq=0)
    with open(out.records_path, "a", encoding="utf-8") as fh:
        fh.write('{"mode": "eval", "member": "ea')  # a crash mid-write
    slim = out.summary_records()
    assert len(slim) == len(records) and not any("prompt" in r for r in slim)
    assert summarize(slim, (1, 2)) == summarize(records, (1, 2))
    loaded = load_eval(out.path)
    assert len(loaded.records) == len(records) and "completion" not in loaded.records[0]
    with_texts = type(loaded)(loaded.path, {}, records)
    assert compare([loaded, loaded]) == compare([with_texts, with_texts])
