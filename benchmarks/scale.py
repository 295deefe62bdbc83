"""Benchmark: how ormix's costs grow with the work (issue 42): a growth exponent per cost and the figure at
the largest size, with the load average beside each figure.

The exponent is the least-squares slope of log(cost) over log(size): 1.0 is linear, 0.0 flat. Costs are CPU
seconds of this process (`time.process_time`: on the shared 2-core machine the wall clock mostly measures the
others' load), wall seconds beside where a server or a child is in the way.

Parts (``--parts``, comma-separated; all by default):

- ``planner``: an adaptive planner (the default signal, task filter on, groups of 4 rollouts with seeded
  rewards), asked for every step's rows and fed its groups, as a trainer does. Time per step and the JSON
  size of ``Planner.state_dict()`` against the steps (1k → 10k steps of 16 members × ``--steps-tasks`` tasks
  × ``--steps-prompts`` prompts; by default 1,250 × 32, the issue's 10k × 256 scaled down 8x, so that tasks
  cycle as often); against the members (2 → 128; 256 prompts a step, 1k tasks each); against the tasks
  (1k → 1M per member; 4 members, 256 prompts a step): the build (construction and step 1, linear at best)
  and the steady step. Per-step figures are measured once the statistics window is full.
- ``dataset``: ``OpenRewardSpec(...).train_dataset`` of a local environment with 1k → 100k tasks
  (`benchmarks/scale_env.py`, served on a thread of this process, its server started before the clock), by
  ``num_tasks`` (one ``task_range`` request) and by explicit ``indices`` (per-task requests).
- ``mixture-dataset``: ``MixtureSpec(...).train_dataset`` of one member on a `scale_env` catalog of 1k → 100k
  tasks served by a child process (this process's CPU is then the client's and the mixture's alone; the
  server's is printed beside), by ``num_tasks`` (one ``task_range`` request) and by explicit ``indices``
  (per-task requests), both to 100k.
- ``records-write``: the cost of writing rollout records as a training rank does (`rollout_record`,
  `TelemetryRun.note`, `TelemetryRun.write`), 10k → 1M rollouts at 256 a step: CPU and bytes a record
  (`benchmarks/scale_records.py`'s ``write_cost``).
- ``records``, ``sessions``, ``step``: `benchmarks/scale_records.py`, `benchmarks/scale_sessions.py` and
  `benchmarks/scale_step.py` (ormix's own CPU per GRPO step at R = 32 and 256, sampled per thread, TRL's,
  transformers' and torch's shares apart) (their ``run``), skipped with a line when absent.

    python benchmarks/scale.py [--parts planner,dataset,mixture-dataset,records-write,records,sessions,step]
    python benchmarks/scale.py --quick
    python benchmarks/scale.py --parts planner-steps --steps-prompts 256 --steps-tasks 10000 --steps 1000,2000

Lines read ``scale <cost> vs <size>: exponent X (floor F) over A→B; at B: <figure> [load L]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")
os.environ.setdefault("OPENREWARD_LOG_LEVEL", "WARNING")

HERE = Path(__file__).resolve().parent
GROUP = 4  # rollouts a group


def exponent(sizes: Sequence[float], costs: Sequence[float]) -> float:
    """The least-squares slope of log(cost) over log(size)."""
    xs = [math.log(s) for s in sizes]
    ys = [math.log(max(c, 1e-12)) for c in costs]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else float("nan")


def load() -> str:
    return f"[load {os.getloadavg()[0]:.1f}]"


def line(cost: str, size: str, sizes: Sequence[int], costs: Sequence[float], floor: float, at: str) -> None:
    print(
        f"scale {cost} vs {size}: exponent {exponent(sizes, costs):.2f} (floor {floor:g}) over "
        f"{sizes[0]:,}→{sizes[-1]:,}; at {sizes[-1]:,}: {at} {load()}",
        flush=True,
    )


# ── planner ───────────────────────────────────────────────────────────────────────────────────────────────


def _planner(members: int, tasks: int, k: int, seed: int = 0) -> Any:
    from ormix.config import MixtureConfig
    from ormix.mixture._planner import Planner

    names = [f"m{i:03d}" for i in range(members)]
    cfg = MixtureConfig(
        members={m: {"target": "local:echo"} for m in names},
        strategy="adaptive",
        prompts_per_step=k,
        seed=seed,
    )
    return Planner(cfg, {m: range(tasks) for m in names})


class _Driver:
    """Asks a planner for each step's rows and feeds it their groups; times the planner's calls alone."""

    def __init__(self, planner: Any) -> None:
        self.planner = planner
        self.step = 0
        self.cpu = 0.0
        # Each member's chance of success drifts slowly, so the adaptive weights keep moving.
        self.rates = {m: random.Random(m).random() for m in planner.members}

    def run(self, steps: int) -> float:
        """Drive `steps` more steps; the planner's CPU seconds for them."""
        spent = 0.0
        for _ in range(steps):
            self.step += 1
            s = self.step
            t0 = time.process_time()
            rows = self.planner.rows(s)
            spent += time.process_time() - t0
            rng = random.Random(s)
            groups: dict[str, list[tuple[int, list[float]]]] = {}
            for m, t in rows:
                p = min(1.0, self.rates[m] + 0.1 * math.sin(s / 50))
                groups.setdefault(m, []).append((t, [float(rng.random() < p) for _ in range(GROUP)]))
            t0 = time.process_time()
            self.planner.observe(s, groups)
            spent += time.process_time() - t0
        self.cpu += spent
        return spent

    def state_bytes(self) -> int:
        return len(json.dumps(self.planner.state_dict()))


def _steady(planner: Any) -> int:
    """Steps until the statistics window is full (the per-step cost is flat from there)."""
    return planner.lag + planner._window + 2


def planner_steps(checkpoints: Sequence[int], k: int, tasks: int) -> None:
    driver = _Driver(_planner(16, tasks, k))
    per_step, sizes, totals = [], [], []
    sample = min(200, checkpoints[0] // 2)
    for c in checkpoints:
        driver.run(c - sample - driver.step)
        per_step.append(driver.run(sample) / sample)
        sizes.append(driver.state_bytes())
        totals.append(driver.cpu)
        print(
            f"  planner steps={c:,}: {1000 * per_step[-1]:.2f} ms/step (last {sample}), state "
            f"{sizes[-1] / 1e6:.3f} MB, {driver.cpu:.1f} s in all {load()}",
            flush=True,
        )
    label = f"steps (16 members x {tasks:,} tasks x {k} prompts)"
    line("planner cpu total", label, checkpoints, totals, 1, f"{totals[-1]:.1f} s")
    line("planner cpu per step", label, checkpoints, per_step, 0, f"{1000 * per_step[-1]:.2f} ms")
    line("planner state size", label, checkpoints, sizes, 0, f"{sizes[-1] / 1e6:.3f} MB")
    print(
        f"ratio planner_state steps={checkpoints[-1]}/{checkpoints[0]}: {sizes[-1] / sizes[0]:.2f}",
        flush=True,
    )


def planner_members(counts: Sequence[int], k: int = 256, sample: int = 10) -> None:
    per_step, sizes = [], []
    for n in counts:
        driver = _Driver(_planner(n, 1_000, k))
        driver.run(_steady(driver.planner))
        per_step.append(driver.run(sample) / sample)
        sizes.append(driver.state_bytes())
        print(
            f"  planner members={n}: {1000 * per_step[-1]:.2f} ms/step, "
            f"state {sizes[-1] / 1e6:.3f} MB {load()}"
        )
    label = f"members (1k tasks each, {k} prompts)"
    line("planner cpu per step", label, counts, per_step, 1, f"{1000 * per_step[-1]:.2f} ms")
    line("planner state size", label, counts, sizes, 1, f"{sizes[-1] / 1e6:.3f} MB")


def planner_tasks(counts: Sequence[int], members: int = 4, k: int = 256, sample: int = 10) -> None:
    build, per_step, sizes = [], [], []
    for n in counts:
        t0 = time.process_time()
        driver = _Driver(_planner(members, n, k))
        made = time.process_time() - t0
        build.append(made + driver.run(1))
        driver.run(_steady(driver.planner))
        per_step.append(driver.run(sample) / sample)
        sizes.append(driver.state_bytes())
        print(
            f"  planner tasks={n:,}: build {build[-1]:.3f} s, {1000 * per_step[-1]:.2f} ms/step, state "
            f"{sizes[-1] / 1e6:.3f} MB {load()}",
            flush=True,
        )
        del driver
    label = f"tasks per member ({members} members, {k} prompts)"
    line("planner build cpu", label, counts, build, 1, f"{build[-1]:.3f} s")
    line("planner cpu per step", label, counts, per_step, 0, f"{1000 * per_step[-1]:.2f} ms")
    line("planner state size", label, counts, sizes, 0, f"{sizes[-1] / 1e6:.3f} MB")


# ── dataset ───────────────────────────────────────────────────────────────────────────────────────────────


def dataset(sizes: Sequence[int], index_sizes: Sequence[int]) -> None:
    sys.path.insert(0, str(HERE))
    from ormix import OpenRewardSpec

    def build(n: int, **how: Any) -> tuple[float, float]:
        target = f"scale_env:Catalog{n}"
        # The server starts (and lists its tasks) on a one-task build, before the clock.
        _ = OpenRewardSpec(target, num_tasks=1, local_serve="thread").train_dataset
        t0, c0 = time.perf_counter(), time.process_time()
        ds = OpenRewardSpec(target, local_serve="thread", **how).train_dataset
        assert len(ds) == n, (len(ds), n)
        return time.perf_counter() - t0, time.process_time() - c0

    for name, ns, how in (
        ("num_tasks (task_range)", sizes, lambda n: {"num_tasks": n}),
        (
            "indices (per-task)",
            index_sizes,
            lambda n: {"indices": list(range(1, n, 2)) + list(range(0, n, 2))},
        ),
    ):
        walls, cpus = [], []
        for n in ns:
            wall, cpu = build(n, **how(n))
            walls.append(wall)
            cpus.append(cpu)
            print(f"  dataset {name} tasks={n:,}: {wall:.2f} s wall, {cpu:.2f} s cpu {load()}", flush=True)
        line(
            f"dataset build cpu, {name}",
            "tasks",
            ns,
            cpus,
            1,
            f"{cpus[-1]:.2f} s cpu, {walls[-1]:.2f} s wall",
        )


def _tree_cpu(process: Any) -> float:
    """User + system CPU seconds of a process and its children (nan without one)."""
    if process is None:
        return float("nan")
    total = 0.0
    for p in [process, *process.children(recursive=True)]:
        times = p.cpu_times()
        total += times.user + times.system
    return total


def mixture_dataset(sizes: Sequence[int], index_sizes: Sequence[int]) -> None:
    """`MixtureSpec(...).train_dataset` of one member on a `scale_env` catalog served by a child process (so
    this process's CPU is the client's and the mixture's alone; the server's is printed beside), by
    ``num_tasks`` (one ``task_range`` request) and by explicit ``indices`` (per-task requests)."""
    import psutil

    from ormix import MixtureSpec, OpenRewardSpec
    from ormix.server import serve_in_process

    env = {"PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    for name, ns, how in (
        ("num_tasks (task_range)", sizes, lambda n: {"num_tasks": n}),
        (
            "indices (per-task)",
            index_sizes,
            lambda n: {"indices": list(range(1, n, 2)) + list(range(0, n, 2))},
        ),
    ):
        walls, cpus = [], []
        for n in ns:
            with serve_in_process([f"scale_env:Catalog{n}"], env=env) as server:
                child = psutil.Process(server.pid) if getattr(server, "pid", None) else None
                env_name = server.env_names[0]
                # The server lists its tasks on the first request: a one-task build, before the clock.
                _ = OpenRewardSpec(server.url, env_name=env_name, num_tasks=1).train_dataset
                s0 = _tree_cpu(child)
                t0, c0 = time.perf_counter(), time.process_time()
                mix = MixtureSpec({"a": OpenRewardSpec(server.url, env_name=env_name, **how(n))})
                ds = mix.train_dataset
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                server_cpu = _tree_cpu(child) - s0
                assert len(ds) == n, (len(ds), n)
                mix.close()
            walls.append(wall)
            cpus.append(cpu)
            print(
                f"  mixture dataset {name} tasks={n:,}: {cpu:.2f} s cpu (client), {wall:.2f} s wall, "
                f"server {server_cpu:.2f} s cpu {load()}",
                flush=True,
            )
        line(
            f"mixture dataset build cpu, {name}",
            "tasks",
            ns,
            cpus,
            1,
            f"{cpus[-1]:.2f} s cpu, {walls[-1]:.2f} s wall",
        )


# ── parts other scripts hold ──────────────────────────────────────────────────────────────────────────────


def other(name: str, function: str = "run", **kwargs: Any) -> None:
    path = HERE / f"scale_{name}.py"
    if not path.exists():
        print(f"scale {name}: skipped ({path.name} is absent)", flush=True)
        return
    spec = importlib.util.spec_from_file_location(f"scale_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    run: Callable[..., Any] | None = getattr(module, function, None)
    if run is None:
        print(f"scale {name}: skipped ({path.name} has no {function}())", flush=True)
        return
    run(say=lambda text: print(text, flush=True), **kwargs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--parts", default="planner,dataset,mixture-dataset,records-write,records,sessions,step"
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes: a check that it runs")
    # The run is 16 members x 10k tasks x 256 prompts (a member's tasks cycle every 625 steps); 10k
    # such steps take minutes of CPU, so by default the same proportions 8x smaller (every 625 steps too).
    parser.add_argument("--steps-prompts", type=int, default=32)
    parser.add_argument("--steps-tasks", type=int, default=1_250)
    parser.add_argument("--steps", default=None, help="the step counts of planner-steps, e.g. 1000,2000")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    if "planner" in parts:  # the three planner sweeps; each may be asked for alone
        parts |= {"planner-steps", "planner-members", "planner-tasks"}
    print(f"scale: {os.cpu_count()} cores, python {sys.version.split()[0]} {load()}", flush=True)
    quick = args.quick
    if "planner-steps" in parts:
        steps = [200, 400] if quick else [1_000, 2_000, 5_000, 10_000]
        if args.steps:
            steps = [int(x) for x in args.steps.split(",")]
        planner_steps(steps, args.steps_prompts, args.steps_tasks)
    if "planner-members" in parts:
        planner_members([2, 8] if quick else [2, 8, 32, 128])
    if "planner-tasks" in parts:
        planner_tasks([1_000, 10_000] if quick else [1_000, 10_000, 100_000, 1_000_000])
    if "dataset" in parts:
        if args.quick:
            dataset([1_000, 3_000], [1_000, 3_000])
        else:
            dataset([1_000, 3_000, 10_000, 30_000, 100_000], [1_000, 3_000, 10_000, 30_000])
    if "mixture-dataset" in parts:
        if quick:
            mixture_dataset([1_000, 3_000], [1_000, 3_000])
        else:
            big = [1_000, 3_000, 10_000, 30_000, 100_000]
            mixture_dataset(big, big)
    if "records-write" in parts:
        other("records", "write_cost", **({"sizes": [10_000, 100_000]} if quick else {}))
    for name in ("records", "sessions"):
        if name in parts:
            other(name)
    if "step" in parts:
        other("step", **({"sizes": [16, 32], "steps": 2} if quick else {}))


if __name__ == "__main__":
    main()
