"""The evaluations a run makes of its own model: before training (the model GRPO starts from, after any warm
start), after it, and their paired comparison (the same paths as `ormix eval` and `ormix compare`).

They run on exactly `ormix eval`'s default eval set (`ormix.evaluation._tasks.eval_tasks`: per member its
``eval:`` set, else its environment's ``test`` split, else its training tasks), with the sync trainer
(``evaluate_trainer`` on the trainer itself) and with ``--async`` (`run_eval` on the model's directory). An
eval that cannot run says why, one line per phase or member; ``manifest.json`` records what ran
(`record_evaluation`), not what was asked.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ormix.app._train.options import TrainResult
from ormix.app._workspace import Workspace

if TYPE_CHECKING:  # pragma: no cover
    from ormix.evaluation._tasks import EvalTasks
    from ormix.mixture import MixtureSpec


def evaluation_of(mix: MixtureSpec) -> Any:
    """The run's `EvaluationConfig`: the file's ``evaluation:``, else the defaults when a member has an eval
    set (a final eval); ``None`` when the mixture asks for no eval.

    Example:
        >>> from ormix.config import MixtureConfig
        >>> from ormix.mixture import MixtureSpec
        >>> cfg = MixtureConfig(members={"a": {"target": "local:echo"}}, evaluation={"before_training": True})
        >>> evaluation_of(MixtureSpec.from_config(cfg)).before_training
        True
        >>> evaluation_of(MixtureSpec.from_config(cfg.model_copy(update={"evaluation": None}))) is None
        True
    """
    from ormix.config import EvaluationConfig

    if mix.config.evaluation is not None:
        return mix.config.evaluation
    return EvaluationConfig() if mix.config.eval_members else None


def not_run(reason: str) -> dict[str, Any]:
    """The manifest's entry for an eval that did not run, and why.

    Example:
        >>> not_run("not asked (evaluation.before_training is false)")
        {'ran': False, 'reason': 'not asked (evaluation.before_training is false)'}
    """
    return {"ran": False, "reason": reason}


def ran(
    out: Path, tasks: Mapping[str, EvalTasks], samples: int, skipped: Mapping[str, str]
) -> dict[str, Any]:
    """The manifest's entry for an eval that ran: its directory, samples, per member its split, task count and
    where the tasks came from, and the members it could not evaluate (with why).

    Example:
        >>> from ormix.evaluation._tasks import EvalTasks
        >>> ran(Path("r/eval"), {"echo": EvalTasks("echo", "local:echo", "test", (0, 1), "test split")}, 4, {})
        {'ran': True, 'dir': 'eval', 'samples': 4, 'members': {'echo': {'split': 'test', 'tasks': 2, 'source': 'test split'}}}
    """  # noqa: E501 - a doctest's output is one line
    entry: dict[str, Any] = {
        "ran": True,
        "dir": out.name,
        "samples": samples,
        "members": {
            m: {"split": t.split, "tasks": len(t.indices), "source": t.source} for m, t in tasks.items()
        },
    }
    if skipped:
        entry["not_evaluated"] = dict(skipped)
    return entry


def eval_plan(mix: MixtureSpec) -> tuple[dict[str, EvalTasks], dict[str, str]]:
    """`ormix eval`'s default eval set of every member (asks the servers), and the members that have none,
    with why (each is said, not dropped in silence)."""
    from ormix._errors import OrmixError
    from ormix.evaluation._tasks import eval_tasks

    tasks: dict[str, EvalTasks] = {}
    skipped: dict[str, str] = {}
    for member in mix.members:
        try:
            tasks.update(eval_tasks(mix, members=[member]))
        except OrmixError as e:
            skipped[member] = str(e)
    return tasks, skipped


def say_plan(
    phase: str, tasks: Mapping[str, EvalTasks], skipped: Mapping[str, str], out: Path, console: Any
) -> None:
    """The eval's line (members, tasks, where they come from, directory), then a line per member it skips."""
    label = "after training" if phase == "after" else "before training"
    shown = ", ".join(
        f"{m} {len(t.indices)} task(s) of split {t.split!r} ({t.source})" for m, t in tasks.items()
    )
    console.print(f"[bold]eval {label}[/bold]: {shown} → {out}", highlight=False, soft_wrap=True)
    for member, why in skipped.items():
        console.print(
            f"  [yellow]eval {label}: {member} not evaluated:[/yellow] {why}", highlight=False, soft_wrap=True
        )


def say_not_run(phase: str, reason: str, console: Any) -> None:
    """One line: an eval the mixture asks for that does not run, and why."""
    label = "after training" if phase == "after" else "before training"
    console.print(f"  [yellow]eval {label}: not run:[/yellow] {reason}", highlight=False, soft_wrap=True)


def evaluate_run(
    trainer: Any,
    mix: MixtureSpec,
    evaluation: Any,
    tasks: Mapping[str, EvalTasks],
    out: Path,
    console: Any,
    *,
    model: str,
) -> Path:
    """Evaluate the trainer's model on ``tasks`` into ``out`` (the same path as `ormix eval`), labelled
    ``model`` in its manifest.

    A run's eval is of the model it holds now, so an eval left in ``out`` by an earlier attempt is replaced,
    except the eval before training, which a resumed run never repeats.
    """
    from ormix.app._eval import evaluate_trainer
    from ormix.trl._lifecycle import ProgressLine

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
            model=model,
            seed=mix.config.seed,  # `ormix eval`'s seed: a run's --seed changes its training, not its evals
        )
    finally:
        if progress is not None:
            trainer.add_callback(progress)
    return out


def evaluate_model(
    mix: MixtureSpec,
    model: str,
    evaluation: Any,
    tasks: Mapping[str, EvalTasks],
    out: Path,
    console: Any,
    settings: Mapping[str, Any],
) -> Path:
    """Evaluate a model directory (or a run directory's final model) on ``tasks`` into ``out`` with a trainer
    of its own, as `ormix eval --model MODEL` does: how ``--async`` runs (whose trainer cannot evaluate) are
    evaluated. ``settings`` are the run's ``--set`` values (generation settings such as
    ``max_completion_length``)."""
    from ormix.app._eval import EvalOptions, run_eval

    options = EvalOptions(
        model=model,
        k=evaluation.ks,
        samples=evaluation.samples,
        members=tuple(tasks),
        out_dir=out,
        settings=dict(settings),
        overwrite=True,
    )
    run_eval(mix, options, console=console)
    return out


def record_evaluation(run_dir: Path, entries: Mapping[str, Mapping[str, Any]]) -> None:
    """Write what the evals around training did into the run's ``manifest.json`` (``evaluation``: per phase,
    ``ran`` and either the members and task counts or the reason it did not run).

    Example:
        >>> import tempfile
        >>> run = Path(tempfile.mkdtemp())
        >>> _ = (run / "manifest.json").write_text('{"name": "m"}')
        >>> record_evaluation(run, {"before": not_run("not asked")})
        >>> json.loads((run / "manifest.json").read_text())["evaluation"]["before"]["ran"]
        False
    """
    path = run_dir / "manifest.json"
    if not path.is_file():
        return
    manifest = json.loads(path.read_text())
    manifest["evaluation"] = {phase: dict(entry) for phase, entry in entries.items()}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, default=str) + "\n")
    tmp.replace(path)


def compare_evals(result: TrainResult, console: Any) -> None:
    """With evals before and after training: what changed, paired over the same tasks, into
    ``RUN_DIR/eval-comparison`` (the report prints it)."""
    from ormix._errors import UsageError
    from ormix.app._compare import compare, load_eval, write_comparison

    assert result.eval is not None and result.eval_before is not None
    if int(os.environ.get("RANK", "0")) != 0:
        return  # one process writes the comparison (every process holds the same two evals)
    try:
        comparison = compare([load_eval(result.eval_before), load_eval(result.eval)])
    except UsageError as e:  # the run trained and was evaluated: a comparison that cannot be made is a note
        console.print(f"  note: no comparison of the evals before and after training: {e}", highlight=False)
        return
    write_comparison(comparison, Workspace(result.run_dir).comparison_path)
