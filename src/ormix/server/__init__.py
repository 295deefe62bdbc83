"""Serving ORS environments on loopback, in a thread or a child process: how a `local:NAME` or
`module:path:Class` target becomes a URL. `python -m ormix.server` serves one from the shell.

Example:
    >>> from ormix.server import serve_in_thread
    >>> with serve_in_thread(["local:echo"]) as server:
    ...     server.url.startswith("http://127.0.0.1:")
    True
"""

from ormix.server._registry import LOCAL_ENVIRONMENTS, load_environment_class
from ormix.server._serving import LocalServer, ServeOptions, serve_in_process, serve_in_thread

__all__ = [
    "LOCAL_ENVIRONMENTS",
    "LocalServer",
    "ServeOptions",
    "load_environment_class",
    "serve_in_process",
    "serve_in_thread",
]
