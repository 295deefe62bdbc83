"""Does adaptive mixing reach a target faster than uniform and the best static weights, in every world of a
family that could fool it? Simulated learners, a few minutes on two cores.

No LLM: the policy is one skill level per member, and each planned row is one GRPO group of rollouts whose
successes are drawn from that skill. The rows come from ormix's own `Planner` (the one a trainer uses for
every strategy, built from a `MixtureConfig` as a mixture file gives it), and an adaptive planner is fed the
pooled groups of every step exactly as the trainer's callback feeds it, two steps late (its lag).

The learner model (the same in every world; each run's randomness comes from its seed alone, so every variant
meets the same draws on the same seed):

- Members of 8 tasks each. A rollout of a task of difficulty d succeeds with probability
  sigmoid(10·(skill − d)); task difficulties are spread evenly over [0, hardest] (0.8; 0.5 for a member that
  starts nearly solved). Skill starts at 0.1 (a fifth of the rollouts succeed, most on the easiest tasks).
- Skill grows only from groups whose true outcomes differ (a GRPO group all solved or all failed has zero
  advantage): +rate per such group (0.005 unless the world says otherwise), after the step.
- The trainer (and the planner) sees each rollout's outcome flipped with the member's label noise (5% unless
  the world says otherwise); a flipped label teaches nothing (what the policy can learn is set by the true
  outcomes). A success pays the member's success reward, a failure its failure reward (1 and 0 by default).

The worlds (each a few lines of `World` below):

- ``chain``: a prerequisite chain ``basics`` → ``compose`` → ``expert`` (every rollout of ``compose`` fails
  until ``basics`` has skill >= 0.6, of ``expert`` until ``compose`` has), ``expert`` learns at half the
  rate, ``saturating`` starts nearly solved, ``never`` is never learnable (the original benchmark).
- ``noise``: independent members whose graders flip 0%, 10%, 20% (``flaky``, learning as fast as the others,
  no faster), 30% (``saturating``) of outcomes; ``never`` flips 20% (every group looks informative now and
  then).
- ``forgetting``: the chain, and every member loses 0.002 skill per step (down to its start) whether trained
  or not: a member must keep being practised.
- ``transfer``: the chain, and every informative group of ``basics`` also teaches ``compose`` and
  ``expert`` half as much (their own groups teach them fully).
- ``impossible``: the chain, and a third of the tasks of ``basics``, ``compose`` and ``expert`` can never be
  solved (the target counts the solvable ones).
- ``scales``: the chain, ``compose`` pays partial credit (0.5 for a success), ``expert`` pays -1 / +1.
- ``late``: the chain's members plus ``late``, whose rollouts all fail until step 40, then learnable.
- ``many``: 16 members, 32 prompts per step: ten learnable at rates 0.003-0.008 (two as a chain), two
  nearly solved, two never learnable, two flaky (20%).

The target is a mean true success (expected, over every solvable task) of 0.8 over the learnable members;
the planner does not know which those are. Steps to target are counted on 5 seeds; medians are reported with
the range over seeds (``MAX_STEPS + 1`` = never).

Variants: ``uniform``; ``best static``: a search over the weights (for up to 6 members every multiple of 0.1
on the simplex, for more 400 random points; then every move of 0.05 from one member to another around the
8 best), screened on the same seeds with the per-step quotas close to a static plan's (largest remainder,
remainders carried), runs cut at the uniform plan's median (a slower point can't be the best); the 10 best
screened points are rerun through the `Planner` on the same seeds, and the figure shown is the best of those;
``schedule``: a hand-made curriculum that follows the chain, written knowing it (chain worlds only); one line
per adaptive signal with its default settings (task filtering included); ``default``: `AdaptiveConfig()`
as a user gets it (the ``denoised`` signal and every member's task filter, `TaskFilterConfig` defaults); the
default without task filtering (``filter: null``); like for like, uniform and the best static weights
through the same task filter; and ``oracle``, for reference only: a policy that reads the
learner's true skills and gives each row to the member whose expected gain in mean success is the largest.

Per world, the largest weight each adaptive variant ever gives a flaky member (20% flipped, learning no
faster) after warm-up, as a multiple of its uniform share; then one line per world and the overall lines:
``ratio steps_to_target best_static/adaptive: X (geometric mean over worlds)`` and the worst world's
``uniform/adaptive`` (adaptive = the default).

    python benchmarks/curriculum.py [--world NAME ...] [--seeds N]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ormix.config import AdaptiveConfig, MixtureConfig
from ormix.mixture._adaptive import SIGNALS
from ormix.mixture._planner import Planner, fixed_steps

TASKS = 8
SLOPE = 10.0
GROUP = 4  # rollouts per group (num_generations)
TARGET = 0.8
MAX_STEPS = 400
WARMUP = 10  # steps after which a flaky member's share is watched


@dataclasses.dataclass(frozen=True)
class World:
    """One world's dynamics (see the module docstring); every dict is keyed by member, missing = default."""

    name: str
    members: tuple[str, ...]
    rate: Mapping[str, float] = dataclasses.field(default_factory=dict)  # default 0.005
    start: Mapping[str, float] = dataclasses.field(default_factory=dict)  # default 0.1
    hardest: Mapping[str, float] = dataclasses.field(default_factory=dict)  # default 0.8
    prerequisite: Mapping[str, tuple[str, float]] = dataclasses.field(default_factory=dict)
    never: tuple[str, ...] = ()
    noise: Mapping[str, float] = dataclasses.field(default_factory=dict)  # default 0.05
    forget: float = 0.0  # skill lost per step, by every member, down to its start
    transfer: Mapping[tuple[str, str], float] = dataclasses.field(default_factory=dict)  # (from, to) -> share
    impossible: tuple[str, ...] = ()  # members a third of whose tasks can never be solved
    rewards: Mapping[str, tuple[float, float]] = dataclasses.field(default_factory=dict)  # (fail, success)
    unlock: Mapping[str, int] = dataclasses.field(default_factory=dict)  # learnable from this step
    flaky: tuple[str, ...] = ()  # members flipping 20% that learn no faster: their share is watched
    k: int = 16  # prompts per step
    schedule: Sequence[Mapping[str, Any]] | None = None


CHAIN_MEMBERS = ("basics", "compose", "expert", "saturating", "never")
CHAIN = dict(
    members=CHAIN_MEMBERS,
    rate={"expert": 0.0025, "never": 0.0},
    start={"saturating": 0.6},
    hardest={"saturating": 0.5},
    prerequisite={"compose": ("basics", 0.6), "expert": ("compose", 0.6)},
    never=("never",),
    schedule=[
        {
            "until_step": 41,
            "weights": {"basics": 0.7, "compose": 0.1, "expert": 0.1, "saturating": 0.1, "never": 0.0},
        },
        {
            "until_step": 81,
            "weights": {"basics": 0.2, "compose": 0.6, "expert": 0.1, "saturating": 0.1, "never": 0.0},
        },
        {"weights": {"basics": 0.1, "compose": 0.2, "expert": 0.6, "saturating": 0.1, "never": 0.0}},
    ],
)
_MANY = tuple(f"m{i:02d}" for i in range(16))
WORLDS = {
    w.name: w
    for w in [
        World("chain", **CHAIN),  # type: ignore[arg-type]
        World(
            "noise",
            members=("clean", "noisy", "flaky", "steady", "saturating", "never"),
            rate={"steady": 0.0035, "never": 0.0},
            start={"saturating": 0.6},
            hardest={"saturating": 0.5},
            noise={"clean": 0.0, "noisy": 0.1, "flaky": 0.2, "saturating": 0.3, "never": 0.2},
            never=("never",),
            flaky=("flaky",),
        ),
        World("forgetting", forget=0.002, **CHAIN),  # type: ignore[arg-type]
        World(
            "transfer",
            transfer={("basics", "compose"): 0.5, ("basics", "expert"): 0.5},
            **CHAIN,  # type: ignore[arg-type]
        ),
        World("impossible", impossible=("basics", "compose", "expert"), **CHAIN),  # type: ignore[arg-type]
        World("scales", rewards={"compose": (0.0, 0.5), "expert": (-1.0, 1.0)}, **CHAIN),  # type: ignore[arg-type]
        World(
            "late",
            **{**CHAIN, "members": (*CHAIN_MEMBERS, "late"), "schedule": None},  # type: ignore[arg-type]
            unlock={"late": 40},
        ),
        World(
            "many",
            members=_MANY,
            rate={
                **{m: 0.003 + 0.0005 * i for i, m in enumerate(_MANY[:10])},
                "m12": 0.0,
                "m13": 0.0,
            },
            start={"m10": 0.6, "m11": 0.6},
            hardest={"m10": 0.5, "m11": 0.5},
            prerequisite={"m01": ("m00", 0.6)},
            never=("m12", "m13"),
            noise={"m14": 0.2, "m15": 0.2},
            flaky=("m14", "m15"),
            k=32,
        ),
    ]
}


# ── the simulated policy ──────────────────────────────────────────────────────────────────────────────────


class Model:
    """A world's dynamics as arrays."""

    def __init__(self, world: World) -> None:
        self.world = w = world
        self.members = w.members
        self.n = n = len(w.members)
        self.index = {m: i for i, m in enumerate(w.members)}
        hardest = [w.hardest.get(m, 0.8) for m in w.members]
        self.difficulty = np.array([[h * j / (TASKS - 1) for j in range(TASKS)] for h in hardest])
        self.rate = np.array([w.rate.get(m, 0.005) for m in w.members])
        self.start = np.array([w.start.get(m, 0.1) for m in w.members])
        self.noise = np.array([w.noise.get(m, 0.05) for m in w.members])
        self.learnable = np.array([m not in w.never for m in w.members])
        self.solvable = np.ones((n, TASKS), dtype=bool)
        for m in w.impossible:
            self.solvable[self.index[m], 2::3] = False
        self.counted = self.solvable & self.learnable[:, None]
        self.chain = [(self.index[m], self.index[pre], at) for m, (pre, at) in w.prerequisite.items()]
        self.unlock = [(self.index[m], at) for m, at in w.unlock.items()]
        self.teach = np.eye(n)  # teach[i, j]: skill rate of j gained per informative group of i
        for (a, b), share in w.transfer.items():
            self.teach[self.index[a], self.index[b]] = share
        fail = np.array([w.rewards.get(m, (0.0, 1.0))[0] for m in w.members])
        self.fail, self.pays = fail, np.array([w.rewards.get(m, (0.0, 1.0))[1] for m in w.members]) - fail

    def success(self, skill: np.ndarray, step: int) -> np.ndarray:
        """Success probability of every (run, member, task): ``skill`` is (runs, members)."""
        p = 1.0 / (1.0 + np.exp(-SLOPE * (skill[:, :, None] - self.difficulty[None])))
        p = p * (self.solvable & self.learnable[:, None])[None]
        for member, pre, at in self.chain:
            p[skill[:, pre] < at, member, :] = 0.0
        for member, at in self.unlock:
            if step < at:
                p[:, member, :] = 0.0
        return p

    def mean_success(self, p: np.ndarray) -> np.ndarray:
        return (p * self.counted[None]).sum(axis=(1, 2)) / self.counted.sum()


class Learners:
    """A batch of independent simulated policies (see the module docstring), one seed each."""

    def __init__(self, model: Model, seeds: Sequence[int]) -> None:
        self.model = model
        self.seeds = list(seeds)
        self.skill = np.tile(model.start, (len(self.seeds), 1))
        self.p = model.success(self.skill, 1)
        unique = sorted(set(self.seeds))
        k = model.world.k
        draws = {s: np.random.default_rng(s).random((MAX_STEPS, k, GROUP, 2)) for s in unique}
        self._draws = np.stack([draws[s] for s in unique])
        self._which = np.array([unique.index(s) for s in self.seeds])

    def step(self, step: int, runs: np.ndarray, members: np.ndarray, tasks: np.ndarray) -> np.ndarray:
        """Train the runs ``runs`` one step on rows (members, tasks: (runs, K)); their observed rewards."""
        md = self.model
        p = self.p[runs[:, None], members, tasks]
        u = self._draws[self._which[runs], step - 1]
        true = u[..., 0] < p[..., None]
        seen = true ^ (u[..., 1] < md.noise[members][..., None])
        mixed = true.any(-1) & ~true.all(-1)
        taught = (mixed[:, :, None] & (members[:, :, None] == np.arange(md.n))).sum(1)
        skill = self.skill[runs] + md.rate * (taught @ md.teach)
        if md.world.forget:
            skill = np.maximum(md.start, skill - md.world.forget)
        self.skill[runs] = skill
        self.p[runs] = md.success(skill, step + 1)
        return md.fail[members][..., None] + md.pays[members][..., None] * seen

    def mean_success(self, runs: np.ndarray) -> np.ndarray:
        return self.model.mean_success(self.p[runs])


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


class Bench:
    """The variants of one world, on its seeds."""

    def __init__(self, world: World, seeds: Sequence[int]) -> None:
        self.world, self.model, self.seeds = world, Model(world), tuple(seeds)
        self.k = world.k
        self.flaky_share: dict[str, float] = {}  # variant -> largest flaky weight x members, after warm-up

    def planner(self, seed: int, **config: Any) -> Planner:
        """The `Planner` a trainer builds for this mixture (config keys as in a file)."""
        members = {m: {"target": "local:echo"} for m in self.world.members}
        mixture = MixtureConfig(members=members, prompts_per_step=self.k, seed=seed, **config)
        return Planner(mixture, {m: list(range(TASKS)) for m in self.world.members})

    def planned(self, plans: Sequence[Sequence[tuple[str, int]]]) -> tuple[np.ndarray, np.ndarray]:
        """Rows of whole plans (one per run: step-major (member, task) lists) as (runs, steps, K) arrays."""
        idx = self.model.index
        members = np.array([[idx[m] for m, _ in plan] for plan in plans]).reshape(len(plans), -1, self.k)
        tasks = np.array([[t for _, t in plan] for plan in plans]).reshape(len(plans), -1, self.k)
        return members, tasks

    def static_runs(
        self,
        weights: Mapping[str, float] | None = None,
        schedule: Sequence[Mapping[str, Any]] | None = None,
        horizon: int = MAX_STEPS,
    ) -> np.ndarray:
        """Steps to target with a static plan from the `Planner`, one plan per seed."""
        plans = []
        for seed in self.seeds:
            rows = self.planner(seed, weights=weights, schedule=schedule, num_steps=horizon).plan()
            plans.append([(r.member, r.task_index) for r in rows])
        members, tasks = self.planned(plans)
        return simulate(
            Learners(self.model, self.seeds),
            lambda step, runs: (members[runs, step - 1], tasks[runs, step - 1]),
            horizon,
        )

    def screen(self, points: np.ndarray, horizon: int) -> np.ndarray:
        """Median steps to target of many static weight vectors at once (points: (P, members)).

        Quotas close to a static plan's (largest remainder with the remainders carried; ties by member
        order), tasks cycled in order, in numpy for speed; the `Planner`'s figures are the ones reported.
        """
        n, k = self.model.n, self.k
        n_points, n_seeds = len(points), len(self.seeds)
        weights = np.repeat(points, n_seeds, axis=0)
        credit = np.zeros_like(weights)
        used = np.zeros(weights.shape, dtype=int)
        order = np.arange(n)

        def rows_at(step: int, runs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            credit[runs] += weights[runs] * k
            c = credit[runs]
            quota = np.maximum(0, np.floor(c + 1e-9).astype(int))
            extra = k - quota.sum(1)
            rank = np.argsort(np.argsort(-(c - quota) + 1e-12 * order, axis=1, kind="stable"), axis=1)
            quota += rank < extra[:, None]
            for i in np.flatnonzero(extra < 0):  # rare: members in debt hold more than the step's spare
                for m in sorted(np.flatnonzero(quota[i]), key=lambda m: c[i, m] - quota[i, m])[: -extra[i]]:
                    quota[i, m] -= 1
            credit[runs] -= quota
            ends = np.cumsum(quota, 1)
            slot = np.arange(k)
            members = (slot[None, :, None] >= ends[:, None, :]).sum(-1)
            starts = ends - quota
            nth = slot[None] - np.take_along_axis(starts, members, 1)
            tasks = (np.take_along_axis(used[runs], members, 1) + nth) % TASKS
            used[runs] += quota
            return members, tasks

        steps = simulate(Learners(self.model, list(self.seeds) * n_points), rows_at, horizon)
        return np.median(steps.reshape(n_points, n_seeds), axis=1)

    def best_static(self, horizon: int) -> tuple[dict[str, float], np.ndarray, int]:
        """The weight search of the module docstring: (weights, its steps per seed, points searched)."""
        n = self.model.n
        if n <= 6:
            coarse = simplex(0.1, n)
        else:
            rng = np.random.default_rng(12345)
            coarse = np.concatenate([np.full((1, n), 1 / n), rng.dirichlet(np.ones(n), 400)])
        scores = self.screen(coarse, horizon)
        top = coarse[np.argsort(scores, kind="stable")[:8]]
        moves = [(i, j) for i in range(n) for j in range(n) if i != j]
        near = []
        for point in top:
            for i, j in moves:
                if point[i] >= 0.05 - 1e-9:
                    q = point.copy()
                    q[i] -= 0.05
                    q[j] += 0.05
                    near.append(q)
        near_a = np.unique(np.round(np.array(near), 9), axis=0)
        points = np.concatenate([coarse, near_a])
        scores = np.concatenate([scores, self.screen(near_a, horizon)])
        best_w: dict[str, float] = {}
        best_runs = np.full(len(self.seeds), horizon + 1)
        for i in np.argsort(scores, kind="stable")[:10]:
            weights = {m: float(w) for m, w in zip(self.world.members, points[i], strict=True)}
            runs = self.static_runs(weights, horizon=horizon)
            if median(runs) < median(best_runs):
                best_w, best_runs = weights, runs
        return best_w, best_runs, len(points)

    def adaptive_runs(
        self,
        settings: Mapping[str, Any],
        base_weights: Mapping[str, float] | None = None,
        label: str | None = None,
    ) -> np.ndarray:
        """Steps to target with one adaptive `Planner` per seed (``adaptive:`` settings as in a file), fed
        each step's groups (two steps late). ``base_weights`` are its starting weights; with a
        ``warmup_steps`` beyond the horizon they are kept for the whole run (static weights, through the
        planner that filters tasks, unless the settings turn the filter off). With a ``label``, the largest
        weight of a flaky member after warm-up is kept in ``flaky_share``."""
        members_ = self.world.members
        idx = self.model.index
        planners = [
            self.planner(seed, strategy="adaptive", adaptive=dict(settings), weights=base_weights)
            for seed in self.seeds
        ]
        start = max(WARMUP, fixed_steps(AdaptiveConfig(**settings), 2)) + 1
        flaky_weight = 0.0

        def rows_at(step: int, runs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            nonlocal flaky_weight
            rows = [planners[r].rows(step) for r in runs]
            if step >= start and self.world.flaky:
                weights = [planners[r].weights(step) for r in runs]
                flaky_weight = max(flaky_weight, *(w[m] for w in weights for m in self.world.flaky))
            return (
                np.array([[idx[m] for m, _ in rr] for rr in rows]),
                np.array([[t for _, t in rr] for rr in rows]),
            )

        def observe(step: int, runs: np.ndarray, members: np.ndarray, tasks: np.ndarray, rewards: np.ndarray):
            for i, r in enumerate(runs):
                groups: dict[str, list[tuple[int, list[float]]]] = {m: [] for m in members_}
                for j in range(self.k):
                    groups[members_[members[i, j]]].append((int(tasks[i, j]), rewards[i, j].tolist()))
                planners[r].observe(step, groups)

        out = simulate(Learners(self.model, self.seeds), rows_at, observe=observe)
        if label is not None and self.world.flaky:
            self.flaky_share[label] = flaky_weight * len(members_)
        return out

    def oracle_runs(self) -> np.ndarray:
        """Reference only: each row to the member with the largest expected gain in mean success, from the
        true skills (a greedy policy with perfect knowledge; tasks cycled in order)."""
        md, k = self.model, self.k
        learners = Learners(md, self.seeds)
        used = np.zeros((len(self.seeds), md.n), dtype=int)

        def rows_at(step: int, runs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            skill = learners.skill[runs].copy()
            members = np.zeros((len(runs), k), dtype=int)
            every = np.arange(len(runs))
            for j in range(k):
                p = md.success(skill, step)
                taught = (1 - p**GROUP - (1 - p) ** GROUP).mean(-1)  # chance a row teaches, per member
                base = md.mean_success(md.success(skill, step + 1))
                delta = taught[:, :, None] * md.rate[None, None, :] * md.teach[None]  # (runs, from, to)
                value = np.stack(
                    [md.mean_success(md.success(skill + delta[:, m], step + 1)) - base for m in range(md.n)],
                    1,
                )
                pick = value.argmax(1)
                members[:, j] = pick
                skill += delta[every, pick]
            tasks = np.zeros_like(members)
            for i, r in enumerate(runs):
                for j in range(k):
                    tasks[i, j] = used[r, members[i, j]] % TASKS
                    used[r, members[i, j]] += 1
            return members, tasks

        return simulate(learners, rows_at)


def simplex(step: float, n: int) -> np.ndarray:
    parts_n = round(1 / step)
    return (
        np.array(
            [
                (*parts, parts_n - sum(parts))
                for parts in itertools.product(range(parts_n + 1), repeat=n - 1)
                if sum(parts) <= parts_n
            ],
            dtype=float,
        )
        / parts_n
    )


def run_world(world: World, seeds: Sequence[int]) -> dict[str, float]:
    """Every variant of one world, printed; the medians by variant."""
    t0 = time.perf_counter()
    bench = Bench(world, seeds)
    runs: dict[str, np.ndarray] = {}
    runs["uniform"] = bench.static_runs()
    horizon = min(MAX_STEPS, int(median(runs["uniform"])))  # the uniform point is searched too
    best_w, runs["best static"], n_points = bench.best_static(horizon)
    if world.schedule is not None:
        runs["schedule (hand-made)"] = bench.static_runs(schedule=world.schedule)
    default = AdaptiveConfig().signal
    for signal in SIGNALS:
        label = f"adaptive: {signal}" + (" (default)" if signal == default else "")
        runs[label] = bench.adaptive_runs({"signal": signal}, label=label)
    unfiltered = "adaptive: default, no task filter"
    runs[unfiltered] = bench.adaptive_runs({"filter": None}, label=unfiltered)
    # Like for like: the static weights through the same task filter.
    runs["uniform + task filter"] = bench.adaptive_runs({"warmup_steps": MAX_STEPS + 1})
    runs["best static + task filter"] = bench.adaptive_runs(
        {"warmup_steps": MAX_STEPS + 1}, base_weights=best_w
    )
    runs["oracle (reference only)"] = bench.oracle_runs()
    results = {name: median(r) for name, r in runs.items()}
    print(
        f"world {world.name}: {bench.model.n} members, {bench.k} prompts x {GROUP} rollouts per step, target "
        f"mean success {TARGET}, {len(seeds)} seeds, medians of steps to target ({MAX_STEPS + 1} = never)"
    )
    for name, steps in results.items():
        flaky = bench.flaky_share.get(name)
        note = f"   flaky weight <= {flaky:.2f}x uniform" if flaky is not None else ""
        print(f"  {name:34s} {steps:6.1f}   (seeds: {min(runs[name])}-{max(runs[name])}){note}")
    shown = {k: round(v, 2) for k, v in best_w.items() if v}
    print(f"  best static weights ({n_points} points searched): {shown}")
    adaptive = results[f"adaptive: {default} (default)"]
    results["default"] = adaptive
    print(
        f"  world {world.name}: uniform/adaptive {results['uniform'] / adaptive:.2f}, best_static/adaptive "
        f"{results['best static'] / adaptive:.2f}   ({time.perf_counter() - t0:.0f} s, load {load()})"
    )
    sys.stdout.flush()
    return results


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", nargs="*", choices=sorted(WORLDS), default=list(WORLDS))
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    seeds = tuple(range(args.seeds))
    t0 = time.perf_counter()
    print(f"load average at start: {load()}")
    every = {name: run_world(WORLDS[name], seeds) for name in args.world}
    print("summary (adaptive = the default, AdaptiveConfig()):")
    for name, r in every.items():
        print(
            f"  {name:12s} uniform/adaptive {r['uniform'] / r['default']:.2f}   "
            f"best_static/adaptive {r['best static'] / r['default']:.2f}"
        )
    ratios = [r["best static"] / r["default"] for r in every.values()]
    worst = min(every, key=lambda n: every[n]["uniform"] / every[n]["default"])
    print(f"(ran in {time.perf_counter() - t0:.0f} s, load average at end: {load()})")
    geo = math.exp(statistics.fmean(math.log(x) for x in ratios))
    print(f"ratio steps_to_target best_static/adaptive: {geo:.2f} (geometric mean over worlds)")
    print(
        f"ratio steps_to_target uniform/adaptive: {every[worst]['uniform'] / every[worst]['default']:.2f} "
        f"(worst world: {worst})"
    )


if __name__ == "__main__":
    main()
