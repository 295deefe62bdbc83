"""A real `ormix train` run against the platform double, as a subprocess of tests/test_platform_train.py.

Usage: python tests/support/platform_train.py MIXTURE RUN_DIR PROBE_DIR MODE

`train_command` (what `ormix train` runs) on the mixture file (catalog members; `OPENREWARD_*` point at the
double) with the offline tiny model and a scripted policy: turn 0 calls `echo`, the next turn writes
``PROBE_DIR/open.json`` (sessions are open on the double) and then, by MODE:

- ``interrupt``: waits for SIGINT (the test sends it, as Ctrl-C would);
- ``term``: waits until ``PROBE_DIR/go`` exists (the test writes it after sending SIGTERM), then ends the
  turn, so the step ends and ormix saves a checkpoint and stops, as a preempted job does.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("OPENREWARD_LOG_LEVEL", "WARNING")


def make_script(mode: str, probe: Path):
    from ormix.workbench._scripted import tool_call

    def script(ctx):
        if ctx.turn == 0:
            return tool_call("echo", text="hello")
        if not (probe / "open.json").exists():
            (probe / "open.json").write_text("{}")
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # Ctrl-C lands here, mid-rollout
                if mode == "term" and (probe / "go").exists():
                    return "done"
                time.sleep(0.05)
            raise SystemExit("no signal arrived within 60 s")
        return "done"

    return script


def main(mixture: str, run_dir: str, probe_dir: str, mode: str) -> int:
    from rich.console import Console
    from transformers import TrainerCallback

    from ormix.app._train import train_command
    from ormix.workbench._scripted import ScriptedPolicy

    script = make_script(mode, Path(probe_dir))

    class AttachScript(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, processing_class=None, **kwargs):
            ScriptedPolicy(script, tokenizer=processing_class).attach(model)
            return control

    return train_command(
        mixture,
        model=None,
        max_steps=None,
        output_dir=Path(run_dir),
        warmup_sft=0,
        overrides=[],
        console=Console(width=200, color_system=None),
        callbacks=[AttachScript()],
    )


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
