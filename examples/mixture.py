"""A mixture of two environments through the Python API, with TRL's GRPOTrainer.

    python examples/mixture.py             # 8 GRPO steps: 60 % local:terminals, 40 % local:seta, tiny model
    python examples/mixture.py --smoke     # 1 step (also: ORMIX_EXAMPLE_SHORT=1)

The same mixture as a file is `mixtures/local-demo.yaml` (`ormix train mixtures/local-demo.yaml`). Swap
the targets for `kanishk/EndlessTerminals` and `Eigent/SETA` (with OPENREWARD_API_KEY set) to train on the
catalog.
"""

from __future__ import annotations

import argparse
import os
from collections import Counter

from example_output import output_dir, where
from trl import GRPOConfig, GRPOTrainer

from ormix import MixtureSpec, OpenRewardSpec
from ormix.trl._callbacks import check_trainer_args
from ormix.workbench._tiny import resolve_model


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default=None, help="hub id or path (default: ormix's offline tiny model)")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--output-dir", default=None)
    parser.add_argument("--smoke", action="store_true", help="one step, short completions")
    opts = parser.parse_args()
    with output_dir(opts.output_dir, "mixture") as out:
        smoke = opts.smoke or os.environ.get("ORMIX_EXAMPLE_SHORT") == "1"
        steps = 1 if smoke else opts.steps

        mix = MixtureSpec(
            {
                "terminals": OpenRewardSpec("local:terminals", num_tasks=16),
                "seta": OpenRewardSpec("local:seta", num_tasks=16, where={"difficulty": ["Easy", "Medium"]}),
            },
            weights={"terminals": 0.6, "seta": 0.4},
            prompts_per_step=4,  # every step gets its exact quota: here 2-3 terminals + 1-2 seta prompts
            num_steps=steps,
            seed=0,
            name="example-mixture",
        )

        # What each step trains on, before any training: the dataset order carries the per-step plan.
        rows = mix.train_dataset["environment"]
        for step in range(steps):
            print(f"step {step + 1} plan: {dict(Counter(rows[step * 4 : (step + 1) * 4]))}")

        import torch

        cpu = not torch.cuda.is_available()
        args = GRPOConfig(
            output_dir=str(out),
            max_steps=steps,
            num_generations=2,
            per_device_train_batch_size=4,
            gradient_accumulation_steps=2,  # 4 prompts/step
            shuffle_dataset=False,  # keep the plan's order (ormix refuses to train otherwise)
            remove_unused_columns=False,  # rows need their `environment` and `task_index` columns
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
        problems = check_trainer_args(mix, args)  # also checked when training starts (mix.callbacks)
        assert not problems, problems

        trainer = GRPOTrainer(
            model=resolve_model(opts.model),
            args=args,
            train_dataset=mix.train_dataset,
            environment_factory=mix.environment_factory,  # {member: factory}: each prompt sees its own tools
            reward_funcs=mix.reward_funcs,  # one per member: rewards/<member>/mean
            callbacks=mix.callbacks,
        )
        trainer.train()

        for log in trainer.state.log_history:
            if "rewards/terminals/mean" in log:
                cells = [
                    f"{m}: reward {log.get(f'rewards/{m}/mean')}, coverage {log.get(f'ormix/{m}/coverage')}"
                    for m in mix.members
                ]
                print(f"step {log['step']}: " + "; ".join(cells))
        print(
            f"mixture done: {trainer.state.global_step} step(s); routing {mix.routing}; "
            f"output in {where(opts.output_dir, out)}"
        )


if __name__ == "__main__":
    main()
