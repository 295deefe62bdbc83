"""Eval records → per-member metrics with intervals over tasks (pure: records in, JSON-ready dicts out).

Records are rollout records in the training format (`ormix.telemetry._records.rollout_record`): this module
reads ``member``, ``split`` (None when absent), ``task_index``, ``outcome``, ``env_reward`` and
``error_kind``. The caller picks the records (an eval's ``rollouts.jsonl`` holds only eval rollouts).

Definitions (the same for `ormix eval`, training's eval, `compare` and ablation studies):

- A sample succeeds when its outcome is ``scored`` and its ``env_reward >= success_threshold``.
  ``unscored`` samples (the model did not finish) are failures. ``error`` samples (infrastructure) are left
  out of pass@k, pass^k and mean reward (not the model's doing) and reported as ``error_rate`` and
  ``error_mix``; a task left with fewer than k samples has no pass@k (``tasks_short`` counts them, for the
  largest k).
- pass@k and pass^k per task: `ormix.evaluation._stats`; a member's value is the mean over its tasks.
  ``mean_reward``: mean over tasks of the task's mean ``env_reward`` over its scored samples (tasks with
  none left out). ``coverage`` and ``error_rate``: scored (error) samples / all samples, per task, then
  the mean over tasks.
- Every metric is ``{"value", "low", "high", "n"}`` (n = tasks contributing), its interval over tasks
  (`ormix.evaluation._stats.mean_interval`).
- A member that scores groups (``group_scoring:``) also has ``group_scoring`` (`group_scoring_summary`):
  how many of its groups were scored, failed (pointwise rewards kept), unsupported or skipped, and its mean
  ``group_reward`` and ``combined_reward`` (the reward GRPO would see) over tasks. pass@k and the rest stay
  on the pointwise ``env_reward``.

Example:
    >>> records = [
    ...     {"member": "echo", "task_index": t, "outcome": "scored", "env_reward": float(t % 2 or s)}
    ...     for t in range(8) for s in range(2)
    ... ]
    >>> summary = summarize(records, ks=(1, 2))
    >>> m = summary["members"]["echo"]
    >>> m["tasks"], m["samples"], m["pass@1"]["value"], m["pass@2"]["value"], m["pass^2"]["value"]
    (8, 16, 0.75, 1.0, 0.5)
    >>> summary_table(summary)[0]
    ['member', 'tasks', 'pass@1', 'pass@2', 'pass^2', 'mean_reward', 'coverage', 'error_rate']
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ormix.evaluation._stats import INTERVAL_METHOD, mean_interval, pass_at_k, pass_hat_k

#: A task's identity, for pairing evals: (member, split, task_index).
TaskKey = tuple[str, str | None, int]


@dataclass(frozen=True)
class TaskSamples:
    """One task's samples (rollouts), in record order.

    Example:
        >>> t = TaskSamples("seta", "test", 3, (1.0, None, 0.5), ("scored", "error", "scored"),
        ...                 (None, "timeout", None))
        >>> t.key, t.n_valid, t.successes(1.0), t.successes(0.5)
        (('seta', 'test', 3), 2, 1, 2)
    """

    member: str
    split: str | None
    task_index: int
    rewards: tuple[float | None, ...]  # env_reward per sample (None unless scored)
    outcomes: tuple[str, ...]  # "scored" | "unscored" | "error"
    error_kinds: tuple[str | None, ...]

    @property
    def key(self) -> TaskKey:
        return (self.member, self.split, self.task_index)

    @property
    def n_valid(self) -> int:
        """Samples that count for pass@k (every outcome but ``error``)."""
        return sum(1 for o in self.outcomes if o != "error")

    def successes(self, success_threshold: float = 1.0) -> int:
        """Samples scored with ``env_reward >= success_threshold``."""
        return sum(
            1
            for o, r in zip(self.outcomes, self.rewards, strict=True)
            if o == "scored" and r is not None and r >= success_threshold
        )


def task_samples(records: Iterable[Mapping[str, Any]]) -> dict[str, list[TaskSamples]]:
    """Group records by task: member → its tasks, sorted by (split, task_index). Records without a member
    or a task index are skipped.

    Example:
        >>> recs = [{"member": "a", "task_index": 2, "outcome": "scored", "env_reward": 1.0},
        ...         {"member": "a", "task_index": 0, "outcome": "unscored", "env_reward": None},
        ...         {"member": "a", "task_index": 2, "outcome": "error", "error_kind": "timeout"}]
        >>> [(t.task_index, t.outcomes) for t in task_samples(recs)["a"]]
        [(0, ('unscored',)), (2, ('scored', 'error'))]
    """
    grouped: dict[TaskKey, list[Mapping[str, Any]]] = {}
    for r in records:
        member, index = r.get("member"), r.get("task_index")
        if member is None or index is None:
            continue
        split = r.get("split")
        grouped.setdefault((str(member), None if split is None else str(split), int(index)), []).append(r)
    out: dict[str, list[TaskSamples]] = {}
    for (member, split, index), recs in sorted(grouped.items(), key=lambda kv: task_order(kv[0])):
        outcomes = tuple(str(r.get("outcome") or "error") for r in recs)
        rewards = tuple(
            _reward(r.get("env_reward")) if o == "scored" else None
            for r, o in zip(recs, outcomes, strict=True)
        )
        kinds = tuple(r.get("error_kind") for r in recs)
        out.setdefault(member, []).append(TaskSamples(member, split, index, rewards, outcomes, kinds))
    return out


def task_order(key: TaskKey) -> tuple[str, int, str, int]:
    """The order tasks are listed in: by member, then split (none first), then task index."""
    member, split, index = key
    return (member, split is not None, split or "", index)


def _reward(value: Any) -> float | None:
    return None if value is None else float(value)


def normalize_ks(ks: Iterable[int]) -> tuple[int, ...]:
    """The k values, sorted and unique; refuses k < 1.

    Example:
        >>> normalize_ks([4, 1, 4])
        (1, 4)
    """
    out = sorted({int(k) for k in ks})
    if not out or out[0] < 1:
        raise ValueError(f"k values are whole numbers >= 1, e.g. (1, 4) (got {list(ks)})")
    return tuple(out)


def metric_names(ks: Iterable[int]) -> list[str]:
    """The metrics a summary reports for these k, in table order.

    Example:
        >>> metric_names([1, 4])
        ['pass@1', 'pass^1', 'pass@4', 'pass^4', 'mean_reward', 'coverage', 'error_rate']
    """
    names = [name for k in normalize_ks(ks) for name in (f"pass@{k}", f"pass^{k}")]
    return [*names, "mean_reward", "coverage", "error_rate"]


def task_metric(task: TaskSamples, metric: str, success_threshold: float = 1.0) -> float | None:
    """One task's value of a metric (`metric_names`); None when the task has none (fewer than k samples
    left after errors; no scored sample for mean_reward).

    Example:
        >>> t = TaskSamples("a", None, 0, (1.0, 0.0, None), ("scored", "scored", "unscored"), (None,) * 3)
        >>> task_metric(t, "pass@1"), task_metric(t, "pass@2"), task_metric(t, "mean_reward")
        (0.3333333333333333, 0.6666666666666666, 0.5)
        >>> task_metric(t, "pass@4") is None
        True
    """
    total = len(task.outcomes)
    if metric in ("coverage", "error_rate"):
        if total == 0:
            return None
        wanted = "scored" if metric == "coverage" else "error"
        return sum(1 for o in task.outcomes if o == wanted) / total
    if metric == "mean_reward":
        scored = [
            r for o, r in zip(task.outcomes, task.rewards, strict=True) if o == "scored" and r is not None
        ]
        return sum(scored) / len(scored) if scored else None
    for prefix, estimator in (("pass@", pass_at_k), ("pass^", pass_hat_k)):
        if metric.startswith(prefix) and metric[len(prefix) :].isdigit():
            k = int(metric[len(prefix) :])
            n = task.n_valid
            if k < 1 or n < k:
                return None
            return estimator(n, task.successes(success_threshold), k)
    raise ValueError(f"unknown metric {metric!r}: one of pass@K, pass^K, mean_reward, coverage, error_rate")


def summarize(
    records: Iterable[Mapping[str, Any]],
    ks: Sequence[int] = (1,),
    *,
    success_threshold: float = 1.0,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """Per-member metrics with intervals over tasks, JSON-ready (the module docstring says what each is).

    ``seed`` is accepted for a resampling method; the intervals are closed-form, so none is drawn.

    Example:
        >>> recs = [{"member": "m", "task_index": t, "outcome": "error" if t == 3 else "scored",
        ...          "error_kind": "timeout" if t == 3 else None, "env_reward": 1.0} for t in range(4)]
        >>> s = summarize(recs, ks=(1,))["members"]["m"]
        >>> s["pass@1"]["value"], s["pass@1"]["n"], s["tasks_short"], s["error_rate"]["value"], s["error_mix"]
        (1.0, 3, 1, 0.25, {'timeout': 1})
    """
    ks = normalize_ks(ks)
    names = metric_names(ks)
    records = list(records)
    members: dict[str, Any] = {}
    for member, tasks in sorted(task_samples(records).items()):
        entry: dict[str, Any] = {
            "tasks": len(tasks),
            "samples": sum(len(t.outcomes) for t in tasks),
            "tasks_short": sum(1 for t in tasks if t.n_valid < max(ks)),
        }
        for name in names:
            values = [v for t in tasks if (v := task_metric(t, name, success_threshold)) is not None]
            entry[name] = mean_interval(values, confidence).as_dict()
        mix: Counter[str] = Counter(
            kind or "error"
            for t in tasks
            for o, kind in zip(t.outcomes, t.error_kinds, strict=True)
            if o == "error"
        )
        entry["error_mix"] = dict(sorted(mix.items()))
        grouped = group_scoring_summary([r for r in records if r.get("member") == member], confidence)
        if grouped is not None:
            entry["group_scoring"] = grouped
        members[member] = entry
    return {
        "k": list(ks),
        "confidence": confidence,
        "success_threshold": success_threshold,
        "interval": INTERVAL_METHOD,
        "members": members,
    }


def group_scoring_summary(
    records: Sequence[Mapping[str, Any]], confidence: float = 0.95
) -> dict[str, Any] | None:
    """One member's group scoring, from its records' ``group_status``, ``group_reward`` and ``reward``:
    groups (by ``group``) per status, and the mean group and combined rewards over tasks (scored groups
    only); `None` when none of its records went through group scoring.

    Example:
        >>> scored = {"task_index": 0, "group": 0, "group_status": "scored"}
        >>> recs = [{**scored, "group_reward": g, "reward": 1 + g} for g in (1.0, 0.5)]
        >>> recs.append({"task_index": 1, "group": 2, "group_status": "failed", "reward": 1.0})
        >>> s = group_scoring_summary(recs)
        >>> s["groups"], s["group_reward"]["value"], s["combined_reward"]["value"]
        ({'scored': 1, 'failed': 1}, 0.75, 1.75)
    """
    asked = [r for r in records if r.get("group_status") is not None]
    if not asked:
        return None
    status_of: dict[Any, str] = {}
    for r in asked:
        # A group is one task's samples of one batch (an eval's chunks each start their groups at 0).
        key = (r.get("step"), r.get("rank"), r.get("group"), r.get("split"), r.get("task_index"))
        status_of.setdefault(key, r["group_status"])
    groups = Counter(status_of.values())
    per_task: dict[Any, tuple[list[float], list[float]]] = {}
    for r in asked:
        if r["group_status"] != "scored":
            continue
        group_values, combined = per_task.setdefault((r.get("split"), r.get("task_index")), ([], []))
        if (g := _reward(r.get("group_reward"))) is not None:
            group_values.append(g)
        if (c := _reward(r.get("reward"))) is not None:
            combined.append(c)
    means = [(sum(g) / len(g) if g else None, sum(c) / len(c) if c else None) for g, c in per_task.values()]
    return {
        "groups": dict(sorted(groups.items(), key=lambda kv: GROUP_ORDER.index(kv[0]))),
        "group_reward": mean_interval([g for g, _ in means if g is not None], confidence).as_dict(),
        "combined_reward": mean_interval([c for _, c in means if c is not None], confidence).as_dict(),
    }


#: The order a summary lists group statuses in (`ormix.rollout._group_scoring.GROUP_STATUSES`).
GROUP_ORDER = ("scored", "failed", "unsupported", "skipped")


def format_metric(metric: Mapping[str, Any] | None, digits: int = 2) -> str:
    """A metric as a cell: ``0.62 [0.48, 0.75]`` (``-`` when it has no value).

    Example:
        >>> format_metric({"value": 0.625, "low": 0.481, "high": 0.75, "n": 16})
        '0.62 [0.48, 0.75]'
        >>> format_metric({"value": None, "low": None, "high": None, "n": 0})
        '-'
    """
    if not metric or metric.get("value") is None:
        return "-"
    text = f"{metric['value']:.{digits}f}"
    if metric.get("low") is not None and metric.get("high") is not None:
        text += f" [{metric['low']:.{digits}f}, {metric['high']:.{digits}f}]"
    return text


def summary_table(summary: Mapping[str, Any]) -> list[list[str]]:
    """The summary as rows of cells, header row first (a member's tasks cell says how many are short; no
    pass^1 column: it equals pass@1).

    Example:
        >>> one = {"member": "a", "task_index": 0, "outcome": "scored", "env_reward": 1.0}
        >>> s = summarize([one], ks=(1, 2))
        >>> summary_table(s)[1][:3]
        ['a', '1 (1 short)', '1.00 [0.21, 1.00]']
    """
    names = [n for n in metric_names(summary["k"]) if n != "pass^1"]  # pass^1 is pass@1: one column
    rows = [["member", "tasks", *names]]
    for member, entry in summary["members"].items():
        tasks = str(entry["tasks"]) + (f" ({entry['tasks_short']} short)" if entry.get("tasks_short") else "")
        rows.append([member, tasks, *(format_metric(entry.get(name)) for name in names)])
    return rows


def summary_markdown(summary: Mapping[str, Any], title: str) -> str:
    """The summary as a markdown section: the table, then what the numbers are and each member's errors.

    Example:
        >>> s = summarize([{"member": "a", "task_index": 0, "outcome": "error", "error_kind": "timeout"}])
        >>> lines = summary_markdown(s, "Eval").splitlines()
        >>> lines[0], lines[-1]
        ('# Eval', '- a: infrastructure errors: timeout 1')
        >>> print(lines[4])
        | a | 1 (1 short) | - | - | 0.00 [0.00, 0.79] | 1.00 [0.21, 1.00] |
    """
    head, *rows = summary_table(summary)
    lines = [f"# {title}", ""]
    lines += markdown_table(
        [head, *([cell.replace("|", "\\|") for cell in row] for row in rows)], spaced=True
    )
    lines += [
        "",
        f"{summary['confidence']:.0%} intervals: {summary['interval']}. A sample succeeds when "
        f"scored with env_reward >= {summary['success_threshold']:g}; unscored samples count as failures, "
        "infrastructure errors are left out of pass@k, pass^k and mean_reward (see error_rate).",
    ]
    for member, entry in summary["members"].items():
        if entry.get("error_mix"):
            mix = ", ".join(f"{kind} {count}" for kind, count in entry["error_mix"].items())
            lines.append(f"- {member}: infrastructure errors: {mix}")
        if entry.get("group_scoring"):
            lines.append(f"- {member}: {group_scoring_line(entry['group_scoring'])}")
    return "\n".join(lines) + "\n"


def group_scoring_line(grouped: Mapping[str, Any]) -> str:
    """A member's group scoring in one line (`group_scoring_summary`).

    Example:
        >>> group_scoring_line({"groups": {"scored": 3, "failed": 1}, "group_reward": {"value": 0.5},
        ...                     "combined_reward": {"value": 1.25}})  # doctest: +ELLIPSIS
        'group scoring: 3 of 4 groups scored (failed 1: pointwise rewards kept); group_reward 0.50, ...'
    """
    groups = grouped.get("groups") or {}
    total = sum(groups.values())
    scored = groups.get("scored", 0)
    text = f"group scoring: {scored} of {total} groups scored"
    rest = [f"{status} {n}" for status, n in groups.items() if status != "scored" and n]
    if rest:
        text += f" ({', '.join(rest)}: pointwise rewards kept)"
    group_reward, combined = grouped.get("group_reward") or {}, grouped.get("combined_reward") or {}
    if group_reward.get("value") is not None:
        text += f"; group_reward {group_reward['value']:.2f}, combined {format_metric(combined)}"
    return text


def markdown_table(rows: Sequence[Sequence[str]], *, spaced: bool = False) -> list[str]:
    """``rows`` (the header row first) as the lines of a markdown table; ``spaced``: the rule ``| --- |``,
    not ``|---|``.

    Example:
        >>> markdown_table([["a", "b"], ["1", "2"]])
        ['| a | b |', '|---|---|', '| 1 | 2 |']
        >>> markdown_table([["a", "b"]], spaced=True)
        ['| a | b |', '| --- | --- |']
    """
    rule = "| " + " | ".join("---" for _ in rows[0]) + " |" if spaced else "|" + "---|" * len(rows[0])
    return ["| " + " | ".join(rows[0]) + " |", rule] + ["| " + " | ".join(row) + " |" for row in rows[1:]]
