"""One local server per environment target per process, started on first use and stopped at exit.

`local:NAME` and `module:Class` targets are served automatically: every spec (or mixture member) naming the
same target shares one server, so two members built from `local:seta` with different filters share one
connection and one tool surface.
"""

from __future__ import annotations

import os
import threading

from ormix.server._registry import search_path
from ormix.server._serving import LocalServer, serve_in_process, serve_in_thread

_servers: dict[tuple[str, str], LocalServer] = {}
_starting: dict[tuple[str, str], threading.Lock] = {}
_lock = threading.Lock()

#: `process` (the environment's work never competes with the trainer for the GIL) or `thread`; the
#: environment variable `ORMIX_LOCAL_SERVE` overrides it, read at each call.
DEFAULT_MODE = "process"


def server_for(target: str, *, mode: str | None = None) -> LocalServer:
    """The running local server for `target` (`local:NAME` or `module:Class`), starting it if needed.

    Example:
        >>> server = server_for("local:echo", mode="thread")     # the default mode is a child process
        >>> server_for("local:echo", mode="thread") is server, server.env_names
        (True, ['echo'])
    """
    mode = mode or os.environ.get("ORMIX_LOCAL_SERVE") or DEFAULT_MODE
    if mode not in ("process", "thread"):
        raise ValueError(f"local serve mode must be 'process' or 'thread', not {mode!r} (ORMIX_LOCAL_SERVE)")
    key = (target, mode)
    with _lock:
        starting = _starting.setdefault(key, threading.Lock())
    # One lock per target: different targets start at once (each child spends seconds importing), the same
    # target starts once.
    with starting:
        with _lock:
            server = _servers.get(key)
        if server is not None and server.alive:
            return server
        if mode == "thread":
            server = serve_in_thread([target])
        else:
            # The child must import a user's `module:Class` the way this process does.
            path = os.pathsep.join(search_path())
            server = serve_in_process([target], env={"PYTHONPATH": path})
        with _lock:
            _servers[key] = server
        return server


def close_all() -> None:
    """Stop every shared local server of this process."""
    with _lock:
        servers = list(_servers.values())
        _servers.clear()
    for server in servers:
        server.close()
