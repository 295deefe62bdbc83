"""Nothing outlives a training run: no open session, no sandbox directory, no server process.

Each test runs a real `ormix train` (`train_command`, tiny model, scripted tool calls) in a subprocess
(tests/support/cleanup_train.py) against `local:terminals` and `local:seta` served in child processes (the
default), with ORMIX_SANDBOX_DIR pointed at an empty directory. Sessions own sandbox directories there,
so a directory left behind is a session nobody tore down. The driver records, at the first turn after a
tool result, the server pids and the sandboxes that exist then (proof there was something to clean up),
and again when `train_command` returns, before the interpreter exits.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

DRIVER = Path(__file__).resolve().parent / "support" / "cleanup_train.py"
MIXTURE = """\
name: cleanup
members:
  terminals:
    target: "local:terminals"
    num_tasks: 2
  seta:
    target: "local:seta"
    num_tasks: 2
prompts_per_step: 2
num_samples: 2
seed: 0
train:
  max_steps: 1
  num_generations: 2
  max_completion_length: 256
  max_tool_calling_iterations: 2
"""

pytestmark = pytest.mark.slow
_started: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _no_stray_driver():
    yield
    while _started:  # a test that failed early must not leave its run going
        proc = _started.pop()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


class Run:
    """The driver in a subprocess of its own session (so a process-group signal is what a terminal sends)."""

    def __init__(self, tmp_path: Path, mode: str) -> None:
        self.base = tmp_path
        self.sandboxes = tmp_path / "sandboxes"
        self.probe = tmp_path / "probe"
        self.sandboxes.mkdir()
        self.probe.mkdir()
        (tmp_path / "mix.yaml").write_text(MIXTURE)
        env = {**os.environ, "ORMIX_SANDBOX_DIR": str(self.sandboxes)}
        env.pop("ORMIX_LOCAL_SERVE", None)  # the default: child processes
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(DRIVER),
                str(tmp_path / "mix.yaml"),
                str(tmp_path / "run"),
                str(self.probe),
                mode,
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        _started.append(self.proc)

    def wait_for(self, name: str, timeout_s: float = 90.0) -> dict:
        """The probe file `name`, once the driver wrote it (it writes atomically)."""
        deadline = time.monotonic() + timeout_s
        path = self.probe / name
        while not path.exists():
            if self.proc.poll() is not None:
                out, err = self.proc.communicate()
                pytest.fail(
                    f"the run ended (rc {self.proc.returncode}) before writing {name}:\n{out[-3000:]}\n"
                    f"{err[-3000:]}"
                )
            assert time.monotonic() < deadline, f"no {name} after {timeout_s}s"
            time.sleep(0.05)
        return json.loads(path.read_text())

    def finish(self, timeout_s: float = 120.0) -> tuple[int, str]:
        out, err = self.proc.communicate(timeout=timeout_s)
        return self.proc.returncode, out + err

    def left_behind(self) -> list[str]:
        return sorted(os.listdir(self.sandboxes))


def _alive(pid: int) -> bool:
    """Whether `pid` is still a local ORS server (a reused pid or a zombie is not)."""
    try:
        return b"ormix.server" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _assert_open_then(opened: dict) -> list[int]:
    # Non-vacuous: both servers were running and sessions (with their sandboxes) were open mid-run.
    assert len(opened["servers"]) == 2 and all(_alive(p) for p in opened["servers"]), opened
    assert opened["sandboxes"], "no session was open when the probe ran"
    return opened["servers"]


def test_normal_end_leaves_nothing(tmp_path):
    run = Run(tmp_path, "normal")
    servers = _assert_open_then(run.wait_for("open.json"))
    rc, output = run.finish()
    # The scripted calls solve nothing: a run in which no member scored ends with exit 1 and says so.
    assert rc == 1 and "no member was ever scored" in output, output[-4000:]
    assert "finished in" in output
    assert run.wait_for("children.json")["sandboxes"] == []  # closed by train() itself, servers still up
    assert run.left_behind() == []
    assert not [p for p in servers if _alive(p)]


def test_ctrl_c_mid_rollout_exits_130_and_leaves_nothing(tmp_path):
    run = Run(tmp_path, "interrupt")
    opened = run.wait_for("open.json")  # the driver now waits inside a rollout, sessions open
    servers = _assert_open_then(opened)
    os.killpg(run.proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    rc, output = run.finish()
    assert rc == 130, output[-4000:]
    assert "interrupted" in output
    # A short message, not tracebacks: the servers (own session) never saw the Ctrl-C.
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output[-4000:]
    # The trainer closed the interrupted rollouts' sessions itself, while its servers were still up.
    assert run.wait_for("children.json")["sandboxes"] == []
    assert run.left_behind() == []
    assert not [p for p in servers if _alive(p)]


def test_reward_function_error_fails_the_run_and_leaves_nothing(tmp_path):
    run = Run(tmp_path, "reward-error")
    servers = _assert_open_then(run.wait_for("open.json"))
    rc, output = run.finish()
    assert rc == 1, output[-4000:]
    assert "training failed: ValueError: user reward exploded: the bonus table is missing" in output
    assert run.wait_for("children.json")["sandboxes"] == []
    assert run.left_behind() == []
    assert not [p for p in servers if _alive(p)]


def test_killed_trainer_leaves_no_server_and_no_sandbox(tmp_path):
    """SIGKILL runs no cleanup at all in the trainer: the servers notice their parent is gone (their stdin
    pipe closes) and shut down like on SIGTERM, tearing the open sessions down."""
    run = Run(tmp_path, "interrupt")
    servers = _assert_open_then(run.wait_for("open.json"))
    run.proc.kill()
    run.proc.wait()  # not communicate(): a server that outlived its parent would hold the pipes open
    try:
        deadline = time.monotonic() + 30
        while ([p for p in servers if _alive(p)] or run.left_behind()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in servers if _alive(p)], "a server outlived its killed parent"
        assert run.left_behind() == [], "a session's sandbox outlived its killed parent"
    finally:
        for pid in servers:  # never leak a server from this test, even when it fails
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        for pipe in (run.proc.stdout, run.proc.stderr):
            pipe.close()
