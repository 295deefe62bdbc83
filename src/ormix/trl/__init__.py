"""The TRL side of ormix, and the only place that imports TRL or transformers.

`ConcurrentGRPOTrainer` (a batch's sessions and tool rounds in flight at once) and `AsyncMixtureTrainer`
(TRL's async GRPO on a mixture); inside, the callbacks (telemetry, adaptive mixing, session cleanup, trainer
checks), a `GRPOConfig` consistent with a mixture, closing sessions and servers at the end of a run, and what
the installed TRL offers. TRL loads only when a trainer is asked for.

Example:
    >>> from ormix.trl import ConcurrentGRPOTrainer
    >>> ConcurrentGRPOTrainer.__name__
    'ConcurrentGRPOTrainer'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ormix._lazy import lazy_getattr

_EXPORTS = {"ConcurrentGRPOTrainer": "ormix.trl._trainer", "AsyncMixtureTrainer": "ormix.trl._async_grpo"}

__all__ = ["AsyncMixtureTrainer", "ConcurrentGRPOTrainer"]

if TYPE_CHECKING:  # pragma: no cover
    from ormix.trl._async_grpo import AsyncMixtureTrainer
    from ormix.trl._trainer import ConcurrentGRPOTrainer


__getattr__ = lazy_getattr(__name__, _EXPORTS)
