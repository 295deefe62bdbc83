"""`GroupScorer`: asks an environment to score a member's GRPO groups (``POST /{env}/score_group``).

A group is scored on one of its own sessions, still open (the reward function scores before the sessions
are closed), and each rollout's episode gets the outcome: ``group_status`` (`GROUP_STATUSES`),
``group_reward`` (the environment's comparative reward), ``group_metadata`` (its judging detail) and
``group_error`` (why scoring failed). The candidates are the group's rollouts that did not fail for
infrastructure (`candidate_messages`: final output or whole trajectory). A failed or unsupported scoring
leaves the pointwise rewards: nothing here ever invents a score. The rules are `ormix.rollout._group_scoring`.

Example:
    >>> from ormix import OpenRewardSpec
    >>> from ormix.rollout._episode import close_episodes
    >>> spec = OpenRewardSpec("local:ranked", num_tasks=1, local_serve="thread")
    >>> group = [spec.environment_factory() for _ in range(3)]
    >>> for episode, answer in zip(group, ["4", "5", "4 "]):
    ...     _ = episode.reset(task_index=0); _ = episode.submit(answer=answer)
    >>> scorer = GroupScorer(GroupScoringRule(mode="on"))
    >>> scorer.score([(group, ["4", "5", "4 "])])               # completions: TRL's, here plain text
    >>> [(e.reward, e.group_status, e.group_reward) for e in group]
    [(1.0, 'scored', 1.0), (0.0, 'scored', 0.0), (1.0, 'scored', 0.5)]
    >>> close_episodes(group)
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import Any

from ormix.ors import _errors as ors_errors
from ormix.rollout._episode import all_at_once, detach_session, open_session_of
from ormix.rollout._group_scoring import GroupScoringRule, candidate_messages, finite

logger = logging.getLogger(__name__)

_ERROR_LIMIT = 300


def group_geometry(log_metric: Any) -> tuple[int | None, int]:
    """(GRPO group size, process rank) of the batch whose TRL ``log_metric`` this is: the trainer's
    ``num_generations`` when it trains, ``num_generations_eval`` when it evaluates; ``(None, 0)`` outside a
    trainer.

    Example:
        >>> group_geometry(None)
        (None, 0)
    """
    trainer = getattr(log_metric, "__self__", None)
    args = getattr(trainer, "args", None)
    if args is None:
        return None, 0
    training = getattr(getattr(trainer, "model", None), "training", True)
    size = getattr(args, "num_generations", None)
    if training is False:
        size = getattr(args, "num_generations_eval", None) or size
    rank = getattr(args, "process_index", 0)
    return (int(size) if isinstance(size, int) and size > 0 else None), int(
        rank if isinstance(rank, int) else 0
    )


class GroupEntry:
    """A finished rollout waiting for its group to be scored, apart from its episode: its session (taken
    out of the episode, which a pool may reset before the group is complete), outcome and member, and the
    ``group_*`` attributes the scoring sets, as an episode's. Close it with `aclose` once scored.

    Example:
        >>> from ormix import OpenRewardSpec
        >>> from ormix.ors import run_sync
        >>> episode = OpenRewardSpec("local:ranked", num_tasks=1, local_serve="thread").environment_factory()
        >>> _ = episode.reset(task_index=0); _ = episode.submit(answer="4")
        >>> entry = GroupEntry.detach(episode)
        >>> episode.session_id is None, entry.outcome.reward, entry.group_status
        (True, 1.0, None)
        >>> run_sync(entry.aclose)
    """

    def __init__(self, session: Any, outcome: Any, member: str) -> None:
        self._session = session
        self.outcome = outcome
        self.member = member
        self.group_status: str | None = None
        self.group_reward: float | None = None
        self.group_metadata: dict[str, Any] | None = None
        self.group_error: str | None = None

    @classmethod
    def detach(cls, episode: Any) -> GroupEntry:
        """The entry of a finished episode, its session taken out of it."""
        return cls(detach_session(episode), episode.outcome, episode.member)

    async def aclose(self) -> None:
        """Close the session (never raises)."""
        session, self._session = self._session, None
        if session is not None:
            try:
                await session.close()
            except Exception as e:  # noqa: BLE001 - closing must never raise into a trainer
                logger.debug("closing a scored group's session failed: %s", e)


class GroupScorer:
    """Scores GRPO groups of one member on its environment (see the module docstring). Picklable: what it
    learnt of the environment (whether it scores groups) is per process.

    Args:
        rule: the member's `GroupScoringRule`.
        timeout_s: the deadline of one group's scoring (`None`: the session's call deadline).

    Example:
        >>> scorer = GroupScorer(GroupScoringRule(mode="auto"), timeout_s=60)
        >>> scorer.supported is None                     # asked of the environment's first session
        True
    """

    def __init__(self, rule: GroupScoringRule, *, timeout_s: float | None = None) -> None:
        self.rule = rule
        self.timeout_s = timeout_s
        #: Whether the environment scores groups: `None` until a session said (``mode: auto``) or a call
        #: answered unsupported (then no group asks again).
        self.supported: bool | None = None
        self._warned = False

    def __getstate__(self) -> dict[str, Any]:
        return {"rule": self.rule, "timeout_s": self.timeout_s, "supported": None, "_warned": False}

    def __repr__(self) -> str:
        return f"GroupScorer({self.rule!r})"

    def score(self, groups: Sequence[tuple[Sequence[Any], Sequence[Any]]]) -> None:
        """Score these groups (each ``(episodes, completions)``, aligned), all at once, from a plain thread
        (on the ORS portal); the episodes get the outcome."""
        groups = [(list(episodes), list(completions)) for episodes, completions in groups if episodes]
        if self.rule.active:
            all_at_once(
                [functools.partial(self.ascore, episodes, completions) for episodes, completions in groups]
            )

    async def ascore(self, episodes: Sequence[Any], completions: Sequence[Any]) -> None:
        """Score one group (its episodes and their completions, aligned) from async code on the portal's
        loop; never raises for the environment's sake (a failure is the episodes' ``group_status``)."""
        if not self.rule.active:
            return
        candidates = [(e, c) for e, c in zip(episodes, completions, strict=True) if e.outcome.kind != "error"]
        if not candidates:
            return
        session = next((s for s in (open_session_of(e) for e, _ in candidates) if s is not None), None)
        if len(candidates) < 2 or session is None:
            # One candidate has nothing to be compared with; without an open session there is nothing to ask.
            why = "fewer than two candidates" if len(candidates) < 2 else "no open session in the group"
            _mark([e for e, _ in candidates], "skipped", error=why)
            return
        if self.supported is False:
            if self.rule.mode == "on":
                _mark([e for e, _ in candidates], "unsupported", error="the environment has no score_group")
            return
        try:
            if self.supported is None and self.rule.mode == "auto":
                self.supported = bool(await session.supports_score_group())
                if not self.supported:
                    logger.info("ormix %s: the environment does not score groups", candidates[0][0].member)
                    return
            wire = [
                {"messages": candidate_messages(c, self.rule.candidates), "metadata": {"candidate": k}}
                for k, (_, c) in enumerate(candidates)
            ]
            scores = await session.score_group(wire, timeout_s=self.timeout_s)
        except ors_errors.ScoreGroupUnsupported as e:
            self.supported = False
            self._failed(candidates, "unsupported", e)
            return
        except Exception as e:  # noqa: BLE001 - ScoreGroupFailed, a deadline, the transport, a bug: never
            # ends training, the pointwise rewards stand
            self._failed(candidates, "failed", e)
            return
        self.supported = True
        for (episode, _), score in zip(candidates, scores, strict=True):
            reward = finite(score.reward)
            if reward is None:
                _mark([episode], "failed", error="score_group answered a reward that is not a finite number")
                continue
            episode.group_status = "scored"
            episode.group_reward = reward
            episode.group_metadata = score.metadata

    def _failed(self, candidates: Sequence[tuple[Any, Any]], status: str, exc: BaseException) -> None:
        _mark([episode for episode, _ in candidates], status, error=_short(exc))
        if not self._warned:  # once per process: the metric counts every one
            self._warned = True
            member = candidates[0][0].member
            logger.warning(
                "ormix %s: group scoring %s (%s); the pointwise rewards stand, counted in "
                "ormix/%s/group_score_failed",
                member,
                status,
                _short(exc),
                member,
            )


def _mark(episodes: Sequence[Any], status: str, *, error: str | None = None) -> None:
    for episode in episodes:
        episode.group_status = status
        episode.group_reward = None
        episode.group_metadata = None
        episode.group_error = error


def _short(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return text if len(text) <= _ERROR_LIMIT else text[: _ERROR_LIMIT - 3] + "..."
