"""Training script for tests/integrations/test_multiprocess.py, launched with `torchrun --nproc_per_node 2`
(gloo, CPU).

Usage: torchrun --nproc_per_node 2 tests/integrations/mp_split_group_train.py MODEL_DIR OUTPUT_DIR

`ormix train`'s default geometry on 2 processes: one prompt a step, a GRPO group of 8 split 4 + 4 over the
ranks. Rank 0's half solves the task and rank 1's half does not, so the group is informative though each half
alone is not. It trains twice, with TRL's `GRPOTrainer` (ormix's callback pools the figure in `on_log`) and
with ormix's `ConcurrentGRPOTrainer` (it pools before any logger sees the entry). For each, rank 0 writes to
OUTPUT_DIR/<trainer class>/: the trainer's `log_history` (log_history.json), what a logger placed before
ormix's callbacks saw (as `report_to` loggers are; logged.json) and the no-learning alarms' kinds
(no_learning.json).
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
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # trl_args


def script(ctx):
    """Rank 0 submits the word (1.0), rank 1 a wrong one (0.0)."""
    from ormix.workbench._scripted import tool_call

    if ctx.turn > 0:
        return "done"
    word = re.search(r"word '(\w+)'", ctx.user).group(1)
    return tool_call("submit", text=word if os.environ["RANK"] == "0" else "wrong")


def main(model: str, out: str) -> None:
    from transformers import TrainerCallback
    from transformers.integrations import integration_utils
    from trl import GRPOTrainer
    from trl_args import cpu_grpo_config, scripted_trainer

    from ormix import MixtureSpec, OpenRewardSpec
    from ormix.trl import ConcurrentGRPOTrainer
    from ormix.trl._callbacks import TelemetryCallback

    class Logger(TrainerCallback):
        """A `report_to` logger (wandb, tensorboard), registered as transformers registers its own: the
        trainer places it among its default callbacks, before the ones it is given."""

        logged: list[dict] = []

        def on_log(self, args, state, control, logs=None, **kwargs):
            Logger.logged.append(dict(logs or {}))

    integration_utils.INTEGRATION_TO_CALLBACK["ormix-test-logger"] = Logger

    for trainer_class in (GRPOTrainer, ConcurrentGRPOTrainer):
        where = Path(out, trainer_class.__name__)
        mix = MixtureSpec(
            {"a": OpenRewardSpec("local:echo", indices=[0, 1], local_serve="thread")},
            prompts_per_step=1,
            num_samples=2,
            telemetry={"no_learning_steps": 2},
        )
        args = cpu_grpo_config(
            str(where),
            num_generations=8,
            per_device_train_batch_size=4,
            max_completion_length=48,
            max_tool_calling_iterations=1,
            ddp_backend="gloo",
            report_to=["ormix-test-logger"],
        )
        Logger.logged = []
        trainer = scripted_trainer(mix, model, args, script, trainer_class)
        trainer.train()
        mix.close()
        if trainer.accelerator.is_main_process:
            (where / "log_history.json").write_text(json.dumps(trainer.state.log_history))
            (where / "logged.json").write_text(json.dumps(Logger.logged))
            callback = next(c for c in mix.callbacks if isinstance(c, TelemetryCallback))
            (where / "no_learning.json").write_text(json.dumps([a.kind for a in callback.no_learning]))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
