"""ormix's own errors, under one base: `OrmixError`.

Two families, because a command treats them differently:

- `UsageError` (also a `ValueError`): the input cannot work — a mixture file, a target, an argument, a
  trainer setting. Raised before anything expensive starts; the message says what is wrong and what to do.
  Commands exit with status 2.
- `OrmixRuntimeError` (also a `RuntimeError`): something failed while running — a local server that did not
  start. Commands exit with status 1 (as they do when the coverage alarm stops a run: that is a result,
  `TrainResult.stopped_by_alarm`, not an error).

Every command's statuses (0, 1, 2, 130 on Ctrl-C, 143 on SIGTERM) are in one table, "Exit statuses" in
docs/cli.md (the constants: `ormix.app._command`); `tests/diagnostics/test_check_exit_codes.py` runs its
examples.

The ORS protocol client keeps its own tree (`ormix.ors.ORSError`: transport, session, tool errors), because
it is usable alone and knows nothing of the rest of ormix; commands report those as runtime failures too.

Example:
    >>> from ormix._errors import MixtureError, OrmixError, UsageError
    >>> issubclass(MixtureError, UsageError) and issubclass(UsageError, OrmixError)
    True
    >>> try:
    ...     raise MixtureError("member 'seta' has no tasks: check num_tasks / indices / where")
    ... except OrmixError as e:
    ...     print(exit_status(e))
    2
"""

from __future__ import annotations


class OrmixError(Exception):
    """Base of every error ormix raises itself (the ORS client's `ORSError` tree aside)."""


class UsageError(OrmixError, ValueError):
    """Input that cannot work: the message names the setting and the fix (commands exit with 2)."""


class OrmixRuntimeError(OrmixError, RuntimeError):
    """A failure while running (commands exit with 1)."""


class TargetError(UsageError):
    """A target string that is not a catalog name, URL, `local:NAME` or `module:Class`."""


class SpecError(UsageError):
    """An `OpenRewardSpec` argument that cannot work; the message says which and what to do."""


class EnvironmentCodeError(SpecError):
    """The user's own environment (a `module:Class` target) raised in its own code, e.g. in ``list_tasks``;
    the message names the method and its exception (commands exit with 2: the user's code is input)."""


class MixtureError(UsageError):
    """A mixture that cannot work (its config, or what its servers answered), naming the fix.

    `ormix.config.MixtureConfigError` (every problem of a config, one per line) is a `MixtureError`.
    """


class TrainConfigError(UsageError):
    """A training setting that cannot work with this mixture or this trainer (a `GRPOConfig` setting, the
    batch geometry, a plan the trainer would shuffle or replay, an installed TRL ormix cannot wrap); the
    message names the fix. Raised before training starts, or at its first step by `mix.callbacks`.
    """


class ServerStartError(OrmixRuntimeError):
    """A local server (for a `local:` or `module:` target) did not become ready."""


def exit_status(error: BaseException) -> int:
    """The exit status a command uses for `error`: 2 for bad input, 1 for a failure while running.

    Example:
        >>> exit_status(TargetError("bad")), exit_status(ServerStartError("down")), exit_status(KeyError("x"))
        (2, 1, 1)
    """
    return 2 if isinstance(error, UsageError) else 1
