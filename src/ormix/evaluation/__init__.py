"""Evaluation: what a model does on every member's eval tasks, with the uncertainty said.

`stats` (pure: pass@k, pass^k, intervals over tasks), `summary` (pure: eval records → per-member metrics),
`compare` (paired comparison of evals over the same tasks), `plots` (matplotlib figures), `study` (an
ablation study: arms trained and evaluated, the arm × member matrix).

Public names are imported lazily: importing this package imports nothing heavy.

Example:
    >>> from ormix.evaluation import pass_at_k, summarize
    >>> pass_at_k(4, 1, 4)
    1.0
    >>> summarize([{"member": "a", "task_index": 0, "outcome": "scored", "env_reward": 1.0}])["k"]
    [1]
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "Interval": "ormix.evaluation.stats",
    "mean_interval": "ormix.evaluation.stats",
    "paired_interval": "ormix.evaluation.stats",
    "pass_at_k": "ormix.evaluation.stats",
    "pass_hat_k": "ormix.evaluation.stats",
    "TaskSamples": "ormix.evaluation.summary",
    "summarize": "ormix.evaluation.summary",
    "summary_markdown": "ormix.evaluation.summary",
    "summary_table": "ormix.evaluation.summary",
    "task_samples": "ormix.evaluation.summary",
    "CompareError": "ormix.evaluation.compare",
    "EvalData": "ormix.evaluation.compare",
    "compare": "ormix.evaluation.compare",
    "comparison_markdown": "ormix.evaluation.compare",
    "load_eval": "ormix.evaluation.compare",
    "comparison_figure": "ormix.evaluation.plots",
    "summary_figure": "ormix.evaluation.plots",
    "study_heatmap": "ormix.evaluation.plots",
    "StudyOptions": "ormix.evaluation.study",
    "StudyResult": "ormix.evaluation.study",
    "run_study": "ormix.evaluation.study",
}

__all__ = [
    "CompareError",
    "EvalData",
    "Interval",
    "StudyOptions",
    "StudyResult",
    "TaskSamples",
    "compare",
    "comparison_figure",
    "comparison_markdown",
    "load_eval",
    "mean_interval",
    "paired_interval",
    "pass_at_k",
    "pass_hat_k",
    "run_study",
    "study_heatmap",
    "summarize",
    "summary_figure",
    "summary_markdown",
    "summary_table",
    "task_samples",
]

if TYPE_CHECKING:  # pragma: no cover
    from ormix.evaluation.compare import CompareError, EvalData, compare, comparison_markdown, load_eval
    from ormix.evaluation.plots import comparison_figure, study_heatmap, summary_figure
    from ormix.evaluation.stats import Interval, mean_interval, paired_interval, pass_at_k, pass_hat_k
    from ormix.evaluation.study import StudyOptions, StudyResult, run_study
    from ormix.evaluation.summary import (
        TaskSamples,
        summarize,
        summary_markdown,
        summary_table,
        task_samples,
    )


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ormix.evaluation' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
