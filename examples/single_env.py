"""One environment, plain TRL: ormix's `OpenRewardSpec` as a drop-in for TRL's.

    python examples/single_env.py           # 8 GRPO steps on local:terminals with the offline tiny model
    python examples/single_env.py --smoke   # 1 step (also: ORMIX_EXAMPLE_SHORT=1)
    python examples/single_env.py --target Eigent/SETA --model Qwen/Qwen3-0.6B   # catalog env, real model

The only change from TRL's own example is the import line; the spec takes the same arguments
(`num_tasks`, `split`, `indices`, `api_key`, `secrets`, `env_name`, ...) and adds `local:NAME` and
`module:Class` targets served on loopback, so this runs offline.
"""

from __future__ import annotations

import argparse
import os

from example_output import output_dir, where
from trl import GRPOConfig, GRPOTrainer

from ormix import OpenRewardSpec  # instead of: from trl.experimental.openreward import OpenRewardSpec
from ormix.workbench._tiny import resolve_model


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--target", default="local:terminals", help="catalog name, URL, local:NAME or module:Class"
    )
    parser.add_argument("--model", default=None, help="hub id or path (default: ormix's offline tiny model)")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--output-dir", default=None)
    parser.add_argument("--smoke", action="store_true", help="one step, short completions")
    opts = parser.parse_args()
    with output_dir(opts.output_dir, "single") as out:
        smoke = opts.smoke or os.environ.get("ORMIX_EXAMPLE_SHORT") == "1"

        spec = OpenRewardSpec(opts.target, num_tasks=8)
        import torch

        cpu = not torch.cuda.is_available()
        args = GRPOConfig(
            output_dir=str(out),
            max_steps=1 if smoke else opts.steps,
            num_generations=2,
            per_device_train_batch_size=4,  # 2 prompts × 2 completions per step
            max_completion_length=48 if smoke else 128,
            max_tool_calling_iterations=4,
            learning_rate=1e-5,
            logging_steps=1,
            report_to="none",
            save_strategy="no",
            disable_tqdm=True,
            use_cpu=cpu,
            bf16=not cpu,
        )
        trainer = GRPOTrainer(
            model=resolve_model(opts.model),
            args=args,
            train_dataset=spec.train_dataset,
            environment_factory=spec.environment_factory,
            reward_funcs=spec.reward_funcs,
            callbacks=spec.callbacks,  # closes sessions at the end; per-env metrics and rollout records
        )
        trainer.train()

        name = spec.reward_funcs.__name__
        for log in trainer.state.log_history:
            if f"rewards/{name}/mean" in log:
                print(
                    f"step {log['step']}: rewards/{name}/mean = {log[f'rewards/{name}/mean']}, "
                    f"coverage = {log.get(f'ormix/{name}/coverage')}"
                )
        print(
            f"single_env done: {trainer.state.global_step} step(s) on {spec.target}; "
            f"output in {where(opts.output_dir, out)}"
        )


if __name__ == "__main__":
    main()
