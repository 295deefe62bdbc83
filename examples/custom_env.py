"""Train on your own environment: an `openreward.environments.Environment` subclass, as `module:Class`.

    python examples/custom_env.py            # 4 GRPO steps on examples/my_env.py:Arithmetic, tiny model
    python examples/custom_env.py --smoke    # 1 step (also: ORMIX_EXAMPLE_SHORT=1)

`OpenRewardSpec("my_env:Arithmetic")` imports the class (the module must be importable: here it sits next to
this script) and serves it on loopback in a child process: "develop an env and train on it" is one command,
with no server to start. The same target works in a mixture file (`target: "my_env:Arithmetic"`) and with
`ormix serve my_env:Arithmetic --port 8080` to serve it for other trainers.
"""

from __future__ import annotations

import argparse
import os

from example_output import output_dir, where

from ormix import MixtureSpec, OpenRewardSpec
from ormix.app._train import train


def arithmetic(steps: int) -> MixtureSpec:
    """The one-member mixture this example trains: `my_env.py`'s `Arithmetic`, served on loopback."""
    spec = OpenRewardSpec("my_env:Arithmetic", num_tasks=8)
    return MixtureSpec({"arithmetic": spec}, prompts_per_step=2, num_steps=steps, name="example-custom-env")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default=None, help="hub id or path (default: ormix's offline tiny model)")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--output-dir", default=None)
    parser.add_argument("--smoke", action="store_true", help="one step, short completions")
    opts = parser.parse_args()
    with output_dir(opts.output_dir, "custom") as out:
        smoke = opts.smoke or os.environ.get("ORMIX_EXAMPLE_SHORT") == "1"
        steps = 1 if smoke else opts.steps

        mix = arithmetic(steps)
        spec = mix.spec("arithmetic")
        print(f"tools the model sees: {[t.name for t in spec.tool_specs]}")
        print(f"first task: { {k: v for k, v in spec.train_dataset[0].items() if k != 'prompt'} }")
        result = train(
            mix,
            model=opts.model,
            max_steps=steps,
            output_dir=str(out),
            settings={
                "num_generations": 2,
                "max_completion_length": 48 if smoke else 128,
                "max_tool_calling_iterations": 3,
                "learning_rate": 1e-5,
            },
        )
        row = result.summary["arithmetic"]
        print(
            f"custom_env done: arithmetic reward {row['reward']}, coverage {row['coverage']}; "
            f"run directory {where(opts.output_dir, result.run_dir)}"
        )


if __name__ == "__main__":
    main()
