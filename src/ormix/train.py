"""The main job: GRPO on a mixture file, end to end (`ormix train FILE`).

`train_command` is what the console script runs; `train` is the same for Python callers (examples, ablations):

1. load the mixture (validated before any server is contacted; `local:`/`module:` members are served on
   loopback in child processes); check the run directory: a fresh one, or — with ``resume`` — the run it
   holds, whose mixture must not have changed (`ormix.runs`),
2. build the model: ormix's offline tiny model by default, else a hub id or a local path,
3. build `GRPOConfig` from the file's ``train:`` section, then the caller's overrides, then settings that must
   agree with the mixture (data order, kept columns, batch geometry; see `build_grpo_config`),
4. optionally warm the model up with a few steps of supervised fine-tuning on reference solutions
   (`ormix.demo.warmup`, local environments only),
5. write ``manifest.json`` (`MixtureSpec.manifest`) and ``train_args.json`` into the run directory, train
   (`ConcurrentGRPOTrainer`: a batch's sessions and tool rounds in flight at once), printing one line per
   logging step with the per-member reward and coverage and where the step's time went,
6. save the model under ``<run dir>/model`` and print the report.

Sessions are closed and local servers stopped on every exit path (end, SIGTERM, Ctrl-C, error): TRL never
closes its environments. SIGTERM saves a checkpoint at the end of the current step (within a bound) and
stops; Ctrl-C stops at once and saves the last completed step; both print the command that resumes.

Example:
    >>> from ormix.train import train
    >>> # Not run as a doctest: a GRPO training run with a torch model is far too slow for one.
    >>> result = train("mixtures/local-demo.yaml", max_steps=2)       # doctest: +SKIP
    >>> result.run_dir, result.summary["seta"]["reward"]               # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import shlex
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ormix.errors import OrmixError, TrainConfigError, UsageError, exit_status
from ormix.runs import RunDirectory

if TYPE_CHECKING:  # pragma: no cover
    from ormix.config import MixtureConfig

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "TrainConfigError",
    "TrainResult",
    "default_run_dir",
    "load_run_config",
    "parse_overrides",
    "train",
    "train_command",
]

#: Exit status after Ctrl-C (SIGINT), and after SIGTERM (128 + the signal number, as shells report them).
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


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

    @property
    def exit_status(self) -> int:
        """0 finished, 1 stopped by the alarm, 130 interrupted (Ctrl-C), 143 terminated (SIGTERM)."""
        if self.terminated:
            return EXIT_TERMINATED
        if self.interrupted:
            return EXIT_INTERRUPTED
        return 1 if self.stopped_by_alarm else 0


# ── settings ──────────────────────────────────────────────────────────


def _parse_scalar(text: str) -> Any:
    import yaml

    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return value


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``["key=value", ...]`` (the CLI's ``--set``) as a dict; values are read as YAML scalars.

    Example:
        >>> parse_overrides(["max_steps=4", "report_to=none", "learning_rate=1e-5", "bf16=false"])
        {'max_steps': 4, 'report_to': 'none', 'learning_rate': '1e-5', 'bf16': False}
    """
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise TrainConfigError(f"--set {item!r} is not key=value; write e.g. --set learning_rate=1e-5")
        out[key] = _parse_scalar(value.strip())
    return out


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


# ── progress ──────────────────────────────────────────────────────────


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "  -  "
    return f"{value:5.2f}"


def _progress_callback(members: Sequence[str], console: Any, run_dir: Path):
    from transformers import TrainerCallback

    class ProgressLine(TrainerCallback):
        """One compact line per logging step: step, loss, reward, then reward / coverage per member.

        Also appends every log entry to ``<run dir>/log_history.jsonl``.
        """

        def __init__(self) -> None:
            self.started = time.monotonic()
            self.path = run_dir / "log_history.jsonl"

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or not logs:
                return control
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps({"step": state.global_step, **logs}, default=str) + "\n")
            if "train_runtime" in logs:
                return control
            eval_mode = any(k.startswith("eval_") for k in logs)
            prefix = "eval_" if eval_mode else ""
            parts = [f"[bold]{'eval' if eval_mode else 'step'} {state.global_step}/{state.max_steps}[/bold]"]
            if f"{prefix}loss" in logs:
                parts.append(f"loss {logs[f'{prefix}loss']:.4f}")
            if f"{prefix}reward" in logs:
                parts.append(f"reward {_fmt(logs[f'{prefix}reward'])}")
            for m in members:
                reward = logs.get(f"{prefix}rewards/{m}/mean")
                cov = logs.get(f"{prefix}ormix/{m}/coverage")
                text = f"[cyan]{m}[/cyan] r {_fmt(reward)}"
                if f"{prefix}ormix/{m}/coverage" in logs:
                    text += f" cov {_fmt(cov)}"
                parts.append(text)
            calls = logs.get(f"{prefix}tools/call_frequency")
            if calls is not None:
                parts.append(f"tools/rollout {calls:.2f}")
            waits = [logs.get(f"{prefix}ormix/env/{k}_s") for k in ("open", "tools", "generate")]
            if all(isinstance(w, (int, float)) for w in waits):
                parts.append("env open {:.1f}s tools {:.1f}s gen {:.1f}s".format(*waits))
            parts.append(f"{time.monotonic() - self.started:.0f}s")
            console.print(" │ ".join(parts), highlight=False, soft_wrap=True)
            return control

    return ProgressLine()


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


def _print_report(run_dir: Path, result: TrainResult, console: Any) -> None:
    if result.interrupted and not any((run_dir / "rollouts").glob("*.jsonl")):
        console.print("no rollout was recorded before the interrupt: no report")
        return
    report: Callable[[Path, Any], int] | None
    try:
        from ormix.diagnostics.report import report_command as report
    except ImportError:  # the report needs the plot extra (matplotlib)
        report = None
    if report is not None:
        try:
            report(run_dir, console)
            return
        except Exception as e:  # noqa: BLE001 - a report failure must not hide a finished run
            console.print(f"[yellow]warning:[/yellow] the report failed ({e}); the run directory is intact")
    from rich.table import Table

    table = Table(title="per member (mean over logged steps)")
    table.add_column("member")
    table.add_column("reward", justify="right")
    table.add_column("coverage", justify="right")
    for m, row in result.summary.items():
        table.add_row(m, _fmt(row["reward"]).strip(), _fmt(row["coverage"]).strip())
    console.print(table)


# ── the job ───────────────────────────────────────────────────────────


def load_run_config(
    path: str | Path, settings: Mapping[str, Any] | None = None, max_steps: int | None = None
) -> MixtureConfig:
    """The mixture `ormix train` runs from a file: validated (its ``train:`` section too) and sized to the run.

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


def _load(path: str | Path, settings: Mapping[str, Any], max_steps: int | None):
    from ormix.mixture import MixtureSpec

    config = load_run_config(path, settings, max_steps)
    return config, MixtureSpec.from_config(config)


def _prepare_run_dir(
    run: RunDirectory, mix: Any, *, resume: str | Path | None, overwrite: bool, allow_changed: bool
) -> tuple[Path | None, list[str]]:
    """Check the run directory before anything starts: the checkpoint to resume and the config changes."""
    if resume is None:
        if run.holds_a_run():
            if not overwrite:
                raise UsageError(
                    f"{run.path} already holds a run; continue it with --resume, start it over with "
                    "--overwrite, or pick another --output-dir"
                )
            run.clear()
        return None, []
    if not run.holds_a_run():
        raise UsageError(
            f"{run.path} holds no run to resume (no manifest.json); drop --resume to start one there"
        )
    checkpoint = run.resolve_checkpoint(resume)
    changes = run.changes_since(mix.config.manifest_dict())
    if changes and not allow_changed:
        raise UsageError(
            f"the mixture changed since {run.path} was trained, so resuming would not continue the same run:\n  "
            + "\n  ".join(changes)
            + "\nrestore the mixture, or pass --allow-changed-mixture to resume anyway (recorded in the manifest)"
        )
    return checkpoint, changes


def train(
    mixture: Any,
    *,
    model: str | None = None,
    max_steps: int | None = None,
    output_dir: str | Path | None = None,
    warmup_sft: int | None = None,
    warmup_fraction: float | None = None,
    settings: Mapping[str, Any] | None = None,
    console: Any | None = None,
    report: bool = True,
    callbacks: Sequence[Any] = (),
    concurrent: bool = True,
    resume: str | Path | None = None,
    overwrite: bool = False,
    allow_changed_mixture: bool = False,
    on_sigterm: str = "checkpoint",
    sigterm_grace_s: float = 120.0,
    save_on_interrupt: bool = True,
    resume_command: str | None = None,
) -> TrainResult:
    """Train on a mixture (a `MixtureSpec`, or a path to a mixture file) with GRPO; return what it left.

    Args:
        mixture: a `MixtureSpec` (its ``config.train`` section applies) or a path to a mixture file.
        model: hub id or local path; ``None`` (or ``"ormix:tiny"``) = the offline tiny model.
        max_steps: overrides ``train.max_steps``.
        output_dir: run directory; default ``runs/<mixture name>-<timestamp>``.
        warmup_sft: steps of supervised warm start on reference solutions before GRPO (local members only;
            cached, so a second run reuses it); ``None`` = the file's ``warm_start.sft_steps`` (else 0), 0 = none.
        warmup_fraction: warm only this fraction of each member's tasks (GRPO learns the rest); ``None`` = the
            file's ``warm_start.fraction`` (else 1.0).
        settings: GRPOConfig overrides, applied over the file's ``train:`` section.
        console: a `rich.console.Console` for progress (default: a new one).
        report: print the report at the end.
        callbacks: extra `TrainerCallback`s.
        concurrent: open each batch's sessions and run each tool round together (`ConcurrentGRPOTrainer`);
            ``False`` keeps TRL's sequential loop.
        resume: continue the run in ``output_dir`` from ``"latest"`` or a checkpoint directory.
        overwrite: start over in an ``output_dir`` that holds a run (its files are removed).
        allow_changed_mixture: resume although the mixture changed (the changes go into the manifest).
        on_sigterm: ``"checkpoint"`` (save when the current step ends, within ``sigterm_grace_s``, then stop)
            or ``"abandon"`` (stop at once; the last periodic checkpoint remains).
        save_on_interrupt: on Ctrl-C, save the last completed step as a checkpoint.
        resume_command: the command printed to resume a stopped run (default: built from the arguments).

    Raises:
        UsageError (TrainConfigError, MixtureError, ...): bad settings or run directory, found before
        training starts (and before any server is contacted for the run-directory checks).

    Example:
        Not run as a doctest: a GRPO training run with a torch model is far too slow for one.

        >>> from ormix import load_mixture
        >>> result = train(load_mixture("mixtures/local-demo.yaml"), max_steps=2)   # doctest: +SKIP
    """
    from rich.console import Console

    from ormix.mixture import MixtureSpec

    console = console or Console()
    started = time.monotonic()
    settings = dict(settings or {})
    if isinstance(mixture, MixtureSpec):
        mix = mixture
    else:
        _, mix = _load(mixture, settings, max_steps)
    from ormix.integrations.trl.args import build_grpo_config, check_settings

    file_settings = dict(mix.config.train)
    check_settings(file_settings, "train.")  # name a bad key as the file spells it, before merging
    merged = {**file_settings, **settings}
    if max_steps is not None:
        merged["max_steps"] = max_steps
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if output_dir is None and (world_size > 1 or resume is not None):
        why = f"{world_size} processes" if world_size > 1 else "--resume"
        # Each rank would stamp its own time: every process must write into one run directory.
        raise TrainConfigError(f"{why}: pass --output-dir (the run directory)")
    run_dir = Path(output_dir) if output_dir is not None else default_run_dir(mix.name)
    run = RunDirectory(run_dir)
    tiny = model is None or model == _tiny_id()
    args, notes = build_grpo_config(
        mix, merged, output_dir=run_dir, model=None if tiny else model, world_size=world_size
    )
    # Checked before any server is contacted or any file is written.
    _check_plan_length(mix.config, args.max_steps)
    warm = mix.config.warm_start  # the file's warm start, unless the arguments say otherwise
    if warmup_sft is None:
        warmup_sft = warm.sft_steps if warm is not None else 0
    if warmup_fraction is None:
        warmup_fraction = warm.fraction if warm is not None else 1.0
    if warmup_sft < 0 or not 0.0 < warmup_fraction <= 1.0:
        raise TrainConfigError(
            f"--warmup-sft is >= 0 and --warmup-fraction in (0, 1]; got {warmup_sft} and {warmup_fraction}"
        )
    checkpoint, changes = (
        _prepare_run_dir(run, mix, resume=resume, overwrite=overwrite, allow_changed=allow_changed_mixture)
        if rank == 0 or resume is not None
        else (None, [])
    )
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    members = list(mix.members)
    result = TrainResult(run_dir=run_dir, resumed_from=checkpoint)
    created = not run_dir.exists()
    try:
        model_path = _resolve_model(model)
        console.print(
            f"[bold]ormix train[/bold] {mix.name}: members {', '.join(members)} "
            f"({mix.routing} routing), model {'ormix:tiny' if tiny else model}"
        )
        console.print(f"run directory: {run_dir}")
        for note in notes:
            console.print(f"  set {note}")
        # Contacts the servers: task lists, tool surfaces; the manifest pins exactly what this run trains on.
        manifest = mix.manifest()
        if checkpoint is not None:
            manifest = _resumed_manifest(run, manifest, checkpoint, changes, allow_changed_mixture)
            step = RunDirectory.step_of(checkpoint)
            if rank == 0:
                run.cut_back(step)
            console.print(f"  resuming from {checkpoint} (step {step})")
        run_dir.mkdir(parents=True, exist_ok=True)
        if rank == 0:
            (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str) + "\n")
            (run_dir / "train_args.json").write_text(args.to_json_string())
        steps = args.max_steps if args.max_steps > 0 else "epochs"
        console.print(
            f"  {len(mix.train_dataset)} training rows, {mix.prompts_per_step or '?'} prompts/step × "
            f"{args.num_generations} generations, max_steps {steps}, device "
            f"{'cpu' if args.use_cpu else 'gpu'}{', vLLM' if args.use_vllm else ''}"
        )
        trainer_model: Any = model_path
        processing_class = None
        if warmup_sft > 0 and checkpoint is None:
            from ormix.demo.warmup import warmup_sft as run_warmup

            trainer_model, processing_class = run_warmup(
                mix,
                model_path,
                steps=warmup_sft,
                console=console,
                seed=args.seed,
                use_cpu=bool(args.use_cpu),
                max_completion_length=args.max_completion_length,
                fraction=warmup_fraction,
                near_misses=warm.near_misses if warm is not None else False,
            )
        _run_trainer(
            mix,
            args,
            trainer_model,
            processing_class,
            console,
            run,
            list(callbacks),
            result,
            concurrent=concurrent,
            checkpoint=checkpoint,
            on_sigterm=on_sigterm,
            sigterm_grace_s=sigterm_grace_s,
            save_on_interrupt=save_on_interrupt,
        )
    except BaseException:
        if created and not any(run_dir.glob("*")):
            run_dir.rmdir()  # a run that failed before writing anything leaves no empty directory
        raise
    finally:
        # Closing the connections also closes sessions no episode tracks any more (keepalive pings would
        # otherwise hold them open on a remote server until its reaper runs).
        mix.close()
        result.wall_s = time.monotonic() - started
    result.summary = _summarise(result.log_history, members)
    if report:
        _print_report(run_dir, result, console)
    if result.stopped_by_alarm:
        console.print(f"[red]stopped by the coverage alarm:[/red] {result.stopped_by_alarm}", highlight=False)
    if result.interrupted or result.terminated:
        why = "terminated (SIGTERM)" if result.terminated else "interrupted"
        saved = f"; checkpoint {result.checkpoint}" if result.checkpoint else "; no checkpoint was saved"
        console.print(f"[yellow]{why}[/yellow] after {result.wall_s:.0f}s{saved}")
        if result.checkpoint is not None or run.latest_checkpoint() is not None:
            command = resume_command or _resume_command(mixture, run_dir)
            console.print(f"resume with: [bold]{command}[/bold]", highlight=False, soft_wrap=True)
    else:
        console.print(f"finished in {result.wall_s:.0f}s; run directory: [bold]{run_dir}[/bold]")
    return result


def _check_plan_length(config: Any, max_steps: int) -> None:
    k, rows = config.prompts_per_step, config.num_samples
    if rows is None and config.num_steps is not None and k:
        rows = config.num_steps * k
    if k and rows and max_steps > 0 and rows // k < max_steps:
        raise TrainConfigError(
            f"the mixture plans {rows} rows = {rows // k} steps of {k} prompts, but max_steps={max_steps}: the run "
            f"would replay the plan from its first step (a schedule from phase 1); set num_samples >= "
            f"{max_steps * k} (or num_steps) in the mixture, or lower max_steps"
        )


def _tiny_id() -> str:
    from ormix.demo.tiny import TINY_MODEL

    return TINY_MODEL


def _resolve_model(model: str | None) -> str:
    from ormix.demo.tiny import resolve_model

    return resolve_model(model)


def _resume_command(mixture: Any, run_dir: Path) -> str:
    target = mixture if isinstance(mixture, (str, Path)) else "FILE"
    return f"ormix train {shlex.quote(str(target))} --output-dir {shlex.quote(str(run_dir))} --resume"


def _resumed_manifest(
    run: RunDirectory, manifest: dict[str, Any], checkpoint: Path, changes: list[str], allowed: bool
) -> dict[str, Any]:
    stored = run.read_manifest() or {}
    if not allowed and stored.get("resolved_hash") not in (None, manifest["resolved_hash"]):
        raise UsageError(
            f"the servers answered differently than when {run.path} was trained (task lists, tools or the plan "
            "changed), so resuming would not continue the same run; pass --allow-changed-mixture to resume anyway"
        )
    resumes = list(stored.get("resumes", []))
    resumes.append(
        {
            "from": str(checkpoint),
            "step": RunDirectory.step_of(checkpoint),
            "time": datetime.now().isoformat(timespec="seconds"),
            "changed": changes,
            "allowed_changes": bool(allowed and changes),
        }
    )
    return {**manifest, "resumes": resumes}


def _run_trainer(
    mix: Any,
    args: Any,
    model: Any,
    processing_class: Any,
    console: Any,
    run: RunDirectory,
    callbacks: list[Any],
    result: TrainResult,
    *,
    concurrent: bool,
    checkpoint: Path | None,
    on_sigterm: str,
    sigterm_grace_s: float,
    save_on_interrupt: bool,
) -> None:
    from transformers import PrinterCallback, ProgressCallback

    from ormix.integrations.trl.callbacks import TelemetryCallback
    from ormix.integrations.trl.lifecycle import RunLifecycle, handle_termination
    from ormix.integrations.trl.trainer import ConcurrentGRPOTrainer

    eval_dataset = None
    if args.eval_strategy != "no" and mix.eval_dataset:  # look at eval tasks only when evaluating
        eval_dataset = mix.eval_dataset
    with handle_termination(on_sigterm, sigterm_grace_s) as stop:  # type: ignore[arg-type]
        trainer = ConcurrentGRPOTrainer(
            concurrent=concurrent,
            model=model,
            args=args,
            processing_class=processing_class,
            train_dataset=mix.train_dataset,
            eval_dataset=eval_dataset,
            environment_factory=mix.environment_factory,
            reward_funcs=mix.reward_funcs,
            callbacks=[
                *mix.callbacks,
                RunLifecycle(run.path, stop),
                _progress_callback(list(mix.members), console, run.path),
                *callbacks,
            ],
        )
        # Our one line per step replaces transformers' printed log dicts.
        trainer.remove_callback(PrinterCallback)
        if args.disable_tqdm:
            trainer.remove_callback(ProgressCallback)
        try:
            with _quiet_trainer():
                trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint is not None else None)
        except KeyboardInterrupt:
            if stop.requested:
                result.terminated = True  # a second SIGTERM, the grace bound, or the abandon policy
            else:
                result.interrupted = True
                if save_on_interrupt and trainer.state.global_step > 0:
                    result.checkpoint = _save_checkpoint(trainer, run)
            console.print(
                "[yellow]stopping[/yellow]: closing sessions; the run directory keeps what was logged"
            )
        finally:
            # Now, while the trainer still holds its environments: the episodes are tracked weakly, so once the
            # trainer is dropped their open sessions can no longer be found (and keepalive pings hold them open).
            mix.close_sessions()
        result.log_history = list(trainer.state.log_history)
        if stop.requested and not result.terminated:
            result.terminated = True
            saved = run.path / f"checkpoint-{trainer.state.global_step}"
            result.checkpoint = saved if saved.is_dir() else None
        alarm = next(
            (c.stopped_by for c in trainer.callback_handler.callbacks if isinstance(c, TelemetryCallback)),
            None,
        )
        result.stopped_by_alarm = alarm.message if alarm is not None else None
        if not (result.interrupted or result.terminated):
            with _quiet_trainer():
                trainer.save_model(str(run.path / "model"))


def _save_checkpoint(trainer: Any, run: RunDirectory) -> Path | None:
    """Save the last completed step as a resumable checkpoint after Ctrl-C (model, optimizer, trainer state)."""
    path = run.path / f"checkpoint-{trainer.state.global_step}"
    if (path / "trainer_state.json").exists():
        return path
    try:
        # transformers' own checkpoint writer (the one its save_steps use), so --resume reads it back.
        trainer._save_checkpoint(trainer.model, trial=None)
    except Exception as e:  # noqa: BLE001 - an interrupted run must still close everything
        logging.getLogger(__name__).warning("ormix: could not save a checkpoint after the interrupt: %s", e)
        return None
    return path if path.is_dir() else None


@contextlib.contextmanager
def _quiet_trainer():
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            # transformers deprecation notices triggered inside TRL (gradient_checkpointing_* renames)
            warnings.filterwarnings("ignore", category=FutureWarning, module=r"transformers\..*")
            yield
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def train_command(
    path: Path | Any,
    *,
    model: str | None,
    max_steps: int | None,
    output_dir: Path | None,
    warmup_sft: int | None,
    overrides: list[str],
    console: Any,
    callbacks: Sequence[Any] = (),
    **options: Any,
) -> int:
    """`ormix train FILE`: returns the exit status (0 done, 1 failed or stopped by the coverage alarm, 2 bad
    input, 130 interrupted, 143 terminated by SIGTERM).

    `path` is a mixture file or a `MixtureSpec` (as for `train`); `callbacks` are extra `TrainerCallback`s;
    `options` are `train`'s (``resume``, ``overwrite``, ``concurrent``, ...). Sessions are closed and the run
    directory keeps what was logged on every exit path.

    Example:
        Not run as a doctest: a GRPO training run with a torch model is far too slow for one.

        >>> from rich.console import Console
        >>> train_command(Path("mixtures/local-demo.yaml"), model=None, max_steps=2, output_dir=None,
        ...               warmup_sft=0, overrides=[], console=Console())   # doctest: +SKIP
        0
    """
    debug = bool(options.pop("debug", False))
    try:
        from ormix.integrations.trl.args import check_settings

        settings = parse_overrides(overrides)
        check_settings(settings, "--set ")
        result = train(
            path,
            model=model,
            max_steps=max_steps,
            output_dir=output_dir,
            warmup_sft=warmup_sft,
            settings=settings,
            console=console,
            callbacks=callbacks,
            **options,
        )
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
