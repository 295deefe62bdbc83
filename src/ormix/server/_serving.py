"""Serve ORS environments on loopback: in a background thread or in a child process.

Both modes bind an ephemeral port, wait until `/health` answers, and shut down cleanly: the server's
lifespan deletes every open session (running each environment's `teardown()`, which removes sandboxes),
and a child process is terminated, then killed, so no process stays behind.

Shutdown always tears sessions down: requests still running get `GRACEFUL_SHUTDOWN_S` to finish and are then
cancelled, and a second Ctrl-C does not skip the teardown (uvicorn's "force quit" would). A child process
runs in its own session, so a Ctrl-C at the terminal reaches only its parent, which closes its sessions and
then stops the child with SIGTERM; and the child watches a pipe from its parent, so it also shuts down
(teardown included) when the parent dies without cleaning up (SIGKILL, an unhandled SIGTERM).

`idle_limit_s` reaps sessions idle for longer than the limit, the way the openreward server's own reaper
does at 900 s; tests shorten it to prove keepalive pings without waiting a quarter of an hour.

`keep_alive_s` is how long uvicorn keeps an idle keep-alive connection open (60 s unless given; uvicorn's
own default is 5 s, gunicorn's 2 s); tests shorten it to prove that clients survive servers that close
idle connections early. `ssl_certfile` / `ssl_keyfile` serve over TLS (`https://` URLs).

`api_key`: every request must carry it as `X-API-Key`, else it is answered 401 and runs nothing
(`ormix.server._auth`); a server on a non-loopback `host` refuses to start without one unless
`insecure=True`.

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
from dataclasses import dataclass, field
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
# Set by `serve_in_process` in the child's environment: uvicorn options `python -m ormix.server` has no flag
# for.
_KEEP_ALIVE_ENV = "ORMIX_SERVE_KEEP_ALIVE_S"
_CERTFILE_ENV = "ORMIX_SERVE_SSL_CERTFILE"
_KEYFILE_ENV = "ORMIX_SERVE_SSL_KEYFILE"


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
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only then; without it every reply waits ~40 ms for a
    # delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
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

    register = getattr(threading, "_register_atexit", None)
    try:
        if register is None:
            raise RuntimeError
        register(fn)
    except RuntimeError:  # no such hook on this Python, or already shutting down
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
    env_classes: Sequence[type],
    sock: socket.socket,
    idle_limit_s: float | None,
    uv_holder: list | None = None,
    keep_alive_s: float | None = None,
    ssl_certfile: str | None = None,
    ssl_keyfile: str | None = None,
    api_key: str | None = None,
) -> None:
    import uvicorn

    _one_exit_event_per_loop()
    ors_server = build_app(env_classes)
    if uv_holder is not None:
        uv_holder.append(ors_server)
    config = uvicorn.Config(
        APIKeyGuard(ors_server.app, api_key) if api_key else ors_server.app,
        log_level="warning",
        access_log=False,
        # uvicorn annotates these as int; it compares them with loop time, so fractions of a second work.
        timeout_keep_alive=DEFAULT_KEEP_ALIVE_S if keep_alive_s is None else keep_alive_s,  # type: ignore[arg-type]
        lifespan="on",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,  # type: ignore[arg-type]
        ssl_certfile=ssl_certfile,
        ssl_keyfile=ssl_keyfile,
    )
    uv = _server_class()(config)
    if uv_holder is not None:
        uv_holder.append(uv)
    reaper = None
    if idle_limit_s is not None:
        reaper = asyncio.create_task(_reap_idle(ors_server, idle_limit_s, min(1.0, idle_limit_s / 4)))
    try:
        await uv.serve(sockets=[sock])
    finally:
        if reaper is not None:
            reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reaper


def _check_exposure(host: str, api_key: str | None, insecure: bool) -> None:
    problem = exposure_problem(host, api_key, insecure=insecure)
    if problem is not None:
        raise ServerStartError(problem)


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
    envs: Sequence[str | type],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    idle_limit_s: float | None = None,
    ready_timeout_s: float = 30.0,
    keep_alive_s: float | None = None,
    ssl_certfile: str | None = None,
    ssl_keyfile: str | None = None,
    api_key: str | None = None,
    insecure: bool = False,
) -> LocalServer:
    """Serve environments (classes, `local:NAME` or `module:Class`) from a daemon thread of this process.

    `keep_alive_s`: idle keep-alive connections are closed after this long (default 60 s).
    `ssl_certfile` + `ssl_keyfile`: serve over TLS; the URL is then `https://`.
    `api_key`: required as `X-API-Key` on every request (401 otherwise); off loopback the server refuses
    to start without one unless `insecure`.

    Example:
        >>> srv = serve_in_thread(["local:echo", "local:seta"])
        >>> srv.env_names, srv.active_sessions()
        (['echo', 'seta'], [])
        >>> srv.close()
    """
    _check_exposure(host, api_key, insecure)
    classes = _classes(envs)
    sock = _bind(host, port)
    bound_port = sock.getsockname()[1]
    url = f"{'https' if ssl_certfile else 'http'}://{host}:{bound_port}"
    holder: list = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(
                _serve(classes, sock, idle_limit_s, holder, keep_alive_s, ssl_certfile, ssl_keyfile, api_key)
            )
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
        _wait_healthy(url, ready_timeout_s, alive=thread.is_alive, api_key=api_key)
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


def serve_in_process(
    envs: Sequence[str],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    idle_limit_s: float | None = None,
    ready_timeout_s: float = 60.0,
    env: dict[str, str] | None = None,
    keep_alive_s: float | None = None,
    ssl_certfile: str | None = None,
    ssl_keyfile: str | None = None,
    api_key: str | None = None,
    insecure: bool = False,
) -> LocalServer:
    """Serve environments named by `local:NAME` / `module:Class` from a child process.

    The child is the same code as `ormix serve`; it can be killed and restarted for fault tests.
    `keep_alive_s`, `ssl_certfile`, `ssl_keyfile`, `api_key`, `insecure`: as for `serve_in_thread` (the
    key reaches the child in its environment, never on its command line).

    Example:
        >>> with serve_in_process(["local:terminals"]) as srv:
        ...     srv.env_names, srv.mode
        (['terminals'], 'process')
    """
    _check_exposure(host, api_key, insecure)
    names = [e if isinstance(e, str) else f"{e.__module__}:{e.__qualname__}" for e in envs]
    cmd = [sys.executable, "-m", "ormix.server", "--host", host, "--port", str(port), *names]
    if idle_limit_s is not None:
        cmd += ["--idle-limit", str(idle_limit_s)]
    if insecure:
        cmd.append("--insecure")
    # Own session: a Ctrl-C at the terminal reaches only this process, which closes its sessions first and
    # then stops the child (SIGTERM). stdin is a pipe the child watches: EOF means this process is gone.
    child_env = {**os.environ, **(env or {}), _PARENT_PIPE_ENV: "1"}
    # The child's key is this call's, never one left in this process's environment for another server.
    child_env.pop(SERVE_API_KEY_ENV, None)
    if api_key:
        child_env[SERVE_API_KEY_ENV] = api_key
    for var, value in (
        (_KEEP_ALIVE_ENV, keep_alive_s),
        (_CERTFILE_ENV, ssl_certfile),
        (_KEYFILE_ENV, ssl_keyfile),
    ):
        if value is not None:
            child_env[var] = str(value)
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env,
        start_new_session=True,
    )
    # The child's ready line: its port and the envs it serves (loading the classes here too would import
    # openreward, seconds).
    ready: list[dict[str, str]] = []
    # The child's stderr: held while it starts (a failed start is reported as its last exception, in one
    # line), passed through once it serves (the server's own warnings).
    started_up = threading.Event()
    held: list[str] = []

    def relay_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            if started_up.is_set():
                with contextlib.suppress(OSError, ValueError):
                    sys.stderr.write(line)
            else:
                held.append(line)
                del held[:-200]

    threading.Thread(target=relay_stderr, daemon=True).start()

    def read_ready() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(READY_LINE):
                ready.append(dict(f.split("=", 1) for f in line.split()[1:]))
                break
        # Keep draining so the child never blocks on a full pipe.
        for _ in proc.stdout:
            pass

    reader = threading.Thread(target=read_ready, daemon=True)
    reader.start()

    def close() -> None:
        if proc.poll() is None:
            proc.terminate()  # graceful: the lifespan shutdown tears every open session down
            try:
                proc.wait(timeout=CHILD_EXIT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()

    what = f"local ORS server for {', '.join(names)}"

    def exited() -> ServerStartError:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        time.sleep(0.05)  # the relay thread reads the last lines the child wrote
        reason = child_error(held)
        return ServerStartError(
            f"{what} exited with code {proc.returncode} while starting: "
            + (reason or "it printed no error")
            + f" (run `{' '.join(cmd)}` to see all it printed)"
        )

    deadline = time.monotonic() + ready_timeout_s
    while not ready:
        if proc.poll() is not None:
            raise exited()
        if time.monotonic() > deadline:
            close()
            raise ServerStartError(f"{what} not ready after {ready_timeout_s:.0f}s (`{' '.join(cmd)}`)")
        time.sleep(0.02)
    port_of_child = int(ready[0]["port"])
    url = f"{'https' if ssl_certfile else 'http'}://{host}:{port_of_child}"
    try:
        _wait_healthy(url, ready_timeout_s, alive=lambda: proc.poll() is None, api_key=api_key)
    except ServerStartError:
        close()
        if proc.returncode is None:
            raise
        raise exited() from None
    started_up.set()
    for line in held:  # what the child printed while starting, e.g. a warning of its own
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(line)
    held.clear()
    server = LocalServer(
        url=url,
        port=port_of_child,
        env_names=ready[0]["envs"].split(","),
        mode="process",
        closer=close,
        pid=proc.pid,
        child_alive=lambda: proc.poll() is None,
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


def run_forever(
    envs: Sequence[str],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    idle_limit_s: float | None = None,
    keep_alive_s: float | None = None,
    ssl_certfile: str | None = None,
    ssl_keyfile: str | None = None,
    api_key: str | None = None,
    insecure: bool = False,
) -> None:
    """Serve in the foreground until SIGTERM/SIGINT (the body of `ormix serve` and `python -m ormix.server`).

    Every open session is torn down before it returns; Ctrl-C exits with status 130 without a traceback.
    Options left None are read from the environment `serve_in_process` gives its child; the key
    (`api_key`, else `ORMIX_SERVE_API_KEY`) is removed from it, so the environments' commands never see it.
    Raises `ServerStartError` on a non-loopback `host` without a key, unless `insecure`.
    """
    api_key = api_key or os.environ.pop(SERVE_API_KEY_ENV, None) or None
    os.environ.pop(SERVE_API_KEY_ENV, None)
    _check_exposure(host, api_key, insecure)
    classes = _classes(envs)
    sock = _bind(host, port)
    if os.environ.pop(_PARENT_PIPE_ENV, None) == "1":
        _watch_parent()
    if keep_alive_s is None and os.environ.get(_KEEP_ALIVE_ENV):
        keep_alive_s = float(os.environ.pop(_KEEP_ALIVE_ENV))
    ssl_certfile = ssl_certfile or os.environ.pop(_CERTFILE_ENV, None)
    ssl_keyfile = ssl_keyfile or os.environ.pop(_KEYFILE_ENV, None)
    print(
        f"{READY_LINE} port={sock.getsockname()[1]} envs={','.join(env_name_of(c) for c in classes)}",
        flush=True,
    )
    try:
        asyncio.run(
            _serve(classes, sock, idle_limit_s, None, keep_alive_s, ssl_certfile, ssl_keyfile, api_key)
        )
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
