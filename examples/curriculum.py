"""A curriculum: mostly terminals early, more SETA later, as a step schedule, trained with `ormix.app._train`.

    python examples/curriculum.py            # 8 GRPO steps, tiny model, local environments
    python examples/curriculum.py --smoke    # 2 steps (also: ORMIX_EXAMPLE_SHORT=1)

The schedule's phases are by training step; `interpolate: true` slides linearly from one phase's weights to
the next. With `prompts_per_step` known, every step gets its exact quota, so the printed plan below is what
each optimizer step trains on. `mixtures/seta-endless-curriculum.yaml` is the same idea on the catalog.
"""

from __future__ import annotations

import argparse
import os
from collections import Counter

from example_output import output_dir, where

from ormix import MixtureSpec, OpenRewardSpec
from ormix.app._train import train


def curriculum(steps: int, per_step: int = 4) -> MixtureSpec:
    """The mixture this example trains: 0.9/0.1 sliding to 0.25/0.75 by the middle step, exact quotas."""
    return MixtureSpec(
        {
            "terminals": OpenRewardSpec("local:terminals", num_tasks=16),
            "seta": OpenRewardSpec("local:seta", num_tasks=16),
        },
        schedule=[
            # Steps 1 to steps/2 (until_step is exclusive; steps count from 1).
            {"until_step": steps // 2 + 1, "weights": {"terminals": 0.9, "seta": 0.1}, "interpolate": True},
            {"until_step": None, "weights": {"terminals": 0.25, "seta": 0.75}},  # open-ended last phase
        ],
        prompts_per_step=per_step,
        num_steps=steps,
        seed=0,
        name="example-curriculum",
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default=None, help="hub id or path (default: ormix's offline tiny model)")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--output-dir", default=None)
    parser.add_argument("--smoke", action="store_true", help="two steps, short completions")
    opts = parser.parse_args()
    with output_dir(opts.output_dir, "curriculum") as out:
        smoke = opts.smoke or os.environ.get("ORMIX_EXAMPLE_SHORT") == "1"
        steps = 2 if smoke else opts.steps
        per_step = 4

        mix = curriculum(steps, per_step)

        envs = mix.train_dataset["environment"]
        for step in range(steps):
            counts = Counter(envs[step * per_step : (step + 1) * per_step])
            print(f"plan step {step + 1}: terminals {counts['terminals']}, seta {counts['seta']}")

        # `train` is what `ormix train FILE` runs: GRPOConfig consistent with the mixture (order kept, batch
        # geometry from prompts_per_step), manifest, per-member progress lines, report, run directory.
        result = train(
            mix,
            model=opts.model,
            max_steps=steps,
            output_dir=str(out),
            settings={
                "num_generations": 2,
                "max_completion_length": 48 if smoke else 128,
                "max_tool_calling_iterations": 4,
                "learning_rate": 1e-5,
            },
        )
        where_to = where(opts.output_dir, result.run_dir)
        print(f"curriculum done: {len(envs)} rows over {steps} steps; run directory {where_to}")


if __name__ == "__main__":
    main()
