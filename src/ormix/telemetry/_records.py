"""Rollout records: one JSON line per rollout in ``<run dir>/rollouts/rank-<k>.jsonl``, and the observer that
writes them and logs each member's metrics.

`TelemetryObserver` is attached to a member's reward function (`ormix.rollout._rewards.RewardFunction`); for
every scored batch it builds the member's records (`rollout_record`), logs ``ormix/<member>/<metric>``
through TRL's ``log_metric`` (`ormix.telemetry._metrics`), and, once a trainer callback gave it a
`TelemetryRun` (`ormix.trl.TelemetryCallback`), appends the records to the run's file and
counts failure causes for the coverage alarm. This is the only module of `ormix.telemetry` that does I/O.

An infrastructure error is never a reward: records carry its `None`. Training records hold no tool
arguments, prompts or completions (TRL's completion log has a step's text); an evaluation's records carry
their ``prompt`` and ``completion`` (TRL keeps no text of evaluations), for `ormix show`. Every known secret
value (the spec's `secrets=`, its `api_key`, `OPENREWARD_API_KEY`) is replaced by ``[redacted]`` in any
text they keep.

Example:
    >>> run = TelemetryRun(None, rank=0, num_generations=4)
    >>> run.records_path is None
    True
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import sys
import threading
import time
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ormix._errors import UsageError
from ormix._runs import append_jsonl, read_jsonl, truncate_jsonl
from ormix.ors._errors import redact_text
from ormix.rollout._episode import close_episodes
from ormix.rollout._rewards import ScoredBatch, episode_of
from ormix.telemetry._metrics import group_ids, member_values, metric_key

if TYPE_CHECKING:
    import pyarrow as pa

logger = logging.getLogger(__name__)

#: Version of the rollout record layout (bumped when a field changes meaning). Fields added since keep it:
#: ``split`` (the task's split; readers take a record without it as ``None``); ``group_status``,
#: ``group_reward``, ``group_metadata``, ``group_error`` (only for a member that scores groups: then
#: ``env_reward`` is the pointwise reward and ``reward`` the combination GRPO saw).
RECORD_VERSION = 1

_DETAIL_LIMIT = 300


# ──────────────────────────────────────────────────────────────────────────────────────────────────────────
# The run: where records go, and what the alarm needs from this process


class TelemetryRun:
    """Per-trainer telemetry state of one process: records file, rank, group size, secret values to redact
    (``secrets``, and ``OPENREWARD_API_KEY``'s value when it is set).

    Built by `ormix.trl.TelemetryCallback` from the trainer's arguments when the trainer is
    built (`on_init_end`) and handed to the members' `TelemetryObserver`s.
    """

    def __init__(
        self,
        run_dir: str | os.PathLike[str] | None,
        *,
        rank: int = 0,
        num_generations: int | None = None,
        num_generations_eval: int | None = None,
        secrets: Iterable[str] = (),
        resume_step: int | None = None,
    ) -> None:
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.rank = int(rank)
        self.num_generations = num_generations
        self.num_generations_eval = num_generations_eval or num_generations
        # Longest first, so a secret that contains another is redacted whole.
        known = {*secrets, os.environ.get("OPENREWARD_API_KEY")}
        self.secrets = tuple(sorted({s for s in known if s}, key=len, reverse=True))
        self.records_path = (self.run_dir / "rollouts" / f"rank-{self.rank}.jsonl") if self.run_dir else None
        self._lock = threading.Lock()
        self._causes: dict[str, Counter[str]] = {}
        self._eval: list[dict[str, Any]] = []
        self._seq = 0
        self._write_failed = False
        # A fresh run's records are its own: an earlier run's in its file are set aside at its first write
        # (not here: a resumed trainer is built as a fresh one, and learns it resumes only when training
        # begins).
        self._fresh = resume_step is None
        #: The rollout upload to the OpenReward platform (an `ormix.telemetry._upload.UploadRun`), when the
        #: mixture asks for one (`TelemetryCallback` sets it).
        self.upload: Any = None
        if resume_step is not None and self.records_path is not None:
            # A resumed run redoes the steps after its checkpoint: their records (from the interrupted
            # processes) go, so no step is counted twice.
            for path in self._files():
                truncate_jsonl(path, resume_step)
            with contextlib.suppress(OSError):
                self._seq = sum(1 for _ in self.records_path.open(encoding="utf-8"))

    def _files(self) -> list[Path]:
        """The record files a resumed process cuts back: its own and, on rank 0, those of the ranks this run
        does not have (an earlier start on more processes left them, and no process of this run would cut
        them). A live rank's file is left to that rank: it may be writing."""
        assert self.records_path is not None
        files = [self.records_path]
        if self.rank == 0:
            size = _world_size()
            for path in record_files(self.records_path.parent.parent):
                match = _RANK_FILE.fullmatch(path.name)
                if match and int(match.group(1)) >= size:
                    files.append(path)
        return files

    def _set_aside_earlier_records(self) -> None:
        """An earlier run's record files, set aside at a fresh run's first write: this rank's and, on rank 0,
        those of ranks this run does not have. Not where the directory holds a checkpoint: a run built
        fresh may still resume from it (a trainer learns it resumes only when training begins, after an
        evaluation may have written), and a resume cuts the files back instead."""
        assert self.records_path is not None
        run_dir = self.records_path.parent.parent
        if any(p.is_dir() for p in run_dir.glob("checkpoint-*")):
            return
        files = [self.records_path]
        if self.rank == 0:
            size = _world_size()
            files += [
                p
                for p in record_files(run_dir)
                if (m := _RANK_FILE.fullmatch(p.name)) is not None and int(m.group(1)) >= size
            ]
        for path in files:
            moved = _set_aside(path)
            if moved is not None:
                logger.warning(
                    "ormix: %s held rollout records of an earlier run in this output_dir; moved them to %s, "
                    "so this run's records are its own (reports read rank-*.jsonl only). Resume from a "
                    "checkpoint to continue a run, or pick another output_dir",
                    path,
                    moved.name,
                )

    def group_size(self, mode: str) -> int | None:
        """GRPO group size for `train` or `eval` batches."""
        return self.num_generations_eval if mode == "eval" else self.num_generations

    def write(self, records: Sequence[dict[str, Any]]) -> None:
        """Append records (a JSON line each) to this rank's file; a disk error, or a record JSON cannot hold,
        is logged once, not raised. A fresh run's first write sets an earlier run's records aside
        (``rank-<k>.jsonl.before-<UTC time>``, which readers skip)."""
        if self.records_path is None or not records:
            return
        with self._lock:
            try:
                if self._fresh:
                    self._set_aside_earlier_records()
                    self._fresh = False
                self._seq = append_jsonl(self.records_path, records, self._seq)
            except (OSError, ValueError, TypeError) as e:
                # Records are a diagnosis of training, never a reason to stop it.
                if not self._write_failed:
                    self._write_failed = True
                    logger.warning(
                        "ormix: cannot write rollout records to %s (%s: %s); training continues without them",
                        self.records_path,
                        type(e).__name__,
                        e,
                    )

    def note(self, member: str, records: Sequence[Mapping[str, Any]]) -> None:
        """Count failure causes of training rollouts (for the alarm's dominant cause), and keep evaluation
        rollouts until the evaluation is logged (`take_eval_records`)."""
        with self._lock:
            counts = self._causes.setdefault(member, Counter())
            for r in records:
                if r.get("mode") == "eval":
                    self._eval.append(dict(r))
                if r.get("mode") != "train":
                    continue
                if r["outcome"] == "error":
                    counts[r.get("error_kind") or "error"] += 1
                elif r["outcome"] == "unscored":
                    if r.get("group_status") == "scored" and r.get("reward") is not None:
                        continue  # scored by its group: it has a reward
                    counts["unscored"] += 1
                    if r.get("group_status") in ("failed", "unsupported"):
                        # Its group score would have been its reward: the alarm names the failed scoring.
                        counts[f"group:{r['group_status']}"] += 1
                    # An unscored rollout whose tool calls failed in the environment (a tool that raises)
                    # is not "no errors": the alarm names the failed calls (`call:<kind>` of `calls`).
                    for call in r.get("calls") or ():
                        counts["calls"] += 1
                        if call.get("error") is not None:
                            counts[f"call:{call['error']}"] += 1

    def take_eval_records(self) -> list[dict[str, Any]]:
        """The evaluation rollouts recorded since the last call (and forget them): one evaluation's records
        when taken as it is logged.

        Example:
            >>> run = TelemetryRun(None)
            >>> run.note("echo", [{"mode": "eval", "outcome": "scored"}, {"mode": "train", "outcome": "ok"}])
            >>> [r["mode"] for r in run.take_eval_records()], run.take_eval_records()
            (['eval'], [])
        """
        with self._lock:
            taken, self._eval = self._eval, []
        return taken

    def take_causes(self) -> dict[str, Counter[str]]:
        """Failure causes counted since the last call, per member (and reset them)."""
        with self._lock:
            causes, self._causes = self._causes, {}
        return causes


def rollout_record(
    episode: Any,
    *,
    member: str,
    training_reward: float | None,
    step: int | None,
    rank: int,
    mode: str,
    group: int | None,
    secrets: Iterable[str] = (),
) -> dict[str, Any]:
    """One rollout as a JSON-ready record (no arguments, prompts, completions or secrets).

    Example:
        >>> from ormix import OpenRewardSpec
        >>> from ormix.rollout._episode import close_episode
        >>> ep = OpenRewardSpec("local:echo", num_tasks=1, local_serve="thread").environment_factory()
        >>> _ = ep.reset(task_index=0); _ = ep.echo(text="apple"); close_episode(ep)
        >>> record = rollout_record(ep, member="echo", training_reward=1.0, step=3, rank=0, mode="train",
        ...                         group=0)
        >>> record["outcome"], record["reward"], [call["tool"] for call in record["calls"]]
        ('scored', 1.0, ['echo'])
        >>> record["task_index"], record["split"]
        (0, 'train')
    """
    outcome = episode.outcome
    secrets = tuple(secrets)
    calls = []
    for call in getattr(episode, "calls", []):
        calls.append(
            {
                "tool": call.tool,
                "latency_ms": round(float(call.latency_ms), 3),
                "error": call.error,
                "reward": call.reward,
                "finished": bool(call.finished),
                "output_chars": int(call.output_chars),
                "truncated": bool(getattr(call, "truncated", False)),
                "detail": _clip(call.detail, secrets),
            }
        )
    open_ms = getattr(episode, "open_ms", None)
    starting_ms = getattr(episode, "starting_ms", None)
    record: dict[str, Any] = {
        "v": RECORD_VERSION,
        "time": round(time.time(), 3),
        "step": step,
        "rank": rank,
        "mode": mode,
        "member": member,
        "task_index": getattr(episode, "task_index", None),
        "split": getattr(episode, "split", None),
        "group": group,
        "outcome": outcome.kind,
        "error_kind": outcome.error_kind,
        "error": _clip(outcome.error, secrets),
        "env_reward": outcome.reward,
        "reward": training_reward,
        "rewards": list(getattr(episode, "rewards", [])),
        "finished": bool(getattr(episode, "finished", False)),
        "open_ms": None if open_ms is None else round(float(open_ms), 3),
        "starting_ms": None if starting_ms is None else round(float(starting_ms), 3),
        "calls": calls,
    }
    server = getattr(episode, "server", None)
    if server is not None:  # a member on several servers: which one this rollout ran on
        record["server"] = server
    record.update(group_fields(episode, secrets))
    return record


def group_fields(episode: Any, secrets: Iterable[str] = ()) -> dict[str, Any]:
    """A rollout record's group-scoring fields (``group_status``, ``group_reward``, ``group_metadata``,
    ``group_error``) from an episode (or a `GroupEntry`); none when its group was never scored.

    Example:
        >>> class Entry:
        ...     group_status, group_reward, group_metadata, group_error = "failed", None, None, "judge raised"
        >>> group_fields(Entry())["group_error"]
        'judge raised'
    """
    status = getattr(episode, "group_status", None)
    if status is None:
        return {}
    secrets = tuple(secrets)
    return {
        "group_status": status,
        "group_reward": getattr(episode, "group_reward", None),
        "group_metadata": _redacted(getattr(episode, "group_metadata", None), secrets),
        "group_error": _clip(getattr(episode, "group_error", None), secrets),
    }


def _redacted(value: Any, secrets: tuple[str, ...]) -> Any:
    """``value`` (chat messages, a group's judging detail) as JSON data, every string in it redacted and
    every NaN or infinity ``None``: a server's `json.dumps` sends them, strict JSON has no word for them.

    Example:
        >>> _redacted({"confidence": float("nan"), "spread": [float("inf"), 0.5], "by": "sk-1"}, ("sk-1",))
        {'confidence': None, 'spread': [None, 0.5], 'by': '[redacted]'}
    """
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _redacted(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redacted(v, secrets) for v in value]
    return value if value is None or isinstance(value, (bool, int, float)) else str(value)


#: A live record file's name, ``rank-<k>.jsonl`` (a file set aside, ``rank-<k>.jsonl.before-<time>``: none).
_RANK_FILE = re.compile(r"rank-(\d+)\.jsonl")


def _world_size() -> int:
    """How many processes this run trains on: torch.distributed's world once it is set up (the trainer's
    arguments set it up under `accelerate launch` or `torchrun`), else the launchers' ``WORLD_SIZE``, else 1.
    torch is not imported for it: a process that has not loaded torch runs no process group."""
    dist = getattr(sys.modules.get("torch"), "distributed", None)
    if dist is not None and dist.is_available() and dist.is_initialized():
        return int(dist.get_world_size())
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def _set_aside(path: Path) -> Path | None:
    """Move a record file that holds anything to ``<name>.before-<UTC time>`` beside it; returns where
    (``None``: no such file, or an empty one, left as it is).

    Example:
        >>> import tempfile
        >>> p = Path(tempfile.mkdtemp()) / "rank-0.jsonl"
        >>> _ = p.write_text('{"step": 1}\\n')
        >>> moved = _set_aside(p)
        >>> p.exists(), moved.name.startswith("rank-0.jsonl.before-"), moved.read_text()
        (False, True, '{"step": 1}\\n')
    """
    try:
        if path.stat().st_size == 0:
            return None
    except FileNotFoundError:
        return None
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    target = path.with_name(f"{path.name}.before-{stamp}")
    n = 1
    while target.exists():  # two fresh starts within a second
        target = path.with_name(f"{path.name}.before-{stamp}-{n}")
        n += 1
    path.rename(target)
    return target


def _clip(text: str | None, secrets: tuple[str, ...]) -> str | None:
    """``text`` redacted, then cut to `_DETAIL_LIMIT` characters."""
    text = redact_text(text, secrets) if text else text
    if text is None or len(text) <= _DETAIL_LIMIT:
        return text
    return text[: _DETAIL_LIMIT - 3] + "..."


def trainer_mode(log_metric: Any) -> str:
    """``"train"`` or ``"eval"``: what the batch whose `log_metric` this is does (TRL passes its bound
    `_log_metric`: the trainer's model says whether it trains); ``"train"`` when it cannot tell.

    Example:
        >>> trainer_mode(None)
        'train'
    """
    model = getattr(getattr(log_metric, "__self__", None), "model", None)
    training = getattr(model, "training", True)
    return "train" if training or not isinstance(training, bool) else "eval"


def _prompt_key(prompt: Any) -> str:
    try:
        return json.dumps(prompt, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(prompt)


class TelemetryObserver:
    """Logs one member's metrics for every scored batch and, with a `TelemetryRun`, records its rollouts.

    An observer of the member's `RewardFunction` (attached by `OpenRewardSpec` / `MixtureSpec`). Without a
    run (no trainer callback), metrics are still logged, GRPO groups being read from equal prompts; a
    `TelemetryCallback` sets `run` at train begin (rank, group size, run directory, secrets to redact) and
    clears it at train end. It pickles without its run (a worker process logs metrics, not records).
    """

    def __init__(self, member: str, *, callbacks_required: bool = False) -> None:
        self.member = member
        #: Whether a trainer without ormix's callbacks is an error (a mixture whose plan carries an order or
        #: adapts) rather than a warned, degraded run (no records, no coverage alarm).
        self.callbacks_required = callbacks_required
        self.run: TelemetryRun | None = None
        #: The values logged for the last batch (metric → values), for callers that want them.
        self.last_values: dict[str, list[float]] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {
            "member": self.member,
            "callbacks_required": self.callbacks_required,
            "run": None,
            "last_values": {},
        }

    def __call__(self, batch: ScoredBatch) -> None:
        run = self.run
        if run is None and batch.trainer_state is not None:
            # Scored inside a trainer, yet no TelemetryCallback began the run: `callbacks=` was left out.
            self._missing_callbacks(batch)
        mode = trainer_mode(batch.log_metric)
        n = len(batch.environments)
        rank = run.rank if run is not None else 0
        prompts = batch.prompts
        keys = [_prompt_key(p) for p in prompts] if prompts is not None and len(prompts) == n else None
        groups = group_ids(
            n, rank=rank, num_generations=run.group_size(mode) if run is not None else None, keys=keys
        )
        global_step = getattr(batch.trainer_state, "global_step", None)
        step = None if global_step is None else int(global_step) + (1 if mode == "train" else 0)
        secrets = run.secrets if run is not None else ()
        records = [
            rollout_record(
                episode,
                member=self.member,
                training_reward=batch.rewards[i],
                step=step,
                rank=rank,
                mode=mode,
                group=groups[i],
                secrets=secrets,
            )
            for i, episode in batch.mine
        ]
        completions = batch.completions
        if mode == "eval" and completions is not None and len(completions) == n:
            # An evaluation's text is kept in its records: TRL logs none of it (`ormix show` reads it).
            for record, (i, _) in zip(records, batch.mine, strict=True):
                prompt = prompts[i] if prompts is not None and len(prompts) == n else None
                record["prompt"] = _redacted(prompt, secrets)
                record["completion"] = _redacted(completions[i], secrets)
        values = member_values(records, self.member, n)
        if batch.log_metric is not None:
            for metric, metric_values in values.items():
                for value in metric_values:
                    batch.log_metric(metric_key(self.member, metric), value)
        if run is not None:
            run.note(self.member, records)
            run.write(records)
            if run.upload is not None:  # queued, never waited for (the upload has its own thread)
                run.upload.observe(self.member, mode, records, batch)
        self.last_values = values

    def _missing_callbacks(self, batch: ScoredBatch) -> None:
        if not self.callbacks_required:
            warnings.warn(
                MISSING_CALLBACKS + ": training goes on without rollout records or the coverage "
                "alarm (per-member metrics are still logged)",
                MissingCallbacksWarning,
                stacklevel=3,
            )
            return
        # The error ends training: free the sandboxes of the whole batch (every member's rollouts) first.
        close_episodes([e for e in map(episode_of, batch.environments) if e is not None])
        args = getattr(getattr(batch.log_metric, "__self__", None), "args", None)
        raise UsageError(missing_callbacks_message(getattr(args, "shuffle_dataset", None)))


def missing_callbacks_message(shuffle_dataset: bool | None) -> str:
    """Why a mixture whose plan carries an order (or adapts) cannot train without ormix's callbacks, as
    the trainer is set: shuffling (TRL's default) loses the plan; unshuffled, its settings go unchecked
    against the plan, an adaptive curriculum never learns a step's results and nothing is recorded.

    Example:
        >>> "shuffl" in missing_callbacks_message(False), "shuffles away" in missing_callbacks_message(True)
        (False, True)
    """
    if shuffle_dataset is False:
        why = (
            "without them nobody checks the trainer's batch and step settings against this mixture's plan "
            "(its per-step quotas or schedule), an adaptive curriculum never sees a step's rewards, and no "
            "rollout records or coverage alarm are written"
        )
    else:
        why = (
            "without them the trainer shuffles away this mixture's plan (its per-step quotas, schedule or "
            "adaptive curriculum) and writes no rollout records"
        )
    fix = "Pass callbacks=mix.callbacks to the trainer (or train with `ormix train`)"
    return f"{MISSING_CALLBACKS}: {why}. {fix}"


#: The start of what is said when a trainer was built without ormix's callbacks.
MISSING_CALLBACKS = (
    "ormix: the trainer was built without ormix's callbacks (GRPOTrainer(..., callbacks=mix.callbacks))"
)


class MissingCallbacksWarning(UserWarning):
    """A trainer scores ormix rollouts without ormix's callbacks: a degraded run (no records, no alarm)."""


# ──────────────────────────────────────────────────────────────────────────────────────────────────────────
# Reading records back


def read_records(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every rollout record of a run directory, all ranks merged, ordered by (step, rank, seq).

    A torn last line (a crash mid-write) is skipped.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as run_dir:
        ...     runs = {rank: TelemetryRun(run_dir, rank=rank) for rank in (0, 1)}
        ...     for rank, step in [(0, 2), (1, 2), (0, 1)]:
        ...         runs[rank].write([{"mode": "train", "step": step, "rank": rank}])
        ...     [(r["step"], r["rank"]) for r in read_records(run_dir)]
        [(1, 0), (2, 0), (2, 1)]
    """
    records = [r for path in record_files(run_dir) for r in read_jsonl(path)]
    records.sort(
        key=lambda r: (r.get("mode") != "train", r.get("step") or 0, r.get("rank") or 0, r.get("seq") or 0)
    )
    return records


def record_files(run_dir: str | os.PathLike[str]) -> list[Path]:
    """A run's record files, ``rollouts/rank-*.jsonl``, in the order `read_records` merges them (an earlier
    run's set aside, ``rank-<k>.jsonl.before-<time>``, are not among them).

    Example:
        >>> record_files("no/such/run")
        []
    """
    return sorted((Path(run_dir) / "rollouts").glob("rank-*.jsonl"))


#: The fields of a rollout record that reports and eval summaries read (`read_record_table`): the rest
#: (texts, rewards per turn, call details) is left on disk.
READ_FIELDS = (
    "step",
    "rank",
    "seq",
    "mode",
    "member",
    "task_index",
    "split",
    "group",
    "outcome",
    "error_kind",
    "env_reward",
    "reward",
    "finished",
    "open_ms",
    "starting_ms",
    "calls",
    "server",
    "group_status",
    "group_reward",
)

# A block of the columnar reader; a longer line (a very long eval completion) takes the slow path.
_BLOCK_BYTES = 1 << 20
# Rows converted to Python at a time when the columnar reader cannot take a file.
_FALLBACK_ROWS = 65_536


def _schema() -> pa.Schema:
    import pyarrow as pa

    call = pa.struct([("tool", pa.string()), ("latency_ms", pa.float64()), ("error", pa.string())])
    types = {"int": pa.int64(), "float": pa.float64(), "bool": pa.bool_()}
    columns = {name: types[kind] for name, kind in _KINDS.items()} | {"calls": pa.list_(call)}
    return pa.schema([(name, columns.get(name, pa.string())) for name in READ_FIELDS])


def read_record_table(paths: Iterable[str | os.PathLike[str]]) -> pa.Table:
    """The `READ_FIELDS` of every record of these JSONL files (in file order, files in the order given), as
    one pyarrow table: about 200 bytes a rollout with 3 calls, however long its texts.

    pyarrow's JSON reader parses the files in blocks with an explicit schema, so only these columns are
    kept. A line it cannot take (a torn last line, a line that is not an object, a field of another type)
    sends that file through `ormix._runs.read_jsonl`'s rules instead, 64k rows at a time: torn lines and
    non-objects skipped, as `read_records` does.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as run_dir:
        ...     TelemetryRun(run_dir).write([{"mode": "train", "step": 1, "member": "a", "calls": []}])
        ...     with open(record_files(run_dir)[0], "a") as fh:
        ...         _ = fh.write('{"mode": "tr')                       # a crash mid-write
        ...     table = read_record_table(record_files(run_dir))
        >>> table.num_rows, table.column("member").to_pylist(), table.column("seq").to_pylist()
        (1, ['a'], [0])
    """
    import pyarrow as pa

    schema = _schema()
    tables = [_read_file(Path(p), schema) for p in paths]
    return pa.concat_tables(tables) if tables else schema.empty_table()


def _read_file(path: Path, schema: pa.Schema) -> pa.Table:
    import pyarrow as pa
    import pyarrow.json as pj

    size = path.stat().st_size if path.is_file() else 0
    if size == 0:
        return schema.empty_table()
    with open(path, "rb") as fh:
        fh.seek(size - 1)
        whole_lines = fh.read(1) == b"\n"
        fh.seek(0)
        if whole_lines:  # a file of whole lines: a torn line would not end in a newline
            try:
                # Block by block: `read_json` keeps about the file's size besides the table.
                reader = pj.open_json(
                    fh,
                    read_options=pj.ReadOptions(block_size=_BLOCK_BYTES),
                    parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
                )
                return pa.Table.from_batches(list(reader), schema=schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                fh.seek(0)
    return _read_file_slowly(path, schema)


def _read_file_slowly(path: Path, schema: pa.Schema) -> pa.Table:
    """`read_jsonl`'s rules a line at a time, projected to the schema, converted in bounded chunks."""
    import pyarrow as pa

    chunks: list[pa.Table] = []
    rows: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                value = json.loads(line)
            except ValueError:
                if line.strip():
                    logger.warning("ormix: skipping a torn line in %s", path)
                continue
            if not isinstance(value, dict):
                continue
            rows.append({name: _column_value(name, value.get(name)) for name in READ_FIELDS})
            if len(rows) >= _FALLBACK_ROWS:
                chunks.append(pa.Table.from_pylist(rows, schema=schema))
                rows = []
    chunks.append(pa.Table.from_pylist(rows, schema=schema))
    return pa.concat_tables(chunks)


def _column_value(name: str, value: Any) -> Any:
    """A record's field as its column holds it (a value of another type is kept as its text or dropped)."""
    if value is None:
        return None
    if name == "calls":
        if not isinstance(value, list):
            return None
        return [
            {
                "tool": _text(c.get("tool")),
                "latency_ms": _number(c.get("latency_ms")),
                "error": _text(c.get("error")),
            }
            for c in value
            if isinstance(c, Mapping)
        ]
    kind = _KINDS.get(name, "text")
    if kind == "int":
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if kind == "float":
        return _number(value)
    if kind == "bool":
        return bool(value)
    return _text(value)


_KINDS = {
    "step": "int",
    "rank": "int",
    "seq": "int",
    "task_index": "int",
    "group": "int",
    "env_reward": "float",
    "reward": "float",
    "finished": "bool",
    "open_ms": "float",
    "starting_ms": "float",
    "group_reward": "float",
}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
