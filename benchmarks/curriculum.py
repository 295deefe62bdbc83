"""Does adaptive mixing reach a target faster than the best static weights? Simulated learners, seconds to run.

No LLM: each member is a simulated skill level, and each planned row is one GRPO group of rollouts whose
successes are drawn from that skill. The rows come from ormix's own planners — `plan_rows` for static weights
and schedules, `AdaptivePlanner` (the code the trainer uses) for adaptive mixing — fed with the pooled groups
of every step, exactly as the trainer's callback feeds it (with its lag of 2 steps).

Documented dynamics (five members, 8 tasks each, task difficulties spread over [0.1, 0.9]):

- ``fast``: learns quickly; ``slow``: learns at a quarter of that speed;
- ``prereq``: learnable only once ``fast`` is practised (skill >= 0.5): before that its groups all fail;
- ``saturating``: starts nearly solved and saturates (its groups soon all succeed);
- ``never``: never learnable (every group fails);
- rewards are noisy: each rollout's outcome flips with probability 0.05.

A rollout of a task with difficulty d succeeds with probability sigmoid(10·(skill − d)). Skill grows only from
informative groups (GRPO learns nothing from a group whose rewards are all equal): +rate per informative
group, capped at 1. The target is a mean success of 0.75 over the four learnable members (``never`` can't be
learned). The best static weights come from a grid search over the simplex (step 0.1), scored on the same
seeds. Every variant runs on several seeds; medians are reported, and where adaptive loses is printed too.

Last line: ``ratio steps_to_target best_static/adaptive: X`` (X for the best adaptive signal).
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
import sys
import time
from collections.abc import Callable, Mapping

from ormix.mixture.adaptive import AdaptivePlanner, AdaptiveSettings
from ormix.mixture.sampling import Phase, plan_rows

MEMBERS = ("fast", "slow", "prereq", "saturating", "never")
RATES = {"fast": 0.012, "slow": 0.003, "prereq": 0.012, "saturating": 0.01, "never": 0.0}
START = {"fast": 0.0, "slow": 0.0, "prereq": 0.0, "saturating": 0.75, "never": -5.0}
TASKS = 8
DIFFICULTY = [0.1 + 0.8 * j / (TASKS - 1) for j in range(TASKS)]
GROUP = 4  # rollouts per group (num_generations)
K = 8  # prompts per step
NOISE = 0.05
TARGET = 0.75
MAX_STEPS = 600
SEEDS = tuple(range(7))


def success_probability(skill: float, difficulty: float) -> float:
    return 1.0 / (1.0 + math.exp(-10.0 * (skill - difficulty)))


class Learner:
    """The simulated policy: one skill per member (see the module docstring)."""

    def __init__(self, seed: int) -> None:
        self.skill = dict(START)
        self.rng = random.Random(seed)

    def learnable(self, member: str) -> bool:
        return member != "prereq" or self.skill["fast"] >= 0.5

    def group(self, member: str, task: int) -> list[float]:
        p = success_probability(self.skill[member], DIFFICULTY[task]) if self.learnable(member) else 0.0
        out = []
        for _ in range(GROUP):
            ok = self.rng.random() < p
            if self.rng.random() < NOISE:
                ok = not ok
            out.append(1.0 if ok else 0.0)
        return out

    def learn(self, member: str, rewards: list[float]) -> None:
        if self.learnable(member) and 0 < sum(rewards) < len(rewards):
            self.skill[member] = min(1.0, self.skill[member] + RATES[member])

    def mean_success(self) -> float:
        learnable = [m for m in MEMBERS if m != "never"]
        total = 0.0
        for m in learnable:
            ok = self.learnable(m)
            total += sum(success_probability(self.skill[m], d) if ok else 0.0 for d in DIFFICULTY) / TASKS
        return total / len(learnable)


Rows = Callable[[int], list[tuple[str, int]]]


def run(rows_for: Rows, observe: Callable[[int, dict], None] | None, seed: int) -> int:
    """Steps until the learner's mean success reaches TARGET (MAX_STEPS + 1 if never)."""
    learner = Learner(seed)
    for step in range(1, MAX_STEPS + 1):
        groups: dict[str, list[tuple[int, list[float]]]] = {m: [] for m in MEMBERS}
        for member, task in rows_for(step):
            rewards = learner.group(member, task)
            learner.learn(member, rewards)
            groups[member].append((task, rewards))
        if observe is not None:
            observe(step, groups)
        if learner.mean_success() >= TARGET:
            return step
    return MAX_STEPS + 1


def static(
    weights: Mapping[str, float] | None = None, schedule: list[Phase] | None = None
) -> Callable[[int], int]:
    def one(seed: int) -> int:
        plan = plan_rows(
            {m: list(range(TASKS)) for m in MEMBERS},
            weights=weights,
            schedule=schedule,
            prompts_per_step=K,
            num_steps=MAX_STEPS,
            seed=seed,
        )
        by_step: dict[int, list[tuple[str, int]]] = {}
        for row in plan:
            by_step.setdefault(row.step + 1, []).append((row.member, row.task_index))
        return run(lambda s: by_step[s], None, seed)

    return one


def adaptive(signal: str) -> Callable[[int], int]:
    def one(seed: int) -> int:
        planner = AdaptivePlanner(
            {m: list(range(TASKS)) for m in MEMBERS},
            prompts_per_step=K,
            seed=seed,
            settings=AdaptiveSettings(signal=signal, warmup_steps=2, floor=0.04, max_change=0.15, window=4),  # type: ignore[arg-type]
        )
        return run(planner.rows, planner.observe, seed)

    return one


def median_steps(variant: Callable[[int], int]) -> float:
    return statistics.median(variant(seed) for seed in SEEDS)


def grid(step: float = 0.1) -> list[dict[str, float]]:
    n = round(1 / step)
    out = []
    for parts in itertools.product(range(n + 1), repeat=len(MEMBERS) - 1):
        if sum(parts) <= n:
            last = n - sum(parts)
            out.append({m: p / n for m, p in zip(MEMBERS, (*parts, last), strict=True)})
    return out


def main() -> None:
    t0 = time.perf_counter()
    results: dict[str, float] = {}
    results["uniform"] = median_steps(static())
    best_w, best = None, math.inf
    for weights in grid():
        if weights["fast"] == 0 or weights["prereq"] + weights["slow"] + weights["saturating"] == 0:
            continue  # cannot reach the target at all
        steps = median_steps(static(weights))
        if steps < best:
            best_w, best = weights, steps
    results["best static"] = best
    schedule = [
        Phase(80, {"fast": 0.6, "slow": 0.2, "prereq": 0.1, "saturating": 0.1, "never": 0.0}),
        Phase(None, {"fast": 0.1, "slow": 0.4, "prereq": 0.4, "saturating": 0.1, "never": 0.0}),
    ]
    results["schedule (hand-made)"] = median_steps(static(schedule=schedule))
    for signal in ("informative", "progress", "thompson"):
        results[f"adaptive: {signal}"] = median_steps(adaptive(signal))
    print(
        f"simulated learners: {len(MEMBERS)} members, target mean success {TARGET}, {len(SEEDS)} seeds, "
        f"medians of steps to target (lower is better; {MAX_STEPS + 1} = never)"
    )
    for name, steps in results.items():
        print(f"  {name:24s} {steps:6.1f}")
    print("  best static weights:", {k: v for k, v in (best_w or {}).items() if v})
    adaptive_best = min(v for k, v in results.items() if k.startswith("adaptive"))
    for name, steps in results.items():
        if name.startswith("adaptive") and steps > best:
            print(
                f"  adaptive loses here: {name} needs {steps:.1f} steps, the best static weights {best:.1f}"
            )
    print(f"ratio steps_to_target uniform/adaptive: {results['uniform'] / adaptive_best:.2f}")
    print(f"(ran in {time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    print(f"ratio steps_to_target best_static/adaptive: {best / adaptive_best:.2f}")


if __name__ == "__main__":
    main()
