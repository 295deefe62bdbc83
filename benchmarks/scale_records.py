"""Benchmark: `ormix report` against the number of rollout records (10k → 1M), time and peak memory.

Each size is a synthetic run directory written with ormix's own record writer (`rollout_record` on real
`Outcome` / `CallRecord` values, appended by `TelemetryRun.write`, two ranks): 4 members, 100 rollouts a
step (groups of 4), 1-5 tool calls a rollout, an eval of 16 tasks x 2 samples per member every 50 steps
(eval records carry their prompt and completion text), and a last step that did not complete. `ormix report`
then runs in a fresh child process; its wall time and peak resident memory (``os.wait4``'s rusage of that
child alone) are printed with the load average beside, and the growth exponent is the least-squares slope of
log(time) over log(rollouts) (1.0 is linear). At 100k rollouts the reading of before (every record a dict in
memory: `write_report(run_dir, reference_scan(run_dir))` of tests/support/report_reference.py, the same
tables and plots) runs on the same directory
too: `ratio report in_memory/columnar`.

    python benchmarks/scale_records.py [--sizes 10000,100000,1000000] [--per-step 100]

``--write`` (``write_cost``; `benchmarks/scale.py --parts records-write`) measures the other side, the cost of
WRITING the records as a training rank does (`rollout_record`, `TelemetryRun.note`, `TelemetryRun.write`
for each step's 256 rollouts), 10k → 1M rollouts into one growing file: CPU and bytes a record, and the
exponent of the CPU over the rollouts written.

    python benchmarks/scale_records.py --write [--sizes 10000,100000,1000000]

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

TESTS = Path(__file__).resolve().parents[1] / "tests"
DEFAULT_SIZES = [10_000, 30_000, 100_000, 300_000, 1_000_000]
MEMBERS = ("alpha", "beta", "gamma", "delta")
TOOLS = ("bash", "read_file", "submit")
RANKS = 2
GROUP = 4
EVAL_EVERY = 50


def _episode(rng: random.Random, task: int, split: str) -> SimpleNamespace:
    from ormix.rollout._episode import CallRecord
    from ormix.rollout._outcome import Outcome

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
    from ormix._runs import RunDirectory
    from ormix.telemetry._records import TelemetryRun, rollout_record

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
from ormix.app._report import report_command
sys.exit(report_command(Path(sys.argv[1]), Console(file=io.StringIO(), width=200)))
"""
# The reading `ormix report` had before (every record a dict in memory), with the same tables and plots.
_CHILD_IN_MEMORY = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])  # tests/: the record-at-a-time reading is the tests' reference
from support.report_reference import reference_scan
from ormix.app._report import write_report
write_report(Path(sys.argv[1]), reference_scan(Path(sys.argv[1])))
"""


def measure(run_dir: Path, child_code: str = _CHILD) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak resident MB) of `ormix report` on ``run_dir`` in a fresh child
    process (the CPU figure is what a loaded machine does not change much)."""
    env = {**os.environ, "MPLBACKEND": "Agg"}
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-c", child_code, str(run_dir), str(TESTS)],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
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


WRITE_SIZES = [10_000, 100_000, 1_000_000]


def write_cost(
    sizes: list[int] | None = None, per_step: int = 256, say=print, budget_s: float = 150.0
) -> list[str]:
    """The cost of WRITING rollout records as a training rank does, against the rollouts written.

    Each step's ``per_step`` training rollouts (synthetic episodes of 1-5 tool calls, made before the clock)
    go through what `TelemetryObserver` does with a scored batch: `rollout_record` for each rollout, then
    `TelemetryRun.note` (failure causes) and `TelemetryRun.write` (one append of JSON lines to the rank's
    file). Timed: this process's CPU seconds (`time.process_time`) over those three calls, and the file's
    bytes. One run directory grows from 0 to the largest size; the figure at each size is the CPU of the
    rollouts written up to it, so the exponent says whether a record costs more as the file grows (1.0:
    constant per record). A size is skipped when ``budget_s`` wall seconds are spent (then the largest size
    reached is the one printed). Returns (and says) the printed lines."""
    from ormix.telemetry._records import TelemetryRun, rollout_record

    sizes = sorted(sizes or WRITE_SIZES)
    lines: list[str] = []

    def emit(text: str) -> None:
        lines.append(text)
        say(text)

    rng = random.Random(0)
    reached: list[int] = []
    cpus: list[float] = []
    record_bytes: list[float] = []
    with tempfile.TemporaryDirectory(prefix="ormix-scale-write-") as tmp:
        run = TelemetryRun(Path(tmp) / "run", rank=0, num_generations=GROUP)
        assert run.records_path is not None
        start = time.perf_counter()
        written, cpu, step = 0, 0.0, 0
        for size in sizes:
            while written < size:
                step += 1
                episodes = [
                    _episode(rng, task=(step * per_step + i) // GROUP % 997, split="train")
                    for i in range(per_step)
                ]
                t0 = time.process_time()
                # What TelemetryObserver.__call__ does with a scored batch of one member's rollouts.
                records = [
                    rollout_record(
                        e,
                        member=MEMBERS[(i // GROUP) % len(MEMBERS)],
                        training_reward=e.outcome.reward,
                        step=step,
                        rank=0,
                        mode="train",
                        group=(i // GROUP) * GROUP,
                    )
                    for i, e in enumerate(episodes)
                ]
                run.note(MEMBERS[0], records)
                run.write(records)
                cpu += time.process_time() - t0
                written += len(records)
            size_bytes = run.records_path.stat().st_size
            before_n, before_cpu = (reached[-1], cpus[-1]) if reached else (0, 0.0)
            reached.append(written)
            cpus.append(cpu)
            record_bytes.append(size_bytes / written)
            emit(
                f"  records written rollouts={written:,}: {cpu:.2f} s CPU in all, "
                f"{1e6 * cpu / written:.1f} us/record ({1e6 * (cpu - before_cpu) / (written - before_n):.1f} "
                f"over the last {written - before_n:,}), {size_bytes / written:.0f} bytes/record "
                f"({size_bytes / 1e6:.0f} MB); {time.perf_counter() - start:.0f} s wall so far  [{_load()}]"
            )
            if time.perf_counter() - start > budget_s and size != sizes[-1]:
                emit(f"  records written: stopped at {written:,} rollouts (the {budget_s:.0f} s budget)")
                break
    if len(reached) > 1:
        emit(
            f"scale records written cpu vs rollouts: exponent {exponent(reached, cpus):.2f} (floor 1) over "
            f"{reached[0]:,}→{reached[-1]:,}; at {reached[-1]:,}: {cpus[-1]:.1f} s CPU, "
            f"{1e6 * cpus[-1] / reached[-1]:.1f} us and {record_bytes[-1]:.0f} bytes a record "
            f"(bytes/record exponent {exponent(reached, record_bytes):.2f})  [{_load()}]"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)))
    parser.add_argument("--per-step", type=int, default=100)
    parser.add_argument(
        "--write",
        action="store_true",
        help="the writing cost instead (sizes default 10k,100k,1M; 256 a step)",
    )
    args = parser.parse_args()
    if args.write:
        given = args.sizes != ",".join(map(str, DEFAULT_SIZES))
        write_cost([int(s) for s in args.sizes.split(",")] if given else None)
        return
    run([int(s) for s in args.sizes.split(",")], per_step=args.per_step)


if __name__ == "__main__":
    main()
