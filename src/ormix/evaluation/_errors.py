"""The errors of an eval that cannot run as asked: `EvalError` (a `UsageError`: commands exit with 2), each
message saying what to change.

Example:
    >>> from ormix._errors import UsageError
    >>> issubclass(NoEvalTasksError, EvalError) and issubclass(EvalError, UsageError)
    True
"""

from __future__ import annotations

from ormix._errors import UsageError


class EvalError(UsageError):
    """An eval that cannot run as asked (exit 2); the message says what to change."""


class NoEvalTasksError(EvalError):
    """A member (or the whole selection) has no task to evaluate on."""


class ModelNotFoundError(EvalError):
    """``--model`` names no model: no such directory, a directory without one, or a run without its final
    model."""


class EvalManifestError(EvalError):
    """The output directory holds another eval (or unreadable files): ``--overwrite`` or another ``--out``."""
