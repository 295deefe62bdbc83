"""Driver for the long-run tests: `ormix train` (through `train_command`) in its own process, stopped on cue.

Usage: python tests/support/resume_train.py MIXTURE RUN_DIR MODEL [KILL] [-- train options as JSON]

KILL is ``none``, ``sigterm@N`` (the process sends itself SIGTERM at the end of step N: the current step then
finishes, is checkpointed, and the run exits 143), ``sigint@N`` (SIGINT, as Ctrl-C sends, at the end of step
N: the run stops at once, saves step N and exits 130) or ``sigkill@N`` (the process SIGKILLs itself while the
step after N is being scored, after one member's records of that step were written: nothing is cleaned up).
The options (JSON) go to `train_command` (``resume``, ``allow_changed_mixture``, ``max_steps``, ...).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path


def main(mixture: str, run_dir: str, model: str, kill: str = "none", options: str = "{}") -> int:
    from rich.console import Console
    from transformers import TrainerCallback

    from ormix.app._train import train_command
    from ormix.mixture import load_mixture

    opts = json.loads(options)
    max_steps = opts.pop("max_steps", None)
    mix = load_mixture(mixture)
    callbacks = []
    mode, _, at = kill.partition("@")
    if mode in ("sigterm", "sigint"):
        signum = signal.SIGTERM if mode == "sigterm" else signal.SIGINT

        class Signal(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                if state.global_step == int(at):
                    os.kill(os.getpid(), signum)
                return control

        callbacks.append(Signal())
    elif mode == "sigkill":
        # Runs after the first member's telemetry observer wrote its records of step N+1.
        def kill_now(batch):
            step = getattr(batch.trainer_state, "global_step", 0)
            if step == int(at):
                os.kill(os.getpid(), signal.SIGKILL)

        mix.reward_funcs[0].observers.append(kill_now)
    console = Console(width=200, color_system=None, record=True)
    status = train_command(
        mix,
        model=model,
        max_steps=max_steps,
        output_dir=Path(run_dir),
        warmup_sft=0,
        overrides=[],
        console=console,
        callbacks=callbacks,
        resume_command=f"ormix train {mixture} --output-dir {run_dir} --resume",
        **opts,
    )
    # These runs test stopping and resuming, not learning: the tiny model without a warm start may score
    # nothing in 4 steps, which `ormix train` reports as a failed run (exit 1, a last line saying so).
    if status == 1 and "error: no member was ever scored" in console.export_text():
        return 0
    return status


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:6]))
