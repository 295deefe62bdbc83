"""Does adaptive mixing reach a target faster than the best static weights? Simulated learners, seconds to
run.

No LLM: the policy is one skill level per member, and each planned row is one GRPO group of rollouts whose
successes are drawn from that skill. The rows come from ormix's own `Planner` (the one a trainer uses for
every strategy, built from a `MixtureConfig` as a mixture file gives it), and an adaptive planner is fed the
pooled groups of every step exactly as the trainer's callback feeds it, two steps late (its lag).

Dynamics (the same for every variant; each run's randomness comes from its seed alone, so every variant meets
the same draws on the same seed):

- Five members of 8 tasks each. A rollout of a task of difficulty d succeeds with probability
  sigmoid(10·(skill − d)); task difficulties are spread evenly over [0, 0.8] (``saturating``: [0, 0.5]).
- A prerequisite chain: ``basics`` → ``compose`` → ``expert``. Every rollout of ``compose`` fails until
  ``basics`` has skill >= 0.6 (say, multi-step tool use needs the single calls first), and every rollout of
  ``expert`` fails until ``compose`` has skill >= 0.6. Once unlocked, a member learns from its own skill,
  which starts, like ``basics``, at 0.1 (a fifth of its rollouts succeed, most of them on its easiest tasks).
- Learning speeds differ: ``basics``, ``compose`` and ``saturating`` gain 0.005 skill per informative group,
  ``expert`` half of that (its skill is harder to learn).
- ``saturating`` starts nearly solved (skill 0.6 on easy tasks: 93% success) and saturates: its groups soon
  all succeed and stop teaching.
- ``never`` is never learnable: every rollout fails.
- Skill grows only from groups whose true outcomes differ (a GRPO group all solved or all failed has zero
  advantage): +rate per such group, applied after the step (one optimizer step per training step). Every
  member therefore saturates once its hardest task is solved every time.
- Rewards are noisy: the trainer (and the planner) sees each rollout's outcome flipped with probability 0.05;
  the flip is a bad label, so it teaches nothing (what the policy can learn is set by the true outcomes).

A training step has 16 prompts (rows), each a group of 4 rollouts. The target is a mean success (expected,
over every task) of 0.8 over the four learnable members (``never`` can't be learned, and the planner does
not know that); it needs ``expert``, the end of the chain, well under way. Steps to target are counted on 7
seeds; medians are reported, with the range over seeds (``MAX_STEPS + 1`` = never).

Why a chain: what is worth training changes during the run. Static weights must feed every link of the
chain for the whole run (``expert``'s share is wasted until ``compose`` is learned, ``basics``'s once it is),
while an adaptive planner can take the links in turn. Not modelled: forgetting and interference between
members, which would favour spreading the budget (static weights, a higher ``floor``) over concentrating it.

Variants: ``uniform``; ``best static``: a grid search over the simplex (every member's weight a multiple of
0.1: 1001 points; then the multiples of 0.05 within 0.1 of the 8 best), screened on the same seeds with the
per-step quotas close to a static plan's (largest remainder, remainders carried; tie-breaking, task order
and the rare step where the two rules differ aside), runs cut at the uniform plan's median (a slower point
can't be the best); the 10 best screened points are rerun through the `Planner` on the same seeds, and the
figure shown is the best of those; ``schedule``: a hand-made three-phase curriculum that follows the chain,
written knowing it; one line per adaptive signal, with the default `AdaptiveConfig`; the default signal with
``headroom: 0`` (weights from informativeness alone, as before headroom existed: what headroom adds); the
default signal with task filtering (`TaskFilterConfig` defaults) on every member, and, like for like, the best
static weights
with the same task filter (the planner kept on its static weights for the whole run); and ``oracle``, for
reference only: a policy that reads the learner's true skills and gives each row to the member whose expected
gain in mean success is the largest (what perfect knowledge could do greedily; no planner could).

Last line: ``ratio steps_to_target best_static/adaptive: X`` (X for the best adaptive signal with its default
settings, without task filtering: member weights against member weights).

    python benchmarks/curriculum.py [--world perturbed]
"""

from __future__ import annotations

import itertools
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ormix.config import MixtureConfig
from ormix.mixture.adaptive import SIGNALS
from ormix.mixture.planner import Planner

MEMBERS = ("basics", "compose", "expert", "saturating", "never")
RATE = {"basics": 0.005, "compose": 0.005, "expert": 0.0025, "saturating": 0.005, "never": 0.0}
START = {"basics": 0.1, "compose": 0.1, "expert": 0.1, "saturating": 0.6, "never": 0.0}
HARDEST = {"basics": 0.8, "compose": 0.8, "expert": 0.8, "saturating": 0.5, "never": 0.8}
PREREQUISITE = {"compose": ("basics", 0.6), "expert": ("compose", 0.6)}
NEVER = ("never",)
TASKS = 8
SLOPE = 10.0
GROUP = 4  # rollouts per group (num_generations)
K = 16  # prompts per step
NOISE = 0.05
TARGET = 0.8
MAX_STEPS = 400
SEEDS = tuple(range(7))

_M = len(MEMBERS)
_INDEX = {m: i for i, m in enumerate(MEMBERS)}
_DIFFICULTY = np.array([[HARDEST[m] * j / (TASKS - 1) for j in range(TASKS)] for m in MEMBERS])
_RATE = np.array([RATE[m] for m in MEMBERS])
_LEARNABLE = np.array([m not in NEVER for m in MEMBERS])
_CHAIN = [(_INDEX[m], _INDEX[pre], at) for m, (pre, at) in PREREQUISITE.items()]


# ── the simulated policy ──────────────────────────────────────────────────────────────────────────────────


def success(skill: np.ndarray) -> np.ndarray:
    """Success probability of every (run, member, task): ``skill`` is (runs, members)."""
    p = 1.0 / (1.0 + np.exp(-SLOPE * (skill[:, :, None] - _DIFFICULTY[None])))
    p[:, ~_LEARNABLE, :] = 0.0
    for member, pre, at in _CHAIN:
        p[skill[:, pre] < at, member, :] = 0.0
    return p


def mean_success(skill: np.ndarray) -> np.ndarray:
    """Expected success over the learnable members' tasks, per run."""
    return success(skill)[:, _LEARNABLE, :].mean(axis=(1, 2))


class Learners:
    """A batch of independent simulated policies (see the module docstring), one seed each."""

    def __init__(self, seeds: Sequence[int]) -> None:
        self.seeds = list(seeds)
        self.skill = np.tile(np.array([START[m] for m in MEMBERS]), (len(self.seeds), 1))
        self.p = success(self.skill)
        unique = sorted(set(self.seeds))
        draws = {s: np.random.default_rng(s).random((MAX_STEPS, K, GROUP, 2)) for s in unique}
        self._draws = np.stack([draws[s] for s in unique])
        self._which = np.array([unique.index(s) for s in self.seeds])

    def step(self, step: int, runs: np.ndarray, members: np.ndarray, tasks: np.ndarray) -> np.ndarray:
        """Train the runs ``runs`` one step on rows (members, tasks: (runs, K)); their observed rewards."""
        p = self.p[runs[:, None], members, tasks]
        u = self._draws[self._which[runs], step - 1]
        true = u[..., 0] < p[..., None]
        seen = true ^ (u[..., 1] < NOISE)
        mixed = true.any(-1) & ~true.all(-1)
        taught = (mixed[:, :, None] & (members[:, :, None] == np.arange(_M))).sum(1)
        self.skill[runs] += _RATE * taught
        self.p[runs] = success(self.skill[runs])
        return seen.astype(float)

    def mean_success(self, runs: np.ndarray) -> np.ndarray:
        return self.p[runs][:, _LEARNABLE, :].mean(axis=(1, 2))


RowsAt = Callable[[int, np.ndarray], tuple[np.ndarray, np.ndarray]]
Observe = Callable[[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray], None]


def simulate(
    learners: Learners, rows_at: RowsAt, horizon: int = MAX_STEPS, observe: Observe | None = None
) -> np.ndarray:
    """Steps to TARGET of each run (``horizon + 1`` if not reached); ``rows_at(step, runs)`` gives the rows
    of the runs still going, ``observe(step, runs, members, tasks, rewards)`` sees what they got."""
    done = np.full(len(learners.seeds), horizon + 1)
    active = np.arange(len(learners.seeds))
    for step in range(1, horizon + 1):
        members, tasks = rows_at(step, active)
        rewards = learners.step(step, active, members, tasks)
        if observe is not None:
            observe(step, active, members, tasks, rewards)
        reached = learners.mean_success(active) >= TARGET
        done[active[reached]] = step
        active = active[~reached]
        if not len(active):
            break
    return done


def median(values: Sequence[float] | np.ndarray) -> float:
    return float(statistics.median(float(v) for v in values))


# ── variants ──────────────────────────────────────────────────────────────────────────────────────────────


def planned(plans: Sequence[Sequence[tuple[str, int]]]) -> tuple[np.ndarray, np.ndarray]:
    """Rows of whole plans (one per run: step-major lists of (member, task)) as (runs, steps, K) arrays."""
    members = np.array([[_INDEX[m] for m, _ in plan] for plan in plans]).reshape(len(plans), -1, K)
    tasks = np.array([[t for _, t in plan] for plan in plans]).reshape(len(plans), -1, K)
    return members, tasks


def planner(seed: int, filtered: bool = False, **config: Any) -> Planner:
    """The `Planner` a trainer builds for this mixture of the five members (config keys as in a file)."""
    members = {m: {"target": "local:echo", **({"filter": {}} if filtered else {})} for m in MEMBERS}
    mixture = MixtureConfig(members=members, prompts_per_step=K, seed=seed, **config)
    return Planner(mixture, {m: list(range(TASKS)) for m in MEMBERS})


def static_runs(
    seeds: Sequence[int],
    weights: Mapping[str, float] | None = None,
    schedule: Sequence[Mapping[str, Any]] | None = None,
    horizon: int = MAX_STEPS,
) -> np.ndarray:
    """Steps to target with a static plan from the `Planner`, one plan per seed."""
    plans = []
    for seed in seeds:
        rows = planner(seed, weights=weights, schedule=schedule, num_steps=horizon).plan()
        plans.append([(r.member, r.task_index) for r in rows])
    members, tasks = planned(plans)
    return simulate(
        Learners(seeds), lambda step, runs: (members[runs, step - 1], tasks[runs, step - 1]), horizon
    )


def screen(points: np.ndarray, seeds: Sequence[int], horizon: int) -> np.ndarray:
    """Median steps to target of many static weight vectors at once (points: (P, members)), for the grid.

    Quotas close to a static plan's (largest remainder with the remainders carried; ties by member order),
    tasks cycled in order, in numpy for speed; the `Planner`'s figures are the ones reported (see
    `best_static`).
    """
    n_points, n_seeds = len(points), len(seeds)
    weights = np.repeat(points, n_seeds, axis=0)
    credit = np.zeros_like(weights)
    used = np.zeros(weights.shape, dtype=int)
    order = np.arange(_M)

    def rows_at(step: int, runs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        credit[runs] += weights[runs] * K
        c = credit[runs]
        quota = np.maximum(0, np.floor(c + 1e-9).astype(int))
        extra = K - quota.sum(1)
        rank = np.argsort(np.argsort(-(c - quota) + 1e-12 * order, axis=1, kind="stable"), axis=1)
        quota += rank < extra[:, None]
        for i in np.flatnonzero(extra < 0):  # rare: members in debt hold more than the step's spare
            for m in sorted(np.flatnonzero(quota[i]), key=lambda m: c[i, m] - quota[i, m])[: -extra[i]]:
                quota[i, m] -= 1
        credit[runs] -= quota
        ends = np.cumsum(quota, 1)
        slot = np.arange(K)
        members = (slot[None, :, None] >= ends[:, None, :]).sum(-1)
        starts = ends - quota
        nth = slot[None] - np.take_along_axis(starts, members, 1)
        tasks = (np.take_along_axis(used[runs], members, 1) + nth) % TASKS
        used[runs] += quota
        return members, tasks

    steps = simulate(Learners(list(seeds) * n_points), rows_at, horizon)
    return np.median(steps.reshape(n_points, n_seeds), axis=1)


def simplex(step: float) -> np.ndarray:
    n = round(1 / step)
    return (
        np.array(
            [
                (*parts, n - sum(parts))
                for parts in itertools.product(range(n + 1), repeat=_M - 1)
                if sum(parts) <= n
            ],
            dtype=float,
        )
        / n
    )


def best_static(horizon: int) -> tuple[dict[str, float], np.ndarray, int]:
    """The grid search: every point of the 0.1 simplex, then the 0.05 points next to the best ones, screened
    on the seeds; the ten best screened points are rerun through the `Planner` on the same seeds, and the best
    of those wins. (weights, its steps per seed, grid points searched)."""
    coarse = simplex(0.1)
    scores = screen(coarse, SEEDS, horizon)
    top = coarse[np.argsort(scores, kind="stable")[:8]]
    fine = simplex(0.05)
    near = fine[np.abs(fine[:, None, :] - top[None]).max(-1).min(-1) <= 0.1 + 1e-9]
    near = near[~(np.abs(near[:, None, :] - coarse[None]).max(-1) < 1e-9).any(-1)]
    points = np.concatenate([coarse, near])
    scores = np.concatenate([scores, screen(near, SEEDS, horizon)])
    best_w: dict[str, float] = {}
    best_runs = np.full(len(SEEDS), horizon + 1)
    for i in np.argsort(scores, kind="stable")[:10]:
        weights = {m: float(w) for m, w in zip(MEMBERS, points[i], strict=True)}
        runs = static_runs(SEEDS, weights, horizon=horizon)
        if median(runs) < median(best_runs):
            best_w, best_runs = weights, runs
    return best_w, best_runs, len(points)


def adaptive_runs(
    settings: Mapping[str, Any], filtered: bool = False, base_weights: Mapping[str, float] | None = None
) -> np.ndarray:
    """Steps to target with one adaptive `Planner` per seed (``adaptive:`` settings as in a file), fed each
    step's groups (two steps late).

    ``base_weights`` are its starting weights; with a ``warmup_steps`` beyond the horizon they are kept for
    the whole run (static weights, through the planner that filters tasks)."""
    planners = [
        planner(seed, filtered, strategy="adaptive", adaptive=dict(settings), weights=base_weights)
        for seed in SEEDS
    ]

    def rows_at(step: int, runs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows = [planners[r].rows(step) for r in runs]
        return (
            np.array([[_INDEX[m] for m, _ in rr] for rr in rows]),
            np.array([[t for _, t in rr] for rr in rows]),
        )

    def observe(step: int, runs: np.ndarray, members: np.ndarray, tasks: np.ndarray, rewards: np.ndarray):
        for i, r in enumerate(runs):
            groups: dict[str, list[tuple[int, list[float]]]] = {m: [] for m in MEMBERS}
            for j in range(K):
                groups[MEMBERS[members[i, j]]].append((int(tasks[i, j]), rewards[i, j].tolist()))
            planners[r].observe(step, groups)

    return simulate(Learners(SEEDS), rows_at, observe=observe)


def oracle_runs() -> np.ndarray:
    """Reference only: each row to the member with the largest expected gain in mean success, from the true
    skills (a greedy policy with perfect knowledge; tasks cycled in order)."""
    learners = Learners(SEEDS)
    used = np.zeros((len(SEEDS), _M), dtype=int)

    def rows_at(step: int, runs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        skill = learners.skill[runs].copy()
        members = np.zeros((len(runs), K), dtype=int)
        every = np.arange(len(runs))
        for j in range(K):
            p = success(skill)
            gain = _RATE * (1 - p**GROUP - (1 - p) ** GROUP).mean(-1)  # expected skill gained per row
            base = mean_success(skill)
            value = np.stack([mean_success(skill + np.eye(_M)[m] * gain) - base for m in range(_M)], 1)
            pick = value.argmax(1)
            members[:, j] = pick
            skill[every, pick] += gain[every, pick]
        tasks = np.zeros_like(members)
        for i, r in enumerate(runs):
            for j in range(K):
                tasks[i, j] = used[r, members[i, j]] % TASKS
                used[r, members[i, j]] += 1
        return members, tasks

    return simulate(learners, rows_at)


SCHEDULE = [
    {
        "until_step": 41,
        "weights": {"basics": 0.7, "compose": 0.1, "expert": 0.1, "saturating": 0.1, "never": 0.0},
    },
    {
        "until_step": 81,
        "weights": {"basics": 0.2, "compose": 0.6, "expert": 0.1, "saturating": 0.1, "never": 0.0},
    },
    {"weights": {"basics": 0.1, "compose": 0.2, "expert": 0.6, "saturating": 0.1, "never": 0.0}},
]


def use_perturbed_world() -> None:
    """A second world, to check that the defaults were not fitted to the first: learning speeds changed by up
    to 30%, other unlock thresholds, other seeds (``--world perturbed``)."""
    global RATE, PREREQUISITE, SEEDS, _RATE, _CHAIN
    RATE = {"basics": 0.0065, "compose": 0.0035, "expert": 0.003, "saturating": 0.004, "never": 0.0}
    PREREQUISITE = {"compose": ("basics", 0.5), "expert": ("compose", 0.7)}
    SEEDS = tuple(range(7, 14))
    _RATE = np.array([RATE[m] for m in MEMBERS])
    _CHAIN = [(_INDEX[m], _INDEX[pre], at) for m, (pre, at) in PREREQUISITE.items()]


def main() -> None:
    if sys.argv[1:] == ["--world", "perturbed"]:
        use_perturbed_world()
    elif sys.argv[1:]:
        sys.exit("usage: python benchmarks/curriculum.py [--world perturbed]")
    t0 = time.perf_counter()
    runs: dict[str, np.ndarray] = {}
    runs["uniform"] = static_runs(SEEDS)
    horizon = min(MAX_STEPS, int(median(runs["uniform"])))  # the uniform point is on the grid
    best_w, runs["best static"], n_points = best_static(horizon)
    runs["schedule (hand-made)"] = static_runs(SEEDS, schedule=SCHEDULE)
    for signal in SIGNALS:
        runs[f"adaptive: {signal}"] = adaptive_runs({"signal": signal})
    runs["adaptive: informative, headroom off"] = adaptive_runs({"headroom": 0.0})
    runs["adaptive: informative + task filter"] = adaptive_runs({}, filtered=True)
    runs["best static + task filter"] = adaptive_runs(
        {"warmup_steps": MAX_STEPS + 1}, filtered=True, base_weights=best_w
    )
    runs["oracle (reference only)"] = oracle_runs()
    results = {name: median(r) for name, r in runs.items()}
    print(
        f"simulated learners: {_M} members, {K} prompts x {GROUP} rollouts per step, target mean success "
        f"{TARGET}, {len(SEEDS)} seeds, medians of steps to target (lower is better; {MAX_STEPS + 1} = never)"
    )
    for name, steps in results.items():
        print(f"  {name:38s} {steps:6.1f}   (seeds: {min(runs[name])}-{max(runs[name])})")
    shown = {k: round(v, 2) for k, v in best_w.items() if v}
    print(f"  best static weights ({n_points} grid points searched): {shown}")
    best = results["best static"]
    for name, steps in results.items():
        if name.startswith("adaptive") and steps > best / 1.3:
            verdict = "loses to" if steps > best else "beats, by less than 1.3x,"
            print(f"  {name} {verdict} the best static weights: {steps:.1f} vs {best:.1f} steps")
        if name.startswith("adaptive") and steps > results["schedule (hand-made)"]:
            print(
                f"  {name} loses to the hand-made schedule: {steps:.1f} vs "
                f"{results['schedule (hand-made)']:.1f}"
            )
    filtered = results["adaptive: informative + task filter"] / results["best static + task filter"]
    print(f"  with the task filter on both sides: best_static/adaptive {1 / filtered:.2f}")
    adaptive_best = min(results[f"adaptive: {signal}"] for signal in SIGNALS)
    print(f"(ran in {time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    sys.stderr.flush()
    print(f"ratio steps_to_target uniform/adaptive: {results['uniform'] / adaptive_best:.2f}")
    print(f"ratio steps_to_target best_static/adaptive: {best / adaptive_best:.2f}")


if __name__ == "__main__":
    main()
