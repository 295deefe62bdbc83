"""Training script for tests/integrations/test_multiprocess.py's group-scoring test, launched with
`torchrun --nproc_per_node 2` (gloo, CPU).

Usage: torchrun --nproc_per_node 2 tests/support/mp_group_scoring_train.py MODEL_DIR OUTPUT_DIR

Each rank serves its own `local:ranked` in-process and trains 2 GRPO steps with a scripted policy; the
environment scores every group (``group_scoring: on``, ``combine: add``). Each rank's generation batch is 4
rollouts, 2 whole groups of 2: sample 0 of a group answers the sum, sample 1 the sum with spaces around it
(right, longer), so the environment scores them 1.0 and 0.5.
"""

from __future__ import annotations

import os
import re
import sys

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OPENREWARD_LOG_LEVEL", "WARNING")


def script(ctx):
    from ormix.workbench._scripted import tool_call

    if ctx.turn > 0:
        return "done"
    a, b = re.findall(r"What is (\d+) \+ (\d+)\?", ctx.user)[-1]
    total = str(int(a) + int(b))
    return tool_call("submit", answer=total if ctx.sample == 0 else f" {total} ")


def main(model: str, out: str) -> None:
    from trl_args import cpu_grpo_config, scripted_trainer  # a sibling: run as a script, on sys.path

    from ormix import MixtureSpec, OpenRewardSpec

    ranked = OpenRewardSpec(
        "local:ranked",
        indices=list(range(8)),
        local_serve="thread",
        group_scoring={"mode": "on", "combine": "add", "candidates": "trajectory"},
    )
    mix = MixtureSpec({"ranked": ranked}, prompts_per_step=4, num_samples=8, seed=5)
    args = cpu_grpo_config(out, max_tool_calling_iterations=2, ddp_backend="gloo")
    scripted_trainer(mix, model, args, script).train()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
