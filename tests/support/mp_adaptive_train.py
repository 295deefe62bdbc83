"""Training script for tests/integrations/test_multiprocess_adaptive.py, launched with
`torchrun --nproc_per_node 2` (gloo, CPU).

Usage: torchrun --nproc_per_node 2 tests/support/mp_adaptive_train.py MODEL_DIR OUTPUT_DIR

Each rank serves its own `local:echo` in-process and trains `MAX_STEPS` GRPO steps of an adaptive mixture
(`MIXTURE`) with a scripted policy: member `solved`, every rollout submits the task's word (groups all 1.0:
nothing to learn); member `mixed`, sample 0 submits the word and sample 1 a wrong one (groups [1.0, 0.0]:
informative). Each rank writes OUTPUT_DIR/planner/rank-<k>.json: per step, the planner's `state_dict()` and
weights once the step's pooled statistics were observed, and the groups this rank alone recorded that step
(what it handed to `all_gather_object`); plus where it imported ormix from and the process group it ran in.
Rank 0 also writes the trainer's `log_history` to OUTPUT_DIR/log_history.json.
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

#: Two members on `local:echo`, disjoint tasks (echo's words 0-3 and 8-11). 4 prompts a step = 2 ranks × 2
#: prompts (per_device_train_batch_size 4 / num_generations 2). Steps 1-2 are warm-up (static, uniform);
#: step t >= 3 is decided from the pooled groups of steps <= t - 2.
MIXTURE = {
    "name": "mp-adaptive",
    "members": {
        "solved": {"target": "local:echo", "indices": [0, 1, 2, 3], "local_serve": "thread"},
        "mixed": {"target": "local:echo", "indices": [8, 9, 10, 11], "local_serve": "thread"},
    },
    "strategy": "adaptive",
    "adaptive": {"signal": "informative", "warmup_steps": 2, "floor": 0.05, "max_change": 0.3, "window": 2},
    "prompts_per_step": 4,
    "num_steps": 6,  # one step more than trained: the loader's look-ahead fetches (decides) step 6's rows too
    # Step 1 split by member (rank 0 both `mixed` rows, rank 1 both `solved` ones), and no rank ever holds
    # the same task twice in a step (the script tells samples apart by identical prompts).
    "seed": 7,
}
MAX_STEPS = 5
NUM_GENERATIONS = 2
SOLVED_WORDS = ("apple", "river", "stone", "cloud")  # echo's tasks 0-3


def script(ctx):
    """`solved`: every sample submits the word (1.0). `mixed`: sample 0 the word (1.0), sample 1 a wrong
    one (0.0)."""
    from ormix.workbench._scripted import tool_call

    if ctx.turn > 0:
        return "done"
    word = re.search(r"word '(\w+)'", ctx.user).group(1)
    right = word in SOLVED_WORDS or ctx.sample == 0
    return tool_call("submit", text=word if right else "wrong")


def main(model: str, out: str) -> None:
    import torch.distributed as dist
    from transformers import TrainerCallback
    from trl_args import cpu_grpo_config  # a sibling: run as a script, its folder is on sys.path

    import ormix
    from ormix.config import MixtureConfig
    from ormix.mixture import MixtureSpec
    from ormix.trl._trainer import ConcurrentGRPOTrainer
    from ormix.workbench._scripted import ScriptedPolicy

    mix = MixtureSpec.from_config(MixtureConfig.from_dict(MIXTURE, source="mp_adaptive_train.MIXTURE"))
    run = mix.adaptive_run
    planner = run.planner

    # What this rank alone recorded each step: the groups AdaptiveCallback takes (and then pools).
    taken: list[dict] = []
    take_groups = run.take_groups

    def recording_take_groups():
        groups = take_groups()
        taken.append(groups)
        return groups

    run.take_groups = recording_take_groups

    steps: list[dict] = []

    class PlannerDump(TrainerCallback):
        """After AdaptiveCallback (it comes later in the list): the planner as the step left it."""

        def on_step_end(self, args, state, control, **kwargs):
            step = state.global_step
            assert len(taken) == step, (len(taken), step)
            steps.append(
                {
                    "step": step,
                    "local_groups": {
                        m: [[t, list(r)] for _, (t, r) in sorted(g.items())] for m, g in taken[-1].items()
                    },
                    "weights": planner.weights(step),
                    "state": planner.state_dict(),
                }
            )
            return control

    args = cpu_grpo_config(
        out,
        num_generations=NUM_GENERATIONS,
        max_steps=MAX_STEPS,
        max_completion_length=48,
        remove_unused_columns=False,
        max_tool_calling_iterations=1,
        ddp_backend="gloo",
    )
    trainer = ConcurrentGRPOTrainer(
        model=model,
        args=args,
        train_dataset=mix.train_dataset,
        environment_factory=mix.environment_factory,
        reward_funcs=mix.reward_funcs,
        callbacks=[*mix.callbacks, PlannerDump()],
    )
    ScriptedPolicy(script).attach(trainer)
    trainer.train()

    rank = trainer.accelerator.process_index
    folder = Path(out, "planner")
    folder.mkdir(parents=True, exist_ok=True)
    dump = {
        "rank": rank,
        "ormix": str(Path(ormix.__file__).resolve()),
        "world_size": dist.get_world_size() if dist.is_initialized() else 1,
        "backend": dist.get_backend() if dist.is_initialized() else None,
        "steps": steps,
        "final": planner.state_dict(),
    }
    (folder / f"rank-{rank}.json").write_text(json.dumps(dump))
    if trainer.accelerator.is_main_process:
        Path(out, "log_history.json").write_text(json.dumps(trainer.state.log_history))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
