"""Long runs: resumed after SIGTERM, Ctrl-C or SIGKILL, a run continues exactly; nothing is lost or counted
twice.

Each run is a real `ormix train` (`train_command`, tiny model) in its own process
(tests/support/resume_train.py) on a mixture of `local:terminals` (served by the trainer in a child process,
sandboxes under ORMIX_SANDBOX_DIR) and a `latency` environment served by this test process over HTTP (a
"remote" server whose open sessions the test can see). The uninterrupted 4-step run is the reference.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from ormix.server import serve_in_thread
from ormix.telemetry._records import read_records

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
DRIVER = Path(__file__).resolve().parent / "support" / "resume_train.py"


def mixture(url: str, weight: float = 0.5) -> str:
    return f"""\
name: resume-test
members:
  terminals: {{target: "local:terminals", num_tasks: 4}}
  remote: {{target: "{url}", env_name: latency, num_tasks: 6}}
weights: {{terminals: {1 - weight}, remote: {weight}}}
prompts_per_step: 2
num_samples: 12
seed: 3
train:
  max_steps: 4
  num_generations: 2
  max_completion_length: 16
  learning_rate: 1.0e-3
  save_steps: 2
"""


@pytest.fixture(scope="module")
def remote():
    os.environ["ORMIX_LATENCY_OPEN_S"] = "0.01"
    os.environ["ORMIX_LATENCY_TOOL_S"] = "0.01"
    with serve_in_thread(["local:latency"]) as server:
        yield server


@pytest.fixture(scope="module")
def setup(tmp_path_factory, tiny_model, remote):
    base = tmp_path_factory.mktemp("long")
    sandboxes = base / "sandboxes"
    sandboxes.mkdir()
    (base / "mix.yaml").write_text(mixture(remote.url))
    reference = drive(base, "reference", tiny_model, sandboxes)
    assert reference.returncode == 0, reference.stderr[-3000:]
    return base, sandboxes, tiny_model


def drive(
    base: Path, run: str, model: str, sandboxes: Path, kill: str = "none", mix: str = "mix.yaml", **options
) -> subprocess.CompletedProcess:
    env = {**os.environ, "ORMIX_SANDBOX_DIR": str(sandboxes), "TRL_EXPERIMENTAL_SILENCE": "1"}
    env.pop("ORMIX_LOCAL_SERVE", None)  # the trainer serves local:terminals in a child process, as users get
    return subprocess.run(
        [sys.executable, str(DRIVER), str(base / mix), str(base / run), model, kill, json.dumps(options)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def refuse(mix: Path, run_dir: Path, model: str, **options) -> tuple[int, str]:
    """`train_command` in this process, for a run refused before anything starts (no server, no trainer): its
    exit status and what it printed. In-process because a refusal is cheap and a driver process is not."""
    from rich.console import Console

    from ormix.app._train import train_command

    buffer = io.StringIO()
    console = Console(file=buffer, width=200, color_system=None)
    status = train_command(
        str(mix), model=model, output_dir=run_dir, warmup_sft=0, console=console, **options
    )
    return status, buffer.getvalue()


def steps_of(run_dir: Path) -> dict[int, list[tuple[str, int]]]:
    """The rows each training step trained on (member, task), from the rollout records."""
    out: dict[int, list[tuple[str, int]]] = defaultdict(list)
    for r in read_records(run_dir):
        if r["mode"] == "train":
            out[r["step"]].append((r["member"], r["task_index"]))
    return {s: sorted(rows) for s, rows in sorted(out.items())}


def metric_keys(run_dir: Path) -> dict[int, set[str]]:
    """The ormix and reward metrics of each training step's log entry (not the end-of-run summary)."""
    keys = {}
    for line in (run_dir / "log_history.jsonl").read_text().splitlines():
        entry = json.loads(line)
        if "train_runtime" not in entry:
            keys[entry["step"]] = {k for k in entry if k.startswith(("ormix/", "rewards/"))}
    return keys


def leftovers(sandboxes: Path) -> tuple[list[int], list[str]]:
    """Local-server processes of these runs still alive, and sandbox directories still on disk."""
    deadline = time.monotonic() + 15
    while True:
        pids = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                cmd = (proc / "cmdline").read_bytes().split(b"\0")
                environ = (proc / "environ").read_bytes()
            except OSError:
                continue
            if b"ormix.server" in cmd and str(sandboxes).encode() in environ:
                pids.append(int(proc.name))
        dirs = sorted(p.name for p in sandboxes.iterdir())
        if (not pids and not dirs) or time.monotonic() > deadline:
            return pids, dirs
        time.sleep(0.2)  # a server child notices its parent is gone and tears its sessions down


def test_sigterm_then_ctrl_c_checkpoint_and_each_resume_continues_exactly(setup, remote):
    """SIGTERM in a fresh run, then Ctrl-C in the resumed one, then a second resume: every step once."""
    base, sandboxes, model = setup
    first = drive(base, "term", model, sandboxes, kill="sigterm@1")
    assert first.returncode == 143, first.stderr[-3000:]
    out = first.stdout
    assert "terminated (SIGTERM)" in out and "checkpoint-2" in out  # step 2 finished, then saved
    assert "resume with: ormix train" in out and "--resume" in out
    # Between the processes: no session open on the remote server, no server process, no sandbox.
    assert remote.active_sessions() == []
    assert leftovers(sandboxes) == ([], [])

    second = drive(base, "term", model, sandboxes, kill="sigint@3", resume="latest")
    assert second.returncode == 130, second.stderr[-3000:]
    assert "resuming from" in second.stdout and "(step 2)" in second.stdout
    assert "interrupted" in second.stdout and "checkpoint-3" in second.stdout  # not a periodic one (every 2)
    saved = base / "term" / "checkpoint-3"
    # ormix_telemetry.json: the callbacks' on_save ran, as at a periodic save (the alarm's counters resume).
    wanted = {"trainer_state.json", "optimizer.pt", "scheduler.pt", "ormix_telemetry.json"}
    assert wanted <= {p.name for p in saved.iterdir()}
    assert remote.active_sessions() == [] and leftovers(sandboxes) == ([], [])

    third = drive(base, "term", model, sandboxes, resume="latest")
    assert third.returncode == 0, third.stderr[-3000:]
    assert "(step 3)" in third.stdout
    reference, resumed = steps_of(base / "reference"), steps_of(base / "term")
    assert resumed == reference and sorted(resumed) == [1, 2, 3, 4]  # every step once, the same rows
    assert Counter(len(v) for v in resumed.values()) == {4: 4}
    assert metric_keys(base / "term") == metric_keys(base / "reference")
    manifest = json.loads((base / "term" / "manifest.json").read_text())
    assert [r["step"] for r in manifest["resumes"]] == [2, 3]
    assert all(r["changed"] == [] for r in manifest["resumes"])
    assert remote.active_sessions() == [] and leftovers(sandboxes) == ([], [])


def test_sigkill_resumes_from_the_last_periodic_checkpoint_without_duplicates(setup, remote):
    base, sandboxes, model = setup
    first = drive(base, "kill", model, sandboxes, kill="sigkill@3")
    assert first.returncode == -9
    killed = steps_of(base / "kill")
    assert 4 in killed and len(killed[4]) < 4  # a partial step 4 was on disk when the process died
    assert leftovers(sandboxes) == ([], [])  # the server children saw their parent die and cleaned up

    second = drive(base, "kill", model, sandboxes, resume="latest")
    assert second.returncode == 0, second.stderr[-3000:]
    assert "(step 2)" in second.stdout  # checkpoints every 2 steps: step 2 was the last one
    assert steps_of(base / "kill") == steps_of(base / "reference")
    assert metric_keys(base / "kill") == metric_keys(base / "reference")
    report = json.loads((base / "kill" / "report" / "summary.json").read_text())
    assert sum(m["rollouts"] for m in report["members"].values()) == 16  # 4 steps × 4, nothing twice


def test_a_changed_mixture_is_refused_before_any_server_unless_allowed(setup, remote):
    base, sandboxes, model = setup
    shutil.copytree(base / "reference", base / "changed")  # a finished 4-step run, checkpoints at 2 and 4
    (base / "heavier.yaml").write_text(mixture(remote.url, weight=0.8))
    status, said = refuse(base / "heavier.yaml", base / "changed", model, resume="latest")
    assert status == 2
    assert "weights.terminals" in said and "--allow-changed-mixture" in said and "Traceback" not in said
    allowed = drive(
        base,
        "changed",
        model,
        sandboxes,
        mix="heavier.yaml",
        resume="latest",
        allow_changed_mixture=True,
        max_steps=5,
    )
    assert allowed.returncode == 0, allowed.stderr[-3000:]
    assert "(step 4)" in allowed.stdout and sorted(steps_of(base / "changed")) == [1, 2, 3, 4, 5]
    resumes = json.loads((base / "changed" / "manifest.json").read_text())["resumes"]
    assert resumes[-1]["allowed_changes"] is True and any(
        "weights.remote" in c for c in resumes[-1]["changed"]
    )


def test_a_run_directory_is_never_appended_to_silently(setup, remote):
    base, sandboxes, model = setup
    status, said = refuse(base / "mix.yaml", base / "reference", model)
    assert status == 2 and "already holds a run" in said and "--resume" in said
    assert steps_of(base / "reference") == steps_of(base / "reference")  # untouched
    assert sorted(steps_of(base / "reference")) == [1, 2, 3, 4]


def test_a_checkpoint_killed_before_ormix_saved_its_state_is_not_resumed_from(tmp_path):
    # transformers writes the trainer state, then the callbacks save ormix's (the adaptive planner's, then
    # the telemetry's): a SIGKILL between the two leaves a checkpoint --resume must pass over.
    from ormix._runs import TELEMETRY_STATE, RunDirectory

    run = RunDirectory(tmp_path / "run")
    for step, files in ((2, ["trainer_state.json", TELEMETRY_STATE]), (4, ["trainer_state.json"])):
        (tmp_path / "run" / f"checkpoint-{step}").mkdir(parents=True)
        for name in files:
            (tmp_path / "run" / f"checkpoint-{step}" / name).write_text("{}")
    assert run.latest_checkpoint() == tmp_path / "run" / "checkpoint-4"  # not a run ormix trained: as TRL's
    run.manifest_path.write_text("{}")
    (tmp_path / "run" / "train_args.json").write_text("{}")
    assert run.latest_checkpoint() == tmp_path / "run" / "checkpoint-2"
    assert [step for step, _ in run.checkpoints()] == [2]
