"""The TRL side of ormix, and the only place that imports TRL or transformers.

`trainer` (`ConcurrentGRPOTrainer`: a batch's sessions and tool rounds in flight at once), `callbacks`
(telemetry, adaptive mixing, session cleanup, trainer checks), `args` (a `GRPOConfig` consistent with a
mixture), `lifecycle` (closing sessions and servers at the end of a run), `compat` (what the installed TRL
offers).

``ConcurrentGRPOTrainer`` is importable from here; it loads TRL only when asked for, so importing one of the
lighter submodules does not import the trainer.

Example:
    >>> from ormix.integrations.trl import ConcurrentGRPOTrainer
    >>> ConcurrentGRPOTrainer.__name__
    'ConcurrentGRPOTrainer'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["ConcurrentGRPOTrainer"]

if TYPE_CHECKING:  # pragma: no cover
    from ormix.integrations.trl.trainer import ConcurrentGRPOTrainer


def __getattr__(name: str) -> Any:
    if name == "ConcurrentGRPOTrainer":
        from ormix.integrations.trl.trainer import ConcurrentGRPOTrainer

        return ConcurrentGRPOTrainer
    raise AttributeError(f"module 'ormix.integrations.trl' has no attribute {name!r}")
