"""The one planner of a mixture: which member and task each training row is, for every strategy (pure).

A `Planner` is built from the mixture's `MixtureConfig` and each train member's task indices. Its weight
source is the config's: fixed (``weights``, ``temperature``, ``round_robin``), a ``schedule`` of phases
(optionally interpolated) or ``adaptive`` (`ormix.mixture._adaptive`: weights that follow the pooled
statistics handed to `Planner.observe`). Every strategy then goes through the same steps: one quota rule, one
task cycler, one state (`Planner.state_dict`). Static plans are materialised at once (`Planner.plan`); an
adaptive plan's rows are decided as the trainer fetches them (`Planner.rows`), from the statistics of the
steps up to ``step - lag`` (``lag`` = 2: when step *t* is fetched, step *t - 1* may still be running, step
*t - 2* is complete on every rank). Asking for step *t* before step *t - lag* was observed raises
`MixtureError` (a loader prefetching deeper than the lag would make ranks disagree).

Steps count from 1, as training does. A phase holds until its ``until_step`` (exclusive): ``until_step: 100``
covers steps 1-99 and step 100 is the next phase's first. Interpolated weights move linearly from the phase's
weights at its first step to the next phase's at ``until_step``.

Quotas ("no environment starves"). With ``prompts_per_step = k`` every step has exactly k rows. Member i's
share of a step is ``w_i * k``: it gets ``floor(w_i * k)`` rows, and the ``r = k - sum of floors`` rows left
go one each to members with a fractional part ``f_i > 0``, by carried credit: ``F_i``, the sum of the
member's fractional parts since the current phase began (an adaptive plan never restarts), is its target of
extra rows and ``E_i`` the extra rows it got. The j-th extra row of a step goes to a member that has had none
this step, preferring one still below its target at that row (``E_i < F_i + f_i * j / r``), then the largest
``(F_i + f_i * j / r) / (E_i + 1)``, then a seeded draw per step (by name for ``round_robin``, which makes it
a strict rotation). With ``T_i`` the member's target (the sum of ``w_i * k``) and ``C_i`` its rows, ``T_i -
C_i = F_i - E_i``. What holds:

- for any weights, every step has exactly k rows and member i gets ``floor(w_i * k)`` or ``ceil(w_i * k)``
  of them (so a member with ``w_i * k >= 1`` is in every step, and one at weight 0 in none);
- for constant weights (a fixed strategy, a non-interpolated phase) the running count stays within one row of
  its target: ``floor(T_i) <= C_i <= ceil(T_i)``, i.e. the credit ``T_i - C_i`` stays in (-1, 1). The extra
  rows are a Pfair schedule (S. Baruah et al., "Proportionate progress", Algorithmica 15, 1996: r processors,
  one per member per step, rates ``f_i``), for which such a sequence exists; the rule above is the quota
  method of Balinski and Young (1975) restricted to one extra per step, and is property-tested, not proven,
  to find one (tests/mixture/test_sampling.py). A member with p = 0.1 at k = 4 therefore appears in exactly 2
  of every 5 steps, instead of never (per-step largest remainder) or at random (i.i.d. draws: starved in
  0.9 ** 4 ≈ 66% of steps);
- for weights that change between steps (interpolated phases, adaptive) no online rule can promise the
  running bound for every weight sequence; the property tests check that a member is never two rows behind
  or a whole row ahead (``T_i - 2 < C_i <= ceil(T_i)``).

Without ``prompts_per_step`` rows are i.i.d. draws from the member probabilities (``round_robin``: the
rotation), with no steps.

Tasks: each member draws its tasks without replacement from a seeded permutation, a fresh one per cycle, that
depends only on ``(seed, member name, its task list)``; tasks a member's adaptive ``filter`` has set aside are
skipped (unless all are). Rows within a step are shuffled (seeded). Seeds come from `derive_seed` (SHA-256),
never ``hash()``, so the same config and seed give the same rows on every rank, run and process.

Task filtering (adaptive; every member's by default, `MixtureConfig.task_filter` says which rule): a task
whose last ``window`` groups (more when they are small: as many as hold ``min_rollouts`` rollouts) were all
solved or all failed is set aside for ``cooldown_steps`` steps, then comes back; a metadata prior (pass rates
by a metadata value) can set tasks aside from the start. A decision made from the statistics of step *s*
applies from step *s + lag*, like the weights.

The platform prior (``prior: platform``) seeds the filter's per-task statistics with the rollouts logged on
the OpenReward platform (`Evidence`: the min and max reward of a task's logged rollouts and their number,
`evidence_of`). A task whose logged rollouts all solved it or all failed it (`prior_outcome`; rewards that
differ teach, as in a group) starts set aside when they are at least ``max(min_rollouts, window)``; fewer
are credit (`prior_decisions`): at the task's first group in training, they count as ``rollouts // group
size`` earlier groups of that outcome, so a task the prior and training agree on is set aside sooner. The
credit not yet used is checkpointed with the rest (`state_dict`), so a resumed run does not ask again.

State. The planner keeps what its decisions read and no more: the statistics of the steps the next
decisions read (``lag + max(window, progress_window)`` steps), the rows and weights of `KEPT_STEPS` steps
beyond those (asking for an older step raises `MixtureError`; observing one again changes nothing), the
quota credits, each member's place in its task cycle (a cursor and a cycle count: the cycle's order is
derived from the seed again), and the task filter's state (each task's last outcomes, the spans of tasks
set aside, grouped). `Planner.state_dict` is the same size at step 10,000 as at step 1,000
(`benchmarks/scale.py`); a checkpoint of the first format, which kept every step, still loads and continues
with the same rows.

Example:
    >>> from ormix.config import MixtureConfig
    >>> cfg = MixtureConfig(members={"a": {"target": "local:echo"}, "b": {"target": "local:echo"}},
    ...                     weights={"a": 0.9, "b": 0.1}, prompts_per_step=4, num_steps=5)
    >>> planner = Planner(cfg, {"a": [0, 1, 2], "b": [0, 1]})
    >>> [sum(m == "b" for m, _ in planner.rows(s)) for s in range(1, 6)]
    [0, 1, 0, 0, 1]
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ormix._errors import MixtureError
from ormix.config import AdaptiveConfig, MixtureConfig, PlatformPriorConfig, PriorConfig, TaskFilterConfig
from ormix.mixture._adaptive import Group, StepStats, constrain, noise_estimates, scores, step_stats
from ormix.telemetry._metrics import is_informative, present_rewards

#: Steps the statistics are behind the rows they decide (see the module docstring).
LAG = 2
#: Rows of an adaptive plan without ``num_samples`` or ``num_steps`` (the trainer's ``max_steps`` sizes it).
ADAPTIVE_DEFAULT_STEPS = 1000
#: Decided steps whose rows and weights stay readable beyond those the statistics window reaches (a loader or
#: a log may look a little back; older ones are forgotten, so the state does not grow with the run).
KEPT_STEPS = 64
#: The version of `Planner.state_dict`'s format (1: every step's statistics, rows and weights; 2: bounded).
STATE_FORMAT = 2
# The filter's outcomes of a task's groups, one letter each in the state (solved, failed, mixed).
_KINDS = {"solved": "s", "failed": "f", "mixed": "m"}
_KIND_OF = {v: k for k, v in _KINDS.items()}
# Targets are sums of floats: a member whose target is a whole number up to this much is on it, not below.
_EPS = 1e-9


@dataclass(frozen=True)
class Evidence:
    """A task's logged rollouts, as the platform prior reads them: their lowest and highest reward and how
    many there are.

    Example:
        >>> Evidence(1.0, 1.0, 12).rollouts
        12
    """

    min_reward: float
    max_reward: float
    rollouts: int


@dataclass(frozen=True)
class PriorDecision:
    """What the platform prior does with one task: its ``outcome`` (``solved`` or ``failed``), the
    ``rollouts`` behind it, and whether it starts set aside (``aside``) or only counts toward the filter's
    first decision on the task (credit).

    Example:
        >>> PriorDecision("solved", 12, True).aside
        True
    """

    outcome: str
    rollouts: int
    aside: bool


def evidence_of(rows: Sequence[Any]) -> dict[int, Evidence]:
    """Task index → `Evidence` from task-difficulty rows (anything with ``task_index``, ``min_reward``,
    ``max_reward``, ``num_rollouts``, as `ormix.ors._catalog.TaskDifficulty`). Rows of one task (one per
    variant of an environment asked without one) are pooled: the lowest min, the highest max, the summed
    count; rows without rollouts are left out. The result does not depend on the rows' order.

    Example:
        >>> from types import SimpleNamespace as Row
        >>> evidence_of([Row(task_index=2, min_reward=1.0, max_reward=1.0, num_rollouts=4),
        ...              Row(task_index=2, min_reward=0.0, max_reward=1.0, num_rollouts=2)])
        {2: Evidence(min_reward=0.0, max_reward=1.0, rollouts=6)}
    """
    out: dict[int, Evidence] = {}
    for row in rows:
        n = int(row.num_rollouts)
        if n <= 0:
            continue
        index, lo, hi = int(row.task_index), float(row.min_reward), float(row.max_reward)
        had = out.get(index)
        if had is not None:
            lo, hi, n = min(lo, had.min_reward), max(hi, had.max_reward), n + had.rollouts
        out[index] = Evidence(lo, hi, n)
    return dict(sorted(out.items()))


def prior_outcome(evidence: Evidence, *, solved: float, failed: float) -> str | None:
    """``"solved"`` when every logged rollout solved the task (all rewards equal and >= ``solved``),
    ``"failed"`` when every one failed it (equal and <= ``failed``), else ``None``: rewards that differ
    teach, as the filter reads a group (`ormix.telemetry._metrics.is_informative`), and no rollouts say
    nothing.

    Example:
        >>> seen = [Evidence(1.0, 1.0, 4), Evidence(0.0, 0.0, 4), Evidence(0.0, 1.0, 4)]
        >>> [prior_outcome(e, solved=1.0, failed=0.0) for e in seen]
        ['solved', 'failed', None]
    """
    if evidence.rollouts <= 0 or is_informative([evidence.min_reward, evidence.max_reward]):
        return None
    if evidence.min_reward >= solved:
        return "solved"
    if evidence.max_reward <= failed:
        return "failed"
    return None


def prior_decisions(evidence: Mapping[int, Evidence], rule: TaskFilterConfig) -> dict[int, PriorDecision]:
    """What the platform prior does with each task under a filter ``rule`` (pure): a task its logged rollouts
    all solved or all failed starts set aside when they are at least ``max(rule.min_rollouts, rule.window)``
    (as many as the filter wants of training's groups), else is credit; other tasks are left out.

    Example:
        >>> rule = TaskFilterConfig(min_rollouts=8)
        >>> seen = {0: Evidence(1.0, 1.0, 12), 1: Evidence(0.0, 0.0, 3), 2: Evidence(0.0, 1.0, 9)}
        >>> for task, decision in prior_decisions(seen, rule).items():
        ...     print(task, decision)
        0 PriorDecision(outcome='solved', rollouts=12, aside=True)
        1 PriorDecision(outcome='failed', rollouts=3, aside=False)
    """
    enough = max(rule.min_rollouts, rule.window)
    out: dict[int, PriorDecision] = {}
    for task in sorted(evidence):
        seen = evidence[task]
        outcome = prior_outcome(seen, solved=rule.solved, failed=rule.failed)
        if outcome is not None:
            out[int(task)] = PriorDecision(outcome, seen.rollouts, seen.rollouts >= enough)
    return out


@dataclass(frozen=True)
class PlanRow:
    """One planned dataset row: which member, which of its task indices, at which step (from 1; ``None``
    without ``prompts_per_step``) and position in the dataset.

    Example:
        >>> PlanRow("seta", 7, 1, 0).member
        'seta'
    """

    member: str
    task_index: int
    step: int | None
    position: int


def derive_seed(seed: int, *parts: str) -> int:
    """A 64-bit seed derived from ``seed`` and string parts by SHA-256 (stable across processes).

    Example:
        >>> derive_seed(0, "tasks", "a") == derive_seed(0, "tasks", "a") != derive_seed(1, "tasks", "a")
        True
    """
    text = "\x1f".join([str(int(seed)), *parts])
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def fixed_steps(settings: AdaptiveConfig, lag: int = LAG) -> int:
    """How many first steps of an adaptive plan use the starting weights whatever the statistics: the
    warm-up, and at least the lag (the statistics of step *t* decide step *t + lag*).

    Example:
        >>> fixed_steps(AdaptiveConfig(warmup_steps=1)), fixed_steps(AdaptiveConfig(warmup_steps=5))
        (2, 5)
    """
    return max(settings.warmup_steps, max(1, lag))


def _check_step(step: object) -> None:
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise MixtureError(f"steps count from 1, not {step!r}")


def _normalised(weights: Mapping[str, float], members: Sequence[str]) -> dict[str, float]:
    """The weights as shares summing to 1 (equal shares when none is positive).

    Example:
        >>> _normalised({"a": 1e308, "b": 1e308}, ["a", "b"])   # scaled first: the sum would overflow
        {'a': 0.5, 'b': 0.5}
    """
    raw = {m: max(0.0, float(weights.get(m, 0.0))) for m in members}
    try:
        total = math.fsum(raw.values())
    except OverflowError:
        top = max(raw.values())  # only the ratios matter; the usual path stays bit for bit as it was
        raw = {m: w / top for m, w in raw.items()}
        total = math.fsum(raw.values())
    if total <= 0:
        return {m: 1.0 / len(members) for m in members}
    return {m: w / total for m, w in raw.items()}


class Planner:
    """The rows of every training step of a mixture (see the module docstring).

    Args:
        config: the mixture (`ormix.config.MixtureConfig`, validated: its check-time rules hold).
        tasks: train member → its task indices (every train member, each with at least one task).
        metadata: member → task index → task spec, for an adaptive filter's metadata ``prior``.
        difficulty: member → task index → `Evidence`, for an adaptive filter's ``prior: platform``
            (`evidence_of` the platform's task difficulty; every rank asks, and a trainer starts every
            rank from process 0's planner, in its adaptive callback).
        lag: steps between the statistics and the rows they decide (`LAG`).

    Example:
        >>> from ormix.config import MixtureConfig
        >>> cfg = MixtureConfig(members={"a": {"target": "local:echo"}, "b": {"target": "local:echo"}},
        ...                     strategy="adaptive", prompts_per_step=4, adaptive={"warmup_steps": 1})
        >>> p = Planner(cfg, {"a": [0, 1], "b": [0, 1]})
        >>> sorted(m for m, _ in p.rows(1)), p.weights(1)
        (['a', 'a', 'b', 'b'], {'a': 0.5, 'b': 0.5})
        >>> p.observe(1, {"a": [(0, [1.0, 1.0]), (1, [1.0, 1.0])], "b": [(0, [0.0, 1.0]), (1, [1.0, 0.0])]})
        >>> p.weights(3)["b"] > p.weights(3)["a"]
        True
        >>> try:
        ...     p.rows(4)
        ... except MixtureError as err:
        ...     print("step(s) [2]" in str(err))
        True
    """

    def __init__(
        self,
        config: MixtureConfig,
        tasks: Mapping[str, Sequence[int]],
        *,
        metadata: Mapping[str, Mapping[int, Mapping[str, Any]]] | None = None,
        difficulty: Mapping[str, Mapping[int, Evidence]] | None = None,
        lag: int = LAG,
        hold_unobserved: bool = False,
    ) -> None:
        if not tasks:
            raise MixtureError("the mixture has no train members; add at least one environment")
        empty = sorted(m for m, t in tasks.items() if not t)
        if empty:
            raise MixtureError(f"member(s) {empty} have no tasks: check num_tasks / indices / where")
        self.config = config
        # What the priors were built from, kept so `fresh` can build the same planner with another lag.
        self._metadata = metadata
        self._difficulty = difficulty
        self.members = sorted(tasks)
        self.tasks = {m: list(tasks[m]) for m in self.members}
        self.k = config.prompts_per_step
        self.seed = config.seed
        self.adaptive = config.strategy == "adaptive"
        self.settings = config.adaptive or AdaptiveConfig()
        self.lag = max(1, lag)
        # A step whose statistics (t - lag) are not in yet keeps the weights of the step before (counted in
        # `held`) instead of refusing: TRL's async worker draws a row while an older group may still be in
        # flight, however long, so no lag can promise the statistics there.
        self.hold_unobserved = hold_unobserved
        self.held: list[int] = []
        self.phases = list(config.schedule or [])
        self.base = self._fixed_weights()
        self.filters = {m: f for m in self.members if (f := config.task_filter(m)) is not None}
        # What a decision reads: the statistics of the steps up to `lag` before it, as far back as the longer
        # window. Older statistics, rows and weights are forgotten (`_forget`), so memory and checkpoints stay
        # the same size however long the run.
        self._window = max(self.settings.window, self.settings.progress_window) if self.adaptive else 0
        self._decided = 0  # the last step decided
        self._stats_floor = 1  # history holds no step below it (nor will: observing one is ignored)
        self._rows_floor = 1  # rows and weights: the same
        # Pooled statistics, by step (adaptive plans): member → [(task, rewards)].
        self.history: dict[int, dict[str, list[Group]]] = {}
        self._weights: dict[int, dict[str, float]] = {}
        self._rows: dict[int, list[tuple[str, int]]] = {}
        # Distinct tasks per member (a member whose every task is set aside still gets rows).
        self._distinct = {m: len(set(self.tasks[m])) for m in self.members}
        # The carried credit since the phase began: F_i (sum of fractional shares), E_i (extra rows it got).
        self._frac_target = dict.fromkeys(self.members, 0.0)
        self._extras = dict.fromkeys(self.members, 0)
        self._cursor = dict.fromkeys(self.members, 0)  # position in the member's current permutation
        self._cycle = dict.fromkeys(self.members, 0)
        self._perms: dict[str, tuple[int, list[int]]] = {}  # cache: member → (cycle, permutation)
        self._summary: dict[int, dict[str, StepStats]] = {}  # cache of history
        # What the adaptive signal believed when it decided a step: member → (noise, signal value). Derived
        # from the history (not checkpointed): for the logs only.
        self._beliefs: dict[int, dict[str, tuple[float, float]]] = {}
        self._task_history: dict[str, dict[int, list[str]]] = {m: {} for m in self.members}
        # member → task → (first step set aside, first step back), and how many tasks share each such span
        # (few spans, however many tasks: a step's count of tasks set aside reads the spans, not the tasks).
        self._aside: dict[str, dict[int, tuple[int, int]]] = {m: {} for m in self.members}
        self._spans: dict[str, dict[tuple[int, int], int]] = {m: {} for m in self.members}
        # member → task → (outcome, rollouts): the platform prior's credit, used at the task's first group.
        self._credit: dict[str, dict[int, tuple[str, int]]] = {m: {} for m in self.members}
        for member, rule in self.filters.items():
            if isinstance(rule.prior, PriorConfig):
                for index, spec in (metadata or {}).get(member, {}).items():
                    rate = rule.prior.pass_rates.get(str(spec.get(rule.prior.field)))
                    if rate is not None and (rate >= 0.9 or rate <= 0.1):
                        self._set_aside(member, int(index), (1, 1 + rule.cooldown_steps))
            elif isinstance(rule.prior, PlatformPriorConfig):
                mine = set(self.tasks[member])
                seen = {t: e for t, e in (difficulty or {}).get(member, {}).items() if int(t) in mine}
                for task, decision in prior_decisions(seen, rule).items():
                    if decision.aside:
                        self._set_aside(member, task, (1, 1 + rule.cooldown_steps))
                    else:
                        self._credit[member][task] = (decision.outcome, decision.rollouts)

    def fresh(self, *, lag: int = LAG, hold_unobserved: bool = False) -> Planner:
        """A planner of the same config, tasks and priors (the metadata and platform priors' decisions made
        at construction), with no statistics observed yet, deciding with ``lag``: what TRL's async worker
        plans with.

        Example:
            >>> from ormix.config import MixtureConfig
            >>> cfg = MixtureConfig(members={"a": {"target": "local:echo"}}, prompts_per_step=1)
            >>> Planner(cfg, {"a": [0, 1]}).fresh(lag=3).lag
            3
        """
        return Planner(
            self.config,
            self.tasks,
            metadata=self._metadata,
            difficulty=self._difficulty,
            lag=lag,
            hold_unobserved=hold_unobserved,
        )

    # ── sizes and weights ─────────────────────────────────────────────

    @property
    def num_rows(self) -> int:
        """Rows of the training dataset: ``num_samples``, else ``num_steps * prompts_per_step``, else (static)
        every task once or (adaptive) `ADAPTIVE_DEFAULT_STEPS` steps."""
        cfg = self.config
        if cfg.num_samples is not None:
            return cfg.num_samples
        if cfg.num_steps is not None and self.k is not None:
            return cfg.num_steps * self.k
        if self.adaptive and self.k is not None:
            return ADAPTIVE_DEFAULT_STEPS * self.k
        return sum(len(t) for t in self.tasks.values())

    def _fixed_weights(self) -> dict[str, float]:
        cfg = self.config
        if cfg.strategy == "temperature":
            # Log space keeps small temperatures (huge exponents) from overflowing.
            logs = {m: math.log(len(self.tasks[m])) / cfg.temperature for m in self.members}
            top = max(logs.values())
            return _normalised({m: math.exp(v - top) for m, v in logs.items()}, self.members)
        return _normalised(cfg.static_weights() or {}, self.members)

    def _phase_weights(self, step: int) -> tuple[dict[str, float], int]:
        """The schedule's weights at ``step`` and the first step of its phase."""
        start = 1
        for i, phase in enumerate(self.phases):
            end = phase.until_step
            if end is None or step < end:
                here = _normalised(phase.weights, self.members)
                if phase.interpolate and end is not None and i + 1 < len(self.phases):
                    after = _normalised(self.phases[i + 1].weights, self.members)
                    a = (step - start) / (end - start)
                    return {m: (1.0 - a) * here[m] + a * after[m] for m in self.members}, start
                return here, start
            start = end
        return _normalised(self.phases[-1].weights, self.members), start

    def weights(self, step: int) -> dict[str, float]:
        """The member weights in force at `step` (deciding the steps before it first).

        Example:
            >>> from ormix.config import MixtureConfig
            >>> cfg = MixtureConfig(members={"a": {"target": "local:echo"}, "b": {"target": "local:echo"}},
            ...                     prompts_per_step=2,
            ...                     schedule=[{"until_step": 3, "weights": {"a": 1, "b": 0}},
            ...                               {"weights": {"a": 0, "b": 1}}])
            >>> [Planner(cfg, {"a": [0], "b": [0]}).weights(s)["a"] for s in (1, 2, 3)]
            [1.0, 1.0, 0.0]
        """
        self._decide_through(step)
        return dict(self._weights[step])

    def beliefs(self, step: int) -> dict[str, dict[str, float]]:
        """What the adaptive signal believed of each member when it decided `step`: its outcome noise
        (`ormix.mixture._adaptive.noise_estimates`), its signal value (the score its weight follows) and the
        weight; empty for a step decided on the starting weights, or before a resume (they are logs, not
        state).

        Example:
            >>> from ormix.config import MixtureConfig
            >>> cfg = MixtureConfig(members={"a": {"target": "local:echo"}, "b": {"target": "local:echo"}},
            ...                     strategy="adaptive", prompts_per_step=2)
            >>> p = Planner(cfg, {"a": [0], "b": [0]})
            >>> for s in (1, 2): p.observe(s, {"a": [(0, [1.0, 0.0])], "b": [(0, [1.0, 1.0])]})
            >>> sorted(p.beliefs(4)["a"]), p.beliefs(1)
            (['noise', 'signal', 'weight'], {})
        """
        weights = self.weights(step)
        return {
            m: {"noise": noise, "signal": signal, "weight": weights[m]}
            for m, (noise, signal) in self._beliefs.get(step, {}).items()
        }

    # ── rows ──────────────────────────────────────────────────────────

    def rows(self, step: int) -> list[tuple[str, int]]:
        """The (member, task index) rows of `step`, in their order within the step (needs
        ``prompts_per_step``).

        Example:
            >>> from ormix.config import MixtureConfig
            >>> cfg = MixtureConfig(members={"a": {"target": "local:echo"}}, prompts_per_step=3)
            >>> Planner(cfg, {"a": [4, 5]}).rows(1)
            [('a', 5), ('a', 4), ('a', 5)]
        """
        self._decide_through(step)
        return list(self._rows[step])

    def plan(self) -> list[PlanRow]:
        """The rows known before training: every row of a static plan (`num_rows` of them); an adaptive plan's
        first ``lag`` steps (the rest depend on statistics). Call it on a fresh planner.

        Example:
            >>> from ormix.config import MixtureConfig
            >>> cfg = MixtureConfig(members={"a": {"target": "local:echo"}, "b": {"target": "local:echo"}},
            ...                     strategy="round_robin", num_samples=3)
            >>> [(r.member, r.step) for r in Planner(cfg, {"a": [0], "b": [0]}).plan()]
            [('a', None), ('b', None), ('a', None)]
        """
        size = self.num_rows
        if self.k is None:
            if self.config.strategy == "round_robin":
                seq = [self.members[i % len(self.members)] for i in range(size)]
            else:
                names = [m for m in self.members if self.base[m] > 0]
                draws = random.Random(derive_seed(self.seed, "draws"))
                seq = draws.choices(names, weights=[self.base[m] for m in names], k=size)
            return [PlanRow(m, self._next_task(m, 1), None, i) for i, m in enumerate(seq)]
        steps = min(self.lag, -(-size // self.k)) if self.adaptive else -(-size // self.k)
        out = [(m, t, s) for s in range(1, steps + 1) for m, t in self.rows(s)]
        return [PlanRow(m, t, s, i) for i, (m, t, s) in enumerate(out[:size])]

    def tasks_set_aside(self, member: str, step: int) -> int:
        """How many of a member's tasks are set aside at `step` (deciding the steps before it first).

        Example:
            >>> from ormix.config import MixtureConfig
            >>> rule = {"cooldown_steps": 1, "prior": {"field": "level", "pass_rates": {"easy": 0.95}}}
            >>> cfg = MixtureConfig(strategy="adaptive", prompts_per_step=1,
            ...                     members={"a": {"target": "local:echo", "filter": rule}})
            >>> p = Planner(cfg, {"a": [0, 1]}, metadata={"a": {0: {"level": "easy"}, 1: {"level": "hard"}}})
            >>> p.tasks_set_aside("a", 1), p.tasks_set_aside("a", 2)
            (1, 0)
        """
        self._decide_through(step)
        return self._aside_at(member, step)

    def _aside_at(self, member: str, step: int) -> int:
        return sum(n for (start, back), n in self._spans.get(member, {}).items() if start <= step < back)

    def _set_aside(self, member: str, task: int, span: tuple[int, int]) -> None:
        spans = self._spans[member]
        old = self._aside[member].get(task)
        if old is not None and old in spans:  # a span already forgotten (`_forget`) counts no step still read
            spans[old] -= 1
            if not spans[old]:
                del spans[old]
        self._aside[member][task] = span
        spans[span] = spans.get(span, 0) + 1

    def _decide_through(self, step: int) -> None:
        """Decide the steps up to ``step``, which must still be kept."""
        _check_step(step)
        if self.k is None:
            raise MixtureError("a plan without prompts_per_step has no steps; set prompts_per_step")
        if step > self._decided:
            for s in range(self._decided + 1, step + 1):
                self._decide(s, self.k)
            self._forget()
        if step < self._rows_floor:
            raise MixtureError(
                f"step {step} was decided {self._decided - step} steps ago; the planner keeps the rows and "
                f"weights of its last {self._decided - self._rows_floor + 1} steps (older ones are forgotten)"
            )

    def _forget(self) -> None:
        """Drop what no decision reads any more: statistics older than the window the next decision reads,
        rows and weights older than that and `KEPT_STEPS`, spans of set-aside tasks over before those."""
        # The next decision (step d + 1) reads the statistics of steps d + 2 - lag - window ... d + 1 - lag.
        stats_from = self._decided + 2 - self.lag - self._window
        while self._stats_floor < stats_from:
            self.history.pop(self._stats_floor, None)
            self._stats_floor += 1
        rows_from = self._decided + 1 - self.lag - self._window - KEPT_STEPS
        if self._rows_floor < rows_from:
            while self._rows_floor < rows_from:
                self._rows.pop(self._rows_floor, None)
                self._weights.pop(self._rows_floor, None)
                self._rows_floor += 1
            for spans in self._spans.values():
                for span in [s for s in spans if s[1] <= rows_from]:
                    del spans[span]

    def _decide(self, step: int, k: int) -> None:
        if self.adaptive:
            weights = self._adaptive_weights(step)
        elif self.phases:
            weights, start = self._phase_weights(step)
            if step == start:  # each phase's quotas start over (the constant-weight bound holds per phase)
                self._frac_target = dict.fromkeys(self.members, 0.0)
                self._extras = dict.fromkeys(self.members, 0)
        else:
            weights = self.base
        self._decided = step
        self._weights[step] = weights
        block = self._seats(weights, step, k)
        if self.config.strategy != "round_robin":
            random.Random(derive_seed(self.seed, "positions", str(step))).shuffle(block)
        self._rows[step] = [(m, self._next_task(m, step)) for m in block]

    def _seats(self, weights: Mapping[str, float], step: int, k: int) -> list[str]:
        """The members of the step's k rows (the quota rule of the module docstring)."""
        tie: dict[str, float]
        if self.config.strategy == "round_robin":
            tie = {m: -float(i) for i, m in enumerate(self.members)}  # by name: a strict rotation
        else:
            ties = random.Random(derive_seed(self.seed, "ties", str(step)))
            tie = {m: ties.random() for m in self.members}
        share = {m: weights[m] * k for m in self.members}
        quota = {m: math.floor(share[m] + _EPS) for m in self.members}
        frac = {m: max(0.0, share[m] - quota[m]) for m in self.members}
        extras = k - sum(quota.values())
        base, taken = dict(self._frac_target), set()
        for seat in range(1, extras + 1):
            best: tuple[bool, bool, float, float] | None = None
            chosen = self.members[0]
            for m in self.members:
                if m in taken:
                    continue
                target = base[m] + frac[m] * seat / extras
                got = self._extras[m]
                # A member with a share to round up first (floats may leave one a hair short), then one below
                # its target at this row, then the quota method's priority, then the seeded tie.
                key = (frac[m] > _EPS, got < target - _EPS, target / (got + 1), tie[m])
                if best is None or key > best:
                    best, chosen = key, m
            taken.add(chosen)
            self._extras[chosen] += 1
            quota[chosen] += 1
        self._frac_target = {m: base[m] + frac[m] for m in self.members}
        if self.config.strategy != "round_robin":
            return [m for m in self.members for _ in range(quota[m])]
        # The rotation's order, continuing after the previous step's last row.
        out: list[str] = []
        n, i = len(self.members), (step - 1) * k
        while len(out) < k:
            m = self.members[i % n]
            if quota[m] > 0:
                out.append(m)
                quota[m] -= 1
            i += 1
        return out

    def _next_task(self, member: str, step: int) -> int:
        tasks = self.tasks[member]
        aside = self._aside[member]
        # The spans, not the tasks, are counted: a row costs the same with a million tasks as with ten.
        every = bool(aside) and self._aside_at(member, step) >= self._distinct[member]
        task = tasks[0]
        for _ in range(2 * len(tasks) + 1):  # every task is seen within two cycles
            task = self._permutation(member)[self._cursor[member]]
            self._cursor[member] += 1
            if self._cursor[member] >= len(tasks):
                self._cursor[member], self._cycle[member] = 0, self._cycle[member] + 1
            span = aside.get(task)
            if every or span is None or not span[0] <= step < span[1]:
                break
        return task

    def _permutation(self, member: str) -> list[int]:
        cycle = self._cycle[member]
        cached = self._perms.get(member)
        if cached is None or cached[0] != cycle:
            order = list(self.tasks[member])
            random.Random(derive_seed(self.seed, "tasks", member, str(cycle))).shuffle(order)
            self._perms[member] = cached = (cycle, order)
        return cached[1]

    # ── adaptive: statistics in, weights out ──────────────────────────

    def observe(self, step: int, groups: Mapping[str, Sequence[Group]]) -> None:
        """The pooled groups of a completed training step: member → [(task index, rewards of its rollouts)].

        A static plan ignores them. Members the planner does not train are ignored; a NaN reward is kept as
        ``None``. Observing a step again is allowed until a decision used it; after that only with the same
        groups. A step older than every statistic a decision still reads (the window) is ignored: it can
        change nothing, and its groups were forgotten.

        Example:
            >>> from ormix.config import MixtureConfig
            >>> cfg = MixtureConfig(members={"a": {"target": "local:echo"}, "b": {"target": "local:echo"}},
            ...                     strategy="adaptive", prompts_per_step=2)
            >>> p = Planner(cfg, {"a": [0], "b": [0]})
            >>> p.observe(1, {"a": [(0, [1.0, float("nan")])], "elsewhere": [(0, [0.0])]})
            >>> p.history[1]
            {'a': [(0, [1.0, None])], 'b': []}
        """
        _check_step(step)
        if not self.adaptive or step < self._stats_floor:
            return
        recorded: dict[str, list[Group]] = {
            m: [
                (int(t), [None if r is None or math.isnan(float(r)) else float(r) for r in rewards])
                for t, rewards in groups.get(m, ())
            ]
            for m in self.members
        }
        if step <= self._decided - self.lag and step in self.history and self.history[step] != recorded:
            raise MixtureError(
                f"step {step}'s statistics were already used to decide the rows of step {step + self.lag}; "
                "they cannot change now (is the trainer replaying a step?)"
            )
        self.history[step] = recorded
        self._summary.pop(step, None)

    def _adaptive_weights(self, step: int) -> dict[str, float]:
        cfg = self.settings
        previous = self._weights.get(step - 1, self.base)
        seen_through = step - self.lag
        if seen_through >= 1:
            if seen_through not in self.history and self.hold_unobserved:
                self.held.append(step)
                return dict(previous)
            if seen_through not in self.history:
                first = max(1, seen_through - self._window + 1)  # older steps are forgotten, not missing
                missing = [s for s in range(first, seen_through + 1) if s not in self.history]
                raise MixtureError(
                    f"the rows of step {step} need the statistics of step(s) {missing[-8:]}, which were not "
                    f"observed: adaptive mixing decides step t from steps <= t-{self.lag}; keep "
                    "dataloader_num_workers=0 so the trainer does not fetch rows further ahead"
                )
            self._filter_from(seen_through, step)
        if step <= fixed_steps(cfg, self.lag):
            return dict(self.base)
        first = max(1, seen_through - max(cfg.window, cfg.progress_window) + 1)
        window = [self._stats(s) for s in range(first, seen_through + 1) if s in self.history]
        rng = random.Random(derive_seed(self.seed, "adaptive", str(step)))
        score = scores(window, self.members, rng, cfg)
        if all(v is None for v in score.values()):
            target = dict(previous)  # nothing to go on: stay
        else:
            target = {m: (score[m] or 0.0) + 1e-12 for m in self.members}
            noise = noise_estimates(window, self.members)
            self._beliefs[step] = {m: (noise[m], score[m] or 0.0) for m in self.members}
            self._beliefs.pop(step - 4 * self.lag - 64, None)  # logs read the current step only
        return constrain(target, previous, floor=cfg.floor, max_change=cfg.max_change)

    def _stats(self, step: int) -> dict[str, StepStats]:
        if step not in self._summary:
            self._summary[step] = step_stats(self.history[step], self.members)
            self._summary.pop(step - max(self.settings.window, self.settings.progress_window) - 1, None)
        return self._summary[step]

    def _filter_from(self, observed: int, step: int) -> None:
        """Advance task filtering with the groups of step `observed` (what it sets aside applies from
        `step`)."""
        for member, rule in self.filters.items():
            past = self._task_history[member]
            for task, rewards in self.history[observed].get(member, []):
                present = present_rewards(rewards)
                if not present:
                    continue
                # A group whose rewards differ teaches (GRPO has a gradient there), whatever its range.
                kind = (
                    "mixed"
                    if is_informative(present)
                    else "solved"
                    if present[0] >= rule.solved
                    else "failed"
                    if present[0] <= rule.failed
                    else "mixed"
                )
                if task not in past and task in self._credit[member]:
                    # The platform prior's rollouts, as earlier groups of this group's size (once).
                    outcome, rollouts = self._credit[member].pop(task)
                    past[task] = [outcome] * (rollouts // len(present))
                recent = past.setdefault(task, [])
                recent.append(kind)
                del recent[: -max(rule.window, rule.min_rollouts)]
                # Small groups agree by chance: as many of the last groups as hold min_rollouts rollouts.
                needed = max(rule.window, -(-rule.min_rollouts // len(present)))
                last = recent[-needed:]
                if len(last) == needed and len(set(last)) == 1 and last[0] != "mixed":
                    self._set_aside(member, task, (step, step + rule.cooldown_steps))
                    # Forgotten rather than kept empty: the same to the filter (a task's prior credit is used
                    # at its first group, so none is left for it), and nothing kept per task once settled.
                    del past[task]

    # ── checkpoints ───────────────────────────────────────────────────

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly, as JSON data (every strategy): the statistics the window
        still reads, the rows and weights of the last steps (`KEPT_STEPS` beyond the window), the quota
        credits, each member's place in its task cycle, and the task filter's state (each task's recent
        outcomes, grouped by outcomes; the spans of tasks set aside, grouped by span). Its size does not grow
        with the steps.

        Example:
            >>> from ormix.config import MixtureConfig
            >>> cfg = MixtureConfig(members={"a": {"target": "local:echo"}}, prompts_per_step=2)
            >>> p = Planner(cfg, {"a": [0, 1, 2]}); _ = p.rows(2)
            >>> q = Planner(cfg, {"a": [0, 1, 2]}); q.load_state_dict(p.state_dict())
            >>> q.rows(3) == p.rows(3), p.state_dict()["format"]
            (True, 2)
        """
        filtered: dict[str, dict[str, list[int]]] = {}
        for m, past in self._task_history.items():
            groups: dict[str, list[int]] = {}
            for task, kinds in past.items():
                groups.setdefault("".join(_KINDS[k] for k in kinds), []).append(task)
            filtered[m] = {key: sorted(tasks) for key, tasks in sorted(groups.items())}
        aside: dict[str, list[list[Any]]] = {}
        for m, spans in self._aside.items():
            by_span: dict[tuple[int, int], list[int]] = {}
            for task, span in spans.items():
                if span[1] > self._rows_floor:  # a span over before the oldest step kept counts nowhere
                    by_span.setdefault(span, []).append(task)
            aside[m] = [[a, b, sorted(tasks)] for (a, b), tasks in sorted(by_span.items())]
        return {
            "format": STATE_FORMAT,
            "history": {
                str(s): {m: [[t, list(r)] for t, r in g] for m, g in h.items()}
                for s, h in sorted(self.history.items())
            },
            "weights": {str(s): dict(w) for s, w in self._weights.items()},
            "rows": {str(s): [list(r) for r in rows] for s, rows in self._rows.items()},
            "extra_target": dict(self._frac_target),
            "extras": dict(self._extras),
            "cursor": dict(self._cursor),
            "cycle": dict(self._cycle),
            "filter_history": filtered,
            "set_aside": aside,
            "credit": {m: {str(t): list(c) for t, c in a.items()} for m, a in self._credit.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from `state_dict` (of a planner built from the same mixture and tasks); a state of the
        first format (every step kept) loads too, and continues with the same rows.

        Example:
            >>> from ormix.config import MixtureConfig
            >>> cfg = MixtureConfig(members={"a": {"target": "local:echo"}}, strategy="adaptive",
            ...                     prompts_per_step=1)
            >>> old = {"history": {}, "weights": {"1": {"a": 1.0}}, "rows": {"1": [["a", 1]]},
            ...        "extra_target": {"a": 0.0}, "extras": {"a": 0}, "cursor": {"a": 1}, "cycle": {"a": 0},
            ...        "task_history": {"a": {"1": ["solved"]}}, "aside": {"a": {"0": [1, 9]}}}
            >>> p = Planner(cfg, {"a": [0, 1]}); p.load_state_dict(old)
            >>> p.tasks_set_aside("a", 1), p.rows(1)
            (1, [('a', 1)])
        """
        missing = sorted(
            {"history", "weights", "rows", "extra_target", "extras", "cursor", "cycle"} - set(state)
        )
        if missing:
            raise MixtureError(
                f"this checkpoint's planner state has no {missing}: it was written by another version of "
                "ormix, whose plans differ; start a new run (or resume with that version)"
            )
        self.history = {
            int(s): {m: [(int(t), list(r)) for t, r in g] for m, g in h.items()}
            for s, h in state["history"].items()
        }
        self._weights = {int(s): {m: float(v) for m, v in w.items()} for s, w in state["weights"].items()}
        self._rows = {int(s): [(str(m), int(t)) for m, t in rows] for s, rows in state["rows"].items()}
        self._frac_target = {m: float(v) for m, v in state["extra_target"].items()}
        self._extras = {m: int(v) for m, v in state["extras"].items()}
        self._cursor = {m: int(v) for m, v in state["cursor"].items()}
        self._cycle = {m: int(v) for m, v in state["cycle"].items()}
        self._perms, self._summary = {}, {}
        self._task_history = {m: {} for m in self.members}
        self._aside = {m: {} for m in self.members}
        self._spans = {m: {} for m in self.members}
        # Format 2 groups tasks by their outcomes and by their span; format 1 (no "format") keyed each task.
        for m, grouped in state.get("filter_history", {}).items():
            for key, tasks in grouped.items():
                for t in tasks:
                    self._task_history[m][int(t)] = [_KIND_OF[c] for c in key]
        for m, h in state.get("task_history", {}).items():
            # An empty record is no record to the filter (see `_filter_from`).
            self._task_history[m] = {int(t): list(k) for t, k in h.items() if k}
        for m, spans in state.get("set_aside", {}).items():
            for a, b, tasks in spans:
                for t in tasks:
                    self._set_aside(m, int(t), (int(a), int(b)))
        for m, a in state.get("aside", {}).items():
            for t, b in a.items():
                self._set_aside(m, int(t), (int(b[0]), int(b[1])))
        # The checkpoint's credit, not the prior asked again now (the platform's answer may have changed);
        # a checkpoint of a version without it had none.
        self._credit = {m: {} for m in self.members}
        for m, a in state.get("credit", {}).items():
            self._credit[m] = {int(t): (str(c[0]), int(c[1])) for t, c in a.items()}
        # Where the kept steps start: a format-1 state kept every step, forgotten now as `_forget` would have.
        self._decided = max(self._rows, default=0)
        self._stats_floor = self._rows_floor = 1
        self._forget()


def starvation_probability(
    probs: Mapping[str, float], prompts_per_step: int, *, mode: str = "iid"
) -> dict[str, float]:
    """Long-run fraction of steps in which each member gets no prompt.

    - ``mode="iid"`` (no ``prompts_per_step`` in the plan: independent draws): ``(1 - p) ** k``.
    - ``mode="quotas"`` (the planner's quotas, constant weights): 0 when ``p*k >= 1``, else ``1 - p*k`` (the
      member gets one row in a ``p*k`` fraction of steps, evenly spread); 1 when p = 0.

    Example:
        >>> starvation_probability({"a": 0.9, "b": 0.1}, 4)["b"]  # doctest: +ELLIPSIS
        0.656...
        >>> starvation_probability({"a": 0.9, "b": 0.1}, 4, mode="quotas")["b"]  # doctest: +ELLIPSIS
        0.6...
    """
    if mode not in ("iid", "quotas"):
        raise MixtureError(f"unknown mode {mode!r}; use 'iid' or 'quotas'")
    total = math.fsum(float(v) for v in probs.values())
    p = {m: float(probs[m]) / total if total > 0 else 0.0 for m in sorted(probs)}
    if mode == "iid":
        return {m: (1.0 - v) ** prompts_per_step for m, v in p.items()}
    return {m: max(0.0, 1.0 - v * prompts_per_step) for m, v in p.items()}
