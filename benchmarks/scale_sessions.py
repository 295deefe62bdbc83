"""Benchmark: 32, 256 and 1,024 concurrent sessions through one ormix client, on `local:latency` (loopback).

The client is one `ormix.ors.ServerPool` (what a member with several `targets:` uses) in one event loop; the
server is `--workers` processes of `local:latency` (as `ormix serve --workers N` starts them), so the CPU
this process spends is the client's alone (the servers' is measured beside it: on the 2-core machine they
share the cores with the client). At each size n, every session is opened first (not timed), then all of
them make `work` calls at once, each session one call after another, until `--calls` calls are made.

Held fixed across sizes: the total calls (`--calls`, default 4096) and the offered call rate (`--rate`,
default 256 calls/s: each `work` call waits n / rate seconds on the server, so n sessions in flight offer
the same rate at every n; session i starts i / n of a call late, so the calls are spread, not bursts),
the client's settings (ormix's defaults: a ping every 10 s per open session, no connection limit), the
servers. What varies is n alone: sessions open and calls in flight.

Per size: client CPU per call (`time.process_time` over the call phase / calls), p50/p99 latency of a call
and its p99 over the server's wait (the client's and the servers' queueing), the most open sockets and the
peak resident memory of this process (and its growth over the sessions' opening), the servers' CPU share,
lost calls (a call that raised or answered wrongly; must be 0), the load average.

    python benchmarks/scale_sessions.py [--sizes 32,256,1024] [--calls 4096] [--rate 256] [--workers 2]

`run(sizes)` returns the printed lines (benchmarks/scale.py imports it). Last line:
`ratio client_cpu_per_call n=1024/n=32: X` (done when X <= 1.5).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")
os.environ.setdefault("OPENREWARD_LOG_LEVEL", "WARNING")

import anyio  # noqa: E402
import psutil  # noqa: E402

from ormix.ors import Endpoint, ServerPool  # noqa: E402
from ormix.server import serve_in_process  # noqa: E402

SIZES = [32, 256, 1024]


@dataclass
class Figures:
    n: int
    calls: int
    lost: int
    cpu_ms_per_call: float
    p50_ms: float
    p99_ms: float
    p99_over_wait_ms: float
    sockets: int
    rss_mb: float
    rss_growth_mb: float
    server_cpu_share: float  # the servers' CPU seconds / wall seconds (2.0 = both cores)
    client_cpu_share: float
    wall_s: float
    load: float


def _sockets() -> int:
    """Open sockets of this process (its file descriptors that are sockets)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:  # closed between the listing and the read
            pass
    return count


def measure(urls: list[str], pids: list[int], n: int, calls: int, rate: float) -> Figures:
    """One size: n sessions open, then `calls` work calls over them at `rate` calls/s offered."""
    wait_s = n / rate
    per_session = [calls // n + (1 if i < calls % n else 0) for i in range(n)]
    me = psutil.Process()
    servers = [psutil.Process(pid) for pid in pids]
    latencies: list[float] = []
    lost = 0
    peak = {"sockets": 0, "rss": 0, "cpu": 0.0}

    async def main() -> tuple[float, float, float, float]:
        nonlocal lost
        pool = ServerPool([Endpoint.for_url(u, "latency") for u in urls], timeout_s=120.0)
        async with pool:
            before_rss = me.memory_info().rss
            sessions: list = [None] * n

            async def open_one(i: int) -> None:
                spec = {"index": i, "word": f"w{i}", "open_s": 0.0, "tool_s": wait_s}
                sessions[i] = await pool.open_session(task_spec=spec)

            async with anyio.create_task_group() as tg:
                for i in range(n):
                    tg.start_soon(open_one, i)

            async def session_calls(i: int) -> None:
                nonlocal lost
                await anyio.sleep(wait_s * i / n)  # spread: the offered rate is steady, not bursts
                for _ in range(per_session[i]):
                    started = time.perf_counter()
                    try:
                        result = await sessions[i].call("work", {"text": f"w{i}"})
                        ok = result.reward == 1.0
                    except Exception:  # noqa: BLE001 - a lost call is counted, not raised
                        ok = False
                    latencies.append(time.perf_counter() - started)
                    lost += not ok

            async def sample(stop: anyio.Event) -> None:
                while not stop.is_set():
                    # The sampling's own CPU (reading 2,000 descriptors' links) is not the client's.
                    own = time.thread_time()
                    peak["sockets"] = max(peak["sockets"], _sockets())
                    peak["rss"] = max(peak["rss"], me.memory_info().rss)
                    peak["cpu"] += time.thread_time() - own
                    with anyio.move_on_after(0.5):
                        await stop.wait()

            server_cpu = sum(sum(s.cpu_times()[:2]) for s in servers)
            cpu, wall = time.process_time(), time.perf_counter()
            stop = anyio.Event()
            async with anyio.create_task_group() as outer:
                outer.start_soon(sample, stop)
                async with anyio.create_task_group() as tg:
                    for i in range(n):
                        tg.start_soon(session_calls, i)
                stop.set()
            cpu, wall = time.process_time() - cpu - peak["cpu"], time.perf_counter() - wall
            server_cpu = sum(sum(s.cpu_times()[:2]) for s in servers) - server_cpu
            async with anyio.create_task_group() as tg:
                for s in sessions:
                    tg.start_soon(s.close)
            return cpu, wall, server_cpu, before_rss

    cpu, wall, server_cpu, before_rss = anyio.run(main)
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return Figures(
        n=n,
        calls=len(latencies),
        lost=lost + (calls - len(latencies)),
        cpu_ms_per_call=1000 * cpu / max(len(latencies), 1),
        p50_ms=1000 * statistics.median(ordered),
        p99_ms=1000 * p99,
        p99_over_wait_ms=1000 * (p99 - wait_s),
        sockets=peak["sockets"],
        rss_mb=peak["rss"] / 2**20,
        rss_growth_mb=(peak["rss"] - before_rss) / 2**20,
        server_cpu_share=server_cpu / wall,
        client_cpu_share=cpu / wall,
        wall_s=wall,
        load=os.getloadavg()[0],
    )


def _line(f: Figures) -> str:
    return (
        f"n={f.n}: client cpu/call {f.cpu_ms_per_call:.3f} ms, latency p50 {f.p50_ms:.0f} ms"
        f" p99 {f.p99_ms:.0f} ms (p99 over the server's wait {f.p99_over_wait_ms:.0f} ms),"
        f" sockets {f.sockets}, rss {f.rss_mb:.0f} MB (+{f.rss_growth_mb:.1f} MB), calls {f.calls},"
        f" lost {f.lost}, cpu share client {f.client_cpu_share:.2f} servers {f.server_cpu_share:.2f}"
        f" of 2 cores, {f.wall_s:.1f} s, load {f.load:.2f}"
    )


def run(
    sizes: list[int] | None = None,
    *,
    calls: int = 4096,
    rate: float = 256.0,
    workers: int = 2,
    reps: int = 1,
    say: Callable[[str], None] | None = None,
) -> list[str]:
    """Measure each size (``reps`` times, interleaved; medians of the CPU per call); print (through ``say``,
    as `benchmarks/scale.py` passes it) and return the lines, the last `ratio client_cpu_per_call
    n=<largest>/n=<smallest>: X`."""
    sizes = sorted(sizes or SIZES)
    lines: list[str] = []
    printer = say or (lambda text: print(text, flush=True))

    def say(text: str) -> None:  # noqa: F811 - the caller's printer, and the lines kept
        printer(text)
        lines.append(text)

    say(
        f"scale_sessions: {calls} work calls a size at {rate:g} calls/s offered (each waits n/{rate:g} s on "
        f"the server), one ServerPool over {workers} local:latency server process(es), load "
        f"{os.getloadavg()[0]:.2f}"
    )
    servers = [serve_in_process(["local:latency"]) for _ in range(workers)]
    try:
        urls = [s.url for s in servers]
        pids = [s.pid for s in servers if s.pid is not None]
        measure(urls, pids, min(sizes), min(calls, 256), rate)  # warm up: imports, first connections
        results: dict[int, list[Figures]] = {n: [] for n in sizes}
        for _ in range(reps):
            for n in sizes:
                figures = measure(urls, pids, n, calls, rate)
                results[n].append(figures)
                say(_line(figures))
    finally:
        for s in servers:
            s.close()
    cpu = {n: statistics.median(f.cpu_ms_per_call for f in results[n]) for n in sizes}
    lost = sum(f.lost for fs in results.values() for f in fs)
    small, large = sizes[0], sizes[-1]
    say(f"lost calls: {lost}")
    say(
        f"ratio client_cpu_per_call n={large}/n={small}: {cpu[large] / cpu[small]:.2f} "
        f"(load {os.getloadavg()[0]:.2f})"
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--calls", type=int, default=4096)
    parser.add_argument("--rate", type=float, default=256.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--reps", type=int, default=1)
    args = parser.parse_args()
    run(
        [int(s) for s in args.sizes.split(",")],
        calls=args.calls,
        rate=args.rate,
        workers=args.workers,
        reps=args.reps,
    )


if __name__ == "__main__":
    main()
