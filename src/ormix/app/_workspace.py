"""Where the commands put things: one place that names every run and eval path.

The library's `ormix._runs.RunDirectory` knows what a trainer writes into its output directory (manifest,
records, checkpoints, progress); a `Workspace` is that directory as the commands use it, with the evals,
the comparison and the final model they put in it. `default_run_dir` and `default_eval_dir` name the
directories a command makes when it is not told where.
"""

from __future__ import annotations

import re
import shutil
from datetime import datetime
from pathlib import Path

from ormix._runs import RunDirectory


class Workspace(RunDirectory):
    """A run directory as the commands use it: the library's `RunDirectory`, plus the paths of the model and
    evals the commands put in it.

    Example:
        >>> Workspace("runs/demo").eval_before_path.as_posix()
        'runs/demo/eval-before'
    """

    def __repr__(self) -> str:
        return f"Workspace({str(self.path)!r})"

    def clear(self) -> None:
        """Remove an earlier run (`--overwrite`): the trainer's files, and what the commands made of them
        (report, final model, evals of a model that is gone)."""
        super().clear()
        for path in (
            self.path / "report",
            self.model_path,
            self.eval_path,
            self.eval_before_path,
            self.eval_start_path,
            self.comparison_path,
        ):
            shutil.rmtree(path, ignore_errors=True)

    @property
    def model_path(self) -> Path:
        """Where a finished run saved its final model."""
        return self.path / "model"

    # The evals a run directory holds: every command reads and writes them through these names.

    @property
    def eval_path(self) -> Path:
        """The trained model's eval: `ormix train`'s final eval, `ormix eval RUN_DIR`'s output (a
        checkpoint's eval is ``eval/checkpoint-N``).

        Example:
            >>> Workspace("runs/demo").eval_path.as_posix()
            'runs/demo/eval'
        """
        return self.path / "eval"

    @property
    def eval_before_path(self) -> Path:
        """The eval of the model GRPO started from, made by `ormix train` before its first step."""
        return self.path / "eval-before"

    @property
    def eval_start_path(self) -> Path:
        """``ormix eval --model RUN_DIR@start``'s output (the recorded start, evaluated later)."""
        return self.path / "eval-start"

    @property
    def comparison_path(self) -> Path:
        """What changed from the eval before training to the eval after, paired over the same tasks."""
        return self.path / "eval-comparison"


def default_run_dir(name: str, root: str | Path = "runs") -> Path:
    """A fresh run directory ``<root>/<name>-<YYYYmmdd-HHMMSS>`` (a numeric suffix if taken); not created.

    Example:
        >>> default_run_dir("local-demo").name.startswith("local-demo-")
        True
    """
    base = Path(root) / f"{name}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "model"


def default_eval_dir(mixture: str, label: str, run_out: Path | None, *, policy: str, seed: int) -> Path:
    """Where an eval goes without ``--out``: a run's model's own (``run_out`` of `resolve_eval_model`:
    ``<run_dir>/eval[/checkpoint-N]``), else ``evals/<mixture>-<model>`` (``evals/<mixture>-reference``
    for the oracle run), with ``-seed<N>`` for a seed other than 0.

    Example:
        >>> default_eval_dir("demo", "Qwen/Qwen3-0.6B", None, policy="model", seed=1).as_posix()
        'evals/demo-Qwen-Qwen3-0.6B-seed1'
        >>> default_eval_dir("demo", "runs/x", Path("runs/x/eval"), policy="model", seed=1).as_posix()
        'runs/x/eval'
    """
    from ormix.workbench._tiny import TINY_MODEL

    if policy == "reference":
        base = Path("evals") / f"{mixture}-reference"
    elif run_out is not None:
        base = run_out
    else:
        name = "tiny" if label == TINY_MODEL else Path(label).name if Path(label).is_dir() else label
        base = Path("evals") / f"{mixture}-{_slug(name)}"
    return base if seed == 0 or run_out is not None else base.with_name(f"{base.name}-seed{seed}")
