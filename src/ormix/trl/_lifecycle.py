"""A run's lifecycle: progress marks and lines, stopping cleanly when the cluster asks (SIGTERM), and the
checkpoint a Ctrl-C leaves.

Schedulers preempt with SIGTERM, then SIGKILL after a grace period. `handle_termination` turns the first
SIGTERM into a `StopRequest`: with the default policy ``checkpoint``, `RunLifecycle` asks the trainer to save
a checkpoint when the current step ends and to stop; if the step does not end within the grace bound, or on
a second SIGTERM (or Ctrl-C), the main thread is interrupted at once. With ``abandon`` the first SIGTERM
interrupts at once. Either way the caller's cleanup (closing sessions, stopping servers) still runs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from ormix._choices import TerminationPolicy
from ormix._runs import RunDirectory, checkpoint_path

logger = logging.getLogger(__name__)


@dataclass
class StopRequest:
    """Set by a signal handler, read by `RunLifecycle` at the end of each step.

    ``forced`` means the main thread was interrupted (a second signal, or the grace bound ran out).
    """

    requested: bool = False
    signal_name: str | None = None
    forced: bool = False
    saved_step: int | None = None
    _timer: threading.Timer | None = field(default=None, repr=False)
    _disarm: Callable[[], None] | None = field(default=None, repr=False)

    def disarm(self) -> None:
        """Training has returned or raised: the grace bound no longer interrupts anything (the cleanup
        after it closes sessions). A second signal still stops at once."""
        if self._disarm is not None:
            self._disarm()


class RunLifecycle(TrainerCallback):
    """Marks each completed step in the run directory and honours a `StopRequest` at the step's end."""

    def __init__(self, run_dir: str | Path | None, stop: StopRequest | None = None) -> None:
        self.run = RunDirectory(run_dir) if run_dir is not None else None
        self.stop = stop or StopRequest()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self.run is not None and state.is_world_process_zero:
            self.run.write_progress(state.global_step)
        if self.stop.requested and not self.stop.forced:
            control.should_save = True
            control.should_training_stop = True
            self.stop.saved_step = state.global_step
        return control


@contextlib.contextmanager
def handle_termination(
    policy: TerminationPolicy = "checkpoint", grace_s: float = 120.0
) -> Iterator[StopRequest]:
    """Within the block, SIGTERM stops training cleanly (see the module docstring); yields the request.

    Only the main thread can install signal handlers: elsewhere this yields a request nothing sets.
    """
    stop = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    main = threading.main_thread().ident
    active = threading.Lock()  # guards `in_force`: no signal is sent once the handler is removed
    in_force = True

    def interrupt() -> None:
        # A real signal, not `_thread.interrupt_main()`: that only sets a flag, which a main thread blocked
        # on a lock or in I/O (a step stuck in a tool call) reads when the call returns, after the
        # scheduler's SIGKILL. The signal wakes it; `on_term`, in force for the block, raises there.
        with active:
            if in_force and main is not None:
                stop.forced = True
                signal.pthread_kill(main, signal.SIGTERM)

    def on_term(signum: int, frame: Any) -> None:
        if stop.requested or policy == "abandon":
            stop.requested, stop.forced, stop.signal_name = True, True, "SIGTERM"
            raise KeyboardInterrupt("SIGTERM")
        stop.requested, stop.signal_name = True, "SIGTERM"
        logger.warning(
            "ormix: SIGTERM: saving a checkpoint when the current step ends (at most %.0f s), then stopping; "
            "a second SIGTERM or Ctrl-C stops at once",
            grace_s,
        )
        stop._timer = threading.Timer(grace_s, interrupt)
        stop._timer.daemon = True
        stop._timer.start()

    def disarm() -> None:
        nonlocal in_force
        with active:
            in_force = False
        if stop._timer is not None:
            stop._timer.cancel()

    stop._disarm = disarm
    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield stop
    finally:
        try:
            disarm()
        finally:
            # Restored even when a forced stop sent just before lands here and raises.
            signal.signal(signal.SIGTERM, previous)


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "  -  "
    return f"{value:5.2f}"


def member_reward(logs: Mapping[str, Any], member: str) -> Any:
    """The reward a progress line shows for ``member``: ormix's ``ormix/<member>/reward`` (the environment's
    reward over the step's scored rollouts), which the sync and the async trainer both log from the same
    records; ``None`` when none was scored. Only an entry without ormix's metrics for the member (a trainer
    built without ormix's callbacks) falls back to TRL's ``rewards/<member>/mean``.

    Example:
        >>> member_reward({"ormix/echo/reward": 0.143, "ormix/echo/coverage": 0.5}, "echo")
        0.143
        >>> member_reward({"ormix/echo/coverage": 0.0, "rewards/echo/mean": 0.0}, "echo") is None
        True
        >>> member_reward({"rewards/echo/mean": 0.25}, "echo")
        0.25
    """
    if f"ormix/{member}/coverage" in logs:
        return logs.get(f"ormix/{member}/reward")
    return logs.get(f"rewards/{member}/mean")


class ProgressLine(TrainerCallback):
    """One compact line per logging step (step, loss, reward, then reward / coverage per member, tool calls
    and where the step's time went), and every log entry appended to ``<run dir>/log_history.jsonl``. The
    sync and the async trainer's lines read the same per-member metrics (`member_reward`, ``ormix/<member>/
    coverage``); a member that scores groups also shows its group score and the share of its groups whose
    scoring failed.

    An evaluation's entry is labelled ``eval @ step N`` and lists only the members with an eval set (of
    ``eval_members``) that it evaluated: pass@1 (and pass@k, pass^k) and coverage from
    ``eval/<member>/...``, else the trainer's eval reward.

    The library does not print: each line (rich markup) goes to ``show``, which the caller supplies (``ormix
    train`` prints it on its console); ``None`` only writes the log file.

    Example:
        >>> from types import SimpleNamespace
        >>> line = ProgressLine(["a", "b"], None, ".", eval_members=["b"])
        >>> state = SimpleNamespace(global_step=3, max_steps=4)
        >>> line.parts(state, {"eval_b_loss": 0.0, "eval/b/pass@1": 0.5, "eval/b/pass@2": 1.0,
        ...                    "eval/b/coverage": 1.0, "eval_rewards/a/mean": None})[:2]
        ['[bold]eval @ step 3[/bold]', '[cyan]b[/cyan] pass@1 0.50 pass@2 1.00 cov 1.00']
    """

    def __init__(
        self,
        members: Sequence[str],
        show: Callable[[str], None] | None,
        run_dir: str | Path,
        *,
        eval_members: Sequence[str] | None = None,
    ) -> None:
        self.members, self.show = list(members), show
        self.eval_members = list(members if eval_members is None else eval_members)
        self.started = time.monotonic()
        self.path = Path(run_dir) / "log_history.jsonl"

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any
    ) -> Any:
        if not state.is_world_process_zero or not logs:
            return control
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"step": state.global_step, **logs}, default=str) + "\n")
        if "train_runtime" not in logs and self.show is not None:
            self.show(" │ ".join(self.parts(state, logs)))
        return control

    def parts(self, state: Any, logs: dict[str, Any]) -> list[str]:
        if any(k.startswith(("eval_", "eval/")) for k in logs):
            return self.eval_parts(state, logs)
        parts = [f"[bold]step {state.global_step}/{state.max_steps}[/bold]"]
        if "loss" in logs:
            parts.append(f"loss {logs['loss']:.4f}")
        if "reward" in logs:
            parts.append(f"reward {_fmt(logs['reward'])}")
        for m in self.members:
            text = f"[cyan]{m}[/cyan] r {_fmt(member_reward(logs, m))}"
            if f"ormix/{m}/coverage" in logs:
                text += f" cov {_fmt(logs[f'ormix/{m}/coverage'])}"
            group = logs.get(f"ormix/{m}/group_reward")
            if isinstance(group, (int, float)):
                # The environment's group score (group_scoring), and the reward GRPO saw with it.
                text += f" group {_fmt(group)} combined {_fmt(logs.get(f'ormix/{m}/combined_reward'))}"
            failed = logs.get(f"ormix/{m}/group_score_failed")
            if isinstance(failed, (int, float)) and failed > 0:
                text += f" group scoring failed {failed:.0%}"  # its pointwise rewards were kept
            starting = logs.get(f"ormix/{m}/backend_starting_ms")
            if isinstance(starting, (int, float)) and starting >= 100:
                text += f" backend starting {starting / 1000:.1f}s"  # mean wait per open
            cut = logs.get(f"ormix/{m}/straggler_rate")
            if isinstance(cut, (int, float)) and cut > 0:
                text += f" cut {cut:.0%}"  # rollouts abandoned as stragglers
            parts.append(text)
        calls = logs.get("tools/call_frequency")
        if calls is not None:
            parts.append(f"tools/rollout {calls:.2f}")
        waits: list[Any] = [logs.get(f"ormix/env/{k}_s") for k in ("open", "tools", "generate")]
        if all(isinstance(w, (int, float)) for w in waits):
            parts.append("env open {:.1f}s tools {:.1f}s gen {:.1f}s".format(*waits))
        ahead, ahead_wait = logs.get("ormix/env/opened_ahead"), logs.get("ormix/env/ahead_wait_s")
        if isinstance(ahead, (int, float)) and ahead > 0 and isinstance(ahead_wait, (int, float)):
            text = f"{ahead:.0f} opened ahead"
            if ahead_wait >= 0.1:
                # The opens take longer than a step: how far ahead they start is what bounds the wait now.
                text += f", waited {ahead_wait:.1f}s: opens slower than a step, lookahead bounds the wait"
            parts.append(text)
        parts.append(f"{time.monotonic() - self.started:.0f}s")
        return parts

    def eval_parts(self, state: Any, logs: dict[str, Any]) -> list[str]:
        """An evaluation's line: the members it evaluated, with their eval metrics."""
        parts = [f"[bold]eval @ step {state.global_step}[/bold]"]
        scored = [m for m in self.eval_members if any(k.startswith(f"eval/{m}/") for k in logs)]
        for m in scored:
            passes = sorted(
                (k.rsplit("/", 1)[-1] for k in logs if k.startswith(f"eval/{m}/pass")),
                key=lambda name: (name[4], int(name[5:]) if name[5:].isdigit() else 0),
            )
            text = f"[cyan]{m}[/cyan] " + " ".join(f"{p}{_fmt(logs[f'eval/{m}/{p}'])}" for p in passes)
            if f"eval/{m}/coverage" in logs:
                text += f" cov{_fmt(logs[f'eval/{m}/coverage'])}"
            parts.append(text.rstrip())
        if not scored:  # no per-member eval metrics (ormix's callbacks absent): the trainer's eval rewards
            for m in self.eval_members:
                reward = logs.get(f"eval_rewards/{m}/mean")
                if reward is not None:
                    text = f"[cyan]{m}[/cyan] r {_fmt(reward)}"
                    if logs.get(f"eval_ormix/{m}/coverage") is not None:
                        text += f" cov {_fmt(logs[f'eval_ormix/{m}/coverage'])}"
                    parts.append(text)
        parts.append(f"{time.monotonic() - self.started:.0f}s")
        return parts


def save_checkpoint(trainer: Any) -> Path | None:
    """Save the last completed step as a checkpoint ``--resume`` reads back, after Ctrl-C stopped the
    trainer mid-step: the model, the optimizer and scheduler (not under DeepSpeed or FSDP, whose optimizer
    state is sharded: resuming then starts a fresh optimizer), what the callbacks save beside a checkpoint
    (ormix's alarm counters and planner state, as at a periodic save), and the trainer state, written last so
    a checkpoint cut short is not taken for a complete one. ``None`` when nothing could be saved.
    """
    import torch
    from transformers.trainer import OPTIMIZER_NAME, SCHEDULER_NAME, TRAINER_STATE_NAME

    path = checkpoint_path(trainer.args.output_dir, trainer.state.global_step)
    if (path / TRAINER_STATE_NAME).exists():
        return path
    try:
        # The trainer logs a step after the step's callbacks: Ctrl-C between the two leaves a finished step
        # that the checkpoint holds but no log entry shows (a resume starts after it). Its metrics are the
        # trainer's pending ones; the loss, kept inside transformers' loop, is not among them.
        logged = max((entry.get("step", 0) for entry in trainer.state.log_history), default=0)
        if trainer.state.global_step > logged:
            trainer.log({})
        trainer.save_model(str(path))
        if trainer.args.should_save:
            if not (
                getattr(trainer, "is_deepspeed_enabled", False) or getattr(trainer, "is_fsdp_enabled", False)
            ):
                torch.save(trainer.optimizer.state_dict(), path / OPTIMIZER_NAME)
                if trainer.lr_scheduler is not None:
                    torch.save(trainer.lr_scheduler.state_dict(), path / SCHEDULER_NAME)
        trainer.control = trainer.callback_handler.on_save(trainer.args, trainer.state, trainer.control)
        if trainer.args.should_save:
            trainer.state.save_to_json(str(path / TRAINER_STATE_NAME))
    except Exception as e:  # noqa: BLE001 - an interrupted run must still close everything
        logger.warning("ormix: could not save a checkpoint after the interrupt: %s", e)
        return None
    return path if path.is_dir() else None


@contextlib.contextmanager
def quiet_trainer(model: Any = None) -> Iterator[None]:
    """Within the block, no transformers progress bars ("Loading weights", "Writing model shards"), no
    deprecation notices TRL triggers inside transformers (ormix prints its own line per step) and, with the
    trainer's ``model``, no "missing keys" notice on resume for keys that are only tied weights
    (`TiedKeysFilter`)."""
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    trainer_log = logging.getLogger("transformers.trainer")
    tied = TiedKeysFilter(model) if model is not None else None
    if tied is not None:
        trainer_log.addFilter(tied)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning, module=r"transformers\..*")
            yield
    finally:
        if tied is not None:
            trainer_log.removeFilter(tied)
        if bars:
            hf_logging.enable_progress_bar()


_MISSING_KEYS = "There were missing keys in the checkpoint model loaded: "


class TiedKeysFilter(logging.Filter):
    """Drops transformers' "missing keys in the checkpoint" warning when every missing key is a tied
    weight of ``model`` (the same parameter as another one: a tied ``lm_head.weight`` is not saved, so every
    resume would report it missing although nothing is); any other missing key is still reported."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if not text.startswith(_MISSING_KEYS):
            return True
        import ast

        try:
            keys = ast.literal_eval(text[len(_MISSING_KEYS) :].rstrip(". "))
        except (ValueError, SyntaxError):
            return True
        return not (isinstance(keys, list) and keys and all(self._tied(str(k)) for k in keys))

    def _tied(self, key: str) -> bool:
        params = dict(self.model.named_parameters(remove_duplicate=False))
        mine = params.get(key)
        return mine is not None and any(p is mine for name, p in params.items() if name != key)
