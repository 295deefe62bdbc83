"""A run's lifecycle: progress marks, and stopping cleanly when the cluster asks (SIGTERM).

Schedulers preempt with SIGTERM, then SIGKILL after a grace period. `handle_termination` turns the first
SIGTERM into a `StopRequest`: with the default policy ``checkpoint``, `RunLifecycle` asks the trainer to save
a checkpoint when the current step ends and to stop; if the step does not end within the grace bound, or on
a second SIGTERM (or Ctrl-C), the main thread is interrupted at once. With ``abandon`` the first SIGTERM
interrupts at once. Either way the caller's cleanup (closing sessions, stopping servers) still runs.

Example:
    >>> stop = StopRequest()
    >>> stop.requested, stop.signal_name
    (False, None)
"""

from __future__ import annotations

import _thread
import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from transformers import TrainerCallback

from ormix.runs import RunDirectory

__all__ = ["RunLifecycle", "StopRequest", "TerminationPolicy", "handle_termination"]

logger = logging.getLogger(__name__)

TerminationPolicy = Literal["checkpoint", "abandon"]


@dataclass
class StopRequest:
    """Set by a signal handler, read by `RunLifecycle` at the end of each step.

    ``forced`` means the main thread was interrupted (a second signal, or the grace bound ran out).
    """

    requested: bool = False
    signal_name: str | None = None
    forced: bool = False
    saved_step: int | None = None
    _timer: threading.Timer | None = field(default=None, repr=False)


class RunLifecycle(TrainerCallback):
    """Marks each completed step in the run directory and honours a `StopRequest` at the step's end.

    Example:
        >>> RunLifecycle(None, StopRequest()).run is None
        True
    """

    def __init__(self, run_dir: str | Path | None, stop: StopRequest | None = None) -> None:
        self.run = RunDirectory(run_dir) if run_dir is not None else None
        self.stop = stop or StopRequest()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self.run is not None and state.is_world_process_zero:
            self.run.write_progress(state.global_step)
        if self.stop.requested and not self.stop.forced:
            control.should_save = True
            control.should_training_stop = True
            self.stop.saved_step = state.global_step
        return control


@contextlib.contextmanager
def handle_termination(
    policy: TerminationPolicy = "checkpoint", grace_s: float = 120.0
) -> Iterator[StopRequest]:
    """Within the block, SIGTERM stops training cleanly (see the module docstring); yields the request.

    Only the main thread can install signal handlers: elsewhere this yields a request nothing sets.
    """
    stop = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def interrupt() -> None:
        stop.forced = True
        _thread.interrupt_main()

    def on_term(signum: int, frame: Any) -> None:
        if stop.requested or policy == "abandon":
            stop.requested, stop.forced, stop.signal_name = True, True, "SIGTERM"
            raise KeyboardInterrupt("SIGTERM")
        stop.requested, stop.signal_name = True, "SIGTERM"
        logger.warning(
            "ormix: SIGTERM: saving a checkpoint when the current step ends (at most %.0f s), then stopping; "
            "a second SIGTERM or Ctrl-C stops at once",
            grace_s,
        )
        stop._timer = threading.Timer(grace_s, interrupt)
        stop._timer.daemon = True
        stop._timer.start()

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGTERM, previous)
        if stop._timer is not None:
            stop._timer.cancel()
