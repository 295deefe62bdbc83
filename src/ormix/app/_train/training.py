"""The trainer and its run: `ConcurrentGRPOTrainer` (or TRL's `AsyncGRPOTrainer` with ``--async``) with
ormix's callbacks, the evals around it, and `TrainResult` filled in on every way out (end, alarm, Ctrl-C,
SIGTERM)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ormix._runs import checkpoint_path
from ormix.app._command import frozen_heap
from ormix.app._train.evals import (
    eval_plan,
    evaluate_model,
    evaluate_run,
    evaluation_of,
    not_run,
    ran,
    record_evaluation,
    say_not_run,
    say_plan,
)
from ormix.app._train.options import RunOptions, TrainResult
from ormix.app._train.prepare import PlannedRun
from ormix.app._train.progress import alarms_on_console, console_lines

if TYPE_CHECKING:  # pragma: no cover
    from ormix.mixture import MixtureSpec


def run_trainer(
    mix: MixtureSpec,
    run: PlannedRun,
    opts: RunOptions,
    model: tuple[Any, Any],
    console: Any,
    callbacks: list[Any],
    result: TrainResult,
) -> None:
    """Build the trainer and train, filling `result` in on every way out (end, alarm, Ctrl-C, SIGTERM); the
    evals the mixture asks for around it, and what they did in the manifest."""
    from ormix.trl._lifecycle import (
        ProgressLine,
        RunLifecycle,
        handle_termination,
        quiet_trainer,
        save_checkpoint,
    )

    evals = _Evals(mix, run, opts, console, result)
    with handle_termination(opts.on_sigterm, opts.sigterm_grace_s) as stop, contextlib.ExitStack() as stack:
        ours = [
            RunLifecycle(run.dir.path, stop),
            ProgressLine(
                list(mix.members), console_lines(console), run.dir.path, eval_members=mix.config.eval_members
            ),
            *callbacks,
        ]
        if opts.vllm_url is not None:
            # With a trainer of its own, built before the run's: building one attaches the mixture's
            # callbacks to it, and the run's trainer, built next, takes them back.
            evals.before(None, model)
        trainer = _build_trainer(mix, run, opts, model, ours, stack)
        if opts.vllm_url is None:
            evals.before(trainer, model)  # the trainer holds the model GRPO starts from
        try:
            with quiet_trainer(trainer.model), alarms_on_console(console), frozen_heap():
                trainer.train(resume_from_checkpoint=str(run.checkpoint) if run.checkpoint else None)
        except KeyboardInterrupt:
            stop.disarm()
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
            stop.disarm()  # the step is over: the grace bound must not cut the cleanup below
            # Now, while the trainer still holds its environments: the episodes are tracked weakly, so once
            # the trainer is dropped their open sessions can no longer be found (and keepalive pings hold
            # them open).
            mix.close_sessions()
    _how_it_ended(trainer, run, stop.requested, result)
    if result.interrupted or result.terminated:
        evals.record()
        return
    with quiet_trainer():
        trainer.save_model(str(run.dir.model_path))
    evals.after(trainer)


class _Evals:
    """The evals a run makes around training: on `ormix eval`'s default eval set (`eval_plan`), each said
    before it runs, each that does not run said with why, and what ran recorded in the manifest."""

    def __init__(
        self, mix: MixtureSpec, run: PlannedRun, opts: RunOptions, console: Any, result: TrainResult
    ) -> None:
        self.mix, self.run, self.opts, self.console, self.result = mix, run, opts, console, result
        self.evaluation = evaluation_of(mix)
        self.tasks: dict[str, Any] = {}
        self.skipped: dict[str, str] = {}
        entries = result.evaluation
        if self.evaluation is None:
            unasked = "not asked: the mixture has no evaluation: section and no member has an eval: set"
            entries.update(before=not_run(unasked), after=not_run(unasked))
            return
        asked = {"before": self.evaluation.before_training, "after": self.evaluation.after_training}
        for phase, wanted in asked.items():
            if not wanted:
                entries[phase] = not_run(f"not asked (evaluation.{phase}_training is false)")
        if not opts.evaluate:
            why = "the caller evaluates (RunOptions.evaluate is false)"
            entries.update({phase: not_run(why) for phase, wanted in asked.items() if wanted})
            self.evaluation = None
            return
        # Asks the servers (splits and task lists) before the model trains: an eval set that cannot be
        # built is said now, not after the run.
        self.tasks, self.skipped = eval_plan(mix)
        if not self.tasks:
            why = "no member has tasks to evaluate on"
            for phase, wanted in asked.items():
                if wanted:
                    entries[phase] = {**not_run(why), "not_evaluated": dict(self.skipped)}
                    say_not_run(
                        phase, why + "; " + "; ".join(f"{m}: {r}" for m, r in self.skipped.items()), console
                    )
            self.evaluation = None

    def _wanted(self, phase: str) -> bool:
        return self.evaluation is not None and phase not in self.result.evaluation

    def before(self, trainer: Any, model: tuple[Any, Any]) -> None:
        """The eval of the model GRPO starts from (after the warm start, which the trainer holds)."""
        if not self._wanted("before"):
            return
        out = self.run.dir.eval_before_path
        if self.run.checkpoint is not None:
            if (out / "summary.json").is_file():
                self.result.eval_before = out  # a resumed run compares with the eval of its first start
                kept = ran(out, self.tasks, self.evaluation.samples, self.skipped)
                self.result.evaluation["before"] = {**kept, "by": "the run's first start"}
            else:
                why = "the run resumed from a checkpoint, and its first start made no eval before training"
                self.result.evaluation["before"] = not_run(why)
                say_not_run("before", why, self.console)
            return
        label = f"{self.run.dir.path.resolve()}@start"  # what `ormix eval --model RUN_DIR@start` names
        self.result.eval_before = self._evaluate("before", out, trainer, model[0], label)

    def after(self, trainer: Any) -> None:
        """The eval of the trained model (labelled as `ormix eval --model RUN_DIR` labels it, so that
        command finds it done), then the record of both."""
        if self._wanted("after"):
            path = self.run.dir.path
            self.result.eval = self._evaluate(
                "after", self.run.dir.eval_path, trainer, path, str(path.resolve())
            )
        self.record()

    def _evaluate(self, phase: str, out: Path, trainer: Any, model: Any, label: str) -> Path:
        """Say the eval, run it into ``out`` (``model``'s directory with a trainer of its own under
        ``--async``, else ``trainer``'s model, labelled ``label``) and record that it ran."""
        say_plan(phase, self.tasks, self.skipped, out, self.console)
        if self.opts.vllm_url is not None:
            evaluate_model(
                self.mix, str(model), self.evaluation, self.tasks, out, self.console, self.opts.settings
            )
        else:
            evaluate_run(trainer, self.mix, self.evaluation, self.tasks, out, self.console, model=label)
        self.result.evaluation[phase] = ran(out, self.tasks, self.evaluation.samples, self.skipped)
        return out

    def record(self) -> None:
        """What ran into the manifest; an eval after training that a stopped run did not reach, said."""
        if self._wanted("after"):
            how = "terminated (SIGTERM)" if self.result.terminated else "interrupted"
            why = f"the run was {how} before it ended; a resumed run evaluates its trained model"
            self.result.evaluation["after"] = not_run(why)
            say_not_run("after", why, self.console)
        if self.run.rank == 0:
            record_evaluation(self.run.dir.path, self.result.evaluation)


def _async_trainer(
    mix: MixtureSpec,
    run: PlannedRun,
    opts: RunOptions,
    model: tuple[Any, Any],
    callbacks: list[Any],
    stack: Any,
) -> Any:
    """`AsyncMixtureTrainer` against ``opts.vllm_url`` (the stand-in started on ``stack`` for ``standin``)."""
    from ormix.trl._async_grpo import STANDIN, AsyncMixtureTrainer

    weight_transfer = None
    if opts.vllm_url == STANDIN:
        from ormix.workbench._vllm_standin import StandInWeightTransfer, VLLMStandIn

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

    from ormix.rollout._lookahead import DEFAULT_LOOKAHEAD
    from ormix.trl._trainer import ConcurrentGRPOTrainer

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


def _how_it_ended(trainer: Any, run: PlannedRun, stop_requested: bool, result: TrainResult) -> None:
    """What the trainer left: its log, a SIGTERM's checkpoint, the alarm that stopped it, the no-learning
    alarms."""
    from ormix.trl._callbacks import TelemetryCallback

    result.log_history = list(trainer.state.log_history)
    if stop_requested and not result.terminated:
        result.terminated = True
        saved = checkpoint_path(run.dir.path, trainer.state.global_step)
        result.checkpoint = saved if saved.is_dir() else None
    telemetry = [c for c in trainer.callback_handler.callbacks if isinstance(c, TelemetryCallback)]
    alarm = next((c.stopped_by for c in telemetry if c.stopped_by is not None), None)
    result.stopped_by_alarm = alarm.message if alarm is not None else None
    result.no_learning = [a.message for c in telemetry for a in c.no_learning]
    result.upload = next((c.upload_summary for c in telemetry if c.upload_summary), None)
