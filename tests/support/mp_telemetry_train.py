"""Training script for tests/test_multiprocess.py, launched with `torchrun --nproc_per_node 2` (gloo, CPU).

Usage: torchrun --nproc_per_node 2 tests/support/mp_telemetry_train.py MODEL_DIR OUTPUT_DIR

Each rank serves its own `local:echo` in-process, trains 2 GRPO steps with a scripted policy on a
two-member mixture, and rank 0 writes the trainer's `log_history` to OUTPUT_DIR/log_history.json.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OPENREWARD_LOG_LEVEL", "WARNING")


def script(ctx):
    """Member `a`: sample 0 submits the word (1.0), sample 1 a wrong one (0.0). Member `b` (tasks 8..): sample
    0
    submits the word, sample 1 never calls a tool (unscored)."""
    from ormix.workbench._scripted import tool_call

    if ctx.turn > 0:
        return "done"
    word = re.search(r"word '(\w+)'", ctx.user).group(1)
    if ctx.sample == 0:
        return tool_call("submit", text=word)
    if word in ("apple", "river", "stone", "cloud"):
        return tool_call("submit", text="wrong")
    return "I give up."


def main(model: str, out: str) -> None:
    from trl_args import cpu_grpo_config, scripted_trainer  # a sibling: run as a script, on sys.path

    from ormix import MixtureSpec, OpenRewardSpec

    mix = MixtureSpec(
        {
            "a": OpenRewardSpec("local:echo", indices=[0, 1, 2, 3], local_serve="thread"),
            "b": OpenRewardSpec("local:echo", indices=[8, 9, 10, 11], local_serve="thread"),
        },
        weights={"a": 3, "b": 1},
        prompts_per_step=4,
        num_samples=8,
        seed=5,
    )
    args = cpu_grpo_config(out, max_tool_calling_iterations=2, ddp_backend="gloo")
    trainer = scripted_trainer(mix, model, args, script)
    trainer.train()
    if trainer.accelerator.is_main_process:
        Path(out, "log_history.json").write_text(json.dumps(trainer.state.log_history))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
