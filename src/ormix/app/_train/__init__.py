"""The main job: GRPO on a mixture file, end to end (`ormix train FILE`).

`train_command` is what the console script runs; `train` is the same for Python callers (examples, ablations).
`RunOptions` says how to run (the command's flags); the mixture file says what to train on:

1. config: the mixture, validated before any server is contacted; `GRPOConfig` from its ``train:`` section,
   the caller's overrides, then what must agree with the mixture (`build_grpo_config`); the run directory,
   fresh or — with ``resume`` — holding the same mixture's run (`ormix._runs`);
2. trainer: the model (ormix's offline tiny one by default), optionally warmed up on reference solutions
   (`ormix.workbench._warmup`); ``manifest.json`` and ``train_args.json``; `ConcurrentGRPOTrainer`;
3. run: one line per logging step (per-member reward and coverage, where the step's time went); with
   ``eval_steps`` (and members with eval sets) an evaluation every ``eval_steps`` steps, logged per member as
   ``eval/<member>/pass@1`` (pass@k, pass^k for k = ``num_generations_eval``, mean reward, coverage);
4. result: the model under ``<run dir>/model``, the report, a `TrainResult`.

Sessions are closed and local servers stopped on every exit path (end, SIGTERM, Ctrl-C, error): TRL never
closes its environments. SIGTERM saves a checkpoint at the end of the current step (within a bound) and
stops; Ctrl-C stops at once and saves the last completed step; both print the command that resumes.

Example:
    Not run as a doctest: a GRPO training run with a torch model is far too slow for one.

    >>> from ormix.app._train import RunOptions, train
    >>> result = train("mixtures/local-demo.yaml", RunOptions(max_steps=2))   # doctest: +SKIP
    >>> result.run_dir, result.summary["seta"]["reward"]                      # doctest: +SKIP
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ormix._errors import TrainConfigError
from ormix.app._command import run_command
from ormix.app._train.finish import finish_run, summarise
from ormix.app._train.options import RunOptions, TrainResult
from ormix.app._train.prepare import (
    clear_failed_start,
    earlier_overrides,
    load_run_config,
    plan_run,
    start_run,
)
from ormix.app._train.training import run_trainer
from ormix.config._trainer_rules import max_steps_problem

if TYPE_CHECKING:  # pragma: no cover
    from ormix.mixture import MixtureSpec


def train(
    mixture: MixtureSpec | str | Path,
    options: RunOptions | None = None,
    *,
    console: Any | None = None,
    callbacks: Sequence[Any] = (),
    **option_fields: Any,
) -> TrainResult:
    """Train on a mixture (a `MixtureSpec`, whose ``config.train`` applies, or a mixture file) with GRPO.

    ``options`` (or its fields as keywords: ``train(path, max_steps=2)``) say how; ``console`` is a
    `rich.console.Console` for progress (default: a new one); ``callbacks`` are extra `TrainerCallback`s.
    Returns what the run left (`TrainResult`), also when Ctrl-C or SIGTERM stopped it.

    Raises:
        UsageError (TrainConfigError, MixtureError, ...): bad settings or run directory, found before
        training starts (and before any server is contacted for the run-directory checks); ``max_steps``
        below 1; an eval split or eval task that does not exist (found when the servers answer, before the
        model loads).
        ServerStartError: a local member's server did not start.
    """
    from rich.console import Console

    from ormix._connection import BackendWatch
    from ormix.mixture import MixtureSpec

    opts = earlier_overrides(replace(options or RunOptions(), **option_fields))
    problem = max_steps_problem(opts.max_steps)
    if problem:
        raise TrainConfigError(f"--max-steps {opts.max_steps}: {problem}")
    console = console or Console()
    started = time.monotonic()
    if isinstance(mixture, MixtureSpec):
        mix = mixture
    else:
        mix = MixtureSpec.from_config(load_run_config(mixture, opts.settings, opts.max_steps))
    run = plan_run(mix, opts)
    result = TrainResult(run_dir=run.dir.path, resumed_from=run.checkpoint)
    created = not run.dir.path.exists()
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    try:
        # A member kept waiting by its server (a platform backend still starting, a rate limit) says so.
        with BackendWatch(lambda line: console.print(f"  [yellow]{line}[/yellow]", highlight=False)):
            from ormix.trl._lifecycle import quiet_trainer

            # Loading and writing models (the warm start, the trainer, checkpoints, the final model) draws
            # no transformers bars: ormix prints one line per step.
            with quiet_trainer():
                model, processing_class = start_run(mix, run, opts, console)
                run_trainer(mix, run, opts, (model, processing_class), console, list(callbacks), result)
    except BaseException:
        clear_failed_start(run, created)
        raise
    finally:
        # Closing the connections also closes sessions no episode tracks any more (keepalive pings would
        # otherwise hold them open on a remote server until its reaper runs).
        mix.close()
        result.wall_s = time.monotonic() - started
    result.summary = summarise(result.log_history, list(mix.members))
    finish_run(mixture, run, opts, result, console)
    return result


def train_command(
    mixture: MixtureSpec | str | Path,
    options: RunOptions | None = None,
    *,
    console: Any,
    overrides: Sequence[str] = (),
    callbacks: Sequence[Any] = (),
    debug: bool = False,
    **option_fields: Any,
) -> int:
    """`ormix train FILE`: returns the exit status (0 done, 1 failed or stopped by the coverage alarm, 2 bad
    input, 130 interrupted, 143 terminated by SIGTERM).

    As `train`, plus ``overrides``: the ``--set KEY=VALUE`` items, applied over ``options.settings``. Every
    failure is one ``error:`` line (``debug``, or ``ORMIX_DEBUG`` set, adds the traceback of an unexpected
    one); sessions are closed and the run directory keeps what was logged on every exit path.

    Example:
        Not run as a doctest: a GRPO training run with a torch model is far too slow for one.

        >>> from rich.console import Console
        >>> options = RunOptions(max_steps=2)
        >>> train_command("mixtures/local-demo.yaml", options, console=Console())   # doctest: +SKIP
        0
    """
    from ormix.trl._args import check_settings, parse_overrides

    def body() -> int:
        opts = replace(options or RunOptions(), **option_fields)
        parsed = parse_overrides(overrides)
        settings = check_settings(parsed, "--set ") if parsed else {}  # the check imports TRL: seconds
        opts = replace(opts, settings={**opts.settings, **settings})
        return train(mixture, opts, console=console, callbacks=callbacks).exit_status

    return run_command(body, console=console, what="training", debug=debug)
