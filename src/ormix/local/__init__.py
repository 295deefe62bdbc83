"""ORS environments that ship with ormix, and the code that serves them on loopback.

`local:echo`, `local:terminals`, `local:seta` and `local:faulty` stand in for catalog environments so
that everything (tests, demo, examples) runs offline.
"""

from ormix.local.server.registry import LOCAL_ENVIRONMENTS, UnknownEnvironmentError, load_environment_class
from ormix.local.server.serving import LocalServer, serve_in_process, serve_in_thread

__all__ = [
    "LOCAL_ENVIRONMENTS",
    "LocalServer",
    "UnknownEnvironmentError",
    "load_environment_class",
    "serve_in_process",
    "serve_in_thread",
]
