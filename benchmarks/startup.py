"""Benchmark: reaching the servers of the demo mixture's three local members, all at once
(`MixtureSpec.connect`, what `ormix train` does first) vs one member after another, side by side.

Each local member is served by a child process that spends seconds importing the SDK and its environment;
started together they overlap on a machine with cores to spare. Each measurement runs in a fresh
interpreter (no server left from an earlier one). Medians over repetitions, with the load average beside
them; the last line is `ratio startup: X` (one-by-one time / all-at-once time).

    python benchmarks/startup.py [--reps 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_MEASURE = """
import sys, time
from ormix.mixture import load_mixture
from ormix.ors import run_sync

mix = load_mixture(sys.argv[1])
t0 = time.perf_counter()
if sys.argv[2] == "together":
    mix.connect()
else:
    for member in mix.members:
        run_sync(mix.spec(member).connection.client)
print(time.perf_counter() - t0)
"""


def measure(how: str) -> float:
    env = {**os.environ, "ORMIX_LOCAL_SERVE": "process", "OPENREWARD_DISABLE_UPDATE_CHECK": "1"}
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(ROOT / "mixtures" / "local-demo.yaml"), how],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"one by one": [], "together": []}
    for _ in range(args.reps):
        for how in times:  # interleaved, so a burst of load hits both
            times[how].append(measure("together" if how == "together" else "sequential"))
    load = os.getloadavg()[0]
    for how, ts in times.items():
        each = ", ".join(f"{t:.2f}" for t in ts)
        print(f"{how:>10}: median {statistics.median(ts):.2f} s over {len(ts)} ({each})")
    print(f"cores {os.cpu_count()}, load average {load:.2f}")
    ratio = statistics.median(times["one by one"]) / statistics.median(times["together"])
    print(f"ratio startup: {ratio:.2f}")


if __name__ == "__main__":
    main()
