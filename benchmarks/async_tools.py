"""Does TRL's async rollout worker wait on ormix's environments without blocking its loop? Plain tool methods
(TRL runs them in its thread pool) vs coroutine tool methods (TRL awaits them), side by side.

R = 64 episodes in flight at once on one event loop, driven the way TRL 1.16's worker drives them: `reset` in
the worker's thread pool (``ThreadPoolExecutor(max_workers=max_inflight_tasks)``, as TRL sizes it), every tool
call through TRL's own ``_AsyncRolloutLoop._execute_tool_calls`` (called as is: it awaits a coroutine tool and
runs a plain one with ``run_in_executor``), then the session closed. The server is `local:latency` in a child
process (open waits ``OPEN_S``, each ``work`` call ``TOOL_S``, both asynchronously); each episode makes
``CALLS`` ``work`` calls and a ``submit``. Between the tool calls nothing else runs (no generation): the
worker's own share of each episode is only the dispatch, so this measures what the dispatch costs.

Printed per variant (medians over ``ORMIX_BENCH_REPEATS`` runs, default 3, of ``EPISODES`` episodes):
episodes per second, and the event loop's lag (a task that sleeps 5 ms and measures how late it wakes;
median and p99 of every wake-up), which is what generation requests sharing that loop would wait. Side by
side, the ideal: the same sessions and calls awaited directly on ormix's ORS portal loop (no TRL, no
threads, no second loop), i.e. what this client and server can do at R = 64; and the bound
``R / (OPEN_S + CALLS * TOOL_S)`` of pure waiting.

Last line: ``ratio async_tools R=64: X (coroutine / plain episodes per second) ... load average``.
Run: ``python benchmarks/async_tools.py``.
"""

from __future__ import annotations

import asyncio
import functools
import os
import statistics
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

R = 64
EPISODES = int(os.environ.get("ORMIX_BENCH_EPISODES", "256"))
REPEATS = int(os.environ.get("ORMIX_BENCH_REPEATS", "3"))
OPEN_S, TOOL_S, CALLS = 0.1, 0.05, 3


def _worker_self(pool: ThreadPoolExecutor) -> SimpleNamespace:
    """What `_execute_tool_calls` reads of the worker: its pool and its metric accumulators."""
    return SimpleNamespace(
        _tool_pool=pool, _counters=defaultdict(float), _rates=defaultdict(lambda: [0.0, 0.0])
    )


async def _lag_probe(samples: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        t0 = time.perf_counter()
        await asyncio.sleep(0.005)
        samples.append(time.perf_counter() - t0 - 0.005)


def run_worker(factory, coroutine: bool) -> tuple[float, list[float]]:
    """Episodes per second and the loop's lag samples, TRL's dispatch."""
    from trl.experimental.async_grpo.async_rollout_worker import _AsyncRolloutLoop

    from ormix.trl._async_grpo import _on_portal

    pool = ThreadPoolExecutor(max_workers=R, thread_name_prefix="grpo-tool")
    worker = _worker_self(pool)

    async def episode(i: int) -> None:
        loop = asyncio.get_running_loop()
        env = factory()
        prompt = await loop.run_in_executor(pool, functools.partial(env.reset, task_index=i % 64))
        word = prompt.split("'")[1]
        tools = {name: getattr(env, name) for name in ("work", "submit")}
        for name in ["work"] * CALLS + ["submit"]:
            call = [{"function": {"name": name, "arguments": {"text": word}}}]
            messages, _, failures = await _AsyncRolloutLoop._execute_tool_calls(worker, call, tools)
            assert failures == 0, messages
        assert env.reward == 1.0, env.outcome
        await _on_portal(env._aclose)

    async def main() -> tuple[float, list[float]]:
        samples: list[float] = []
        stop = asyncio.Event()
        probe = asyncio.create_task(_lag_probe(samples, stop))
        elapsed = await _episodes_in_flight(episode)
        stop.set()
        await probe
        return EPISODES / elapsed, samples

    try:
        return asyncio.run(main())
    finally:
        pool.shutdown(wait=True)


async def _episodes_in_flight(episode) -> float:
    """Run `EPISODES` episodes, `R` at a time; the seconds it took."""
    gate = asyncio.Semaphore(R)

    async def one(i: int) -> None:
        async with gate:
            await episode(i)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(EPISODES)))
    return time.perf_counter() - t0


def run_ideal(factory) -> float:
    """Episodes per second with every open and call awaited on the portal's own loop (no TRL, no threads)."""
    from ormix.ors._bridge import portal
    from ormix.rollout._episode import _open

    async def episode(i: int) -> None:
        env = factory()
        row = {"task_index": i % 64}
        opened = await _open(env._config, row)
        env._session, env.task_index = opened.session, i % 64
        word = opened.prompt.split("'")[1]
        for name in ["work"] * CALLS + ["submit"]:
            await env._acall_tool(name, {"text": word})
        assert env.reward == 1.0
        await env._aclose()

    async def main() -> float:
        return EPISODES / await _episodes_in_flight(episode)

    return portal().call(main)


def main() -> None:
    os.environ["ORMIX_LATENCY_OPEN_S"], os.environ["ORMIX_LATENCY_TOOL_S"] = str(OPEN_S), str(TOOL_S)
    from ormix import OpenRewardSpec
    from ormix.rollout._coroutine_tools import AsyncEpisodeFactory

    spec = OpenRewardSpec("local:latency", num_tasks=64, local_serve="process", max_concurrent_sessions=R)
    plain = spec.environment_factory
    coroutine = AsyncEpisodeFactory(plain)
    run_worker(plain, False)  # warm up: server started, connections open
    rows: dict[str, list[tuple[float, list[float]]]] = {"plain": [], "coroutine": []}
    ideal: list[float] = []
    for _ in range(REPEATS):
        rows["plain"].append(run_worker(plain, False))
        rows["coroutine"].append(run_worker(coroutine, True))
        ideal.append(run_ideal(plain))
    bound = R / (OPEN_S + CALLS * TOOL_S)
    print(
        f"R={R} episodes in flight, {EPISODES} episodes per run, {REPEATS} runs; "
        f"open {OPEN_S}s, {CALLS} x {TOOL_S}s"
    )
    eps = {}
    for name, runs in rows.items():
        eps[name] = statistics.median(r[0] for r in runs)
        lags = sorted(v for r in runs for v in r[1])
        p50 = lags[len(lags) // 2] * 1000
        p99 = lags[int(len(lags) * 0.99)] * 1000
        print(f"  {name:9s} {eps[name]:7.1f} episodes/s   loop lag median {p50:6.2f} ms  p99 {p99:7.2f} ms")
    print(f"  ideal     {statistics.median(ideal):7.1f} episodes/s   (awaited on the portal loop, no TRL)")
    print(f"  bound     {bound:7.1f} episodes/s   (R / time waited per episode)")
    load = os.getloadavg()
    print(
        f"ratio async_tools R={R}: {eps['coroutine'] / eps['plain']:.2f} "
        "(coroutine / plain episodes per second; "
        f"ideal / plain {statistics.median(ideal) / eps['plain']:.2f}) load average "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
