"""Evaluation: what a model does on every member's eval tasks, with the uncertainty said.

`stats` (pure: pass@k, pass^k, intervals over tasks), `summary` (pure: eval records → per-member metrics),
`compare` (paired comparison of evals over the same tasks), `plots` (matplotlib figures); `ormix eval`:
`runner` (options, the trainer-driven run, the command), `tasks` (which tasks each member is evaluated on),
`model` (what ``--model`` loads), `eval_dir` (the output directory, resuming), `manifest` (pure: what an
eval is), `oracle` (the reference-solution policy), `errors` (pure); `study` (an
ablation study: arms trained and evaluated, the arm × member matrix).

Public names are imported lazily: importing this package imports nothing heavy.

Example:
    >>> from ormix.evaluation import pass_at_k, summarize
    >>> pass_at_k(4, 1, 4)
    1.0
    >>> summarize([{"member": "a", "task_index": 0, "outcome": "scored", "env_reward": 1.0}])["k"]
    [1]
    >>> from ormix.evaluation import EvalOptions
    >>> EvalOptions(k=(1, 8)).samples_per_task
    8
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "Interval": "ormix.evaluation.stats",
    "mean_interval": "ormix.evaluation.stats",
    "paired_interval": "ormix.evaluation.stats",
    "hierarchical_interval": "ormix.evaluation.stats",
    "paired_hierarchical_interval": "ormix.evaluation.stats",
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
    "compare_groups": "ormix.evaluation.compare",
    "group_metrics": "ormix.evaluation.compare",
    "comparison_markdown": "ormix.evaluation.compare",
    "load_eval": "ormix.evaluation.compare",
    "comparison_figure": "ormix.evaluation.plots",
    "summary_figure": "ormix.evaluation.plots",
    "study_heatmap": "ormix.evaluation.plots",
    "StudyOptions": "ormix.evaluation.study",
    "StudyResult": "ormix.evaluation.study",
    "run_study": "ormix.evaluation.study",
    "EvalOptions": "ormix.evaluation.runner",
    "EvalResult": "ormix.evaluation.runner",
    "evaluate_trainer": "ormix.evaluation.runner",
    "run_eval": "ormix.evaluation.runner",
    "EvalTasks": "ormix.evaluation.tasks",
    "eval_tasks": "ormix.evaluation.tasks",
    "resolve_eval_model": "ormix.evaluation.model",
    "EvalDirectory": "ormix.evaluation.eval_dir",
    "EvalError": "ormix.evaluation.errors",
}

__all__ = [
    "CompareError",
    "EvalData",
    "EvalDirectory",
    "EvalError",
    "EvalOptions",
    "EvalResult",
    "EvalTasks",
    "Interval",
    "StudyOptions",
    "StudyResult",
    "TaskSamples",
    "compare",
    "compare_groups",
    "comparison_figure",
    "comparison_markdown",
    "eval_tasks",
    "evaluate_trainer",
    "group_metrics",
    "hierarchical_interval",
    "load_eval",
    "mean_interval",
    "paired_hierarchical_interval",
    "paired_interval",
    "pass_at_k",
    "pass_hat_k",
    "run_study",
    "study_heatmap",
    "resolve_eval_model",
    "run_eval",
    "summarize",
    "summary_figure",
    "summary_markdown",
    "summary_table",
    "task_samples",
]

if TYPE_CHECKING:  # pragma: no cover
    from ormix.evaluation.compare import (
        CompareError,
        EvalData,
        compare,
        compare_groups,
        comparison_markdown,
        group_metrics,
        load_eval,
    )
    from ormix.evaluation.errors import EvalError
    from ormix.evaluation.eval_dir import EvalDirectory
    from ormix.evaluation.model import resolve_eval_model
    from ormix.evaluation.plots import comparison_figure, study_heatmap, summary_figure
    from ormix.evaluation.runner import EvalOptions, EvalResult, evaluate_trainer, run_eval
    from ormix.evaluation.stats import (
        Interval,
        hierarchical_interval,
        mean_interval,
        paired_hierarchical_interval,
        paired_interval,
        pass_at_k,
        pass_hat_k,
    )
    from ormix.evaluation.study import StudyOptions, StudyResult, run_study
    from ormix.evaluation.summary import (
        TaskSamples,
        summarize,
        summary_markdown,
        summary_table,
        task_samples,
    )
    from ormix.evaluation.tasks import EvalTasks, eval_tasks


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ormix.evaluation' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
