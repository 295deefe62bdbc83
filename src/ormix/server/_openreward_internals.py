"""The one place that reads the openreward server's session state, which it keeps in private attributes.

The local servers need four things the openreward `Server` has no public API for: the ids of the sessions it
holds (tests check that every session was closed), deleting one session from inside an environment (the
`local:faulty` environment's "session dies" fault) and reaping idle sessions with a configurable limit (its
own reaper is fixed at 900 s), and a server process that does not pay for the SDK's client at start
(`defer_sdk_namespace`). Everything that depends on those attributes is here, checked once against the
installed openreward, so an openreward release that renames them fails with one clear error instead of an
`AttributeError` deep in a server thread.

Example:
    >>> from types import SimpleNamespace
    >>> fake = SimpleNamespace(**{name: {} for name in SESSION_STATE})   # a stand-in: no server is started
    >>> session_ids(fake)
    []
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import time
from typing import Any

from ormix._errors import OrmixRuntimeError

#: The openreward `Server` attributes holding per-session state, in the order its `_delete_session` takes
# them.
SESSION_STATE = (
    "_active_envs",
    "_active_toolsets",
    "_last_ping",
    "_setup_tasks",
    "_ready",
    "_setup_errors",
)


def _state(ors_server: Any) -> list[Any]:
    missing = [name for name in SESSION_STATE if not hasattr(ors_server, name)]
    if missing:
        from importlib.metadata import version

        raise OrmixRuntimeError(
            f"this openreward ({version('openreward')}) keeps its session state "
            f"differently (no {', '.join(missing)}): ormix's local servers need those attributes (they are "
            "tested with openreward 0.1.167; pyproject.toml sets only a lower bound): install a release "
            "that has them"
        )
    return [getattr(ors_server, name) for name in SESSION_STATE]


def session_ids(ors_server: Any) -> list[str]:
    """Ids of the sessions the server holds now (those with an environment instance)."""
    active_envs = _state(ors_server)[0]
    return [sid for sid, env in list(active_envs.items()) if env is not None]


def session_of(ors_server: Any, environment: Any) -> str | None:
    """The id of the session running this environment instance, if the server holds it."""
    active_envs = _state(ors_server)[0]
    return next((sid for sid, env in list(active_envs.items()) if env is environment), None)


def idle_sessions(ors_server: Any, limit_s: float, now: float | None = None) -> list[str]:
    """Sessions not pinged for more than `limit_s` seconds."""
    last_ping = _state(ors_server)[2]
    now = time.monotonic() if now is None else now
    return [sid for sid, ts in list(last_ping.items()) if now - ts > limit_s]


async def delete_session(ors_server: Any, sid: str) -> None:
    """Tear a session down the way the server's own reaper does (its environment's teardown runs)."""
    from openreward.environments.server import _delete_session

    await _delete_session(sid, *_state(ors_server))


def defer_sdk_namespace() -> bool:
    """Import `openreward`'s own names on first use, so a server process starts without the SDK's client.

    `openreward/__init__` imports the platform client and the rollout serializers (the anthropic, openai and
    google.genai types): 1.6 s of a server child's 2.1 s start (measured), none of it used to serve. This
    registers the package without running its `__init__`; submodules (`openreward.environments`, ...)
    import as usual, and the first lookup of a top-level name (`openreward.OpenReward`, `from openreward
    import Session`, as a user's environment may do) runs the real `__init__` then, in the same module
    (PEP 562). Any lookup of a name the package does not have yet loads it too (`hasattr`, `from
    openreward import environments` before that submodule is imported): then the start is as slow as
    without this, never wrong. Threads that look a name up while it loads wait for it (sync tools run in
    threads); a failed load raises its error, and the next lookup runs it again, in place. Only for a
    process's entry point, before anything imports openreward: returns False, changing nothing, once it is
    imported.

    Example:
        >>> import openreward
        >>> defer_sdk_namespace()   # too late: openreward is imported already, and stays as it is
        False
    """
    if "openreward" in sys.modules:
        return False
    spec = importlib.util.find_spec("openreward")
    if spec is None or spec.loader is None:
        return False  # not installed: the import that needs it says so
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader
    lock = threading.RLock()
    loading: list[int] = []  # the thread running the real `__init__`, while it runs

    def load_sdk(name: str) -> Any:
        if threading.get_ident() in loading:
            # The real `__init__` asking for a name it has not bound yet (`from . import judging` checks
            # first): not there yet, as in any module being imported.
            raise AttributeError(f"partially initialised module 'openreward' has no attribute {name!r}")
        with lock:
            if package.__dict__.get("__getattr__") is load_sdk:
                loading.append(threading.get_ident())
                try:
                    loader.exec_module(package)
                finally:
                    loading.clear()
                # Only on success: after a failure the hook stays, so the next lookup loads again.
                if package.__dict__.get("__getattr__") is load_sdk:
                    del package.__dict__["__getattr__"]
        return getattr(package, name)

    package.__dict__["__getattr__"] = load_sdk
    sys.modules["openreward"] = package
    return True
