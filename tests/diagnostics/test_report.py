"""`ormix report`: tables and plots from the rollout records of a real (tiny, scripted) GRPO run."""

from __future__ import annotations

import io
import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from ormix.app._report import TABLE_COLUMNS, percentile, report_command, table_rows, write_report
from ormix.telemetry._records import TelemetryRun
from support.report_reference import member_summary, reference_scan, step_series, trend
from support.trl_args import cpu_grpo_config, scripted_trainer

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=250, color_system=None), buf


@pytest.fixture(scope="module")
def finished_run(tiny_model, tmp_path_factory):
    """Three GRPO steps on a mixture of two `local:echo` members (scripted: one right, one wrong a group)."""
    import os

    from ormix import MixtureSpec, OpenRewardSpec
    from ormix.workbench._scripted import tool_call

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    mix = MixtureSpec(
        {
            "easy": OpenRewardSpec("local:echo", indices=[0, 1, 2], local_serve="thread"),
            "hard": OpenRewardSpec("local:echo", indices=[5, 6, 7], local_serve="thread"),
        },
        prompts_per_step=2,
        num_samples=6,
        seed=0,
    )

    def script(ctx):
        word = re.search(r"word '(\w+)'", ctx.user).group(1)
        if ctx.turn == 0:
            return tool_call("echo", text="x") if ctx.sample == 1 else tool_call("submit", text=word)
        return tool_call("submit", text=word if "index': 5" in ctx.user else "no") if ctx.turn == 1 else "ok"

    out = tmp_path_factory.mktemp("report") / "run"
    args = cpu_grpo_config(str(out), max_steps=3, max_completion_length=128, max_tool_calling_iterations=2)
    trainer = scripted_trainer(mix, tiny_model, args, script)
    trainer.train()
    return out, trainer.state.log_history


@pytest.mark.slow
def test_report_writes_table_summary_and_plots(finished_run):
    run_dir, history = finished_run
    console, buf = _console()
    assert report_command(run_dir, console) == 0
    text = buf.getvalue()
    assert "easy" in text and "hard" in text and "12 rollouts" in text
    report = run_dir / "report"
    for name in ("reward_coverage.png", "share.png", "errors.png", "latency.png"):
        path = report / name
        assert str(path) in text  # listed on the terminal
        data = path.read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 8_000, name
        from PIL import Image

        with Image.open(path) as img:
            extrema = img.convert("L").getextrema()
            colours = len(img.convert("RGB").getcolors(maxcolors=1 << 16) or range(1 << 16))
        assert extrema[0] < 100 and extrema[1] > 200 and colours > 20, f"{name} looks blank"
    summary = json.loads((report / "summary.json").read_text())
    assert set(summary["members"]) == {"easy", "hard"}
    assert sum(m["rollouts"] for m in summary["members"].values()) == 12
    assert all(m["coverage"] == 1.0 and m["error_rate"] == 0.0 for m in summary["members"].values())
    assert summary["members"]["easy"]["tool_ms_p50"] is not None
    assert summary["members"]["easy"]["tool_ms_p95"] >= summary["members"]["easy"]["tool_ms_p50"]
    md = (report / "report.md").read_text()
    assert "| easy |" in md and "![share](share.png)" in md
    # The per-step series recomputed from the records is what the trainer logged.
    logged = {h["step"]: h for h in history if "ormix/easy/share" in h}
    for step, values in summary["steps"].items():
        for key, value in values.items():
            if key in logged[int(step)]:
                assert logged[int(step)][key] == pytest.approx(value, rel=1e-5, abs=1e-6), key


@pytest.mark.slow
def test_the_report_read_by_columns_is_the_report_of_the_records_of_a_trained_run(finished_run):

    run_dir, _ = finished_run
    by_columns = {p.name: p.read_bytes() for p in write_report(run_dir).files}
    of_records = {p.name: p.read_bytes() for p in write_report(run_dir, reference_scan(run_dir)).files}
    assert by_columns == of_records and "summary.json" in by_columns


def test_report_without_records_fails_clearly(tmp_path):
    # Bad input, as `ormix show` and docs/cli.md have it: exit 2, the error on the error console.
    console, buf = _console()
    err, err_buf = _console()
    assert report_command(tmp_path, console, err) == 2
    assert "no rollout records" in err_buf.getvalue() and "callbacks" in err_buf.getvalue()
    assert not buf.getvalue() and not (tmp_path / "report").exists()
    err, err_buf = _console()
    assert report_command(tmp_path / "missing", console, err) == 2
    assert "not a directory" in err_buf.getvalue() and not buf.getvalue()


def test_report_of_an_eval_directory_points_to_its_summary_and_to_show(tmp_path):
    from typer.testing import CliRunner

    from ormix.app import app
    from ormix.app._eval_dir import EvalDirectory

    record = {"mode": "eval", "member": "echo", "task_index": 0, "outcome": "scored", "reward": 1.0}
    EvalDirectory(tmp_path).append([record], seq=0)
    (tmp_path / "summary.json").write_text("{}")
    result = CliRunner().invoke(app, ["report", str(tmp_path)], terminal_width=400)
    assert result.exit_code == 2 and not result.stdout, (result.stdout, result.stderr)
    said = result.stderr.replace("\n", "")  # one line, wrapped at the error console's width
    assert said.startswith("error: ") and said.count("error:") == 1, result.stderr
    assert "is an eval directory" in said and "summary.json" in said and f"ormix show {tmp_path}" in said
    assert "callbacks" not in said


def _record(member, outcome, reward, step, calls=(("submit", 4.0, None),), group=0, kind=None):
    """One rollout record as `telemetry.records` writes it; `calls` are (tool, latency ms, error)."""
    return {
        "member": member,
        "outcome": outcome,
        "reward": reward,
        "env_reward": reward,
        "step": step,
        "mode": "train",
        "group": group,
        "error_kind": kind,
        "open_ms": 5.0,
        "calls": [{"tool": t, "latency_ms": ms, "error": e} for t, ms, e in calls],
    }


def test_summary_and_series_from_records():
    records = [
        _record("a", "scored", 1.0, 1, [("submit", 10.0, None)]),
        _record("a", "scored", 0.0, 1, [("submit", 30.0, None)]),
        _record("a", "error", None, 2, [("submit", 0.0, "session_open")], group=2, kind="session_open"),
        _record("b", "unscored", None, 2, [("ls", 50.0, "tool_failed")], group=4),
    ]
    s = member_summary(records)
    assert s["a"]["errors"] == {"session_open": 1} and s["a"]["coverage"] == pytest.approx(2 / 3)
    assert s["a"]["tool_ms_p50"] == 20.0 and s["a"]["informative_groups"] == 0.5
    assert s["a"]["tools"]["submit"] == {"calls": 3, "errors": 1, "p50_ms": 20.0, "p95_ms": 29.0}
    assert s["b"]["call_errors"] == {"tool_failed": 1} and s["b"]["share"] == 0.25
    rows = {row[0]: dict(zip(TABLE_COLUMNS, row, strict=True)) for row in table_rows(s)}
    assert rows["a"]["error mix"] == "session_open 1"  # its failed call is that rollout's error
    assert rows["b"]["error mix"] == "calls: tool_failed 1 of 1"  # a raising tool: no "-"
    series = step_series(records)
    assert series[1]["ormix/a/share"] == 1.0 and series[1]["ormix/b/share"] == 0.0
    assert series[2]["ormix/a/error_rate"] == 1.0 and series[1]["ormix/a/tool_ms_p95"] == pytest.approx(29.0)


@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=30), st.floats(0, 100), st.floats(0, 100))
def test_percentile_is_monotone_and_bounded(values, q1, q2):
    lo, hi = sorted((q1, q2))
    assert min(values) <= percentile(values, lo) <= percentile(values, hi) <= max(values)
    assert percentile(values, 0) == min(values) and percentile(values, 100) == max(values)


def test_plots_use_whole_steps_distinct_markers_and_say_why_a_panel_is_empty():
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    from ormix.app._report import figures

    # 'a' is scored, 'b' never is: b has no reward line; a run where nobody scores leaves the panel empty.
    records = [_record("a", "scored", 1.0, s) for s in (1, 2, 3)] + [_record("b", "unscored", None, 2)]
    figs = figures(step_series(records), ["a", "b"])
    try:
        reward, coverage = figs["reward_coverage.png"].axes
        assert all(isinstance(ax.xaxis.get_major_locator(), MaxNLocator) for ax in (reward, coverage))
        assert all(float(t).is_integer() for t in coverage.get_xticks())
        lines = coverage.get_lines()
        assert len(lines) == 2 and lines[0].get_marker() != lines[1].get_marker()
        assert lines[0].get_linestyle() != lines[1].get_linestyle()
        assert not reward.texts  # something was drawn
        # b never scored: the legend says so, and the reward axis is [0, 1] rather than autoscaled.
        assert "b: never scored" in [t.get_text() for t in reward.get_legend().get_texts()]
        assert reward.get_ylim() == (-0.05, 1.05)
        # Equal error rates (a and b: 0 at step 2) stay visible: the lines are drawn apart.
        errors, _ = figs["errors.png"].axes
        a_err, b_err = (list(line.get_ydata()) for line in errors.get_lines())
        assert a_err[1] != b_err[0] and abs(a_err[1] - b_err[0]) < 0.05
        nobody = figures(step_series([_record("b", "unscored", None, 1)]), ["b"])
        (empty, _) = nobody["reward_coverage.png"].axes
        assert "no rollout was scored" in empty.texts[0].get_text()
    finally:
        plt.close("all")


def test_share_is_drawn_per_step_with_the_plan_over_it_and_the_legend_outside():
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection, PolyCollection
    from matplotlib.patches import Rectangle

    from ormix.app._report import figures, planned_shares

    records = [_record("a", "scored", 1.0, 1)] * 3 + [_record("b", "scored", 1.0, 1)]
    records += [_record("a", "scored", 1.0, 2)] * 2 + [_record("b", "scored", 1.0, 2)] * 2
    planned = planned_shares(
        {
            "plan": [["a", 0], ["a", 1], ["a", 2], ["b", 0], ["a", 3], ["b", 1]],
            "config": {"prompts_per_step": 3, "strategy": "weights"},
        }
    )
    assert planned == {1: {"a": 1.0}, 2: {"b": 2 / 3, "a": 1 / 3}}
    figs = figures(step_series(records), ["a", "b"], planned=planned)
    try:
        (ax,) = figs["share.png"].axes
        assert not [c for c in ax.collections if isinstance(c, PolyCollection)]  # no interpolated areas
        bars = [p for p in ax.patches if isinstance(p, Rectangle)]
        assert sorted((p.get_x() + p.get_width() / 2, round(p.get_height(), 2)) for p in bars) == [
            (1.0, 0.25),
            (1.0, 0.75),
            (2.0, 0.5),
            (2.0, 0.5),
        ]
        plan = [c for c in ax.collections if isinstance(c, LineCollection)]
        tops = sorted(round(float(seg[0][1]), 2) for c in plan for seg in c.get_segments())
        assert tops == [0.33, 1.0, 1.0, 1.0]  # a's top at steps 1, 2 (1.0, 1/3), then b's (1.0, 1.0)
        legend = ax.get_legend()
        assert "planned (each member's top)" in [t.get_text() for t in legend.get_texts()]
        anchor = legend.get_bbox_to_anchor().transformed(ax.transAxes.inverted())
        assert anchor.x0 > 1.0  # right of the data
    finally:
        plt.close("all")


def test_report_plots_adaptive_weights_and_where_rollout_time_went(tmp_path):
    from ormix.app._report import write_report

    (tmp_path / "rollouts").mkdir()
    records = [_record(m, "scored", 1.0, s) for s in (1, 2, 3) for m in ("a", "b")]
    (tmp_path / "rollouts" / "rank-0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    history = [
        {
            "step": s,
            "ormix/a/weight": w,
            "ormix/b/weight": 1 - w,
            "ormix/a/tasks_set_aside": s - 1,
            "ormix/env/open_s": 0.1 * s,
            "ormix/env/tools_s": 1.0,
            "ormix/env/generate_s": 2.0 + s,
        }
        for s, w in ((1, 0.5), (2, 0.6), (3, 0.7))
    ]
    (tmp_path / "log_history.jsonl").write_text(
        "".join(json.dumps(h) + "\n" for h in history) + '{"step": 4, "ormix/a/we'
    )
    result = write_report(tmp_path)
    names = {p.name for p in result.files}
    assert {"weights.png", "env_time.png"} <= names
    assert (tmp_path / "report" / "weights.png").read_bytes()[:8] == PNG_MAGIC
    assert result.summary["env_time_s"] == pytest.approx({"open_s": 0.2, "tools_s": 1.0, "generate_s": 4.0})
    console, buf = _console()
    assert report_command(tmp_path, console) == 0
    assert "rollout time per step (median): open 0.20 s, tools 1.00 s, generate 4.00 s" in buf.getvalue()


def test_trend_pools_the_first_and_last_third_of_the_steps_and_the_report_says_it(tmp_path):
    # Nine steps: "a" learns (1 of 4 scored rollouts solved early, 4 of 4 late), "b" loses coverage.
    records = []
    for step in range(1, 10):
        solved = 1 if step <= 3 else 2 if step <= 6 else 4
        records += [_record("a", "scored", float(i < solved), step, group=step) for i in range(4)]
        records += [_record("b", "scored" if step <= 3 else "unscored", 1.0 if step <= 3 else None, step)]
    t = trend(records)
    assert t["first_steps"] == [1, 3] and t["last_steps"] == [7, 9]
    assert t["members"]["a"]["reward"] == [0.25, 1.0]
    assert t["members"]["b"]["coverage"] == [1.0, 0.0] and t["members"]["b"]["reward"] == [1.0, None]
    assert trend(records[:8]) == {}  # two steps: no thirds to compare
    TelemetryRun(tmp_path).write(records)
    result = write_report(tmp_path)
    assert result.summary["trend"] == t
    md = (tmp_path / "report" / "report.md").read_text()
    assert "first third (steps 1-3) -> last third (steps 7-9)" in md
    # ... and the reward plot draws the pooled thirds over the per-step curve: a's bars at 0.25 and 1.0.
    import matplotlib.pyplot as plt

    from ormix.app._report import figures

    try:
        reward = figures(step_series(records), ["a", "b"], trend=t)["reward_coverage.png"].axes[0]
        bars = sorted(
            (round(float(seg[0][1]), 2), float(seg[0][0]), float(seg[1][0]))
            for c in reward.collections
            for seg in c.get_segments()
        )
        assert bars == [
            (0.25, 0.5, 3.5),
            (1.0, 0.5, 3.5),
            (1.0, 6.5, 9.5),
        ]  # b: first third only (unscored late)
        assert "first / last third, rollouts pooled" in reward.get_legend_handles_labels()[1]
        assert not figures(step_series(records), ["a", "b"])["reward_coverage.png"].axes[0].collections
    finally:
        plt.close("all")
    assert "- a: reward 0.25 -> 1.00 (scored rollouts)" in md and "coverage 1.00 -> 0.00" in md


def test_evaluations_are_reported_by_step_apart_from_the_training_tables(tmp_path):
    # Training: a and b, 2 steps. Evaluations at steps 1 and 2 of a only: 3 tasks × 2 samples, a improving.
    train = [_record(m, "scored", 1.0, s) for s in (1, 2) for m in ("a", "b")]
    evals = [
        {**_record("a", "scored", float(sample < wins), step), "mode": "eval", "task_index": task}
        for step, wins in ((1, 0), (2, 1))
        for task in range(3)
        for sample in range(2)
    ]
    TelemetryRun(tmp_path).write(train + evals)
    result = write_report(tmp_path)
    assert result.summary["members"]["a"]["rollouts"] == 2  # training rollouts only
    evaluation = result.summary["eval"]
    assert evaluation["rollouts"] == 12 and evaluation["last_step"] == 2
    by_step = {s: v["members"]["a"] for s, v in evaluation["steps"].items()}
    assert by_step["1"]["pass@1"]["value"] == 0.0 and by_step["2"]["pass@1"]["value"] == 0.5
    assert by_step["2"]["pass@2"]["value"] == 1.0 and by_step["2"]["tasks"] == 3
    assert set(evaluation["steps"]["2"]["members"]) == {"a"}
    assert (tmp_path / "report" / "eval.png").read_bytes()[:8] == PNG_MAGIC
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "## Evaluation at step 2" in markdown and "| a | 0.00 | 0.50 |" in markdown
    console, buf = _console()
    assert report_command(tmp_path, console) == 0
    text = buf.getvalue()
    assert "outcomes (4 training rollouts; 12 eval rollouts below)" in text
    assert "eval at step 2 (2 samples per task; 12 eval rollouts over 2 evaluation(s)" in text
    assert re.search(r"│ a\s+│ 0\.00\s+│ 0\.50\s+│", text.split("eval pass@1 by step")[1])


def _write_eval(path, wins, samples=2, k=(1, 2), success_threshold=1.0):
    """An eval directory as `ormix eval --overwrite` leaves it: 3 tasks of member a, ``wins`` of each task's
    ``samples`` rollouts solved."""
    from ormix.app._eval_dir import EvalDirectory

    manifest = {
        "samples": samples,
        "k": list(k),
        "members": {"a": {"target": "local:echo", "split": "test", "tasks": [0, 1, 2]}},
        "success_threshold": success_threshold,
    }
    records = [
        {"mode": "eval", "member": "a", "split": "test", "task_index": task, "outcome": "scored"}
        | {"env_reward": float(sample < wins), "reward": float(sample < wins)}
        for task in range(3)
        for sample in range(samples)
    ]
    out = EvalDirectory(path)
    out.prepare(manifest, overwrite=True)
    out.write_manifest(manifest)
    out.append(records, seq=0)
    out.write_outputs(out.summary_records(), manifest, lambda _: None)


def test_the_report_drops_what_training_changed_when_an_eval_was_run_again_since(tmp_path):
    from ormix.app._compare import compare, load_eval, write_comparison
    from ormix.app._workspace import Workspace

    run = Workspace(tmp_path)
    TelemetryRun(tmp_path).write([_record("a", "scored", 1.0, 1)])
    _write_eval(run.eval_before_path, wins=0)
    _write_eval(run.eval_path, wins=1)
    # What `ormix train` does after its evals (`_train/evals.compare_evals`).
    write_comparison(
        compare([load_eval(run.eval_before_path), load_eval(run.eval_path)]), run.comparison_path
    )
    console, buf = _console()
    assert report_command(tmp_path, console) == 0
    assert "what training changed (after" in buf.getvalue() and "note:" not in buf.getvalue()
    assert "What training changed" in (tmp_path / "report" / "report.md").read_text()
    for wins, samples, k, threshold, why in (
        (2, 2, (1, 2), 1.0, "give other verdicts"),
        (1, 4, (1, 4), 1.0, "eval/ now has k 1,4"),
        (1, 2, (1, 2), 0.5, "eval/ now counts a success at reward >= 0.5, the comparison at 1"),
    ):
        _write_eval(run.eval_path, wins=wins, samples=samples, k=k, success_threshold=threshold)
        console, buf = _console()
        assert report_command(tmp_path, console) == 0
        text = " ".join(buf.getvalue().split())
        assert "what training changed (after" not in text, text
        assert f"note: {run.comparison_path} no longer matches" in text and why in text
        assert f"ormix compare {run.eval_before_path} {run.eval_path}" in text
        md = (tmp_path / "report" / "report.md").read_text()
        assert "### What training changed" not in md and "no longer matches" in md
        assert "change" not in write_report(tmp_path).summary["run_evals"]


def test_a_member_only_evaluated_is_not_drawn_in_the_training_figures(tmp_path, monkeypatch):
    import ormix.app._report as report

    # a trains; held is eval-only (evaluated at step 1, never in a training batch).
    train = [_record("a", "scored", 1.0, s) for s in (1, 2)]
    evals = [{**_record(m, "scored", 1.0, 1), "mode": "eval", "task_index": 0} for m in ("a", "held")]
    TelemetryRun(tmp_path).write(train + evals)
    labels = {}
    save = report._save

    def legends(fig, path):  # what each saved figure's legends name, read before it is closed
        labels[path.name] = {
            t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().texts
        }
        return save(fig, path)

    monkeypatch.setattr(report, "_save", legends)
    write_report(tmp_path)
    assert "a" in labels["reward_coverage.png"] and not any(
        "held" in t for t in labels["reward_coverage.png"]
    )
    assert "a" in labels["share.png"] and "held" not in labels["share.png"]
    assert {"a", "held"} <= labels["eval.png"]


def test_a_run_that_completed_no_step_is_said_to_hold_records_of_unfinished_steps_only(tmp_path):
    # The run stopped in its first step: its records were written, no step completed.
    TelemetryRun(tmp_path).write([_record("a", "unscored", None, 1) for _ in range(6)])
    (tmp_path / "progress.json").write_text('{"completed_step": 0}\n')
    console, buf = _console()
    err, err_buf = _console()
    assert report_command(tmp_path, console, err) == 2
    said = " ".join(err_buf.getvalue().split())
    assert (
        said.startswith("error: ")
        and "6 rollout records, all from steps after the last completed step 0" in said
    )
    assert "(the run stopped before completing one)" in said and f"ormix show {tmp_path}" in said
    assert "no rollout records" not in said and "callbacks" not in said and not buf.getvalue()
