"""Serve ORS environments on loopback: in a background thread or in a child process.

Both modes bind an ephemeral port, wait until `/health` answers, and shut down cleanly: the server's
lifespan deletes every open session (running each environment's `teardown()`, which removes sandboxes),
and a child process is terminated, then killed, so no process stays behind.

Shutdown always tears sessions down: requests still running get `GRACEFUL_SHUTDOWN_S` to finish and are then
cancelled, and a second Ctrl-C does not skip the teardown (uvicorn's "force quit" would). A child process
runs in its own session, so a Ctrl-C at the terminal reaches only its parent, which closes its sessions and
then stops the child with SIGTERM; and the child watches a pipe from its parent, so it also shuts down
(teardown included) when the parent dies without cleaning up (SIGKILL, an unhandled SIGTERM).

Every entry point (`serve_in_thread`, `serve_in_process`, `run_forever`, and through them `ormix serve` and
`python -m ormix.server`) takes one `ServeOptions`: host and port, the idle-session reaper's limit, uvicorn's
keep-alive, TLS, the API key. `idle_limit_s` reaps sessions idle for longer than the limit, the way the
openreward server's own reaper does at 900 s; tests shorten it to prove keepalive pings without waiting a
quarter of an hour. `keep_alive_s` is how long uvicorn keeps an idle keep-alive connection open (60 s unless
given; uvicorn's own default is 5 s, gunicorn's 2 s); tests shorten it to prove that clients survive servers
that close idle connections early. `api_key`: every request must carry it as `X-API-Key`, else it is answered
401 and runs nothing (`ormix.server._auth`); a server on a non-loopback `host` refuses to start without one
unless `insecure`.

The readiness probe (`GET /health`) goes through `ormix.ors._http`, the one HTTP client ormix uses.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ormix._errors import ServerStartError
from ormix.server._auth import SERVE_API_KEY_ENV, APIKeyGuard, exposure_problem
from ormix.server._openreward_internals import delete_session, idle_sessions, session_ids
from ormix.server._registry import env_name_of, load_environment_class

# Before openreward is imported: its loggers read the level once, at import. Local servers log warnings
# and errors only; set OPENREWARD_LOG_LEVEL=INFO to see every request.
os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")
os.environ.setdefault("OPENREWARD_LOG_LEVEL", "WARNING")

READY_LINE = "ORMIX_SERVER_READY"
#: Seconds running requests get to finish at shutdown before they are cancelled and sessions torn down.
GRACEFUL_SHUTDOWN_S = 3.0
#: Seconds `LocalServer.close()` waits for a child process to finish its teardown before killing it.
CHILD_EXIT_TIMEOUT_S = 20.0
# Set by `serve_in_process` in the child's environment: stdin is a pipe from the parent; EOF = parent gone.
_PARENT_PIPE_ENV = "ORMIX_SERVE_PARENT_PIPE"
#: Seconds uvicorn keeps an idle keep-alive connection open, unless `keep_alive_s` says otherwise.
DEFAULT_KEEP_ALIVE_S = 60.0


@dataclass(frozen=True)
class ServeOptions:
    """How to serve, declared once: every entry point takes these (`serve_in_thread`, `serve_in_process`,
    `run_forever`, `ormix serve`, `python -m ormix.server`).

    Every field but `api_key` is also a flag of `python -m ormix.server` (`flag_of`): that is how
    `serve_in_process` hands the options to its child. The key reaches the child in its environment
    (`ORMIX_SERVE_API_KEY`), never on its command line.

    Attributes:
        host: the address to bind; off loopback a key is required unless `insecure`.
        port: the port to bind; 0 = any free one.
        idle_limit_s: reap sessions idle this many seconds; ``None``: ormix reaps none.
        keep_alive_s: close idle keep-alive connections after this many seconds; ``None``: 60 s.
        ssl_certfile: serve over TLS with this certificate (``https://`` URLs); needs `ssl_keyfile`.
        ssl_keyfile: the certificate's key.
        insecure: serve off loopback without a key.
        api_key: every request must carry it as ``X-API-Key`` (401 otherwise).

    Example:
        >>> options = ServeOptions(idle_limit_s=5.0, ssl_certfile="c.pem", ssl_keyfile="k.pem")
        >>> options.url_for(8080)
        'https://127.0.0.1:8080'
        >>> options.argv()
        ['--idle-limit', '5.0', '--ssl-certfile', 'c.pem', '--ssl-keyfile', 'k.pem']
    """

    host: str = field(
        default="127.0.0.1", metadata={"help": "address to bind; keep loopback unless you mean it"}
    )
    port: int = field(default=0, metadata={"help": "port to listen on (0 = any free port)"})
    idle_limit_s: float | None = field(
        default=None, metadata={"help": "reap sessions idle this many seconds"}
    )
    keep_alive_s: float | None = field(
        default=None,
        metadata={"help": f"close idle connections after this many seconds ({DEFAULT_KEEP_ALIVE_S:.0f})"},
    )
    ssl_certfile: str | None = field(default=None, metadata={"help": "serve TLS with this cert"})
    ssl_keyfile: str | None = field(default=None, metadata={"help": "the certificate's key"})
    insecure: bool = field(default=False, metadata={"help": "serve off loopback without a key"})
    api_key: str | None = field(default=None, repr=False)

    def url_for(self, port: int) -> str:
        """The URL of a server on `port` with these options (an IPv6 address in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.ssl_certfile else 'http'}://{host}:{port}"

    def problem(self) -> str | None:
        """Why these options cannot serve (off loopback without a key, a TLS key without its certificate, a
        clock that is not above 0), else ``None``. A certificate alone is a PEM file that holds its key too,
        as `ssl` reads it."""
        problem = exposure_problem(self.host, self.api_key, insecure=self.insecure)
        if problem is None and self.ssl_keyfile is not None and self.ssl_certfile is None:
            problem = "--ssl-keyfile needs --ssl-certfile (the certificate the key belongs to)"
        for name in ("idle_limit_s", "keep_alive_s"):
            value = getattr(self, name)
            if problem is None and value is not None and not value > 0:  # `not >`: NaN too
                problem = f"{flag_of(name)} takes a number of seconds above 0, not {value}"
        for name in ("ssl_certfile", "ssl_keyfile"):
            path = getattr(self, name)
            if problem is None and path is not None and not os.path.isfile(path):
                problem = f"{flag_of(name)} {path}: no such file"
        return problem

    def check(self) -> None:
        """Raise `ServerStartError` for options that cannot serve (`problem`), or a certificate and key that
        do not load: before anything is bound or announced."""
        if (problem := self.problem()) is not None:
            raise ServerStartError(problem)
        if self.ssl_certfile is not None:
            import ssl

            try:
                ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(self.ssl_certfile, self.ssl_keyfile)
            except (OSError, ssl.SSLError) as e:
                raise ServerStartError(
                    f"--ssl-certfile {self.ssl_certfile}: the certificate and its key do not load ({e})"
                ) from None

    def argv(self) -> list[str]:
        """The `python -m ormix.server` flags of the options that differ from their defaults (not the key)."""
        out: list[str] = []
        for option in fields(self):
            value = getattr(self, option.name)
            if option.name == "api_key" or value == option.default:
                continue
            out += [flag_of(option.name)] if value is True else [flag_of(option.name), str(value)]
        return out


def flag_of(name: str) -> str:
    """The flag of a `ServeOptions` field: ``idle_limit_s`` is ``--idle-limit``, as `ormix serve` spells it.

    Example:
        >>> flag_of("idle_limit_s"), flag_of("ssl_certfile")
        ('--idle-limit', '--ssl-certfile')
    """
    return "--" + name.removesuffix("_s").replace("_", "-")


_sse_patched = False


def _one_exit_event_per_loop() -> None:
    """Let several servers run in one process (thread mode).

    sse-starlette keeps ONE process-wide exit event, bound to the event loop of the first streamed response;
    every streamed `/call` of a server on another loop then fails ("bound to a different event loop"). Keep
    one event per loop instead, all set when uvicorn handles an exit signal.
    """
    global _sse_patched
    if _sse_patched:
        return

    import uvicorn
    from sse_starlette import sse

    events: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    async def listen_for_exit_signal() -> None:
        if sse.AppStatus.should_exit:
            return
        loop = asyncio.get_running_loop()
        event = events.get(loop)
        if event is None:
            event = events[loop] = asyncio.Event()
        await event.wait()

    original = uvicorn.Server.handle_exit

    def handle_exit(*args, **kwargs):
        for loop, event in list(events.items()):
            with contextlib.suppress(RuntimeError):  # a closed loop
                loop.call_soon_threadsafe(event.set)
        return original(*args, **kwargs)

    # Patched on the classes: the libraries offer no hook for "a server in this process is stopping".
    sse.EventSourceResponse._listen_for_exit_signal = staticmethod(listen_for_exit_signal)  # type: ignore[method-assign]
    uvicorn.Server.handle_exit = handle_exit  # type: ignore[method-assign]
    _sse_patched = True


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port`` (IPv4 or IPv6, as the host is); `ServerStartError` when the
    address cannot be had (in use, not this machine's)."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
        # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only then; without it every reply waits ~40 ms for a
        # delayed ACK.
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    except OSError as e:
        raise ServerStartError(f"cannot listen on {host}: {e.strerror or e}; give another --host") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ServerStartError(
            f"cannot listen on {host}:{port}: {e.strerror or e}; give another --port (0: any free one), or "
            "stop what holds it"
        ) from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


async def _reap_idle(ors_server, limit_s: float, interval_s: float) -> None:
    """The openreward server's reaper with a configurable threshold (its own is fixed at 900 s)."""
    while True:
        await asyncio.sleep(interval_s)
        for sid in idle_sessions(ors_server, limit_s):
            await delete_session(ors_server, sid)


_BUILT: weakref.WeakSet = weakref.WeakSet()


def at_exit_early(fn) -> None:
    """Run `fn` when the interpreter starts to exit, before thread pools refuse new work.

    `atexit` hooks run after `concurrent.futures` has shut its executors down; an in-process server tearing
    down its sessions then fails ("cannot schedule new futures after shutdown"). threading's own exit hooks
    run first, newest first, so registering after the executors' hook puts `fn` ahead of it.
    """
    import concurrent.futures.thread  # noqa: F401 - registers the executors' exit hook before ours

    try:
        threading._register_atexit(fn)  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):  # no such hook on this Python, or already shutting down
        atexit.register(fn)


def build_app(env_classes: Sequence[type]):
    """An openreward `Server` for these classes (first one is the default env)."""
    from openreward.environments import Server

    server = Server(list(env_classes))
    _BUILT.add(server)
    return server


def servers_in_process() -> list:
    """The openreward `Server` objects this process built (for environments that must reach their server)."""
    return list(_BUILT)


def _server_class():
    import uvicorn

    class _Server(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:
            super().handle_exit(sig, frame)
            # uvicorn skips the lifespan shutdown on a second SIGINT ("force quit"), and with it the teardown
            # of every open session: sandbox directories would stay behind. The graceful wait is bounded
            # (timeout_graceful_shutdown) instead.
            self.force_exit = False

    return _Server


async def _serve(
    env_classes: Sequence[type], sock: socket.socket, options: ServeOptions, uv_holder: list | None = None
) -> None:
    import uvicorn

    _one_exit_event_per_loop()
    ors_server = build_app(env_classes)
    if uv_holder is not None:
        uv_holder.append(ors_server)
    api_key, keep_alive_s = options.api_key, options.keep_alive_s
    config = uvicorn.Config(
        APIKeyGuard(ors_server.app, api_key) if api_key else ors_server.app,
        log_level="warning",
        access_log=False,
        # uvicorn annotates these as int; it compares them with loop time, so fractions of a second work.
        timeout_keep_alive=DEFAULT_KEEP_ALIVE_S if keep_alive_s is None else keep_alive_s,  # type: ignore[arg-type]
        lifespan="on",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,  # type: ignore[arg-type]
        ssl_certfile=options.ssl_certfile,
        ssl_keyfile=options.ssl_keyfile,
    )
    uv = _server_class()(config)
    if uv_holder is not None:
        uv_holder.append(uv)
    reaper = None
    if (limit := options.idle_limit_s) is not None:
        reaper = asyncio.create_task(_reap_idle(ors_server, limit, min(1.0, limit / 4)))
    try:
        await uv.serve(sockets=[sock])
    finally:
        if reaper is not None:
            reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reaper


def _wait_healthy(url: str, timeout_s: float, alive=lambda: True, api_key: str | None = None) -> None:
    """Poll `GET /health` until it answers 200 (one HTTP client, on a private loop: callable from any
    thread, also one whose own loop is running)."""
    import anyio

    from ormix.ors._bridge import run_in_new_loop
    from ormix.ors._http import HTTPClient, HTTPFailure

    async def probe() -> None:
        deadline = time.monotonic() + timeout_s
        last: BaseException | None = None
        async with HTTPClient(connect_timeout_s=1.0) as http:
            while time.monotonic() < deadline:
                if not alive():
                    raise ServerStartError(f"local ORS server at {url} exited during start-up")
                try:
                    with anyio.fail_after(1.0):
                        headers = {"X-API-Key": api_key} if api_key else None
                        if (await http.request("GET", f"{url}/health", headers=headers)).status_code == 200:
                            return
                except (HTTPFailure, TimeoutError) as e:
                    last = e
                await anyio.sleep(0.02)
        raise ServerStartError(
            f"local ORS server at {url} not healthy after {timeout_s:.0f}s (last error: {last!r})"
        )

    run_in_new_loop(probe)


@dataclass
class LocalServer:
    """A running local ORS server. Use as a context manager or call `close()`.

    Example:
        >>> with serve_in_thread(["local:echo"]) as srv:       # an ephemeral port on loopback
        ...     srv.url.startswith("http://127.0.0.1:"), srv.env_names, srv.mode, srv.alive
        (True, ['echo'], 'thread', True)
        >>> srv.alive                                           # closed on leaving the block
        False
    """

    url: str
    port: int
    env_names: list[str]
    mode: str
    closer: Callable[[], None] | None = field(repr=False, default=None)
    #: The openreward server object (thread mode: it lives in this process), else None.
    ors_server: Any = field(repr=False, default=None)
    #: The child's pid (process mode), else None.
    pid: int | None = None
    #: Whether the serving child still runs (process mode); None where there is no child to ask.
    child_alive: Callable[[], bool] | None = field(repr=False, default=None)
    closed: bool = field(repr=False, default=False)

    @property
    def alive(self) -> bool:
        """Not closed, and (process mode) its child still runs."""
        return not self.closed and (self.child_alive is None or bool(self.child_alive()))

    def close(self) -> None:
        """Stop the server; open sessions are torn down. Idempotent."""
        if self.closed:
            return
        self.closed = True
        if self.closer is not None:
            self.closer()

    def active_sessions(self) -> list[str]:
        """Ids of the sessions the server holds now (thread mode only: it reads the server's memory)."""
        if self.ors_server is None:
            raise RuntimeError("active_sessions() needs a server started with serve_in_thread")
        return session_ids(self.ors_server)

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _classes(envs: Sequence[str | type]) -> list[type]:
    return [load_environment_class(e) if isinstance(e, str) else e for e in envs]


def serve_in_thread(
    envs: Sequence[str | type], options: ServeOptions | None = None, *, ready_timeout_s: float = 30.0
) -> LocalServer:
    """Serve environments (classes, `local:NAME` or `module:Class`) from a daemon thread of this process.

    `options`: how to serve (`ServeOptions`: host, port, key, TLS, ...); default loopback, any free port.

    Example:
        >>> srv = serve_in_thread(["local:echo", "local:seta"])
        >>> srv.env_names, srv.active_sessions()
        (['echo', 'seta'], [])
        >>> srv.close()
    """
    options = options or ServeOptions()
    options.check()
    classes = _classes(envs)
    sock = _bind(options.host, options.port)
    bound_port = sock.getsockname()[1]
    url = options.url_for(bound_port)
    holder: list = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(_serve(classes, sock, options, holder))
        except BaseException as e:  # surfaced by the readiness wait
            errors.append(e)

    thread = threading.Thread(target=run, name=f"ormix-ors-{bound_port}", daemon=True)
    thread.start()

    def close() -> None:
        if len(holder) > 1:
            holder[1].should_exit = True
        thread.join(timeout=15)
        with contextlib.suppress(OSError):
            sock.close()

    try:
        _wait_healthy(url, ready_timeout_s, alive=thread.is_alive, api_key=options.api_key)
    except ServerStartError as e:
        close()
        raise ServerStartError(f"{e}; {errors[0]!r}" if errors else str(e)) from None
    server = LocalServer(
        url=url,
        port=bound_port,
        env_names=[env_name_of(c) for c in classes],
        mode="thread",
        closer=close,
        ors_server=holder[0],
    )
    at_exit_early(server.close)
    return server


def _child_environment(options: ServeOptions, env: dict[str, str] | None) -> dict[str, str]:
    """The child's environment: this process's, `env` over it, the parent-pipe marker, and the key."""
    child_env = {**os.environ, **(env or {}), _PARENT_PIPE_ENV: "1"}
    # The child's key is this call's, never one left in this process's environment for another server.
    child_env.pop(SERVE_API_KEY_ENV, None)
    if options.api_key:
        child_env[SERVE_API_KEY_ENV] = options.api_key
    return child_env


class _Child:
    """A `python -m ormix.server` child process, started by `serve_in_process`.

    It runs in its own session: a Ctrl-C at the terminal reaches only the parent, which closes its sessions
    first and then stops the child (SIGTERM). Its stdin is a pipe it watches: EOF means the parent is gone.
    Its stdout carries the ready line (its port and the envs it serves: loading the classes here too would
    import openreward, seconds). Its stderr is held while it starts (a failed start is reported as its last
    exception, in one line) and passed through once it serves (the server's own warnings).
    """

    def __init__(self, names: list[str], options: ServeOptions, env: dict[str, str] | None) -> None:
        # The options travel as the child's flags, the key in its environment (never on its command line).
        self.cmd = [sys.executable, "-m", "ormix.server", *options.argv(), *names]
        self.what = f"local ORS server for {', '.join(names)}"
        self.ready: list[dict[str, str]] = []
        self.started_up = threading.Event()
        self.held: list[str] = []
        self.proc = subprocess.Popen(
            self.cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_child_environment(options, env),
            start_new_session=True,
        )
        threading.Thread(target=self._relay_stderr, daemon=True).start()
        threading.Thread(target=self._read_ready, daemon=True).start()

    def alive(self) -> bool:
        """Whether the child still runs."""
        return self.proc.poll() is None

    def _relay_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if self.started_up.is_set():
                with contextlib.suppress(OSError, ValueError):
                    sys.stderr.write(line)
            else:
                self.held.append(line)
                del self.held[:-200]

    def _read_ready(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(READY_LINE):
                self.ready.append(dict(f.split("=", 1) for f in line.split()[1:]))
                break
        # Keep draining so the child never blocks on a full pipe.
        for _ in self.proc.stdout:
            pass

    def close(self) -> None:
        """Stop the child gracefully (its lifespan shutdown tears every open session down), else kill it."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=CHILD_EXIT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    def exited(self) -> ServerStartError:
        """The error for a child that exited while starting, naming its last exception."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        time.sleep(0.05)  # the relay thread reads the last lines the child wrote
        reason = child_error(self.held)
        return ServerStartError(
            f"{self.what} exited with code {self.proc.returncode} while starting: "
            + (reason or "it printed no error")
            + f" (run `{' '.join(self.cmd)}` to see all it printed)"
        )

    def wait_ready(self, timeout_s: float) -> dict[str, str]:
        """The child's ready line (``port``, ``envs``), once it printed it."""
        deadline = time.monotonic() + timeout_s
        while not self.ready:
            if self.proc.poll() is not None:
                raise self.exited()
            if time.monotonic() > deadline:
                self.close()
                raise ServerStartError(
                    f"{self.what} not ready after {timeout_s:.0f}s (`{' '.join(self.cmd)}`)"
                )
            time.sleep(0.02)
        return self.ready[0]

    def serving(self) -> None:
        """From now on pass the child's stderr through, starting with what it printed while starting."""
        self.started_up.set()
        for line in self.held:  # e.g. a warning of its own
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.write(line)
        self.held.clear()


def serve_in_process(
    envs: Sequence[str | type],
    options: ServeOptions | None = None,
    *,
    ready_timeout_s: float = 60.0,
    env: dict[str, str] | None = None,
) -> LocalServer:
    """Serve environments named by `local:NAME` / `module:Class` from a child process.

    The child is the same code as `ormix serve`; it can be killed and restarted for fault tests.
    `options`: as for `serve_in_thread` (the key reaches the child in its environment, never on its command
    line). `env`: variables set in the child's environment.

    Example:
        >>> with serve_in_process(["local:terminals"]) as srv:
        ...     srv.env_names, srv.mode
        (['terminals'], 'process')
    """
    options = options or ServeOptions()
    options.check()
    names = [e if isinstance(e, str) else f"{e.__module__}:{e.__qualname__}" for e in envs]
    child = _Child(names, options, env)
    ready = child.wait_ready(ready_timeout_s)
    port = int(ready["port"])
    url = options.url_for(port)
    try:
        _wait_healthy(url, ready_timeout_s, alive=child.alive, api_key=options.api_key)
    except ServerStartError:
        child.close()
        if child.proc.returncode is None:
            raise
        raise child.exited() from None
    child.serving()
    server = LocalServer(
        url=url,
        port=port,
        env_names=ready["envs"].split(","),
        mode="process",
        closer=child.close,
        pid=child.proc.pid,
        child_alive=child.alive,
    )
    atexit.register(server.close)
    return server


def child_error(lines: Sequence[str]) -> str | None:
    """The last exception a Python process printed (``"ValueError: ..."``), from its stderr lines.

    Example:
        >>> child_error(["Traceback (most recent call last):", '  File "x.py", line 1',
        ...              "ValueError: Environment 'env' has no tools defined.", "Fatal Python error: x"])
        "ValueError: Environment 'env' has no tools defined."
    """
    found = None
    for i, line in enumerate(lines):
        text = line.rstrip()
        if text.startswith("Traceback (most recent call last)"):
            found = None
            for later in lines[i + 1 :]:
                if later.strip() and not later[:1].isspace():
                    found = later.strip()
                    break
    if found is None:
        errors = [x.strip() for x in lines if x.strip().startswith(("error:", "ERROR", "Error"))]
        found = errors[-1] if errors else None
    return found


def ready_line(server: LocalServer) -> str:
    """The line `python -m ormix.server` prints once it is bound: `serve_in_process` reads the child's port
    and environments from it.

    Example:
        >>> ready_line(LocalServer("http://127.0.0.1:8080", 8080, ["echo", "seta"], "foreground"))
        'ORMIX_SERVER_READY port=8080 envs=echo,seta'
    """
    return f"{READY_LINE} port={server.port} envs={','.join(server.env_names)}"


def run_forever(
    envs: Sequence[str],
    options: ServeOptions | None = None,
    *,
    on_ready: Callable[[LocalServer], None] | None = None,
) -> None:
    """Serve in the foreground until SIGTERM/SIGINT (the body of `ormix serve` and `python -m ormix.server`).

    `on_ready` gets the server (its URL, port and environments; mode ``"foreground"``) once its socket is
    bound: connections wait from then until it serves. Every open session is torn down before it returns;
    Ctrl-C exits with status 130 without a traceback. The key's variable (`ORMIX_SERVE_API_KEY`) is removed
    from this process's environment, so the environments' commands never see it: the key is
    `options.api_key`. Raises `ServerStartError` for options that cannot serve (`ServeOptions.check`).
    """
    options = options or ServeOptions()
    # The key from the environment when the caller gave none (as `python -m ormix.server` is started).
    key = options.api_key or os.environ.pop(SERVE_API_KEY_ENV, None) or None
    os.environ.pop(SERVE_API_KEY_ENV, None)
    options = replace(options, api_key=key)
    options.check()
    classes = _classes(envs)
    sock = _bind(options.host, options.port)
    if os.environ.pop(_PARENT_PIPE_ENV, None) == "1":
        _watch_parent()
    if on_ready is not None:
        port = sock.getsockname()[1]
        names = [env_name_of(c) for c in classes]
        on_ready(LocalServer(url=options.url_for(port), port=port, env_names=names, mode="foreground"))
    try:
        asyncio.run(_serve(classes, sock, options))
    except KeyboardInterrupt:
        # uvicorn re-raises the SIGINT it handled, after its graceful shutdown: nothing is left to do.
        raise SystemExit(130) from None


def _watch_parent() -> None:
    """Shut down like on SIGTERM (sessions torn down) once stdin, a pipe from the parent, reaches EOF."""

    fd = sys.stdin.fileno()

    def watch() -> None:
        # The raw descriptor, not sys.stdin: a daemon thread blocked inside a buffered reader makes the
        # interpreter abort at exit ("could not acquire lock"), e.g. when the server failed to start.
        with contextlib.suppress(OSError):
            while os.read(fd, 65536):
                pass
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="ormix-parent-watch", daemon=True).start()
