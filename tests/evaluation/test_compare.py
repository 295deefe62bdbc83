"""`ormix.evaluation.compare` and `ormix compare`: paired comparison of eval directories over common tasks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ormix.cli import app
from ormix.errors import UsageError
from ormix.evaluation.compare import CompareError, compare, comparison_markdown, load_eval
from ormix.evaluation.summary import summarize

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
        CompareError, match=r"seta: the manifests choose different tasks \(16 in base, 12 in fewer, 12"
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
    with pytest.raises(CompareError) as e:
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
    with pytest.raises(CompareError, match="seta: split 'test' in base, 'train' in train-split"):
        compare([load_eval(base), load_eval(train_split)])


def test_a_member_missing_from_one_eval_is_refused(tmp_path, evals):
    base, _ = evals
    only_seta = write_eval(tmp_path / "only-seta", records("seta", SETA_BASE))
    with pytest.raises(CompareError, match="terminals is evaluated in base but not in only-seta"):
        compare([load_eval(base), load_eval(only_seta)])
    result = compare([load_eval(base), load_eval(only_seta)], allow_partial=True)
    assert list(result["comparisons"][0]["members"]) == ["seta"]


def test_three_evals_compare_each_with_the_first_and_bad_arguments_are_usage_errors(tmp_path, evals):
    base, better = evals
    data = [load_eval(base), load_eval(better), load_eval(base)]
    result = compare(data, ks=[1])
    assert [c["label"] for c in result["comparisons"]] == ["trained", str(base)]  # a repeated name: its path
    with pytest.raises(CompareError, match="unknown metric 'pass@8'"):
        compare(data, metrics=["pass@8"])
    with pytest.raises(CompareError, match="two evals or more"):
        compare(data[:1])


def test_load_eval_reads_eval_and_run_directories_and_says_what_is_missing(tmp_path, evals):
    base, better = evals
    assert load_eval(better.parent).path == better  # the run directory
    data = load_eval(base)
    assert len(data.records) == 64 and data.setting("k") == [1, 2] and data.summary["k"] == [1, 2]
    with pytest.raises(CompareError, match="does not exist"):
        load_eval(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CompareError, match="holds no eval .* run `ormix eval`"):
        load_eval(tmp_path / "empty")
    (base / "manifest.json").write_text("{")
    with pytest.raises(CompareError, match="not valid JSON"):
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
