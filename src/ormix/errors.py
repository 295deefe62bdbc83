"""ormix's own errors, under one base: `OrmixError`.

Two families, because a command treats them differently:

- `UsageError` (also a `ValueError`): the input cannot work — a mixture file, a target, an argument, a
  trainer setting. Raised before anything expensive starts; the message says what is wrong and what to do.
  Commands exit with status 2.
- `OrmixRuntimeError` (also a `RuntimeError`): something failed while running — a local server that did not
  start, a run the coverage alarm stopped. Commands exit with status 1.

The ORS protocol client keeps its own tree (`ormix.ors.ORSError`: transport, session, tool errors), because
it is usable alone and knows nothing of the rest of ormix; commands report those as runtime failures too.

Example:
    >>> from ormix.errors import MixtureError, OrmixError, UsageError
    >>> issubclass(MixtureError, UsageError) and issubclass(UsageError, OrmixError)
    True
    >>> try:
    ...     raise MixtureError("member 'seta' has no tasks: check num_tasks / indices / where")
    ... except OrmixError as e:
    ...     print(exit_status(e))
    2
"""

from __future__ import annotations

__all__ = [
    "AlarmStop",
    "MixtureError",
    "OrmixError",
    "OrmixRuntimeError",
    "ServerStartError",
    "SpecError",
    "TargetError",
    "TrainConfigError",
    "UsageError",
    "exit_status",
]


class OrmixError(Exception):
    """Base of every error ormix raises itself (the ORS client's `ORSError` tree aside).

    Example:
        >>> isinstance(SpecError("num_tasks must be >= 0"), OrmixError)
        True
    """


class UsageError(OrmixError, ValueError):
    """Input that cannot work: the message names the setting and the fix (commands exit with 2).

    Example:
        >>> str(UsageError("routing must be 'auto', 'per_env' or 'namespaced', not 'x'"))[:7]
        'routing'
    """


class OrmixRuntimeError(OrmixError, RuntimeError):
    """A failure while running (commands exit with 1).

    Example:
        >>> isinstance(ServerStartError("local:seta did not become ready"), RuntimeError)
        True
    """


class TargetError(UsageError):
    """A target string that is not a catalog name, URL, `local:NAME` or `module:Class`.

    Example:
        >>> isinstance(TargetError("'http//x' is not a target"), ValueError)
        True
    """


class SpecError(UsageError):
    """An `OpenRewardSpec` argument that cannot work; the message says which and what to do.

    Example:
        >>> SpecError("Provide num_tasks or indices, not both.").args[0]
        'Provide num_tasks or indices, not both.'
    """


class MixtureError(UsageError):
    """A mixture that cannot work (its config, or what its servers answered), naming the fix.

    `ormix.config.MixtureConfigError` (every problem of a config, one per line) is a `MixtureError`.

    Example:
        >>> isinstance(MixtureError("unknown member 'x'"), UsageError)
        True
    """


class TrainConfigError(UsageError):
    """A training setting that cannot work with this mixture or this trainer; the message names the fix.

    Example:
        >>> isinstance(TrainConfigError("max_steps must be > 0"), MixtureError)
        False
    """


class ServerStartError(OrmixRuntimeError):
    """A local server (for a `local:` or `module:` target) did not become ready.

    Example:
        >>> isinstance(ServerStartError("exited with code 1"), OrmixRuntimeError)
        True
    """


class AlarmStop(OrmixRuntimeError):
    """Training was stopped by the coverage alarm (`telemetry.stop: true`); the message names the member.

    Example:
        >>> str(AlarmStop("environment 'seta' is failing"))
        "environment 'seta' is failing"
    """


def exit_status(error: BaseException) -> int:
    """The exit status a command uses for `error`: 2 for bad input, 1 for a failure while running.

    Example:
        >>> exit_status(TargetError("bad")), exit_status(ServerStartError("down")), exit_status(KeyError("x"))
        (2, 1, 1)
    """
    return 2 if isinstance(error, UsageError) else 1
