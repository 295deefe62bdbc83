"""Names of the environments that ship with ormix, and finding the classes of `module:Class` targets.

A `local:NAME` target resolves here. Classes are imported lazily so that naming an environment never
imports the others (or their sandbox code).

A `module:Class` target is looked up the same way in every process (the trainer, `ormix check`, and the
child process that serves it): first in the directories of the mixture files loaded so far (so a module next
to its mixture file needs no PYTHONPATH), then in the working directory, then on `sys.path`.
`search_path()` is that list; `serve_in_process` hands it to the child as its PYTHONPATH.

Example:
    >>> load_environment_class("local:echo").__name__
    'Echo'
    >>> try:
    ...     load_environment_class("local:terminal")
    ... except TargetError as e:
    ...     print(str(e)[:63])
    'local:terminal' is not a local environment; did you mean 'loca
"""

from __future__ import annotations

import difflib
import importlib
import os
import sys
import threading
import types
from pathlib import Path
from typing import TYPE_CHECKING

from ormix._errors import TargetError

if TYPE_CHECKING:  # pragma: no cover
    from openreward.environments import Environment

#: `local:NAME` → `module:Class`. The server-side env name is the class name lower-cased, equal to NAME.
LOCAL_ENVIRONMENTS: dict[str, str] = {
    "echo": "ormix.workbench.envs.echo:Echo",
    "terminals": "ormix.workbench.envs.terminals:Terminals",
    "seta": "ormix.workbench.envs.seta:Seta",
    "faulty": "ormix.workbench.envs.faulty:Faulty",
    "latency": "ormix.workbench.envs.latency:Latency",
    "ranked": "ormix.workbench.envs.ranked:Ranked",
}

# Process-wide: directories of the mixture files loaded so far, searched first for `module:Class` targets.
_search_dirs: list[str] = []
_lock = threading.Lock()


def add_search_dir(directory: str | os.PathLike[str]) -> None:
    """Search `directory` first for the modules of `module:Class` targets (a mixture file's directory)."""
    path = str(Path(directory).resolve())
    with _lock:
        if path not in _search_dirs:
            _search_dirs.insert(0, path)


def search_path() -> list[str]:
    """Where `module:Class` modules are looked for, in order: mixture-file directories, the working
    directory, then `sys.path`.

    Example:
        >>> os.getcwd() in search_path()
        True
    """
    with _lock:
        dirs = list(_search_dirs)
    return [p for p in dict.fromkeys([*dirs, os.getcwd(), *sys.path]) if p]


def import_module(module_name: str, what: str, error: type[Exception] = TargetError) -> types.ModuleType:
    """Import a user's module the way `module:Class` targets are found (`search_path`: the mixture files'
    directories, the working directory, then `sys.path`); ``what`` names what needs it in the messages.

    Raises ``error`` (a `UsageError` subclass) saying what is missing and where it was looked for.

    Example:
        >>> import_module("ormix.workbench.envs.solutions", "reference 'x:y'").__name__
        'ormix.workbench.envs.solutions'
    """
    with _lock:
        first = [*_search_dirs, os.getcwd()]
    for path in reversed(first):
        if path not in sys.path:
            sys.path.insert(0, path)
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name != module_name and not module_name.startswith(f"{e.name}."):
            raise error(
                f"importing module {module_name!r} for {what} failed: it needs {e.name!r}, which is "
                "not installed (pip install it)"
            ) from e
        raise error(
            f"no module {module_name!r} for {what}: looked in the mixture file's directory, the "
            f"working directory {os.getcwd()} and sys.path; put {module_name.replace('.', '/')}.py next to "
            "the mixture file or install it"
        ) from None
    except Exception as e:  # noqa: BLE001 - a user module that fails to import: say where
        raise error(f"importing module {module_name!r} for {what} raised {type(e).__name__}: {e}") from e


def check_environment(ref: str) -> None:
    """Raise `TargetError` unless `ref` names an environment class, as `load_environment_class`.

    A shipped `local:NAME` is known by name: checking a mixture file must not import openreward (seconds)
    in a trainer whose local servers run in child processes.

    Example:
        >>> check_environment("local:echo")
        >>> check_environment("local:ech")
        Traceback (most recent call last):
        ...
        ormix._errors.TargetError: 'local:ech' is not a local ...
    """
    if ref.removeprefix("local:") not in LOCAL_ENVIRONMENTS:
        load_environment_class(ref)


def load_environment_class(ref: str) -> type[Environment]:
    """Return the `Environment` subclass named by `local:NAME`, `NAME` or `module:Class`.

    Raises `TargetError` naming what is wrong: an unknown local name (with the closest one), a
    module that is not found (and where it was looked for), a missing class (with the closest name in the
    module), or an object that is not an `openreward.environments.Environment` subclass (saying what it is).
    """
    from openreward.environments import Environment

    name = ref.removeprefix("local:")
    if name in LOCAL_ENVIRONMENTS:
        path = LOCAL_ENVIRONMENTS[name]
    elif ":" in name and not ref.startswith("local:"):
        path = name
    else:
        close = difflib.get_close_matches(name, list(LOCAL_ENVIRONMENTS), n=1)
        hint = f"; did you mean 'local:{close[0]}'?" if close else ""
        known = ", ".join(f"local:{n}" for n in sorted(LOCAL_ENVIRONMENTS))
        raise TargetError(
            f"{ref!r} is not a local environment{hint} Shipped: {known}; or `module:Class` for your own "
            "openreward.environments.Environment subclass."
        )
    module_name, _, attr = path.partition(":")
    module = import_module(module_name, f"target {ref!r}")
    cls = getattr(module, attr, None)
    if cls is None:
        classes = [n for n, v in vars(module).items() if isinstance(v, type)]
        close = difflib.get_close_matches(attr, classes, n=1)
        hint = f"; did you mean {module_name}:{close[0]}?" if close else ""
        raise TargetError(f"module {module_name!r} has no {attr!r} (target {ref!r}){hint}")
    if not (isinstance(cls, type) and issubclass(cls, Environment)):
        what = (
            f"a class ({cls.__module__}.{cls.__qualname__})"
            if isinstance(cls, type)
            else f"a {type(cls).__name__}"
        )
        raise TargetError(
            f"{path!r} is {what}, not an openreward.environments.Environment subclass (target {ref!r})"
        )
    if name not in LOCAL_ENVIRONMENTS:
        from ormix.server._shape import shape_problems

        problems = shape_problems(cls)
        if problems:
            # The SDK would not serve it as written (`ormix.server._shape`): each mistake named.
            raise TargetError(f"{path} (target {ref!r}): " + "; ".join(problems))
    return cls


def env_name_of(cls: type) -> str:
    """The name an ORS server uses for an environment class (its class name, lower-cased).

    Example:
        >>> env_name_of(load_environment_class("local:seta"))
        'seta'
    """
    return cls.__name__.lower()
