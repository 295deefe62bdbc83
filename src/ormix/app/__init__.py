"""The commands: `ormix check | inspect | train | eval | ablate | compare | report | show | serve`, and the
same work from Python. This ring prints, names run and eval directories, and draws plots; the library
(`ormix`) does none of that. It may use the workbench (`ormix.workbench`: the tiny model, the warm start, the
shipped environments) for its defaults; neither the library nor the workbench imports it.

Public names are imported lazily: importing this package imports neither typer, torch nor TRL.

Example:
    >>> from ormix.app import EvalOptions
    >>> EvalOptions(k=(1, 8)).samples_per_task
    8
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ormix._lazy import lazy_getattr

_EXPORTS: dict[str, str] = {
    "app": "ormix.app._cli",
    "main": "ormix.app._cli",
    "EvalOptions": "ormix.app._eval",
    "EvalResult": "ormix.app._eval",
    "evaluate_trainer": "ormix.app._eval",
    "run_eval": "ormix.app._eval",
    "StudyOptions": "ormix.app._study",
    "StudyResult": "ormix.app._study",
    "run_study": "ormix.app._study",
    "EvalData": "ormix.app._compare",
    "compare": "ormix.app._compare",
    "compare_groups": "ormix.app._compare",
    "load_eval": "ormix.app._compare",
    "EvalDirectory": "ormix.app._eval_dir",
    "resolve_eval_model": "ormix.app._eval_model",
}

__all__ = [
    "EvalData",
    "EvalDirectory",
    "EvalOptions",
    "EvalResult",
    "StudyOptions",
    "StudyResult",
    "app",
    "compare",
    "compare_groups",
    "evaluate_trainer",
    "load_eval",
    "main",
    "resolve_eval_model",
    "run_eval",
    "run_study",
]

if TYPE_CHECKING:  # pragma: no cover
    from ormix.app._cli import app, main
    from ormix.app._compare import EvalData, compare, compare_groups, load_eval
    from ormix.app._eval import EvalOptions, EvalResult, evaluate_trainer, run_eval
    from ormix.app._eval_dir import EvalDirectory
    from ormix.app._eval_model import resolve_eval_model
    from ormix.app._study import StudyOptions, StudyResult, run_study


__getattr__ = lazy_getattr(__name__, _EXPORTS)
