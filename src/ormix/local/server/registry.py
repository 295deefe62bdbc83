"""Names of the environments that ship with ormix, and loading of `module:Class` targets.

A `local:NAME` target resolves here. Classes are imported lazily so that naming an environment
never imports the others (or their sandbox code).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from openreward.environments import Environment

#: `local:NAME` → `module:Class`. The server-side env name is the class name lower-cased, equal to NAME.
LOCAL_ENVIRONMENTS: dict[str, str] = {
    "echo": "ormix.local.envs.echo:Echo",
    "terminals": "ormix.local.envs.terminals:Terminals",
    "seta": "ormix.local.envs.seta:Seta",
    "faulty": "ormix.local.envs.faulty:Faulty",
    "latency": "ormix.local.envs.latency:Latency",
}


class UnknownEnvironmentError(ValueError):
    """A `local:` or `module:Class` target that does not name an environment class."""


def load_environment_class(ref: str) -> type[Environment]:
    """Return the `Environment` subclass named by `local:NAME`, `NAME` or `module:Class`.

    Example:
        >>> load_environment_class("local:echo").__name__
        'Echo'
    """
    from openreward.environments import Environment

    name = ref.removeprefix("local:")
    if name in LOCAL_ENVIRONMENTS:
        path = LOCAL_ENVIRONMENTS[name]
    elif ":" in name:
        path = name
    else:
        known = ", ".join(f"local:{n}" for n in sorted(LOCAL_ENVIRONMENTS))
        raise UnknownEnvironmentError(
            f"{ref!r} is not a local environment. Use one of {known}, or `module:Class` for your own "
            f"openreward.environments.Environment subclass."
        )
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise UnknownEnvironmentError(
            f"cannot import module {module_name!r} for target {ref!r}: {e}. Check the module is on PYTHONPATH."
        ) from e
    cls = getattr(module, attr, None)
    if not (isinstance(cls, type) and issubclass(cls, Environment)):
        raise UnknownEnvironmentError(
            f"{path!r} is not an openreward.environments.Environment subclass "
            f"(found {type(cls).__name__ if cls is not None else 'nothing'}); target {ref!r}."
        )
    return cls


def env_name_of(cls: type) -> str:
    """The name an ORS server uses for an environment class (its class name, lower-cased)."""
    return cls.__name__.lower()
