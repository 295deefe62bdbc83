"""The error of an eval that cannot run as asked: `EvalError` (a `UsageError`: commands exit with 2), its
message saying what to change (a member or selection without tasks, a ``--model`` that names no model, an
output directory holding another eval).

Example:
    >>> from ormix._errors import UsageError
    >>> issubclass(EvalError, UsageError)
    True
"""

from __future__ import annotations

from ormix._errors import UsageError


class EvalError(UsageError):
    """An eval that cannot run as asked (exit 2); the message says what to change."""
