"""Eval throughput: ormix's concurrent eval vs TRL's sequential environment loop over the same tasks.

`ormix eval`'s path (`ormix.app._eval.run_eval`) on 32 tasks of `local:latency` × 4 samples (k=4):
128 rollouts in one evaluate batch. The server (a child process, as `local:` targets are served) waits 0.4 s
to open a session and 0.25 s per `work` call, asynchronously, as a sandbox deployment does. Every rollout
plays the task's reference solution (``--policy reference``: `work`, then `submit`, through TRL's own tool
loop with a `ScriptedPolicy` replacing generation), so both variants make exactly the same calls:

- ``concurrent``: ormix's `ConcurrentGRPOTrainer` (a batch's sessions open together, each tool round runs
  together);
- ``sequential``: the same trainer with ``concurrent=False``, i.e. TRL's own loop (resets and tool calls one
  rollout after another) — the same episodes, one at a time.

The time is the eval's own (`EvalResult.eval_s`: the evaluate calls, generation, environments and scoring),
not loading the model or starting the server. Both evals must score 1.0 on every task (the same work was
done). Last line: ``ratio eval_throughput: X`` (concurrent rollouts/s over sequential). Run:
``nice python benchmarks/eval_throughput.py`` (``ORMIX_BENCH_TASKS``, default 32; ``ORMIX_BENCH_K``, 4).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

TASKS = int(os.environ.get("ORMIX_BENCH_TASKS", "32"))
K = int(os.environ.get("ORMIX_BENCH_K", "4"))


def mixture_file(directory: Path) -> Path:
    path = directory / "latency.yaml"
    path.write_text(
        "name: eval-throughput\n"
        "members:\n"
        f"  latency: {{target: 'local:latency', num_tasks: {TASKS}, eval: {{num_tasks: {TASKS}}}}}\n"
        "train: {max_completion_length: 128, use_cpu: true, report_to: none}\n"
    )
    return path


def run(path: Path, out: Path, concurrent: bool) -> tuple[float, int, float]:
    """(eval seconds, rollouts, pass@1) of one eval."""
    from ormix.app._eval import run_eval

    result = run_eval(
        path,
        policy="reference",
        k=(1, K),
        out_dir=out,
        tasks_per_chunk=TASKS,
        concurrent=concurrent,
        overwrite=True,
    )
    return result.eval_s, result.rollouts, result.summary["members"]["latency"]["pass@1"]["value"]


def main() -> None:
    load_before = os.getloadavg()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ormix-bench-eval-") as tmp:
        path = mixture_file(Path(tmp))
        results = {}
        for name, concurrent in (("concurrent", True), ("sequential", False)):
            seconds, rollouts, solved = run(path, Path(tmp) / name, concurrent)
            assert rollouts == TASKS * K, (name, rollouts)
            assert solved == 1.0, (name, solved)  # every reference solution scored: the same work was done
            results[name] = rollouts / seconds
            print(
                f"{name:>10}: {rollouts} rollouts ({TASKS} tasks × k={K}) in {seconds:.1f}s = "
                f"{results[name]:.2f} rollouts/s"
            )
    load_after = os.getloadavg()
    print(
        f"load average (1, 5, 15 min) before {', '.join(f'{x:.2f}' for x in load_before)}; after "
        f"{', '.join(f'{x:.2f}' for x in load_after)}; {os.cpu_count()} CPUs; "
        f"{time.monotonic() - started:.0f}s in all"
    )
    print(f"ratio eval_throughput: {results['concurrent'] / results['sequential']:.2f}")


if __name__ == "__main__":
    main()
