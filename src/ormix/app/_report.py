"""`ormix report RUN_DIR`: per-environment tables and plots from a run's rollout records.

Reads `<run_dir>/rollouts/rank-*.jsonl` (all ranks merged, see `ormix.telemetry`) and writes
`<run_dir>/report/`: `summary.json` (per member, and per member and step), `report.md` (the table) and
PNG plots over training steps: `reward_coverage.png`, `share.png`, `errors.png`, `latency.png`, and for an
adaptive mixture `weights.png` (the weights it chose), and `env_time.png` (time opening sessions, waiting for
tools and generating per step); these two read the trainer's `log_history.jsonl`, which `ormix train` writes.
The tables and training plots hold training rollouts only. Evaluations during training (records with mode
``eval``, grouped by the step they ran at) are summarised apart, per member with intervals over tasks
(`ormix.evaluation._summary.summarize`: pass@1, pass@k and pass^k for k samples per task, mean reward,
coverage): `summary.json["eval"]`, a section of `report.md`, the printed report, and `eval.png` (pass@1 and
coverage per member over the steps).
matplotlib (the `plot` extra) is imported only here, with the Agg backend; without it the tables and
JSON are still written.

Example:
    >>> import tempfile
    >>> from ormix.telemetry._records import TelemetryRun
    >>> rollouts = [{"member": "echo", "step": 1, "outcome": "scored", "reward": 1.0},   # as the callbacks
    ...             {"member": "echo", "step": 1, "outcome": "unscored", "reward": None}]  # record them
    >>> with tempfile.TemporaryDirectory() as run_dir:
    ...     TelemetryRun(run_dir).write(rollouts)
    ...     result = write_report(run_dir)
    >>> [p.name for p in result.files]
    ['summary.json', 'report.md', 'reward_coverage.png', 'share.png', 'errors.png', 'latency.png']
    >>> result.summary["members"]["echo"]["coverage"]
    0.5
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ormix._runs import read_jsonl
from ormix.app._command import EXIT_BAD_INPUT
from ormix.app._plots import pyplot
from ormix.app._render import print_table
from ormix.app._workspace import Workspace
from ormix.evaluation._summary import markdown_table, summary_markdown, summary_table
from ormix.rollout._outcome import ERROR_KINDS
from ormix.telemetry._records import record_files


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation between ranks; None for no values.

    Example:
        >>> percentile([1, 2, 3, 4], 50), percentile([5.0], 95), percentile([], 50)
        (2.5, 5.0, None)
    """
    data = sorted(float(v) for v in values)
    return sorted_percentile(data, q) if data else None


def sorted_percentile(data: Any, q: float) -> float:
    """`percentile` of values already sorted (a sequence or numpy array, at least one value)."""
    pos = (len(data) - 1) * min(max(q, 0.0), 100.0) / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(data) - 1)
    return float(data[lo] + (data[hi] - data[lo]) * (pos - lo))


def eval_ks(records: Sequence[Mapping[str, Any]]) -> tuple[int, ...]:
    """The k an evaluation reports: 1, and the samples per task (the most any task got) when above 1.

    Example:
        >>> eval_ks([{"member": "a", "task_index": 0}] * 4 + [{"member": "a", "task_index": 1}] * 4)
        (1, 4)
    """
    counts = Counter((r.get("member"), r.get("split"), r.get("task_index")) for r in records)
    k = max(counts.values(), default=1)
    return (1, k) if k > 1 else (1,)


def _eval_steps_table(series: Mapping[Any, Mapping[str, Any]], metric: str, last: int = 8) -> list[list[str]]:
    """Rows member × step of one eval metric's value (the last `last` steps), header row first."""
    steps = sorted(series, key=int)[-last:]
    members = sorted({m for s in steps for m in series[s]["members"]})
    rows = [["member", *(f"step {s}" for s in steps)]]
    for m in members:
        values = [(series[s]["members"].get(m) or {}).get(metric) or {} for s in steps]
        rows.append([m, *(_fmt(v.get("value")) for v in values)])
    return rows


TREND_METRICS = ("reward", "training_reward", "coverage")


def trend_lines(summary: Mapping[str, Any]) -> list[str]:
    """A report summary's `trend` in words: a heading, then one line per member (nothing without a trend).

    Example:
        >>> t = {"first_steps": [1, 10], "last_steps": [21, 30],
        ...      "members": {"echo": {"reward": [0.2, 0.36], "training_reward": [0.2, 0.36],
        ...                           "coverage": [1.0, 1.0]}}}
        >>> print("\\n".join(trend_lines({"trend": t})))
        first third (steps 1-10) -> last third (steps 21-30), rollouts pooled:
          echo: reward 0.20 -> 0.36 (scored rollouts), training reward 0.20 -> 0.36, coverage 1.00 -> 1.00
    """
    t = summary.get("trend") or {}
    if not t:
        return []
    (a, b), (c, d) = t["first_steps"], t["last_steps"]
    lines = [f"first third (steps {a}-{b}) -> last third (steps {c}-{d}), rollouts pooled:"]
    for member, v in t["members"].items():
        lines.append(
            f"  {member}: reward {_fmt(v['reward'][0])} -> {_fmt(v['reward'][1])} (scored rollouts), "
            f"training reward {_fmt(v['training_reward'][0])} -> {_fmt(v['training_reward'][1])}, "
            f"coverage {_fmt(v['coverage'][0])} -> {_fmt(v['coverage'][1])}"
        )
    return lines


@dataclass
class ReportResult:
    """What `write_report` produced: the files written, the summary, and a note when plots were skipped."""

    files: list[Path] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    note: str | None = None


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _mix(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])) or "-"


def error_mix(s: Mapping[str, Any]) -> str:
    """The "error mix" cell: the rollouts' infrastructure error kinds, then the failed tool calls' kinds (a
    tool that raises fails its calls, not its rollouts); ``-`` only when nothing failed.

    Example:
        >>> error_mix({"errors": {}, "call_errors": {"tool_failed": 4}, "tools": {"answer": {"calls": 4}}})
        'calls: tool_failed 4 of 4'
        >>> error_mix({"errors": {"transport": 1}, "call_errors": {}, "tools": {}})
        'transport 1'
    """
    parts = [_mix(s["errors"])] if s.get("errors") else []
    calls = sum(int(t.get("calls", 0)) for t in (s.get("tools") or {}).values())
    # Infrastructure kinds of calls are already counted as their rollouts' errors.
    failed = {k: v for k, v in (s.get("call_errors") or {}).items() if k not in ERROR_KINDS}
    if failed:
        parts.append(f"calls: {_mix(failed)} of {calls}")
    return "; ".join(parts) or "-"


TABLE_COLUMNS = (
    "member",
    "rollouts",
    "share",
    "reward",
    "coverage",
    "unscored",
    "errors",
    "error mix",
    "informative",
    "calls",
    "tool errs",
    "wrong env",
    "open ms p50/95",
    "tool ms p50/95",
)
# Calls, tool errs and wrong env are means per rollout; informative is the fraction of GRPO groups whose
# rewards differ.


def table_rows(summary: Mapping[str, Mapping[str, Any]]) -> list[list[str]]:
    """The report table as strings (one row per member, in `TABLE_COLUMNS` order)."""
    rows = []
    for member, s in summary.items():
        rows.append(
            [
                member,
                str(s["rollouts"]),
                _fmt(s["share"]),
                _fmt(s["reward"], 3),
                _fmt(s["coverage"]),
                _fmt(s["unscored_rate"]),
                _fmt(s["error_rate"]),
                error_mix(s),
                _fmt(s["informative_groups"]),
                _fmt(s["tool_calls"]),
                _fmt(s["tool_errors"]),
                _fmt(s["wrong_env_calls"]),
                f"{_fmt(s['open_ms_p50'], 0)}/{_fmt(s['open_ms_p95'], 0)}",
                f"{_fmt(s['tool_ms_p50'], 0)}/{_fmt(s['tool_ms_p95'], 0)}",
            ]
        )
    return rows


def _markdown(
    report: Mapping[str, Any],
    alarms: Sequence[Mapping[str, Any]],
    run_dir: Path,
    plots: Sequence[Path],
) -> str:
    summary: Mapping[str, Mapping[str, Any]] = report["members"]
    lines = [f"# ormix report: {run_dir.name}", "", *markdown_table([TABLE_COLUMNS, *table_rows(summary)])]
    said = trend_lines(report)
    if said:
        lines += ["", "## Trend", "", said[0], ""] + [f"- {line.strip()}" for line in said[1:]]
    tools = [
        [member, tool, str(t["calls"]), str(t["errors"]), _fmt(t["p50_ms"], 1), _fmt(t["p95_ms"], 1)]
        for member, s in summary.items()
        for tool, t in s["tools"].items()
    ]
    lines += [
        "",
        "## Tools",
        "",
        *markdown_table([("member", "tool", "calls", "errors", "p50 ms", "p95 ms"), *tools]),
    ]
    evaluation = report.get("eval") or {}
    if evaluation.get("steps"):
        series, last = evaluation["steps"], str(evaluation["last_step"])
        section = summary_markdown(series[last], f"Evaluation at step {last}")
        lines += ["", "#" + section.rstrip("\n")]
        lines += [
            "",
            f"{evaluation['rollouts']} eval rollouts over {len(series)} evaluation(s), "
            f"{series[last]['k'][-1]} per task; the tables above count training rollouts only.",
        ]
        for metric in ("pass@1", "coverage"):
            lines += ["", f"### {metric} by step", "", *markdown_table(_eval_steps_table(series, metric))]
    finals = report.get("run_evals") or {}
    if finals.get("after"):
        section = summary_markdown(finals["after"], "Eval of the trained model (RUN_DIR/eval)")
        lines += ["", "#" + section.rstrip("\n")]
    if finals.get("change"):
        lines += ["", "### What training changed (after − before, paired over the same tasks)", ""]
        lines += [f"- {metric}: {verdict}" for metric, verdict in finals["change"].items()]
    if finals.get("change_stale"):
        lines += ["", f"Note: {finals['change_stale']}."]
    if alarms:
        lines += ["", "## Alarms", ""] + [f"- step {a.get('step')}: {a.get('message')}" for a in alarms]
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots]
    return "\n".join(lines) + "\n"


#: Marker and line style per member (by position), so members stay apart where their lines overlap.
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_STYLES = ("-", "--", "-.", ":")
#: How far apart errors.png draws members' lines (rates in [0, 1]): equal rates stay visible side by side.
_ERRORS_OFFSET = 0.015


def _is_member_key(key: str, members: Mapping[str, Any]) -> bool:
    parts = key.split("/")
    return len(parts) == 3 and parts[0] == "ormix" and parts[1] in members


def planned_shares(manifest: Mapping[str, Any] | None) -> dict[int, dict[str, float]]:
    """Per training step, each member's share of the batch as the run's plan laid it out (the manifest's
    ``plan`` rows, ``prompts_per_step`` of them per step); empty when the manifest does not say (no
    ``prompts_per_step``, an adaptive plan decided as it trains).

    Example:
        >>> planned_shares({"plan": [["a", 0], ["b", 0], ["a", 1], ["a", 2]],
        ...                 "config": {"prompts_per_step": 2, "strategy": "weights"}})
        {1: {'a': 0.5, 'b': 0.5}, 2: {'a': 1.0}}
    """
    config = (manifest or {}).get("config") or {}
    plan = (manifest or {}).get("plan") or []
    k = config.get("prompts_per_step")
    if not isinstance(k, int) or k < 1 or config.get("strategy") == "adaptive" or not plan:
        return {}
    out: dict[int, dict[str, float]] = {}
    for start in range(0, len(plan), k):
        rows = [row[0] for row in plan[start : start + k]]
        out[start // k + 1] = {m: rows.count(m) / len(rows) for m in dict.fromkeys(rows)}
    return out


def logged_series(run_dir: Path, metrics: Sequence[str]) -> dict[int, dict[str, float]]:
    """Per training step, the ``ormix/<member>/<metric>`` values the trainer logged (``log_history.jsonl``,
    written by `ormix train`), for these metrics: what only the trainer knows, such as an adaptive
    mixture's weights and tasks set aside.

    Example:
        >>> import tempfile; d = Path(tempfile.mkdtemp())
        >>> _ = (d / "log_history.jsonl").write_text('{"step": 2, "ormix/a/weight": 0.7, "loss": 1}\\n')
        >>> logged_series(d, ["weight"])
        {2: {'ormix/a/weight': 0.7}}
    """
    out: dict[int, dict[str, float]] = {}
    completed = Workspace(run_dir).completed_step()
    for entry in read_jsonl(Path(run_dir) / "log_history.jsonl"):
        step = entry.get("step")
        if not isinstance(step, int) or (completed is not None and step > completed):
            continue
        values = {
            k: float(v)
            for k, v in entry.items()
            if k.startswith("ormix/") and k.rsplit("/", 1)[-1] in metrics and isinstance(v, (int, float))
        }
        if values:
            out.setdefault(step, {}).update(values)
    return out


#: Up to this many steps share.png draws a matplotlib bar (a patch) per step and member; above, the same bars
#: as one collection per member.
_BAR_PATCHES = 200


def _bars(
    steps: Sequence[int], heights: Sequence[float], bottoms: Sequence[float], colour: Any, label: str
) -> Any:
    """Bars 0.8 wide centred on the steps, as one `PolyCollection` (what `Axes.bar` draws, without a patch
    per bar)."""
    import numpy as np
    from matplotlib.collections import PolyCollection

    x = np.asarray(steps, dtype=float)
    y0 = np.asarray(bottoms, dtype=float)
    y1 = y0 + np.asarray(heights, dtype=float)
    left, right = x - 0.4, x + 0.4
    verts = np.stack([left, y0, left, y1, right, y1, right, y0], 1).reshape(-1, 4, 2)
    return PolyCollection(list(verts), facecolors=colour, edgecolors="none", alpha=0.85, label=label)


def figures(
    series: Mapping[int, Mapping[str, float]],
    members: Sequence[str],
    logged: Mapping[int, Mapping[str, float]] | None = None,
    trend: Mapping[str, Any] | None = None,
    planned: Mapping[int, Mapping[str, float]] | None = None,
) -> dict[str, Any]:
    """The report's matplotlib figures by file name, from the per-step metrics `scan_run` computes (and
    `logged_series` for the adaptive weights, `trend` for the first- and last-third reward drawn as bars
    over the per-step curve, `planned_shares` for the plan's share per step drawn over the actual one); the
    caller saves and closes them. Needs matplotlib.

    Example:
        >>> figs = figures({1: {"ormix/a/coverage": 0.0, "ormix/a/share": 1.0}}, ["a"])
        >>> sorted(figs)
        ['errors.png', 'latency.png', 'reward_coverage.png', 'share.png']
        >>> figs["reward_coverage.png"].axes[0].texts[0].get_text()[:25]
        'no rollout was scored: no'
        >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    plt = pyplot()
    pen = _Pen(members, plt)
    written = {
        "reward_coverage.png": _reward_coverage_figure(plt, pen, series, members, trend),
        "share.png": _share_figure(plt, pen, series, members, planned),
        "errors.png": _errors_figure(plt, pen, series, members),
        "latency.png": _latency_figure(plt, pen, series, members),
    }
    if logged and any(k.endswith("/weight") for v in logged.values() for k in v):
        written["weights.png"] = _weights_figure(plt, pen, series, members, logged)
    return written


class _Pen:
    """One colour, marker and line style per environment in every figure, and how an axis is finished."""

    def __init__(self, members: Sequence[str], plt: Any) -> None:
        palette = plt.rcParams["axes.prop_cycle"].by_key().get("color") or ["C0"]
        self.colours = {m: palette[i % len(palette)] for i, m in enumerate(members)}
        self.markers = {m: _MARKERS[i % len(_MARKERS)] for i, m in enumerate(members)}
        self.styles = {m: _STYLES[i % len(_STYLES)] for i, m in enumerate(members)}

    def line(
        self, ax: Any, member: str, metric: str, source: Mapping[int, Mapping[str, float]], **kw: Any
    ) -> None:
        xs = [s for s in sorted(source) if f"ormix/{member}/{metric}" in source[s]]
        ys = [source[s][f"ormix/{member}/{metric}"] for s in xs]
        if xs:
            kw.setdefault("linestyle", self.styles[member])
            ax.plot(xs, ys, marker=self.markers[member], markersize=4, color=self.colours[member], **kw)

    @staticmethod
    def finish(ax: Any, empty: str, legend: str = "best") -> None:
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # training steps are whole numbers
        ax.grid(alpha=0.3)
        drawn = any(len(line.get_xdata()) for line in ax.lines)  # legend-only handles draw nothing
        if not drawn and not ax.collections and not ax.patches:
            ax.text(0.5, 0.5, empty, ha="center", va="center", transform=ax.transAxes, color="0.4")
        _legend(ax, legend)


def _reward_coverage_figure(
    plt: Any,
    pen: _Pen,
    series: Mapping[int, Mapping[str, float]],
    members: Sequence[str],
    trend: Mapping[str, Any] | None,
) -> Any:
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
    for m in members:
        pen.line(top, m, "reward", series, label=m)
        pen.line(bottom, m, "coverage", series, label=m)
    # A step of a tiny batch says little alone: the pooled thirds show whether the curve rose.
    if trend:
        spans = (trend["first_steps"], trend["last_steps"])
        bars = [
            (y, a, b, pen.colours[m])
            for m, values in trend["members"].items()
            if m in pen.colours
            for (a, b), y in zip(spans, values["reward"], strict=True)
            if y is not None
        ]
        for y, a, b, colour in bars:
            top.hlines(y, a - 0.5, b + 0.5, colors=colour, linewidth=6, alpha=0.3)
        if bars:
            top.plot([], [], color="0.5", linewidth=6, alpha=0.3, label="first / last third, rollouts pooled")
    # A member never scored has no reward line: the legend says so rather than leaving it out.
    for m in members:
        if not any(f"ormix/{m}/reward" in values for values in series.values()):
            top.plot(
                [],
                [],
                marker=pen.markers[m],
                linestyle="none",
                color=pen.colours[m],
                label=f"{m}: never scored",
            )
    rewards = [v[f"ormix/{m}/reward"] for v in series.values() for m in members if f"ormix/{m}/reward" in v]
    if all(0.0 <= r <= 1.0 for r in rewards):  # the usual reward range: fixed, so runs compare at a glance
        top.set_ylim(-0.05, 1.05)
    top.set_ylabel("reward (scored rollouts)")
    top.set_title("Reward and coverage per environment")
    bottom.set_ylabel("coverage (scored fraction)")
    bottom.set_ylim(-0.05, 1.05)
    bottom.set_xlabel("training step")
    pen.finish(top, "no rollout was scored: no reward to plot (see coverage and errors.png)")
    pen.finish(bottom, "no rollouts recorded")
    return fig


def _share_figure(
    plt: Any,
    pen: _Pen,
    series: Mapping[int, Mapping[str, float]],
    members: Sequence[str],
    planned: Mapping[int, Mapping[str, float]] | None,
) -> Any:
    # Each step's batch is a whole: one stacked bar per step (quotas change by step, nothing in between),
    # the plan's share drawn over it as the outline of where each member's part should end.
    steps = sorted(series)
    fig, ax = plt.subplots(figsize=(9, 4))
    bottoms = dict.fromkeys(steps, 0.0)
    for m in members:
        heights = [series[s].get(f"ormix/{m}/share", 0.0) for s in steps]
        base = [bottoms[s] for s in steps]
        if len(steps) <= _BAR_PATCHES:
            ax.bar(steps, heights, bottom=base, width=0.8, color=pen.colours[m], alpha=0.85, label=m)
        else:
            # The same bars as one collection: a patch per bar costs ~1 ms each (thousands of steps).
            ax.add_collection(_bars(steps, heights, base, colour=pen.colours[m], label=m), autolim=True)
        for s, h in zip(steps, heights, strict=True):
            bottoms[s] += h
    if len(steps) > _BAR_PATCHES:
        ax.autoscale_view()
    plan = planned or {}
    plan_steps = [s for s in steps if s in plan]
    if plan_steps:
        tops = dict.fromkeys(plan_steps, 0.0)
        for m in members:
            for s in plan_steps:
                tops[s] += float(plan[s].get(m, 0.0))
            ax.hlines(
                [tops[s] for s in plan_steps],
                [s - 0.4 for s in plan_steps],
                [s + 0.4 for s in plan_steps],
                colors="black",
                linestyles="--",
                linewidth=1.2,
            )
        ax.plot([], [], color="black", linestyle="--", linewidth=1.2, label="planned (each member's top)")
    ax.set_ylim(0, 1)
    ax.set_xlabel("training step")
    ax.set_ylabel("share of the batch")
    ax.set_title("Batch share per environment, per step" + (" (dashed: the plan)" if plan_steps else ""))
    pen.finish(ax, "no rollouts recorded", "outside")
    return fig


def _errors_figure(
    plt: Any, pen: _Pen, series: Mapping[int, Mapping[str, float]], members: Sequence[str]
) -> Any:
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
    # Members often fail alike (all 0, all 1): each is drawn a little apart, so no line hides another.
    offsets = {m: (i - (len(members) - 1) / 2) * _ERRORS_OFFSET for i, m in enumerate(members)}
    shifted = {
        s: {k: v + offsets[k.split("/")[1]] for k, v in values.items() if _is_member_key(k, offsets)}
        for s, values in series.items()
    }
    for m in members:
        pen.line(top, m, "error_rate", shifted, label=m)
        pen.line(bottom, m, "unscored_rate", shifted, label=m)
    top.set_ylabel("infrastructure error rate")
    top.set_title(
        f"Failures per environment (lines set apart by up to ±{_ERRORS_OFFSET * len(members) / 2:.2f})"
    )
    bottom.set_ylabel("unscored rate")
    bottom.set_xlabel("training step")
    for ax in (top, bottom):
        ax.set_ylim(-0.05, 1.05)
        pen.finish(ax, "no rollouts recorded")
    return fig


def _latency_figure(
    plt: Any, pen: _Pen, series: Mapping[int, Mapping[str, float]], members: Sequence[str]
) -> Any:
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
    for m in members:
        pen.line(top, m, "tool_ms_p50", series, label=f"{m} p50", linestyle="-")
        pen.line(top, m, "tool_ms_p95", series, label=f"{m} p95", linestyle="--")
        pen.line(bottom, m, "session_open_ms", series, label=m)
    top.set_ylabel("tool call latency (ms)")
    top.set_title("Latency per environment")
    bottom.set_ylabel("session open (ms, mean)")
    bottom.set_xlabel("training step")
    pen.finish(top, "no tool was called")
    pen.finish(bottom, "no session opened")
    return fig


def _weights_figure(
    plt: Any,
    pen: _Pen,
    series: Mapping[int, Mapping[str, float]],
    members: Sequence[str],
    logged: Mapping[int, Mapping[str, float]],
) -> Any:
    # An adaptive mixture: the weights the planner chose next to the share each member actually got.
    # What the signal believed (its value, the outcome noise it estimated): why a member got its share.
    fig, (top, middle, bottom) = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    for m in members:
        pen.line(top, m, "weight", logged, label=f"{m} weight")
        pen.line(top, m, "share", series, label=f"{m} actual share", linestyle=":", alpha=0.6)
        pen.line(middle, m, "signal", logged, label=f"{m} signal")
        pen.line(middle, m, "noise", logged, label=f"{m} noise", linestyle="--", alpha=0.7)
        pen.line(bottom, m, "tasks_set_aside", logged, label=m)
    top.set_ylim(-0.05, 1.05)
    top.set_ylabel("weight / share of the batch")
    top.set_title("Adaptive weights per environment")
    middle.set_ylabel("signal value / outcome noise")
    bottom.set_ylabel("tasks set aside")
    bottom.set_xlabel("training step")
    pen.finish(top, "no weights logged")
    pen.finish(middle, "no signal logged (warm-up only)")
    pen.finish(bottom, "no member filters its tasks")
    return fig


def eval_figure(series: Mapping[int, Mapping[str, Any]], members: Sequence[str]) -> Any:
    """Eval curves: pass@1 (with its interval) and coverage per member over the steps evaluations ran at
    (per step, `ormix.evaluation._summary.summarize` of its eval records); members keep the colours and
    markers of the training plots (their order in ``members``). Needs matplotlib.

    Example:
        >>> from ormix.evaluation._summary import summarize
        >>> rec = {"member": "a", "mode": "eval", "task_index": 0, "outcome": "scored", "env_reward": 1.0}
        >>> fig = eval_figure({step: summarize([rec], (1,)) for step in (1, 2)}, ["a"])
        >>> [line.get_label() for line in fig.axes[0].lines]
        ['a']
        >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    from matplotlib.ticker import MaxNLocator

    plt = pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
    steps = sorted(series)
    pen = _Pen(members, plt)
    for m in members:
        style = {
            "color": pen.colours[m],
            "marker": pen.markers[m],
            "linestyle": pen.styles[m],
            "markersize": 4,
        }
        for ax, metric in ((top, "pass@1"), (bottom, "coverage")):
            points = [(s, series[s]["members"][m][metric]) for s in steps if m in series[s]["members"]]
            points = [(s, v) for s, v in points if v.get("value") is not None]
            if not points:
                continue
            xs = [s for s, _ in points]
            ax.plot(xs, [v["value"] for _, v in points], label=m, **style)
            if all(v.get("low") is not None and v.get("high") is not None for _, v in points):
                ax.fill_between(
                    xs,
                    [v["low"] for _, v in points],
                    [v["high"] for _, v in points],
                    color=style["color"],
                    alpha=0.15,
                    linewidth=0,
                )
    confidence = next(iter(series.values()))["confidence"] if series else 0.95
    top.set_title(f"Evaluation per environment (shaded: {confidence:.0%} interval over tasks)")
    top.set_ylabel("pass@1")
    bottom.set_ylabel("coverage (scored fraction)")
    bottom.set_xlabel("training step")
    for ax in (top, bottom):
        ax.set_ylim(-0.05, 1.05)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        if not ax.lines:
            ax.text(0.5, 0.5, "no evaluation scored", ha="center", va="center", transform=ax.transAxes)
        _legend(ax, "best")
    return fig


#: Where a step's time went, as `ConcurrentGRPOTrainer` logs it (``ormix/env/<metric>``, seconds).
ENV_TIME_METRICS = ("open_s", "tools_s", "generate_s")


def env_time_figure(env_time: Mapping[int, Mapping[str, float]]) -> Any:
    """Where each step's rollout time went (`ENV_TIME_METRICS` from `logged_series`), stacked."""
    from matplotlib.ticker import MaxNLocator

    plt = pyplot()
    steps = sorted(env_time)
    labels = {"open_s": "opening sessions", "tools_s": "waiting for tools", "generate_s": "generating"}
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.stackplot(
        steps,
        [[env_time[s].get(f"ormix/env/{m}", 0.0) for s in steps] for m in ENV_TIME_METRICS],
        labels=[labels[m] for m in ENV_TIME_METRICS],
        alpha=0.85,
    )
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("training step")
    ax.set_ylabel("seconds in the step's rollouts")
    ax.set_title("Where rollout time went")
    ax.grid(alpha=0.3)
    _legend(ax, "upper right")
    return fig


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run_evals(run_dir: str | Path) -> dict[str, Any]:
    """The run's own evals as their files hold them: ``after`` (``RUN_DIR/eval``, `ormix train`'s eval of the
    trained model), ``before`` (``RUN_DIR/eval-before``) and ``change`` (the verdicts per metric of
    ``RUN_DIR/eval-comparison``), or ``change_stale`` (why not) when the evals there no longer give those
    verdicts (one was run again with ``--overwrite``); only those that exist.

    Example:
        >>> run_evals("no-such-run")
        {}
    """
    run = Workspace(run_dir)
    out: dict[str, Any] = {}
    for key, where in (("before", run.eval_before_path), ("after", run.eval_path)):
        path = where / "summary.json"
        if path.is_file():
            out[key] = json.loads(path.read_text(encoding="utf-8"))
    path = run.comparison_path / "comparison.json"
    if path.is_file():
        comparison = json.loads(path.read_text(encoding="utf-8"))
        verdicts = (comparison.get("comparisons") or [{}])[0].get("verdicts", {})
        # `ormix eval --overwrite` can replace eval/ (or eval-before/) after training compared them: a
        # verdict is shown only while the evals there still give it.
        stale = _stale_comparison(run, comparison, verdicts, out.get("before"), out.get("after"))
        if stale is None:
            out["change"] = verdicts
        else:
            out["change_stale"] = (
                f"{run.comparison_path} no longer matches {run.eval_before_path.name}/ and "
                f"{run.eval_path.name}/ ({stale}), so what training changed is not shown: "
                f"`ormix compare {run.eval_before_path} {run.eval_path} --out {run.comparison_path}` "
                "compares them again"
            )
    return out


def _stale_comparison(
    run: Workspace,
    comparison: Mapping[str, Any],
    verdicts: Mapping[str, str],
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
) -> str | None:
    """Why ``comparison.json`` no longer holds what the run's evals give (``None`` when it does; ``before``
    and ``after``: their summaries): the comparison is made again, with the settings it was made with, from
    the evals there now.

    comparison.json names the evals it compared by path only (the same after an ``--overwrite``), so
    their content is what tells.
    """
    from ormix._errors import UsageError
    from ormix.app._compare import compare, load_eval

    for where, summary in ((run.eval_before_path, before), (run.eval_path, after)):
        ks = (summary or {}).get("k")
        if ks is not None and comparison.get("k") is not None and list(ks) != list(comparison["k"]):
            # Training evaluates before and after with the same k: another k is an eval run again since.
            shown = ",".join(map(str, ks))
            return f"{where.name}/ now has k {shown}, the comparison k {','.join(map(str, comparison['k']))}"
        threshold = (summary or {}).get("success_threshold")
        if threshold is not None and threshold != comparison.get("success_threshold", threshold):
            # Re-summarised at another threshold: its table's pass@k is not the one compared.
            return f"{where.name}/ now counts a success at reward >= {threshold:g}, the comparison at " + (
                f"{comparison['success_threshold']:g}"
            )
    try:
        again = compare(
            [load_eval(run.eval_before_path), load_eval(run.eval_path)],
            ks=comparison.get("k"),
            success_threshold=comparison.get("success_threshold"),
            confidence=float(comparison.get("confidence", 0.95)),
            metrics=comparison.get("metrics"),
        )
    except UsageError as e:
        return str(e).splitlines()[0].rstrip(":")
    if again["comparisons"][0]["verdicts"] != verdicts:
        return "the evals there now give other verdicts (one was run again, or summarised otherwise, since)"
    return None


def write_report(run_dir: str | Path, scan: Mapping[str, Any] | None = None) -> ReportResult:
    """Write `summary.json`, `report.md` and the plots into `<run_dir>/report/` and return what was written.

    The figures are `ormix.app._scan.scan_run`'s (the run's record files read by columns: time linear in
    the records and memory about 200 bytes a rollout, whatever its texts) unless ``scan`` gives them. Raises
    `FileNotFoundError` when the run directory holds no rollout records.
    """
    run_dir = Path(run_dir)
    if scan is None:
        from ormix.app._scan import scan_run

        scan = scan_run(run_dir)
    summary, series, evaluated = scan["summary"], scan["series"], scan["evaluated"]
    # The training figures show the members that trained (an eval-only one would read "never scored"); the
    # eval figure all, the trained first so that each keeps its colour there.
    trained = list(summary)
    members = [*trained, *(m for m in scan["members"] if m not in summary)]
    alarms = read_jsonl(run_dir / "alarms.jsonl")
    folder = run_dir / "report"
    folder.mkdir(parents=True, exist_ok=True)
    result = ReportResult(
        summary={
            "members": summary,
            "eval": {
                "steps": {str(k): v for k, v in evaluated.items()},
                "last_step": max(evaluated),
                "rollouts": scan["evals"],
            }
            if evaluated
            else {},
            "steps": {str(k): v for k, v in series.items()},
            "trend": scan["trend"],
            "alarms": alarms,
            "records": scan["records"],
            "train_records": scan["train"],
            "eval_records": scan["evals"],
            "unfinished_step_records": scan["unfinished"],
            "run_evals": run_evals(run_dir),
        }
    )
    env_time = logged_series(run_dir, ENV_TIME_METRICS)  # logged by ConcurrentGRPOTrainer
    if env_time:
        result.summary["env_time_s"] = {
            metric: percentile(
                [v[f"ormix/env/{metric}"] for v in env_time.values() if f"ormix/env/{metric}" in v], 50
            )
            for metric in ENV_TIME_METRICS
        }
    plots: list[Path] = []
    if series or evaluated:
        try:
            drawn = {}
            if series:
                logged = logged_series(run_dir, ("weight", "tasks_set_aside", "noise", "signal"))
                planned = planned_shares(Workspace(run_dir).read_manifest())
                drawn = figures(series, trained, logged, result.summary["trend"], planned)
            if env_time:
                drawn["env_time.png"] = env_time_figure(env_time)
            if evaluated:
                drawn["eval.png"] = eval_figure(evaluated, members)
            plots = [_save(fig, folder / name) for name, fig in drawn.items()]
        except ImportError:
            result.note = "matplotlib is not installed: no plots (pip install 'ormix[plot]')"
    summary_path = folder / "summary.json"
    with open(summary_path, "w", encoding="utf-8") as fh:  # written as it is encoded: no second copy
        json.dump(result.summary, fh, indent=2, default=str)
    md_path = folder / "report.md"
    md_path.write_text(_markdown(result.summary, alarms, run_dir, plots), encoding="utf-8")
    result.files = [summary_path, md_path, *plots]
    return result


def report_command(run_dir: Path, console: Any, err: Any = None) -> int:
    """`ormix report RUN_DIR`: print the per-environment table and write plots; 2 when the directory does
    not exist or holds no rollout records (an eval directory included) or none of a completed step, else 0.
    Errors go to ``err`` (the command line's stderr console; default: ``console``, as at the end of
    `ormix train`).

    Example:
        >>> import io, tempfile
        >>> from rich.console import Console
        >>> console = Console(file=io.StringIO())
        >>> report_command(Path("no/such/run"), console, console)
        2
        >>> with tempfile.TemporaryDirectory() as run_dir:     # a directory without rollout records
        ...     report_command(Path(run_dir), console, console)
        2
    """
    err = console if err is None else err
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        err.print(
            f"[red]error:[/red] {run_dir} is not a directory; pass the run directory "
            "(the trainer's output_dir)"
        )
        return EXIT_BAD_INPUT
    try:
        result = write_report(run_dir)
    except FileNotFoundError:
        err.print(f"[red]error:[/red] {_no_report_because(run_dir)}", highlight=False)
        return EXIT_BAD_INPUT
    rows = table_rows(result.summary["members"])
    # Two narrower tables read better in a terminal than one with 14 columns.
    split = TABLE_COLUMNS.index("calls")
    titles = (
        f"{run_dir.name}: outcomes ({result.summary['train_records']} "
        + (
            f"training rollouts; {result.summary['eval_records']} eval rollouts below)"
            if result.summary["eval_records"]
            else "rollouts)"
        ),
        "tool use (per rollout) and latency",
    )
    for title, columns in ((titles[0], range(split)), (titles[1], [0, *range(split, len(TABLE_COLUMNS))])):
        print_table(
            console, title, [[row[i] for i in columns] for row in [TABLE_COLUMNS, *rows]], overflow="fold"
        )
    env_time = result.summary.get("env_time_s")
    if env_time:
        console.print(
            "rollout time per step (median): "
            + ", ".join(f"{m[:-2]} {v:.2f} s" for m, v in env_time.items() if v is not None)
        )
    for line in trend_lines(result.summary):
        console.print(line, highlight=False)
    _print_eval(result.summary.get("eval") or {}, console)
    _print_run_evals(result.summary.get("run_evals") or {}, console)
    for alarm in result.summary["alarms"]:
        console.print(f"[yellow]alarm[/yellow] step {alarm.get('step')}: {alarm.get('message')}")
    if result.note:
        console.print(f"[yellow]note:[/yellow] {result.note}")
    console.print("wrote:")
    for path in result.files:
        console.print(f"  {path}")
    return 0


def _print_eval(evaluation: Mapping[str, Any], console: Any) -> None:
    """The evaluations during training: the last one's table with intervals, then pass@1 by step."""
    if not evaluation.get("steps"):
        return
    series, last = evaluation["steps"], str(evaluation["last_step"])
    k, rollouts = series[last]["k"][-1], evaluation["rollouts"]
    title = (
        f"eval at step {last} ({k} sample{'s' if k > 1 else ''} per task; {rollouts} eval rollouts "
        f"over {len(series)} evaluation(s), not in the tables above)"
    )
    print_table(console, title, summary_table(series[last]), overflow="fold")
    if len(series) > 1:
        print_table(console, "eval pass@1 by step", _eval_steps_table(series, "pass@1"))
    console.print(
        f"  {series[last]['confidence']:.0%} intervals over tasks ({series[last]['interval']}); unscored "
        "rollouts count as failures, infrastructure errors are left out (error_rate)",
        highlight=False,
    )


def _print_run_evals(finals: Mapping[str, Any], console: Any) -> None:
    """The eval of the trained model (its table with intervals), then what changed since before training."""
    if finals.get("after"):
        print_table(console, "eval of the trained model (RUN_DIR/eval)", summary_table(finals["after"]))
    if finals.get("change"):
        console.print("[bold]what training changed[/bold] (after − before, paired over the same eval tasks):")
        for metric, verdict in finals["change"].items():
            console.print(f"  {metric}: {verdict}", highlight=False, markup=False)
    if finals.get("change_stale"):
        console.print(f"[yellow]note:[/yellow] {finals['change_stale']}", highlight=False)


def _legend(ax, loc: str) -> None:
    """A legend only when something was drawn with a label (an empty one makes matplotlib warn);
    ``"outside"``: right of the axes, where it covers no data."""
    if not ax.get_legend_handles_labels()[0]:
        return
    if loc == "outside":
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=8)
        ax.figure.tight_layout()
    else:
        ax.legend(loc=loc, fontsize=8)


def _no_report_because(run_dir: Path) -> str:
    """Why a run directory gives no report, and what to do: its records are all of steps it did not
    complete, it is an eval directory, or it holds no records."""
    completed = Workspace(run_dir).completed_step()
    held = _lines(record_files(run_dir)) if completed is not None else 0
    if held:
        stopped = " (the run stopped before completing one)" if completed == 0 else ""
        return (
            f"{run_dir} holds {held} rollout records, all from steps after the last completed step "
            f"{completed}{stopped}, and a report counts completed steps only: `ormix show {run_dir}` shows "
            "those rollouts"
        )
    if (run_dir / "rollouts.jsonl").is_file() and (run_dir / "summary.json").is_file():
        # `ormix eval`'s output (or a run's eval/): its summary is its report already.
        return (
            f"{run_dir} is an eval directory, not a run directory: read its summary.json (and report.md), or "
            f"see its rollouts with `ormix show {run_dir}`"
        )
    return (
        f"no rollout records in {run_dir / 'rollouts'} (rank-*.jsonl). Train with ormix's callbacks "
        "(`callbacks=mix.callbacks` or `spec.callbacks`) so each rollout is recorded, or point at the run's "
        "output_dir."
    )


def _lines(paths: Sequence[Path]) -> int:
    """How many lines the files hold (a torn last line counted): what a run without a report holds."""
    count = 0
    for path in paths:
        with open(path, "rb") as fh:
            count += sum(1 for _ in fh)
    return count
