"""Benchmark: ormix's own CPU per GRPO training step against the rollouts a step, R = 32 and R = 256.

A two-member `MixtureSpec` on `local:latency` (a child process, so the server's CPU is not this process's;
its session open and `work` tool wait ``--open-s`` / ``--tool-s``, 10 ms by default, asynchronously) trains
with `ConcurrentGRPOTrainer` on ormix's offline tiny model (CPU), with `ScriptedPolicy` in place of sampling
(each rollout calls `work`, then `submit`): the shape of `benchmarks/env_bound_step.py`'s ``mixture``
variant, groups of 8 (R / 8 prompts a step), rollout records written as training writes them.

Held fixed across R: the model, the script (2 tool rounds), the server's latencies, the groups of 8, the
mixture, the steps (``--steps``; the first is not measured: it loads and compiles).

How CPU is attributed (stdlib only, no deterministic profiler: cProfile sees one thread and slows the
Python-heavy parts most, which would skew the shares): a sampling thread reads, every ``--interval`` seconds,
each Python thread's own CPU clock (`time.pthread_getcpuclockid`) and its stack (`sys._current_frames`). The
CPU a thread used since the last sample goes to the owner of the stack it is in now: the innermost frame
whose file belongs to ``ormix`` (src/ormix, but ``ormix/demo`` — the scripted policy standing in for the
model's sampling — is its own bucket), ``trl``, ``transformers``, ``torch``, ``accelerate``, ``datasets``;
frames of the standard library and of other packages (httpx, anyio, numpy, ...) count for the owner that
called them. Threads ormix starts (named ``ormix-*``: the ORS portal event loop, tool-round workers) are
ormix's whole. The per-thread clocks add up exactly; only the split of one thread's CPU between owners is
sampled. What no Python thread accounts for (the process's CPU minus its Python threads': torch's native
intra-op threads) is ``native threads``. The sampler's own CPU is printed and left out. Python's cyclic
garbage collector is timed apart (`gc.callbacks`), by generation and by the thread it ran on: a full
(generation 2) collection walks the whole heap, the model's, TRL's and torch's objects included, on the
thread whose allocation triggered it — ormix's loop thread, mostly, at R = 256 (about one a step, ~0.3 s on
the 2-core machine), none in a few steps at R = 32 — so ormix's figure is printed with and without the full
collections that ran on its threads.

    python benchmarks/scale_step.py [--sizes 32,256] [--steps 4] [--interval 0.002] [--gc-freeze]

``--gc-freeze`` trains with the heap frozen once the trainer is built, as `ormix train` and `ormix eval` do
(`ormix.app._command.frozen_heap`): the full collections then skip the model's, TRL's and torch's objects.

`run()` returns the printed lines (`benchmarks/scale.py --parts step` imports it). Lines: per R, the CPU per
step by owner, by thread, the GC's, and ormix's by its innermost function; then
``scale ormix cpu per step vs rollouts: exponent X (floor 1) ...; without the full GC collections on its
threads: exponent Y ...`` and ``ormix share of the step R=256: X%``. Diagnosis: ``--ping-s off`` (no
keepalive pings), ``--max-in-flight N`` (fewer tool-round threads), ``--profile-loop N`` (cProfile of the
loop thread, its N costliest functions a rollout).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import math
import os
import pstats
import shutil
import sys
import tempfile
import threading
import time
import warnings
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")
os.environ.setdefault("OPENREWARD_LOG_LEVEL", "WARNING")

HERE = Path(__file__).resolve().parent
GENERATIONS = 8
ROUNDS = 2  # a `work` call, then `submit`

_OWNERS = (
    ("/ormix/workbench/", "scripted policy"),
    ("/ormix/", "ormix"),
    ("/trl/", "trl"),
    ("/transformers/", "transformers"),
    ("/torch/", "torch"),
    ("/accelerate/", "accelerate"),
    ("/datasets/", "datasets"),
    (str(HERE) + "/", "benchmark"),
)


def owner_of(filename: str) -> str | None:
    """The owner a frame's file belongs to, or None (the standard library and other packages).

    Example:
        >>> owner_of("/x/src/ormix/rollout/_batch.py"),
        owner_of("/x/site-packages/torch/nn/modules/linear.py")
        ('ormix', 'torch')
        >>> owner_of("/usr/lib/python3.11/json/encoder.py") is None
        True
    """
    for marker, owner in _OWNERS:
        if marker in filename:
            return owner
    return None


def _ormix_site(frame: Any, thread: str) -> str:
    """``module.py:function`` of the innermost ormix frame (the ormix code that spent the CPU, itself or
    through what it called), or the thread's name where none is on the stack (an idle event loop's own)."""
    f = frame
    while f is not None:
        if owner_of(f.f_code.co_filename) == "ormix":
            path = f.f_code.co_filename
            return f"{path[path.rindex('/ormix/') + 1 :]}:{f.f_code.co_name}"
        f = f.f_back
    return f"({thread.rstrip('0123456789_')} thread, no ormix frame on the stack)"


class CpuSampler:
    """Attributes each Python thread's CPU to the owner of its stack (the module docstring says how)."""

    def __init__(self, interval: float = 0.002) -> None:
        self.interval = interval
        self.cpu: dict[str, float] = defaultdict(float)
        self.samples = 0
        self._last: dict[int, float] = {}  # CPU clock id → its last reading
        self.by_thread: dict[str, float] = defaultdict(float)  # thread name (numbers dropped) → CPU
        self.where: dict[str, float] = defaultdict(float)  # ormix's CPU by its innermost ormix function
        self.gc_cpu: dict[tuple[str, int], float] = defaultdict(float)  # (thread, generation) → CPU
        self.gc_count: dict[int, int] = defaultdict(int)
        self._gc_t0 = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.own_cpu = 0.0
        self.process_cpu = 0.0
        self._process0 = 0.0

    def _clock(self, ident: int) -> tuple[int, float] | None:
        """(the thread's CPU clock id, its CPU seconds). The id is asked anew each time: a thread's ident
        (its pthread_t) is reused by a later thread, the clock id (made from the kernel's thread id) is
        not."""
        try:
            clock = time.pthread_getcpuclockid(ident)
            return clock, time.clock_gettime(clock)
        except (OSError, ValueError):  # the thread ended between the two calls
            return None

    def start(self) -> None:
        self._stop.clear()
        for ident in sys._current_frames():  # the calling thread's too (the sampler does not run yet)
            if (read := self._clock(ident)) is not None:
                self._last[read[0]] = read[1]
        self._process0 = time.process_time()
        gc.callbacks.append(self._gc)
        self._thread = threading.Thread(target=self._run, name="scale-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join()
        self._thread = None
        gc.callbacks.remove(self._gc)
        self.process_cpu += time.process_time() - self._process0

    def _gc(self, phase: str, info: dict[str, Any]) -> None:
        # A collection runs on the thread whose allocation triggered it, holding the GIL: its CPU is that
        # thread's, counted for whatever that thread was running.
        if phase == "start":
            self._gc_t0 = time.thread_time()
            return
        spent = time.thread_time() - self._gc_t0
        name = threading.current_thread().name.rstrip("0123456789_")
        self.gc_cpu[(name, info["generation"])] += spent
        self.gc_count[info["generation"]] += 1

    def _run(self) -> None:
        t0 = time.thread_time()
        while not self._stop.wait(self.interval):
            self.sample()
        self.sample()
        self.own_cpu += time.thread_time() - t0

    def sample(self) -> None:
        me = threading.get_ident()
        names = {t.ident: t.name for t in threading.enumerate() if t.ident is not None}
        self.samples += 1
        for ident, frame in sys._current_frames().items():
            if ident == me:
                continue
            read = self._clock(ident)
            if read is None:
                continue
            clock, now = read
            # A thread first seen after start() was born since: all its CPU is in the window.
            spent = now - self._last.get(clock, 0.0)
            self._last[clock] = now
            if spent <= 0:
                continue
            name = names.get(ident, "")
            self.by_thread[name.rstrip("0123456789_") or "(unnamed)"] += spent
            owner = "ormix" if name.startswith("ormix-") else None
            f: Any = frame
            while owner is None and f is not None:
                owner = owner_of(f.f_code.co_filename)
                f = f.f_back
            self.cpu[owner or "other (no owner on the stack)"] += spent
            if owner == "ormix":
                self.where[_ormix_site(frame, name)] += spent

    def python_cpu(self) -> float:
        return sum(self.cpu.values())


def _load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def exponent(sizes: list[int], values: list[float]) -> float:
    """Least-squares slope of log(value) over log(size).

    Example:
        >>> round(exponent([32, 256], [1.0, 8.0]), 3)
        1.0
    """
    xs = [math.log(s) for s in sizes]
    ys = [math.log(max(v, 1e-12)) for v in values]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def profile_steps(
    url: str,
    rollouts: int,
    steps: int,
    model: str,
    interval: float,
    loop_profile: Any = None,
    spec_kwargs: dict[str, Any] | None = None,
    trainer_kwargs: dict[str, Any] | None = None,
    gc_freeze: bool = False,
) -> tuple[CpuSampler, int]:
    """Train ``steps`` steps at R = ``rollouts``; the sampler over steps 2.. and the steps it covered.
    ``loop_profile``: a `cProfile.Profile` to run on ormix's portal loop thread over the same steps.
    ``gc_freeze``: train with the heap frozen, as `ormix train` does (`ormix.app._command.frozen_heap`)."""
    from transformers import TrainerCallback
    from trl import GRPOConfig

    from ormix import MixtureSpec, OpenRewardSpec
    from ormix.app._command import frozen_heap
    from ormix.ors._bridge import portal
    from ormix.trl._trainer import ConcurrentGRPOTrainer
    from ormix.workbench._scripted import ScriptedPolicy

    sys.path.insert(0, str(HERE))
    from env_bound_step import script_for

    out = tempfile.mkdtemp(prefix=f"ormix-scale-step-{rollouts}-")
    args = GRPOConfig(
        output_dir=out,
        per_device_train_batch_size=rollouts,
        num_generations=GENERATIONS,
        max_steps=steps,
        max_completion_length=64 * ROUNDS,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        bf16=False,
        activation_checkpointing=False,
        save_strategy="no",
        shuffle_dataset=False,
        remove_unused_columns=False,
        disable_tqdm=True,
        max_tool_calling_iterations=ROUNDS,
    )
    # local:latency has 64 tasks: the two members take half each (a longer run cycles them).
    mix = MixtureSpec(
        {
            "a": OpenRewardSpec(url, env_name="latency", indices=list(range(32)), **(spec_kwargs or {})),
            "b": OpenRewardSpec(url, env_name="latency", indices=list(range(32, 64)), **(spec_kwargs or {})),
        },
        prompts_per_step=rollouts // GENERATIONS,
        num_steps=steps,
    )
    sampler = CpuSampler(interval)
    measured = [0]

    class Window(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step == 1:  # step 2 begins: the first (loading) step is over
                sampler.start()
                if loop_profile is not None:  # a thread's profiler is set from that thread
                    portal().call(loop_profile.enable)

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step >= 2:
                measured[0] += 1

        def on_train_end(self, args, state, control, **kwargs):
            if sampler._thread is not None:
                sampler.stop()
                if loop_profile is not None:
                    portal().call(loop_profile.disable)

    trainer = ConcurrentGRPOTrainer(
        model=model,
        args=args,
        train_dataset=mix.train_dataset,
        environment_factory=mix.environment_factory,
        reward_funcs=mix.reward_funcs,
        callbacks=[*mix.callbacks, Window()],
        **(trainer_kwargs or {}),
    )
    ScriptedPolicy(script_for(ROUNDS)).attach(trainer)
    with warnings.catch_warnings(), frozen_heap() if gc_freeze else contextlib.nullcontext():
        warnings.simplefilter("ignore")
        trainer.train()
    mix.close()
    records = Path(out, "rollouts", "rank-0.jsonl")
    lines = sum(1 for _ in records.open()) if records.exists() else 0
    shutil.rmtree(out, ignore_errors=True)
    assert lines == rollouts * steps, f"{lines} rollout records, expected {rollouts * steps}"
    return sampler, measured[0]


def _print_loop_profile(profile: Any, rollouts: int, top: int, emit: Callable[[str], None]) -> None:
    """The portal loop thread's functions with the most CPU of their own, in microseconds a rollout."""
    stats = pstats.Stats(profile)
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:top]  # type: ignore[attr-defined]
    total = sum(v[2] for v in stats.stats.values())  # type: ignore[attr-defined]
    emit(f"  loop thread (cProfile, thread CPU): {1e6 * total / rollouts:.0f} us a rollout in all; top own:")
    for (path, lineno, fn), (_cc, nc, tt, ct, _callers) in rows:
        where = path[path.rindex("/") + 1 :] if "/" in path else path
        emit(
            f"    {1e6 * tt / rollouts:7.1f} us/rollout own, {1e6 * ct / rollouts:7.1f} cumulative, "
            f"{nc / rollouts:6.2f} calls/rollout  {where}:{lineno}:{fn}"
        )


def run(
    sizes: list[int] | None = None,
    steps: int = 4,
    interval: float = 0.002,
    open_s: float = 0.01,
    tool_s: float = 0.01,
    say: Callable[[str], None] = print,
    top_sites: int = 8,
    profile_loop: int = 0,
    ping_s: float | str | None = "default",
    max_in_flight: int | None = None,
    gc_freeze: bool = False,
) -> list[str]:
    """Profile each R; returns (and says) the printed lines."""
    from ormix.server import serve_in_process
    from ormix.workbench._tiny import build_tiny_model

    sizes = sorted(sizes or [32, 256])
    lines: list[str] = []

    def emit(text: str) -> None:
        lines.append(text)
        say(text)

    model = str(build_tiny_model())
    env = {"ORMIX_LATENCY_OPEN_S": str(open_s), "ORMIX_LATENCY_TOOL_S": str(tool_s)}
    ormix_per_step, shares, without_full_gc = [], [], []
    with serve_in_process(["local:latency"], env=env) as server:
        for r in sizes:
            t0 = time.perf_counter()
            loop_profile = cProfile.Profile(time.thread_time) if profile_loop else None
            pings = {} if ping_s == "default" else {"ping_interval_s": ping_s}
            more = {"max_in_flight": max_in_flight} if max_in_flight else {}
            sampler, n = profile_steps(
                server.url, r, steps, model, interval, loop_profile, pings, more, gc_freeze=gc_freeze
            )
            if loop_profile is not None:
                _print_loop_profile(loop_profile, r * n, profile_loop, emit)
            wall = time.perf_counter() - t0
            total = sampler.process_cpu - sampler.own_cpu
            native = max(0.0, sampler.process_cpu - sampler.python_cpu() - sampler.own_cpu)
            by_owner = dict(sampler.cpu)
            by_owner["native threads"] = native
            ormix = by_owner.get("ormix", 0.0)
            ormix_per_step.append(ormix / n)
            # A full (generation 2) collection walks the whole heap — the model's, TRL's and torch's objects
            # too — on whichever thread's allocation triggers it; ~1 a step at R = 256, none in a few steps at
            # R = 32: the figure without the ones that ran on ormix's threads is printed beside.
            full_gc = sum(
                v for (name, gen), v in sampler.gc_cpu.items() if gen == 2 and name.startswith("ormix-")
            )
            without_full_gc.append((ormix - full_gc) / n)
            shares.append(ormix / total if total else float("nan"))
            parts = ", ".join(
                f"{k} {1000 * v / n:.0f} ms" for k, v in sorted(by_owner.items(), key=lambda kv: -kv[1])
            )
            emit(
                f"  step R={r} ({r // GENERATIONS} prompts x {GENERATIONS}, {n} steps measured, "
                f"{'heap frozen, ' if gc_freeze else ''}{wall:.0f} s "
                f"wall in all): process CPU {1000 * total / n:.0f} ms/step — {parts}; ormix "
                f"{1000 * ormix / n:.0f} ms/step = {100 * shares[-1]:.1f}% of the step's CPU, "
                f"{1e3 * ormix / n / r:.2f} ms a rollout (sampler: {sampler.samples} samples, its own "
                f"{sampler.own_cpu:.1f} s left out)  [{_load()}]"
            )
            threads = ", ".join(
                f"{name} {1000 * v / n:.0f}"
                for name, v in sorted(sampler.by_thread.items(), key=lambda kv: -kv[1])
                if v * 1000 / n >= 0.5
            )
            emit(f"  CPU by thread at R={r} (ms/step; exact, per-thread clocks): {threads}")
            gc_total = sum(sampler.gc_cpu.values())
            gc_parts = ", ".join(
                f"{name} gen{gen} {1000 * v / n:.0f}"
                for (name, gen), v in sorted(sampler.gc_cpu.items(), key=lambda kv: -kv[1])
                if v * 1000 / n >= 1
            )
            counts = ", ".join(f"gen{g} {c / n:.0f}" for g, c in sorted(sampler.gc_count.items()))
            emit(
                f"  Python's cyclic GC at R={r}: {1000 * gc_total / n:.0f} ms/step "
                f"({100 * gc_total / total:.1f}% of the step's CPU; collections a step: {counts}); by the "
                f"thread it ran on: {gc_parts}"
            )
            top = sorted(sampler.where.items(), key=lambda kv: -kv[1])[:top_sites]
            emit(
                f"  ormix's CPU at R={r} by its innermost function (ms/step): "
                + ", ".join(f"{site} {1000 * v / n:.0f}" for site, v in top)
            )
    if len(sizes) > 1:
        emit(
            f"scale ormix cpu per step vs rollouts: exponent {exponent(sizes, ormix_per_step):.2f} (floor 1) "
            f"over {sizes[0]:,}→{sizes[-1]:,}; at {sizes[-1]:,}: {1000 * ormix_per_step[-1]:.0f} ms a step, "
            f"{100 * shares[-1]:.1f}% of the step's CPU; without the full GC collections on its threads: "
            f"exponent {exponent(sizes, without_full_gc):.2f}, {1000 * without_full_gc[-1]:.0f} ms a step  "
            f"[{_load()}]"
        )
    emit(f"ormix share of the step R={sizes[-1]}: {100 * shares[-1]:.1f}%")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="32,256")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--interval", type=float, default=0.002)
    parser.add_argument("--open-s", type=float, default=0.01)
    parser.add_argument("--tool-s", type=float, default=0.01)
    parser.add_argument(
        "--ping-s",
        default="default",
        help="the members' keepalive period (ping_interval_s; 'off' disables; default: ormix's, 10 s)",
    )
    parser.add_argument(
        "--max-in-flight", type=int, default=None, help="ConcurrentGRPOTrainer's (default: its own, 256)"
    )
    parser.add_argument(
        "--profile-loop", type=int, default=0, help="print the N costliest functions of ormix's loop thread"
    )
    parser.add_argument(
        "--gc-freeze",
        action="store_true",
        help="train with the heap frozen, as `ormix train` does (gc.freeze)",
    )
    args = parser.parse_args()
    pings: float | str | None = args.ping_s
    if args.ping_s == "off":
        pings = None
    elif args.ping_s != "default":
        pings = float(args.ping_s)
    run(
        [int(s) for s in args.sizes.split(",")],
        steps=args.steps,
        interval=args.interval,
        open_s=args.open_s,
        tool_s=args.tool_s,
        profile_loop=args.profile_loop,
        ping_s=pings,
        max_in_flight=args.max_in_flight,
        gc_freeze=args.gc_freeze,
    )


if __name__ == "__main__":
    main()
