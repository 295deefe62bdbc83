"""`RewardFunction`: one spec's (or mixture member's) outcome-only reward, with explicit observers.

TRL calls each reward function with the whole batch (`environments` is one environment per rollout, in
order). A member's function scores the rollouts whose episode belongs to it (`EpisodeConfig.token`) and
returns `None` for the others, so TRL logs `rewards/<member>/mean` over the member's rollouts only. An
infrastructure error is always `None` (never a 0).

A member that scores groups (``group_scoring:``, a `GroupScorer`) has each GRPO group of its rollouts
scored by the environment before the function returns: the whole batch is visible here (groups are TRL's
``num_generations`` consecutive rows) and the sessions are still open; the group score combines with the
pointwise reward (`ormix.rollout._group_scoring.combine_rewards`), or, when scoring failed, the pointwise
reward stands.

Computing rewards is all it does itself. What else happens to a scored batch — per-member metrics and rollout
records (`ormix.telemetry`), closing the scored sessions (`SessionCloser`) — are *observers*, attached by
whoever builds the function (`OpenRewardSpec`, `MixtureSpec`) or by a trainer callback, and called in order
after the rewards are computed. The function and its default observers pickle (TRL's AsyncGRPOTrainer
sends reward functions to a spawned worker).

Example:
    >>> from ormix.rollout._outcome import Outcome
    >>> class Done:  # a stand-in for an Episode of member "echo" (what a reward function reads)
    ...     token, outcome = "t1", Outcome("scored", 1.0)
    >>> reward = RewardFunction("echo", token="t1")
    >>> reward.__name__, reward(environments=[Done(), None])
    ('echo', [1.0, None])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ormix.rollout._episode import close_episodes
from ormix.rollout._group_scorer import GroupScorer, group_geometry
from ormix.rollout._group_scoring import combine_rewards, groups_of
from ormix.rollout._outcome import training_reward
from ormix.telemetry._metrics import group_ids


def episode_of(environment: Any) -> Any:
    """The episode behind a TRL environment: an `Episode` itself, or a `RoutingEnvironment`'s active one."""
    return getattr(environment, "episode", environment)


@dataclass
class ScoredBatch:
    """One member's view of a batch TRL just scored, handed to every observer.

    Attributes:
        member: the reward function's name.
        environments: the whole batch's environments, in order.
        rewards: what the function returned for each rollout (`None` for other members' rollouts).
        mine: ``(position, episode)`` of this member's rollouts.
        prompts, trainer_state, log_metric: as TRL passed them (``log_metric`` pools over processes).
        completions: TRL's completions of the whole batch (message lists, tool results included), or `None`.
    """

    member: str
    environments: Sequence[Any]
    rewards: list[float | None]
    mine: list[tuple[int, Any]]
    prompts: Sequence[Any] | None = None
    trainer_state: Any = None
    log_metric: Callable[[str, float], None] | None = None
    completions: Sequence[Any] | None = None


class RolloutObserver(Protocol):
    """Called with every batch a reward function scored (after the rewards are computed)."""

    def __call__(self, batch: ScoredBatch) -> None: ...


class SessionCloser:
    """Closes the sessions of a scored batch's rollouts, all at once (an observer).

    TRL never closes its environments; a session whose reward was read is done, and closing it frees the
    server's sandbox now rather than at the rollout slot's next `reset()`.
    """

    def __call__(self, batch: ScoredBatch) -> None:
        close_episodes([episode for _, episode in batch.mine])


@dataclass
class RewardFunction:
    """The outcome-only reward of one member's rollouts: the last non-null reward, scaled.

    Args:
        member: the name TRL logs it under (``rewards/<member>/mean``); also ``__name__``.
        token: the `EpisodeConfig.token` of the member's episodes (how its rollouts are recognised).
        scale: multiplies the environment's reward.
        unscored_reward: the value of a rollout whose session worked but returned no reward (``None``: left
            out of GRPO). Infrastructure errors are always ``None``.
        observers: called with each `ScoredBatch`, in order.
        group_scorer: scores each GRPO group of the member's rollouts on the environment (`None`: pointwise
            rewards only).
    """

    member: str
    token: str
    scale: float = 1.0
    unscored_reward: float | None = None
    observers: list[RolloutObserver] = field(default_factory=list)
    group_scorer: GroupScorer | None = None

    @property
    def __name__(self) -> str:
        """TRL names a reward function's metrics after ``__name__``."""
        return self.member

    def __call__(
        self,
        environments: Sequence[Any] | None = None,
        prompts: Sequence[Any] | None = None,
        trainer_state: Any = None,
        log_metric: Callable[[str, float], None] | None = None,
        completions: Sequence[Any] | None = None,
        **_: Any,
    ) -> list[float | None]:
        environments = list(environments or [])
        rewards: list[float | None] = []
        mine: list[tuple[int, Any]] = []
        for i, environment in enumerate(environments):
            episode = episode_of(environment)
            if episode is None or getattr(episode, "token", None) != self.token:
                rewards.append(None)
                continue
            rewards.append(
                training_reward(episode.outcome, scale=self.scale, unscored_reward=self.unscored_reward)
            )
            mine.append((i, episode))
        if self.group_scorer is not None and self.group_scorer.rule.active and mine:
            self._score_groups(environments, rewards, mine, prompts, log_metric, completions)
        batch = ScoredBatch(
            self.member, environments, rewards, mine, prompts, trainer_state, log_metric, completions
        )
        for observe in list(self.observers):
            observe(batch)
        return rewards

    def _score_groups(
        self,
        environments: Sequence[Any],
        rewards: list[float | None],
        mine: list[tuple[int, Any]],
        prompts: Sequence[Any] | None,
        log_metric: Any,
        completions: Sequence[Any] | None,
    ) -> None:
        """Score the member's GRPO groups of this batch and combine each group score into ``rewards``."""
        assert self.group_scorer is not None
        n = len(environments)
        size, rank = group_geometry(log_metric)
        keys = [repr(p) for p in prompts] if prompts is not None and len(prompts) == n else None
        ids = group_ids(n, rank=rank, num_generations=size, keys=keys)
        texts = list(completions) if completions is not None and len(completions) == n else [""] * n
        episode_at = dict(mine)
        groups = groups_of(ids, [i for i, _ in mine])
        self.group_scorer.score([([episode_at[i] for i in g], [texts[i] for i in g]) for g in groups])
        rule = self.group_scorer.rule
        for i, episode in mine:
            group = episode.group_reward if episode.group_status == "scored" else None
            rewards[i] = combine_rewards(rewards[i], None if group is None else group * self.scale, rule)
