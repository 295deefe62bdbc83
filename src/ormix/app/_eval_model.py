"""The model an eval loads (``--model``), and where its eval goes by default.

``--model`` takes a hub id, a local model directory, a run directory (its final ``model/``),
``run_dir/checkpoint-N`` or ``run_dir@start`` (the model GRPO started from, as the run's manifest records it:
the warm start or the base model; `ormix.app._train.prepare.start_record`); none means ormix's offline tiny
model
(`ormix.workbench._tiny`). A run's model is evaluated into the run: ``<run_dir>/eval`` (final model),
``<run_dir>/eval/checkpoint-N`` or ``<run_dir>/eval-start``; any other into ``evals/<mixture>-<model>``.

Example:
    >>> resolve_eval_model(None)
    (None, 'ormix:tiny', None)
"""

from __future__ import annotations

import os
from pathlib import Path

from ormix._runs import checkpoint_step, weights_sha256
from ormix.app._workspace import Workspace
from ormix.evaluation._errors import EvalError

#: ``--model RUN_DIR@start``: the model the run's GRPO started from.
START = "@start"


def _is_model_dir(path: Path) -> bool:
    return (path / "config.json").is_file()


def resolve_eval_model(model: str | None) -> tuple[str | None, str, Path | None]:
    """``--model`` as (what to load — ``None`` for the tiny model —, its label for the manifest, the
    default output directory when it belongs to a run directory).

    A run directory means its final ``model/``; ``run_dir/checkpoint-N`` that checkpoint. A string that is
    not a directory is a hub id (``owner/name``) unless it looks like a path.

    Example:
        >>> resolve_eval_model("Qwen/Qwen3-0.6B")
        ('Qwen/Qwen3-0.6B', 'Qwen/Qwen3-0.6B', None)
        >>> resolve_eval_model("./no/such/dir")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ormix.evaluation._errors.EvalError: --model ./no/such/dir: no such directory, ...
    """
    from ormix.workbench._tiny import TINY_MODEL

    if model is None or model == TINY_MODEL:
        return None, TINY_MODEL, None
    if model.endswith(START):
        return _start_of(model)
    path = Path(model).expanduser()
    if path.is_dir():
        resolved = path.resolve()
        run = Workspace(resolved)
        if run.trained_here():
            if not _is_model_dir(run.model_path):
                found = {p.name: step for p in resolved.iterdir() if (step := checkpoint_step(p)) is not None}
                hint = (
                    f"pass one of its checkpoints ({', '.join(sorted(found, key=found.__getitem__))}) as "
                    f"--model {model}/checkpoint-N"
                    if found
                    else "it saved no checkpoint either (train.save_steps)"
                )
                raise EvalError(
                    f"--model {model}: the run directory has no final model (model/): the run did not "
                    f"finish; {hint}"
                )
            return str(run.model_path), str(resolved), run.eval_path
        if _is_model_dir(resolved):
            parent = Workspace(resolved.parent)
            if parent.trained_here() and checkpoint_step(resolved) is not None:
                return str(resolved), str(resolved), parent.eval_path / resolved.name
            if parent.trained_here() and resolved == parent.model_path:
                return str(resolved), str(parent.path), parent.eval_path
            return str(resolved), str(resolved), None
        raise EvalError(
            f"--model {model}: the directory holds no model (no config.json) and is no run directory "
            "(no manifest.json): give a model directory, a run directory or run_dir/checkpoint-N"
        )
    looks_local = model.startswith((".", "/", "~")) or model.count("/") != 1 or os.sep + os.sep in model
    if looks_local:
        raise EvalError(
            f"--model {model}: no such directory, and it is no hub id (owner/name); check the path"
        )
    return model, model, None


def _start_of(model: str) -> tuple[str | None, str, Path | None]:
    """``RUN_DIR@start``: the start the run's manifest records, checked against its content hash."""
    given = model[: -len(START)]
    run = Workspace(Path(given).expanduser().resolve())
    if not run.trained_here():
        raise EvalError(
            f"--model {model}: {given} is no run directory (no manifest.json and train_args.json); "
            "@start names the model a run of `ormix train` started from"
        )
    start = run.start()
    if start is None or not start.get("path"):
        raise EvalError(
            f"--model {model}: the run's manifest records no start (the run was made by an ormix that did "
            "not record one); evaluate its base model or warm start by path instead"
        )
    label = f"{run.path}{START}"
    path = Path(str(start["path"])).expanduser()
    if not path.is_dir():
        if Path(str(start["path"])).is_absolute():
            raise EvalError(
                f"--model {model}: the run started from {path}, which is not there any more (a warm start "
                "in a cleared cache?); run `ormix train` with the same warm start to make it again"
            )
        return str(start["path"]), label, run.eval_start_path  # a hub id
    recorded = start.get("sha256")
    if recorded and weights_sha256(path) != recorded:
        raise EvalError(
            f"--model {model}: {path} no longer holds the weights the run started from (sha256 "
            f"{recorded[:12]} recorded); it was replaced since"
        )
    return str(path), label, run.eval_start_path
