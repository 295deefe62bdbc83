"""`ormix train` on catalog members through the platform double (tests/support/platform_double.py, a
stand-in for the OpenReward platform in front of a real local ORS server).

- Every `/create` answered "backend starting" for a while (1 s here: ``ORMIX_TEST_COLD_START_S``, 20 s when
  run by hand): a 2-step run on two catalog members ends with coverage 1.0, shows the wait live and in the
  progress line, and counts it in the env-time metrics; a third member whose backend never starts fails
  its opens at its deadline (``open_timeout_s``) and the coverage alarm names it.
- Platform sessions created = deleted after that run, after Ctrl-C and after SIGTERM (subprocess runs).
"""

from __future__ import annotations

import io
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ormix.server import serve_in_thread
from support.platform_double import PlatformDouble

pytestmark = pytest.mark.slow

DRIVER = Path(__file__).resolve().parent / "support" / "platform_train.py"
COLD_S = float(os.environ.get("ORMIX_TEST_COLD_START_S", "1"))
NEVER_DEADLINE_S = 1.5
EXPECTED_SIGTERM_RC = 128 + signal.SIGTERM  # as `ormix train` exits on SIGTERM

MIXTURE = f"""\
name: platform
members:
  alpha:
    target: "Owner/Alpha"
    num_tasks: 2
    discover_task_tools: false
  beta:
    target: "Owner/Beta"
    num_tasks: 2
    discover_task_tools: false
  never:
    target: "Owner/Never"
    num_tasks: 1
    discover_task_tools: false
    open_timeout_s: {NEVER_DEADLINE_S}
prompts_per_step: 3
num_samples: 6
seed: 0
telemetry:
  consecutive_steps: 1
train:
  max_steps: 2
  num_generations: 2
  max_completion_length: 32
  max_tool_calling_iterations: 2
"""

SIGNAL_MIXTURE = """\
name: platform-signals
members:
  alpha:
    target: "Owner/Alpha"
    num_tasks: 2
    discover_task_tools: false
  beta:
    target: "Owner/Beta"
    num_tasks: 2
    discover_task_tools: false
prompts_per_step: 2
num_samples: 4
seed: 0
train:
  max_steps: 2
  num_generations: 2
  max_completion_length: 128
  max_tool_calling_iterations: 2
"""


@pytest.fixture(scope="module")
def platform():
    with serve_in_thread(["local:echo"]) as upstream:
        deployments = {name: (upstream.url, "echo") for name in ("Owner/Alpha", "Owner/Beta", "Owner/Never")}
        with PlatformDouble(deployments) as double:
            yield double


@pytest.fixture
def platform_env(platform, monkeypatch):
    for name, value in platform.env().items():
        monkeypatch.setenv(name, value)
    platform.clear()
    return platform


def _submit_the_word(ctx):
    """Sample 0 of each group submits the prompt's word, sample 1 misses: every rollout is scored."""
    import re

    from ormix.workbench._scripted import tool_call

    found = re.search(r"word '(\w+)'", ctx.user)
    if found is None or ctx.turn > 0:
        return "done"
    return tool_call("submit", text=found.group(1) if ctx.sample == 0 else "miss")


def test_a_cold_start_on_every_create_is_waited_out_shown_and_counted(
    platform_env, tiny_model, tmp_path, monkeypatch
):
    from rich.console import Console
    from transformers import TrainerCallback

    from ormix.app._train import train
    from ormix.workbench._scripted import ScriptedPolicy

    platform = platform_env
    platform.cold_start("Owner/Alpha", COLD_S, paths=("/create",))
    platform.cold_start("Owner/Beta", COLD_S, paths=("/create",))
    platform.cold_start("Owner/Never", math.inf, paths=("/create",))
    monkeypatch.setenv("ORMIX_WAIT_NOTICE_S", str(min(0.5, COLD_S / 2)))

    class Scripted(TrainerCallback):
        def on_init_end(self, args, state, control, model=None, processing_class=None, **kwargs):
            ScriptedPolicy(_submit_the_word, tokenizer=processing_class).attach(model)

    (tmp_path / "mix.yaml").write_text(MIXTURE)
    out = io.StringIO()
    t0 = time.monotonic()
    result = train(
        tmp_path / "mix.yaml",
        output_dir=tmp_path / "run",
        warmup_sft=0,
        console=Console(file=out, width=200, color_system=None),
        callbacks=[Scripted()],
    )
    took = time.monotonic() - t0
    text = out.getvalue()
    steps = [h for h in result.log_history if "ormix/alpha/coverage" in h]
    assert len(steps) == 2, text
    for h in steps:
        assert h["ormix/alpha/coverage"] == 1.0 and h["ormix/beta/coverage"] == 1.0
        # Counted as time, not as errors.
        assert h["ormix/alpha/error_rate"] == 0.0 and h["ormix/alpha/backend_starting_ms"] >= 900 * COLD_S
        assert h["ormix/never/error_rate"] == 1.0
    # Shown while it lasts, and in the step's line.
    assert "alpha: backend starting, " in text and "beta: backend starting, " in text
    assert re.search(r"alpha r +[\d.]+ cov +1\.00 backend starting \d", text), text
    # The member whose backend never starts: its opens fail at their deadline, and the alarm names it.
    assert "never: backend of Owner/Never did not start within the open deadline" in text
    assert "environment 'never' is failing" in text and "session_open" in text
    # Said when it fires, between the step lines, as a console line (not a warning naming transformers).
    fired = text.index("  ormix: environment 'never' is failing")
    assert fired < text.index("step 2/2") < text.index("alarm step")
    never = [r for r in platform.records if r.path == "/create" and r.note == "starting"]
    assert never
    assert took < 120
    # Nothing left on the double: every platform session created was deleted.
    created, deleted = platform.counts()
    assert created > 0 and created == deleted and platform.live() == set()


class Run:
    """The driver in a subprocess of its own process group (a group signal is what a terminal sends)."""

    def __init__(self, tmp_path: Path, mode: str, env: dict[str, str]) -> None:
        self.probe = tmp_path / "probe"
        self.probe.mkdir()
        (tmp_path / "mix.yaml").write_text(SIGNAL_MIXTURE)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(DRIVER),
                str(tmp_path / "mix.yaml"),
                str(tmp_path / "run"),
                str(self.probe),
                mode,
            ],
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )

    def wait_for(self, ready, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while not ready():
            assert self.proc.poll() is None, self.proc.communicate()[0][-4000:]
            assert time.monotonic() < deadline, "the run never got there"
            time.sleep(0.05)

    def finish(self) -> tuple[int, str]:
        try:
            output, _ = self.proc.communicate(timeout=120)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
        return self.proc.returncode, output


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_an_interrupted_run_leaves_no_platform_session(platform_env, tiny_model, tmp_path, how):
    """Ctrl-C while one member's opens wait out a backend that never starts (their platform sessions exist,
    their /create never went through) and the other's sessions are open; SIGTERM mid-rollout (the step
    ends, a checkpoint is saved, the run stops)."""
    platform = platform_env
    if how == "ctrl-c":
        platform.cold_start("Owner/Beta", math.inf, paths=("/create",))
    run = Run(tmp_path, "interrupt" if how == "ctrl-c" else "term", platform.env())
    if how == "ctrl-c":
        run.wait_for(lambda: any(r.note == "starting" for r in platform.records))
        assert platform.live(), "the run has platform sessions on the double"
        os.killpg(run.proc.pid, signal.SIGINT)
    else:
        run.wait_for(lambda: (run.probe / "open.json").exists())
        assert platform.live(), "the run has platform sessions on the double"
        os.killpg(run.proc.pid, signal.SIGTERM)
        (run.probe / "go").write_text("")  # the rollout ends; the step ends; ormix saves and stops
    rc, output = run.finish()
    if how == "ctrl-c":
        assert rc == 130 and "interrupted" in output, output[-4000:]
    else:
        assert rc == EXPECTED_SIGTERM_RC and "resume with" in output, output[-4000:]
    created, deleted = platform.counts()
    # A leak names its session's requests, so a failure says which open or close lost it.
    leaked = {sid: [(r.path, r.status, r.note) for r in platform.trace(sid)] for sid in platform.live()}
    assert created > 0 and created == deleted and not leaked, f"{output[-4000:]}\nleaked: {leaked}"
