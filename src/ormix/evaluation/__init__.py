"""Evaluation statistics: pass@k and pass^k, intervals over tasks and seeds, per-member summaries of eval
records, and which tasks each member is evaluated on. Pure: no files, no printing (`ormix eval`, studies and
comparisons are commands, in `ormix.app`).

Public names are imported lazily: importing this package imports nothing heavy.

Example:
    >>> from ormix.evaluation import pass_at_k, summarize
    >>> pass_at_k(4, 1, 4)
    1.0
    >>> summarize([{"member": "a", "task_index": 0, "outcome": "scored", "env_reward": 1.0}])["k"]
    [1]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ormix._lazy import lazy_getattr

_EXPORTS: dict[str, str] = {
    "Interval": "ormix.evaluation._stats",
    "mean_interval": "ormix.evaluation._stats",
    "paired_interval": "ormix.evaluation._stats",
    "hierarchical_interval": "ormix.evaluation._stats",
    "paired_hierarchical_interval": "ormix.evaluation._stats",
    "pass_at_k": "ormix.evaluation._stats",
    "pass_hat_k": "ormix.evaluation._stats",
    "TaskSamples": "ormix.evaluation._summary",
    "summarize": "ormix.evaluation._summary",
    "summary_markdown": "ormix.evaluation._summary",
    "summary_table": "ormix.evaluation._summary",
    "task_samples": "ormix.evaluation._summary",
    "EvalTasks": "ormix.evaluation._tasks",
    "eval_tasks": "ormix.evaluation._tasks",
    "EvalError": "ormix.evaluation._errors",
}

__all__ = [
    "EvalError",
    "EvalTasks",
    "Interval",
    "TaskSamples",
    "eval_tasks",
    "hierarchical_interval",
    "mean_interval",
    "paired_hierarchical_interval",
    "paired_interval",
    "pass_at_k",
    "pass_hat_k",
    "summarize",
    "summary_markdown",
    "summary_table",
    "task_samples",
]

if TYPE_CHECKING:  # pragma: no cover
    from ormix.evaluation._errors import EvalError
    from ormix.evaluation._stats import (
        Interval,
        hierarchical_interval,
        mean_interval,
        paired_hierarchical_interval,
        paired_interval,
        pass_at_k,
        pass_hat_k,
    )
    from ormix.evaluation._summary import (
        TaskSamples,
        summarize,
        summary_markdown,
        summary_table,
        task_samples,
    )
    from ormix.evaluation._tasks import EvalTasks, eval_tasks


__getattr__ = lazy_getattr(__name__, _EXPORTS)
