"""How long does a GRPO step wait for its environments? TRL's own loop vs ormix's, side by side in one run.

An ORS server (`local:latency`, in a child process) whose session open waits 0.4 s and whose `work` tool waits
0.25 s, both asynchronously (the server holds many sessions at once, as a sandbox deployment does). GRPO
steps through TRL's GRPOTrainer on ormix's offline tiny model (CPU), with a scripted policy (`ScriptedPolicy`:
each turn calls `work`, the last one `submit`, which answers at once), so every variant makes the same calls:

- ``trl``: TRL's `trl.experimental.openreward.OpenRewardSpec` (TRL's sequential environment loop);
- ``ormix``: ormix's `OpenRewardSpec` with `ConcurrentGRPOTrainer`;
- ``mixture``: a two-member `MixtureSpec` (both members on the same server) with `ConcurrentGRPOTrainer`.

Two shapes: R = 8 rollouts with 1 tool round, and R = 32 rollouts with 3 tool rounds. Figures are medians over
the steps after the first (which includes loading). Besides the step time (TRL's `step_time`), each step's
environment wait is measured the same way for every variant: wall time inside the environments' `reset` and
tool methods and inside the reward functions (ormix closes a batch's sessions there), plus, for ormix, the
logged `ormix/env/open_s` (its sessions open before TRL's resets). The rest of the step ("other": generation,
loss, backward, optimizer, on CPU) is the same work for every variant, so it bounds the step-time ratio: a
reader can tell a missed step-time target that comes from model compute from one that comes from waiting.
Process CPU per step is printed too (the machine is shared: wall time of the compute varies with its load).

The ideal concurrent step waits one open and one call per round instead of R of each, so the ideal env-wait
ratio is R, and the ideal step ratio is TRL's step over TRL's step with its env wait divided by R; "of the
ideal" is the measured ratio over that. Last lines: ``ratio env_wait R=8: X``, ``ratio env_wait R=32: X``,
then ``ratio env_bound_step R=8: X`` and ``ratio env_bound_step R=32: X`` (TRL / ormix, the lower of the ormix
and mixture variants). Run: ``python benchmarks/env_bound_step.py`` (``ORMIX_BENCH_STEPS``, default 4, steps
per run).

(c) One member on 3 servers, one killed mid-round in step 3 (``failover``): the member's ``targets`` are three
`local:latency` servers (two in threads of this process, whose open sessions can be counted, one in a child
process, killed with SIGKILL while step 3's first tool round is in flight), R = 8 rollouts x 3 rounds, 6 steps
with `ConcurrentGRPOTrainer`. Printed: per step, the rollouts on each server and their outcomes; the coverage
of the rollouts NOT on the killed server after the kill; how long the killed server's in-flight rollouts took
to end (against the call timeout); the sessions left on the live servers after the run; step time before the
kill (step 2; step 1 includes loading) and after it (steps 4-6). Last lines: ``ratio failover_coverage: X``
(scored / rollouts not on the killed server, steps 3-6), ``ratio failover_end_within_timeout: X`` (slowest end
of a killed-server rollout / the call timeout; < 1 is within), ``ratio failover_step_after_before: X`` (median
step after / before). ``ORMIX_BENCH_PARTS=failover`` runs (c) alone (default: all).

The ``ormix`` and ``mixture`` variants above run with `ConcurrentGRPOTrainer`'s defaults (lookahead 1, no
straggler rule).

(a) Sessions opened ahead (``lookahead``): a server whose opens take 2 s and whose ``work`` takes 0.25 s,
R = 8 rollouts x 1 tool round: TRL's loop, ormix with ``lookahead=0`` and ormix with ``lookahead=1``. Printed
per variant: median step, and for ormix the median open wait on the critical path after step 1 (``open_s``:
the wait for opens still running plus the opens at the step) as a fraction of one open. Last lines:
``ratio lookahead_step: X`` (median step without / with lookahead; goal >= 1.5),
``ratio lookahead_open_wait_of_open: X`` (median open wait after step 1 with lookahead / one open; goal
<= 0.1),
``ratio lookahead_vs_trl: X``.

(b) Stragglers cut by rule: ``work`` latencies log-normal (median 0.3 s, sigma 1.2), R = 32 rollouts x 3 tool
rounds (then ``submit``), ormix without a rule and with two rules (``median_multiple`` once a fraction of the
round is back). Printed per variant: median step, median tool wait, fraction of rollouts cut; and, from a
simulation of the same latency distribution (no model), the env-wait ratio of each rule and of the best any
per-round cut could do while cutting at most 5% of rollouts (an oracle that knows every latency): what bounds
the step ratio. Last lines: ``ratio stragglers_step <rule>: X`` (median step without / with the rule) and
``ratio stragglers_cut <rule>: X`` (fraction of rollouts cut).

(d) Rollout upload (``upload``): the ``mixture`` variant at R = 32 rollouts x 3 tool rounds (the env-bound
shape of the base part), with ``telemetry.upload`` off and on (every rollout uploaded to the platform double
of tests/support/platform_double.py, on loopback in a child process, as the platform is another machine),
runs in ABBA order (off, on, on, off, ...; ``ORMIX_BENCH_UPLOAD_PAIRS`` pairs, default 2) on one server.
Printed per run: median step (steps after the first), process CPU per step, the load average beside them,
and for the runs with upload what the double stored against the rollouts recorded (lost, duplicated). Last
lines: ``ratio upload_step_on_off: X`` (median of the on runs' median steps / the off runs'; the goal is
<= 1.05), ``ratio upload_cpu_on_off: X`` (the same for the process CPU per step, the upload thread's
included) and ``ratio upload_thread_cpu_of_step: X`` (the upload thread's own CPU per step over the median
step with upload: what the upload takes from a step whatever the machine's load). ``ORMIX_BENCH_PARTS``
takes a comma list of ``base``, ``lookahead``, ``stragglers``, ``failover``, ``upload``.
"""

from __future__ import annotations

import functools
import inspect
import math
import os
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
import warnings

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")

OPEN_S, TOOL_S = 0.4, 0.25
STEPS = int(os.environ.get("ORMIX_BENCH_STEPS", "4"))


def script_for(rounds: int):
    from ormix.workbench._scripted import tool_call

    def script(ctx) -> str:
        word = re.search(r"word '(\w+)'", ctx.user)
        word = word.group(1) if word else "w0"
        if ctx.turn < rounds - 1:
            return tool_call("work", text=word)
        if ctx.turn == rounds - 1:
            return tool_call("submit", text=word)
        return "done"

    return script


class EnvClock:
    """Wall time a step spends inside environment calls and reward functions (per step, with process CPU)."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()  # TRL's: ormix's round workers call the same methods, not counted
        self.env_s = 0.0
        self.steps: list[tuple[float, float]] = []  # (env wait s, process CPU s) per step
        self._cpu0 = 0.0

    def timed(self, fn):
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def atimed(*args, **kwargs):
                t0 = time.perf_counter()
                try:
                    return await fn(*args, **kwargs)
                finally:
                    if threading.get_ident() == self.thread:
                        self.env_s += time.perf_counter() - t0

            return atimed

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                if threading.get_ident() == self.thread:
                    self.env_s += time.perf_counter() - t0

        return timed

    def factory(self, factory):
        """`factory` making environments whose `reset` and tool methods are timed (attributes kept)."""
        if isinstance(factory, dict):
            return {name: self.factory(f) for name, f in factory.items()}
        clock = self

        class Timed:
            def __getattr__(self, name):  # `episode_config_for`, `__name__`, ...: the factory's own
                return getattr(factory, name)

            def __call__(self):
                environment = factory()
                for name, _ in inspect.getmembers(type(environment), predicate=inspect.isfunction):
                    if name == "reset" or not name.startswith("_") and name != "get_reward":
                        # An instance attribute: TRL looks tools up with `getattr(environment, name)`.
                        setattr(environment, name, clock.timed(getattr(environment, name)))
                return environment

        return Timed()

    def callback(self):
        from transformers import TrainerCallback

        clock = self

        class StepClock(TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                clock.env_s, clock._cpu0 = 0.0, time.process_time()

            def on_step_end(self, args, state, control, **kwargs):
                clock.steps.append((clock.env_s, time.process_time() - clock._cpu0))

        return StepClock()


def run(
    variant: str,
    url: str,
    rollouts: int,
    rounds: int,
    model: str,
    *,
    steps: int | None = None,
    trainer_kwargs: dict | None = None,
    spec_kwargs: dict | None = None,
    telemetry: dict | None = None,
    logs_out: list | None = None,
) -> list[tuple[float, float, float]]:
    """(step time, env wait, process CPU) of each step; `logs_out` gets each step's log entry."""
    steps_n = STEPS if steps is None else steps
    from trl import GRPOConfig, GRPOTrainer

    from ormix import MixtureSpec, OpenRewardSpec
    from ormix.trl._trainer import ConcurrentGRPOTrainer
    from ormix.workbench._scripted import ScriptedPolicy

    args = GRPOConfig(
        output_dir=os.path.join(tempfile.gettempdir(), "ormix-bench-env", f"{variant}-{rollouts}"),
        per_device_train_batch_size=rollouts,
        num_generations=2,
        max_steps=steps_n,
        max_completion_length=64 * rounds,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        # Same for every variant, and what a CPU run should use: without native bf16 the CPU emulates it
        # (a matmul ~10x slower), and recomputing activations saves nothing for a model this small.
        bf16=False,
        activation_checkpointing=False,
        save_strategy="no",
        shuffle_dataset=False,
        remove_unused_columns=False,
        disable_tqdm=True,
        max_tool_calling_iterations=rounds,
    )
    # local:latency's train split has 64 tasks: a longer run cycles them (the plan, and TRL's epochs).
    tasks = min(rollouts // 2 * steps_n, 64)
    if variant == "trl":
        from trl.experimental.openreward import OpenRewardSpec as TRLSpec

        spec = TRLSpec(url, env_name="latency", num_tasks=tasks)
        trainer_class, inputs, closer = GRPOTrainer, spec, None  # closed below, from TRL's pool
    elif variant == "ormix":
        spec = OpenRewardSpec(url, env_name="latency", num_tasks=tasks, **(spec_kwargs or {}))
        trainer_class, inputs, closer = ConcurrentGRPOTrainer, spec, spec.close
    else:
        half = tasks // 2
        mix = MixtureSpec(
            {
                "a": OpenRewardSpec(url, env_name="latency", indices=list(range(half))),
                "b": OpenRewardSpec(url, env_name="latency", indices=list(range(half, 2 * half))),
            },
            prompts_per_step=rollouts // 2,
            num_steps=steps_n,
            telemetry=telemetry,
        )
        trainer_class, inputs, closer = ConcurrentGRPOTrainer, mix, mix.close
    clock = EnvClock()
    callbacks = [*(getattr(inputs, "callbacks", None) or []), clock.callback()]
    reward_funcs = inputs.reward_funcs
    reward_funcs = (
        [clock.timed(f) for f in reward_funcs]
        if isinstance(reward_funcs, list)
        else clock.timed(reward_funcs)
    )
    trainer = trainer_class(
        model=model,
        args=args,
        train_dataset=inputs.train_dataset,
        environment_factory=clock.factory(inputs.environment_factory),
        reward_funcs=reward_funcs,
        callbacks=callbacks,
        **(trainer_kwargs or {}),
    )
    ScriptedPolicy(script_for(rounds)).attach(trainer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    if closer is not None:
        closer()
    else:  # TRL never closes its environments; its SDK sessions would ping a stopped server
        for pool in getattr(trainer, "_environment_pool", {}).values():
            for environment in pool:
                environment._close()
    logs = [h for h in trainer.state.log_history if "step_time" in h]
    if logs_out is not None:
        logs_out.extend(logs)
    return [
        (h["step_time"], env_s + h.get("ormix/env/open_s", 0.0), cpu_s)
        for h, (env_s, cpu_s) in zip(logs, clock.steps, strict=True)
    ]


FAILOVER_STEPS, FAILOVER_KILL_STEP, FAILOVER_TIMEOUT_S = 6, 3, 10.0


def run_failover(model: str) -> dict[str, float]:
    """(c): one member on 3 local servers, one killed mid-round; returns its ratios."""
    from trl import GRPOConfig

    from ormix import OpenRewardSpec
    from ormix.server import serve_in_process, serve_in_thread
    from ormix.trl._trainer import ConcurrentGRPOTrainer
    from ormix.workbench._scripted import ScriptedPolicy

    os.environ["ORMIX_LATENCY_OPEN_S"], os.environ["ORMIX_LATENCY_TOOL_S"] = str(OPEN_S), str(TOOL_S)
    rollouts, rounds = 8, 3
    live = [serve_in_thread(["local:latency"]) for _ in range(2)]
    doomed = serve_in_process(["local:latency"])
    urls = [live[0].url, doomed.url, live[1].url]
    spec = OpenRewardSpec(
        urls,
        env_name="latency",
        num_tasks=rollouts // 2 * FAILOVER_STEPS,
        call_timeout_s=FAILOVER_TIMEOUT_S,
        ping_interval_s=1.0,
    )
    state = {"step": 0, "killed_at": None}
    seen: list[tuple[int, str | None, str, str | None, float]] = []  # step, server, outcome, error, end s

    class Kill:
        """The first `work` call of the kill step starts a timer that kills the child server mid-round."""

        def __init__(self, factory):
            self.factory = factory

        def __getattr__(self, name):
            return getattr(self.factory, name)

        def __call__(self):
            environment = self.factory()
            work = environment.work

            @functools.wraps(work)
            def timed_work(**kwargs):
                if state["step"] == FAILOVER_KILL_STEP and state["killed_at"] is None:
                    state["killed_at"] = time.monotonic() + 0.1
                    threading.Timer(0.1, os.kill, (doomed.pid, 9)).start()
                return work(**kwargs)

            environment.work = timed_work
            return environment

    def observe(fn):
        @functools.wraps(fn)
        def observed(*args, environments=None, **kwargs):
            for ep in environments or []:
                t_end = 0.0
                if ep.outcome.kind == "error" and state["killed_at"] is not None:
                    t_end = sum(c.latency_ms for c in ep.calls if c.error) / 1000
                seen.append((state["step"], ep.server, ep.outcome.kind, ep.outcome.error_kind, t_end))
            return fn(*args, environments=environments, **kwargs)

        return observed

    from transformers import TrainerCallback

    class Steps(TrainerCallback):
        def on_step_begin(self, args, st, control, **kwargs):
            state["step"] = st.global_step + 1

    args = GRPOConfig(
        output_dir=os.path.join(tempfile.gettempdir(), "ormix-bench-env", "failover"),
        per_device_train_batch_size=rollouts,
        num_generations=2,
        max_steps=FAILOVER_STEPS,
        max_completion_length=64 * rounds,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        bf16=False,
        activation_checkpointing=False,
        save_strategy="no",
        shuffle_dataset=False,
        remove_unused_columns=False,
        disable_tqdm=True,
        max_tool_calling_iterations=rounds,
    )
    try:
        trainer = ConcurrentGRPOTrainer(
            model=model,
            args=args,
            train_dataset=spec.train_dataset,
            environment_factory=Kill(spec.environment_factory),
            reward_funcs=observe(spec.reward_funcs),
            callbacks=[*spec.callbacks, Steps()],
        )
        ScriptedPolicy(script_for(rounds)).attach(trainer)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trainer.train()
        stats = spec.connection.server_stats()
        spec.close()
        left = [len(s.active_sessions()) for s in live]
    finally:
        for server in live:
            server.close()
        doomed.close()
    steps = [h["step_time"] for h in trainer.state.log_history if "step_time" in h]
    for step in range(1, FAILOVER_STEPS + 1):
        mine = [r for r in seen if r[0] == step]
        per = {u: [r for r in mine if r[1] == u] for u in urls}
        print(
            f"failover step {step}: {steps[step - 1]:.2f} s; "
            + "; ".join(
                f"{'killed ' if u == doomed.url else ''}server {i}: {len(rs)} rollouts, "
                f"{sum(r[2] == 'scored' for r in rs)} scored, {sum(r[2] == 'error' for r in rs)} errors"
                for i, (u, rs) in enumerate(per.items())
            ),
            flush=True,
        )
    after = [r for r in seen if r[0] >= FAILOVER_KILL_STEP]
    others = [r for r in after if r[1] != doomed.url]
    dead = [r for r in after if r[1] == doomed.url]
    coverage = sum(r[2] == "scored" for r in others) / max(1, len(others))
    slowest_end = max((r[4] for r in dead), default=0.0)
    before = statistics.median(steps[1 : FAILOVER_KILL_STEP - 1]) if FAILOVER_KILL_STEP > 2 else steps[0]
    after_s = statistics.median(steps[FAILOVER_KILL_STEP:])
    print(
        f"failover: after the kill {len(others)} rollouts not on the killed server, {coverage:.0%} scored; "
        f"{len(dead)} on it, errors {sorted({r[3] for r in dead if r[3]})}, slowest ended after "
        f"{slowest_end:.2f} s of calls (call timeout {FAILOVER_TIMEOUT_S:g} s); the run finished "
        f"{len(steps)}/{FAILOVER_STEPS} steps; sessions left on the live servers {left}; "
        f"server stats {[(s['in_rotation'], s['opened'], s['downs']) for s in stats]} (in rotation, opened, "
        f"taken out); median step before {before:.2f} s, after {after_s:.2f} s "
        f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)",
        flush=True,
    )
    return {
        "failover_coverage": coverage,
        "failover_end_within_timeout": slowest_end / FAILOVER_TIMEOUT_S,
        "failover_step_after_before": after_s / before,
    }


AHEAD_OPEN_S, AHEAD_TOOL_S, AHEAD_STEPS = 2.0, 0.25, 5


def run_lookahead(model: str) -> dict[str, float]:
    """(a): opens of 2 s, tools of 0.25 s, R = 8: TRL, ormix without and with lookahead; its ratios."""
    from ormix.server import serve_in_process

    env = {"ORMIX_LATENCY_OPEN_S": str(AHEAD_OPEN_S), "ORMIX_LATENCY_TOOL_S": str(AHEAD_TOOL_S)}
    step, open_wait = {}, {}
    with serve_in_process(["local:latency"], env=env) as server:
        os.environ["OPENREWARD_SESSION_URL"] = server.url
        for name, variant, kwargs in (
            ("trl", "trl", None),
            ("lookahead 0", "ormix", {"lookahead": 0}),
            ("lookahead 1", "ormix", {"lookahead": 1}),
            # Opens of 2 s behind steps of ~0.5 s (a quiet CPU): one step ahead hides a quarter of each open;
            # ceil(open / step) steps ahead hide all of it.
            ("lookahead 4", "ormix", {"lookahead": 4}),
        ):
            logs: list = []
            steps = run(
                variant, server.url, 8, 2, model, steps=AHEAD_STEPS, trainer_kwargs=kwargs, logs_out=logs
            )
            step[name] = statistics.median(s for s, _, _ in steps[1:])
            shown = ", ".join(f"{s:.2f}" for s, _, _ in steps)
            line = f"lookahead: {name:12s} median step {step[name]:5.2f} s (steps {shown})"
            if variant == "ormix":
                opens = [h["ormix/env/open_s"] for h in logs[1:]]
                # The rest of the step (generation, tools, loss) is the same work with or without lookahead:
                # it bounds the step ratio, and on a loaded machine it varies most.
                other = statistics.median(s - o for (s, _, _), o in zip(steps[1:], opens, strict=True))
                line += f"; rest of the step (not opens) median {other:.2f} s"
                ahead = [h.get("ormix/env/opened_ahead", 0.0) for h in logs]
                open_wait[name] = statistics.median(opens)
                line += (
                    f"; open wait after step 1: median {open_wait[name]:.2f} s = "
                    f"{open_wait[name] / AHEAD_OPEN_S:.0%} of one open (per step "
                    f"{', '.join(f'{o:.2f}' for o in opens)}); "
                    f"opened ahead per step {[int(a) for a in ahead]}"
                )
            print(line + f" (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)", flush=True)
    return {
        "lookahead_step": step["lookahead 0"] / step["lookahead 1"],
        "lookahead_open_wait_of_open": open_wait["lookahead 1"] / AHEAD_OPEN_S,
        "lookahead_vs_trl": step["trl"] / step["lookahead 1"],
        "lookahead_step@4": step["lookahead 0"] / step["lookahead 4"],
        "lookahead_open_wait_of_open@4": open_wait["lookahead 4"] / AHEAD_OPEN_S,
    }


STRAGGLER_MEDIAN_S, STRAGGLER_SIGMA, STRAGGLER_ROUNDS, STRAGGLER_STEPS = 0.3, 1.2, 3, 6
#: The rules compared: name -> `StragglerConfig` fields.
STRAGGLER_RULES = {
    "x10@90%": {"median_multiple": 10, "after_fraction": 0.9},
    "x13@95%": {"median_multiple": 13, "after_fraction": 0.95},
}


def simulate_rounds(
    rule: dict | None, rollouts: int, rounds: int, steps: int, seed: int = 1
) -> tuple[float, float]:
    """(mean env wait per step, fraction cut) of a rule on simulated log-normal latencies (no model)."""
    import random

    from ormix.config import StragglerConfig
    from ormix.rollout._stragglers import cut_at

    rng = random.Random(seed)
    policy = StragglerConfig(**rule) if rule else None
    total, cut = 0.0, 0
    for _ in range(steps):
        alive = rollouts
        for _ in range(rounds):
            times = sorted(
                STRAGGLER_MEDIAN_S * math.exp(STRAGGLER_SIGMA * rng.gauss(0, 1)) for _ in range(alive)
            )
            end = times[-1]
            for k in range(1, len(times) + 1):  # the rule asked each time a call is back, as the round does
                at = cut_at(policy, times[:k], len(times))
                nxt = times[k] if k < len(times) else None
                if at is not None and nxt is not None and at < nxt:
                    end = max(at, times[k - 1])
                    cut += len(times) - k
                    alive -= len(times) - k
                    break
            total += end
    return total / steps, cut / (steps * rollouts)


def oracle(rollouts: int, rounds: int, steps: int, budget: float = 0.05, seed: int = 1) -> float:
    """Env-wait ratio of the best per-step choice of cuts (at most `budget` of the rollouts), knowing every
    latency in advance: what no rule can beat."""
    import random

    rng = random.Random(seed)
    base = best = 0.0
    for n in range(steps):
        # At most `budget` of the rollouts over the steps (5% of 32: 1 or 2 a step, 1.6 on average).
        allowed = int(budget * rollouts * (n + 1)) - int(budget * rollouts * n)
        lat = [
            [STRAGGLER_MEDIAN_S * math.exp(STRAGGLER_SIGMA * rng.gauss(0, 1)) for _ in range(rollouts)]
            for _ in range(rounds)
        ]
        plain = sum(max(r) for r in lat)
        base += plain
        choice = plain
        cut: set[int] = set()
        for _ in range(allowed):  # greedy: the cut (rollout, from round) saving most, one at a time
            options = []
            for j in range(rollouts):
                if j in cut:
                    continue
                for r0 in range(rounds):
                    t = sum(
                        max(x for i, x in enumerate(lat[r]) if i not in cut and (i != j or r < r0))
                        for r in range(rounds)
                    )
                    options.append((t, j))
            t, j = min(options)
            if t < choice:
                choice, cut = t, cut | {j}
        best += choice
    return base / best


def run_stragglers(model: str) -> dict[str, float]:
    """(b): log-normal tool latencies, R = 32 x 3 rounds, without and with the straggler rules."""
    from ormix.server import serve_in_process

    rollouts = 32
    env = {
        "ORMIX_LATENCY_OPEN_S": "0.05",
        "ORMIX_LATENCY_TOOL_S": str(STRAGGLER_MEDIAN_S),
        "ORMIX_LATENCY_TOOL_SIGMA": str(STRAGGLER_SIGMA),
    }
    step, cut = {}, {}
    base_sim, _ = simulate_rounds(None, rollouts, STRAGGLER_ROUNDS, 3000)
    for name, rule in (("no rule", None), *STRAGGLER_RULES.items()):
        with serve_in_process(["local:latency"], env=env) as server:  # the same latency draws for each
            logs: list = []
            steps = run(
                "ormix",
                server.url,
                rollouts,
                STRAGGLER_ROUNDS + 1,
                model,
                steps=STRAGGLER_STEPS,
                spec_kwargs={"stragglers": rule} if rule else None,
                logs_out=logs,
            )
        kept = steps[1:]
        step[name] = statistics.median(s for s, _, _ in kept)
        tools = statistics.median(h["ormix/env/tools_s"] for h in logs[1:])
        tail = statistics.median(h["ormix/env/tail_wait_s"] for h in logs[1:])
        rates = [h.get("ormix/latency/straggler_rate", 0.0) for h in logs]
        cut[name] = statistics.mean(rates)
        sim = ""
        if rule:
            wait_sim, cut_sim = simulate_rounds(rule, rollouts, STRAGGLER_ROUNDS, 3000)
            sim = f"; simulated: env wait {base_sim / wait_sim:.2f}x, {cut_sim:.1%} cut"
        print(
            f"stragglers: {name:8s} median step {step[name]:5.2f} s, tools {tools:5.2f} s, "
            f"tail wait {tail:5.2f} s, "
            f"cut {cut[name]:.1%} (steps {', '.join(f'{s:.2f}' for s, _, _ in steps)}){sim} "
            f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)",
            flush=True,
        )
    # The best rule that sees only what came back: the one cut time per round (an absolute deadline, tuned
    # on the latency distribution itself) that cuts at most 5% of the rollouts.
    deadlines = []
    for deadline in (3.0, 3.5, 4.0, 4.5, 5.0, 6.0):
        wait_sim, cut_sim = simulate_rounds({"deadline_s": deadline}, rollouts, STRAGGLER_ROUNDS, 3000)
        if cut_sim <= 0.05:
            deadlines.append((base_sim / wait_sim, cut_sim, deadline))
    ratio, cut_share, deadline = max(deadlines)
    print(
        f"stragglers: the best deadline with <= 5% of rollouts cut (simulated): deadline_s {deadline:g}, "
        f"env wait {ratio:.2f}x, {cut_share:.1%} cut",
        flush=True,
    )
    best = oracle(rollouts, STRAGGLER_ROUNDS, 300)
    print(
        f"stragglers: the best any per-round cut can do with <= 5% of rollouts cut (oracle, simulated): "
        f"env wait {best:.2f}x; the step ratio is lower still (generation does not shrink)",
        flush=True,
    )
    out = {}
    for name in STRAGGLER_RULES:
        out[f"stragglers_step {name}"] = step["no rule"] / step[name]
        out[f"stragglers_cut {name}"] = cut[name]
    return out


_DOUBLE_CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
from support.platform_double import PlatformDouble
with PlatformDouble({}) as double:
    print(double.api_url, double.api_key, flush=True)
    for _ in sys.stdin:  # each line asks: rollouts stored so far, events received twice
        print(json.dumps([len(double.uploaded()), double.upload_duplicates]), flush=True)
"""


def run_upload(model: str) -> dict[str, float]:
    """(d): the mixture variant at R = 32 x 3 rounds with rollout upload off and on (ABBA order)."""
    import json
    import subprocess

    from ormix.server import serve_in_process
    from ormix.telemetry._records import read_records

    rollouts, rounds = 32, 3
    pairs = int(os.environ.get("ORMIX_BENCH_UPLOAD_PAIRS", "2"))
    env = {"ORMIX_LATENCY_OPEN_S": str(OPEN_S), "ORMIX_LATENCY_TOOL_S": str(TOOL_S)}
    medians: dict[str, list[float]] = {"off": [], "on": []}
    cpus: dict[str, list[float]] = {"off": [], "on": []}  # process CPU per step (the upload thread's too)
    upload_cpu: list[float] = []
    saved = {k: os.environ.get(k) for k in ("OPENREWARD_API_URL", "OPENREWARD_API_KEY")}
    tests = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests")
    # The double in a child process, as the platform is another machine: its work is not this process's.
    double = subprocess.Popen(
        [sys.executable, "-c", _DOUBLE_CHILD, tests], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert double.stdin is not None and double.stdout is not None

    def stored() -> tuple[int, int]:
        double.stdin.write("\n")
        double.stdin.flush()
        n, dup = json.loads(double.stdout.readline())
        return n, dup

    try:
        api_url, api_key = double.stdout.readline().split()
        os.environ.update(OPENREWARD_API_URL=api_url, OPENREWARD_API_KEY=api_key)
        with serve_in_process(["local:latency"], env=env) as server:
            # ABBA: off, on, on, off, ...: a load that drifts during the runs weighs on both alike.
            order = [m for k in range(pairs) for m in (("off", "on") if k % 2 == 0 else ("on", "off"))]
            for i, mode in enumerate(order):
                before, _ = stored()
                threads_before = set(threading.enumerate())
                out = os.path.join(tempfile.gettempdir(), "ormix-bench-env", f"mixture-{rollouts}")
                shutil.rmtree(os.path.join(out, "rollouts"), ignore_errors=True)  # this run's records only
                steps = run(
                    "mixture",
                    server.url,
                    rollouts,
                    rounds,
                    model,
                    telemetry={"upload": {"run_name": f"bench-{i}"}} if mode == "on" else None,
                )
                kept = steps[1:] or steps
                median = statistics.median(s for s, _, _ in kept)
                medians[mode].append(median)
                cpus[mode].append(statistics.median(c for _, _, c in kept))
                load = os.getloadavg()
                line = (
                    f"upload {mode:3s} R={rollouts} rounds={rounds} median step {median:6.2f} s, process CPU "
                    f"{cpus[mode][-1]:5.2f} s (steps {', '.join(f'{s:.2f}' for s, _, _ in steps)}; "
                    f"load average {load[0]:.1f} {load[1]:.1f} on {os.cpu_count()} CPUs)"
                )
                if mode == "on":
                    recorded = sum(1 for r in read_records(out) if r.get("mode") == "train")
                    after, duplicated = stored()
                    # The upload thread's own CPU (kept after training for a later evaluate): whatever the
                    # machine's load, what the upload took from the process, per step.
                    uploader = [
                        t for t in set(threading.enumerate()) - threads_before if t.name == "ormix-upload"
                    ]
                    thread_cpu = sum(
                        time.clock_gettime(time.pthread_getcpuclockid(t.ident)) for t in uploader if t.ident
                    )
                    upload_cpu.append(thread_cpu / len(steps))
                    line += (
                        f"; uploaded {after - before} of {recorded} rollouts "
                        f"({recorded - (after - before)} lost, {duplicated} duplicated events in all); "
                        f"upload thread CPU {1000 * upload_cpu[-1]:.0f} ms per step"
                    )
                print(line, flush=True)
    finally:
        double.stdin.close()
        double.wait(10)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    ratio = statistics.median(medians["on"]) / statistics.median(medians["off"])
    cpu_ratio = statistics.median(cpus["on"]) / statistics.median(cpus["off"])
    share = statistics.median(upload_cpu) / statistics.median(medians["on"])
    print(
        f"  upload on / off: step {ratio:.3f} (goal <= 1.05), process CPU per step {cpu_ratio:.3f}; the "
        f"upload thread's CPU is {share:.2%} of the median step"
    )
    return {"upload_step_on_off": ratio, "upload_cpu_on_off": cpu_ratio, "upload_thread_cpu_of_step": share}


def main() -> None:
    from ormix.server import serve_in_process
    from ormix.workbench._tiny import build_tiny_model

    model = str(build_tiny_model())
    parts = os.environ.get("ORMIX_BENCH_PARTS", "all")
    everything = {"base", "lookahead", "stragglers", "failover", "upload"}
    chosen = everything if parts == "all" else set(parts.split(","))
    ratios: dict[str, float] = {}
    if "upload" in chosen:
        ratios.update(run_upload(model))
    if "lookahead" in chosen:
        ratios.update(run_lookahead(model))
    if "stragglers" in chosen:
        ratios.update(run_stragglers(model))
    if "base" not in chosen:
        if "failover" in chosen:
            ratios.update(run_failover(model))
        for name, value in ratios.items():
            print(f"ratio {name}: {value:.2f}")
        return
    env = {"ORMIX_LATENCY_OPEN_S": str(OPEN_S), "ORMIX_LATENCY_TOOL_S": str(TOOL_S)}
    step_ratios, wait_ratios = {}, {}
    with serve_in_process(["local:latency"], env=env) as server:
        # Else TRL's SDK sends sessions to `sessions.<host>` (it prepends the subdomain to the base URL).
        os.environ["OPENREWARD_SESSION_URL"] = server.url
        for rollouts, rounds in ((8, 1), (32, 3)):
            step, wait, other = {}, {}, {}
            for variant in ("trl", "ormix", "mixture"):
                t0 = time.perf_counter()
                steps = run(variant, server.url, rollouts, rounds, model)
                kept = steps[1:] or steps
                step[variant] = statistics.median(s for s, _, _ in kept)
                wait[variant] = statistics.median(w for _, w, _ in kept)
                other[variant] = statistics.median(s - w for s, w, _ in kept)
                cpu = statistics.median(c for _, _, c in kept)
                load = os.getloadavg()[0]
                print(
                    f"R={rollouts} rounds={rounds} {variant:8s} median step {step[variant]:6.2f} s, env wait "
                    f"{wait[variant]:6.2f} s, other {other[variant]:6.2f} s, CPU {cpu:6.2f} s "
                    f"(steps {', '.join(f'{s:.2f}' for s, _, _ in steps)}; {time.perf_counter() - t0:.0f} s; "
                    f"load average {load:.1f} on {os.cpu_count()} CPUs)",
                    flush=True,
                )
            # TRL's loop waits for each open and each `work` one after another; `submit` answers at once.
            expected = rollouts * (OPEN_S + (rounds - 1) * TOOL_S)
            print(f"  TRL's env wait {wait['trl']:.2f} s (its server latencies add up to {expected:.2f} s)")
            ideal = step["trl"] / (other["trl"] + wait["trl"] / rollouts)
            for variant in ("ormix", "mixture"):
                ratio = step["trl"] / step[variant]
                wait_ratio = wait["trl"] / wait[variant]
                print(
                    f"  {variant}: step {ratio:.2f}x TRL's, {ratio / ideal:.0%} of the ideal {ideal:.2f}x "
                    f"(TRL's other work, {other['trl']:.1f} s, does not shrink); "
                    f"env wait {wait_ratio:.1f}x TRL's, "
                    f"{wait_ratio / rollouts:.0%} of the ideal {rollouts}x"
                )
            step_ratios[rollouts] = min(step["trl"] / step[v] for v in ("ormix", "mixture"))
            wait_ratios[rollouts] = min(wait["trl"] / wait[v] for v in ("ormix", "mixture"))
    for rollouts, ratio in wait_ratios.items():
        print(f"ratio env_wait R={rollouts}: {ratio:.2f}")
    for rollouts, ratio in step_ratios.items():
        print(f"ratio env_bound_step R={rollouts}: {ratio:.2f}")
    if "failover" in chosen:
        ratios.update(run_failover(model))
    for name, value in ratios.items():
        print(f"ratio {name}: {value:.2f}")


if __name__ == "__main__":
    sys.exit(main())
