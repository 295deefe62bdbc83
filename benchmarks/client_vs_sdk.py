"""Benchmark: ormix's ORS client vs the openreward SDK on the same local echo server.

The server (`local:echo`) runs in its own process (`serve_in_process`). An episode opens a session,
makes 20 `echo` calls and closes it; 1, 8 and 32 workers run at once, each running `--episodes`
episodes in a row. Each configuration is repeated and the median calls/s is reported (calls / wall
time, session open and close included).

- `sdk`: the SDK's sync client on plain threads, as TRL drives it (`OpenReward(base_url=...)`,
  `environments.get("echo", variant="echo")` so the env is named in the path, its best case,
  `env.session(split=, index=)`, `session.call_tool`).
- `ormix-threads`: ormix from plain threads through its portal (`run_sync`), as ormix's TRL adapters
  drive it. The `ratio` lines compare this one with `sdk`: the like-for-like comparison.
- `ormix-async`: the same episodes as tasks of one event loop (for reference).
- `raw-http`: the same episodes over raw sockets with no client library at all (one thread and one
  keep-alive connection per worker, a few lines of HTTP): what the server itself allows, for context.

Repetitions interleave the clients (a change of load on the shared machine weighs on all alike); each
line also gives the client process's CPU per call (the server's is not in it).

Run: `python benchmarks/client_vs_sdk.py [--reps 5] [--calls 20] [--episodes 4]`. Last three lines:
`ratio calls_per_s n=1: X`, `n=8`, `n=32` (ormix-threads / sdk).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import threading
import time

os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")
os.environ.setdefault("OPENREWARD_LOG_LEVEL", "WARNING")

import anyio  # noqa: E402

from ormix.ors import ORSClient, run_sync  # noqa: E402
from ormix.ors._http import HTTPClient  # noqa: E402
from ormix.server import serve_in_process  # noqa: E402
from ormix.workbench.envs.echo import WORDS  # noqa: E402

CONCURRENCY = (1, 8, 32)


def _threads(n: int, fn) -> float:
    errors: list[BaseException] = []
    barrier = threading.Barrier(n + 1)

    def body(i: int) -> None:
        barrier.wait()
        try:
            fn(i)
        except BaseException as e:  # reported below
            errors.append(e)

    ts = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in ts:
        t.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    return elapsed


def bench_sdk(url: str, n: int, calls: int, episodes: int) -> float:
    from openreward import OpenReward

    os.environ["OPENREWARD_SESSION_URL"] = url
    os.environ["OPENREWARD_API_URL"] = url
    client = OpenReward(base_url=url)
    env = client.environments.get("echo", variant="echo", base_url=url)

    def episode(i: int) -> None:
        with env.session(split="train", index=i % 16) as s:
            for _ in range(calls):
                out = s.call_tool("echo", {"text": WORDS[i % 16]})
                assert out.reward == 1.0

    episode(0)  # warm up connections
    return n * episodes * calls / _threads(n, lambda i: [episode(i + k) for k in range(episodes)])


def bench_ormix_threads(url: str, n: int, calls: int, episodes: int) -> float:
    client = run_sync(_make_client, url)

    def episode(i: int) -> None:
        s = run_sync(client.open_session, split="train", index=i % 16)
        try:
            for _ in range(calls):
                assert run_sync(s.call, "echo", {"text": WORDS[i % 16]}).reward == 1.0
        finally:
            run_sync(s.close)

    try:
        episode(0)
        return n * episodes * calls / _threads(n, lambda i: [episode(i + k) for k in range(episodes)])
    finally:
        run_sync(client.aclose)


async def _make_client(url: str) -> ORSClient:
    return ORSClient(url, env_name="echo")


def bench_ormix_async(url: str, n: int, calls: int, episodes: int) -> float:
    async def main() -> float:
        async with ORSClient(url, env_name="echo") as client:

            async def episode(i: int) -> None:
                async with client.session(split="train", index=i % 16) as s:
                    for _ in range(calls):
                        assert (await s.call("echo", {"text": WORDS[i % 16]})).reward == 1.0

            async def worker(i: int) -> None:
                for k in range(episodes):
                    await episode(i + k)

            await episode(0)
            start = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for i in range(n):
                    tg.start_soon(worker, i)
            return n * episodes * calls / (time.perf_counter() - start)

    return anyio.run(main)


def _raw_request(sock: socket.socket, buf: bytearray, data: bytes) -> None:
    # Just enough HTTP/1.1 for this server: a Content-Length or a chunked answer, nothing validated.
    sock.sendall(data)
    while (i := buf.find(b"\r\n\r\n")) < 0:
        buf += sock.recv(65536)
    head = bytes(buf[:i]).lower()
    del buf[: i + 4]
    if b"transfer-encoding: chunked" in head:
        # One answer at a time on the connection: it is complete when the buffer ends with the last chunk.
        while not buf.endswith(b"\r\n0\r\n\r\n"):
            buf += sock.recv(65536)
        buf.clear()
    else:
        n = int(head.split(b"content-length:")[1].split(b"\r\n")[0])
        while len(buf) < n:
            buf += sock.recv(65536)
        del buf[:n]


def bench_raw(url: str, n: int, calls: int, episodes: int) -> float:
    """The server's limit for this workload: the same episodes over raw sockets, no client library."""
    port = int(url.rsplit(":", 1)[1])

    def req(path: str, sid: str, body: bytes) -> bytes:
        return (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Session-ID: {sid}\r\nContent-Type: "
            f"application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body

    def worker(i: int) -> None:
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            buf = bytearray()
            for k in range(episodes):
                sid = f"raw-{i}-{k}-{time.perf_counter_ns()}"
                _raw_request(
                    sock,
                    buf,
                    req(
                        "/create",
                        sid,
                        json.dumps({"env_name": "echo", "split": "train", "index": (i + k) % 16}).encode(),
                    ),
                )
                call = req(
                    "/echo/call",
                    sid,
                    json.dumps({"name": "echo", "input": {"text": WORDS[(i + k) % 16]}}).encode(),
                )
                for _ in range(calls):
                    _raw_request(sock, buf, call)
                _raw_request(sock, buf, req("/delete", sid, b""))

    return n * episodes * calls / _threads(n, worker)


def _server_stall_ms(url: str) -> float:
    async def measure() -> float:
        async with HTTPClient() as h:
            await h.request("GET", f"{url}/health")
            t = time.perf_counter()
            for _ in range(10):
                await h.request("GET", f"{url}/health")
            return (time.perf_counter() - t) * 100

    return anyio.run(measure)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--episodes", type=int, default=4, help="episodes per worker, in a row")
    args = ap.parse_args()

    with serve_in_process(["local:echo"]) as srv:
        stall = _server_stall_ms(srv.url)
        print(f"server {srv.url} (own process), trivial GET {stall:.2f} ms")
        if stall > 20:
            print(
                "WARNING: the local server stalls ~40 ms per response (TCP delayed ACK: its socket has no "
                "TCP_NODELAY); every client is bound by it and the ratios below mean little."
            )
        clients = {
            "raw-http": bench_raw,
            "sdk": bench_sdk,
            "ormix-threads": bench_ormix_threads,
            "ormix-async": bench_ormix_async,
        }
        medians: dict[tuple[str, int], float] = {}
        for n in CONCURRENCY:
            # Repetitions interleave the clients, so that a change of machine load (the server and the
            # clients share 2 cores with whatever else runs) weighs on every client alike.
            runs: dict[str, list[float]] = {name: [] for name in clients}
            cpu: dict[str, list[float]] = {name: [] for name in clients}
            for _ in range(args.reps):
                for name, fn in clients.items():
                    c0 = time.process_time()
                    runs[name].append(fn(srv.url, n, args.calls, args.episodes))
                    # The server runs in its own process: this is the client's CPU (its warm-up included).
                    cpu[name].append((time.process_time() - c0) * 1000 / (n * args.episodes * args.calls))
            for name in clients:
                medians[name, n] = statistics.median(runs[name])
                print(
                    f"{name:14s} n={n:<3d} calls/s median {medians[name, n]:8.1f}  "
                    f"runs {' '.join(f'{r:.0f}' for r in runs[name])}  "
                    f"client cpu/call {statistics.median(cpu[name]):.2f} ms",
                    flush=True,
                )
    for n in CONCURRENCY:
        print(f"ratio calls_per_s n={n}: {medians['ormix-threads', n] / medians['sdk', n]:.2f}")


if __name__ == "__main__":
    main()
