"""Benchmark: `ormix report` against the number of rollout records (10k → 1M), time and peak memory.

Each size is a synthetic run directory written with ormix's own record writer (`rollout_record` on real
`Outcome` / `CallRecord` values, appended by `TelemetryRun.write`, two ranks): 4 members, 100 rollouts a
step (groups of 4), 1-5 tool calls a rollout, an eval of 16 tasks x 2 samples per member every 50 steps
(eval records carry their prompt and completion text), and a last step that did not complete. `ormix report`
then runs in a fresh child process; its wall time and peak resident memory (``os.wait4``'s rusage of that
child alone) are printed with the load average beside, and the growth exponent is the least-squares slope of
log(time) over log(rollouts) (1.0 is linear). At 100k rollouts the reading of before (every record a dict in
memory: `write_report(run_dir, read_records(run_dir))`, the same tables and plots) runs on the same directory
too: `ratio report in_memory/columnar`.

    python benchmarks/scale_records.py [--sizes 10000,100000,1000000] [--per-step 100]

`benchmarks/scale.py` imports `run` and prints its lines.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

DEFAULT_SIZES = [10_000, 30_000, 100_000, 300_000, 1_000_000]
MEMBERS = ("alpha", "beta", "gamma", "delta")
TOOLS = ("bash", "read_file", "submit")
RANKS = 2
GROUP = 4
EVAL_EVERY = 50


def _episode(rng: random.Random, task: int, split: str) -> SimpleNamespace:
    from ormix.rollout.episode import CallRecord
    from ormix.rollout.outcome import Outcome

    calls = []
    for i in range(rng.randint(1, 5)):
        tool = TOOLS[-1] if i and rng.random() < 0.3 else TOOLS[rng.randrange(2)]
        error = rng.choice(("tool_failed", "rejected:schema", "wrong_env")) if rng.random() < 0.05 else None
        calls.append(
            CallRecord(
                tool=tool,
                latency_ms=rng.lognormvariate(3.0, 1.0),
                error=error,
                reward=None,
                output_chars=rng.randint(10, 4000),
                detail="boom: the tool raised" if error else None,
            )
        )
    roll = rng.random()
    if roll < 0.03:
        outcome = Outcome("error", None, rng.choice(("transport", "session_open", "deadline")), "it failed")
    elif roll < 0.15:
        outcome = Outcome("unscored", None)
    else:
        outcome = Outcome("scored", float(rng.random() < 0.4 + 0.2 * (task % 3)))
    return SimpleNamespace(
        outcome=outcome,
        calls=calls,
        rewards=[outcome.reward] if outcome.reward is not None else [],
        finished=outcome.kind == "scored",
        open_ms=rng.lognormvariate(4.0, 0.5),
        starting_ms=0.0,
        task_index=task,
        split=split,
    )


def generate(run_dir: Path, rollouts: int, per_step: int = 100, seed: int = 0) -> int:
    """Write ``rollouts`` training records (and evals) into ``run_dir``; returns the records written."""
    from ormix.runs import RunDirectory
    from ormix.telemetry.records import TelemetryRun, rollout_record

    rng = random.Random(seed)
    runs = [TelemetryRun(run_dir, rank=k, num_generations=GROUP) for k in range(RANKS)]
    steps = max(1, rollouts // per_step)
    local = per_step // RANKS
    written = 0
    for step in range(1, steps + 1):
        for rank, run in enumerate(runs):
            records = []
            for i in range(local):
                member = MEMBERS[((rank * local + i) // GROUP) % len(MEMBERS)]
                episode = _episode(
                    rng, task=(step * per_step + rank * local + i) // GROUP % 997, split="train"
                )
                group = ((rank * local + i) // GROUP) * GROUP
                reward = episode.outcome.reward
                records.append(
                    rollout_record(
                        episode,
                        member=member,
                        training_reward=reward,
                        step=step,
                        rank=rank,
                        mode="train",
                        group=group,
                    )
                )
            if step % EVAL_EVERY == 0:
                for member in MEMBERS[rank::RANKS]:
                    for task in range(16):
                        for _sample in range(2):
                            episode = _episode(rng, task=task, split="test")
                            record = rollout_record(
                                episode,
                                member=member,
                                training_reward=None,
                                step=step - 1,
                                rank=rank,
                                mode="eval",
                                group=task * 2,
                            )
                            record["prompt"] = [{"role": "user", "content": f"task {task}: " + "x" * 400}]
                            record["completion"] = [{"role": "assistant", "content": "y" * 600}]
                            records.append(record)
            run.write(records)
            written += len(records)
    RunDirectory(run_dir).write_progress(steps - 1)  # the last step did not complete
    return written


_CHILD = """
import io, sys
from pathlib import Path
from rich.console import Console
from ormix.diagnostics.report import report_command
sys.exit(report_command(Path(sys.argv[1]), Console(file=io.StringIO(), width=200)))
"""
# The reading `ormix report` had before (every record a dict in memory), with the same tables and plots.
_CHILD_IN_MEMORY = """
import sys
from pathlib import Path
from ormix.diagnostics.report import write_report
from ormix.telemetry.records import read_records
write_report(Path(sys.argv[1]), read_records(Path(sys.argv[1])))
"""


def measure(run_dir: Path, child_code: str = _CHILD) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak resident MB) of `ormix report` on ``run_dir`` in a fresh child
    process (the CPU figure is what a loaded machine does not change much)."""
    env = {**os.environ, "MPLBACKEND": "Agg"}
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-c", child_code, str(run_dir)], stdout=subprocess.DEVNULL, stderr=err, env=env
        )
        # wait4 of this one child: its own peak, not the largest of all children so far (RUSAGE_CHILDREN).
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"ormix report failed ({child.returncode}): {err.read().decode()[-2000:]}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def _load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def exponent(sizes: list[int], values: list[float]) -> float:
    """Least-squares slope of log(value) over log(size).

    Example:
        >>> round(exponent([10, 100, 1000], [1.0, 10.0, 100.0]), 3)
        1.0
    """
    xs = [math.log(s) for s in sizes]
    ys = [math.log(v) for v in values]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def run(
    sizes: list[int] | None = None, per_step: int = 100, say=print, side_by_side: int | None = 100_000
) -> list[str]:
    """Generate, report and measure each size; returns (and says) the printed lines. At
    ``side_by_side`` rollouts (when it is one of the sizes) the reading of before (records in memory) runs
    on the same directory too, and their ratio is printed."""
    sizes = sorted(sizes or DEFAULT_SIZES)
    lines: list[str] = []

    def emit(line: str) -> None:
        lines.append(line)
        say(line)

    times, cpus, peaks = [], [], []
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="ormix-scale-records-") as tmp:
            run_dir = Path(tmp) / "run"
            t0 = time.perf_counter()
            written = generate(run_dir, size, per_step=per_step)
            made = time.perf_counter() - t0
            mb = sum(p.stat().st_size for p in (run_dir / "rollouts").glob("*.jsonl")) / 1e6
            seconds, cpu, peak = measure(run_dir)
            if size == side_by_side:
                old_s, old_cpu, old_peak = measure(run_dir, _CHILD_IN_MEMORY)
                emit(
                    f"ratio report in_memory/columnar rollouts={size}: time {old_s / seconds:.2f} "
                    f"({old_s:.1f} s vs {seconds:.1f} s; CPU {old_cpu:.1f} vs {cpu:.1f} s), peak RSS "
                    f"{old_peak / peak:.2f} ({old_peak:.0f} vs {peak:.0f} MB)  [{_load()}]"
                )
        times.append(seconds)
        cpus.append(cpu)
        peaks.append(peak)
        emit(
            f"records rollouts={size} ({written} records, {mb:.0f} MB, {size // per_step} steps; written in "
            f"{made:.1f} s): report {seconds:.1f} s ({cpu:.1f} s CPU), peak RSS {peak:.0f} MB  [{_load()}]"
        )
    if len(sizes) > 1:
        # The smallest sizes are mostly the fixed cost (imports, plots): the two largest show the growth.
        emit(
            f"exponent report_time vs rollouts ({sizes[0]}-{sizes[-1]}): {exponent(sizes, times):.2f} "
            f"(CPU {exponent(sizes, cpus):.2f}; {sizes[-2]}-{sizes[-1]}: "
            f"{exponent(sizes[-2:], times[-2:]):.2f}, "
            f"CPU {exponent(sizes[-2:], cpus[-2:]):.2f}); peak_rss: {exponent(sizes, peaks):.2f}  [{_load()}]"
        )
    emit(
        f"records largest rollouts={sizes[-1]}: report {times[-1]:.1f} s ({cpus[-1]:.1f} s CPU), peak RSS "
        f"{peaks[-1]:.0f} MB  [{_load()}]"
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)))
    parser.add_argument("--per-step", type=int, default=100)
    args = parser.parse_args()
    run([int(s) for s in args.sizes.split(",")], per_step=args.per_step)


if __name__ == "__main__":
    main()
