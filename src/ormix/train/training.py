"""The trainer and its run: `ConcurrentGRPOTrainer` (or TRL's `AsyncGRPOTrainer` with ``--async``) with
ormix's callbacks, the evals around it, and `TrainResult` filled in on every way out (end, alarm, Ctrl-C,
SIGTERM)."""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any

from ormix.runs import checkpoint_path
from ormix.train.evals import evaluate_run, evaluation_of
from ormix.train.options import RunOptions, TrainResult
from ormix.train.prepare import PlannedRun

if TYPE_CHECKING:  # pragma: no cover
    from ormix.mixture import MixtureSpec

__all__ = ["run_trainer"]


def run_trainer(
    mix: MixtureSpec,
    run: PlannedRun,
    opts: RunOptions,
    model: tuple[Any, Any],
    console: Any,
    callbacks: list[Any],
    result: TrainResult,
) -> None:
    """Build the trainer and train, filling `result` in on every way out (end, alarm, Ctrl-C, SIGTERM)."""
    from ormix.integrations.trl.lifecycle import (
        ProgressLine,
        RunLifecycle,
        alarms_on_console,
        handle_termination,
        quiet_trainer,
        save_checkpoint,
    )

    with handle_termination(opts.on_sigterm, opts.sigterm_grace_s) as stop, contextlib.ExitStack() as stack:
        ours = [
            RunLifecycle(run.dir.path, stop),
            ProgressLine(list(mix.members), console, run.dir.path, eval_members=mix.config.eval_members),
            *callbacks,
        ]
        trainer = _build_trainer(mix, run, opts, model, ours, stack)
        evaluation = _evaluation(mix, run, opts, console)
        before = run.dir.path / "eval-before"
        if evaluation is not None and evaluation.before_training:
            if run.checkpoint is None:
                result.eval_before = evaluate_run(trainer, mix, evaluation, before, console)
            elif (before / "summary.json").is_file():
                result.eval_before = before  # a resumed run compares with the eval of its first start
        try:
            with quiet_trainer(trainer.model), alarms_on_console(console):
                trainer.train(resume_from_checkpoint=str(run.checkpoint) if run.checkpoint else None)
        except KeyboardInterrupt:
            if stop.requested:
                result.terminated = True  # a second SIGTERM, the grace bound, or the abandon policy
            else:
                result.interrupted = True
                if opts.save_on_interrupt and trainer.state.global_step > 0:
                    result.checkpoint = save_checkpoint(trainer)
            console.print(
                "[yellow]stopping[/yellow]: closing sessions; the run directory keeps what was logged"
            )
        finally:
            # Now, while the trainer still holds its environments: the episodes are tracked weakly, so once
            # the trainer is dropped their open sessions can no longer be found (and keepalive pings hold
            # them open).
            mix.close_sessions()
    _how_it_ended(trainer, run, stop.requested, result)
    if not (result.interrupted or result.terminated):
        with quiet_trainer():
            trainer.save_model(str(run.dir.path / "model"))
        if evaluation is not None and evaluation.after_training:
            # Labelled as `ormix eval --model RUN_DIR` labels it, so that command finds this eval done.
            result.eval = evaluate_run(
                trainer, mix, evaluation, run.dir.path / "eval", console, model=run.dir.path.resolve()
            )


def _async_trainer(
    mix: MixtureSpec,
    run: PlannedRun,
    opts: RunOptions,
    model: tuple[Any, Any],
    callbacks: list[Any],
    stack: Any,
) -> Any:
    """`AsyncMixtureTrainer` against ``opts.vllm_url`` (the stand-in started on ``stack`` for ``standin``)."""
    from ormix.integrations.trl.async_grpo import STANDIN, AsyncMixtureTrainer

    weight_transfer = None
    if opts.vllm_url == STANDIN:
        from ormix.demo.vllm_standin import StandInWeightTransfer, VLLMStandIn

        standin = stack.enter_context(VLLMStandIn(str(model[0])))
        weight_transfer = StandInWeightTransfer(standin)
        run.args.vllm_server_base_url = standin.url
    return AsyncMixtureTrainer(
        str(model[0]), mix, run.args, weight_transfer=weight_transfer, callbacks=callbacks
    )


def _build_trainer(
    mix: MixtureSpec, run: PlannedRun, opts: RunOptions, model: tuple[Any, Any], ours: list[Any], stack: Any
) -> Any:
    """The run's trainer with ormix's callbacks (`ours`) after the mixture's; transformers' printed log dicts
    and (with ``disable_tqdm``) its bar removed: ormix prints one line per step."""
    from transformers import PrinterCallback, ProgressCallback

    from ormix.integrations.trl.trainer import ConcurrentGRPOTrainer
    from ormix.rollout.lookahead import DEFAULT_LOOKAHEAD

    args = run.args
    lookahead = opts.lookahead if opts.lookahead is not None else mix.config.lookahead
    trainer = (
        _async_trainer(mix, run, opts, model, ours, stack) if opts.vllm_url is not None else None
    ) or ConcurrentGRPOTrainer(
        concurrent=opts.concurrent,
        lookahead=DEFAULT_LOOKAHEAD if lookahead is None else lookahead,
        model=model[0],
        args=args,
        processing_class=model[1],
        train_dataset=mix.train_dataset,
        # Look at the eval tasks only when evaluating.
        eval_dataset=mix.eval_dataset if args.eval_strategy != "no" and mix.eval_dataset else None,
        environment_factory=mix.environment_factory,
        reward_funcs=mix.reward_funcs,
        callbacks=[*mix.callbacks, *ours],
    )
    # Our one line per step replaces transformers' printed log dicts.
    trainer.remove_callback(PrinterCallback)
    if args.disable_tqdm:
        trainer.remove_callback(ProgressCallback)
    return trainer


def _evaluation(mix: MixtureSpec, run: PlannedRun, opts: RunOptions, console: Any) -> Any:
    """The evals this run makes around training (`EvaluationConfig`), or None."""
    evaluation = evaluation_of(mix) if opts.evaluate and opts.vllm_url is None else None
    if evaluation is not None and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        # Not yet run or tested across processes: said, not hung.
        console.print(
            "  note: the evals before and after training run in one process; with several they are "
            f"skipped: run `ormix eval FILE --model {run.dir.path}` after the run"
        )
        evaluation = None
    return evaluation


def _how_it_ended(trainer: Any, run: PlannedRun, stop_requested: bool, result: TrainResult) -> None:
    """What the trainer left: its log, a SIGTERM's checkpoint, the alarm that stopped it."""
    from ormix.integrations.trl.callbacks import TelemetryCallback

    result.log_history = list(trainer.state.log_history)
    if stop_requested and not result.terminated:
        result.terminated = True
        saved = checkpoint_path(run.dir.path, trainer.state.global_step)
        result.checkpoint = saved if saved.is_dir() else None
    alarm = next(
        (c.stopped_by for c in trainer.callback_handler.callbacks if isinstance(c, TelemetryCallback)), None
    )
    result.stopped_by_alarm = alarm.message if alarm is not None else None
