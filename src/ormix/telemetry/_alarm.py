"""The alarms (pure): the coverage alarm (a member whose coverage stays low or error rate high for k logging
steps) and the no-learning alarm (a member whose GRPO groups all teach nothing, or a gradient of 0, for N
logging steps; trained weights equal to the start).

Example:
    >>> tracker = AlarmTracker(TelemetryConfig(max_error_rate=0.5, consecutive_steps=1), ["seta"])
    >>> [a.member for a in tracker.update(1, {"ormix/seta/error_rate": 0.9})]
    ['seta']
    >>> learning = LearningTracker(TelemetryConfig(no_learning_steps=1), ["seta"])
    >>> [a.kind for a in learning.update(1, {"ormix/seta/informative_groups": 0.0, "grad_norm": 0.0})]
    ['uninformative', 'zero_grad']
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ormix.config import TelemetryConfig
from ormix.telemetry._metrics import call_failures, dominant_cause, metric_key


class OrmixAlarmWarning(UserWarning):
    """What ormix warns of while training (`ormix train` prints these as console lines, between the steps)."""


# ──────────────────────────────────────────────────────────────────────────────────────────────────────────
# Coverage alarm


class CoverageAlarmWarning(OrmixAlarmWarning):
    """A member's coverage stayed below / error rate above the configured threshold for k logging steps."""


@dataclass(frozen=True)
class Alarm:
    """One alarm: which member, at which step, why, and its dominant failure cause.

    Example:
        >>> alarm = Alarm(4, "seta", 0.1, 0.9, ("error rate 0.90 > 0.50",), ("session_open", 9, 9), 2, False)
        >>> alarm.message[:40]
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
    #: (failed calls, calls, failed calls per kind) of the unscored rollouts (`call_failures`), if any failed.
    failed_calls: tuple[int, int, dict[str, int]] | None = None

    @property
    def message(self) -> str:
        """The warning text: member, thresholds crossed, dominant cause, and what happens next."""
        text = (
            f"ormix: environment {self.member!r} is failing: {' and '.join(self.reasons)} for "
            f"{self.consecutive_steps} consecutive logging step(s) (step {self.step})"
        )
        if self.cause is not None:
            kind, count, total = self.cause
            if kind == "unscored" and self.failed_calls is not None:
                failed, calls, kinds = self.failed_calls
                mix = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]))
                share = "every one" if failed == calls else f"{failed} of {calls}"
                why = (
                    "; tool_failed: the environment's tool raised, `ormix check` shows it"
                    if ("tool_failed" in kinds)
                    else ""
                )
                text += (
                    f"; {count} rollout(s) came back unscored and {share} of their tool calls failed "
                    f"({mix}{why})"
                )
            elif kind == "unscored":
                text += f"; no infrastructure errors, but {count} rollout(s) came back unscored"
            elif kind.startswith("group:"):
                text += (
                    f"; {count} rollout(s) had no pointwise reward and their group's scoring was "
                    f"{kind.removeprefix('group:')} (ormix/{self.member}/group_score_failed), so they got no "
                    "reward at all"
                )
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

    def state(self) -> dict[str, Any]:
        """The counters, as JSON data (saved with checkpoints, so a resumed run's alarm continues).

        Example:
            >>> t = AlarmTracker(TelemetryConfig(), ["a"])
            >>> t.load_state({"streak": {"a": 2}, "causes": {"a": {"transport": 3}}}); t.state()["streak"]
            {'a': 2}
        """
        return {"streak": dict(self.streak), "causes": {m: dict(c) for m, c in self.causes.items()}}

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Continue from `state` (members no longer in the mixture are ignored)."""
        for member, streak in dict(state.get("streak", {})).items():
            if member in self.streak:
                self.streak[member] = int(streak)
        for member, causes in dict(state.get("causes", {})).items():
            if member in self.causes:
                self.causes[member] = Counter({str(k): int(v) for k, v in dict(causes).items()})

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
                        call_failures(self.causes[member]),
                    )
                )
        return fired


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return float(value)


# ──────────────────────────────────────────────────────────────────────────────────────────────────────────
# No-learning alarm


class NoLearningWarning(OrmixAlarmWarning):
    """Training learned nothing: a member's groups all uninformative, or ``grad_norm`` 0, for N logging steps,
    or trained weights equal to the start."""


class UnscoredRolloutsWarning(OrmixAlarmWarning):
    """Rollouts ended without a reward: ormix's words for TRL's "All reward functions returned None" warnings,
    which it leaves out of the console (`unscored_notice`)."""


@dataclass(frozen=True)
class NoLearningAlarm:
    """One no-learning alarm: ``kind`` ``uninformative`` (a member's groups), ``zero_grad`` (the run's
    gradient) or ``unchanged_weights`` (at the end); ``member`` is ``None`` for the run-wide kinds.

    Example:
        >>> alarm = NoLearningAlarm(5, "echo", "uninformative", 5, "every group was solved (reward 1.00)")
        >>> alarm.message[:62]
        "ormix: nothing to learn from 'echo': none of its GRPO groups w"
    """

    step: int
    member: str | None
    kind: str
    consecutive_steps: int
    detail: str = ""

    @property
    def message(self) -> str:
        """The warning text: what did not happen, for how long, and what it usually means."""
        steps = f"{self.consecutive_steps} consecutive logging step(s) (step {self.step}"
        if self.kind == "uninformative":
            return (
                f"ormix: nothing to learn from {self.member!r}: none of its GRPO groups was informative "
                f"(every group's rewards were equal, so every advantage is 0) for {steps}); {self.detail}"
            )
        if self.kind == "zero_grad":
            return (
                f"ormix: no learning: grad_norm 0 for {steps}{self.detail}): GRPO changed no weight "
                "(usually: no group's rewards differed, so every advantage was 0)"
            )
        return (
            "ormix: no learning: the trained weights equal the weights training started from "
            f"({self.detail}): GRPO changed nothing (no informative group, grad_norm 0 or learning_rate 0)"
        )

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready form (for ``alarms.jsonl``, which the report lists)."""
        return {**asdict(self), "alarm": "no_learning", "message": self.message}


def _why_uninformative(coverage: float | None, reward: float | None) -> str:
    """Why a member's groups teach nothing, from its coverage and mean scored reward."""
    if coverage == 0:
        return "no rollout of it was scored (coverage 0): GRPO has no reward to learn from"
    if reward is not None and coverage == 1:
        return f"its scored rollouts all got the same reward within each group (mean reward {reward:.2f})"
    if reward is not None:
        return (
            f"its scored rollouts (coverage {coverage:.2f}) got the same reward within each group (mean "
            f"reward {reward:.2f})"
        )
    return "its groups had fewer than 2 scored rollouts or equal rewards"


class LearningTracker:
    """Counts consecutive logging steps in which nothing could be learned, and raises a `NoLearningAlarm` when
    a streak reaches ``config.no_learning_steps`` (``None``: off).

    Per member: ``ormix/<member>/informative_groups`` is 0 (none of its groups' rewards differ). For the run:
    ``grad_norm`` is 0. A logging step without the value neither extends nor breaks a streak; after firing,
    a streak stays quiet until a good step. ``state`` / ``load_state`` carry the counters (and the start's
    weight fingerprint, `unchanged_weights_alarm`) across a resume.

    Example:
        >>> t = LearningTracker(TelemetryConfig(no_learning_steps=2), ["a"])
        >>> t.update(1, {"ormix/a/informative_groups": 0.0}), t.update(2, {"ormix/a/informative_groups": 0.5})
        ([], [])
        >>> t.update(3, {"ormix/a/informative_groups": 0.0})
        []
        >>> [a.member for a in t.update(4, {"ormix/a/informative_groups": 0.0, "ormix/a/coverage": 0.0})]
        ['a']
    """

    #: The streak key of the run-wide gradient.
    GRAD = "grad_norm"

    def __init__(self, config: TelemetryConfig, members: Iterable[str]) -> None:
        self.steps = config.no_learning_steps
        self.members = list(members)
        self.streak: dict[str, int] = dict.fromkeys([*self.members, self.GRAD], 0)
        self.start: list[list[float]] | None = None

    def state(self) -> dict[str, Any]:
        """The counters and the start's fingerprint, as JSON data (saved with checkpoints).

        Example:
            >>> t = LearningTracker(TelemetryConfig(), ["a"])
            >>> t.load_state({"streak": {"a": 2, "grad_norm": 1}, "start": [[1.0, 2.0]]}); t.state()["streak"]
            {'a': 2, 'grad_norm': 1}
        """
        return {"streak": dict(self.streak), "start": self.start}

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state`` (members no longer in the mixture are ignored)."""
        for key, streak in dict(state.get("streak", {})).items():
            if key in self.streak:
                self.streak[key] = int(streak)
        start = state.get("start")
        if isinstance(start, list):
            self.start = [[float(v) for v in pair] for pair in start]

    def _count(self, key: str, bad: bool) -> bool:
        """Extend or break one streak; whether it reaches the threshold now."""
        if not bad:
            self.streak[key] = 0
            return False
        self.streak[key] += 1
        return self.steps is not None and self.streak[key] == self.steps

    def update(self, step: int, logs: Mapping[str, Any]) -> list[NoLearningAlarm]:
        """Feed one logging step's (pooled) logs; returns the alarms that fire now."""
        if self.steps is None:
            return []
        fired: list[NoLearningAlarm] = []
        for member in self.members:
            informative = _number(logs.get(metric_key(member, "informative_groups")))
            if informative is None:
                continue
            if self._count(member, informative == 0):
                coverage = _number(logs.get(metric_key(member, "coverage")))
                reward = _number(logs.get(metric_key(member, "reward")))
                detail = _why_uninformative(coverage, reward)
                fired.append(NoLearningAlarm(step, member, "uninformative", self.steps, detail))
        grad = _number(logs.get("grad_norm"))
        if grad is not None and self._count(self.GRAD, grad == 0):
            loss = _number(logs.get("loss"))
            detail = f", loss {loss:g}" if loss is not None else ""
            fired.append(NoLearningAlarm(step, None, "zero_grad", self.steps, detail))
        return fired


def unchanged_weights_alarm(
    start: Sequence[Sequence[float]] | None, end: Sequence[Sequence[float]], step: int
) -> NoLearningAlarm | None:
    """The alarm when the weights at the end of training equal those at its start, compared by their
    fingerprints (per tensor: the sum and the sum of squares of its values, in float64); ``None`` when they
    differ or nothing was fingerprinted.

    Example:
        >>> unchanged_weights_alarm([[1.0, 2.0]], [[1.0, 2.0]], 4).kind
        'unchanged_weights'
        >>> unchanged_weights_alarm([[1.0, 2.0]], [[1.0, 2.5]], 4) is None
        True
    """
    if not start or not end or len(start) != len(end):
        return None
    if any(list(a) != list(b) for a, b in zip(start, end, strict=True)):
        return None
    return NoLearningAlarm(step, None, "unchanged_weights", 0, f"{len(end)} tensors compared at step {step}")


def unscored_notice(dropped: int, step: int | None = None) -> str:
    """ormix's words for TRL's "All reward functions returned None" warnings, which it leaves out of the
    console (TRL prints one, with a whole prompt and completion, per batch that has an unscored rollout):
    at ``step`` the first time, without it for the run's total.

    Example:
        >>> unscored_notice(3, 1)[:62]
        'ormix: step 1: rollouts ended without a reward: TRL warned "Al'
    """
    where = f"step {step}: " if step is not None else ""
    so_far = "so far" if step is not None else "in this training"
    return (
        f'ormix: {where}rollouts ended without a reward: TRL warned "All reward functions returned None" '
        f"{dropped} time(s) {so_far}; ormix leaves those warnings out and counts the rollouts per member as "
        "coverage (ormix/<member>/coverage): GRPO learns nothing from them; `ormix check FILE` calls the "
        "environment's tools" + ("; later ones are counted, not said again" if step is not None else "")
    )
