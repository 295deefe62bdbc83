"""Benchmark: client CPU per sequential request against a local ORS server, one HTTP library beside another.

The server (`local:echo`) runs in a child process, so the CPU this process spends is the client's alone
(`time.process_time`: the event loop, the library, JSON). Each library sends the same requests one after
another on one keep-alive connection, in one asyncio loop:

- `stateless`: `POST /echo/num_tasks {"split": "train"}` (a JSON answer with a Content-Length);
- `call`: `POST /echo/call` of a session's `echo` tool (an SSE answer, chunked, read as a stream).

Libraries: `aiohttp` (what openreward installs), `httpx` (`AsyncClient`), `httpcore` (`AsyncConnectionPool`,
the layer under httpx), each when importable. Repetitions interleave the libraries; the figure is the
median over repetitions of the CPU per request, in milliseconds.

    python benchmarks/http_client_cpu.py [--reps 7] [--requests 300]

Last lines: `cpu_ms_per_request <kind> <library>: X` for each kind and library.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import time
import uuid

os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")
os.environ.setdefault("OPENREWARD_LOG_LEVEL", "WARNING")

from ormix.server import serve_in_process  # noqa: E402

STATELESS = ("/echo/num_tasks", {"split": "train"})
CALL = {"name": "echo", "input": {"text": "apple"}}


class Lib:
    """One library's client: `stateless()` and `call(sid)` send one request and read the whole answer."""

    name = ""

    async def open(self, url: str) -> None: ...

    async def stateless(self) -> None: ...

    async def call(self, sid: str) -> None: ...

    async def close(self) -> None: ...


class AiohttpLib(Lib):
    name = "aiohttp"

    async def open(self, url: str) -> None:
        import aiohttp

        self.url = url
        self.s = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))

    async def stateless(self) -> None:
        async with self.s.post(self.url + STATELESS[0], json=STATELESS[1]) as r:
            assert (await r.json())["num_tasks"] == 16

    async def call(self, sid: str) -> None:
        async with self.s.post(self.url + "/echo/call", json=CALL, headers={"X-Session-ID": sid}) as r:
            body = b""
            async for piece in r.content.iter_any():
                body += piece
        assert b"event: end" in body

    async def close(self) -> None:
        await self.s.close()


class HttpxLib(Lib):
    name = "httpx"

    async def open(self, url: str) -> None:
        import httpx

        self.url = url
        self.c = httpx.AsyncClient(timeout=None)

    async def stateless(self) -> None:
        r = await self.c.post(self.url + STATELESS[0], json=STATELESS[1])
        assert r.json()["num_tasks"] == 16

    async def call(self, sid: str) -> None:
        body = b""
        async with self.c.stream(
            "POST", self.url + "/echo/call", json=CALL, headers={"X-Session-ID": sid}
        ) as r:
            async for piece in r.aiter_bytes():
                body += piece
        assert b"event: end" in body

    async def close(self) -> None:
        await self.c.aclose()


class HttpcoreLib(Lib):
    name = "httpcore"

    async def open(self, url: str) -> None:
        import httpcore

        self.url = url
        self.p = httpcore.AsyncConnectionPool()

    async def _post(self, path: str, body: dict, headers: dict[str, str]) -> bytes:
        data = json.dumps(body).encode()
        h = [(b"Content-Type", b"application/json"), (b"Content-Length", str(len(data)).encode())]
        h += [(k.encode(), v.encode()) for k, v in headers.items()]
        async with self.p.stream("POST", self.url + path, headers=h, content=data) as r:
            out = b""
            async for piece in r.aiter_stream():
                out += piece
        return out

    async def stateless(self) -> None:
        assert json.loads(await self._post(*STATELESS, {}))["num_tasks"] == 16

    async def call(self, sid: str) -> None:
        assert b"event: end" in await self._post("/echo/call", CALL, {"X-Session-ID": sid})

    async def close(self) -> None:
        await self.p.aclose()


class OrmixHTTPLib(Lib):
    """ormix's own HTTP layer (`ormix.ors._http.HTTPClient`, aiohttp with reuse tracing), for its overhead."""

    name = "ormix.ors._http"

    async def open(self, url: str) -> None:
        from ormix.ors._http import HTTPClient

        self.url = url
        self.h = HTTPClient()

    async def stateless(self) -> None:
        r = await self.h.request("POST", self.url + STATELESS[0], json=STATELESS[1])
        assert r.json()["num_tasks"] == 16

    async def call(self, sid: str) -> None:
        pieces: list[str] = []
        await self.h.stream(
            "POST", self.url + "/echo/call", on_text=pieces.append, json=CALL, headers={"X-Session-ID": sid}
        )
        assert "event: end" in "".join(pieces)

    async def close(self) -> None:
        await self.h.aclose()


LIBS = [
    ("aiohttp", AiohttpLib),
    ("httpx", HttpxLib),
    ("httpcore", HttpcoreLib),
    ("aiohttp", OrmixHTTPLib),
]


async def _open_session(url: str) -> str:
    import aiohttp

    sid = str(uuid.uuid4())
    async with aiohttp.ClientSession() as s:
        body = {"env_name": "echo", "split": "train", "index": 0}
        async with s.post(url + "/create", json=body, headers={"X-Session-ID": sid}) as r:
            assert r.status == 200, await r.text()
    return sid


async def _measure(fn, n: int) -> float:
    """CPU milliseconds of this process per call of `fn` over `n` sequential calls."""
    start = time.process_time()
    for _ in range(n):
        await fn()
    return (time.process_time() - start) * 1000.0 / n


async def run(url: str, reps: int, n: int) -> dict[tuple[str, str], list[float]]:
    libs: list[Lib] = []
    for mod, cls in LIBS:
        if importlib.util.find_spec(mod) is None:
            print(f"{mod}: not installed, skipped")
            continue
        lib = cls()
        await lib.open(url)
        libs.append(lib)
    sid = await _open_session(url)
    figures: dict[tuple[str, str], list[float]] = {}
    try:
        for lib in libs:  # warm up: connections open, code paths hot
            for _ in range(20):
                await lib.stateless()
                await lib.call(sid)
        for _ in range(reps):
            for lib in libs:
                figures.setdefault(("stateless", lib.name), []).append(await _measure(lib.stateless, n))
                figures.setdefault(("call", lib.name), []).append(
                    await _measure(lambda lib=lib: lib.call(sid), n)
                )
    finally:
        for lib in libs:
            await lib.close()
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--requests", type=int, default=300, help="sequential requests per repetition")
    args = ap.parse_args()
    with serve_in_process(["local:echo"]) as srv:
        print(f"server {srv.url} (child process); {args.reps} reps x {args.requests} requests per library")
        figures = asyncio.run(run(srv.url, args.reps, args.requests))
    for (kind, name), runs in figures.items():
        print(f"{kind:9s} {name:9s} runs(ms) {' '.join(f'{r:.3f}' for r in runs)}")
    for (kind, name), runs in sorted(figures.items()):
        print(f"cpu_ms_per_request {kind} {name}: {statistics.median(runs):.3f}")


if __name__ == "__main__":
    main()
