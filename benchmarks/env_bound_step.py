"""How long does a GRPO step wait for its environments? TRL's own loop vs ormix's, side by side in one run.

An ORS server (`local:latency`, in a child process) whose session open waits 0.4 s and whose `work` tool waits
0.25 s, both asynchronously (the server holds many sessions at once, as a sandbox deployment does). GRPO
steps through TRL's GRPOTrainer on ormix's offline tiny model (CPU), with a scripted policy (`ScriptedPolicy`:
each turn calls `work`, the last one `submit`), so every variant makes the same calls:

- ``trl``: TRL's `trl.experimental.openreward.OpenRewardSpec` (TRL's sequential environment loop);
- ``ormix``: ormix's `OpenRewardSpec` with `ConcurrentGRPOTrainer`;
- ``mixture``: a two-member `MixtureSpec` (both members on the same server) with `ConcurrentGRPOTrainer`.

Two shapes: R = 8 rollouts with 1 tool round, and R = 32 rollouts with 3 tool rounds. The figure is the median
step time over the steps after the first (which includes loading). The ideal concurrent step waits one open and
one call per round instead of R of each; "fraction of ideal" is the measured ratio divided by what a step
would gain if its environment wait shrank R times and everything else stayed. Last lines:
``ratio env_bound_step R=8: X`` and ``ratio env_bound_step R=32: X`` (TRL / ormix).
"""

from __future__ import annotations

import os
import re
import statistics
import sys
import time
import warnings

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")

OPEN_S, TOOL_S = 0.4, 0.25
STEPS = int(os.environ.get("ORMIX_BENCH_STEPS", "4"))


def script_for(rounds: int):
    from ormix.demo.scripted import tool_call

    def script(ctx) -> str:
        word = re.search(r"word '(\w+)'", ctx.user)
        word = word.group(1) if word else "w0"
        if ctx.turn < rounds - 1:
            return tool_call("work", text=word)
        if ctx.turn == rounds - 1:
            return tool_call("submit", text=word)
        return "done"

    return script


def run(variant: str, url: str, rollouts: int, rounds: int, model: str) -> list[float]:
    from trl import GRPOConfig, GRPOTrainer

    from ormix import MixtureSpec, OpenRewardSpec
    from ormix.demo.scripted import ScriptedPolicy
    from ormix.integrations.trl.trainer import ConcurrentGRPOTrainer

    args = GRPOConfig(
        output_dir=f"/tmp/ormix-bench-env/{variant}-{rollouts}",
        per_device_train_batch_size=rollouts,
        num_generations=2,
        max_steps=STEPS,
        max_completion_length=64 * rounds,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        shuffle_dataset=False,
        remove_unused_columns=False,
        disable_tqdm=True,
        max_tool_calling_iterations=rounds,
    )
    tasks = rollouts // 2 * STEPS
    if variant == "trl":
        from trl.experimental.openreward import OpenRewardSpec as TRLSpec

        spec = TRLSpec(url, env_name="latency", num_tasks=tasks)
        trainer_class, inputs, closer = GRPOTrainer, spec, None
    elif variant == "ormix":
        spec = OpenRewardSpec(url, env_name="latency", num_tasks=tasks)
        trainer_class, inputs, closer = ConcurrentGRPOTrainer, spec, spec.close
    else:
        half = tasks // 2
        mix = MixtureSpec(
            {
                "a": OpenRewardSpec(url, env_name="latency", indices=list(range(half))),
                "b": OpenRewardSpec(url, env_name="latency", indices=list(range(half, 2 * half))),
            },
            prompts_per_step=rollouts // 2,
            num_steps=STEPS,
        )
        trainer_class, inputs, closer = ConcurrentGRPOTrainer, mix, mix.close
    callbacks = getattr(inputs, "callbacks", None) or []
    trainer = trainer_class(
        model=model,
        args=args,
        train_dataset=inputs.train_dataset,
        environment_factory=inputs.environment_factory,
        reward_funcs=inputs.reward_funcs,
        callbacks=callbacks,
    )
    ScriptedPolicy(script_for(rounds)).attach(trainer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    if closer is not None:
        closer()
    return [h["step_time"] for h in trainer.state.log_history if "step_time" in h]


def main() -> None:
    from ormix.demo.tiny import build_tiny_model
    from ormix.local import serve_in_process

    model = str(build_tiny_model())
    env = {"ORMIX_LATENCY_OPEN_S": str(OPEN_S), "ORMIX_LATENCY_TOOL_S": str(TOOL_S)}
    ratios = {}
    with serve_in_process(["local:latency"], env=env) as server:
        for rollouts, rounds in ((8, 1), (32, 3)):
            medians = {}
            for variant in ("trl", "ormix", "mixture"):
                t0 = time.perf_counter()
                times = run(variant, server.url, rollouts, rounds, model)
                medians[variant] = statistics.median(times[1:] or times)
                print(
                    f"R={rollouts} rounds={rounds} {variant:8s} median step {medians[variant]:6.2f} s "
                    f"(steps {', '.join(f'{t:.2f}' for t in times)}; {time.perf_counter() - t0:.0f} s)",
                    flush=True,
                )
            env_wait = rollouts * OPEN_S + rounds * rollouts * TOOL_S  # TRL's loop, one after another
            other = max(medians["trl"] - env_wait, 0.0)  # what the step spends besides its environments
            ideal = (other + env_wait) / (other + env_wait / rollouts)
            for variant in ("ormix", "mixture"):
                ratio = medians["trl"] / medians[variant]
                print(
                    f"  {variant}: {ratio:.2f}x TRL's step, {ratio / ideal:.0%} of the ideal {ideal:.2f}x "
                    f"(the step's other work, ~{other:.1f} s, does not shrink)"
                )
            ratios[rollouts] = min(medians["trl"] / medians["ormix"], medians["trl"] / medians["mixture"])
    for rollouts, ratio in ratios.items():
        print(f"ratio env_bound_step R={rollouts}: {ratio:.2f}")


if __name__ == "__main__":
    sys.exit(main())
