"""Benchmark: building the training dataset of 512 tasks, ormix vs TRL's OpenRewardSpec, side by side.

The server adds 5 ms to every request (a stand-in for a remote server), so the figure measures round
trips, not CPU. Both specs ask the same server for the same 512 tasks; each build starts from a fresh spec
(no cache). Medians over repetitions; the last line is `ratio dataset_build: X` (TRL time / ormix time).

    python benchmarks/dataset_build.py [--reps 3] [--tasks 512] [--delay-ms 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")
os.environ.setdefault("OPENREWARD_LOG_LEVEL", "WARNING")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


from openreward.environments import Environment, TextBlock, ToolOutput, tool  # noqa: E402
from pydantic import BaseModel  # noqa: E402


class Params(BaseModel):
    text: str


class Catalog(Environment):
    """A catalog-shaped environment with many tasks (SETA-like metadata)."""

    TASKS = 512

    @classmethod
    def list_splits(cls):
        return ["train"]

    @classmethod
    def list_tasks(cls, split):
        return [
            {"task_id": f"t{i}", "difficulty": ["Easy", "Medium", "Hard"][i % 3], "tags": ["a", str(i % 7)]}
            for i in range(cls.TASKS)
        ]

    def get_prompt(self):
        return [TextBlock(text="noop")]

    @tool
    def noop(self, params: Params) -> ToolOutput:
        """Do nothing."""
        return ToolOutput(blocks=[TextBlock(text=params.text)])


def serve(port_file: str, tasks: int, delay_ms: float) -> None:
    """Child process: an ORS server with `tasks` tasks, sleeping `delay_ms` before answering each request."""
    import uvicorn

    from ormix.server._serving import _bind, build_app

    Catalog.TASKS = tasks
    app = build_app([Catalog]).app

    async def delayed(scope, receive, send):
        if scope["type"] == "http":
            await asyncio.sleep(delay_ms / 1000)
        await app(scope, receive, send)

    sock = _bind("127.0.0.1", 0)
    with open(port_file, "w") as f:
        f.write(str(sock.getsockname()[1]))
    server = uvicorn.Server(uvicorn.Config(delayed, log_level="warning", access_log=False))
    asyncio.run(server.serve(sockets=[sock]))


def timed(build) -> float:
    t0 = time.perf_counter()
    ds = build()
    elapsed = time.perf_counter() - t0
    assert len(ds) == ARGS.tasks, len(ds)
    return elapsed


def main() -> None:
    import tempfile
    import urllib.request

    port_file = tempfile.mktemp()
    child = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--serve",
            port_file,
            "--tasks",
            str(ARGS.tasks),
            "--delay-ms",
            str(ARGS.delay_ms),
        ]
    )
    try:
        deadline = time.time() + 60
        while not (os.path.exists(port_file) and open(port_file).read()):
            if time.time() > deadline or child.poll() is not None:
                raise SystemExit("benchmark server did not start")
            time.sleep(0.05)
        url = f"http://127.0.0.1:{open(port_file).read()}"
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy
        while True:
            try:
                with direct.open(f"{url}/health", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.time() > deadline or child.poll() is not None:
                raise SystemExit("benchmark server did not answer /health")
            time.sleep(0.05)
        os.environ["OPENREWARD_SESSION_URL"] = url  # the SDK would otherwise send sessions to sessions.<host>

        from trl.experimental.openreward import OpenRewardSpec as TRLSpec

        from ormix import OpenRewardSpec

        ours, theirs = [], []
        for rep in range(ARGS.reps):
            ours.append(
                timed(lambda: OpenRewardSpec(url, env_name="catalog", num_tasks=ARGS.tasks).train_dataset)
            )
            theirs.append(timed(lambda: TRLSpec(url, env_name="catalog", num_tasks=ARGS.tasks).train_dataset))
            print(f"rep {rep}: ormix {ours[-1]:.3f}s  trl {theirs[-1]:.3f}s", flush=True)
        # Explicit indices (no range shortcut): concurrency alone.
        idx = list(range(1, ARGS.tasks, 2)) + list(range(0, ARGS.tasks, 2))
        t_idx = timed(lambda: OpenRewardSpec(url, env_name="catalog", indices=idx).train_dataset)
        m_ours, m_theirs = statistics.median(ours), statistics.median(theirs)
        print(f"{ARGS.tasks} tasks, {ARGS.delay_ms:g} ms per request, {ARGS.reps} reps (medians)")
        print(
            f"ormix num_tasks ({ARGS.tasks}): {m_ours:.3f}s   ormix explicit indices: {t_idx:.3f}s   "
            f"TRL OpenRewardSpec: {m_theirs:.3f}s"
        )
        print(f"ratio dataset_build indices: {m_theirs / t_idx:.1f}")
        print(f"ratio dataset_build: {m_theirs / m_ours:.1f}")
    finally:
        child.terminate()
        child.wait(timeout=10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=512)
    parser.add_argument("--delay-ms", type=float, default=5.0)
    parser.add_argument("--serve", default=None)
    ARGS = parser.parse_args()
    if ARGS.serve:
        serve(ARGS.serve, ARGS.tasks, ARGS.delay_ms)
    else:
        main()
