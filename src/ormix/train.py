"""The main job: GRPO on a mixture file, end to end (`ormix train FILE`).

`train_command` is what the console script runs; `train` is the same for Python callers (examples, ablations).
`RunOptions` says how to run (the command's flags); the mixture file says what to train on:

1. config: the mixture, validated before any server is contacted; `GRPOConfig` from its ``train:`` section,
   the caller's overrides, then what must agree with the mixture (`build_grpo_config`); the run directory,
   fresh or — with ``resume`` — holding the same mixture's run (`ormix.runs`);
2. trainer: the model (ormix's offline tiny one by default), optionally warmed up on reference solutions
   (`ormix.demo.warmup`); ``manifest.json`` and ``train_args.json``; `ConcurrentGRPOTrainer`;
3. run: one line per logging step (per-member reward and coverage, where the step's time went); with
   ``eval_steps`` (and members with eval sets) an evaluation every ``eval_steps`` steps, logged per member as
   ``eval/<member>/pass@1`` (pass@k, pass^k for k = ``num_generations_eval``, mean reward, coverage);
4. result: the model under ``<run dir>/model``, the report, a `TrainResult`.

Sessions are closed and local servers stopped on every exit path (end, SIGTERM, Ctrl-C, error): TRL never
closes its environments. SIGTERM saves a checkpoint at the end of the current step (within a bound) and
stops; Ctrl-C stops at once and saves the last completed step; both print the command that resumes.

Example:
    Not run as a doctest: a GRPO training run with a torch model is far too slow for one.

    >>> from ormix.train import RunOptions, train
    >>> result = train("mixtures/local-demo.yaml", RunOptions(max_steps=2))   # doctest: +SKIP
    >>> result.run_dir, result.summary["seta"]["reward"]                      # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shlex
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ormix.config.trainer_rules import max_steps_problem, plan_length_problem
from ormix.errors import OrmixError, TrainConfigError, exit_status
from ormix.runs import RunDirectory, checkpoint_path, default_run_dir

if TYPE_CHECKING:  # pragma: no cover
    from ormix.config import MixtureConfig
    from ormix.mixture import MixtureSpec

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "RunOptions",
    "TrainResult",
    "load_run_config",
    "train",
    "train_command",
]

#: Exit status after Ctrl-C (SIGINT), and after SIGTERM (128 + the signal number, as shells report them).
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


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
        evaluate: run the evaluations of the mixture's eval sets that its ``evaluation:`` asks for (after
            training by default; `EvaluationConfig`); ``False`` skips them.
        vllm_url: train with TRL's `AsyncGRPOTrainer` (`ormix.integrations.trl.async_grpo`) against the
            vLLM server at this URL, or ``"standin"`` for ormix's stand-in (`ormix.demo.vllm_standin`: the
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
    on_sigterm: Literal["checkpoint", "abandon"] = "checkpoint"
    sigterm_grace_s: float = 120.0
    save_on_interrupt: bool = True
    report: bool = True
    resume_command: str | None = None
    evaluate: bool = True
    vllm_url: str | None = None


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
        return 1 if self.stopped_by_alarm or unscored else 0


# ── settings ──────────────────────────────────────────────────────────


def load_run_config(
    path: str | Path, settings: Mapping[str, Any] | None = None, max_steps: int | None = None
) -> MixtureConfig:
    """The mixture `ormix train` runs from a file: validated (its ``train:`` section too) and sized to the
    run.

    ``settings`` are ``--set`` overrides and ``max_steps`` is ``--max-steps``; the run's ``max_steps`` sizes
    a dataset the file leaves unsized (`MixtureConfig.sized_for`). Its `config_hash()` is the run's manifest
    hash.

    Example:
        >>> load_run_config("mixtures/local-demo.yaml").name
        'local-demo'
    """
    from ormix.config import load_mixture_config
    from ormix.mixture.mixture import trainer_settings_check

    config = load_mixture_config(str(path), train_check=trainer_settings_check())
    settings = settings or {}
    steps = max_steps if max_steps is not None else settings.get("max_steps", config.train.get("max_steps"))
    return config.sized_for(steps if isinstance(steps, int) else None)


# ── the job ───────────────────────────────────────────────────────────


@dataclass
class _Run:
    """One run, as checked before anything starts: where, with which trainer settings, from where."""

    dir: RunDirectory
    args: Any  # the GRPOConfig
    notes: list[str]
    model: str | None  # None: the tiny model
    warmup_sft: int
    warmup_fraction: float
    rank: int
    checkpoint: Path | None = None
    changes: list[str] = field(default_factory=list)


def _plan_run(mix: MixtureSpec, opts: RunOptions) -> _Run:
    """Every check that needs no server: trainer settings, plan length, warm start, the run directory."""
    from ormix.demo.tiny import TINY_MODEL
    from ormix.integrations.trl.args import build_grpo_config, check_settings

    file_settings = dict(mix.config.train)
    check_settings(file_settings, "train.")  # name a bad key as the file spells it, before merging
    merged = {**file_settings, **opts.settings}
    if opts.max_steps is not None:
        merged["max_steps"] = opts.max_steps
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if opts.output_dir is None and (world_size > 1 or opts.resume is not None):
        why = f"{world_size} processes" if world_size > 1 else "--resume"
        # Each rank would stamp its own time: every process must write into one run directory.
        raise TrainConfigError(f"{why}: pass --output-dir (the run directory)")
    run_dir = Path(opts.output_dir) if opts.output_dir is not None else default_run_dir(mix.name)
    model = None if opts.model in (None, TINY_MODEL) else opts.model
    args, notes = build_grpo_config(mix, merged, output_dir=run_dir, model=model, world_size=world_size)
    if opts.vllm_url is not None:
        args = _async_args(mix, opts, args, world_size)
    cfg = mix.config
    problem = plan_length_problem(args.max_steps, cfg.prompts_per_step, cfg.num_samples, cfg.num_steps)
    if problem:
        raise TrainConfigError(problem)
    warm = cfg.warm_start  # the file's warm start, unless the options say otherwise
    sft = opts.warmup_sft if opts.warmup_sft is not None else (warm.sft_steps if warm else 0)
    fraction = opts.warmup_fraction if opts.warmup_fraction is not None else (warm.fraction if warm else 1.0)
    if sft < 0 or not 0.0 < fraction <= 1.0:
        raise TrainConfigError(
            f"--warmup-sft is >= 0 and --warmup-fraction in (0, 1]; got {sft} and {fraction}"
        )
    if model is not None:
        problem = _model_problem(model)
        if problem:
            raise TrainConfigError(problem)
    if sft > 0 and opts.resume is None:
        _check_references(mix)
    run = _Run(RunDirectory(run_dir), args, notes, model, sft, fraction, int(os.environ.get("RANK", "0")))
    if run.rank == 0 or opts.resume is not None:
        run.checkpoint, run.changes = run.dir.prepare(
            mix.config.manifest_dict(),
            resume=opts.resume,
            overwrite=opts.overwrite,
            allow_changed=opts.allow_changed_mixture,
        )
    return run


def _async_args(mix: MixtureSpec, opts: RunOptions, args: Any, world_size: int) -> Any:
    """The checked `GRPOConfig` as TRL's ``AsyncGRPOConfig``, after what the async path cannot do yet."""
    from ormix.integrations.trl.async_grpo import async_config, async_problems

    assert opts.vllm_url is not None
    problems = async_problems(opts.vllm_url)
    if world_size > 1:
        problems.append("--async runs one trainer process here (TRL's async worker is on rank 0 only)")
    warm = mix.config.warm_start
    if (opts.warmup_sft if opts.warmup_sft is not None else (warm.sft_steps if warm else 0)) > 0:
        problems.append("--async does not warm start (--warmup-sft / warm_start): pass --warmup-sft 0")
    if str(getattr(args.eval_strategy, "value", args.eval_strategy)) != "no":
        problems.append("--async does not evaluate during training: drop train.eval_steps")
    if problems:
        raise TrainConfigError("ormix train --async:\n- " + "\n- ".join(problems))
    return async_config(args, opts.vllm_url)


def _model_problem(model: str) -> str | None:
    """What is wrong with ``--model`` (a model directory or a hub id), found in a second, not after the
    hub's retries: a path that is not there, a name that is no hub id, an id the hub does not know, or one
    neither cached nor reachable."""
    path = Path(model).expanduser()
    if path.is_dir():
        if (path / "config.json").is_file():
            return None
        return f"--model {model}: {path} has no config.json, so it is not a model directory"
    if model.startswith((".", "/", "~")) or model.count("/") > 1 or path.exists():
        return f"--model {model}: no such model directory"
    from huggingface_hub import HfApi, try_to_load_from_cache
    from huggingface_hub.errors import GatedRepoError, HFValidationError, RepositoryNotFoundError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(model)
    except HFValidationError:
        return f"--model {model}: neither a model directory nor a hub id (owner/name)"
    if isinstance(try_to_load_from_cache(model, "config.json"), str):
        return None
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return f"--model {model}: not in the local hub cache, and HF_HUB_OFFLINE is set"
    try:
        HfApi().model_info(model, timeout=10)
    except GatedRepoError:
        return f"--model {model}: a gated model; accept its terms on the hub and log in (`hf auth login`)"
    except RepositoryNotFoundError:
        return f"--model {model}: the hub has no such model (ids are case-sensitive; check the spelling)"
    except Exception as e:  # noqa: BLE001 - offline, DNS, proxy: the hub cannot be asked
        return (
            f"--model {model}: not in the local hub cache and the hub cannot be reached "
            f"({type(e).__name__}); download it first, or pass a local model directory"
        )
    return None


def _check_references(mix: MixtureSpec) -> None:
    """A warm start needs reference solutions: refuse before anything starts when no training member has
    any (a member's ``reference:`` hook, or a shipped ``local:`` environment's)."""
    from ormix.references import reference_solver

    if not any(reference_solver(m, mix.members[m]) is not None for m in mix.train_members):
        from ormix.demo.warmup import WarmupError

        raise WarmupError(
            "the warm start needs reference solutions and no training member has any: give yours a "
            "`reference: module:function` (README: Your own environment), or drop --warmup-sft / warm_start:"
        )


def _earlier_overrides(opts: RunOptions) -> RunOptions:
    """A resumed run trains with its first start's ``--set`` values (and ``--max-steps``) unless this
    command gives them again."""
    if opts.resume is None or opts.output_dir is None:
        return opts
    stored = (RunDirectory(opts.output_dir).read_manifest() or {}).get("overrides") or {}
    settings = {**stored.get("settings", {}), **opts.settings}
    max_steps = opts.max_steps if opts.max_steps is not None else stored.get("max_steps")
    return replace(opts, settings=settings, max_steps=max_steps)


def _clear_failed_start(run: _Run, created: bool) -> None:
    """A start that failed before any step completed leaves nothing that would refuse the retry."""
    if run.checkpoint is not None or run.rank != 0 or not run.dir.path.is_dir():
        return
    if run.dir.checkpoints() or run.dir.completed_step() is not None:
        return
    run.dir.clear()
    (run.dir.path / "progress.json").unlink(missing_ok=True)
    if created:
        with contextlib.suppress(OSError):  # not empty (something else wrote there), or already gone
            run.dir.path.rmdir()


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

    from ormix.connection import BackendWatch
    from ormix.mixture import MixtureSpec

    opts = _earlier_overrides(replace(options or RunOptions(), **option_fields))
    problem = max_steps_problem(opts.max_steps)
    if problem:
        raise TrainConfigError(f"--max-steps {opts.max_steps}: {problem}")
    console = console or Console()
    started = time.monotonic()
    if isinstance(mixture, MixtureSpec):
        mix = mixture
    else:
        mix = MixtureSpec.from_config(load_run_config(mixture, opts.settings, opts.max_steps))
    run = _plan_run(mix, opts)
    result = TrainResult(run_dir=run.dir.path, resumed_from=run.checkpoint)
    created = not run.dir.path.exists()
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    try:
        # A member kept waiting by its server (a platform backend still starting, a rate limit) says so.
        with BackendWatch(lambda line: console.print(f"  [yellow]{line}[/yellow]", highlight=False)):
            from ormix.integrations.trl.lifecycle import quiet_trainer

            # Loading and writing models (the warm start, the trainer, checkpoints, the final model) draws
            # no transformers bars: ormix prints one line per step.
            with quiet_trainer():
                model, processing_class = _start(mix, run, opts, console)
                _run_trainer(mix, run, opts, (model, processing_class), console, list(callbacks), result)
    except BaseException:
        _clear_failed_start(run, created)
        raise
    finally:
        # Closing the connections also closes sessions no episode tracks any more (keepalive pings would
        # otherwise hold them open on a remote server until its reaper runs).
        mix.close()
        result.wall_s = time.monotonic() - started
    result.summary = _summarise(result.log_history, list(mix.members))
    _finish(mixture, run, opts, result, console)
    return result


def _start(mix: MixtureSpec, run: _Run, opts: RunOptions, console: Any) -> tuple[Any, Any]:
    """Contact the servers, write the manifest and train args, warm the model up: (model, tokenizer)."""
    from ormix.demo.tiny import resolve_model

    model_path = resolve_model(run.model)
    console.print(
        f"[bold]ormix train[/bold] {mix.name}: members {', '.join(mix.members)} "
        f"({mix.routing} routing), model {run.model or 'ormix:tiny'}"
    )
    console.print(f"run directory: {run.dir.path}")
    for note in run.notes:
        console.print(f"  set {note}")
    # Contacts the servers: task lists, tool surfaces, eval sets (a split or task that does not exist is
    # refused here, before any model loads); the manifest pins exactly what this run trains on.
    manifest = mix.manifest()
    for member, found in mix.eval_sets().items():
        console.print(
            f"  eval {member}: {len(found.task_indices)} task(s) of split {found.split!r}, {found.source}"
            + (f"; {found.overlap} also trained on" if found.overlap else ""),
            highlight=False,
        )
        for note in found.notes:
            console.print(f"  [yellow]note:[/yellow] {note}", highlight=False)
    if run.checkpoint is not None:
        manifest = run.dir.resumed_manifest(manifest, run.checkpoint, run.changes, opts.allow_changed_mixture)
        step = RunDirectory.step_of(run.checkpoint)
        if run.rank == 0:
            run.dir.cut_back(step)
        console.print(f"  resuming from {run.checkpoint} (step {step})")
    run.dir.path.mkdir(parents=True, exist_ok=True)
    overrides: dict[str, Any] = {"settings": dict(opts.settings)}
    if opts.max_steps is not None:
        overrides["max_steps"] = opts.max_steps
    manifest["overrides"] = overrides  # what `--resume` applies again
    if run.checkpoint is not None and opts.settings:
        shown = ", ".join(f"{k}={v}" for k, v in opts.settings.items())
        console.print(f"  with the run's --set {shown}", highlight=False)
    if run.rank == 0:
        run.dir.manifest_path.write_text(json.dumps(manifest, indent=2, default=str) + "\n")
        (run.dir.path / "train_args.json").write_text(run.args.to_json_string())
    args = run.args
    console.print(
        f"  {len(mix.train_dataset)} training rows, {mix.prompts_per_step or '?'} prompts/step × "
        f"{args.num_generations} generations, max_steps "
        f"{args.max_steps if args.max_steps > 0 else 'epochs'}, device "
        f"{'cpu' if args.use_cpu else 'gpu'}{', vLLM' if getattr(args, 'use_vllm', False) else ''}"
        f"{f', async ({opts.vllm_url})' if opts.vllm_url else ''}"
    )
    if run.warmup_sft == 0 or run.checkpoint is not None:
        return model_path, None
    from ormix.demo.warmup import warmup_sft

    warm = mix.config.warm_start
    return warmup_sft(
        mix,
        model_path,
        steps=run.warmup_sft,
        console=console,
        seed=args.seed,
        use_cpu=bool(args.use_cpu),
        max_completion_length=args.max_completion_length,
        fraction=run.warmup_fraction,
        near_misses=warm.near_misses if warm is not None else False,
    )


def _run_trainer(
    mix: MixtureSpec,
    run: _Run,
    opts: RunOptions,
    model: tuple[Any, Any],
    console: Any,
    callbacks: list[Any],
    result: TrainResult,
) -> None:
    """Build the trainer and train, filling `result` in on every way out (end, alarm, Ctrl-C, SIGTERM)."""
    from transformers import PrinterCallback, ProgressCallback

    from ormix.integrations.trl.callbacks import TelemetryCallback
    from ormix.integrations.trl.lifecycle import (
        ProgressLine,
        RunLifecycle,
        handle_termination,
        quiet_trainer,
        save_checkpoint,
    )
    from ormix.integrations.trl.trainer import ConcurrentGRPOTrainer
    from ormix.rollout.lookahead import DEFAULT_LOOKAHEAD

    args = run.args
    with handle_termination(opts.on_sigterm, opts.sigterm_grace_s) as stop, contextlib.ExitStack() as stack:
        ours = [
            RunLifecycle(run.dir.path, stop),
            ProgressLine(list(mix.members), console, run.dir.path, eval_members=mix.config.eval_members),
            *callbacks,
        ]
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
        evaluation = _evaluation(mix) if opts.evaluate and opts.vllm_url is None else None
        if evaluation is not None and int(os.environ.get("WORLD_SIZE", "1")) > 1:
            # Not yet run or tested across processes: said, not hung.
            console.print(
                "  note: the evals before and after training run in one process; with several they are "
                f"skipped: run `ormix eval FILE --model {run.dir.path}` after the run"
            )
            evaluation = None
        before = run.dir.path / "eval-before"
        if evaluation is not None and evaluation.before_training:
            if run.checkpoint is None:
                result.eval_before = _evaluate_run(trainer, mix, evaluation, before, console)
            elif (before / "summary.json").is_file():
                result.eval_before = before  # a resumed run compares with the eval of its first start
        try:
            with quiet_trainer(trainer.model):
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
    result.log_history = list(trainer.state.log_history)
    if stop.requested and not result.terminated:
        result.terminated = True
        saved = checkpoint_path(run.dir.path, trainer.state.global_step)
        result.checkpoint = saved if saved.is_dir() else None
    alarm = next(
        (c.stopped_by for c in trainer.callback_handler.callbacks if isinstance(c, TelemetryCallback)), None
    )
    result.stopped_by_alarm = alarm.message if alarm is not None else None
    if not (result.interrupted or result.terminated):
        with quiet_trainer():
            trainer.save_model(str(run.dir.path / "model"))
        if evaluation is not None and evaluation.after_training:
            # Labelled as `ormix eval --model RUN_DIR` labels it, so that command finds this eval done.
            result.eval = _evaluate_run(
                trainer, mix, evaluation, run.dir.path / "eval", console, model=run.dir.path.resolve()
            )


def _async_trainer(
    mix: MixtureSpec, run: _Run, opts: RunOptions, model: tuple[Any, Any], callbacks: list[Any], stack: Any
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


def _evaluation(mix: MixtureSpec) -> Any:
    """The run's `EvaluationConfig` if the mixture has eval sets (the file's, else the defaults), or None."""
    from ormix.config import EvaluationConfig

    if not mix.config.eval_members:
        return None
    return mix.config.evaluation or EvaluationConfig()


def _evaluate_run(
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


# ── the end ───────────────────────────────────────────────────────────


def _summarise(
    history: Sequence[Mapping[str, Any]], members: Sequence[str]
) -> dict[str, dict[str, float | None]]:
    def mean(key: str) -> float | None:
        values = [h[key] for h in history if isinstance(h.get(key), (int, float)) and not math.isnan(h[key])]
        return sum(values) / len(values) if values else None

    out: dict[str, dict[str, float | None]] = {}
    for m in members:
        coverage = mean(f"ormix/{m}/coverage")
        # Coverage 0: no rollout was scored, so any logged reward is only `unscored_reward` filling in.
        reward = None if coverage == 0 else mean(f"rewards/{m}/mean")
        out[m] = {"reward": reward, "coverage": coverage}
    return out


def _finish(mixture: Any, run: _Run, opts: RunOptions, result: TrainResult, console: Any) -> None:
    """The report, then how the run ended (and how to resume it)."""
    path = run.dir.path
    if result.eval is not None and result.eval_before is not None:
        _compare_evals(result, console)
    if opts.report:
        if result.interrupted and not any((path / "rollouts").glob("*.jsonl")):
            console.print("no rollout was recorded before the interrupt: no report")
        else:
            from ormix.diagnostics.report import report_command

            try:
                report_command(path, console)
            except Exception as e:  # noqa: BLE001 - a report failure must not hide a finished run
                console.print(
                    f"[yellow]warning:[/yellow] the report failed ({e}); the run directory is intact"
                )
    if result.stopped_by_alarm:
        console.print(f"[red]stopped by the coverage alarm:[/red] {result.stopped_by_alarm}", highlight=False)
    if not (result.interrupted or result.terminated):
        console.print(f"finished in {result.wall_s:.0f}s; run directory: [bold]{path}[/bold]")
        _never_scored_line(result, console)  # the last line: what a glance at the end must see
        return
    why = "terminated (SIGTERM)" if result.terminated else "interrupted"
    saved = f"; checkpoint {result.checkpoint}" if result.checkpoint else "; no checkpoint was saved"
    console.print(f"[yellow]{why}[/yellow] after {result.wall_s:.0f}s{saved}")
    if result.checkpoint is not None or run.dir.latest_checkpoint() is not None:
        target = mixture if isinstance(mixture, (str, Path)) else "FILE"
        command = opts.resume_command or (
            f"ormix train {shlex.quote(str(target))} --output-dir {shlex.quote(str(path))} --resume"
        )
        console.print(f"resume with: [bold]{command}[/bold]", highlight=False, soft_wrap=True)
    _never_scored_line(result, console)


def _never_scored_line(result: TrainResult, console: Any) -> None:
    """Name the members that never scored (coverage 0 in every logged step): an error when all did (the run
    exits 1), a warning when others scored."""
    unscored = result.never_scored
    if not unscored or not result.log_history:
        return
    every = result.exit_status == 1 and not result.stopped_by_alarm
    label = "[red]error:[/red]" if every else "[yellow]warning:[/yellow]"
    what = "no member was ever scored" if every else "never scored"
    console.print(
        f"{label} {what}: {', '.join(unscored)} (coverage 0 in every logged step: no rollout ended with a "
        "reward; `ormix check FILE` calls its tools, and a warm start on reference solutions, README: Your "
        "own environment, gets a tiny model calling them)",
        highlight=False,
        soft_wrap=True,  # one line, however narrow the terminal: it is the line that names the failure
    )


def _compare_evals(result: TrainResult, console: Any) -> None:
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
    from ormix.integrations.trl.args import check_settings, parse_overrides

    try:
        opts = replace(options or RunOptions(), **option_fields)
        parsed = parse_overrides(overrides)
        settings = check_settings(parsed, "--set ") if parsed else {}  # the check imports TRL: seconds
        opts = replace(opts, settings={**opts.settings, **settings})
        result = train(mixture, opts, console=console, callbacks=callbacks)
    except OrmixError as e:
        console.print(f"[red]error:[/red] {e}", highlight=False)
        return exit_status(e)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/yellow]")
        return EXIT_INTERRUPTED
    except Exception as e:  # noqa: BLE001 - the CLI reports, with the traceback, and exits non-zero
        if debug or os.environ.get("ORMIX_DEBUG"):
            console.print_exception(max_frames=8)
        console.print(f"[red]training failed:[/red] {type(e).__name__}: {e}", highlight=False)
        return 1
    return result.exit_status
