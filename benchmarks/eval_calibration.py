"""Do ormix's 95% eval intervals cover the truth 95% of the time? Simulated members, seconds to run.

A simulated member has a mean success rate drawn, for each repetition, uniformly within its profile's band
(``hard`` 0.05–0.3, ``mid`` 0.3–0.7, ``easy`` 0.7–0.95); its tasks' success probabilities are drawn from a
Beta with that mean and concentration 2 (tasks differ a lot: some nearly always solved, some nearly never).
An eval draws T tasks (16, 32, 64) and n samples of each (1 or 4; pass@1, and pass@4 with 4 samples).

- ``pass@k``: how often `ormix.evaluation.stats.mean_interval` over the tasks' pass@k covers the truth,
  the member's expected pass@k over its task distribution, E[1 − (1 − p)^k] (exact for a Beta).
- ``paired Δ=0``: a second eval of the same member (another seed, the same tasks): how often
  `paired_interval` covers 0.
- ``paired Δ+``: a better member on the same tasks, every task's failure probability multiplied by 0.8
  (p' = 1 − 0.8 (1 − p)): how often the paired interval covers the known difference
  (1 − 0.8^k) E[(1 − p)^k].

A paired figure is judged only when at most 5% of its repetitions have a task whose value differs between
the two evals: with no differing task the data cannot say how large the difference is, an interval that is
not a point covers it, and the coverage of such a setting (nearly solved members at pass@4, very hard ones
at 16 tasks) exceeds any band by construction. Those figures are printed with the share, marked
``(not judged)``.

Every figure is from ``--reps`` repetitions (default 2000: a figure's Monte Carlo error is about ±0.5%).
The intervals are the library's own functions, called once per repetition. Last line:
``calibration: coverage X% (target 93–97%) over N settings`` (X the mean of the judged figures, N how
many; the line before gives the range of the member and of the paired figures); the exit status is 1 when
a judged figure, as printed to 0.1%, falls outside 93–97%.

    python benchmarks/eval_calibration.py [--reps 2000] [--seed 0] [--tasks 16 ...] [--samples 1 ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from ormix.evaluation.stats import mean_interval, paired_interval, pass_at_k

PROFILES = {"hard": (0.05, 0.3), "mid": (0.3, 0.7), "easy": (0.7, 0.95)}
CONCENTRATION = 2.0
KEEP_FAILURES = 0.8  # the better member: each task's failure probability times this
LOW, HIGH = 0.93, 0.97
MAX_NO_DIFFERENCE = 0.05


@dataclass
class Figure:
    name: str
    covered: int = 0
    reps: int = 0
    no_difference: int = 0  # paired figures: repetitions in which no task differs
    paired: bool = False

    @property
    def coverage(self) -> float:
        return self.covered / self.reps

    @property
    def judged(self) -> bool:
        return not self.paired or self.no_difference / self.reps <= MAX_NO_DIFFERENCE

    @property
    def ok(self) -> bool:
        # As printed (to 0.1%): the Monte Carlo error (±0.5%) dwarfs the rounding.
        return 100 * LOW <= float(f"{100 * self.coverage:.1f}") <= 100 * HIGH


@dataclass
class Setting:
    tasks: int
    samples: int
    profile: str
    figures: dict[str, Figure] = field(default_factory=dict)

    def figure(self, name: str, paired: bool = False) -> Figure:
        return self.figures.setdefault(name, Figure(name, paired=paired))


def _truth_fail(a: float, b: float, k: int) -> float:
    # E[(1 - p)^k] for p ~ Beta(a, b): prod_{j<k} (b + j) / (a + b + j)
    return float(np.prod([(b + j) / (a + b + j) for j in range(k)]))


def calibrate(tasks: int, samples: int, profile: str, reps: int, seed: int = 0) -> Setting:
    """Coverage of every figure of one setting (the module docstring says which)."""
    rng = np.random.default_rng([seed, tasks, samples, list(PROFILES).index(profile)])
    ks = [1] if samples == 1 else [1, samples]
    # The library's estimator, tabulated once per k for every success count.
    tables = {k: np.array([pass_at_k(samples, c, k) for c in range(samples + 1)]) for k in ks}
    setting = Setting(tasks, samples, profile)
    low, high = PROFILES[profile]
    for _ in range(reps):
        mean = rng.uniform(low, high)
        a, b = CONCENTRATION * mean, CONCENTRATION * (1.0 - mean)
        p = rng.beta(a, b, size=tasks)
        counts = rng.binomial(samples, p)
        again = rng.binomial(samples, p)
        better = rng.binomial(samples, 1.0 - KEEP_FAILURES * (1.0 - p))
        for k in ks:
            fail = _truth_fail(a, b, k)
            x = tables[k][counts]
            f = setting.figure(f"pass@{k}")
            f.reps += 1
            f.covered += mean_interval(x).covers(1.0 - fail)
            for label, other, truth in (
                ("paired \u0394=0", again, 0.0),
                ("paired \u0394+", better, (1.0 - KEEP_FAILURES**k) * fail),
            ):
                y = tables[k][other]
                f = setting.figure(f"pass@{k} {label}", paired=True)
                f.reps += 1
                f.no_difference += bool(np.all(x == y))
                iv = paired_interval(x, y)
                f.covered += iv.low is not None and iv.low - 1e-12 <= truth <= iv.high + 1e-12  # type: ignore[operator]
    return setting


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tasks", type=int, nargs="+", default=[16, 32, 64])
    ap.add_argument("--samples", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--profile", nargs="+", default=list(PROFILES), choices=list(PROFILES))
    args = ap.parse_args()
    judged: list[Figure] = []
    for tasks in args.tasks:
        for samples in args.samples:
            for profile in args.profile:
                t0 = time.perf_counter()
                setting = calibrate(tasks, samples, profile, args.reps, args.seed)
                cells = []
                for f in setting.figures.values():
                    text = f"{f.name} {f.coverage:.1%}"
                    if not f.judged:
                        text += f" (not judged: no task differs in {f.no_difference / f.reps:.0%})"
                    elif not f.ok:
                        text += " OUTSIDE"
                    cells.append(text)
                    if f.judged:
                        judged.append(f)
                print(
                    f"tasks={tasks:3d} samples={samples} {profile:4s}  " + ", ".join(cells) + f"  "
                    f"({time.perf_counter() - t0:.1f} s; load average {os.getloadavg()[0]:.1f} on "
                    f"{os.cpu_count()} CPUs)",
                    flush=True,
                )
    outside = [f for f in judged if not f.ok]
    mean = float(np.mean([f.coverage for f in judged])) if judged else float("nan")
    for label, group in (
        ("member intervals", [f for f in judged if not f.paired]),
        ("paired intervals", [f for f in judged if f.paired]),
    ):
        if group:
            values = [f.coverage for f in group]
            bad = sum(1 for f in group if not f.ok)
            span = f"{min(values):.1%}–{max(values):.1%}"
            print(f"{label}: {len(group)} figures judged, {span}, {bad} outside 93–97%")
    print(f"calibration: coverage {mean:.1%} (target 93–97%) over {len(judged)} settings")
    sys.exit(1 if outside or not judged else 0)


if __name__ == "__main__":
    main()
