"""A deliberately broken "ORS" server for tests: a FAKE, on purpose.

A correct server (openreward's) cannot be made to send malformed JSON, end an SSE stream without its
`end` event, send only `: ping` comments forever, stream an unchunked 50 MB line, or echo request
headers into its errors. This one does, on demand, over a real socket on loopback: raw asyncio and
hand-written HTTP/1.1 (keep-alive, chunked SSE bodies), so every byte is under the test's control.

What it serves depends on the environment name in the path (the first segment) and the tool name:

| env          | stateless endpoints (`/tools`, `/num_tasks`, `/task`, `/task_range`, `/tasks`, `/splits`) |
|--------------|--------------------------------------------------------------------------------------------|
| `ok`         | well-formed answers: 2 tasks, the tools listed in `CALL_TOOLS`                              |
| `badjson`    | `200` with a body that is not JSON (cut in the middle)                                      |
| `wrongshape` | `200` with JSON of the wrong shape (`[]`, strings where numbers belong, ...)                |
| `many`       | 3000 tools, some with `$ref` loops, non-object schemas, code in descriptions                |
| `echo`       | errors that echo the request's headers back (the secrets test): `/create` of task 1 (500),|
|              | `/prompt` (404 "Active environment not found"), `/num_tasks` (not JSON), others (418)      |

`POST /{env}/call` with tool (see `CALL_TOOLS`): `ok`, `badend` (`end` not JSON), `wrongend` (JSON of
the wrong shape), `nanreward`, `eof` (body ends cleanly, no `end`), `cut` (connection reset mid-stream),
`pings` (only `: ping` comments, forever), `stall` (silence), `big` (`{"n": N}`: N characters in 4096-char
`chunk` events, generated lazily), `bigline` (the same result as one unchunked `end` data line),
`reject`/`raise`/`echoend` (`ok: false` / `event: error` / a non-JSON `end`, quoting the request headers).

Example:
    >>> with HostileServer() as srv:                      # doctest: +SKIP
    ...     print(srv.url)
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from typing import Any

CALL_TOOLS = [
    "ok",
    "badend",
    "wrongend",
    "nanreward",
    "eof",
    "cut",
    "pings",
    "stall",
    "big",
    "bigline",
    "reject",
    "raise",
    "echoend",
]
ENVS = ["ok", "badjson", "wrongshape", "many", "echo"]
#: Text of one unit of a `big` output: plain text, JSON escapes (quote, backslash, newline, tab), non-ASCII.
BIG_UNIT = 'line: "quoted" \\ tab\t é 漢字 end\n'


def encode_event(event: str, data: str, sep: str = "\r\n") -> str:
    """Encode one event the way sse-starlette does.

    Example:
        >>> encode_event("end", "a\\nb")
        'event: end\\r\\ndata: a\\r\\ndata: b\\r\\n\\r\\n'
    """
    lines = [f"event: {event}"] + [
        f"data: {d}" for d in data.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    ]
    return sep.join(lines) + sep + sep


def big_text(n: int) -> str:
    """The first `n` characters of a `big` output (for checking the head the client kept)."""
    reps = n // len(BIG_UNIT) + 1
    return (BIG_UNIT * reps)[:n]


def many_tools(count: int = 3000) -> list[dict[str, Any]]:
    """`count` tools: plain ones, `$ref` loops, non-object schemas, code in names and descriptions."""
    tools = []
    for i in range(count):
        kind = i % 5
        if kind == 0:
            schema: Any = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
        elif kind == 1:  # a $ref loop: a node whose child is a node
            schema = {
                "type": "object",
                "$defs": {"Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}}},
                "properties": {"root": {"$ref": "#/$defs/Node"}},
            }
        elif kind == 2:  # not an object at all
            schema = {"type": "string"}
        elif kind == 3:  # not even a schema object
            schema = [1, 2, 3]
        else:
            schema = {"$ref": "#/$defs/Self", "$defs": {"Self": {"$ref": "#/$defs/Self"}}}
        tools.append(
            {
                "name": f"tool_{i}" if i % 7 else f"tool-{i}; import os",
                "description": f"__import__('os').system('touch /tmp/ormix-pwned-{i}')\n"
                f"```python\nexec('raise SystemExit')\n```\n{{{{7*7}}}} \"\"\" ''' ",
                "input_schema": schema,
            }
        )
    return tools


class HostileServer:
    """The broken server above, run on its own event loop in a thread; `url`, `close()`.

    `requests` counts requests by path (handy to see retries).
    """

    def __init__(self) -> None:
        self.requests: dict[str, int] = {}
        self.headers_seen: list[dict[str, str]] = []
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task] = set()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hostile-ors", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the hostile server did not start")
        assert self._server is not None
        self.port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def start() -> None:
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            self._ready.set()

        self._loop.run_until_complete(start())
        self._loop.run_forever()

    def close(self) -> None:
        async def stop() -> None:
            assert self._server is not None
            self._server.close()
            for t in list(self._tasks):
                t.cancel()
            await asyncio.sleep(0)

        if self._loop.is_running():
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def __enter__(self) -> HostileServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- HTTP

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if line:
                        k, _, v = line.partition(":")
                        headers[k.strip().lower()] = v.strip()
                n = int(headers.get("content-length", "0"))
                body = await reader.readexactly(n) if n else b""
                self.requests[path] = self.requests.get(path, 0) + 1
                self.headers_seen.append(headers)
                keep = await self._route(method, path, headers, body, writer)
                if not keep:
                    return
        except (ConnectionError, asyncio.CancelledError):
            return
        finally:
            self._tasks.discard(task)
            writer.close()

    @staticmethod
    async def _send(
        writer: asyncio.StreamWriter, status: int, body: bytes | str, ctype: str = "application/json"
    ) -> bool:
        data = body.encode() if isinstance(body, str) else body
        writer.write(
            f"HTTP/1.1 {status} X\r\ncontent-type: {ctype}\r\ncontent-length: {len(data)}\r\n\r\n".encode()
            + data
        )
        await writer.drain()
        return True

    async def _json(self, writer: asyncio.StreamWriter, value: Any, status: int = 200) -> bool:
        return await self._send(writer, status, json.dumps(value))

    async def _route(
        self, method: str, path: str, headers: dict[str, str], body: bytes, writer: asyncio.StreamWriter
    ) -> bool:
        parts = path.strip("/").split("/")
        echo = json.dumps(headers)
        if path == "/list_environments":
            return await self._json(writer, ENVS)
        if path == "/health":
            return await self._json(writer, {"status": "ok"})
        if path == "/create":
            req = json.loads(body or b"{}")
            if req.get("env_name") == "echo" and req.get("index") == 1:
                # Refuse, quoting the request (and so its X-Secrets header) back.
                return await self._json(writer, {"detail": f"cannot create: {echo}"}, 500)
            return await self._json(writer, {"sid": headers.get("x-session-id")})
        if path in ("/ping", "/delete"):
            return await self._json(writer, {"status": "ok"})
        if len(parts) != 2:
            return await self._json(writer, {"detail": "Not Found"}, 404)
        env, what = parts
        if env == "echo" and what == "prompt":
            return await self._json(writer, {"detail": f"Active environment not found; you sent {echo}"}, 404)
        if env == "echo" and what == "num_tasks":
            return await self._send(writer, 200, f"not json: {headers.get('x-api-key')} {echo}")
        if env == "echo" and what != "call":
            return await self._json(writer, {"detail": f"I am a teapot; you sent {echo}"}, 418)
        if what == "call":
            req = json.loads(body)
            return await self._call(env, req.get("name"), req.get("input") or {}, headers, writer)
        if what == "prompt":
            if env == "badjson":
                return await self._send(writer, 200, '[{"type": "text", "te')
            return await self._json(writer, [{"type": "text", "text": f"Task for {env}."}])
        if env == "badjson":
            return await self._send(
                writer,
                200,
                '{"tools": [{"name": "x", ' if what.endswith("tools") else "<html>502 Bad Gateway</html>",
            )
        if env == "wrongshape":
            shapes = {
                "tools": {"tools": "ok, echo"},
                "task_tools": [1, 2],
                "num_tasks": {"num_tasks": "2"},
                "task": {"task": [1]},
                "task_range": {"tasks": {"a": 1}},
                "tasks": [],
                "splits": {"train": 1},
            }
            return await self._json(writer, shapes.get(what, {}))
        if what in ("tools", "task_tools"):
            tools = (
                many_tools()
                if env == "many"
                else [
                    {
                        "name": t,
                        "description": f"The {t} fault.",
                        "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}},
                    }
                    for t in CALL_TOOLS
                ]
            )
            return await self._json(writer, {"tools": tools, "terminal_tool": None})
        if what == "splits":
            return await self._json(writer, [{"name": "train", "type": "train"}])
        if what == "num_tasks":
            return await self._json(writer, {"num_tasks": 2})
        if what == "task":
            return await self._json(writer, {"task": {"i": json.loads(body).get("index")}, "env_name": env})
        if what in ("task_range", "tasks"):
            return await self._json(writer, {"tasks": [{"i": 0}, {"i": 1}], "env_name": env})
        return await self._json(writer, {"detail": "Not Found"}, 404)

    # ---------------------------------------------------------------- SSE

    @staticmethod
    def _chunk(writer: asyncio.StreamWriter, text: str) -> None:
        data = text.encode()
        writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    @staticmethod
    def _event(name: str, data: str) -> str:
        return encode_event(name, data)

    async def _call(
        self, env: str, tool: str | None, args: dict, headers: dict[str, str], writer: asyncio.StreamWriter
    ) -> bool:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        task_id = str(uuid.uuid4())
        self._chunk(writer, self._event("task_id", task_id))
        ok = {
            "ok": True,
            "output": {
                "blocks": [{"type": "text", "text": f"{tool} ran"}],
                "metadata": None,
                "reward": 1.0,
                "finished": False,
            },
        }
        if tool == "ok":
            self._chunk(writer, self._event("end", json.dumps(ok)))
        elif tool == "badend":
            self._chunk(writer, self._event("end", '{"ok": true, "output": {"blocks": [{"type": "te'))
        elif tool == "wrongend":
            self._chunk(writer, self._event("end", json.dumps({"ok": True, "output": {"blocks": "many"}})))
        elif tool == "nanreward":
            self._chunk(writer, self._event("end", '{"ok": true, "output": {"blocks": [], "reward": NaN}}'))
        elif tool == "reject":
            self._chunk(
                writer,
                self._event(
                    "end",
                    json.dumps(
                        {
                            "ok": False,
                            "reason": "input_validation",
                            "error": f"bad input; you sent {json.dumps(headers)}",
                        }
                    ),
                ),
            )
        elif tool == "echoend":
            self._chunk(writer, self._event("end", f"{headers.get('x-api-key', '')} is not JSON"))
        elif tool == "raise":
            self._chunk(writer, self._event("error", f"RuntimeError: headers were {json.dumps(headers)}"))
        elif tool == "eof":
            self._chunk(writer, self._event("chunk", '{"ok": true, '))
        elif tool == "cut":
            self._chunk(writer, self._event("chunk", '{"ok": true, '))
            await writer.drain()
            writer.transport.abort()
            return False
        elif tool == "pings":
            while True:
                self._chunk(writer, ": ping\r\n\r\n")
                await writer.drain()
                await asyncio.sleep(0.05)
        elif tool == "stall":
            await writer.drain()
            await asyncio.sleep(3600)
        elif tool in ("big", "bigline"):
            await self._big(writer, int(args.get("n", 1000)), chunked=tool == "big")
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    async def _big(self, writer: asyncio.StreamWriter, n: int, *, chunked: bool) -> None:
        # The JSON result, generated lazily: the server's own memory stays small whatever `n` is.
        # `chunked`: 4096-character `chunk` events as openreward sends them; else one `end` data line.
        head = '{"ok": true, "output": {"blocks": [{"type": "text", "text": "'
        tail = (
            f'"}}, {{"type": "text", "text": "after"}}], "metadata": {{"n": {n}}}, "reward": 0.5, '
            f'"finished": true}}}}'
        )
        unit = json.dumps(BIG_UNIT)[1:-1]
        full, rest = divmod(n, len(BIG_UNIT))
        blocks, units = divmod(full, 100)
        sources = [unit * 100] * blocks + [unit] * units + [json.dumps(BIG_UNIT[:rest])[1:-1], tail]
        out: list[str] = []
        buf = head
        if not chunked:
            out.append("event: end\r\ndata: ")
        for src in sources:
            buf += src
            if chunked:
                while len(buf) >= 4096:
                    out.append(self._event("chunk", buf[:4096]))
                    buf = buf[4096:]
            else:
                out.append(buf)
                buf = ""
            if len(out) >= 16:
                self._chunk(writer, "".join(out))
                out.clear()
                await writer.drain()
        out.append(self._event("end", buf) if chunked else buf + "\r\n\r\n")
        self._chunk(writer, "".join(out))
