"""Per-environment telemetry: metrics in the trainer's logs, rollout records on disk, a coverage alarm.

Every member's reward function (`ormix.spec.make_reward_func`) hands its batch to `observe_batch`, which

- logs `ormix/<member>/<metric>` through TRL's `log_metric`, ONE VALUE PER ROLLOUT (or per call / group),
  so TRL's pooling (sum and count over all processes, then the mean) gives the exact batch-wide value;
- appends one JSON line per rollout to `<output_dir>/rollouts/rank-<k>.jsonl` when a `TelemetryRun` is
  bound (`ormix.integrations.trl.TelemetryCallback` binds one on `on_train_begin`).

Metrics per member (`METRICS`): `reward` (raw environment reward, scored rollouts only), `coverage`,
`unscored_rate`, `error_rate`, `finished_rate`, `tool_calls`, `tool_errors`, `wrong_env_calls` (per rollout),
`share` (1/0 for every rollout of the batch), `informative_groups` (1/0 per GRPO group of the member),
`session_open_ms` (per rollout), `tool_ms` (per call that reached the server). A member absent from a batch
logs only `share` (0s), so TRL shows no value for the rest instead of a misleading 0.

An infrastructure error is never a reward: `training_reward` gives `None` for it, and the records carry that
`None`. Records never hold tool arguments, prompts or completions, and every known secret value (the
spec's `secrets=`, its `api_key=`, `OPENREWARD_API_KEY`) is replaced by `***` in any text they keep.

This module imports nothing of TRL, transformers or torch.

Example:
    >>> recs = [{"member": "a", "outcome": "scored", "env_reward": 1.0, "reward": 1.0, "finished": True,
    ...          "open_ms": 3.0, "group": 0, "calls": [{"tool": "submit", "latency_ms": 2.0, "error": None}]},
    ...         {"member": "a", "outcome": "error", "env_reward": None, "reward": None, "finished": False,
    ...          "open_ms": 1.0, "group": 0, "calls": []}]
    >>> summarize(member_values(recs, "a", batch_size=4))["coverage"], summarize(member_values(recs, "a", 4))["share"]
    (0.5, 0.5)
"""

from __future__ import annotations

import difflib
import json
import logging
import math
import os
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from ormix.rollout.outcome import ERROR_KINDS

logger = logging.getLogger(__name__)

#: Metric names logged under `ormix/<member>/`, in the order a report lists them.
METRICS: tuple[str, ...] = (
    "reward",
    "coverage",
    "unscored_rate",
    "error_rate",
    "finished_rate",
    "tool_calls",
    "tool_errors",
    "wrong_env_calls",
    "share",
    "informative_groups",
    "session_open_ms",
    "tool_ms",
)

#: Version of the rollout record layout (bumped when a field changes meaning).
RECORD_VERSION = 1

# Call errors that never reached the server: their latency (0) says nothing about the environment.
_UNSENT_CALL_ERRORS = ("wrong_env", "session_open")
_DETAIL_LIMIT = 300
_REDACTED = "***"


def metric_key(member: str, metric: str) -> str:
    """The trainer-log key of one member metric.

    Example:
        >>> metric_key("seta", "coverage")
        'ormix/seta/coverage'
    """
    return f"ormix/{member}/{metric}"


# ──────────────────────────────────────────────────────────────────────────────────────────────────────────
# Configuration


class TelemetryConfigError(ValueError):
    """A `telemetry:` setting that cannot work; the message names the key and what to write instead."""


@dataclass(frozen=True)
class TelemetryConfig:
    """Telemetry settings (the mixture file's `telemetry:` mapping).

    Attributes:
        min_coverage: alarm when a member's scored fraction is below this (None: off).
        max_error_rate: alarm when a member's infrastructure-error rate is above this (None: off).
        consecutive_steps: how many logging steps in a row a member must be below / above before the alarm.
        stop: stop training (`control.should_training_stop`) when the alarm fires.
        records: write rollout records to `<output_dir>/rollouts/`.

    Example:
        >>> TelemetryConfig.from_mapping({"min_coverage": 0.5, "consecutive_steps": 2}).max_error_rate
        0.5
        >>> TelemetryConfig.from_mapping({"min_coverge": 0.5})
        Traceback (most recent call last):
        ...
        ormix.telemetry.TelemetryConfigError: telemetry: unknown key 'min_coverge' (did you mean 'min_coverage'?); known keys: min_coverage, max_error_rate, consecutive_steps, stop, records
    """

    min_coverage: float | None = None
    max_error_rate: float | None = 0.5
    consecutive_steps: int = 3
    stop: bool = False
    records: bool = True

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | TelemetryConfig | None) -> TelemetryConfig:
        """Validate a `telemetry:` mapping; every problem is named in one `TelemetryConfigError`."""
        if isinstance(data, TelemetryConfig):
            return data
        data = dict(data or {})
        known = [f.name for f in fields(cls)]
        problems: list[str] = []
        for key in data:
            if key not in known:
                close = difflib.get_close_matches(str(key), known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                problems.append(f"unknown key {key!r}{hint}; known keys: {', '.join(known)}")
        for key in ("min_coverage", "max_error_rate"):
            value = data.get(key)
            if key in data and value is not None:
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                    problems.append(
                        f"{key} must be a fraction between 0 and 1 (or null to turn it off), not {value!r}"
                    )
        if "consecutive_steps" in data:
            value = data["consecutive_steps"]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                problems.append(f"consecutive_steps must be an integer >= 1, not {value!r}")
        for key in ("stop", "records"):
            if key in data and not isinstance(data[key], bool):
                problems.append(f"{key} must be true or false, not {data[key]!r}")
        if problems:
            raise TelemetryConfigError("; ".join(f"telemetry: {p}" for p in problems))
        values = {k: data[k] for k in known if k in data}
        for key in ("min_coverage", "max_error_rate"):
            if values.get(key) is not None:
                values[key] = float(values[key])
        return cls(**values)


# ──────────────────────────────────────────────────────────────────────────────────────────────────────────
# Pure aggregation


def redact(text: str | None, secrets: Iterable[str]) -> str | None:
    """`text` with every secret value replaced by `***` (values shorter than 4 characters are ignored).

    Example:
        >>> redact("failed with key sk-123456", ["sk-123456"])
        'failed with key ***'
    """
    if text is None:
        return None
    for secret in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, _REDACTED)
    return text


def group_ids(
    n: int, *, rank: int = 0, num_generations: int | None = None, keys: Sequence[Any] | None = None
) -> list[int]:
    """GRPO group of each rollout of a local batch, as the global position of the group's first rollout.

    TRL repeats each prompt `num_generations` times consecutively in the global batch and gives process k
    the contiguous slice `[k*n, (k+1)*n)`, so the group of local rollout i is `(k*n + i) // G` (the same
    grouping TRL uses for advantages). Without `num_generations`, consecutive runs of equal `keys` form
    the groups.

    Example:
        >>> group_ids(4, rank=1, num_generations=2)
        [4, 4, 6, 6]
        >>> group_ids(4, keys=["a", "a", "b", "a"])
        [0, 0, 2, 3]
    """
    if num_generations and num_generations > 0:
        return [((rank * n + i) // num_generations) * num_generations for i in range(n)]
    out: list[int] = []
    start = 0
    for i in range(n):
        if i > 0 and (keys is None or keys[i] != keys[i - 1]):
            start = i
        out.append(rank * n + start)
    return out


def is_informative(values: Sequence[float | None]) -> bool:
    """Whether a GRPO group's rewards differ (std > 0), ignoring `None` (errors, unscored).

    Example:
        >>> is_informative([1.0, 0.0, None]), is_informative([1.0, 1.0]), is_informative([0.5, None])
        (True, False, False)
    """
    present = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if len(present) < 2:
        return False
    mean = sum(present) / len(present)
    return any(abs(v - mean) > 1e-9 * max(1.0, abs(mean)) for v in present)


def member_values(
    records: Sequence[Mapping[str, Any]], member: str, batch_size: int
) -> dict[str, list[float]]:
    """The values one member logs for one batch: one per rollout, call or group, as `log_metric` pools them.

    `records` are rollout records of ONE batch (any members; others are ignored); `batch_size` is the
    number of rollouts in that batch (all members). Metrics with no value are left out (TRL then logs
    nothing for them), except `share`, which is always there.

    Example:
        >>> member_values([], "a", batch_size=2)
        {'share': [0.0, 0.0]}
    """
    mine = [r for r in records if r.get("member") == member]
    out: dict[str, list[float]] = {"share": [1.0] * len(mine) + [0.0] * max(batch_size - len(mine), 0)}
    if not mine:
        return out
    out["reward"] = [
        float(r["env_reward"]) for r in mine if r["outcome"] == "scored" and r.get("env_reward") is not None
    ]
    out["coverage"] = [float(r["outcome"] == "scored") for r in mine]
    out["unscored_rate"] = [float(r["outcome"] == "unscored") for r in mine]
    out["error_rate"] = [float(r["outcome"] == "error") for r in mine]
    out["finished_rate"] = [float(bool(r.get("finished"))) for r in mine]
    out["tool_calls"] = [float(len(r.get("calls") or [])) for r in mine]
    out["tool_errors"] = [float(sum(c.get("error") is not None for c in r.get("calls") or [])) for r in mine]
    out["wrong_env_calls"] = [
        float(sum(c.get("error") == "wrong_env" for c in r.get("calls") or [])) for r in mine
    ]
    groups: dict[Any, list[float | None]] = {}
    for r in mine:
        groups.setdefault(r.get("group"), []).append(r.get("reward"))
    out["informative_groups"] = [float(is_informative(v)) for v in groups.values()]
    out["session_open_ms"] = [float(r["open_ms"]) for r in mine if r.get("open_ms") is not None]
    out["tool_ms"] = [
        float(c["latency_ms"])
        for r in mine
        for c in r.get("calls") or []
        if c.get("error") not in _UNSENT_CALL_ERRORS
    ]
    return {k: v for k, v in out.items() if v}


def summarize(values: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """Mean of each metric's values (what TRL logs for one batch).

    Example:
        >>> summarize({"coverage": [1.0, 0.0, 1.0], "tool_ms": []})
        {'coverage': 0.6666666666666666}
    """
    return {k: sum(v) / len(v) for k, v in values.items() if len(v)}


def batch_metrics(records: Sequence[Mapping[str, Any]], members: Iterable[str]) -> dict[str, float]:
    """Recompute the `ormix/<member>/<metric>` log entries of one batch from its records (all ranks merged).

    Example:
        >>> batch_metrics([{"member": "a", "outcome": "unscored", "calls": [], "reward": None}], ["a", "b"])["ormix/b/share"]
        0.0
    """
    out: dict[str, float] = {}
    for member in members:
        for metric, value in summarize(member_values(records, member, len(records))).items():
            out[metric_key(member, metric)] = value
    return out


def dominant_cause(counts: Mapping[str, int]) -> tuple[str, int, int] | None:
    """(cause, its count, all failures) of the most frequent failure cause: an error kind, else `unscored`.

    Infrastructure error kinds win over `unscored` (they are what an alarm must point at).

    Example:
        >>> dominant_cause({"session_open": 3, "transport": 1, "unscored": 5})
        ('session_open', 3, 4)
        >>> dominant_cause({"unscored": 2})
        ('unscored', 2, 2)
    """
    errors = {k: v for k, v in counts.items() if k != "unscored" and v > 0}
    pool = errors or {k: v for k, v in counts.items() if k == "unscored" and v > 0}
    if not pool:
        return None
    order = {k: i for i, k in enumerate(ERROR_KINDS)}
    cause = max(pool, key=lambda k: (pool[k], -order.get(k, len(order))))
    return cause, pool[cause], sum(pool.values())


# ──────────────────────────────────────────────────────────────────────────────────────────────────────────
# Coverage alarm


class CoverageAlarmWarning(UserWarning):
    """A member's coverage stayed below / error rate above the configured threshold for k logging steps."""


@dataclass(frozen=True)
class Alarm:
    """One alarm: which member, at which step, why, and its dominant failure cause.

    Example:
        >>> Alarm(4, "seta", 0.1, 0.9, ("error rate 0.90 > 0.50",), ("session_open", 9, 9), 2, False).message[:40]
        "ormix: environment 'seta' is failing: er"
    """

    step: int
    member: str
    coverage: float | None
    error_rate: float | None
    reasons: tuple[str, ...]
    cause: tuple[str, int, int] | None
    consecutive_steps: int
    stop: bool

    @property
    def message(self) -> str:
        """The warning text: member, thresholds crossed, dominant cause, and what happens next."""
        text = (
            f"ormix: environment {self.member!r} is failing: {' and '.join(self.reasons)} for "
            f"{self.consecutive_steps} consecutive logging step(s) (step {self.step})"
        )
        if self.cause is not None:
            kind, count, total = self.cause
            if kind == "unscored":
                text += f"; no infrastructure errors, but {count} rollout(s) came back unscored"
            else:
                text += f"; dominant error kind: {kind} ({count} of {total} failed rollouts on this process)"
        if self.stop:
            text += ". Stopping training (telemetry.stop is true); fix the environment or set stop: false."
        else:
            text += (
                ". Training continues; check the environment (`ormix check`), or set telemetry.stop: true "
                "to stop on this alarm."
            )
        return text

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready form (for `alarms.jsonl`)."""
        return {**asdict(self), "message": self.message}


class AlarmTracker:
    """Counts consecutive bad logging steps per member and raises an `Alarm` when a streak reaches k.

    A logging step without the member's metrics (the member was not in those batches) neither extends
    nor breaks its streak. After firing, a member stays quiet until it has a good step again.

    Example:
        >>> t = AlarmTracker(TelemetryConfig(max_error_rate=0.5, consecutive_steps=2), ["a"])
        >>> t.update(1, {"ormix/a/error_rate": 0.9}), len(t.update(2, {"ormix/a/error_rate": 0.8}))
        ([], 1)
    """

    def __init__(self, config: TelemetryConfig, members: Iterable[str]) -> None:
        self.config = config
        self.members = list(members)
        self.streak: dict[str, int] = dict.fromkeys(self.members, 0)
        self.causes: dict[str, Counter[str]] = {m: Counter() for m in self.members}

    def update(
        self, step: int, logs: Mapping[str, Any], causes: Mapping[str, Mapping[str, int]] | None = None
    ) -> list[Alarm]:
        """Feed one logging step's (pooled) logs; returns the alarms that fire now."""
        cfg = self.config
        fired: list[Alarm] = []
        for member in self.members:
            coverage = _number(logs.get(metric_key(member, "coverage")))
            error_rate = _number(logs.get(metric_key(member, "error_rate")))
            if coverage is None and error_rate is None:
                continue
            reasons = []
            if cfg.min_coverage is not None and coverage is not None and coverage < cfg.min_coverage:
                reasons.append(f"coverage {coverage:.2f} < min_coverage {cfg.min_coverage:.2f}")
            if cfg.max_error_rate is not None and error_rate is not None and error_rate > cfg.max_error_rate:
                reasons.append(f"error rate {error_rate:.2f} > max_error_rate {cfg.max_error_rate:.2f}")
            if not reasons:
                self.streak[member] = 0
                self.causes[member].clear()
                continue
            self.causes[member].update(dict((causes or {}).get(member, {})))
            self.streak[member] += 1
            if self.streak[member] == cfg.consecutive_steps:
                fired.append(
                    Alarm(
                        step,
                        member,
                        coverage,
                        error_rate,
                        tuple(reasons),
                        dominant_cause(self.causes[member]),
                        cfg.consecutive_steps,
                        cfg.stop,
                    )
                )
        return fired


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return float(value)


# ──────────────────────────────────────────────────────────────────────────────────────────────────────────
# The run: where records go, and what the alarm needs from this process


class TelemetryRun:
    """Per-trainer telemetry state of one process: records file, rank, group size, secret values to redact.

    Built by `ormix.integrations.trl.TelemetryCallback.on_train_begin` from the trainer's arguments and bound to the
    members' episode configs, so their reward functions find it.

    Example:
        >>> run = TelemetryRun(None, rank=0, num_generations=4)
        >>> run.records_path is None
        True
    """

    def __init__(
        self,
        run_dir: str | os.PathLike[str] | None,
        *,
        rank: int = 0,
        num_generations: int | None = None,
        num_generations_eval: int | None = None,
        secrets: Iterable[str] = (),
    ) -> None:
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.rank = int(rank)
        self.num_generations = num_generations
        self.num_generations_eval = num_generations_eval or num_generations
        self.secrets = tuple(s for s in secrets if s)
        self.records_path = (self.run_dir / "rollouts" / f"rank-{self.rank}.jsonl") if self.run_dir else None
        self._lock = threading.Lock()
        self._causes: dict[str, Counter[str]] = {}
        self._seq = 0
        self._write_failed = False

    def group_size(self, mode: str) -> int | None:
        """GRPO group size for `train` or `eval` batches."""
        return self.num_generations_eval if mode == "eval" else self.num_generations

    def write(self, records: Sequence[dict[str, Any]]) -> None:
        """Append records (one JSON line each) to this rank's file; a disk error is logged once, not raised."""
        if self.records_path is None or not records:
            return
        with self._lock:
            lines = []
            for record in records:
                record["seq"] = self._seq
                self._seq += 1
                lines.append(json.dumps(record, default=str, allow_nan=False) + "\n")
            try:
                self.records_path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.records_path, "a", encoding="utf-8") as fh:
                    fh.write("".join(lines))
            except OSError as e:
                if not self._write_failed:
                    self._write_failed = True
                    logger.warning(
                        "ormix: cannot write rollout records to %s (%s); training continues without them",
                        self.records_path,
                        e,
                    )

    def note(self, member: str, records: Sequence[Mapping[str, Any]]) -> None:
        """Count failure causes of training rollouts (for the alarm's dominant cause)."""
        with self._lock:
            counts = self._causes.setdefault(member, Counter())
            for r in records:
                if r.get("mode") != "train":
                    continue
                if r["outcome"] == "error":
                    counts[r.get("error_kind") or "error"] += 1
                elif r["outcome"] == "unscored":
                    counts["unscored"] += 1

    def take_causes(self) -> dict[str, Counter[str]]:
        """Failure causes counted since the last call, per member (and reset them)."""
        with self._lock:
            causes, self._causes = self._causes, {}
        return causes


_bound: dict[int, tuple[weakref.ref, TelemetryRun]] = {}
_bound_lock = threading.Lock()


def bind(owners: Iterable[Any], run: TelemetryRun) -> None:
    """Route the telemetry of episodes configured by `owners` (their `EpisodeConfig`s) to `run`."""
    with _bound_lock:
        for owner in owners:
            _bound[id(owner)] = (weakref.ref(owner), run)


def unbind(owners: Iterable[Any], run: TelemetryRun | None = None) -> None:
    """Undo `bind` (only where `run` is still the bound one, when given)."""
    with _bound_lock:
        for owner in owners:
            entry = _bound.get(id(owner))
            if entry is not None and (run is None or entry[1] is run):
                del _bound[id(owner)]


def run_for(owner: Any) -> TelemetryRun | None:
    """The run bound to an episode config, if any."""
    with _bound_lock:
        entry = _bound.get(id(owner))
    if entry is None or entry[0]() is not owner:
        return None
    return entry[1]


# ──────────────────────────────────────────────────────────────────────────────────────────────────────────
# From episodes to records and metrics (called by the reward functions)


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
        >>> rollout_record(ep, member="seta", training_reward=1.0, step=3, rank=0, mode="train", group=0)  # doctest: +SKIP
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
                "detail": _clip(redact(call.detail, secrets)),
            }
        )
    open_ms = getattr(episode, "open_ms", None)
    return {
        "v": RECORD_VERSION,
        "time": round(time.time(), 3),
        "step": step,
        "rank": rank,
        "mode": mode,
        "member": member,
        "task_index": getattr(episode, "task_index", None),
        "group": group,
        "outcome": outcome.kind,
        "error_kind": outcome.error_kind,
        "error": _clip(redact(outcome.error, secrets)),
        "env_reward": outcome.reward,
        "reward": training_reward,
        "rewards": list(getattr(episode, "rewards", [])),
        "finished": bool(getattr(episode, "finished", False)),
        "open_ms": None if open_ms is None else round(float(open_ms), 3),
        "calls": calls,
    }


def _clip(text: str | None) -> str | None:
    if text is None or len(text) <= _DETAIL_LIMIT:
        return text
    return text[: _DETAIL_LIMIT - 3] + "..."


def _trainer_mode(log_metric: Any) -> str:
    # TRL passes its bound `_log_metric`: the trainer's model says whether this batch trains or evaluates.
    model = getattr(getattr(log_metric, "__self__", None), "model", None)
    training = getattr(model, "training", True)
    return "train" if training or not isinstance(training, bool) else "eval"


def _prompt_key(prompt: Any) -> str:
    try:
        return json.dumps(prompt, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(prompt)


def observe_batch(
    member: str,
    owner: Any,
    environments: Sequence[Any],
    training_rewards: Sequence[float | None],
    *,
    prompts: Sequence[Any] | None = None,
    log_metric: Callable[[str, float], None] | None = None,
    trainer_state: Any = None,
) -> dict[str, list[float]]:
    """Log one member's metrics for a batch and record its rollouts; returns the values logged.

    `environments` are the batch's environments in order (Episodes, or RoutingEnvironments whose active
    `.episode` is used); the member's rollouts are those whose episode class is configured by `owner`.
    `training_rewards[i]` is the value the member's reward function returned for rollout i.

    Example:
        >>> observe_batch("echo", config, environments, rewards, log_metric=log_metric)   # doctest: +SKIP
    """
    run = run_for(owner)
    mode = _trainer_mode(log_metric)
    n = len(environments)
    rank = run.rank if run is not None else 0
    keys = [_prompt_key(p) for p in prompts] if prompts is not None and len(prompts) == n else None
    groups = group_ids(
        n, rank=rank, num_generations=run.group_size(mode) if run is not None else None, keys=keys
    )
    global_step = getattr(trainer_state, "global_step", None)
    step = None if global_step is None else int(global_step) + (1 if mode == "train" else 0)
    secrets = run.secrets if run is not None else ()
    records = []
    for i, env in enumerate(environments):
        episode = getattr(env, "episode", env)
        if episode is None or getattr(type(episode), "_config", None) is not owner:
            continue
        records.append(
            rollout_record(
                episode,
                member=member,
                training_reward=training_rewards[i],
                step=step,
                rank=rank,
                mode=mode,
                group=groups[i],
                secrets=secrets,
            )
        )
    values = member_values(records, member, n)
    if log_metric is not None:
        for metric, metric_values in values.items():
            for value in metric_values:
                log_metric(metric_key(member, metric), value)
    if run is not None:
        run.note(member, records)
        run.write(records)
    return values


# ──────────────────────────────────────────────────────────────────────────────────────────────────────────
# Reading records back


def read_records(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every rollout record of a run directory, all ranks merged, ordered by (step, rank, seq).

    A torn last line (a crash mid-write) is skipped.

    Example:
        >>> read_records("runs/demo")   # doctest: +SKIP
    """
    folder = Path(run_dir) / "rollouts"
    records: list[dict[str, Any]] = []
    for path in sorted(folder.glob("rank-*.jsonl")):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    logger.warning("ormix: skipping a torn line in %s", path)
    records.sort(
        key=lambda r: (r.get("mode") != "train", r.get("step") or 0, r.get("rank") or 0, r.get("seq") or 0)
    )
    return records
