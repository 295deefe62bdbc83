"""`ormix.app._compare` and `ormix compare`: paired comparison of eval directories over common tasks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ormix._errors import UsageError
from ormix.app import app
from ormix.app._compare import (
    EvalData,
    compare,
    compare_groups,
    comparison_markdown,
    group_metrics,
    load_eval,
)
from ormix.evaluation._summary import summarize

runner = CliRunner()


def records(member: str, wins: dict[int, list[int]], split: str | None = "test") -> list[dict]:
    """Eval records of one member: task index -> the rewards of its samples (1 success, 0 failure)."""
    return [
        {
            "v": 1,
            "mode": "eval",
            "member": member,
            "split": split,
            "task_index": task,
            "outcome": "scored",
            "error_kind": None,
            "env_reward": float(w),
        }
        for task, samples in wins.items()
        for w in samples
    ]


def write_eval(path: Path, recs: list[dict], members: dict[str, dict] | None = None, k=(1, 2)) -> Path:
    """An eval directory as `ormix eval` writes it: manifest.json, rollouts.jsonl, summary.json."""
    path.mkdir(parents=True, exist_ok=True)
    if members is None:
        members = {}
        for r in recs:
            entry = members.setdefault(r["member"], {"target": f"local:{r['member']}", "split": r["split"]})
            entry.setdefault("tasks", [])
            if r["task_index"] not in entry["tasks"]:
                entry["tasks"].append(r["task_index"])
    (path / "manifest.json").write_text(json.dumps({"k": list(k), "members": members}))
    (path / "rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (path / "summary.json").write_text(json.dumps(summarize(recs, ks=k)))
    return path


# 16 tasks, 2 samples each. Baseline: seta solves tasks 0-3; "better" solves 0-13 too. terminals: the same
# tasks solved in both, one sample of a few tasks flipped (noise, no change).
SETA_BASE = {t: [1, 1] if t < 4 else [0, 0] for t in range(16)}
SETA_BETTER = {t: [1, 1] if t < 14 else [0, 0] for t in range(16)}
TERM_A = {t: [1, t % 3 == 0] if t < 8 else [0, t == 9] for t in range(16)}
TERM_B = {t: [1, t % 3 == 1] if t < 8 else [t == 10, 0] for t in range(16)}


@pytest.fixture
def evals(tmp_path):
    base = write_eval(tmp_path / "base", records("seta", SETA_BASE) + records("terminals", TERM_A))
    better = write_eval(
        tmp_path / "runs" / "trained" / "eval", records("seta", SETA_BETTER) + records("terminals", TERM_B)
    )
    return base, better


def test_compare_reports_the_change_it_measures_and_no_change_where_there_is_none(evals):
    base, better = evals
    result = compare([load_eval(base), load_eval(better)])
    assert (
        result["baseline"]["label"] == "base"
        and result["k"] == [1, 2]
        and result["metrics"] == ["pass@1", "pass@2"]
    )
    (comp,) = result["comparisons"]
    assert comp["label"] == "trained"  # a run directory's eval is named after the run
    seta = comp["members"]["seta"]["metrics"]["pass@1"]
    assert seta["difference"]["value"] == pytest.approx(10 / 16)
    assert seta["difference"]["low"] > 0.25 and seta["verdict"].startswith("seta: +0.62 [")
    term = comp["members"]["terminals"]["metrics"]["pass@1"]
    assert term["verdict"].startswith("terminals: no detectable change [\u2212")
    assert comp["verdicts"]["pass@1"] == f"{seta['verdict']}; {term['verdict']}"
    assert comp["members"]["seta"]["tasks"] == 16 and result["notes"] == []
    # Every metric is there, the baseline and other values are over the paired tasks.
    assert set(comp["members"]["seta"]["metrics"]) >= {"pass^2", "mean_reward", "coverage", "error_rate"}
    assert seta["baseline"]["value"] == 0.25 and seta["other"]["value"] == pytest.approx(14 / 16)
    json.dumps(result, allow_nan=False)
    md = comparison_markdown(result)
    assert (
        "## trained vs base" in md and "| seta | 16 | pass@1 | 0.25 [" in md and "- pass@1: seta: +0.62" in md
    )


def test_identical_evals_show_no_detectable_change_on_any_metric(evals):
    base, _ = evals
    data = load_eval(base)
    result = compare([data, data], metrics=["pass@1", "pass^2", "mean_reward", "coverage"])
    (comp,) = result["comparisons"]
    for member in ("seta", "terminals"):
        for name, m in comp["members"][member]["metrics"].items():
            assert m["difference"]["value"] == 0.0, name
            assert "no detectable change" in m["verdict"], (name, m["verdict"])


def test_different_task_sets_are_refused_unless_partial_is_allowed(tmp_path, evals):
    base, _ = evals
    fewer = {t: v for t, v in SETA_BETTER.items() if t < 12}
    other = write_eval(tmp_path / "fewer", records("seta", fewer) + records("terminals", TERM_B))
    with pytest.raises(
        UsageError, match=r"seta: the manifests choose different tasks \(16 in base, 12 in fewer, 12"
    ) as e:
        compare([load_eval(base), load_eval(other)])
    assert isinstance(e.value, UsageError) and "--allow-partial" in str(e.value)
    result = compare([load_eval(base), load_eval(other)], allow_partial=True)
    assert result["comparisons"][0]["members"]["seta"]["tasks"] == 12
    assert result["comparisons"][0]["members"]["terminals"]["tasks"] == 16
    assert result["notes"] == ["fewer vs base: seta: 12 common tasks (16 in base, 12 in fewer)"]


def test_an_interrupted_eval_and_another_target_or_split_are_refused(tmp_path, evals):
    base, _ = evals
    recs = records("seta", {t: v for t, v in SETA_BETTER.items() if t < 10}) + records("terminals", TERM_B)
    manifest = {
        "seta": {"target": "local:seta", "split": "test", "tasks": list(range(16))},
        "terminals": {"target": "local:terminals2", "split": "test", "tasks": list(range(16))},
    }
    cut = write_eval(tmp_path / "cut", recs, manifest)
    with pytest.raises(UsageError) as e:
        compare([load_eval(base), load_eval(cut)])
    message = str(e.value)
    assert "seta: cut has no records for 6 of its 16 tasks (an interrupted eval?" in message
    assert "terminals: target 'local:terminals' in base, 'local:terminals2' in cut" in message
    result = compare([load_eval(base), load_eval(cut)], allow_partial=True)
    assert list(result["comparisons"][0]["members"]) == ["seta"]  # another environment is not paired
    assert any("terminals: target" in n and "not compared" in n for n in result["notes"])
    train_split = write_eval(
        tmp_path / "train-split", records("seta", SETA_BASE, split="train") + records("terminals", TERM_A)
    )
    with pytest.raises(UsageError, match="seta: split 'test' in base, 'train' in train-split"):
        compare([load_eval(base), load_eval(train_split)])


def _seta_manifest(**entry) -> dict:
    return {
        "samples": 2,
        "members": {"seta": {"target": "local:seta", "split": "test", "tasks": list(range(16))} | entry},
    }


def test_an_oracle_evals_tasks_without_a_reference_are_not_taken_for_an_interrupted_eval():
    # The oracle does not run the 2 tasks without a reference solution: no records, and none missing.
    manifest = {"policy": "reference", **_seta_manifest(no_reference=[14, 15])}
    oracle = EvalData(Path("oracle"), manifest, records("seta", {t: [1, 1] for t in range(14)}))
    result = compare([oracle, oracle])
    assert result["comparisons"][0]["members"]["seta"]["tasks"] == 14 and result["notes"] == []
    model = EvalData(Path("model"), _seta_manifest(), records("seta", SETA_BASE))
    with pytest.raises(UsageError) as e:
        compare([model, oracle])
    assert "no records" not in str(e.value)
    assert (
        "seta: different tasks recorded (16 in model, 14 in oracle, 14 in common; oracle has no reference "
        "solution for 2)" in str(e.value)
    )
    assert compare([model, oracle], allow_partial=True)["comparisons"][0]["members"]["seta"]["tasks"] == 14


def test_an_incomplete_eval_is_refused_and_under_allow_partial_only_complete_tasks_pair():
    base = EvalData(Path("base"), _seta_manifest(), records("seta", SETA_BASE))
    # Every task has a record, but tasks 3 and 5 have 1 of their 2 samples (a stop inside a chunk).
    cut = {t: wins[:1] if t in (3, 5) else wins for t, wins in SETA_BETTER.items()}
    short = EvalData(Path("short"), _seta_manifest(), records("seta", cut), {"complete": False})
    with pytest.raises(UsageError) as e:
        compare([base, short])
    message = str(e.value)
    assert (
        "short is incomplete (its summary says complete: false): run the same `ormix eval` again" in message
    )
    assert (
        "seta: short has fewer than 2 records for 2 task(s) (3, 5): run the same `ormix eval` again to "
        "finish it" in message
    )
    result = compare([base, short], allow_partial=True)
    assert result["comparisons"][0]["members"]["seta"]["tasks"] == 14
    assert result["notes"] == [
        "short: seta: 2 task(s) with fewer than 2 records left out (an incomplete eval)",
        "short vs base: seta: 14 common tasks (16 in base, 14 in short)",
    ]
    # The summary's word alone is enough (tasks never started have no records to count).
    flagged = EvalData(Path("flagged"), _seta_manifest(), records("seta", SETA_BETTER), {"complete": False})
    with pytest.raises(UsageError, match="flagged is incomplete"):
        compare([base, flagged])
    # Groups of runs have no partial comparison: refused.
    with pytest.raises(UsageError, match=r"seta: short has fewer than 2 records for 2 task\(s\) \(3, 5\)"):
        compare_groups([[base], [short]])
    with pytest.raises(UsageError, match="flagged is incomplete"):
        group_metrics([flagged])


def test_a_member_missing_from_one_eval_is_refused(tmp_path, evals):
    base, _ = evals
    only_seta = write_eval(tmp_path / "only-seta", records("seta", SETA_BASE))
    with pytest.raises(UsageError, match="terminals is evaluated in base but not in only-seta"):
        compare([load_eval(base), load_eval(only_seta)])
    result = compare([load_eval(base), load_eval(only_seta)], allow_partial=True)
    assert list(result["comparisons"][0]["members"]) == ["seta"]


def test_three_evals_compare_each_with_the_first_and_bad_arguments_are_usage_errors(tmp_path, evals):
    base, better = evals
    data = [load_eval(base), load_eval(better), load_eval(base)]
    result = compare(data, ks=[1])
    assert [c["label"] for c in result["comparisons"]] == ["trained", str(base)]  # a repeated name: its path
    with pytest.raises(UsageError, match="unknown metric 'pass@8'") as e:
        compare(data, metrics=["pass@8"])
    # `ormix compare` has no --k: another K needs evals run with it.
    assert "needs evals run with that k: `ormix eval -k ...`" in str(e.value) and "--k" not in str(e.value)
    with pytest.raises(UsageError, match="two evals or more"):
        compare(data[:1])


def test_load_eval_reads_eval_and_run_directories_and_says_what_is_missing(tmp_path, evals):
    base, better = evals
    assert load_eval(better.parent).path == better  # the run directory
    data = load_eval(base)
    assert len(data.records) == 64 and data.setting("k") == [1, 2] and data.summary["k"] == [1, 2]
    with pytest.raises(UsageError, match="does not exist"):
        load_eval(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="holds no eval .* run `ormix eval`"):
        load_eval(tmp_path / "empty")
    (base / "manifest.json").write_text("{")
    with pytest.raises(UsageError, match="not valid JSON"):
        load_eval(base)


def test_the_compare_command_prints_verdicts_and_writes_json_markdown_and_a_plot(tmp_path, evals):
    base, better = evals
    out = tmp_path / "cmp"
    result = runner.invoke(
        app, ["compare", str(base), str(better.parent), "--out", str(out)], terminal_width=200
    )
    assert result.exit_code == 0, result.output
    assert "trained vs base, pass@1: seta: +0.62 [" in result.output
    assert "terminals: no detectable change" in result.output
    saved = json.loads((out / "comparison.json").read_text())
    assert saved["comparisons"][0]["members"]["seta"]["tasks"] == 16
    assert (out / "comparison.md").read_text().startswith("# Comparison with base")
    assert (out / "comparison.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    picked = runner.invoke(
        app,
        [
            "compare",
            str(base),
            str(better),
            "--out",
            str(out),
            "--metric",
            "mean_reward",
            "--confidence",
            "0.9",
        ],
    )
    assert picked.exit_code == 0, picked.output
    assert "pass@1:" not in picked.output and "mean_reward: seta: +0.62" in picked.output
    assert json.loads((out / "comparison.json").read_text())["confidence"] == 0.9


def test_the_compare_command_exits_2_on_bad_input(tmp_path, evals):
    base, _ = evals
    missing = runner.invoke(app, ["compare", str(base), str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "error:" in missing.output and "does not exist" in missing.output
    fewer = write_eval(
        tmp_path / "fewer", records("seta", {t: [1] for t in range(8)}) + records("terminals", TERM_A)
    )
    refused = runner.invoke(
        app, ["compare", str(base), str(fewer), "--out", str(tmp_path / "o")], terminal_width=200
    )
    assert refused.exit_code == 2 and "--allow-partial" in refused.output and not (tmp_path / "o").exists()
    partial = runner.invoke(
        app, ["compare", str(base), str(fewer), "--out", str(tmp_path / "o"), "--allow-partial"]
    )
    assert partial.exit_code == 0 and "seta: 8 common tasks" in partial.output
    one = runner.invoke(app, ["compare", str(base)])
    assert one.exit_code == 2 and "two evals or more" in one.output


# --- Groups of runs (several training seeds a side) -------------------------------------------------------


def seed_runs(tmp_path: Path, name: str, seta: list[dict[int, list[int]]], k=(1, 2)) -> list:
    """One eval directory per run (training seed) of a procedure, all on the same 16 tasks."""
    return [
        load_eval(
            write_eval(tmp_path / f"{name}-s{i}", records("seta", wins) + records("terminals", TERM_A), k=k)
        )
        for i, wins in enumerate(seta)
    ]


def shifted(solved: int) -> dict[int, list[int]]:
    """seta solves its first ``solved`` tasks (both samples)."""
    return {t: [1, 1] if t < solved else [0, 0] for t in range(16)}


def test_groups_of_one_run_each_give_exactly_the_two_eval_comparison(evals):
    base, better = (load_eval(p) for p in evals)
    groups = compare_groups([[base], [better]], labels=["base", "trained"])
    pair = compare([base, better])
    g, p = groups["comparisons"][0], pair["comparisons"][0]
    assert groups["seeds"] == [1, 1] and groups["covers"] == "tasks" and g["verdicts"] == p["verdicts"]
    for member in ("seta", "terminals"):
        for name in ("pass@1", "pass@2", "mean_reward"):
            a, b = g["members"][member]["metrics"][name], p["members"][member]["metrics"][name]
            for key in ("value", "low", "high", "n"):
                assert a["difference"][key] == b["difference"][key], (member, name, key)
                assert a["baseline"][key] == b["baseline"][key] and a["other"][key] == b["other"][key]
            assert a["difference"]["seeds"] == [1, 1] and a["difference"]["covers"] == "tasks"
    assert "over tasks only" in comparison_markdown(groups)


def test_seed_variance_widens_the_interval_and_a_seed_is_not_a_verdict(tmp_path):
    base = seed_runs(tmp_path, "base", [shifted(4)] * 3)
    steady = seed_runs(tmp_path, "steady", [shifted(10), shifted(9), shifted(10)])
    erratic = seed_runs(tmp_path, "erratic", [shifted(16), shifted(2), shifted(10)])
    clear = compare_groups([base, steady], labels=["base", "steady"])
    d = clear["comparisons"][0]["members"]["seta"]["metrics"]["pass@1"]["difference"]
    assert d["seeds"] == [3, 3] and d["covers"] == "seeds and tasks" and d["n"] == 16
    assert d["value"] == pytest.approx(29 / 48 - 4 / 16) and d["low"] > 0.0
    assert clear["comparisons"][0]["verdicts"]["pass@1"].startswith("seta: +0.35 [")
    # The same mean gain from runs that disagree: one good seed, one worse than the baseline.
    noisy = compare_groups([base, erratic], labels=["base", "erratic"])
    e = noisy["comparisons"][0]["members"]["seta"]["metrics"]["pass@1"]
    assert e["difference"]["value"] == pytest.approx(28 / 48 - 4 / 16) and e["difference"]["low"] < 0.0
    assert e["verdict"].startswith("seta: no detectable change")
    # One run of that group, compared alone, would have claimed a large change.
    alone = compare([base[0], erratic[0]])["comparisons"][0]["members"]["seta"]["metrics"]["pass@1"]
    assert alone["difference"]["low"] > 0.3
    md = comparison_markdown(noisy)
    assert "3 runs" in md and "seeds and tasks" in md and "erratic vs base" in md
    # Deterministic, and JSON-ready.
    assert compare_groups([base, erratic], labels=["base", "erratic"]) == noisy
    json.dumps(noisy, allow_nan=False)


def test_a_group_compared_with_itself_changes_nothing(tmp_path):
    runs = seed_runs(tmp_path, "a", [shifted(4), shifted(8), shifted(6)])
    result = compare_groups([runs, runs[::-1]])
    for member in ("seta", "terminals"):
        for name, m in result["comparisons"][0]["members"][member]["metrics"].items():
            d = m["difference"]
            assert (d["value"], d["low"], d["high"]) == (0.0, 0.0, 0.0), (member, name)
    assert "no detectable change [0.00, 0.00]" in result["comparisons"][0]["verdicts"]["pass@1"]


def test_group_metrics_pool_the_runs_and_say_what_the_interval_covers(tmp_path):
    runs = seed_runs(tmp_path, "a", [shifted(4), shifted(8), shifted(6)])
    metrics = group_metrics(runs)
    m = metrics["seta"]["pass@1"]
    assert m["value"] == pytest.approx(18 / 48) and m["n"] == 16 and m["seeds"] == 3
    assert m["covers"] == "seeds and tasks" and m["low"] < m["value"] < m["high"]
    assert m["iqm"] is None  # every task's pass@1 is 0 or 1: no interquartile mean
    one = group_metrics(runs[:1])["seta"]["pass@1"]
    own = summarize(runs[0].records, ks=(1, 2))["members"]["seta"]["pass@1"]
    assert one["covers"] == "tasks" and one["seeds"] == 1
    assert (one["value"], one["low"], one["high"]) == (own["value"], own["low"], own["high"])
    # Half-solved tasks (one of two samples): pass@1 takes values between 0 and 1, so the IQM applies.
    halves = [{t: [1, 0] if t < 6 + i else [0, 0] for t in range(16)} for i in range(3)]
    iqm = group_metrics(seed_runs(tmp_path, "h", halves), seed=3)["seta"]["pass@1"]["iqm"]
    assert (
        iqm is not None and iqm["covers"] == "seeds and tasks" and iqm["low"] <= iqm["value"] <= iqm["high"]
    )
    assert group_metrics(seed_runs(tmp_path, "h", halves), seed=3)["seta"]["pass@1"]["iqm"] == iqm


def test_groups_of_different_tasks_k_or_samples_are_refused_saying_what_differs(tmp_path):
    runs = seed_runs(tmp_path, "a", [shifted(4), shifted(8)])
    fewer = load_eval(
        write_eval(
            tmp_path / "fewer", records("seta", {t: [1, 1] for t in range(12)}) + records("terminals", TERM_A)
        )
    )
    with pytest.raises(
        UsageError, match=r"seta: the manifests choose different tasks \(16 in a-s0, 12 in fewer"
    ):
        compare_groups([runs, [fewer]])
    with pytest.raises(UsageError, match=r"seta: the manifests choose different tasks"):
        group_metrics([*runs, fewer])
    other_k = seed_runs(tmp_path, "k", [shifted(4)], k=(1,))
    with pytest.raises(UsageError, match=r"k \[1, 2\] in a-s0, \[1\] in k-s0"):
        compare_groups([runs, other_k])
    sampled = load_eval(runs[1].path)
    sampled.manifest["samples"], runs[0].manifest["samples"] = 4, 2
    with pytest.raises(UsageError, match="samples 2 in a-s0, 4 in a-s1"):
        group_metrics([runs[0], sampled])
    with pytest.raises(UsageError, match="two groups"):
        compare_groups([runs])
    with pytest.raises(UsageError, match="group 2 holds no eval"):
        compare_groups([runs, []])


def test_the_compare_command_compares_groups_of_runs(tmp_path):
    base = seed_runs(tmp_path, "base", [shifted(4)] * 3)
    steady = seed_runs(tmp_path, "steady", [shifted(10), shifted(9), shifted(10)])
    out = tmp_path / "cmp"
    args = [
        "compare",
        *(str(e.path) for e in base),
        "--vs",
        *(str(e.path) for e in steady),
        "--out",
        str(out),
    ]
    result = runner.invoke(app, args, terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "3 runs vs 3 runs" in result.output and "seeds and tasks" in result.output
    assert "pass@1: seta: +0.35 [" in result.output
    saved = json.loads((out / "comparison.json").read_text())
    assert saved["seeds"] == [3, 3] and saved["covers"] == "seeds and tasks"
    assert "seeds and tasks" in (out / "comparison.md").read_text()
    bad = runner.invoke(app, ["compare", str(base[0].path), "--vs"])
    assert bad.exit_code == 2 and "--vs" in bad.output
    refused = runner.invoke(
        app, ["compare", str(base[0].path), str(base[1].path), "--vs", str(tmp_path / "nope")]
    )
    assert refused.exit_code == 2 and "does not exist" in refused.output


def test_rewards_off_the_unit_range_with_no_spread_give_no_interval_and_the_verdict_says_so(tmp_path):
    # Rewards on another scale: every task +0.5 once read "+0.50 [0.50, 0.50]": certainty from 4 tasks.
    a = {t: [-1.5 if t % 2 else -1.0] for t in range(4)}
    b = {t: [r + 0.5 for r in rewards] for t, rewards in a.items()}
    base = write_eval(tmp_path / "a", records("seta", a), k=(1,))
    other = write_eval(tmp_path / "b", records("seta", b), k=(1,))
    result = compare([load_eval(base), load_eval(other)], metrics=["mean_reward"])
    metric = result["comparisons"][0]["members"]["seta"]["metrics"]["mean_reward"]
    assert (metric["difference"]["low"], metric["difference"]["high"]) == (None, None)
    assert metric["verdict"] == "seta: +0.50 (no interval from 4 tasks)"
    # Every task at -1: the summary's mean reward has no interval either.
    alike = summarize(records("seta", {t: [-1.0] for t in range(16)}))["members"]["seta"]["mean_reward"]
    assert alike == {"value": -1.0, "low": None, "high": None, "n": 16}
