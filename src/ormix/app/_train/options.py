"""How a run is asked for (`RunOptions`, the command's flags) and what it leaves (`TrainResult`), with the
exit statuses `ormix train` returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ormix._choices import TerminationPolicy
from ormix.app._command import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_TERMINATED


@dataclass(frozen=True)
class RunOptions:
    """How to run a mixture: `ormix train`'s flags (`train` and `train_command` take them as keywords too).

    Attributes:
        model: hub id or local path; ``None`` (or ``"ormix:tiny"``) = the offline tiny model.
        max_steps: overrides ``train.max_steps``.
        output_dir: run directory; default ``runs/<mixture name>-<timestamp>``.
        warmup_sft: steps of supervised warm start on reference solutions before GRPO (local members only;
            cached, so a second run reuses it); ``None`` = the file's ``warm_start.sft_steps`` (else 0).
        warmup_fraction: warm only this fraction of each member's tasks (GRPO learns the rest); ``None`` = the
            file's ``warm_start.fraction`` (else 1.0).
        settings: GRPOConfig overrides, applied over the file's ``train:`` section.
        concurrent: open each batch's sessions and run each tool round together (`ConcurrentGRPOTrainer`);
            ``False`` keeps TRL's sequential loop.
        lookahead: steps whose sessions open while the step before them runs (`ConcurrentGRPOTrainer`);
            ``None`` = the file's ``lookahead`` (else 1).
        resume: continue the run in ``output_dir`` from ``"latest"`` or a checkpoint directory.
        overwrite: start over in an ``output_dir`` that holds a run (its files are removed).
        allow_changed_mixture: resume although the mixture changed (the changes go into the manifest).
        on_sigterm: ``"checkpoint"`` (save when the current step ends, within ``sigterm_grace_s``, then stop)
            or ``"abandon"`` (stop at once; the last periodic checkpoint remains).
        save_on_interrupt: on Ctrl-C, save the last completed step as a checkpoint.
        report: print the report at the end.
        resume_command: the command printed to resume a stopped run (default: built from the arguments).
        evaluate: run the evals around training that the mixture asks for (its ``evaluation:``, or a member's
            ``eval:`` set: after training by default; `EvaluationConfig`) on `ormix eval`'s default eval set;
            ``False`` skips them (the manifest says so).
        seed: the training seed (GRPOConfig ``seed``: sampling, dropout, data order) over the file's; the
            mixture's plan rows, the warm start and the evals keep the mixture's seed, so runs that differ
            only in ``seed`` train on the same rows from the same start. A resumed run keeps its seed.
        vllm_url: train with TRL's `AsyncGRPOTrainer` (`ormix.trl._async_grpo`) against the
            vLLM server at this URL, or ``"standin"`` for ormix's stand-in (`ormix.workbench._vllm_standin`:
            the
            model served by transformers, for machines without vLLM); ``None``: the sync trainer.

    Example:
        >>> RunOptions(max_steps=4, settings={"learning_rate": 1e-5}).on_sigterm
        'checkpoint'
    """

    model: str | None = None
    max_steps: int | None = None
    output_dir: str | Path | None = None
    warmup_sft: int | None = None
    warmup_fraction: float | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    concurrent: bool = True
    lookahead: int | None = None
    resume: str | Path | None = None
    overwrite: bool = False
    allow_changed_mixture: bool = False
    on_sigterm: TerminationPolicy = "checkpoint"
    sigterm_grace_s: float = 120.0
    save_on_interrupt: bool = True
    report: bool = True
    resume_command: str | None = None
    evaluate: bool = True
    vllm_url: str | None = None
    seed: int | None = None


@dataclass
class TrainResult:
    """What a finished (or stopped) run left behind.

    Attributes:
        run_dir: The run directory (manifest, train args, log history, completions, rollouts, report, model).
        log_history: The trainer's log entries (one per logging step, then the final summary).
        summary: Per member: mean over logged steps of ``reward`` and, where logged, ``coverage``.
        wall_s: Seconds from loading the mixture to the end of training.
        interrupted: True when training stopped on Ctrl-C.
        terminated: True when training stopped on SIGTERM.
        checkpoint: The checkpoint saved when the run stopped early (``None`` if none was).
        stopped_by_alarm: The coverage alarm's message, when it stopped the run (``telemetry.stop``).
        resumed_from: The checkpoint this run continued from.
        eval_before, eval: The eval directories of the model before and after training (`EvaluationConfig`),
            when the mixture has eval sets and they ran.
        evaluation: What the evals around training did, as the manifest records it: per phase (``before``,
            ``after``) ``ran`` and either the members evaluated (split, task count) or the ``reason`` it
            did not run.
        no_learning: The no-learning alarms' messages (`ormix.telemetry._alarm.NoLearningAlarm`), in order.
        upload: The rollout upload's line (``telemetry.upload``): how many rollouts reached the platform.
    """

    run_dir: Path
    log_history: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, dict[str, float | None]] = field(default_factory=dict)
    wall_s: float = 0.0
    interrupted: bool = False
    terminated: bool = False
    checkpoint: Path | None = None
    stopped_by_alarm: str | None = None
    resumed_from: Path | None = None
    eval_before: Path | None = None
    eval: Path | None = None
    evaluation: dict[str, dict[str, Any]] = field(default_factory=dict)
    no_learning: list[str] = field(default_factory=list)
    upload: str | None = None

    @property
    def never_scored(self) -> list[str]:
        """The members that trained without one scored rollout (coverage 0 in every logged step).

        Example:
            >>> TrainResult(Path("r"), summary={"a": {"coverage": 0.0}, "b": {"coverage": 0.5}}).never_scored
            ['a']
        """
        return [m for m, v in self.summary.items() if v.get("coverage") == 0]

    @property
    def exit_status(self) -> int:
        """0 finished, 1 stopped by the alarm or no member ever scored, 130 interrupted (Ctrl-C), 143
        terminated (SIGTERM).

        Example:
            >>> TrainResult(Path("r"), summary={"a": {"coverage": 0.0}, "b": {"coverage": None}}).exit_status
            1
        """
        if self.terminated:
            return EXIT_TERMINATED
        if self.interrupted:
            return EXIT_INTERRUPTED
        trained = [v for v in self.summary.values() if v.get("coverage") is not None]
        # Nothing scored: GRPO had no reward to learn from, a failed run whatever the loss printed.
        unscored = bool(trained) and all(v["coverage"] == 0 for v in trained)
        return EXIT_FAILED if self.stopped_by_alarm or unscored else EXIT_OK
