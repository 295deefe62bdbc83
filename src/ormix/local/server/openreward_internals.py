"""The one place that reads the openreward server's session state, which it keeps in private attributes.

The local servers need three things the openreward `Server` has no public API for: the ids of the sessions it
holds (tests check that every session was closed), deleting one session from inside an environment (the
`local:faulty` environment's "session dies" fault) and reaping idle sessions with a configurable limit (its
own reaper is fixed at 900 s). Everything that depends on those attributes is here, checked once against the
installed openreward, so an openreward release that renames them fails with one clear error instead of an
`AttributeError` deep in a server thread.

Example:
    >>> from types import SimpleNamespace
    >>> fake = SimpleNamespace(**{name: {} for name in SESSION_STATE})   # a stand-in: no server is started
    >>> session_ids(fake)
    []
"""

from __future__ import annotations

import time
from typing import Any

from ormix.errors import OrmixRuntimeError

__all__ = ["SESSION_STATE", "delete_session", "idle_sessions", "session_ids", "session_of"]

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
        import openreward

        raise OrmixRuntimeError(
            f"this openreward ({getattr(openreward, '__version__', '?')}) keeps its session state "
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
