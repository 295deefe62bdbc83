"""A run's records read by columns for `ormix report`: the same figures as the record-at-a-time functions of
`ormix.app._report`, in time linear in the records and memory of about 200 bytes a rollout.

The record files are read with pyarrow (`ormix.telemetry._records.read_record_table`: only the fields a
report reads, whatever the records' texts), ordered as `read_records` orders them ((mode, step, rank, seq),
stable), and walked one training step at a time: each step's batch is rebuilt as dicts, its values are the
same `ormix.telemetry._metrics.member_values`, and what the whole run needs is pooled as it goes (running sums
in pooling order, the latencies a percentile needs), so no record is kept. The evaluations are summarised
one evaluation at a time (`ormix.evaluation._summary.summarize`).

Example:
    >>> import tempfile
    >>> from ormix.telemetry._records import TelemetryRun
    >>> rec = {"mode": "train", "outcome": "scored", "env_reward": 1.0, "reward": 1.0, "calls": []}
    >>> with tempfile.TemporaryDirectory() as run_dir:
    ...     TelemetryRun(run_dir).write([{**rec, "member": "a", "step": s} for s in (1, 2, 3)])
    ...     scan = scan_run(run_dir)
    >>> scan["members"], sorted(scan["series"]), scan["summary"]["a"]["coverage"]
    (['a'], [1, 2, 3], 1.0)
"""

from __future__ import annotations

import functools
import itertools
import os
from array import array
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ormix.app._report import TREND_METRICS, eval_ks, percentile, sorted_percentile
from ormix.app._workspace import Workspace
from ormix.evaluation._summary import summarize as summarize_eval
from ormix.telemetry._metrics import member_values, metric_key, summarize
from ormix.telemetry._records import read_record_table, record_files

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

#: Rows turned back into dicts at a time (a few MB of Python objects).
CHUNK_ROWS = 16_384

#: The pooled metrics `member_summary` reports, as their means.
_POOLED = (
    "share",
    "reward",
    "coverage",
    "unscored_rate",
    "error_rate",
    "finished_rate",
    "tool_calls",
    "tool_errors",
    "wrong_env_calls",
    "informative_groups",
)


@dataclass
class _Pool:
    """One member's values pooled over the batches, as `member_summary` pools them, without the records.

    A mean is kept as a running sum in pooling order (`sum` of the pooled list adds the same floats in the
    same order, so the means are equal to the last bit); latencies are kept as doubles for percentiles.
    ``full`` is False for the trend's thirds, which need only the means.
    """

    full: bool = True
    rollouts: int = 0
    sums: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    training: float = 0.0
    trained: int = 0
    open_ms: array = field(default_factory=lambda: array("d"))
    tool_ms: array = field(default_factory=lambda: array("d"))
    errors: Counter[str] = field(default_factory=Counter)
    call_errors: Counter[str] = field(default_factory=Counter)
    tools: dict[str, list[Any]] = field(default_factory=dict)  # name -> [calls, errors, latencies]

    def add(self, member: str, values: Mapping[str, list[float]], mine: Sequence[Mapping[str, Any]]) -> None:
        for metric in _POOLED:
            these = values.get(metric)
            if these:
                self.sums[metric] = sum(these, self.sums.get(metric, 0.0))
                self.counts[metric] = self.counts.get(metric, 0) + len(these)
        self.rollouts += len(mine)
        rewards = [r["reward"] for r in mine if r.get("reward") is not None]
        self.training = sum(rewards, self.training)
        self.trained += len(rewards)
        if not self.full or not mine:
            return
        self.open_ms.extend(values.get("session_open_ms", ()))
        self.tool_ms.extend(values.get("tool_ms", ()))
        self.errors.update(r.get("error_kind") or "error" for r in mine if r["outcome"] == "error")
        by_tool: dict[str, list[Mapping[str, Any]]] = {}
        for r in mine:
            for c in r.get("calls") or ():
                by_tool.setdefault(c["tool"], []).append(c)
                if c.get("error") is not None:
                    self.call_errors[c["error"]] += 1
        for name, calls in by_tool.items():
            entry = self.tools.setdefault(name, [0, 0, array("d")])
            entry[0] += len(calls)
            entry[1] += sum(c.get("error") is not None for c in calls)
            # The latencies of calls that reached the server, by the metrics' own rule.
            only = [{"member": member, "outcome": "unscored", "calls": calls}]
            entry[2].extend(member_values(only, member, 1).get("tool_ms", ()))

    def mean(self, metric: str) -> float | None:
        if metric == "training_reward":
            return self.training / self.trained if self.trained else None
        n = self.counts.get(metric, 0)
        return self.sums[metric] / n if n else None

    def summary(self) -> dict[str, Any]:
        """`member_summary`'s entry for this member."""
        open_p = _percentiles(self.open_ms)
        tool_p = _percentiles(self.tool_ms)
        per_tool = {}
        for name in sorted(self.tools):
            calls, errors, latency = self.tools[name]
            p50, p95 = _percentiles(latency)
            per_tool[name] = {"calls": calls, "errors": errors, "p50_ms": p50, "p95_ms": p95}
        return {
            "rollouts": self.rollouts,
            "share": self.mean("share"),
            "reward": self.mean("reward"),
            "training_reward": self.mean("training_reward"),
            "coverage": self.mean("coverage"),
            "unscored_rate": self.mean("unscored_rate"),
            "error_rate": self.mean("error_rate"),
            "errors": dict(self.errors),
            "finished_rate": self.mean("finished_rate"),
            "tool_calls": self.mean("tool_calls"),
            "tool_errors": self.mean("tool_errors"),
            "wrong_env_calls": self.mean("wrong_env_calls"),
            "call_errors": dict(self.call_errors),
            "informative_groups": self.mean("informative_groups"),
            "open_ms_p50": open_p[0],
            "open_ms_p95": open_p[1],
            "tool_ms_p50": tool_p[0],
            "tool_ms_p95": tool_p[1],
            "tools": per_tool,
        }


def _percentiles(values: array) -> tuple[float | None, float | None]:
    """`percentile` 50 and 95 of many doubles: sorted once by numpy, the same interpolation."""
    if len(values) < 64:
        return percentile(values, 50), percentile(values, 95)
    import numpy as np

    data = np.sort(np.frombuffer(values, dtype=np.float64))
    return sorted_percentile(data, 50.0), sorted_percentile(data, 95.0)


def _rows(table: pa.Table, positions: np.ndarray) -> Iterator[dict[str, Any]]:
    """The rows at ``positions`` as dicts, converted a chunk at a time."""
    import pyarrow as pa

    names = table.column_names
    for start in range(0, len(positions), CHUNK_ROWS):
        chunk = table.take(pa.array(positions[start : start + CHUNK_ROWS]))
        columns = [chunk.column(name).to_pylist() for name in names]
        yield from (dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True))


def _filled(table: pa.Table, name: str) -> np.ndarray:
    import pyarrow.compute as pc

    return pc.fill_null(table.column(name), 0).to_numpy()


def _mask(table: pa.Table, name: str, value: str, null: bool) -> np.ndarray:
    import pyarrow.compute as pc

    return pc.fill_null(pc.equal(table.column(name), value), null).to_numpy(zero_copy_only=False)


def _member_order(codes: np.ndarray, names: list[str], positions: np.ndarray) -> list[str]:
    """The members of the rows at ``positions``, by first appearance."""
    import numpy as np

    found, first = np.unique(codes[positions], return_index=True)
    return list(dict.fromkeys(names[int(c)] for c in found[np.argsort(first, kind="stable")]))


def scan_run(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """A report's figures from a run's record files: ``members``, ``summary`` (`member_summary` of the
    training records), ``series`` (`step_series`), ``evaluated`` (`eval_series`), ``trend`` (`trend`), each
    as the record-at-a-time reference (tests/support/report_reference.py) computes it, and the counts
    ``records``, ``train``, ``evals``, ``unfinished`` (rollouts of a step that never completed, left out).
    Raises `FileNotFoundError` when there is no record.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    run_dir = Path(run_dir)
    table, total = _finished_records(run_dir)
    # `read_records`' order: training first, then by (step, rank, seq), ties kept in file order.
    is_train_mode = _mask(table, "mode", "train", False)
    steps = _filled(table, "step")
    order = np.lexsort((_filled(table, "seq"), _filled(table, "rank"), steps, ~is_train_mode))
    train_mask = _mask(table, "mode", "train", True)  # a record without a mode is a training one
    eval_mask = _mask(table, "mode", "eval", False)
    no_step = table.column("step").is_null().to_numpy(zero_copy_only=False)
    encoded = table.column("member").combine_chunks().dictionary_encode()
    names = [str(m) for m in encoded.dictionary.to_pylist()] + ["None"]
    codes = pc.fill_null(encoded.indices, len(names) - 1).to_numpy()

    in_order = order[train_mask[order]]
    members = _member_order(codes, names, order)
    train_members = _member_order(codes, names, in_order) if len(in_order) else []
    timed = in_order[~no_step[in_order]]  # record order: the trend lists members as they first come
    step_list = sorted({int(s) for s in np.unique(steps[timed])}) if len(timed) else []
    figures = _Figures(train_members, step_list)
    train, batch_of, contiguous = _batched(in_order, steps, no_step)
    for batch in _batches(_rows(table, train), batch_of):
        figures.take(batch)
    if not contiguous:
        # Some step's rows are apart in record order (a step without a number beside step 0, records without
        # a mode): what `member_summary` adds up record by record is added in record order instead.
        _in_record_order(_rows(table, in_order), figures.pools, figures.parts, figures.thirds)
    trend = figures.trend(_member_order(codes, names, timed)) if figures.thirds else {}
    evaluated = _evaluated(table, order[eval_mask[order]], steps)
    kept, train_count, eval_count = int(table.num_rows), int(train_mask.sum()), int(eval_mask.sum())
    del table, encoded
    pa.default_memory_pool().release_unused()  # what the plots and summary.json add comes on top of these
    return {
        "members": members,
        "summary": {m: figures.pools[m].summary() for m in train_members},
        "series": dict(sorted(figures.series.items())),
        "evaluated": evaluated,
        "trend": trend,
        "records": kept,
        "train": train_count,
        "evals": eval_count,
        "unfinished": total - kept,
    }


def _finished_records(run_dir: Path) -> tuple[pa.Table, int]:
    """The run's records of completed steps (one chunk per column), and how many records it holds in all.
    Raises `FileNotFoundError` without any (`ormix report` says which: none at all, or none of a completed
    step)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = read_record_table(record_files(run_dir))
    total = table.num_rows
    completed = Workspace(run_dir).completed_step()
    if completed is not None and total:
        step = table.column("step")
        table = table.filter(pc.or_kleene(pc.is_null(step), pc.less_equal(step, completed)))
    # One chunk per column: `take` on a table of many chunks (a block each) concatenates them every time,
    # which made reading a step at a time quadratic.
    table = table.combine_chunks()
    pa.default_memory_pool().release_unused()  # the blocks' copy goes back to the system, not to a peak
    if not table.num_rows:
        raise FileNotFoundError(f"no rollout records under {run_dir / 'rollouts'} (rank-*.jsonl)")
    return table, total


def _batched(
    train: np.ndarray, steps: np.ndarray, no_step: np.ndarray
) -> tuple[np.ndarray, np.ndarray, bool]:
    """The training rows regrouped into batches (one per step) in the order they first appear, each batch's
    rows in record order; each row's batch; and whether that is record order already."""
    import numpy as np

    keys = steps[train] * 2 + no_step[train]
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    batch_of = first[inverse.reshape(-1)]
    regroup = np.argsort(batch_of, kind="stable")
    contiguous = bool(np.array_equal(regroup, np.arange(len(regroup))))
    return train[regroup], batch_of[regroup], contiguous


def _batches(rows: Iterator[dict[str, Any]], batch_of: np.ndarray) -> Iterator[list[dict[str, Any]]]:
    """The rows a batch at a time (``batch_of``: each row's batch, the batches contiguous)."""
    for _, batch in itertools.groupby(zip(rows, batch_of.tolist(), strict=True), key=lambda pair: pair[1]):
        yield [row for row, _ in batch]


class _Figures:
    """What a report needs of the training records, pooled a batch (step) at a time: each member's
    `_Pool` over the run and over its first and last thirds of steps, and the step series."""

    def __init__(self, train_members: list[str], step_list: list[int]) -> None:
        self.train_members = train_members
        self.step_list = step_list
        self.third = third = len(step_list) // 3
        self.thirds: list[set[int]] = (
            [set(step_list[:third]), set(step_list[-third:])] if len(step_list) >= 3 else []
        )
        self.pools = {m: _Pool() for m in train_members}
        self.parts = [{m: _Pool(full=False) for m in train_members} for _ in self.thirds]
        self.present: list[set[str]] = [set() for _ in self.thirds]
        self.series: dict[int, dict[str, float]] = {}
        # ``ormix/<member>/<metric>`` strings made once (a long run's series holds millions of them).
        self.key = functools.cache(metric_key)

    def take(self, batch: list[dict[str, Any]]) -> None:
        """Pool one step's batch, and add its point to the series (a batch without a step has none)."""
        by_member: dict[Any, list[dict[str, Any]]] = {}
        for r in batch:
            by_member.setdefault(r.get("member"), []).append(r)
        step = batch[0].get("step")
        values = {m: member_values(by_member.get(m, ()), m, len(batch)) for m in self.train_members}
        for m in self.train_members:
            self.pools[m].add(m, values[m], by_member.get(m, ()))
        for part, seen, steps_in in zip(self.parts, self.present, self.thirds, strict=True):
            if step is not None and step in steps_in:
                seen.update(str(k) for k in by_member)
                for m in self.train_members:
                    part[m].add(m, values[m], by_member.get(m, ()))
        if step is not None:
            self.series[int(step)] = self._point(values)

    def _point(self, values: Mapping[str, Any]) -> dict[str, float]:
        out: dict[str, float] = {}
        for m in self.train_members:
            for metric, value in summarize(values[m]).items():
                out[self.key(m, metric)] = value
        for m in self.train_members:
            latency = values[m].get("tool_ms", [])
            for q in (50, 95):
                p = percentile(latency, q)
                if p is not None:
                    out[self.key(m, f"tool_ms_p{q}")] = p
        return out

    def trend(self, timed_members: list[str]) -> dict[str, Any]:
        """`trend`'s figures: each member's metrics over the first and the last third of the steps."""
        steps, third = self.step_list, self.third
        return {
            "first_steps": [steps[0], steps[third - 1]],
            "last_steps": [steps[-third], steps[-1]],
            "members": {
                m: {
                    k: [
                        part[m].mean(k) if m in seen else None
                        for part, seen in zip(self.parts, self.present, strict=True)
                    ]
                    for k in TREND_METRICS
                }
                for m in timed_members
            },
        }


def _evaluated(table: pa.Table, evals: np.ndarray, steps: np.ndarray) -> dict[int, dict[str, Any]]:
    """Each evaluation's summary by its step (``evals``: the eval rows, ordered by step)."""
    import numpy as np

    evaluated: dict[int, dict[str, Any]] = {}
    if len(evals):
        eval_steps = steps[evals]
        bounds = [0, *(np.flatnonzero(np.diff(eval_steps)) + 1).tolist(), len(evals)]
        for lo, hi in zip(bounds, bounds[1:], strict=False):
            these = list(_rows(table, evals[lo:hi]))
            evaluated[int(eval_steps[lo])] = summarize_eval(these, eval_ks(these))
    return evaluated


def _in_record_order(
    rows: Iterator[dict[str, Any]],
    pools: Mapping[str, _Pool],
    parts: Sequence[Mapping[str, _Pool]],
    thirds: Sequence[set[int]],
) -> None:
    """The training rewards' sums and the error counts of the pools (and thirds), again in record order."""
    for pool in [*pools.values(), *(q for part in parts for q in part.values())]:
        pool.training, pool.trained = 0.0, 0
        pool.errors, pool.call_errors = Counter(), Counter()
    for r in rows:
        member = r.get("member")
        if not isinstance(member, str) or member not in pools:
            continue  # a record without a member counts for no member (as `member_summary` has it)
        step = r.get("step")
        these = [pools[member]] + [
            part[member]
            for part, steps in zip(parts, thirds, strict=True)
            if step is not None and step in steps
        ]
        for pool in these:
            if r.get("reward") is not None:
                pool.training += r["reward"]
                pool.trained += 1
        pool = pools[member]
        if r["outcome"] == "error":
            pool.errors[r.get("error_kind") or "error"] += 1
        for c in r.get("calls") or ():
            if c.get("error") is not None:
                pool.call_errors[c["error"]] += 1
