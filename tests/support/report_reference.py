"""The report's record-at-a-time reference: every record a dict in memory, each figure computed the plain way.

`ormix report` reads a run's record files by columns (`ormix.app._scan.scan_run`); the tests check that it
gives these figures exactly (tests/diagnostics/test_report_scan.py), and `benchmarks/scale_records.py`
times this reading against it. `reference_scan(run_dir)` returns what `scan_run` returns, so
`write_report(run_dir, reference_scan(run_dir))` writes the report of the records read this way.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ormix._runs import RunDirectory
from ormix.app._report import TREND_METRICS, eval_ks, percentile
from ormix.evaluation._summary import summarize as summarize_eval
from ormix.telemetry._metrics import batch_metrics, member_values, metric_key, summarize
from ormix.telemetry._records import read_records


def _members(records: Sequence[Mapping[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for r in records:
        seen.setdefault(str(r.get("member")), None)
    return list(seen)


def _batches(records: Sequence[Mapping[str, Any]]) -> dict[tuple[Any, Any], list[Mapping[str, Any]]]:
    """The records of each batch the trainer scored (a mode and a step), in the order they came."""
    out: dict[tuple[Any, Any], list[Mapping[str, Any]]] = defaultdict(list)
    for r in records:
        out[(r.get("mode", "train"), r.get("step"))].append(r)
    return out


def _pooled(batches: Iterable[Sequence[Mapping[str, Any]]], member: str) -> dict[str, list[float]]:
    """A member's values of every batch (`ormix.telemetry._metrics.member_values`), pooled as TRL does."""
    out: dict[str, list[float]] = defaultdict(list)
    for batch in batches:
        for metric, values in member_values(batch, member, len(batch)).items():
            out[metric] += values
    return out


def member_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Whole-run statistics per member: the trainer's metrics over all its batches
    (`ormix.telemetry._metrics`),
    plus the training reward, the error and call-error mix, latency percentiles and per-tool figures.

    Example:
        >>> member_summary([{"member": "a", "outcome": "scored", "env_reward": 1.0, "reward": 1.0,
        ...                  "calls": [], "step": 1, "group": 0}])["a"]["coverage"]
        1.0
    """
    batches = list(_batches(records).values())
    out: dict[str, dict[str, Any]] = {}
    for member in _members(records):
        pooled = _pooled(batches, member)
        mean = summarize(pooled)
        mine = [r for r in records if r.get("member") == member]
        calls = [c for r in mine for c in r.get("calls") or []]
        per_tool: dict[str, dict[str, Any]] = {}
        for name in sorted({c["tool"] for c in calls}):
            these = [c for c in calls if c["tool"] == name]
            # The latencies of calls that reached the server, by the metrics' own rule.
            only = [{**r, "calls": [c for c in r.get("calls") or [] if c["tool"] == name]} for r in mine]
            latency = member_values(only, member, len(only)).get("tool_ms", [])
            per_tool[name] = {
                "calls": len(these),
                "errors": sum(c.get("error") is not None for c in these),
                "p50_ms": percentile(latency, 50),
                "p95_ms": percentile(latency, 95),
            }
        training = [r["reward"] for r in mine if r.get("reward") is not None]
        out[member] = {
            "rollouts": len(mine),
            "share": mean.get("share"),
            "reward": mean.get("reward"),
            "training_reward": sum(training) / len(training) if training else None,
            "coverage": mean.get("coverage"),
            "unscored_rate": mean.get("unscored_rate"),
            "error_rate": mean.get("error_rate"),
            "errors": dict(Counter(r.get("error_kind") or "error" for r in mine if r["outcome"] == "error")),
            "finished_rate": mean.get("finished_rate"),
            "tool_calls": mean.get("tool_calls"),
            "tool_errors": mean.get("tool_errors"),
            "wrong_env_calls": mean.get("wrong_env_calls"),
            "call_errors": dict(Counter(c["error"] for c in calls if c.get("error") is not None)),
            "informative_groups": mean.get("informative_groups"),
            "open_ms_p50": percentile(pooled["session_open_ms"], 50),
            "open_ms_p95": percentile(pooled["session_open_ms"], 95),
            "tool_ms_p50": percentile(pooled["tool_ms"], 50),
            "tool_ms_p95": percentile(pooled["tool_ms"], 95),
            "tools": per_tool,
        }
    return out


def step_series(records: Sequence[Mapping[str, Any]]) -> dict[int, dict[str, float]]:
    """Per training step, the `ormix/<member>/<metric>` values recomputed from that step's records, plus
    `ormix/<member>/tool_ms_p50` / `_p95` latency percentiles.

    Example:
        >>> step_series([{"member": "a", "outcome": "scored", "env_reward": 1.0, "reward": 1.0, "calls": [],
        ...               "step": 3, "mode": "train"}])[3]["ormix/a/coverage"]
        1.0
    """
    members = _members(records)
    out: dict[int, dict[str, float]] = {}
    batches = _batches(records)
    for mode, step in sorted(
        (k for k in batches if k[0] == "train" and k[1] is not None), key=lambda k: k[1]
    ):
        batch = batches[(mode, step)]
        values = batch_metrics(batch, members)
        for member in members:
            latency = member_values(batch, member, len(batch)).get("tool_ms", [])
            for q in (50, 95):
                p = percentile(latency, q)
                if p is not None:
                    values[metric_key(member, f"tool_ms_p{q}")] = p
        out[int(step)] = values
    return out


def eval_series(records: Sequence[Mapping[str, Any]]) -> dict[int, dict[str, Any]]:
    """Per step an evaluation ran at, `ormix.evaluation._summary.summarize` of its records (mode ``eval``):
    per member pass@1, pass@k and pass^k (k = samples per task, `eval_ks`), mean reward, coverage, with
    intervals over tasks.

    Example:
        >>> rec = {"member": "a", "mode": "eval", "step": 2, "task_index": 0, "outcome": "scored"}
        >>> series = eval_series([{**rec, "env_reward": 1.0}, {**rec, "env_reward": 0.0}])
        >>> series[2]["k"], series[2]["members"]["a"]["pass@2"]["value"]
        ([1, 2], 1.0)
    """
    by_step: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    for r in records:
        if r.get("mode") == "eval":
            by_step[int(r.get("step") or 0)].append(r)
    return {step: summarize_eval(these, eval_ks(these)) for step, these in sorted(by_step.items())}


def trend(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Did it learn? Per member, `member_summary`'s reward, training reward and coverage over the first and
    the last third of the training steps that have records (rollouts pooled, not steps averaged: a step of a
    tiny batch says little alone). Empty with fewer than three steps.

    Example:
        >>> rec = [{"member": "a", "outcome": "scored", "env_reward": float(s > 2), "reward": float(s > 2),
        ...         "step": s} for s in (1, 2, 3)]
        >>> t = trend(rec)
        >>> t["first_steps"], t["last_steps"], t["members"]["a"]["reward"]
        ([1, 1], [3, 3], [0.0, 1.0])
    """
    train = [r for r in records if r.get("mode", "train") == "train" and isinstance(r.get("step"), int)]
    steps = sorted({int(r["step"]) for r in train})
    if len(steps) < 3:
        return {}
    third = len(steps) // 3
    first, last = set(steps[:third]), set(steps[-third:])
    early = member_summary([r for r in train if r["step"] in first])
    late = member_summary([r for r in train if r["step"] in last])
    return {
        "first_steps": [steps[0], steps[third - 1]],
        "last_steps": [steps[-third], steps[-1]],
        "members": {
            m: {k: [early.get(m, {}).get(k), late.get(m, {}).get(k)] for k in TREND_METRICS}
            for m in _members(train)
        },
    }


def scan_records(run_dir: Path, records: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The report's figures from records held in memory (the records a caller passes)."""
    # Rollouts of a step that never completed (the run stopped in it) are not part of the run.
    completed = RunDirectory(run_dir).completed_step()
    unfinished = 0
    if completed is not None:
        kept = [r for r in records if not isinstance(r.get("step"), int) or r["step"] <= completed]
        unfinished = len(records) - len(kept)
        records = kept
    if not records:
        raise FileNotFoundError(f"no rollout records under {run_dir / 'rollouts'} (rank-*.jsonl)")
    train = [r for r in records if r.get("mode", "train") == "train"]
    evals = [r for r in records if r.get("mode") == "eval"]
    return dict(
        members=_members(records),
        summary=member_summary(train),
        series=step_series(train),
        evaluated=eval_series(evals),
        trend=trend(train),
        records=len(records),
        train=len(train),
        evals=len(evals),
        unfinished=unfinished,
    )


def reference_scan(run_dir: Path, records: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """`scan_run`'s figures from the run's records read into memory (or the records given)."""
    return scan_records(Path(run_dir), list(read_records(run_dir) if records is None else records))
