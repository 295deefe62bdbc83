"""`ormix eval` end to end: the tiny model on the demo mixture, the oracle run, resuming, refusals, hooks.

Real parts only: the local environments served from threads of this process, the offline tiny model, TRL's
evaluation loop through ormix's `ConcurrentGRPOTrainer`. Each module fixture is one real eval that several
tests read.
"""

from __future__ import annotations

import json
import textwrap
import uuid
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ormix._runs import read_jsonl
from ormix.app import app
from ormix.app._eval import run_eval
from ormix.app._eval_model import resolve_eval_model
from ormix.config import load_mixture_config
from ormix.evaluation._errors import EvalError
from ormix.evaluation._tasks import eval_tasks

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SHIPPED_DEMO = ROOT / "mixtures" / "local-demo.yaml"
# The demo without its eval sets (they are its 2 training tasks a member): its members are then evaluated on
# their environments' whole test splits, which is what these tests read.
DEMO = Path()
TEST_TASKS = {"echo": 4, "terminals": 6, "seta": 5}
runner = CliRunner()


@pytest.fixture(scope="module", autouse=True)
def _thread_serving(tmp_path_factory):
    global DEMO
    config = load_mixture_config(SHIPPED_DEMO)
    members = {n: m.model_copy(update={"eval": None}) for n, m in config.members.items()}
    DEMO = tmp_path_factory.mktemp("demo") / "local-demo.yaml"
    DEMO.write_text(config.model_copy(update={"members": members}).to_yaml())
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ORMIX_LOCAL_SERVE", "thread")
        patch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
        yield


def test_the_shipped_demo_is_evaluated_on_its_eval_sets():
    tasks = eval_tasks(load_mixture_config(SHIPPED_DEMO))
    assert {m: (t.split, t.indices) for m, t in tasks.items()} == {
        m: ("train", (0, 1)) for m in ("echo", "terminals", "seta")
    }


def _eval(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["eval", str(DEMO), *args], terminal_width=200)
    return result.exit_code, result.output


# ── the tiny model on the demo mixture, through the command line ─────────


@pytest.fixture(scope="module")
def model_eval(tiny_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("eval") / "tiny"
    code, output = _eval("-k", "1,4", "--set", "max_completion_length=24", "--out", str(out))
    return code, output, out


def test_two_evals_of_one_model_with_different_seeds_show_no_detectable_change(model_eval, tmp_path):
    _, _, first = model_eval
    second = tmp_path / "seed-1"
    code, output = _eval(
        "-k", "1,4", "--set", "max_completion_length=24", "--seed", "1", "--out", str(second)
    )
    assert code == 0, output
    assert json.loads((second / "manifest.json").read_text())["seed"] == 1
    result = runner.invoke(app, ["compare", str(first), str(second), "--out", str(tmp_path / "cmp")])
    assert result.exit_code == 0, result.output
    comparison = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    (verdicts,) = [c["verdicts"] for c in comparison["comparisons"]]
    for metric in ("pass@1", "pass@4"):
        for member in TEST_TASKS:
            assert f"{member}: no detectable change [" in verdicts[metric], verdicts


def test_eval_prints_pass_at_1_and_4_per_member_with_intervals(model_eval):
    code, output, out = model_eval
    assert code == 0, output
    assert "pass@1" in output and "pass@4" in output and "pass^4" in output
    for member in TEST_TASKS:
        row = next(line for line in output.splitlines() if f" {member} " in line and "[" in line)
        assert row.count("[") >= 5, row  # every metric cell carries its interval
    assert f"wrote {out}/" in output and "summary.json" in output


def test_eval_writes_one_eval_record_per_rollout_and_the_manifest(model_eval):
    _, _, out = model_eval
    records = read_jsonl(out / "rollouts.jsonl")
    per_task = Counter((r["member"], r["split"], r["task_index"]) for r in records)
    assert {m: sum(1 for k in per_task if k[0] == m) for m in TEST_TASKS} == TEST_TASKS
    assert set(per_task.values()) == {4}  # 4 samples per task (-k 1,4)
    assert {r["mode"] for r in records} == {"eval"} and {r["split"] for r in records} == {"test"}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["model"] == "ormix:tiny" and manifest["policy"] == "model" and manifest["samples"] == 4
    assert manifest["generation"]["max_completion_length"] == 24
    assert manifest["members"]["seta"] == {
        "target": "local:seta",
        "split": "test",
        "tasks": [0, 1, 2, 3, 4],
        "source": "test split",
    }
    summary = json.loads((out / "summary.json").read_text())
    assert summary["k"] == [1, 4]
    metric = summary["members"]["terminals"]["pass@4"]
    assert set(metric) == {"value", "low", "high", "n"} and metric["n"] == 6
    assert metric["low"] <= metric["value"] <= metric["high"]
    assert "| terminals |" in (out / "report.md").read_text()
    assert (out / "plots" / "summary.png").stat().st_size > 0


def test_a_finished_eval_is_not_run_again_and_another_eval_is_refused(model_eval):
    _, _, out = model_eval
    before = (out / "rollouts.jsonl").read_text()
    code, output = _eval("-k", "1,4", "--set", "max_completion_length=24", "--out", str(out))
    assert code == 0, output
    assert "every task is done already (15)" in output and "15 task(s) were done already" in output
    assert (out / "rollouts.jsonl").read_text() == before
    code, output = _eval("-k", "1,8", "--set", "max_completion_length=24", "--out", str(out))
    assert code == 2
    assert "holds another eval (samples: 4 → 8)" in output and "--overwrite" in output
    assert (out / "rollouts.jsonl").read_text() == before


def test_bad_input_is_named_and_exits_2(tmp_path):
    code, output = _eval("--members", "echo,sota", "--out", str(tmp_path / "a"))
    assert code == 2 and "unknown member(s) 'sota'" in output and "echo, terminals, seta" in output
    code, output = _eval("--split", "validation", "--members", "echo", "--out", str(tmp_path / "b"))
    assert code == 2 and "member 'echo' (local:echo)" in output and "splits: train, test" in output
    code, output = _eval("--model", str(tmp_path / "no-model"), "--out", str(tmp_path / "c"))
    assert code == 2 and "no such directory" in output
    code, output = _eval("-k", "0", "--out", str(tmp_path / "d"))
    assert code == 2 and "k takes whole numbers >= 1" in output
    assert not any(tmp_path.iterdir())  # nothing written for a refused eval


def test_a_model_is_found_in_a_run_directory_and_its_checkpoints(tmp_path):
    run = tmp_path / "run"
    for part in ("checkpoint-2", "checkpoint-10"):
        (run / part).mkdir(parents=True)
        (run / part / "config.json").write_text("{}")
    (run / "manifest.json").write_text("{}")
    (run / "train_args.json").write_text("{}")
    with pytest.raises(EvalError, match=r"no final model .*checkpoint-2, checkpoint-10"):
        resolve_eval_model(str(run))
    assert resolve_eval_model(str(run / "checkpoint-10")) == (
        str(run / "checkpoint-10"),
        str(run / "checkpoint-10"),
        run / "eval" / "checkpoint-10",
    )
    (run / "model").mkdir()
    (run / "model" / "config.json").write_text("{}")
    assert resolve_eval_model(str(run)) == (str(run / "model"), str(run), run / "eval")
    with pytest.raises(EvalError, match="holds no model"):
        resolve_eval_model(str(tmp_path))


# ── the oracle run: reference solutions through the same path ────────────


@pytest.fixture(scope="module")
def reference_eval(tiny_model, tmp_path_factory):
    """The oracle run, interrupted after 2 chunks of 4 tasks, resumed, then crashed mid-write and resumed."""
    out = tmp_path_factory.mktemp("eval") / "reference"
    options = dict(policy="reference", samples=2, out_dir=out, tasks_per_chunk=4)
    first = run_eval(DEMO, max_chunks=2, **options)
    after_first = read_jsonl(out / "rollouts.jsonl")
    second = run_eval(DEMO, **options)
    # A crash while the last chunk's records were written: one task keeps 1 of its 2 records, a torn line.
    lines = (out / "rollouts.jsonl").read_text().splitlines()
    (out / "rollouts.jsonl").write_text("\n".join(lines[:-1]) + '\n{"v": 1, "mem')
    crashed = json.loads(lines[-1])
    third = run_eval(DEMO, **options)
    return first, after_first, second, crashed, third


def test_reference_solutions_score_1_on_every_terminals_and_seta_task(reference_eval):
    *_, third = reference_eval
    records = read_jsonl(third.out_dir / "rollouts.jsonl")
    for member in ("terminals", "seta", "echo"):
        entry = third.summary["members"][member]
        assert entry["tasks"] == TEST_TASKS[member] and entry["pass@1"]["value"] == 1.0
        mine = [r for r in records if r["member"] == member]
        assert len(mine) == 2 * TEST_TASKS[member]
        assert all(r["outcome"] == "scored" and r["env_reward"] == 1.0 for r in mine)
    assert third.summary["no_reference"] == {}
    assert json.loads((third.out_dir / "manifest.json").read_text())["model"] == "reference"


def test_an_interrupted_eval_resumes_where_it_stopped(reference_eval):
    first, after_first, second, crashed, third = reference_eval
    assert (first.ran_tasks, first.complete) == (8, False)
    assert len(after_first) == 16 and len({(r["member"], r["task_index"]) for r in after_first}) == 8
    assert (second.resumed_tasks, second.ran_tasks, second.complete) == (8, 7, True)
    # After the crash only the task that lost a record ran again; its partial record was dropped.
    assert (third.resumed_tasks, third.ran_tasks) == (14, 1)
    records = read_jsonl(third.out_dir / "rollouts.jsonl")
    assert (
        Counter((r["member"], r["task_index"]) for r in records)[(crashed["member"], crashed["task_index"])]
        == 2
    )
    assert len(records) == 30


# ── a user's environment with its own reference hook ───────────────────


USER_ENV = '''
from openreward.environments import Environment, TextBlock, ToolOutput, tool
from pydantic import BaseModel


class Numbers(BaseModel, extra="forbid"):
    a: int
    b: int


class Adder(Environment):
    """Add two numbers; task 3 has no reference solution."""

    def __init__(self, task_spec, secrets=None):
        super().__init__(task_spec, secrets or {})

    @classmethod
    def list_splits(cls):
        return ["train"]

    @classmethod
    def list_tasks(cls, split):
        return [{"a": i, "b": 10 * i} for i in range(4)]

    def get_prompt(self):
        return [TextBlock(text=f"Add {self.task_spec['a']} and {self.task_spec['b']}.")]

    @tool
    def add(self, params: Numbers) -> ToolOutput:
        """Submit the sum of a and b."""
        right = (params.a, params.b) == (self.task_spec["a"], self.task_spec["b"])
        return ToolOutput(blocks=[TextBlock(text="ok")], reward=float(right), finished=True)


def solve(row):
    spec = row["task_spec"]
    return None if spec["a"] == 3 else [("add", {"a": spec["a"], "b": spec["b"]})]
'''


def test_a_user_environments_reference_hook_is_played_by_the_oracle_and_the_warm_start(tiny_model, tmp_path):
    from transformers import AutoTokenizer

    from ormix.mixture import load_mixture
    from ormix.workbench._warmup import build_transcripts

    module = f"adder_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(USER_ENV)
    mixture = tmp_path / "mine.yaml"
    mixture.write_text(
        textwrap.dedent(f"""
        members:
          adder: {{target: "{module}:Adder", reference: "{module}:solve"}}
        train: {{max_completion_length: 64}}
        """)
    )
    result = run_eval(mixture, policy="reference", out_dir=tmp_path / "oracle")
    entry = result.summary["members"]["adder"]
    assert (entry["tasks"], entry["pass@1"]["value"]) == (3, 1.0)  # no test split: its training tasks
    assert result.summary["no_reference"] == {"adder": [3]}
    assert result.manifest["members"]["adder"]["source"] == "train tasks"

    mix = load_mixture(str(mixture))
    try:
        transcripts = build_transcripts(mix, AutoTokenizer.from_pretrained(tiny_model))
    finally:
        mix.close()
    assert [(t.member, t.reward) for t in transcripts] == [("adder", 1.0)] * 3


def test_eval_tasks_say_where_each_members_tasks_come_from(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text(
        "members:\n"
        "  held: {target: 'local:echo', num_tasks: 4, eval: {indices: [10, 11]}}\n"
        "  quiz: {target: 'local:echo', role: eval, indices: [12]}\n"
        "  plain: {target: 'local:echo', num_tasks: 2}\n"
    )
    from ormix.config import load_mixture_config

    tasks = eval_tasks(load_mixture_config(path))
    assert {m: (t.source, t.split, t.indices) for m, t in tasks.items()} == {
        "held": ("eval set", "train", (10, 11)),
        "quiz": ("eval member", "train", (12,)),
        "plain": ("test split", "test", (0, 1, 2, 3)),
    }
    overridden = eval_tasks(load_mixture_config(path), members=("quiz",), split="test")["quiz"]
    assert (overridden.split, overridden.source, overridden.indices) == (
        "test",
        "split test (--split)",
        (0, 1, 2, 3),
    )
    assert overridden.rows[0]["ors_split"] == "test"  # the row opens its session on that split


def test_a_directory_with_records_but_no_manifest_is_refused(tmp_path):
    (tmp_path / "rollouts.jsonl").write_text("{}\n")
    with pytest.raises(EvalError, match="no manifest.json"):
        run_eval(DEMO, members=("echo",), out_dir=tmp_path)


def _half_adder(tmp_path: Path, solve: str) -> Path:
    """A mixture of one user environment whose right answer scores 0.5 (not 1.0), with ``solve`` as the
    body of its reference hook."""
    module = f"half_adder_{uuid.uuid4().hex[:8]}"
    source = USER_ENV.replace("reward=float(right)", "reward=0.5 * right")
    head, _ = source.split("def solve(row):")
    (tmp_path / f"{module}.py").write_text(f"{head}def solve(row):\n    {solve}\n")
    mixture = tmp_path / "half.yaml"
    mixture.write_text(
        textwrap.dedent(f"""
        members:
          adder: {{target: "{module}:Adder", reference: "{module}:solve"}}
          echo: {{target: "local:echo", num_tasks: 2}}
        train: {{max_completion_length: 64}}
        """)
    )
    return mixture


def test_an_oracle_eval_of_a_member_without_any_reference_solution_is_refused_before_it_runs(tmp_path):
    # It once ran the other members, printed an empty row and "wrote ...: rollouts.jsonl" (no such file).
    mixture = _half_adder(tmp_path, "return None")
    out = tmp_path / "oracle"
    result = runner.invoke(app, ["eval", str(mixture), "--policy", "reference", "--out", str(out)])
    assert result.exit_code == 2, result.output[-3000:]
    assert "member 'adder' has no reference solution for any task" in result.output
    assert "--members" in result.output and not out.exists()  # refused before anything ran


def test_print_summary_names_only_the_files_the_eval_left(tmp_path):
    from rich.console import Console

    from ormix.app._eval import EvalResult, print_summary
    from ormix.evaluation._summary import summarize

    (tmp_path / "summary.json").write_text("{}")
    (tmp_path / "manifest.json").write_text("{}")
    console = Console(record=True, width=300, color_system=None)
    print_summary(EvalResult(tmp_path, summarize([]), {}), console)
    wrote = next(line for line in console.export_text().splitlines() if line.startswith("wrote "))
    assert wrote == f"wrote {tmp_path}/: summary.json, manifest.json"


def test_the_success_threshold_flag_decides_pass_at_k_and_is_recorded(tiny_model, tmp_path):
    # Every reference answer scores 0.5: no success at the default threshold 1.0, all at 0.5.
    mixture = _half_adder(
        tmp_path, 'return [("add", {"a": row["task_spec"]["a"], "b": row["task_spec"]["b"]})]'
    )
    out = tmp_path / "oracle"
    base = ["eval", str(mixture), "--policy", "reference", "--members", "adder", "--out", str(out)]
    strict = runner.invoke(app, base)
    assert strict.exit_code == 0, strict.output[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["members"]["adder"]["pass@1"]["value"] == 0.0 and summary["success_threshold"] == 1.0
    # The same eval, finished: summarised again at the new threshold, nothing run again.
    lenient = runner.invoke(app, [*base, "--success-threshold", "0.5"])
    assert lenient.exit_code == 0, lenient.output[-3000:]
    assert "every task is done already (4)" in lenient.output and "env_reward >= 0.5" in lenient.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["members"]["adder"]["pass@1"]["value"] == 1.0 and summary["success_threshold"] == 0.5
    assert json.loads((out / "manifest.json").read_text())["success_threshold"] == 0.5
    refused = runner.invoke(app, [*base, "--success-threshold", "0"])
    assert refused.exit_code == 2 and "--success-threshold" in refused.output and "above 0" in refused.output
