"""What a finished rollout amounts to: scored, unscored, or an infrastructure error (pure, no I/O).

The rule that matters: an infrastructure failure is never a reward of 0. A rollout whose session could not
open, whose transport failed, whose session died or whose call ran past its deadline has reward `None`,
so GRPO leaves it out instead of learning from a signal the policy did not earn.

Example:
    >>> classify_outcome([None, 0.5, None])
    Outcome(kind='scored', reward=0.5, error_kind=None, error=None)
    >>> classify_outcome([1.0], error_kind="session_died", error="reaped").reward is None
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

OutcomeKind = Literal["scored", "unscored", "error"]

#: Infrastructure error kinds, in the order a report lists them.
ERROR_KINDS: tuple[str, ...] = ("session_open", "transport", "session_died", "deadline", "straggler")


@dataclass(frozen=True)
class Outcome:
    """The outcome of one rollout.

    Attributes:
        kind: `scored` (some tool returned a non-null reward), `unscored` (the session worked but no reward
            came) or `error` (infrastructure failed).
        reward: the last non-null reward when scored, else `None`.
        error_kind: one of `ERROR_KINDS` when `kind == "error"`.
        error: a short human-readable cause when `kind == "error"` (never contains secrets).
    """

    kind: OutcomeKind
    reward: float | None
    error_kind: str | None = None
    error: str | None = None


def last_reward(rewards: Sequence[float | None]) -> float | None:
    """The last non-null reward (outcome-only convention, as TRL's OpenReward integration).

    Example:
        >>> last_reward([0.0, None, 1.0, None])
        1.0
    """
    return next((float(value) for value in reversed(rewards) if value is not None), None)


def classify_outcome(
    rewards: Sequence[float | None], *, error_kind: str | None = None, error: str | None = None
) -> Outcome:
    """Classify a rollout from its per-call rewards and the first infrastructure error it met (if any).

    Example:
        >>> classify_outcome([]).kind
        'unscored'
    """
    if error_kind is not None:
        if error_kind not in ERROR_KINDS:
            raise ValueError(f"unknown error kind {error_kind!r}; expected one of {ERROR_KINDS}")
        return Outcome("error", None, error_kind, error)
    reward = last_reward(rewards)
    return Outcome("unscored" if reward is None else "scored", reward)


def training_reward(
    outcome: Outcome, *, scale: float = 1.0, unscored_reward: float | None = None
) -> float | None:
    """The value GRPO sees: the scaled reward when scored, `unscored_reward` when unscored, `None` on error.

    Example:
        >>> training_reward(Outcome("unscored", None), unscored_reward=0.0)
        0.0
        >>> training_reward(Outcome("error", None, "transport"), unscored_reward=0.0) is None
        True
    """
    if outcome.kind == "scored":
        assert outcome.reward is not None
        return outcome.reward * scale
    if outcome.kind == "unscored":
        return None if unscored_reward is None else float(unscored_reward)
    return None
