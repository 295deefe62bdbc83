"""Trainer callbacks: per-environment telemetry, session cleanup, and checks of the trainer's configuration.

Imported only when a trainer is built (it imports transformers).

Example:
    >>> from ormix import OpenRewardSpec
    >>> spec = OpenRewardSpec("local:echo")
    >>> [type(cb).__name__ for cb in spec.callbacks]
    ['TelemetryCallback', 'SessionCleanupCallback']
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from ormix._errors import TrainConfigError
from ormix._runs import TELEMETRY_STATE, checkpoint_path
from ormix.config import TelemetryConfig
from ormix.config._trainer_rules import (
    columns_problem,
    generation_problem,
    group_scoring_problem,
    plan_length_problem,
    shuffle_problem,
)
from ormix.telemetry._alarm import (
    Alarm,
    AlarmTracker,
    CoverageAlarmWarning,
    LearningTracker,
    NoLearningAlarm,
    NoLearningWarning,
    UnscoredRolloutsWarning,
    unchanged_weights_alarm,
    unscored_notice,
)
from ormix.telemetry._metrics import metric_key, pooled_informative
from ormix.telemetry._records import TelemetryObserver, TelemetryRun

logger = logging.getLogger("ormix.telemetry")

#: ormix's telemetry state saved in each checkpoint directory.
STATE_FILE = TELEMETRY_STATE


def _state_file(args: Any, state: Any, name: str) -> Path | None:
    """Where a callback keeps its state beside the trainer's checkpoint of this step (None: no run dir)."""
    output_dir = getattr(args, "output_dir", None)
    return checkpoint_path(output_dir, state.global_step) / name if output_dir else None


class SessionCleanupCallback(TrainerCallback):
    """Closes every ORS session still open when training ends (TRL never closes its environments)."""

    def __init__(self, specs: Iterable[Any]) -> None:
        self.specs = list(specs)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        for spec in self.specs:
            spec.close_sessions()
        return control


def _prompts_per_step_of(args: Any, world_size: int | None = None) -> int | None:
    """Unique prompts per optimizer step for a `GRPOConfig` (per-device batch × processes × accumulation / G).

    Example:
        >>> from types import SimpleNamespace
        >>> _prompts_per_step_of(SimpleNamespace(num_generations=4, per_device_train_batch_size=8,
        ...                                     gradient_accumulation_steps=2), world_size=1)
        4
    """
    if world_size is None:
        world_size = getattr(args, "world_size", 1) or 1
    num_generations = getattr(args, "num_generations", None)
    per_device = getattr(args, "per_device_train_batch_size", None)
    if not num_generations or not per_device:
        return None
    total = per_device * world_size * (getattr(args, "gradient_accumulation_steps", 1) or 1)
    return total // num_generations if total % num_generations == 0 else None


def check_trainer_args(mixture: Any, args: Any, world_size: int | None = None) -> list[str]:
    """Problems between a mixture and a trainer configuration, each naming the setting to change.

    Example:
        >>> from types import SimpleNamespace
        >>> mix = SimpleNamespace(order_matters=True, prompts_per_step=None)
        >>> print(check_trainer_args(mix, SimpleNamespace(shuffle_dataset=True))[0][:39])
        shuffle_dataset=True would shuffle away
    """
    wanted = getattr(mixture, "prompts_per_step", None)
    actual = _prompts_per_step_of(args, world_size) if wanted else None
    problems = [
        # A configuration without the setting (TRL's AsyncGRPOConfig) reads the dataset in order.
        shuffle_problem(mixture.order_matters, getattr(args, "shuffle_dataset", False)),
        generation_problem(mixture.order_matters, args),
        columns_problem(getattr(args, "remove_unused_columns", False)),
        plan_length_problem(
            getattr(args, "max_steps", None),
            wanted,
            num_samples=(getattr(mixture, "num_rows", None) or len(mixture.plan)) if wanted else None,
        ),
        None
        if actual in (None, wanted)
        else f"the mixture plans prompts_per_step={wanted} but the trainer takes {actual} unique prompts per "
        "step (per_device_train_batch_size × processes × gradient_accumulation_steps / num_generations): "
        "make them equal, or the per-step composition will not hold",
        group_scoring_problem(mixture, args, world_size or getattr(args, "world_size", 1) or 1),
    ]
    return [p for p in problems if p]


def check_eval_args(args: Any) -> list[str]:
    """Problems between a trainer configuration and evaluating (or predicting on) a mixture's rows.

    Only what evaluation uses: every row keeps its ``environment`` and ``task_index`` columns. The training
    rules (shuffling, the plan's length, the per-step geometry) do not apply, since evaluation reads its own
    dataset in no planned order and takes no optimizer step.

    Example:
        >>> from types import SimpleNamespace
        >>> check_eval_args(SimpleNamespace(remove_unused_columns=False, shuffle_dataset=True))
        []
        >>> print(check_eval_args(SimpleNamespace(remove_unused_columns=True))[0][:30])
        remove_unused_columns=True str
    """
    problem = columns_problem(getattr(args, "remove_unused_columns", False))
    return [problem] if problem else []


class MixtureConfigCheck(TrainerCallback):
    """Checks a trainer's settings against the mixture: those evaluation needs when the trainer is built (so
    `trainer.evaluate()` and `predict()` are checked too), all of training's before its first step."""

    def __init__(self, mixture: Any) -> None:
        self.mixture = mixture

    def on_init_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        _refuse("run", check_eval_args(args))
        return control

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        _refuse("train", check_trainer_args(self.mixture, args))
        return control


def _refuse(doing: str, problems: list[str]) -> None:
    if problems:
        raise TrainConfigError(
            f"ormix cannot {doing} this mixture with these settings:\n- " + "\n- ".join(problems)
        )


def eval_metrics(records: Sequence[Mapping[str, Any]], num_generations_eval: int | None) -> dict[str, float]:
    """One evaluation's per-member figures as log entries, from its rollout records
    (`ormix.evaluation._summary.summarize`): ``eval/<member>/pass@1``, and with ``k = num_generations_eval``
    samples per task above 1 ``pass@k`` and ``pass^k``, then ``mean_reward``, ``coverage``, ``error_rate``
    and ``tasks`` (a figure without a value is left out).

    Example:
        >>> rollout = {"member": "echo", "task_index": 0, "mode": "eval", "outcome": "scored"}
        >>> records = [{**rollout, "env_reward": 1.0}, {**rollout, "env_reward": 0.0}]
        >>> values = eval_metrics(records, 2)
        >>> values["eval/echo/pass@1"], values["eval/echo/pass@2"], values["eval/echo/pass^2"]
        (0.5, 1.0, 0.0)
    """
    from ormix.evaluation._summary import summarize

    k = int(num_generations_eval or 1)
    ks = (1, k) if k > 1 else (1,)
    names = [f"pass@{n}" for n in ks] + ([f"pass^{k}"] if k > 1 else [])
    names += ["mean_reward", "coverage", "error_rate"]
    out: dict[str, float] = {}
    for member, figures in summarize(records, ks)["members"].items():
        for name in names:
            value = (figures.get(name) or {}).get("value")
            if value is not None:
                out[f"eval/{member}/{name}"] = float(value)
        out[f"eval/{member}/tasks"] = float(figures.get("tasks", 0))
    return out


def every_rank(value: Any) -> list[Any]:
    """Every process's ``value``, in rank order, on every process (`torch.distributed`'s
    ``all_gather_object`` when it runs several processes); ``[value]`` otherwise.

    Example:
        >>> every_rank({"groups": 2})
        [{'groups': 2}]
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return [value]
    parts: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(parts, value)
    return parts


def all_ranks_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every process's records, in rank order (each process holds its share of an evaluation's rollouts).

    Example:
        >>> all_ranks_records([{"seq": 0}])
        [{'seq': 0}]
    """
    return [r for part in every_rank(records) for r in part or []]


def _is_eval_entry(logs: Mapping[str, Any]) -> bool:
    return any(k.startswith("eval_") for k in logs)


class _GroupsRun(TelemetryRun):
    """A `TelemetryRun` that also keeps each training rollout's ``(member, step, group, reward)`` until the
    next training log entry takes them (`take_groups`): a GRPO group split over processes can only be judged
    on the rewards of all its parts (`pooled_informative`).

    Example:
        >>> run = _GroupsRun(None)
        >>> run.note("a", [{"mode": "train", "outcome": "scored", "step": 1, "group": 0, "reward": 1.0}])
        >>> run.take_groups(), run.take_groups()
        ([('a', 1, 0, 1.0)], [])
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._groups: list[tuple[str, Any, Any, float | None]] = []
        self._groups_lock = threading.Lock()

    def note(self, member: str, records: Sequence[Mapping[str, Any]]) -> None:
        super().note(member, records)
        kept = [
            (member, r.get("step"), r.get("group"), r.get("reward"))
            for r in records
            if r.get("mode") == "train"
        ]
        with self._groups_lock:
            self._groups.extend(kept)

    def take_groups(self) -> list[tuple[str, Any, Any, float | None]]:
        """The training rollouts' ``(member, step, group, reward)`` noted since the last call (forgotten)."""
        with self._groups_lock:
            taken, self._groups = self._groups, []
        return taken


def weight_fingerprint(model: Any) -> list[list[float]] | None:
    """Per parameter tensor of ``model``: the sum and the sum of squares of its values, in float64 (what the
    no-learning alarm compares between the start and the end of training; equal fingerprints mean unchanged
    weights, bar a coincidence no update makes). ``None`` when the parameters are not all here (DeepSpeed
    ZeRO-3 keeps empty placeholders on each process) or there are none.

    Example:
        >>> import torch
        >>> layer = torch.nn.Linear(2, 1)
        >>> with torch.no_grad():
        ...     _ = layer.weight.fill_(2.0), layer.bias.fill_(-1.0)
        >>> weight_fingerprint(layer)
        [[4.0, 8.0], [-1.0, 1.0]]
    """
    import torch

    params = list(model.parameters()) if model is not None else []
    if not params or any(p.numel() == 0 or hasattr(p, "ds_id") for p in params):
        return None

    def sums(p: Any) -> Any:
        local = p.to_local() if callable(getattr(p, "to_local", None)) else p  # a sharded (FSDP2) tensor
        total = torch.zeros(2, dtype=torch.float64, device=local.device)
        # In float64 chunks: a large embedding is never copied whole (a 600M-value one would take 4.8 GB).
        for chunk in local.detach().reshape(-1).split(1 << 24):
            values = chunk.double()
            total += torch.stack([values.sum(), (values * values).sum()])
        return total

    with torch.no_grad():
        return [[float(a), float(b)] for a, b in torch.stack([sums(p) for p in params]).cpu().tolist()]


class _UnscoredNoticeFilter(logging.Filter):
    """Drops TRL's "All reward functions returned None" warning, counting what it dropped.

    TRL logs it, with the whole prompt and completion, for every rollout no reward function scored. With a
    mixture that is a member's `unscored` or error outcome, which ormix counts per member (coverage) and the
    alarm watches, so the dump floods the console with what is already measured.

    Example:
        >>> notice = _UnscoredNoticeFilter()
        >>> message = "All reward functions returned None."
        >>> record = logging.LogRecord("trl", logging.WARNING, "", 0, message, (), None)
        >>> notice.filter(record), notice.dropped
        (False, 1)
    """

    def __init__(self) -> None:
        super().__init__()
        self.dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if "All reward functions returned None" in record.getMessage():
            self.dropped += 1
            return False
        return True


#: The logger TRL's GRPO trainer warns on.
_TRL_GRPO_LOGGER = "trl.trainer.grpo_trainer"


def _filter_trl_notices(notices: _UnscoredNoticeFilter) -> bool:
    """Put ``notices`` on TRL's GRPO logger, taking off any other ormix notice filter first; returns whether
    ``notices`` was there already. A training that raised leaves its filter behind (TRL calls no
    `on_train_end` then), and that one would drop, and count into a callback nobody reads, every later
    trainer's notices."""
    trl_logger = logging.getLogger(_TRL_GRPO_LOGGER)
    present = notices in trl_logger.filters
    for stale in [f for f in trl_logger.filters if isinstance(f, _UnscoredNoticeFilter) and f is not notices]:
        trl_logger.removeFilter(stale)
    trl_logger.addFilter(notices)
    return present


class TelemetryCallback(TrainerCallback):
    """Per-environment telemetry for a trainer: rollout records and the coverage alarm.

    When the trainer is built (`on_init_end`, so `trainer.evaluate()` and `predict()` work without training;
    again at `on_train_begin` when training resumes) it builds a `TelemetryRun` from the trainer's arguments
    (run directory `args.output_dir`, rank `args.process_index`, GRPO group sizes) and hands it to each
    member's `TelemetryObserver`, so their reward functions append one JSON line per rollout to
    `<output_dir>/rollouts/rank-<k>.jsonl` (``mode`` ``train`` or ``eval``); the observers stay attached after
    training, so a final `trainer.evaluate()` is recorded too. On every log it reads the pooled
    `ormix/<member>/coverage` and `error_rate` and raises the alarm (one `CoverageAlarmWarning`, also logged
    at INFO, on the main process) when a member stays below `min_coverage` / above `max_error_rate` for
    `consecutive_steps` logging steps; with `stop: true` it also sets `control.should_training_stop` (on
    every process, since the pooled values agree) and keeps the alarm in `stopped_by`. The no-learning alarm
    (a `NoLearningWarning`, kept in `no_learning`) warns when a member's groups are all uninformative, or
    ``grad_norm`` is 0, for `no_learning_steps` logging steps, and at the end when the trained weights equal
    those training started from (`weight_fingerprint`); both alarms go to ``<run dir>/alarms.jsonl`` (the
    report lists them) and their counters are saved with each checkpoint. While the trainer trains, TRL's
    "All reward functions returned None" dumps are counted, not printed (`unscored_notices_filtered`;
    `ConcurrentGRPOTrainer` also filters its `evaluate()` and `predict()`), and said once in ormix's words
    (an `UnscoredRolloutsWarning` at the first step that had one, and the total when training ends).

    Args:
        observers: member name → the member's `TelemetryObserver` (`spec.telemetry`).
        settings: a `TelemetryConfig` or its fields as a mapping.
        secrets: values to redact from everything the records keep.
        environments: member → the platform environment name its uploaded rollouts carry (a catalog
            member's own name), with ``settings.upload`` (`ormix.config.UploadConfig`): then an `UploadRun`
            (`upload`) sends every recorded rollout to the OpenReward platform in the background, logs its
            counts as ``ormix/upload/<count>`` and says them in one line when training ends.

    Example:
        >>> cb = TelemetryCallback({"seta": TelemetryObserver("seta")}, {"min_coverage": 0.5})
        >>> cb.settings.min_coverage, cb.alarms
        (0.5, [])
    """

    def __init__(
        self,
        observers: Mapping[str, TelemetryObserver],
        settings: Mapping[str, Any] | TelemetryConfig | None = None,
        *,
        secrets: Iterable[str] = (),
        environments: Mapping[str, str] | None = None,
    ) -> None:
        self.observers = dict(observers)
        self.environments = dict(environments or {})
        self.upload: Any = None  # an `ormix.telemetry._upload.UploadRun` (settings.upload), once begun
        #: The upload's end-of-training line (`ormix.telemetry._upload.summary_line`), once training ended.
        self.upload_summary: str | None = None
        self.settings = (
            settings
            if isinstance(settings, TelemetryConfig)
            else TelemetryConfig.model_validate(dict(settings or {}))
        )
        self.secrets = [s for s in secrets if s]
        self.run: TelemetryRun | None = None
        # Per step since the last training entry: member → informative groups pooled over processes.
        self._informative: list[dict[str, float]] = []
        self.alarms: list[Alarm] = []
        self.no_learning: list[NoLearningAlarm] = []
        self.stopped_by: Alarm | None = None
        self._tracker = AlarmTracker(self.settings, self.observers)
        self._learning = LearningTracker(self.settings, self.observers)
        self.unscored_notices = _UnscoredNoticeFilter()
        self._unscored_said = False

    def on_init_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        # Attached when the trainer is built, so `trainer.evaluate()` / `predict()` without training record
        # their rollouts (mode "eval"). TRL's dumps are filtered only while the trainer trains (or within
        # `unscored_notices_filtered`, as `ConcurrentGRPOTrainer.evaluate()` does): a filter put on TRL's
        # logger here would stay there after the trainer is gone (no event ends a trainer that only
        # evaluates, or whose training failed to start), hiding every later trainer's notices.
        self._begin(args, state, kwargs.get("model"))
        return control

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        # Resuming (state.global_step > 0): records after the checkpoint's step are dropped and the alarm's
        # counters restored from the checkpoint, so the continued run counts every step once. A fresh run
        # keeps what `on_init_end` began (and anything an evaluation before training recorded).
        if self.run is None or state.global_step > 0 or not self._attached():
            self._begin(args, state, kwargs.get("model"))
        if self._learning.start is None and self._learning.steps is not None:
            # The weights GRPO starts from (after any warm start); a resumed run keeps its first start's.
            self._learning.start = weight_fingerprint(kwargs.get("model"))
        # Training's own count (an evaluation before it, filtered too, counted into the same filter).
        self.unscored_notices.dropped, self._unscored_said = 0, False
        _filter_trl_notices(self.unscored_notices)
        return control

    def _attached(self) -> bool:
        return all(observer.run is self.run for observer in self.observers.values())

    def _begin(self, args: Any, state: Any, model: Any = None) -> None:
        output_dir = getattr(args, "output_dir", None)
        num_generations = getattr(args, "num_generations", None)
        resumed = state.global_step if state.global_step > 0 else None
        self.run = _GroupsRun(
            output_dir if (self.settings.records and output_dir) else None,
            rank=getattr(args, "process_index", 0) or 0,
            num_generations=num_generations,
            num_generations_eval=getattr(args, "num_generations_eval", None) or num_generations,
            secrets=self.secrets,
            resume_step=resumed,
        )
        self._tracker = AlarmTracker(self.settings, self.observers)
        self._learning = LearningTracker(self.settings, self.observers)
        self._informative = []
        saved = _state_file(args, state, STATE_FILE)
        if resumed is not None and saved is not None and saved.exists():
            kept = json.loads(saved.read_text())
            self._tracker.load_state(kept.get("alarm", {}))
            self._learning.load_state(kept.get("learning", {}))
        if self.settings.upload is not None:
            self.run.upload = self._upload_run(args, model, resumed)
        for observer in self.observers.values():
            observer.run = self.run
        self.unscored_notices.dropped = 0  # counted per trainer (these callbacks may serve several)
        self._unscored_said = False

    def _upload_run(self, args: Any, model: Any, resumed: int | None) -> Any:
        # One per callback: begun again (a resumed run), it keeps its thread and its counts.
        if self.upload is None:
            import atexit
            from importlib.metadata import version

            from ormix.telemetry._upload import UploadRun

            assert self.settings.upload is not None
            output_dir = getattr(args, "output_dir", None)
            config = getattr(model, "config", None)
            self.upload = UploadRun(
                self.settings.upload,
                run_name=Path(output_dir).name if output_dir else "ormix",
                model_name=str(getattr(config, "_name_or_path", None) or type(model).__name__),
                environments=self.environments,
                secrets=self.secrets,
                run_info={
                    "lr": getattr(args, "learning_rate", None),
                    "framework_version": version("trl"),
                    "initial_step": resumed,
                },
                rank=getattr(args, "process_index", 0) or 0,
            ).start()
            # A `trainer.evaluate()` after training is uploaded too: the thread stops at exit, flushed.
            atexit.register(self.upload.close)
        elif resumed is not None:
            # Begun when the trainer was built (step 0), before its checkpoint loaded: the run resumes here.
            self.upload.run_info["initial_step"] = resumed
        return self.upload

    def add_eval_metrics(self, logs: dict[str, Any]) -> dict[str, float]:
        """Add the per-member figures of the evaluation whose entry ``logs`` is (`eval_metrics` over its
        records, pooled over the processes) to it; returns them (empty when it had no ormix rollout).

        Called by `ConcurrentGRPOTrainer.log` before the entry is logged, else by `on_log` (then loggers
        that ran before ormix's callbacks do not see them).
        """
        if self.run is None or not _is_eval_entry(logs):
            return {}
        records = all_ranks_records(self.run.take_eval_records())
        values = eval_metrics(records, self.run.num_generations_eval) if records else {}
        logs.update(values)
        return values

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
    ) -> Any:
        if self.run is None:
            return control
        if logs is not None and _is_eval_entry(logs) and not any(k.startswith("eval/") for k in logs):
            values = self.add_eval_metrics(logs)
            entry = state.log_history[-1] if state.log_history else None
            if values and entry is not None and all(k in entry for k in logs if k.startswith("eval_")):
                entry.update(values)  # the entry the trainer just appended, as the trainer wrote it
        training = logs is not None and not _is_eval_entry(logs)
        if logs is not None and training and self._informative:
            self._put_informative(logs, state.log_history[-1] if state.log_history else None)
        # Causes go with the coverage they explain: an entry without coverage (an evaluation's) leaves the
        # training rollouts' causes to the next one that has it, so the alarm's "n of m" counts them all.
        logs_coverage = (
            logs is not None
            and training
            and any(
                metric_key(member, metric) in logs
                for member in self.observers
                for metric in ("coverage", "error_rate")
            )
        )
        causes = self.run.take_causes() if logs_coverage else {}
        for alarm in self._tracker.update(state.global_step, logs or {}, causes):
            self.alarms.append(alarm)
            self._say(state, alarm, CoverageAlarmWarning)
            if alarm.stop:
                control.should_training_stop = True
                self.stopped_by = self.stopped_by or alarm
        if logs is not None and training:
            if self.upload is not None:
                counts = self.upload.metrics()  # this process's (uploads are not pooled across ranks)
                logs.update(counts)
                entry = state.log_history[-1] if state.log_history else None
                if entry is not None and all(entry.get(k) == v for k, v in logs.items() if k in entry):
                    entry.update(counts)
            for learned in self._learning.update(state.global_step, logs):
                self.no_learning.append(learned)
                self._say(state, learned, NoLearningWarning)
            dropped = self.unscored_notices.dropped
            if dropped and not self._unscored_said and state.is_world_process_zero:
                self._unscored_said = True
                self._say(state, unscored_notice(dropped, state.global_step), UnscoredRolloutsWarning)
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        """On several processes, judge each member's GRPO groups of the step on every process's rewards
        (`pooled_informative`): TRL's ``informative_groups`` judges each process's part of a group split over
        processes, counting the group once per part. Kept for the step's log entry (`_put_informative`).

        Here, not in ``on_log``: every process ends every step, while a log entry can be one process's alone
        (an interrupted run's last). Not when an optimizer step makes several generation batches
        (``steps_per_generation`` < ``gradient_accumulation_steps``): their groups share step and position,
        so TRL's per-batch figure stands.
        """
        if not isinstance(self.run, _GroupsRun):
            return control
        groups = self.run.take_groups()
        batches = getattr(args, "steps_per_generation", None) or 1
        if (getattr(args, "world_size", 1) or 1) < 2 or batches < (args.gradient_accumulation_steps or 1):
            return control
        parts = every_rank(groups)
        members = sorted({name for part in parts for name, *_ in part})
        pooled = {m: pooled_informative(parts, m) for m in members}
        self._informative.append({m: v for m, v in pooled.items() if v is not None})
        return control

    def _put_informative(self, logs: dict[str, Any], entry: dict[str, Any] | None) -> None:
        """Put the pooled ``informative_groups`` of the steps since the last training entry (`on_step_end`;
        their mean, as TRL averages its per-batch figures) in that entry and ``entry``, the trainer's copy of
        it. The callbacks after this one see it: `ConcurrentGRPOTrainer` puts this callback before every
        logger; with TRL's trainer, loggers (``report_to``) come first and see TRL's.
        """
        steps, self._informative = self._informative, []
        if entry is not None and not all(entry.get(k) == v for k, v in logs.items() if k in entry):
            entry = None  # not this entry's copy
        for member in sorted({m for step in steps for m in step}):
            key = metric_key(member, "informative_groups")
            values = [step[member] for step in steps if member in step]
            if key in logs:
                logs[key] = sum(values) / len(values)
                if entry is not None:
                    entry[key] = logs[key]

    def _say(self, state: Any, alarm: Alarm | NoLearningAlarm | str, category: type[Warning]) -> None:
        """Say an alarm (or a notice) once, on the main process: the warning is what a console shows, the log
        line is for log files; an alarm also goes to ``<run dir>/alarms.jsonl``."""
        if not state.is_world_process_zero:
            return
        message = alarm if isinstance(alarm, str) else alarm.message
        warnings.warn(message, category, stacklevel=3)
        logger.info("%s", message)
        if isinstance(alarm, str) or self.run is None or self.run.run_dir is None:
            return
        path = self.run.run_dir / "alarms.jsonl"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(alarm.as_dict(), default=str) + "\n")
        except OSError as e:
            logger.warning("ormix: cannot write %s (%s)", path, e)

    @contextlib.contextmanager
    def unscored_notices_filtered(self) -> Iterator[_UnscoredNoticeFilter]:
        """Within the block, TRL's "All reward functions returned None" dumps are counted, not printed (for
        an evaluation or prediction outside training: training filters them from `on_train_begin` to
        `on_train_end`); a filter already in place is left there, one put there is removed on leaving.

        Example:
            >>> cb = TelemetryCallback({})
            >>> with cb.unscored_notices_filtered() as notices:
            ...     logging.getLogger(_TRL_GRPO_LOGGER).warning("All reward functions returned None.")
            >>> notices.dropped
            1
        """
        present = _filter_trl_notices(self.unscored_notices)
        try:
            yield self.unscored_notices
        finally:
            if not present:
                logging.getLogger(_TRL_GRPO_LOGGER).removeFilter(self.unscored_notices)

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        """Save the alarm's counters beside the trainer's checkpoint (restored when training resumes)."""
        saved = _state_file(args, state, STATE_FILE)
        if saved is not None and saved.parent.is_dir() and state.is_world_process_zero:
            kept = {"alarm": self._tracker.state(), "learning": self._learning.state()}
            saved.write_text(json.dumps(kept, indent=1) + "\n")
        return control

    def on_predict(self, args: Any, state: Any, control: Any, metrics: Any = None, **kwargs: Any) -> Any:
        if self.run is not None:
            self.run.take_eval_records()  # predict() logs nothing: its rollouts are no evaluation's
        return control

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        # The observers stay attached to this run: a `trainer.evaluate()` after training is recorded too (the
        # next trainer built with these callbacks attaches its own run when it is built).
        logging.getLogger(_TRL_GRPO_LOGGER).removeFilter(self.unscored_notices)
        if self.upload is not None:
            # Waits (at most upload.close_timeout_s) for this run's rollouts to go; the thread stays for a
            # later `trainer.evaluate()`.
            self.upload.flush()
            line = self.upload.summary()
            self.upload_summary = line
            if self.upload.uploader.snapshot().lost:
                logger.warning("%s", line)
            else:
                logger.info("%s", line)
        if self.unscored_notices.dropped and state.is_world_process_zero:
            # Never left out without a word: the Python API (no console of ormix's) sees this warning.
            self._say(state, unscored_notice(self.unscored_notices.dropped), UnscoredRolloutsWarning)
        if self._learning.steps is not None:
            end = weight_fingerprint(kwargs.get("model"))
            # Each process compares its own (possibly sharded) weights: unchanged only where all are.
            unchanged = every_rank(
                unchanged_weights_alarm(self._learning.start, end or [], state.global_step)
            )
            if unchanged and all(a is not None for a in unchanged):
                self.no_learning.append(unchanged[0])
                self._say(state, unchanged[0], NoLearningWarning)
        return control


@contextlib.contextmanager
def trl_notices_filtered(callbacks: Iterable[Any]) -> Iterator[None]:
    """Within the block, every `TelemetryCallback` among a trainer's ``callbacks`` counts TRL's "All reward
    functions returned None" dumps instead of printing them (`TelemetryCallback.unscored_notices_filtered`);
    on leaving, TRL's logger holds the filters it held before, whatever happened inside.

    Example:
        >>> cb = TelemetryCallback({})
        >>> with trl_notices_filtered([cb, object()]):
        ...     logging.getLogger(_TRL_GRPO_LOGGER).warning("All reward functions returned None.")
        >>> cb.unscored_notices.dropped, cb.unscored_notices in logging.getLogger(_TRL_GRPO_LOGGER).filters
        (1, False)
    """
    with contextlib.ExitStack() as stack:
        for callback in callbacks:
            if isinstance(callback, TelemetryCallback):
                stack.enter_context(callback.unscored_notices_filtered())
        yield


class AdaptiveCallback(TrainerCallback):
    """Feeds an adaptive mixture's planner: each step's groups, pooled over all ranks, at the step's end; its
    state saved with every checkpoint and restored when training resumes.

    Pooling uses `torch.distributed` when it is initialised with several processes (every rank then hands
    the planner the same statistics, so every rank decides the same rows); a fresh run starts every rank
    from process 0's planner, should the platform prior have answered the processes differently.

    Example:
        >>> from ormix.config import MixtureConfig
        >>> from ormix.mixture._adaptive_run import AdaptiveRun
        >>> from ormix.mixture._planner import Planner
        >>> cfg = MixtureConfig(
        ...     members={"a": {"target": "local:echo"}}, strategy="adaptive", prompts_per_step=1
        ... )
        >>> AdaptiveCallback(AdaptiveRun(Planner(cfg, {"a": [0]}), {"a": {0: {}}})).run.k
        1
    """

    STATE_FILE = "ormix_adaptive.json"

    def __init__(self, run: Any) -> None:
        self.run = run

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if getattr(args, "dataloader_num_workers", 0):
            raise TrainConfigError(
                "adaptive mixing decides each step's rows from the statistics of two steps before; loader "
                f"workers (dataloader_num_workers={args.dataloader_num_workers}) fetch further ahead: "
                "set it to 0"
            )
        self.run.rank = getattr(args, "process_index", 0) or 0
        self.run.num_generations = getattr(args, "num_generations", None)
        saved = _state_file(args, state, self.STATE_FILE)
        if state.global_step > 0 and saved is not None:
            if not saved.exists():
                raise TrainConfigError(
                    f"resuming an adaptive mixture needs its planner's state, and {saved} is missing: resume "
                    "from a checkpoint this mixture's callbacks wrote"
                )
            self.run.planner.load_state_dict(json.loads(saved.read_text()))
        elif state.global_step == 0:
            # Each process asked the platform for its prior; one whose answer differed (rollouts logged
            # between the asks) would decide other rows. Every rank takes process 0's planner, as on resume.
            states = every_rank(self.run.planner.state_dict())
            if any(other != states[0] for other in states[1:]):
                logger.warning(
                    "ormix: the processes' planners started apart (the platform prior answered them "
                    "differently); every process uses process 0's"
                )
                self.run.planner.load_state_dict(states[0])
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        self.run.end_step(state.global_step, every_rank(self.run.take_groups()))
        return control

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        saved = _state_file(args, state, self.STATE_FILE)
        if saved is not None and saved.parent.is_dir() and state.is_world_process_zero:
            saved.write_text(json.dumps(self.run.planner.state_dict()) + "\n")
        return control
