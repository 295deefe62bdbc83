"""Paired comparison of evals over the same tasks: per member, what each metric changed, with an interval.

The first eval is the baseline; each other is compared with it. A task is ``(member, split, task_index)``;
each member's tasks are paired across the two evals, so a task that is hard for both cancels out (the
paired interval is much narrower than two separate intervals would suggest). Evals of different task sets
(another target, split or task selection in their manifests, or records missing for some tasks, as after
an interrupted eval) and incomplete evals (a summary saying ``complete: false``, a task with fewer records
than the manifest's ``samples``) are refused with `UsageError` unless ``allow_partial``, which pairs the
common tasks complete in both and says how many it left out.

Each member and metric gets the difference other − baseline, its paired interval over the common tasks
(`ormix.evaluation._stats.paired_interval`) and a verdict: ``"seta: +0.12 [0.04, 0.20]"`` when the interval
excludes 0, ``"terminals: no detectable change [−0.05, 0.07]"`` when it covers 0 (which is not evidence of
no change: the interval says how large a change the tasks could hide).

Pure apart from `load_eval`, which reads an eval directory (``rollouts.jsonl``, ``manifest.json``).

Example:
    >>> def recs(member, wins):
    ...     return [{"member": member, "task_index": t, "outcome": "scored", "env_reward": float(w)}
    ...             for t, w in enumerate(wins)]
    >>> a = EvalData(Path("a"), {}, recs("seta", [0] * 12 + [1] * 4))
    >>> b = EvalData(Path("b"), {}, recs("seta", [1] * 12 + [1] * 4))
    >>> result = compare([a, b])
    >>> result["comparisons"][0]["verdicts"]["pass@1"]
    'seta: +0.75 [0.40, 0.91]'
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ormix._errors import UsageError
from ormix.app._render import print_table
from ormix.app._workspace import Workspace
from ormix.evaluation._stats import (
    COVERS_TASKS,
    HIERARCHICAL_METHOD,
    PAIRED_METHOD,
    Interval,
    hierarchical_interval,
    mean_interval,
    paired_hierarchical_interval,
    paired_interval,
)
from ormix.evaluation._summary import (
    TaskKey,
    TaskSamples,
    format_metric,
    markdown_table,
    metric_names,
    normalize_ks,
    task_metric,
    task_order,
    task_samples,
)


@dataclass
class EvalData:
    """One eval: its directory, manifest (``{}`` when it has none), eval rollout records, and the summary it
    wrote (``{}`` when none; where `compare` finds the k values and success threshold the eval used).

    Example:
        >>> EvalData(Path("runs/demo/eval"), {}, []).label, EvalData(Path("evals/base"), {}, []).label
        ('demo', 'base')
    """

    path: Path
    manifest: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)

    def setting(self, key: str, default: Any = None) -> Any:
        """A setting of the eval (``k``, ``success_threshold``...): its manifest's, else its summary's.

        Example:
            >>> e = EvalData(Path("e"), {"k": [1, 4]}, [], {"k": [1], "success_threshold": 0.5})
            >>> e.setting("k"), e.setting("success_threshold")
            ([1, 4], 0.5)
        """
        for source in (self.manifest, self.summary):
            if source.get(key) is not None:
                return source[key]
        return default

    @property
    def label(self) -> str:
        """A short name: the run directory's name for ``<run>/eval``, ``<run>/checkpoint-N`` for
        ``<run>/eval/checkpoint-N``, else the directory's name."""
        p = self.path
        if p.name == "eval" and p.parent.name:
            return p.parent.name
        if p.parent.name == "eval" and p.parent.parent.name:
            return f"{p.parent.parent.name}/{p.name}"
        return p.name or str(p)


def load_eval(path: str | Path) -> EvalData:
    """Read an eval directory (`ormix eval`'s output: ``rollouts.jsonl``, ``manifest.json``), or a run
    directory whose ``eval/`` holds one. The records hold the fields a comparison reads
    (`ormix.telemetry._records.READ_FIELDS`), read by columns: an eval's texts are not loaded.

    Example:
        >>> import tempfile
        >>> run = Path(tempfile.mkdtemp()) / "run-1"
        >>> (run / "eval").mkdir(parents=True)
        >>> _ = (run / "eval" / "rollouts.jsonl").write_text(
        ...     '{"mode": "eval", "member": "a", "task_index": 0, "outcome": "scored", "env_reward": 1.0}\\n')
        >>> data = load_eval(run)
        >>> data.path.name, data.label, len(data.records), data.manifest
        ('eval', 'run-1', 1, {})
        >>> load_eval(run / "missing")
        Traceback (most recent call last):
        ...
        ormix._errors.UsageError: ...run-1/missing does not exist: give an eval directory ...
    """
    p = Path(path)
    if not p.is_dir():
        raise UsageError(
            f"{p} does not exist: give an eval directory (ormix eval's output) or a run directory with eval/"
        )
    if not (p / "rollouts.jsonl").is_file():
        if (Workspace(p).eval_path / "rollouts.jsonl").is_file():
            p = Workspace(p).eval_path
        else:
            raise UsageError(
                f"{p} holds no eval (no rollouts.jsonl in it or in {p / 'eval'}): run `ormix eval` for it "
                "first, or give its eval directory"
            )
    manifest, summary = _json_object(p / "manifest.json"), _json_object(p / "summary.json")
    from ormix.telemetry._records import read_record_table

    # Only the fields a comparison reads (`READ_FIELDS`): an eval's prompts and completions stay on disk.
    table = read_record_table([p / "rollouts.jsonl"])
    records = [r for r in table.to_pylist() if r.get("mode") in (None, "eval")]
    if not records:
        raise UsageError(f"{p / 'rollouts.jsonl'} holds no eval rollouts: run (or finish) the eval first")
    return EvalData(p, manifest, records, summary)


def _json_object(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise UsageError(f"{path} is not valid JSON ({e}): rerun the eval, or delete the file") from None
    if not isinstance(value, dict):
        raise UsageError(f"{path} is not a JSON object: rerun the eval, or delete the file")
    return value


def _signed(x: float, digits: int = 2) -> str:
    text = f"{abs(x):.{digits}f}"
    if text == f"{0:.{digits}f}":
        return text
    return ("+" if x > 0 else "\u2212") + text


def _plain(x: float, digits: int = 2) -> str:
    text = f"{abs(x):.{digits}f}"
    return ("\u2212" + text) if x < 0 and text != f"{0:.{digits}f}" else text


def format_difference(difference: Mapping[str, Any], digits: int = 2) -> str:
    """A difference as ``+0.12 [0.04, 0.20]`` (minus signs as ``−``).

    Example:
        >>> format_difference({"value": -0.031, "low": -0.1, "high": 0.05, "n": 16})
        '−0.03 [−0.10, 0.05]'
    """
    if difference.get("value") is None:
        return "-"
    text = _signed(difference["value"], digits)
    if difference.get("low") is not None and difference.get("high") is not None:
        text += f" [{_plain(difference['low'], digits)}, {_plain(difference['high'], digits)}]"
    return text


def verdict(member: str, difference: Mapping[str, Any], digits: int = 2) -> str:
    """The plain verdict for one member's difference.

    Example:
        >>> verdict("seta", {"value": 0.12, "low": 0.04, "high": 0.2, "n": 32})
        'seta: +0.12 [0.04, 0.20]'
        >>> verdict("terminals", {"value": 0.01, "low": -0.05, "high": 0.07, "n": 32})
        'terminals: no detectable change [−0.05, 0.07]'
        >>> verdict("echo", {"value": None, "low": None, "high": None, "n": 0})
        'echo: no paired task has a value'
    """
    value, low, high = (difference.get(key) for key in ("value", "low", "high"))
    if value is None:
        return f"{member}: no paired task has a value"
    if low is None or high is None:
        n = difference["n"]
        return f"{member}: {_signed(value, digits)} (no interval from {n} task{'s' * (n != 1)})"
    if low <= 0.0 <= high:
        return f"{member}: no detectable change [{_plain(low, digits)}, {_plain(high, digits)}]"
    return f"{member}: {format_difference(difference, digits)}"


def _task_sets(data: EvalData) -> dict[str, dict[str, Any]]:
    """Per member: its target, split and task keys (from the manifest where it says, else the records):
    ``chosen`` (the manifest's tasks), ``planned`` (those the eval runs: an oracle eval does not run the
    tasks without a reference solution, its ``no_reference``) and ``recorded``."""
    by_member = task_samples(data.records)
    described = found if isinstance(found := data.manifest.get("members"), dict) else {}
    out: dict[str, dict[str, Any]] = {}
    for member in sorted(set(by_member) | set(described)):
        entry = described.get(member) or {}
        tasks = entry.get("tasks")
        chosen = {(member, entry.get("split"), int(i)) for i in tasks} if isinstance(tasks, list) else None
        unrun = {(member, entry.get("split"), int(i)) for i in entry.get("no_reference") or []}
        out[member] = {
            "target": entry.get("target"),
            "split": entry.get("split"),
            "chosen": chosen,
            "planned": None if chosen is None else chosen - unrun,
            "no_reference": len(unrun),
            "recorded": {t.key for t in by_member.get(member, [])},
        }
    return out


def _samples(data: EvalData) -> int | None:
    """The samples a task the eval ran (its manifest's ``samples``; ``None`` when it does not say)."""
    samples = data.setting("samples")
    return samples if isinstance(samples, int) and not isinstance(samples, bool) and samples > 0 else None


def _short_tasks(data: EvalData) -> dict[str, list[TaskKey]]:
    """Per member, the tasks holding fewer records than the eval's ``samples`` (an interrupted eval).

    Example:
        >>> rec = lambda t: {"member": "a", "task_index": t, "outcome": "scored", "env_reward": 1.0}
        >>> _short_tasks(EvalData(Path("e"), {"samples": 2}, [rec(0), rec(0), rec(1)]))
        {'a': [('a', None, 1)]}
    """
    samples = _samples(data)
    if samples is None:
        return {}
    out: dict[str, list[TaskKey]] = {}
    for member, tasks in task_samples(data.records).items():
        short = [t.key for t in tasks if len(t.outcomes) < samples]
        if short:
            out[member] = short
    return out


def _incomplete(data: EvalData) -> list[str]:
    """Why an eval is incomplete (its summary says so, tasks short of ``samples`` records): refusal lines."""
    problems: list[str] = []
    if data.summary.get("complete") is False:
        problems.append(
            f"{data.label} is incomplete (its summary says complete: false): run the same `ormix eval` "
            "again to finish it"
        )
    for member, keys in _short_tasks(data).items():
        shown = ", ".join(str(key[2]) for key in keys[:8]) + (", ..." if len(keys) > 8 else "")
        problems.append(
            f"{member}: {data.label} has fewer than {_samples(data)} records for {len(keys)} task(s) "
            f"({shown}): run the same `ormix eval` again to finish it"
        )
    return problems


def _complete_tasks(data: EvalData, label: str, notes: list[str]) -> dict[str, list[TaskSamples]]:
    """Per member, the eval's tasks that hold all their samples; a task short of them (an incomplete eval,
    compared under ``allow_partial``) is left out, and a note says how many."""
    short = {key for keys in _short_tasks(data).values() for key in keys}
    out: dict[str, list[TaskSamples]] = {}
    for member, tasks in task_samples(data.records).items():
        out[member] = [t for t in tasks if t.key not in short]
        if len(out[member]) < len(tasks):
            notes.append(
                f"{label}: {member}: {len(tasks) - len(out[member])} task(s) with fewer than "
                f"{_samples(data)} records left out (an incomplete eval)"
            )
    return out


def _differences(base: EvalData, other: EvalData) -> tuple[list[str], dict[str, str]]:
    """What keeps two evals' task sets apart: lines for the refusal, and members that cannot pair at all."""
    a, b = _task_sets(base), _task_sets(other)
    problems: list[str] = list(dict.fromkeys(_incomplete(base) + _incomplete(other)))
    unpairable: dict[str, str] = {}
    for member in sorted(set(a) | set(b)):
        if member not in b or member not in a:
            where, missing = (base, other) if member not in b else (other, base)
            unpairable[member] = f"{member} is evaluated in {where.label} but not in {missing.label}"
            problems.append(unpairable[member])
            continue
        sa, sb = a[member], b[member]
        for name in ("target", "split"):
            if sa[name] is not None and sb[name] is not None and sa[name] != sb[name]:
                problems.append(
                    f"{member}: {name} {sa[name]!r} in {base.label}, {sb[name]!r} in {other.label}"
                )
                if name == "target":
                    unpairable[member] = problems[-1]
        if member in unpairable:
            continue
        before = len(problems)
        if sa["chosen"] is not None and sb["chosen"] is not None and sa["chosen"] != sb["chosen"]:
            common = len(sa["chosen"] & sb["chosen"])
            problems.append(
                f"{member}: the manifests choose different tasks ({len(sa['chosen'])} in {base.label}, "
                f"{len(sb['chosen'])} in {other.label}, {common} in common)"
            )
        for data, s in ((base, sa), (other, sb)):
            if s["planned"] is not None and not s["planned"] <= s["recorded"]:
                absent = len(s["planned"] - s["recorded"])
                problems.append(
                    f"{member}: {data.label} has no records for {absent} of its {len(s['planned'])} tasks "
                    "(an interrupted eval? run the same `ormix eval` again to finish it)"
                )
        if len(problems) == before and sa["recorded"] != sb["recorded"]:
            common = len(sa["recorded"] & sb["recorded"])
            unrun = "".join(
                f"; {data.label} has no reference solution for {s['no_reference']}"
                for data, s in ((base, sa), (other, sb))
                if s["no_reference"]
            )
            problems.append(
                f"{member}: different tasks recorded ({len(sa['recorded'])} in {base.label}, "
                f"{len(sb['recorded'])} in {other.label}, {common} in common{unrun})"
            )
    return problems, unpairable


def _ks(evals: Sequence[EvalData], ks: Sequence[int] | None) -> tuple[int, ...]:
    if ks is not None:
        return normalize_ks(ks)
    value = evals[0].setting("k")
    if isinstance(value, list) and value:
        return normalize_ks(value)
    if isinstance(value, int):
        return normalize_ks([value])
    return (1,)


def _chosen_metrics(metrics: Sequence[str] | None, ks: Sequence[int], names: Sequence[str]) -> list[str]:
    """The metrics a comparison gives verdicts on: those asked for (each one of ``names``), else pass@k for
    every k.

    Example:
        >>> _chosen_metrics(None, (1, 4), ["pass@1", "pass@4", "mean_reward"])
        ['pass@1', 'pass@4']
    """
    chosen = list(metrics) if metrics else [f"pass@{k}" for k in ks]
    unknown = [m for m in chosen if m not in names]
    if unknown:
        raise UsageError(
            f"unknown metric {', '.join(map(repr, unknown))}: choose from {', '.join(names)} (pass@K for "
            "another K needs evals run with that k: `ormix eval -k ...`)"
        )
    return chosen


def compare(
    evals: Sequence[EvalData],
    *,
    ks: Sequence[int] | None = None,
    success_threshold: float | None = None,
    confidence: float = 0.95,
    seed: int = 0,
    allow_partial: bool = False,
    metrics: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Compare each eval after the first (the baseline) with it, member by member, over common tasks.

    ``ks`` defaults to the baseline's ``k`` (`EvalData.setting`; else 1), ``success_threshold`` to the
    threshold the evals share (refused when they differ; else 1.0); ``metrics`` (default: pass@k for
    each k) are the ones given verdicts; every metric is in the result. ``seed`` is accepted for a
    resampling method; the paired intervals are closed-form. Raises `UsageError` for fewer than two
    evals, an unknown metric, or different task sets or an incomplete eval without ``allow_partial``
    (with it, the tasks complete in both are paired, and the notes say how many were left out).

    Example:
        >>> rec = lambda t, w: {"member": "a", "task_index": t, "outcome": "scored", "env_reward": w}
        >>> a = EvalData(Path("a"), {}, [rec(t, 1.0) for t in range(8)])
        >>> b = EvalData(Path("b"), {}, [rec(t, 1.0) for t in range(6)])
        >>> compare([a, b])
        Traceback (most recent call last):
        ...
        ormix._errors.UsageError: b and a do not evaluate the same tasks:
          - a: different tasks recorded (8 in a, 6 in b, 6 in common)
        pass --allow-partial to compare the tasks they have in common
        >>> r = compare([a, b], allow_partial=True)
        >>> r["comparisons"][0]["members"]["a"]["tasks"], r["notes"]
        (6, ['b vs a: a: 6 common tasks (8 in a, 6 in b)'])
    """
    if len(evals) < 2:
        raise UsageError(f"compare needs two evals or more (a baseline first), got {len(evals)}")
    threshold = _threshold(evals, success_threshold)
    ks, names, chosen = _metric_choice(evals, ks, metrics)
    labels = _unique_labels(evals)
    base, base_label = evals[0], labels[0]
    notes: list[str] = []
    # Refused below unless allow_partial; then only the tasks complete in both evals are paired.
    base_tasks = _complete_tasks(base, base_label, notes)
    comparisons = []
    for other, label in zip(evals[1:], labels[1:], strict=True):
        problems, unpairable = _differences(base, other)
        if problems and not allow_partial:
            raise UsageError(
                f"{label} and {base_label} do not evaluate the same tasks:\n"
                + "\n".join(f"  - {p}" for p in problems)
                + "\npass --allow-partial to compare the tasks they have in common"
            )
        other_tasks = _complete_tasks(other, label, notes)
        pair = (base_label, label)
        members = _paired_members(
            base_tasks,
            other_tasks,
            unpairable,
            pair,
            names,
            notes,
            threshold=threshold,
            confidence=confidence,
        )
        comparisons.append(
            {
                "label": label,
                "path": str(other.path),
                "baseline": base_label,
                "members": members,
                "verdicts": _verdicts(members, chosen),
            }
        )
    return {
        "baseline": {"label": base_label, "path": str(base.path)},
        "evals": [{"label": lab, "path": str(e.path)} for lab, e in zip(labels, evals, strict=True)],
        **_settings(ks, confidence, threshold, PAIRED_METHOD, chosen, notes),
        "comparisons": comparisons,
    }


def _metric_choice(
    evals: Sequence[EvalData], ks: Sequence[int] | None, metrics: Sequence[str] | None
) -> tuple[tuple[int, ...], list[str], list[str]]:
    """The k values compared, every metric they give, and those given verdicts (refusing unknown ones)."""
    chosen_ks = _ks(evals, ks)
    names = metric_names(chosen_ks)
    return chosen_ks, names, _chosen_metrics(metrics, chosen_ks, names)


def _paired_members(
    base_tasks: Mapping[str, list[TaskSamples]],
    other_tasks: Mapping[str, list[TaskSamples]],
    unpairable: Mapping[str, str],
    labels: tuple[str, str],
    names: Sequence[str],
    notes: list[str],
    *,
    threshold: float,
    confidence: float,
) -> dict[str, Any]:
    """Per member, every metric of the other eval against the baseline's over their common tasks; a member
    they do not share, or fewer common tasks than either holds, gets a note."""
    base_label, label = labels
    members: dict[str, Any] = {}
    for member in sorted(set(base_tasks) | set(other_tasks)):
        if member in unpairable:
            notes.append(f"{label} vs {base_label}: {unpairable[member]}: not compared")
            continue
        a = {t.key: t for t in base_tasks.get(member, [])}
        b = {t.key: t for t in other_tasks.get(member, [])}
        common = sorted(set(a) & set(b), key=task_order)
        if len(common) != len(a) or len(common) != len(b):
            notes.append(
                f"{label} vs {base_label}: {member}: {len(common)} common tasks "
                f"({len(a)} in {base_label}, {len(b)} in {label})"
            )
        scored = {name: _metric(member, name, common, a, b, threshold, confidence) for name in names}
        members[member] = _member_entry(len(common), len(a), len(b), scored)
    return members


def _member_entry(
    tasks: int, tasks_baseline: int, tasks_other: int, metrics: dict[str, Any]
) -> dict[str, Any]:
    """A member's entry in a comparison (`compare` and `compare_groups` alike)."""
    return {"tasks": tasks, "tasks_baseline": tasks_baseline, "tasks_other": tasks_other, "metrics": metrics}


def _verdicts(members: Mapping[str, Any], chosen: Sequence[str]) -> dict[str, str]:
    """Per chosen metric, the members' verdicts in one line."""
    return {
        name: "; ".join(entry["metrics"][name]["verdict"] for entry in members.values()) for name in chosen
    }


def _settings(
    ks: Sequence[int],
    confidence: float,
    threshold: float,
    interval: str,
    chosen: Sequence[str],
    notes: list[str],
) -> dict[str, Any]:
    """What a comparison was made with (its keys between the evals and the comparisons)."""
    return {
        "k": list(ks),
        "confidence": confidence,
        "success_threshold": threshold,
        "interval": interval,
        "metrics": list(chosen),
        "notes": notes,
    }


def _metric(
    member: str,
    name: str,
    common: list[TaskKey],
    a: Mapping[TaskKey, TaskSamples],
    b: Mapping[TaskKey, TaskSamples],
    success_threshold: float,
    confidence: float,
) -> dict[str, Any]:
    pairs = [
        (va, vb)
        for key in common
        if (va := task_metric(a[key], name, success_threshold)) is not None
        and (vb := task_metric(b[key], name, success_threshold)) is not None
    ]
    xa, xb = [p[0] for p in pairs], [p[1] for p in pairs]
    difference = paired_interval(xa, xb, confidence) if pairs else Interval.empty()
    diff = difference.as_dict()
    return {
        "baseline": mean_interval(xa, confidence).as_dict(),
        "other": mean_interval(xb, confidence).as_dict(),
        "difference": diff,
        "verdict": verdict(member, diff),
    }


def _unique_labels(evals: Sequence[EvalData]) -> list[str]:
    labels: list[str] = []
    for e in evals:
        label = e.label
        if label in labels:
            label = str(e.path)
        while label in labels:
            label += "'"
        labels.append(label)
    return labels


# --- Groups of runs (several training seeds a side): intervals over seeds and tasks ---------------------

#: Metrics whose interquartile mean is reported beside the mean (rates of samples, e.g. coverage, are not).
_IQM_PREFIXES = ("pass@", "pass^", "mean_reward")


def _threshold(evals: Sequence[EvalData], success_threshold: float | None) -> float:
    if success_threshold is not None:
        return success_threshold
    thresholds = {float(e.setting("success_threshold", 1.0)) for e in evals}
    if len(thresholds) > 1:
        raise UsageError(
            f"the evals count success at different reward thresholds ({sorted(thresholds)}): "
            "run the same `ormix eval` command of each again with the same --success-threshold (a finished "
            "eval is summarised again at it; nothing runs again)"
        )
    return thresholds.pop()


def _check_same(evals: Sequence[EvalData], labels: Sequence[str]) -> None:
    """Refuse runs that do not evaluate the same tasks with the same k and samples, or an incomplete run's
    eval (`_incomplete`), saying what differs."""
    ref, ref_label = evals[0], labels[0]
    problems: list[str] = [line for e in evals for line in _incomplete(e)]
    for e, label in zip(evals[1:], labels[1:], strict=True):
        found, _ = _differences(ref, e)
        problems += found
        for key in ("k", "samples"):
            a, b = ref.setting(key), e.setting(key)
            if a is not None and b is not None and a != b:
                problems.append(f"{key} {a!r} in {ref_label}, {b!r} in {label}")
    if problems:
        raise UsageError(
            "the runs do not evaluate the same tasks with the same settings:\n"
            + "\n".join(f"  - {p}" for p in dict.fromkeys(problems))
            + "\nevaluate every run with the same `ormix eval` options (tasks, split, k, samples), or "
            "finish an interrupted eval by running it again"
        )


def _run_values(
    evals: Sequence[EvalData], member: str, name: str, success_threshold: float
) -> tuple[list[TaskKey], list[list[float]]]:
    """A member's metric as a runs × tasks matrix over the tasks with a value in every run."""
    per_run = [{t.key: t for t in task_samples(e.records).get(member, [])} for e in evals]
    keys = sorted(set.intersection(*(set(r) for r in per_run)), key=task_order)
    rows: list[list[float | None]] = [
        [task_metric(r[k], name, success_threshold) for k in keys] for r in per_run
    ]
    kept = [i for i in range(len(keys)) if all(row[i] is not None for row in rows)]
    return [keys[i] for i in kept], [[float(row[i]) for i in kept] for row in rows]  # type: ignore[arg-type]


def _iqm_applies(name: str, values: Sequence[Sequence[float]]) -> bool:
    # The IQM of values that are all 0 or 1 (one sample a task) is 0, 1 or a jump between them: no figure.
    flat = [v for row in values for v in row]
    return name.startswith(_IQM_PREFIXES) and len(flat) >= 4 and any(v not in (0.0, 1.0) for v in flat)


def _group_label(labels: Sequence[str]) -> str:
    """A group's name: the runs' common name without its seed suffix (``full-s0``, ``full-s1`` → ``full
    (2 runs)``), else the runs' names joined.

    Example:
        >>> _group_label(["full-s0", "full-s1", "full-s2"]), _group_label(["a", "b"]), _group_label(["x"])
        ('full (3 runs)', 'a+b', 'x')
    """
    if len(labels) == 1:
        return labels[0]
    prefix = os.path.commonprefix(list(labels))
    prefix = re.sub(r"[-_.](s|seed)$", "", prefix.rstrip("-_.")).rstrip("-_.")
    if prefix:
        return f"{prefix} ({len(labels)} runs)"
    return "+".join(labels) if len(labels) <= 3 else f"{labels[0]}+{len(labels) - 1} more"


def group_metrics(
    evals: Sequence[EvalData],
    *,
    ks: Sequence[int] | None = None,
    seed: int = 0,
    confidence: float = 0.95,
    success_threshold: float | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """Per member and metric, the value pooled over several runs' evals of the same tasks (one training
    seed each), with an interval over seeds and tasks (`ormix.evaluation._stats.hierarchical_interval`):
    member → metric → ``{"value", "low", "high", "n", "seeds", "covers", "iqm"}``. ``n`` = tasks with a
    value in every run; ``covers`` = ``"seeds and tasks"`` from two runs on, ``"tasks"`` for one (then the
    numbers are the eval's own summary's); ``iqm`` = the interquartile mean with its interval (same keys)
    for pass@k, pass^k and mean_reward when the values are not all 0/1, else None. Runs of different task
    sets, k or samples, and incomplete evals, are refused with `UsageError`. Deterministic for a given
    ``seed`` (the IQM's bootstrap).

    Example:
        >>> rec = lambda t, w: {"member": "a", "task_index": t, "outcome": "scored", "env_reward": w}
        >>> runs = [EvalData(Path(f"s{i}"), {}, [rec(t, float((t + i) % 3 > 0)) for t in range(12)])
        ...         for i in range(3)]
        >>> m = group_metrics(runs)["a"]["pass@1"]
        >>> round(m["value"], 3), m["n"], m["seeds"], m["covers"], m["iqm"]
        (0.667, 12, 3, 'seeds and tasks', None)
    """
    if not evals:
        raise UsageError("group_metrics needs one eval or more (one per run)")
    labels = _unique_labels(evals)
    _check_same(evals, labels)
    threshold = _threshold(evals, success_threshold)
    names = metric_names(_ks(evals, ks))
    members = sorted({m for e in evals for m in task_samples(e.records)})
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for member in members:
        out[member] = {}
        for name in names:
            _, values = _run_values(evals, member, name, threshold)
            entry = _group_interval(values, "mean", seed, confidence)
            entry["iqm"] = (
                _group_interval(values, "iqm", seed, confidence) if _iqm_applies(name, values) else None
            )
            out[member][name] = entry
    return out


def _group_interval(
    values: list[list[float]], statistic: str, seed: int, confidence: float
) -> dict[str, Any]:
    # No task: `hierarchical_interval`'s empty interval (covers "tasks").
    return hierarchical_interval(values, statistic=statistic, confidence=confidence, seed=seed).as_dict()


def compare_groups(
    groups: Sequence[Sequence[EvalData]],
    *,
    ks: Sequence[int] | None = None,
    seed: int = 0,
    confidence: float = 0.95,
    success_threshold: float | None = None,
    metrics: Sequence[str] | None = None,
    labels: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Compare two groups of runs (``groups[0]`` the baseline; each run one training seed, all evaluated on
    the same tasks), member by member, with intervals that include seed-to-seed variance.

    The result has `compare`'s shape (``comparison_markdown`` and ``ormix compare`` read it): one comparison,
    groups[1] vs groups[0]; each metric's ``baseline`` and ``other`` are `group_metrics` entries, its
    ``difference`` (the mean over the other group's runs and tasks − the baseline's, tasks paired, seeds
    drawn independently per group: `ormix.evaluation._stats.paired_hierarchical_interval`) also carries
    ``"seeds": [n_base, n_other]`` and ``"covers"`` (``"seeds and tasks"``, or ``"tasks"`` when both
    groups hold one run: then the figures equal `compare`'s), and ``difference_iqm`` the IQM's difference
    where it applies (else None). A verdict claims a change only when the interval excludes 0. ``labels``
    name the groups (default: the runs' labels joined by ``+``). Raises `UsageError` for other than two
    groups, an empty group, an unknown metric, runs of different task sets, k or samples, or an incomplete
    eval.

    Example:
        >>> rec = lambda t, w: {"member": "a", "task_index": t, "outcome": "scored", "env_reward": w}
        >>> def run(name, wins):
        ...     return EvalData(Path(name), {}, [rec(t, float(w)) for t, w in enumerate(wins)])
        >>> base = [run("a0", [0] * 12 + [1] * 4), run("a1", [0] * 11 + [1] * 5)]
        >>> better = [run("b0", [1] * 16), run("b1", [0] + [1] * 15), run("b2", [1] * 16)]
        >>> r = compare_groups([base, better], labels=["A", "B"])
        >>> d = r["comparisons"][0]["members"]["a"]["metrics"]["pass@1"]["difference"]
        >>> d["seeds"], d["covers"], r["comparisons"][0]["verdicts"]["pass@1"]
        ([2, 3], 'seeds and tasks', 'a: +0.70 [0.46, 0.93]')
    """
    flat = _group_runs(groups)
    run_labels = _unique_labels(flat)
    _check_same(flat, run_labels)
    threshold = _threshold(flat, success_threshold)
    ks, names, chosen = _metric_choice(flat, ks, metrics)
    n_base = len(groups[0])
    base_runs, other_runs = run_labels[:n_base], run_labels[n_base:]
    base_label, other_label = _group_names(labels, base_runs, other_runs)
    seeds = [len(groups[0]), len(groups[1])]
    covers = COVERS_TASKS if max(seeds) < 2 else "seeds and tasks"
    members = {
        member: _group_member(flat, n_base, member, names, threshold, seed=seed, confidence=confidence)
        for member in sorted({m for e in flat for m in task_samples(e.records)})
    }
    sides = [
        {"label": label, "path": str(group[0].path), "runs": [str(e.path) for e in group]}
        for label, group in zip((base_label, other_label), groups, strict=True)
    ]
    interval = PAIRED_METHOD if covers == COVERS_TASKS else HIERARCHICAL_METHOD
    return {
        "baseline": dict(sides[0]),
        "evals": sides,
        **_settings(ks, confidence, threshold, interval, chosen, []),
        "seeds": seeds,
        "covers": covers,
        "comparisons": [
            {
                "label": other_label,
                "path": str(groups[1][0].path),
                "baseline": base_label,
                "runs": other_runs,
                "baseline_runs": base_runs,
                "seeds": seeds,
                "covers": covers,
                "members": members,
                "verdicts": _verdicts(members, chosen),
            }
        ],
    }


def _group_names(
    labels: Sequence[str] | None, base_runs: Sequence[str], other_runs: Sequence[str]
) -> list[str]:
    """The two groups' names: ``labels``, else each group's runs' (`_group_label`); never the same twice."""
    if labels is not None and len(labels) != 2:
        raise UsageError(f"labels name the two groups, got {len(labels)}")
    base_label, other_label = (
        labels if labels is not None else (_group_label(base_runs), _group_label(other_runs))
    )
    if base_label == other_label:
        other_label += "'"
    return [base_label, other_label]


def _group_runs(groups: Sequence[Sequence[EvalData]]) -> list[EvalData]:
    """The runs of two groups, the baseline's first (refusing other than two groups, or an empty one)."""
    if len(groups) != 2:
        raise UsageError(
            f"compare_groups compares two groups of runs (the baseline first), got {len(groups)}"
        )
    for i, group in enumerate(groups):
        if not group:
            raise UsageError(f"group {i + 1} holds no eval: give one eval (run) or more a group")
    return [e for g in groups for e in g]


def _group_member(
    flat: Sequence[EvalData],
    n_base: int,
    member: str,
    names: Sequence[str],
    threshold: float,
    *,
    seed: int,
    confidence: float,
) -> dict[str, Any]:
    """A member's entry of `compare_groups`: per metric, each group's value and their difference, pooled
    over runs and tasks (the first ``n_base`` runs are the baseline's)."""
    # The same eval directories on both sides: nothing was drawn independently, the difference is 0.
    same_runs = sorted(str(e.path.resolve()) for e in flat[:n_base]) == sorted(
        str(e.path.resolve()) for e in flat[n_base:]
    )
    metrics_out: dict[str, Any] = {}
    tasks = 0
    for name in names:
        keys, values = _run_values(flat, member, name, threshold)
        a, b = values[:n_base], values[n_base:]
        tasks = max(tasks, len(keys))
        entry: dict[str, Any] = {
            "baseline": _group_interval(a, "mean", seed, confidence),
            "other": _group_interval(b, "mean", seed, confidence),
        }
        entry["difference"] = _group_difference(a, b, "mean", seed, confidence, same_runs)
        entry["difference_iqm"] = (
            _group_difference(a, b, "iqm", seed, confidence, same_runs)
            if _iqm_applies(name, values)
            else None
        )
        entry["verdict"] = verdict(member, entry["difference"])
        metrics_out[name] = entry
    return _member_entry(tasks, tasks, tasks, metrics_out)


def _group_difference(
    a: list[list[float]],
    b: list[list[float]],
    statistic: str,
    seed: int,
    confidence: float,
    same_runs: bool = False,
) -> dict[str, Any]:
    iv = paired_hierarchical_interval(
        a, b, statistic=statistic, confidence=confidence, seed=seed, same_runs=same_runs
    ).as_dict()
    if not a[0]:  # no task: the empty interval says "tasks"; say what the seeds would cover
        iv["covers"] = COVERS_TASKS if max(len(a), len(b)) < 2 else "seeds and tasks"
    return iv


def comparison_markdown(result: Mapping[str, Any]) -> str:
    """The comparison as markdown: per compared eval, a table (member × metric: baseline, other,
    difference) and the verdict lines.

    Example:
        >>> rec = lambda t, w: {"member": "a", "task_index": t, "outcome": "scored", "env_reward": w}
        >>> r = compare([EvalData(Path("x"), {}, [rec(t, 1.0) for t in range(4)])] * 2)
        >>> print(comparison_markdown(r).splitlines()[-1])
        - pass@1: a: no detectable change [−0.72, 0.72]
    """
    lines = [f"# Comparison with {result['baseline']['label']}", ""]
    lines.append(
        f"Differences are other − {result['baseline']['label']}, over the tasks both evaluated, with "
        f"{result['confidence']:.0%} intervals ({result['interval']}). A covered 0 says the tasks cannot "
        "tell a change of that size from none, not that there is none."
    )
    if result.get("seeds"):
        lines += ["", _groups_sentence(result)]
    for note in result["notes"]:
        lines.append(f"- {note}")
    for comp in result["comparisons"]:
        lines += ["", f"## {comp['label']} vs {comp['baseline']}", ""]
        lines += markdown_table(_table_rows(result, comp), spaced=True)
        lines.append("")
        lines += [f"- {name}: {text}" for name, text in comp["verdicts"].items()]
    return "\n".join(lines) + "\n"


def _table_rows(result: Mapping[str, Any], comp: Mapping[str, Any]) -> list[list[str]]:
    """A comparison's rows, the header first: member, tasks, metric, baseline, other, difference
    (markdown and console)."""
    return [["member", "tasks", "metric", comp["baseline"], comp["label"], "difference"]] + [
        [
            member,
            str(entry["tasks"]),
            name,
            format_metric(entry["metrics"][name]["baseline"]),
            format_metric(entry["metrics"][name]["other"]),
            format_difference(entry["metrics"][name]["difference"]),
        ]
        for member, entry in comp["members"].items()
        for name in result["metrics"]
    ]


def _runs(n: int) -> str:
    return f"{n} run{'s' * (n != 1)}"


def _groups_sentence(result: Mapping[str, Any]) -> str:
    """What a groups comparison's intervals cover, and how many runs (seeds) each side holds."""
    n_base, n_other = result["seeds"]
    base, other = result["evals"][0], result["evals"][1]
    sides = f"{base['label']}: {_runs(n_base)}; {other['label']}: {_runs(n_other)}"
    if result.get("covers") == COVERS_TASKS:
        return (
            f"Groups of runs ({sides}). With one run a side the intervals are over tasks only: they say "
            "nothing about another training seed, which may land outside them."
        )
    borrowed = " (a one-run side borrows the other side's seed variance)" if min(n_base, n_other) < 2 else ""
    return (
        f"Groups of runs ({sides}): values are means over each side's runs and tasks; intervals cover "
        f"seeds and tasks: seed-to-seed variance (seeds drawn independently per side{borrowed}) and task "
        f"variance (tasks paired). Runs (seeds) per side: {n_base} vs {n_other}."
    )


def groups_line(result: Mapping[str, Any]) -> str:
    """One line for the console: how many runs (seeds) each side of a groups comparison holds and which
    variance its intervals cover.

    Example:
        >>> groups_line({"seeds": [3, 2], "covers": "seeds and tasks"})
        '3 runs vs 2 runs: intervals cover seeds and tasks (seed-to-seed and task variance)'
        >>> groups_line({"seeds": [1, 1], "covers": "tasks"})
        '1 run vs 1 run: intervals cover tasks only (another training seed may land outside them)'
    """
    n_base, n_other = result["seeds"]
    text = f"{_runs(n_base)} vs {_runs(n_other)}: intervals cover "
    if result.get("covers") == COVERS_TASKS:
        return text + "tasks only (another training seed may land outside them)"
    return text + "seeds and tasks (seed-to-seed and task variance)"


def write_comparison(result: Mapping[str, Any], out: str | Path) -> list[Path]:
    """Write a `compare` result as ``comparison.json``, ``comparison.md`` and (with matplotlib)
    ``comparison.png`` in ``out``; returns the paths written.

    Example:
        >>> import tempfile
        >>> rec = lambda t, w: {"member": "a", "task_index": t, "outcome": "scored", "env_reward": w}
        >>> result = compare([EvalData(Path("x"), {}, [rec(t, 1.0) for t in range(4)])] * 2)
        >>> [p.name for p in write_comparison(result, tempfile.mkdtemp())][:2]
        ['comparison.json', 'comparison.md']
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "comparison.json").write_text(json.dumps(result, indent=2, allow_nan=False), encoding="utf-8")
    (out / "comparison.md").write_text(comparison_markdown(result), encoding="utf-8")
    written = [out / "comparison.json", out / "comparison.md"]
    try:
        import matplotlib.pyplot as plt

        from ormix.app._plots import comparison_figure
    except ImportError:
        return written
    fig = comparison_figure(result)
    fig.savefig(out / "comparison.png", dpi=110)
    plt.close(fig)
    written.append(out / "comparison.png")
    return written


def print_comparison(result: Mapping[str, Any], console: Any, out: Path | None = None) -> None:
    """`ormix compare`'s tables, verdicts and notes; writes the comparison to ``out`` (default
    ``evals/compare-<labels>``) and says where."""
    base = result["baseline"]["label"]
    for comp in result["comparisons"]:
        print_table(console, f"{comp['label']} vs {base}", _table_rows(result, comp))
        for name, line in comp["verdicts"].items():
            console.print(f"{comp['label']} vs {base}, {name}: {line}", highlight=False, markup=False)
    if result.get("seeds"):
        console.print(groups_line(result), highlight=False, markup=False)
    for note in result["notes"]:
        console.print(f"  note: {note}", highlight=False, markup=False)
    if out is None:
        slug = "-".join(re.sub(r"[^A-Za-z0-9_.-]+", "_", e["label"]) for e in result["evals"])
        out = Path("evals") / f"compare-{slug}"
    written = write_comparison(result, out)
    if len(written) < 3:
        console.print("  matplotlib is not installed: no plot (pip install 'ormix[plot]')")
    console.print("wrote: " + ", ".join(str(p) for p in written), highlight=False)
