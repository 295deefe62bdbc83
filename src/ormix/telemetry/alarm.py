"""The coverage alarm: a member whose coverage stays low or error rate high for k logging steps (pure).

Example:
    >>> tracker = AlarmTracker(TelemetryConfig(max_error_rate=0.5, consecutive_steps=1), ["seta"])
    >>> [a.member for a in tracker.update(1, {"ormix/seta/error_rate": 0.9})]
    ['seta']
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ormix.config import TelemetryConfig
from ormix.telemetry.metrics import call_failures, dominant_cause, metric_key

__all__ = ["Alarm", "AlarmTracker", "CoverageAlarmWarning"]

# ──────────────────────────────────────────────────────────────────────────────────────────────────────────
# Coverage alarm


class CoverageAlarmWarning(UserWarning):
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
