"""`ormix train --on-sigterm {checkpoint,abandon}` and `--sigterm-grace`: what the first SIGTERM does
(`handle_termination`, the signal handler the run installs), on this process's main thread with a real signal.
The whole run under SIGTERM (checkpoint, exit 143, resume) is tests/test_long_runs.py."""

from __future__ import annotations

import os
import signal
import time
from types import SimpleNamespace

import pytest

from ormix.trl._lifecycle import RunLifecycle, handle_termination


def _wait_for_interrupt(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:  # the guard's timer interrupts this thread; nothing else ends it early
        time.sleep(0.01)


def test_abandon_interrupts_at_the_first_sigterm():
    with handle_termination("abandon", grace_s=60.0) as stop:
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            os.kill(os.getpid(), signal.SIGTERM)
            _wait_for_interrupt(10.0)
    assert stop.requested and stop.forced and stop.signal_name == "SIGTERM"


def test_checkpoint_waits_for_the_step_then_the_grace_bound_interrupts():
    with handle_termination("checkpoint", grace_s=0.3) as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        # Not interrupted at once: the step in progress may end and save.
        assert stop.requested and not stop.forced
        control = SimpleNamespace(should_save=False, should_training_stop=False)
        state = SimpleNamespace(global_step=3, is_world_process_zero=True)
        RunLifecycle(None, stop).on_step_end(None, state, control)
        assert control.should_save and control.should_training_stop and stop.saved_step == 3
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            _wait_for_interrupt(30.0)  # a step that never ends: --sigterm-grace bounds the wait
    assert stop.forced
    assert 0.2 < time.monotonic() - started < 30.0


def test_the_handler_is_removed_when_the_run_ends():
    before = signal.getsignal(signal.SIGTERM)
    with handle_termination("checkpoint", grace_s=1.0):
        assert signal.getsignal(signal.SIGTERM) is not before
    assert signal.getsignal(signal.SIGTERM) is before


def test_the_step_line_goes_to_what_the_caller_shows_it_with_the_library_printing_nothing(tmp_path, capsys):
    import io
    import warnings

    from rich.console import Console

    from ormix.app._train.progress import alarms_on_console, console_lines
    from ormix.telemetry._alarm import CoverageAlarmWarning
    from ormix.trl._lifecycle import ProgressLine

    state = SimpleNamespace(global_step=1, max_steps=2, is_world_process_zero=True)
    shown: list[str] = []
    line = ProgressLine(["a"], shown.append, tmp_path)
    line.on_log(None, state, "control", logs={"loss": 0.5, "rewards/a/mean": 1.0})
    ProgressLine(["a"], None, tmp_path).on_log(None, state, "control", logs={"loss": 0.25})  # the file only
    assert len(shown) == 1 and shown[0].startswith("[bold]step 1/2[/bold] │ loss 0.5000 │ [cyan]a[/cyan] r")
    assert len((tmp_path / "log_history.jsonl").read_text().splitlines()) == 2
    assert capsys.readouterr() == ("", "")
    # The app prints: the same line on its console, and the alarms between the lines.
    out = io.StringIO()
    console = Console(file=out, width=400, color_system=None)
    with alarms_on_console(console):
        console_lines(console)(shown[0])
        warnings.warn("ormix: environment 'a' is failing", CoverageAlarmWarning, stacklevel=1)
    assert out.getvalue().splitlines() == [
        shown[0].replace("[bold]", "").replace("[/bold]", "").replace("[cyan]", "").replace("[/cyan]", ""),
        "  ormix: environment 'a' is failing",
    ]
