"""Leave-one-out ablation: train the full mixture and each mixture without one member, compare in one table.

    python examples/ablation.py             # 4 GRPO steps per run, tiny model, local environments
    python examples/ablation.py --smoke     # 1 step per run (also: ORMIX_EXAMPLE_SHORT=1)

`mix.without(name)` (and `mix.only(...)`, `mix.reweight(...)`) derive new mixtures that keep everything else:
members, task selection, seed, prompts per step (a member left out stays as an eval-only member, so an
evaluation can measure what not training on it did). The servers and fetched task lists are shared, so the
variants cost only their training. `ormix ablate FILE --leave-one-out` writes the same variants as files, and
`ormix ablate FILE --leave-one-out --run` trains them and evaluates each on every member's eval tasks.
"""

from __future__ import annotations

import argparse
import os

from example_output import output_dir, where
from rich.console import Console
from rich.table import Table

from ormix import MixtureSpec, OpenRewardSpec
from ormix.app._train import train


def variants(steps: int) -> dict[str, MixtureSpec]:
    """The runs this example compares: the full mixture first, then one without each member."""
    base = MixtureSpec(
        {
            "terminals": OpenRewardSpec("local:terminals", num_tasks=8),
            "seta": OpenRewardSpec("local:seta", num_tasks=8, unscored_reward=0.0),
        },
        weights={"terminals": 0.5, "seta": 0.5},
        prompts_per_step=2,
        num_steps=steps,
        seed=0,
        name="example-ablation",
    )
    return {"full": base, **{f"without-{m}": base.without(m) for m in base.members}}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default=None, help="hub id or path (default: ormix's offline tiny model)")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--output-dir", default=None)
    parser.add_argument("--smoke", action="store_true", help="one step per run, short completions")
    opts = parser.parse_args()
    with output_dir(opts.output_dir, "ablation") as out:
        smoke = opts.smoke or os.environ.get("ORMIX_EXAMPLE_SHORT") == "1"
        steps = 1 if smoke else opts.steps
        root = out

        runs = variants(steps)
        base = runs["full"]

        console = Console()
        results = {}
        for label, mix in runs.items():
            console.rule(f"{label}: {', '.join(mix.members)}")
            results[label] = train(
                mix,
                model=opts.model,
                max_steps=steps,
                output_dir=root / label,
                console=console,
                report=False,
                settings={
                    "num_generations": 2,
                    "max_completion_length": 48 if smoke else 128,
                    "max_tool_calling_iterations": 4,
                    "learning_rate": 1e-5,
                },
            )

        table = Table(title=f"leave-one-out ({steps} step(s) per run): mean reward / coverage per member")
        table.add_column("run")
        for m in base.members:
            table.add_column(m, justify="right")
        table.add_column("run directory")
        for label, result in results.items():
            cells = []
            for m in base.members:
                row = result.summary.get(m)
                if row is None or m not in runs[label].train_members:
                    cells.append("(left out)")
                    continue
                if row["coverage"] == 0:
                    cells.append("never scored / 0.00")  # not a reward of 0: no rollout got one
                    continue
                reward = "-" if row["reward"] is None else f"{row['reward']:.2f}"
                coverage = "-" if row["coverage"] is None else f"{row['coverage']:.2f}"
                cells.append(f"{reward} / {coverage}")
            table.add_row(label, *cells, str(result.run_dir))
        console.print(table, soft_wrap=True)
        print(f"ablation done: {len(results)} runs under {where(opts.output_dir, root)}")


if __name__ == "__main__":
    main()
