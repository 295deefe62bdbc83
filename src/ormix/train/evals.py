"""The evaluations a run makes of its own model: before training, after it, and their paired comparison
(the same paths as `ormix eval` and `ormix compare`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ormix.train.options import TrainResult

if TYPE_CHECKING:  # pragma: no cover
    from ormix.mixture import MixtureSpec

__all__ = ["compare_evals", "evaluate_run", "evaluation_of"]


def evaluation_of(mix: MixtureSpec) -> Any:
    """The run's `EvaluationConfig` if the mixture has eval sets (the file's, else the defaults), or None."""
    from ormix.config import EvaluationConfig

    if not mix.config.eval_members:
        return None
    return mix.config.evaluation or EvaluationConfig()


def evaluate_run(
    trainer: Any, mix: MixtureSpec, evaluation: Any, out: Path, console: Any, *, model: Path | None = None
) -> Path:
    """Evaluate the trainer's model on every eval member's tasks into ``out`` (the same path as `ormix eval`).

    A run's eval is of the model it holds now, so an eval left in ``out`` by an earlier attempt is replaced,
    except the eval before training, which a resumed run never repeats.
    """
    from ormix.evaluation.runner import evaluate_trainer
    from ormix.evaluation.tasks import eval_tasks

    label = "after training" if model is not None else "before training"
    console.print(f"[bold]eval {label}[/bold]: {', '.join(mix.config.eval_members)} → {out}")
    from ormix.integrations.trl.lifecycle import ProgressLine

    tasks = eval_tasks(mix, members=mix.config.eval_members)
    progress = trainer.pop_callback(ProgressLine)  # the eval draws its own progress bar and table
    try:
        evaluate_trainer(
            trainer,
            mix,
            tasks,
            evaluation.samples,
            out,
            console,
            ks=evaluation.ks,
            overwrite=True,
            model=str(model) if model is not None else f"{mix.name} before training",
        )
    finally:
        if progress is not None:
            trainer.add_callback(progress)
    return out


def compare_evals(result: TrainResult, console: Any) -> None:
    """With evals before and after training: what changed, paired over the same tasks, into
    ``RUN_DIR/eval-comparison`` (the report prints it)."""
    from ormix.evaluation.compare import CompareError, compare, load_eval, write_comparison

    assert result.eval is not None and result.eval_before is not None
    try:
        comparison = compare([load_eval(result.eval_before), load_eval(result.eval)])
    except CompareError as e:  # the run trained and was evaluated: a comparison that cannot be made is a note
        console.print(f"  note: no comparison of the evals before and after training: {e}", highlight=False)
        return
    write_comparison(comparison, result.run_dir / "eval-comparison")
