"""Mixture files: the pydantic models behind ``mixtures/*.yaml`` and their validation.

A mixture file names the environments (members) one agent trains on, how their tasks are mixed (static
weights, temperature, round robin or a step schedule), and overrides for ``ormix train``:

.. code-block:: yaml

    members:
      terminals: {target: "local:terminals", num_tasks: 16}
      seta: {target: "local:seta", num_tasks: 16}
    weights: {terminals: 0.6, seta: 0.4}
    prompts_per_step: 4

Loading never stops at the first problem: `load_mixture_config` / `MixtureConfig.from_yaml_text` raise one
`MixtureConfigError` that lists every problem, one per line, each with the file, the line, the key path
(``members.seta.num_tasks``), what is wrong and how to fix it.

Secrets. A member's ``secrets`` values may reference environment variables as ``${NAME}``; they are
expanded when the file is loaded, and a missing variable is an error naming it. ``$${`` writes a literal
``${``. Literal values are accepted too (no warning), but then the file itself is a secret: keep it out of
version control, and know that `MixtureConfig.to_yaml` writes such literals back as they were. Secret values
never appear in reprs, error messages or `MixtureConfig.manifest_dict` (which keeps only secret names).

Example:
    >>> cfg = MixtureConfig.from_yaml_text('''
    ... members:
    ...   seta: {target: "local:seta", num_tasks: 8}
    ... ''')
    >>> cfg.train_members
    ['seta']
    >>> cfg.members["seta"].parsed_target.kind
    'local'
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeGuard

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    ModelWrapValidatorHandler,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from typing_extensions import Self

from ormix._errors import TargetError
from ormix._hashing import content_hash
from ormix._targets import Target, is_identifier, parse_target
from ormix.config._checks import checked, member_checks, mixture_checks, selection_checks
from ormix.config._problems import (
    MixtureConfigError,
    Problem,
    problem_error,
    problems_from,
    suggest,
)
from ormix.config._secrets import ENV_VAR_RE, Secret
from ormix.config._trainer_rules import pass_k_problem, plan_length_problem
from ormix.config._yaml_io import (
    derived_name,
    dump_yaml,
    line_of,
    load_yaml,
    name_from_stem,
    not_a_mapping,
    syntax_problem,
)

#: The environment variable a catalog member reads its OpenReward API key from unless `api_key_env` says.
DEFAULT_API_KEY_ENV = "OPENREWARD_API_KEY"
#: Default deadline of opening a session on a catalog target (`open_timeout_s`): above the SDK's 600 s
#: ride-out of a starting backend, which its comments measure at ~4.6 min p50 and ~9 min tail.
CATALOG_OPEN_TIMEOUT_S = 900.0
#: The most characters of one tool result the model sees (`max_output_chars`); the full size is recorded.
MODEL_OUTPUT_CHARS = 16_384
#: The split a train member without an eval set is evaluated on, when its environment has it.
TEST_SPLIT = "test"

_MIXTURE_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")

_MODEL_CONFIG = ConfigDict(
    extra="forbid", hide_input_in_errors=True, allow_inf_nan=False, frozen=True, strict=True
)

Scalar = str | int | float | bool


def _non_negative_indices(v: list[int] | None) -> list[int] | None:
    if v is not None and any(i < 0 for i in v):
        raise problem_error("task indices start at 0; remove negative indices")
    return v


def _env_var(v: str | None, key: str) -> str | None:
    if v is not None and not ENV_VAR_RE.fullmatch(v):
        raise problem_error(
            f"{key} is the NAME of an environment variable (letters, digits, '_'), "
            "not the key itself; e.g. api_key_env: OPENREWARD_API_KEY"
        )
    return v


class EvalConfig(BaseModel):
    """Which tasks of a member form its eval set.

    ``split`` defaults to the member's split. ``num_tasks`` and ``indices`` are mutually exclusive, as for
    training; with neither, the whole split is used. ``fallback: own_tasks`` (with ``split``): when the
    environment has no such split, the member's own tasks instead of an error; `MixtureConfig.without` writes
    ``{split: test, fallback: own_tasks}`` for a member it makes eval-only, the choice a train member without
    ``eval:`` gets (its environment's test split, else its own tasks).

    Example:
        >>> EvalConfig(split="test", num_tasks=32).num_tasks
        32
        >>> EvalConfig(split="test", fallback="own_tasks").fallback
        'own_tasks'
    """

    model_config = _MODEL_CONFIG

    split: str | None = Field(None, min_length=1)
    num_tasks: int | None = Field(None, ge=1)
    indices: list[int] | None = None
    fallback: Literal["own_tasks"] | None = None

    _indices = field_validator("indices")(classmethod(lambda cls, v: _non_negative_indices(v)))

    @model_validator(mode="after")
    def _fallback_needs_split(self) -> Self:
        if self.fallback is not None and self.split is None:
            raise problem_error(
                "eval.fallback says what to evaluate on when eval.split is missing on the environment; "
                "set split (e.g. split: test) or remove fallback"
            )
        return self

    @model_validator(mode="wrap")
    @classmethod
    def _cross_checks(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        return checked(cls, data, handler, selection_checks)


class StragglerConfig(BaseModel):
    """When a tool round stops waiting for a member's slowest calls (`ormix.rollout._stragglers`).

    ``deadline_s``: calls still running this long after the round started are abandoned. ``median_multiple``:
    once ``after_fraction`` of the member's calls of the round are back, those still running get until this
    multiple of their median latency (never less than ``min_wait_s``). The earlier applies. Abandoned
    rollouts end as ``error`` / ``straggler`` (reward ``None``: out of the group baseline, advantage 0) and
    their sessions are closed. Off unless set: every cut rollout is a lost sample, and the slow ones are
    often the long, hard tasks.

    Example:
        >>> StragglerConfig(median_multiple=10).after_fraction
        0.9
    """

    model_config = _MODEL_CONFIG

    deadline_s: float | None = Field(None, gt=0)
    median_multiple: float | None = Field(None, gt=1)
    after_fraction: float = Field(0.9, gt=0, le=1)
    min_wait_s: float = Field(0.0, ge=0)

    @model_validator(mode="after")
    def _needs_a_rule(self) -> Self:
        if self.deadline_s is None and self.median_multiple is None:
            raise problem_error("stragglers needs deadline_s and/or median_multiple")
        return self


class GroupScoringConfig(BaseModel):
    """How a member's GRPO groups are scored by its environment (``group_scoring:``; ORS ``score_group``).

    ``mode``: ``auto`` (when the environment advertises ``supports_score_group``), ``on`` (always asked: an
    environment without it is counted ``unsupported``) or ``off``. ``combine``: ``add`` (pointwise + group,
    the default), ``replace`` (the group score alone) or ``weighted`` (``(1 - weight) * pointwise + weight *
    group``; ``weight`` only there). ``candidates``: ``output`` (each rollout's final assistant message, the
    default) or ``trajectory`` (the whole completion, tool calls and results included). A group whose
    scoring fails keeps its pointwise rewards. ``group_scoring: auto`` (or ``on``, ``off``) is the short form.

    Example:
        >>> GroupScoringConfig.model_validate("auto").combine
        'add'
        >>> GroupScoringConfig(combine="weighted", weight=0.25).weight
        0.25
    """

    model_config = _MODEL_CONFIG

    mode: Literal["auto", "on", "off"] = "auto"
    combine: Literal["replace", "add", "weighted"] = "add"
    weight: float = Field(0.5, ge=0.0, le=1.0)
    candidates: Literal["output", "trajectory"] = "output"

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, data: Any) -> Any:
        # YAML 1.1 reads a bare `on` / `off` as true / false, also as `mode: on`.
        if isinstance(data, (bool, str)):
            data = {"mode": data}
        if isinstance(data, Mapping) and isinstance(data.get("mode"), bool):
            data = {**data, "mode": "on" if data["mode"] else "off"}
        return data

    @model_validator(mode="after")
    def _weight_needs_weighted(self) -> Self:
        if "weight" in self.model_fields_set and self.combine != "weighted":
            raise problem_error(
                f"group_scoring.weight is used by combine: weighted only (combine is {self.combine}); "
                "remove weight or set combine: weighted"
            )
        return self


class SpecConfig(BaseModel):
    """Every option of one environment (an `ormix.OpenRewardSpec`): where it is, which tasks, how it is
    driven.

    Selection: ``target`` (catalog ``owner/name``, ``http(s)://`` URL, ``local:NAME`` or ``module:Class``;
    or ``targets``, several ``http(s)://`` ORS servers of the same environment, sessions spread over them:
    ``target`` is then the first),
    ``split``, ``num_tasks`` or ``indices``, ``where`` (metadata filter: a value or a list of accepted values
    per key), ``env_name``, ``include_metadata``, ``discover_task_tools``, ``task_tools_discovery_index``.
    Access: ``secrets`` (per session, ``${VAR}`` references in files), ``api_key`` / ``api_key_env``
    (``OPENREWARD_API_KEY`` for catalog targets).
    Driving: ``call_timeout_s`` (deadline of one call), ``open_timeout_s`` (deadline of opening a session,
    riding out a platform backend that is still starting; default 900 s for catalog targets, else
    ``call_timeout_s``), ``ping_interval_s`` (keepalive; ``null`` disables),
    ``max_output_chars`` (most characters of a tool result the model sees), ``open_retries``,
    ``close_after_scoring``, ``local_serve`` (``process`` or ``thread`` for ``local:``/``module:`` targets),
    ``max_concurrent_sessions`` (this environment's sessions being opened or running a call at once, for a
    deployment with a quota; more wait their turn), ``stragglers`` (`StragglerConfig`: when a tool round
    abandons this environment's slowest calls; off unless set).
    Scoring: ``unscored_reward`` (reward of a rollout that got no score; ``None`` leaves it out of GRPO),
    ``group_scoring`` (`GroupScoringConfig`: the environment scores each GRPO group; off unless set).

    Example:
        >>> SpecConfig(target="local:echo", call_timeout_s=30).ping_interval_s
        10.0
    """

    model_config = _MODEL_CONFIG

    target: str
    targets: list[str] | None = None
    num_tasks: int | None = Field(None, ge=1)
    indices: list[int] | None = None
    split: str = Field("train", min_length=1)
    where: dict[str, Scalar | list[Scalar]] = Field(default_factory=dict)
    env_name: str | None = Field(None, min_length=1)
    include_metadata: bool = True
    discover_task_tools: bool = True
    task_tools_discovery_index: int | None = Field(None, ge=0)
    secrets: dict[str, Secret] = Field(default_factory=dict)
    api_key: Secret | None = None
    api_key_env: str | None = None
    unscored_reward: float | None = None
    call_timeout_s: float | None = Field(300.0, gt=0)
    open_timeout_s: float | None = Field(None, gt=0)
    ping_interval_s: float | None = Field(10.0, gt=0)
    max_output_chars: int = Field(MODEL_OUTPUT_CHARS, ge=1)
    open_retries: int = Field(0, ge=0)
    close_after_scoring: bool = True
    local_serve: Literal["process", "thread"] | None = None
    max_concurrent_sessions: int | None = Field(None, ge=1)
    stragglers: StragglerConfig | None = None
    group_scoring: GroupScoringConfig | None = None

    _indices = field_validator("indices")(classmethod(lambda cls, v: _non_negative_indices(v)))

    @field_validator("target")
    @classmethod
    def _parse_target(cls, v: str, info: ValidationInfo) -> str:
        # Resolved now (files, specs), not when a server child starts: a typo or a class that is not an
        # environment is reported with the rest of the file, with "did you mean".
        context = info.context if isinstance(info.context, Mapping) else {}
        try:
            target = parse_target(v)
            if target.kind in ("local", "module"):
                from ormix.server._registry import LOCAL_ENVIRONMENTS, check_environment

                # Without resolving, a shipped name is known without importing anything, so a misspelt one is
                # reported with the file's other problems, not after they are fixed.
                shipped = target.kind == "local" and target.value in LOCAL_ENVIRONMENTS
                if context.get("resolve_targets") or (target.kind == "local" and not shipped):
                    check_environment(str(target))
            return str(target)
        except TargetError as e:
            raise problem_error(str(e)) from None

    @model_validator(mode="before")
    @classmethod
    def _fold_targets(cls, data: Any) -> Any:
        # `target: [a, b]` (a list in OpenRewardSpec) and `targets: [a, b]` (files) are the same member on
        # several servers; one server is a plain `target`.
        if not isinstance(data, Mapping):
            return data
        target, targets = data.get("target"), data.get("targets")
        if isinstance(target, (list, tuple)):
            if targets is not None and list(targets) != list(target):
                raise problem_error("target is a list and targets is set too; give the servers once")
            targets, target = list(target), None
        if targets is None:
            return data
        if not isinstance(targets, (list, tuple)) or not targets:
            raise problem_error("targets is a non-empty list of ORS server URLs, e.g. [http://h1:8080, ...]")
        targets = list(targets)
        if target is not None and target != targets[0]:
            raise problem_error(
                "target and targets are both set; give the servers once, as targets: [...] (target is "
                "then the first of them)"
            )
        return {**data, "target": targets[0], "targets": targets if len(targets) > 1 else None}

    @field_validator("targets")
    @classmethod
    def _several_servers(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        out: list[str] = []
        for s in v:
            try:
                parsed = parse_target(s)
            except TargetError as e:
                raise problem_error(str(e)) from None
            if parsed.kind != "url":
                raise problem_error(
                    f"every entry of targets is the http(s):// URL of an ORS server of the same environment; "
                    f"{s!r} is a {parsed.kind} target (serve a local environment on several ports with "
                    f"`ormix serve --workers N`, which prints the targets list)"
                )
            if str(parsed).rstrip("/").lower() in {u.rstrip("/").lower() for u in out}:
                raise problem_error(f"{s!r} appears twice in targets; list each server once")
            out.append(str(parsed))
        return out

    _api_key_env = field_validator("api_key_env")(classmethod(lambda cls, v: _env_var(v, "api_key_env")))

    @model_validator(mode="wrap")
    @classmethod
    def _cross_checks(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        return checked(cls, data, handler, member_checks)

    @property
    def servers(self) -> list[str]:
        """Every server of the target: ``targets``, else ``[target]``.

        Example:
            >>> SpecConfig(targets=["http://h1:80", "http://h2:80"]).servers
            ['http://h1:80', 'http://h2:80']
            >>> SpecConfig(target="local:echo").servers
            ['local:echo']
        """
        return list(self.targets) if self.targets else [self.target]

    @property
    def parsed_target(self) -> Target:
        """The target as a `Target` (kind and value).

        Example:
            >>> SpecConfig(target="Eigent/SETA").parsed_target.kind
            'catalog'
        """
        return parse_target(self.target)

    @property
    def resolved_open_timeout_s(self) -> float | None:
        """The deadline of opening a session: ``open_timeout_s``, else `CATALOG_OPEN_TIMEOUT_S` for catalog
        targets (a platform cold start takes minutes: the SDK rides it out for 600 s per request), else
        ``call_timeout_s``.

        Example:
            >>> [SpecConfig(target=t).resolved_open_timeout_s for t in ("Eigent/SETA", "local:echo")]
            [900.0, 300.0]
        """
        if self.open_timeout_s is not None:
            return self.open_timeout_s
        return CATALOG_OPEN_TIMEOUT_S if self.parsed_target.kind == "catalog" else self.call_timeout_s

    @property
    def resolved_api_key_env(self) -> str | None:
        """The variable holding the API key: ``api_key_env``, else ``OPENREWARD_API_KEY`` for catalog targets.

        Example:
            >>> [SpecConfig(target=t).resolved_api_key_env for t in ("Eigent/SETA", "local:echo")]
            ['OPENREWARD_API_KEY', None]
        """
        if self.api_key_env is not None:
            return self.api_key_env
        return DEFAULT_API_KEY_ENV if self.parsed_target.kind == "catalog" else None

    def resolve_api_key(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The API key: ``api_key``, else the variable `resolved_api_key_env`, else ``None``. Never log it.

        Example:
            >>> SpecConfig(target="Eigent/SETA").resolve_api_key({"OPENREWARD_API_KEY": "sk-1"})
            'sk-1'
        """
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        name = self.resolved_api_key_env
        env = os.environ if environ is None else environ
        return (env.get(name) or None) if name else None

    def has_api_key(self, environ: Mapping[str, str] | None = None) -> bool:
        """Whether an API key is available (without reading a deferred secret, see `Secret.expand`).

        Example:
            >>> SpecConfig(target="Eigent/SETA").has_api_key({})
            False
        """
        if self.api_key is not None:
            return not self.api_key.missing
        return self.resolve_api_key(environ) is not None

    def secret_values(self) -> dict[str, str]:
        """The expanded secrets, for sending to the environment. Never log them.

        Example:
            >>> SpecConfig(target="local:echo", secrets={"k": Secret.literal("v")}).secret_values()
            {'k': 'v'}
        """
        return {k: s.get_secret_value() for k, s in self.secrets.items()}


class TaskFilterConfig(BaseModel):
    """Task-level difficulty filtering inside a member, part of ``strategy: adaptive``: every train member's
    by default (``adaptive: {filter: ...}`` sets the rule, ``filter: null`` there turns it off), one member's
    own with its ``filter:`` (``filter: false`` on a member: none for it).

    A task whose last ``window`` groups were all solved (every reward >= ``solved``) or all failed (every
    reward <= ``failed``) is set aside for ``cooldown_steps`` steps, then comes back; a group whose rewards
    differ is neither. Small groups agree by chance (the two rollouts of a task solved half the time, one time
    in two), so it takes as many of the last groups as hold ``min_rollouts`` rollouts when that is more than
    ``window`` (8: four groups of 2, two of 4). ``prior`` seeds it from task metadata: ``{field: difficulty,
    pass_rates: {Easy: 0.95, Hard: 0.05}}`` sets tasks whose prior pass rate is >= 0.9 or <= 0.1 aside from
    the start; or from the rollouts logged on the OpenReward platform (catalog members): ``prior: platform``
    (`PlatformPriorConfig`).

    Example:
        >>> TaskFilterConfig(window=2, cooldown_steps=4).solved
        1.0
    """

    model_config = _MODEL_CONFIG

    window: int = Field(2, ge=1)
    min_rollouts: int = Field(8, ge=1)
    cooldown_steps: int = Field(8, ge=1)
    solved: float = 1.0
    failed: float = 0.0
    prior: (
        Annotated[
            Annotated[PriorConfig, Tag("metadata")] | Annotated[PlatformPriorConfig, Tag("platform")],
            Discriminator(lambda v: _prior_kind(v)),
        ]
        | None
    ) = None

    @field_validator("prior", mode="before")
    @classmethod
    def _platform_shorthand(cls, v: Any) -> Any:
        if isinstance(v, str):
            if v != "platform":
                raise problem_error(
                    f"prior is 'platform' (the rollouts logged on the OpenReward platform) or a mapping "
                    f"{{field: ..., pass_rates: {{...}}}}, not {v!r}"
                )
            return {"source": "platform"}
        return v


def _prior_kind(v: Any) -> str:
    # One set of problems for a prior, not both kinds': `source` (or `prior: platform`) says which it is.
    if isinstance(v, PlatformPriorConfig) or (isinstance(v, Mapping) and "source" in v):
        return "platform"
    return "metadata"


class PlatformPriorConfig(BaseModel):
    """The task filter's prior from the OpenReward platform (``prior: platform``, or ``prior: {source:
    platform, model_name: ..., training_stage: rl}``): the per-task rewards of the rollouts logged on a
    catalog member's environment (its split and variant; the SDK's ``get_task_difficulty``), optionally only
    those of one model, model size range or training stage.

    A task every logged rollout solved (min reward >= ``solved``) or failed (max reward <= ``failed``) starts
    set aside when they are at least ``min_rollouts`` (and ``window``); fewer count as that many rollouts of
    agreeing groups toward the filter's first decision on the task. Members that are not catalog environments
    have no logged rollouts: no prior.

    Example:
        >>> TaskFilterConfig(prior="platform").prior.source
        'platform'
        >>> TaskFilterConfig(prior={"source": "platform", "training_stage": "rl"}).prior.training_stage
        'rl'
    """

    model_config = _MODEL_CONFIG

    source: Literal["platform"]
    model_name: str | None = Field(None, min_length=1)
    min_model_params: int | None = Field(None, ge=0)
    max_model_params: int | None = Field(None, ge=0)
    training_stage: Literal["pretrained", "sft", "rl"] | None = None


class PriorConfig(BaseModel):
    """A prior pass rate per value of one task-metadata field (e.g. ``difficulty``).

    Example:
        >>> PriorConfig(field="difficulty", pass_rates={"Easy": 0.95}).pass_rates["Easy"]
        0.95
    """

    model_config = _MODEL_CONFIG

    field: str = Field(min_length=1)
    pass_rates: dict[str, float]

    @field_validator("pass_rates")
    @classmethod
    def _fractions(cls, v: dict[str, float]) -> dict[str, float]:
        # A percentage read as a fraction sets nearly every task aside (50 >= 0.9) without a word.
        wrong = {k: r for k, r in v.items() if not 0.0 <= r <= 1.0}
        if wrong:
            listed = ", ".join(f"{k}: {r:g}" for k, r in wrong.items())
            verb = "is" if len(wrong) == 1 else "are"
            raise problem_error(
                f"pass_rates {{{listed}}} {verb} not between 0 and 1; a pass rate is a fraction: "
                "write 0.95, not 95"
            )
        return v


class AdaptiveConfig(BaseModel):
    """How adaptive weights move (``adaptive:``, with ``strategy: adaptive``).

    ``signal``: ``denoised`` (default: ``informative`` less what each member's own outcome noise explains,
    averaged with progress in the reward achieved; ``uniform_mix`` of the batch stays uniform),
    ``informative`` (the fraction of a member's recent GRPO groups with reward spread), ``progress``
    (informative rate × learnability: reward gained per informative group) or ``thompson`` (a bandit on the
    same). ``warmup_steps`` steps use the static weights (``weights:``, or uniform; so do the
    first two steps in any case, which have no statistics yet, so 2 or less adds no warm-up). Every member
    keeps at least ``floor`` of the batch; a weight moves at most ``max_change`` per step; ``window``
    steps of statistics feed the informative rate, ``progress_window`` the learnability; target weights go as
    ``score ** sharpness``, times the member's headroom (reward left to gain, on the range of rewards seen)
    ``** headroom`` (0 turns it off); ``prior_groups`` is the strength of the prior a member's rate is shrunk
    toward; ``thompson_draws`` the draws per decision; ``uniform_mix`` (``denoised`` only) the share of the
    batch spread uniformly whatever the signal says. ``filter``: the task filter of every train member
    without its own ``filter:`` (`TaskFilterConfig`; on by default, ``null`` turns it off: measured in
    `benchmarks/curriculum.py`, it reaches the target sooner in every world). The statistics of step *t*
    decide step *t + 2* (see `ormix.mixture._adaptive` and `ormix.mixture._planner`).

    Example:
        >>> AdaptiveConfig(signal="thompson").floor
        0.05
        >>> AdaptiveConfig().filter.cooldown_steps, AdaptiveConfig(filter=None).filter
        (8, None)
    """

    model_config = _MODEL_CONFIG

    signal: Literal["denoised", "informative", "progress", "thompson"] = "denoised"
    warmup_steps: int = Field(2, ge=0)
    floor: float = Field(0.05, ge=0.0, le=1.0)
    max_change: float = Field(0.25, gt=0.0, le=1.0)
    window: int = Field(16, ge=1)
    progress_window: int = Field(64, ge=1)
    sharpness: float = Field(2.0, gt=0.0)
    prior_groups: float = Field(4.0, ge=0.0)
    thompson_draws: int = Field(256, ge=1)
    headroom: float = Field(1.0, ge=0.0)
    uniform_mix: float = Field(0.2, ge=0.0, le=1.0)
    filter: TaskFilterConfig | None = Field(default_factory=TaskFilterConfig)


class MemberConfig(SpecConfig):
    """One environment of a mixture: its `SpecConfig` plus how the mixture weighs, scores and evaluates it.

    ``weight`` (alternative to the mixture's ``weights:``), ``role`` (``train``, ``eval`` or ``both``),
    ``scale`` (reward multiplier), ``eval`` (the eval task selection) and ``filter`` (with ``strategy:
    adaptive``: this member's task filter; unset, the mixture's ``adaptive.filter``; ``false``, none for this
    member). An eval-only member
    (``role: eval``) without ``eval:`` uses its own ``split``/``num_tasks``/``indices`` as its eval set.
    ``reference`` (``"module:function"``) names the member's reference solver: a function from a task's row
    to the tool calls that solve it (`ormix.workbench._references`), played by the warm start and by ``ormix
    eval
    --policy reference``; shipped ones serve ``local:echo``, ``local:terminals`` and ``local:seta``. Only its
    form is checked here; it is imported when used, found like a ``module:Class`` target (next to the
    mixture file first).

    Example:
        >>> m = MemberConfig(target="Eigent/SETA", num_tasks=64, where={"difficulty": ["Medium", "Hard"]})
        >>> m.parsed_target.kind, m.resolved_api_key_env, m.evaluates
        ('catalog', 'OPENREWARD_API_KEY', False)
        >>> MemberConfig(target="local:seta", eval={"num_tasks": 2}).evaluates
        True
        >>> MemberConfig(target="my_envs:Counter", reference="my_envs:solve").reference
        'my_envs:solve'
    """

    weight: float | None = None
    role: Literal["train", "eval", "both"] = "train"
    scale: float = Field(1.0, gt=0)
    eval: EvalConfig | None = None
    filter: TaskFilterConfig | Literal[False] | None = None
    reference: str | None = None

    @field_validator("reference")
    @classmethod
    def _reference_form(cls, v: str | None) -> str | None:
        if v is None:
            return v
        v = v.strip()
        module, _, function = v.partition(":")
        parts = module.split(".") if module else []
        if not parts or not all(is_identifier(p) for p in [*parts, function]):
            raise problem_error(
                f"reference {v!r} is not module:function; name the function that returns a task's "
                "reference tool calls, e.g. reference: my_envs.solutions:solve (the module next to the "
                "mixture file, in the working directory or installed)"
            )
        return v

    @property
    def trains(self) -> bool:
        """True if the member contributes training rows (role train or both)."""
        return self.role != "eval"

    @property
    def evaluates(self) -> bool:
        """True if the member has an eval set (role eval or both, or an ``eval:`` section)."""
        return self.role != "train" or self.eval is not None


class UploadConfig(BaseModel):
    """Rollout upload to the OpenReward platform (``telemetry: {upload: {...}}``; off unless given).

    Every recorded rollout of the chosen members is sent in the background to the platform API
    (``OPENREWARD_API_URL``, default ``https://api.openreward.ai``) as the openreward SDK's
    ``client.rollout.create(...).log(...)`` sends it (`ormix.telemetry._upload`), with its run info.
    ``run_name``: the run the platform files them under (default: the run directory's name).
    ``members``: the members whose rollouts go (default: every member). ``eval``: also evaluation
    rollouts. ``environments``: member -> the platform environment name shown with its rollouts (default:
    a catalog member's own name). ``model_name``: the model in the run info (default: the trainer's).
    ``api_key_env``: the variable holding the key. ``max_queued``: rollouts waiting at most (more are dropped
    and counted, never waited for). ``close_timeout_s``: how long the end of training waits for the rest to
    go. Says where records go, not what is trained: left out of the config hash.

    Example:
        >>> UploadConfig(run_name="seta-curriculum", members=["seta"]).max_queued
        10000
    """

    model_config = _MODEL_CONFIG

    run_name: str | None = Field(None, min_length=1)
    members: list[str] | None = None
    eval: bool = True
    environments: dict[str, str] = Field(default_factory=dict)
    model_name: str | None = Field(None, min_length=1)
    api_key_env: str = DEFAULT_API_KEY_ENV
    max_queued: int = Field(10_000, ge=1)
    close_timeout_s: float = Field(60.0, ge=0)

    _api_key_env = field_validator("api_key_env")(
        classmethod(lambda cls, v: _env_var(v, "upload.api_key_env"))
    )

    def uploads(self, member: str, mode: str) -> bool:
        """Whether `member`'s rollouts of `mode` (``train``/``eval``) are uploaded.

        Example:
            >>> UploadConfig(members=["a"], eval=False).uploads("a", "eval")
            False
        """
        return (self.members is None or member in self.members) and (mode != "eval" or self.eval)


class TelemetryConfig(BaseModel):
    """The coverage alarm and records (the mixture file's ``telemetry:``).

    ``min_coverage``: alarm when a member's scored fraction is below this (``null``: off).
    ``max_error_rate``: alarm when its infrastructure-error rate is above this (``null``: off).
    ``consecutive_steps``: logging steps in a row before the alarm fires. ``stop``: stop training when it
    fires (the run then exits non-zero). ``records``: write rollout records to ``<run dir>/rollouts/``.
    ``no_learning_steps``: the no-learning alarm (`ormix.telemetry._alarm.LearningTracker`) warns when a
    member's groups are all uninformative, or ``grad_norm`` is 0, for this many logging steps in a row
    (``null``: off); it says when to warn, not what is trained, so it is left out of the config hash.
    ``upload``: rollout upload to the OpenReward platform (`UploadConfig`; ``null``, the default: none).

    Example:
        >>> TelemetryConfig(min_coverage=0.5, consecutive_steps=2).max_error_rate
        0.5
    """

    model_config = _MODEL_CONFIG

    min_coverage: float | None = Field(None, ge=0.0, le=1.0)
    max_error_rate: float | None = Field(0.5, ge=0.0, le=1.0)
    consecutive_steps: int = Field(3, ge=1)
    stop: bool = False
    records: bool = True
    no_learning_steps: int | None = Field(5, ge=1)
    upload: UploadConfig | None = None


class PhaseConfig(BaseModel):
    """One phase of a step schedule: the weights in force until ``until_step`` (exclusive; steps count from 1,
    so ``until_step: 100`` covers steps 1-99 of a first phase).

    ``until_step: None`` marks the open-ended last phase. With ``interpolate: true`` the weights move
    linearly from this phase's weights at its first step to the next phase's weights at ``until_step``.
    After a last phase that has an ``until_step``, its weights stay in force.

    Example:
        >>> PhaseConfig(until_step=100, weights={"terminals": 0.8, "seta": 0.2}, interpolate=True).until_step
        100
    """

    model_config = _MODEL_CONFIG

    until_step: int | None = Field(None, ge=1)
    weights: dict[str, float]
    interpolate: bool = False


class WarmStartConfig(BaseModel):
    """A supervised warm start before GRPO (``warm_start:``; `ormix.workbench._warmup`), for demos on local
    members.

    ``sft_steps`` steps of next-token SFT on the reference solutions (``local:echo``, ``local:terminals``,
    ``local:seta``) of the first ``fraction`` of each train member's tasks; GRPO then starts from a model that
    can call tools and still has the other tasks to learn. The warmed model is cached, so a second run reuses
    it; a resumed run starts from its checkpoint instead. ``ormix train --warmup-sft N`` / ``--warmup-fraction
    F`` override the file (``--warmup-sft 0`` skips it). ``near_misses: true`` also demonstrates a near miss
    of each warmed task that has one (``local:terminals``, ``local:seta``: a plausible attempt that scores
    less), so GRPO starts from a policy split between the two and has a choice to learn from the rewards.

    Example:
        >>> WarmStartConfig(sft_steps=150, fraction=0.5).fraction
        0.5
        >>> WarmStartConfig(sft_steps=150, near_misses=True).near_misses
        True
    """

    model_config = _MODEL_CONFIG

    sft_steps: int = Field(ge=0)
    fraction: float = Field(1.0, gt=0.0, le=1.0)
    near_misses: bool = False


class EvaluationConfig(BaseModel):
    """How ``ormix train`` evaluates a mixture (``evaluation:``), beside TRL's ``eval_steps``.

    ``samples`` rollouts per eval task (pass@k for each ``k``: default 1 and ``samples``). The evals run on
    `ormix eval`'s default eval set (each member's ``eval:`` set, else its test split, else its training
    tasks). A final eval of the trained model runs when the file has ``evaluation:`` or a member has an
    ``eval:`` set (``after_training``, on by default) into ``RUN_DIR/eval``; ``before_training: true`` also
    evaluates the model GRPO starts from (after the warm start) into ``RUN_DIR/eval-before``, and the run
    ends with the comparison of the two (`ormix.app._compare`). The run's manifest records what ran.

    Example:
        >>> EvaluationConfig(samples=4, before_training=True).ks
        (1, 4)
    """

    model_config = _MODEL_CONFIG

    samples: int = Field(4, ge=1)
    k: list[int] | None = None
    before_training: bool = False
    after_training: bool = True

    @model_validator(mode="after")
    def _k_within_samples(self) -> Self:
        if self.k is not None and (problem := pass_k_problem(self.k, self.samples)):
            raise problem_error(f"evaluation.k: {problem} (evaluation.samples)")
        return self

    @property
    def ks(self) -> tuple[int, ...]:
        """The k values reported: ``k`` if given, else 1 and ``samples``."""
        return tuple(sorted(set(self.k or (1, self.samples))))


class MixtureConfig(BaseModel):
    """A whole mixture: members, how they are mixed, and overrides for ``ormix train``.

    Mixing: with ``strategy: weights`` (default) rows are drawn in proportion to ``weights:`` (or per-member
    ``weight``; equal weights if neither), or per ``schedule`` phase. Weights need not sum to 1; every
    train member needs one (0 keeps it out of training for now). ``temperature`` weighs members by task count
    (p ∝ n^(1/T)); ``round_robin`` alternates. ``train`` holds GRPOConfig overrides and ``telemetry`` alarm
    thresholds; both are checked by their consumers. ``warm_start`` (`WarmStartConfig`) runs SFT on reference
    solutions before GRPO; ``evaluation`` (`EvaluationConfig`) how ``ormix train`` evaluates the eval sets.

    ``base_dir``: the directory the modules of ``module:Class`` targets (and other ``module:name`` hooks) are
    looked for in first, instead of the mixture file's own directory; a relative value is taken from the
    file's directory. `ormix ablate` writes it into derived files, so a derived file resolves what the
    original did wherever it is written. It says where, not what: it is left out of `manifest_dict` and
    the hash.

    ``lookahead``: training steps whose sessions open while the step before them runs (default 1; 0: open
    each step's sessions at its start); `ormix train --lookahead N` overrides it. Like ``base_dir`` it says
    how, not what: left out of the hash.

    Example:
        >>> cfg = MixtureConfig(members={"a": {"target": "local:echo"}, "b": {"target": "local:seta"}},
        ...                     weights={"a": 1, "b": 3})
        >>> cfg.without("b").train_members
        ['a']
    """

    model_config = _MODEL_CONFIG

    name: str = "mixture"
    members: dict[str, MemberConfig]
    weights: dict[str, float] | None = None
    strategy: Literal["weights", "temperature", "round_robin", "adaptive"] = "weights"
    adaptive: AdaptiveConfig | None = None
    temperature: float = Field(1.0, gt=0)
    schedule: list[PhaseConfig] | None = None
    num_samples: int | None = Field(None, ge=1)
    num_steps: int | None = Field(None, ge=1)
    prompts_per_step: int | None = Field(None, ge=1)
    routing: Literal["auto", "per_env", "namespaced"] = "auto"
    seed: int = Field(0, ge=0)
    train: dict[str, Any] = Field(default_factory=dict)
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    warm_start: WarmStartConfig | None = None
    evaluation: EvaluationConfig | None = None
    base_dir: str | None = Field(None, min_length=1)
    lookahead: int | None = Field(None, ge=0)

    @field_validator("name")
    @classmethod
    def _name_syntax(cls, v: str) -> str:
        if not _MIXTURE_NAME_RE.fullmatch(v):
            raise problem_error(
                "a mixture name uses letters, digits, '_', '.' or '-', starts with a letter or digit, "
                "and has at most 128 characters"
            )
        return v

    @model_validator(mode="wrap")
    @classmethod
    def _cross_checks(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        return checked(cls, data, handler, mixture_checks)

    @model_validator(mode="after")
    def _upload_members(self) -> Self:
        upload = self.telemetry.upload
        if upload is not None:
            named = [*(upload.members or []), *upload.environments]
            unknown = sorted({n for n in named if n not in self.members})
            if unknown:
                raise problem_error(
                    f"telemetry.upload names {', '.join(map(repr, unknown))}, not a member of this mixture "
                    f"(members: {', '.join(self.members)})"
                )
        return self

    # ---- construction ---------------------------------------------------------------------------------

    @classmethod
    def from_dict(
        cls,
        data: Any,
        source: str = "<dict>",
        *,
        environ: Mapping[str, str] | None = None,
        defer_missing_secrets: bool = False,
        resolve_targets: bool = False,
    ) -> MixtureConfig:
        """Validate plain data; raise `MixtureConfigError` listing every problem.

        ``environ`` replaces ``os.environ`` for ``${VAR}`` expansion in secrets.
        """
        if not isinstance(data, Mapping):
            raise MixtureConfigError([not_a_mapping(data)], source)
        data, problem = _with_base_dir(data, None)
        if problem is not None:
            raise MixtureConfigError([problem], source)
        context = {"environ": environ, "defer_missing_secrets": defer_missing_secrets}
        cfg, problems = cls._validated(data, {**context, "resolve_targets": resolve_targets})
        if cfg is None:
            raise MixtureConfigError(problems, source)
        return cfg

    @classmethod
    def _validated(cls, data: Any, context: dict[str, Any]) -> tuple[MixtureConfig | None, list[Problem]]:
        """The validated config, else ``None`` and every problem found (``context``: the validators')."""
        try:
            return cls.model_validate(data, context=context), []
        except ValidationError as e:
            return None, problems_from(e, cls)

    @classmethod
    def from_yaml_text(
        cls,
        text: str,
        source: str = "<string>",
        *,
        environ: Mapping[str, str] | None = None,
        defer_missing_secrets: bool = False,
        train_check: TrainCheck | None = None,
        resolve_targets: bool = True,
    ) -> MixtureConfig:
        """Parse and validate a mixture file's text; raise `MixtureConfigError` listing every problem.

        ``resolve_targets``: import `local:`/`module:` targets now (a file's typo is reported with its line).

        Without a ``name:`` key the name is the stem of ``source`` when it is a path. ``train_check``
        checks the ``train:`` section (trainer settings: ``ormix.trl._args.setting_problems``
        knows them); its problems are reported with the file's others, with their lines.

        Example:
            >>> MixtureConfig.from_yaml_text("members: {a: {target: 'local:echo'}}", "mixtures/x.yaml").name
            'x'
        """
        if not source.startswith("<"):
            from ormix.server._registry import add_search_dir

            add_search_dir(Path(source).parent)  # `module:Class` modules next to the file are found
        try:
            data, lines, problems = load_yaml(text)
        except yaml.YAMLError as e:
            raise MixtureConfigError([syntax_problem(e)], source) from None
        if not isinstance(data, dict):
            raise MixtureConfigError([not_a_mapping(data)], source)
        if "name" not in data and not source.startswith("<"):
            data = {"name": name_from_stem(Path(source).stem), **data}
        data, problem = _with_base_dir(data, None if source.startswith("<") else Path(source).parent)
        if problem is not None:
            problems.append(problem)
        context = {"environ": environ, "defer_missing_secrets": defer_missing_secrets}
        cfg, found = cls._validated(data, {**context, "resolve_targets": False})
        problems += _plan_length_problems(data)
        # Importing a `module:Class` target (and the SDK: seconds) waits until the rest of the file is right
        # (or only targets are wrong), so a typo is reported at once. `train:` is checked every time (TRL's
        # settings are read once per TRL version, then cached): its problems come in the same report as the
        # members' (every problem at once), never after those are fixed.
        is_target = lambda p: len(p.path) == 3 and p.path[0] == "members" and p.path[2] == "target"  # noqa: E731
        if resolve_targets and not problems and all(is_target(p) for p in found):
            cfg, found = cls._validated(data, {**context, "resolve_targets": True})
        problems += found
        train = data.get("train")
        if train_check is not None and isinstance(train, Mapping):
            problems += [Problem(("train", key), message) for key, message in train_check(dict(train))]
        if problems:
            located = [
                Problem(p.path, p.message, p.line if p.line is not None else line_of(p.path, lines))
                for p in problems
            ]
            located.sort(key=lambda p: (p.line if p.line is not None else 1 << 30, p.key_path))
            raise MixtureConfigError(located, source)
        assert cfg is not None
        return cfg

    # ---- views ----------------------------------------------------------------------------------------

    @property
    def train_members(self) -> list[str]:
        """Names of members that contribute training rows, in file order."""
        return [n for n, m in self.members.items() if m.trains]

    def task_filter(self, name: str) -> TaskFilterConfig | None:
        """The task filter a member trains with: its own ``filter:`` (``false``: none), else (``strategy:
        adaptive``) the mixture's ``adaptive.filter`` (on by default); ``None`` for none.

        Example:
            >>> members = {"a": {"target": "local:echo"},
            ...            "b": {"target": "local:seta", "filter": {"window": 3}}}
            >>> cfg = MixtureConfig(members=members, strategy="adaptive", prompts_per_step=4)
            >>> cfg.task_filter("a").window, cfg.task_filter("b").window
            (2, 3)
            >>> off = cfg.model_copy(update={"adaptive": AdaptiveConfig(filter=None)})
            >>> off.task_filter("a") is None, off.task_filter("b").window
            (True, 3)
            >>> members["b"]["filter"] = False   # this member only: no filter
            >>> MixtureConfig(members=members, strategy="adaptive", prompts_per_step=4).task_filter("b")
        """
        member = self.members[name]
        if not member.trains or self.strategy != "adaptive" or member.filter is False:
            return None
        if member.filter is not None:
            return member.filter
        return (self.adaptive or AdaptiveConfig()).filter

    @property
    def eval_members(self) -> list[str]:
        """Names of members with an eval set, in file order."""
        return [n for n, m in self.members.items() if m.evaluates]

    def static_weights(self) -> dict[str, float] | None:
        """Per train member weight for ``strategy: weights`` without a schedule (and the starting weights of
        ``strategy: adaptive``); ``None`` otherwise.

        Taken from ``weights:``, else from member ``weight``, else 1.0 each (equal).
        """
        if self.strategy not in ("weights", "adaptive") or self.schedule is not None:
            return None
        if self.weights is not None:
            return {n: self.weights[n] for n in self.train_members}
        if any(m.weight is not None for m in self.members.values()):
            return {n: float(self.members[n].weight or 0.0) for n in self.train_members}
        return {n: 1.0 for n in self.train_members}

    # ---- serialisation --------------------------------------------------------------------------------

    def to_yaml(self, header: str | None = None) -> str:
        """The config as a mixture file that loads back to an equal config.

        Default values are left out. Secrets are written as in the source (``${VAR}`` references stay
        references; literal secrets are written back literally). ``header`` becomes leading ``#`` comments.

        Example:
            >>> cfg = MixtureConfig(members={"a": {"target": "local:echo"}})
            >>> MixtureConfig.from_yaml_text(cfg.to_yaml()) == cfg
            True
        """
        data = self.model_dump(mode="json", exclude_defaults=True)
        data = {"name": self.name, **{k: v for k, v in data.items() if k != "name"}}
        return dump_yaml(data, header)

    def manifest_dict(self) -> dict[str, Any]:
        """The config as plain JSON data, defaults included, with secret values removed (names kept)."""
        data = self.model_dump(mode="json")
        if data.get("warm_start") is None:
            del data["warm_start"]  # a mixture without one keeps the hash it had before the key existed
        if data.get("evaluation") is None:
            del data["evaluation"]  # likewise
        for member in data["members"].values():
            member["secrets"] = sorted(member["secrets"])
            member["api_key"] = None if member["api_key"] is None else "(set)"
            # Likewise for a member without a reference solver, a straggler rule or group scoring.
            for key in ("reference", "stragglers", "group_scoring"):
                if member.get(key) is None:
                    member.pop(key, None)
            if member.get("eval") is not None and member["eval"].get("fallback") is None:
                del member["eval"]["fallback"]  # likewise for an eval set without one
        del data["base_dir"]  # where modules are found, not what is trained: a moved copy keeps its hash
        data.pop("lookahead", None)  # when sessions open, not what is trained (the same tokens either way)
        data["telemetry"].pop("no_learning_steps", None)  # when to warn, not what is trained
        data["telemetry"].pop("upload", None)  # where records also go, not what is trained
        return data

    def config_hash(self) -> str:
        """sha256 (hex) of the canonical JSON of `manifest_dict`: stable across key order and runs."""
        return content_hash(self.manifest_dict())

    def secret_sources(self) -> dict[str, list[str]]:
        """Per member with any, the environment variables its secrets and API key are read from (names,
        never values): what a run's manifest keeps beside its config, outside every hash, so `ormix show`
        finds the values to redact when a secret's key is not its variable's name.

        Example:
            >>> cfg = MixtureConfig.from_yaml_text(
            ...     "members:\\n  a: {target: 'local:echo', secrets: {token: '${GH_TOKEN}'}}\\n",
            ...     environ={"GH_TOKEN": "x"})
            >>> cfg.secret_sources()
            {'a': ['GH_TOKEN']}
        """
        out = {}
        for name, member in self.members.items():
            given = (*member.secrets.values(), member.api_key)
            names = sorted({v for secret in given if secret is not None for v in secret.env_vars})
            if names:
                out[name] = names
        return out

    # ---- ablations ------------------------------------------------------------------------------------

    def without(self, *names: str, as_eval: bool = True) -> MixtureConfig:
        """The mixture that does not train on the named members (dropped from weights and schedule too).

        A dropped member stays as an eval-only member (``role: eval``, its ``eval:`` set kept; without one,
        ``eval: {split: test, fallback: own_tasks}``, the tasks the full mixture evaluates it on), so the
        effect of not training on it can be measured on it; ``as_eval=False`` removes it altogether. Named
        ``<name>-without-<a>[-<b>...]``. When one train member is left, its weights and schedule are dropped
        (a one-member mixture trains on that member only; an adaptive one stays adaptive, for its task
        filter). Weights (or a schedule phase) that are 0 for every member left become equal weights.

        Example:
            >>> cfg = MixtureConfig(name="m", members={"a": {"target": "local:echo"},
            ...                                        "b": {"target": "local:seta"}})
            >>> w = cfg.without("b")
            >>> w.name, w.train_members, w.members["b"].role, w.members["b"].eval.split
            ('m-without-b', ['a'], 'eval', 'test')
            >>> list(cfg.without("b", as_eval=False).members)
            ['a']
        """
        self._require_known(names, "without")
        if not names:
            raise self._members_error("without() needs at least one member name")
        train = [n for n in self.train_members if n not in names]
        if not train:  # one problem, not also the empty weights it would leave behind
            raise self._members_error(
                f"without({', '.join(map(repr, names))}) leaves no member to train on; keep at "
                f"least one of {', '.join(self.train_members)}"
            )
        return self._subset(train, f"{self.name}-without-{'-'.join(names)}", () if as_eval else names)

    def only(self, *names: str, as_eval: bool = True) -> MixtureConfig:
        """The mixture that trains on the named members only; the others stay as eval-only members unless
        ``as_eval=False`` (as in `without`). Named ``<name>-only-<a>[-<b>...]``.

        Example:
            >>> cfg = MixtureConfig(name="m", members={"a": {"target": "local:echo"},
            ...                                        "b": {"target": "local:seta"}})
            >>> o = cfg.only("b")
            >>> o.name, o.train_members, o.eval_members
            ('m-only-b', ['b'], ['a'])
        """
        self._require_known(names, "only")
        if not names:
            raise self._members_error("only() needs at least one member name")
        keep = [n for n in self.members if n in names]
        train = [n for n in keep if self.members[n].trains]  # none: validation says so
        remove = () if as_eval else [n for n in self.members if n not in names]
        return self._subset(train, f"{self.name}-only-{'-'.join(keep)}", remove)

    def reweight(self, **weights: float) -> MixtureConfig:
        """The mixture with static weights: the given ones, others keep their current static weight.

        A member's current weight is the one it starts with: ``weights:`` or its ``weight`` (equal if
        neither; for ``strategy: adaptive`` its starting weight), a schedule's first phase, 1.0 each for
        ``round_robin``. ``temperature`` weights come from task counts only the servers know, so there every
        train member must be given (`ormix.mixture.MixtureSpec.reweight` knows them). Replaces any schedule
        and sets ``strategy: weights``, without what only adaptive mixing uses (``adaptive:``, members'
        ``filter:``); per-member weights move to ``weights:``. Named ``<name>-reweight-<member><weight>...``
        (the members given, sorted).

        Example:
            >>> cfg = MixtureConfig(name="m", members={"a": {"target": "local:echo"},
            ...                                        "b": {"target": "local:seta"}})
            >>> derived = cfg.reweight(b=3)
            >>> derived.name, derived.weights
            ('m-reweight-b3', {'a': 1.0, 'b': 3.0})
            >>> phased = cfg.updated(prompts_per_step=2, schedule=[
            ...     {"until_step": 5, "weights": {"a": 1, "b": 0}}, {"weights": {"a": 1, "b": 1}}])
            >>> phased.reweight(a=2).weights    # b keeps its weight at the first step
            {'a': 2.0, 'b': 0.0}
        """
        return self.reweighted(weights)

    def reweighted(
        self, weights: Mapping[str, float], current: Mapping[str, float] | None = None
    ) -> MixtureConfig:
        """`reweight` with the weights the members not given keep: ``current`` (the planner's, which knows
        the task counts temperature mixing weighs by), else the file's (see `reweight`)."""
        self._require_known(tuple(weights), "reweight")
        unnamed = [n for n in self.train_members if n not in weights]
        if self.strategy == "temperature" and unnamed and current is None:
            raise MixtureConfigError(
                [
                    Problem(
                        ("strategy",),
                        f"reweight() of a temperature mixture needs every train member's weight: its "
                        f"weights come from task counts its servers know, so {', '.join(unnamed)} "
                        "have no weight to keep; give theirs too, e.g. "
                        + ", ".join(f"{n}=1.0" for n in self.train_members),
                    )
                ],
                self.name,
            )
        if current is not None:
            base = dict(current)
        elif self.schedule is not None:
            base = dict(self.schedule[0].weights)
        else:
            base = self.static_weights() or {}
        new = {n: float(weights.get(n, base.get(n, 1.0))) for n in self.train_members}
        # An explicitly named eval-only member stays in, so validation says why it cannot take a weight.
        new.update({n: float(w) for n, w in weights.items() if n not in new})
        members = {n: m.model_copy(update={"weight": None, "filter": None}) for n, m in self.members.items()}
        return self.updated(
            name=derived_name(
                f"{self.name}-reweight-" + "-".join(f"{k}{v:g}" for k, v in sorted(weights.items()))
            ),
            members=members,
            weights=new,
            schedule=None,
            strategy="weights",
            adaptive=None,
        )

    def renamed(self, name: str) -> MixtureConfig:
        """The same mixture under another name."""
        return self.updated(name=name)

    def _require_known(self, names: Iterable[str], op: str) -> None:
        unknown = [n for n in names if n not in self.members]
        if unknown:
            hints = "".join(suggest(n, self.members) for n in unknown)
            raise self._members_error(
                f"{op}() got unknown member(s) {', '.join(map(repr, unknown))}{hints}; "
                f"known members: {', '.join(self.members)}"
            )

    def _members_error(self, message: str) -> MixtureConfigError:
        return MixtureConfigError([Problem(("members",), message)], self.name)

    def _subset(self, train: list[str], name: str, remove: Iterable[str]) -> MixtureConfig:
        """Train on ``train`` only: the members in ``remove`` go, every other one becomes eval-only."""
        removed = set(remove)
        members: dict[str, MemberConfig] = {}
        for n, m in self.members.items():
            if n in removed:
                continue
            if n in train or m.role == "eval":
                members[n] = m
            else:
                # Never trained on now: no weight, no task filter (both are about training). Evaluated on the
                # tasks the full mixture evaluates it on: an eval-only member without `eval:` would take its
                # own (training) tasks, a train member its environment's test split when there is one.
                evaluation = m.eval
                if evaluation is None and m.role == "train":
                    evaluation = EvalConfig(split=TEST_SPLIT, fallback="own_tasks")
                update = {"role": "eval", "weight": None, "filter": None, "eval": evaluation}
                members[n] = m.model_copy(update=update)
        weights = (
            _evened({n: w for n, w in self.weights.items() if n in train}) if self.weights else self.weights
        )
        if self.weights is None and any(m.weight is not None for m in self.members.values()):
            # Per-member weights that are all 0 among the members left: equal, as in `_evened`.
            if not any(members[n].weight for n in train):
                members.update({n: members[n].model_copy(update={"weight": 1.0}) for n in train})
        schedule = (
            [
                ph.model_copy(
                    update={"weights": _evened({n: w for n, w in ph.weights.items() if n in train})}
                )
                for ph in self.schedule
            ]
            if self.schedule
            else self.schedule
        )
        strategy, adaptive = self.strategy, self.adaptive
        if len(train) == 1:
            # One member left: nothing to mix, so no weights or schedule. An adaptive mixture stays adaptive
            # (its one weight is 1): its task filter still picks the member's tasks, as in the full mixture.
            weights, schedule = None, None
            if strategy != "adaptive":
                strategy, adaptive = "weights", None
            members = {n: m.model_copy(update={"weight": None}) for n, m in members.items()}
        return self.updated(
            name=derived_name(name),
            members=members,
            weights=weights,
            schedule=schedule,
            strategy=strategy,
            adaptive=adaptive,
        )

    def updated(self, **updates: Any) -> MixtureConfig:
        """The same mixture with some top-level keys replaced, validated again (every problem reported).

        Example:
            >>> MixtureConfig(members={"a": {"target": "local:echo"}}).updated(seed=3).seed
            3
        """
        # Pass the validated members themselves: pydantic does not revalidate model instances, so
        # secrets are not expanded a second time (the variables may be gone by now).
        data = {name: getattr(self, name) for name in type(self).model_fields}
        data.update(updates)
        try:
            return type(self).model_validate(data)
        except ValidationError as e:
            raise MixtureConfigError(problems_from(e, type(self)), data.get("name", self.name)) from None

    def sized_for(self, max_steps: int | None = None) -> MixtureConfig:
        """The mixture as `ormix train` runs it for `max_steps` (default: ``train.max_steps``).

        A file with `prompts_per_step` but neither `num_samples` nor `num_steps` gets
        ``num_steps = max_steps``, so its dataset is sized to the run; any other file is returned unchanged.
        The hash a run's manifest gets is this config's (`ormix ablate` stamps the same).

        Example:
            >>> cfg = MixtureConfig(members={"a": {"target": "local:echo"}}, prompts_per_step=2,
            ...                     train={"max_steps": 5})
            >>> cfg.sized_for().num_steps, cfg.sized_for(8).num_steps
            (5, 8)
        """
        steps = self.train.get("max_steps") if max_steps is None else max_steps
        if (
            self.num_samples is None
            and self.num_steps is None
            and self.prompts_per_step
            and _positive_int(steps)
        ):
            return self.updated(num_steps=steps)
        return self


#: A check of a ``train:`` section: ``(key, message)`` for every setting that is wrong.
TrainCheck = Callable[[dict[str, Any]], list[tuple[str, str]]]


def _evened(weights: dict[str, float]) -> dict[str, float]:
    """``weights``, or equal weights when every one is 0: what is left of a phase that trained only on the
    dropped members (an arm's members then share its steps, rather than the arm failing validation)."""
    return weights if any(weights.values()) else {n: 1.0 for n in weights}


def _positive_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _with_base_dir(data: Mapping[str, Any], file_dir: Path | None) -> tuple[dict[str, Any], Problem | None]:
    """``data`` with ``base_dir`` made absolute (from ``file_dir``, else the working directory) and added to
    where ``module:Class`` modules are looked for; or the problem with it."""
    data = dict(data)
    base = data.get("base_dir")
    if not isinstance(base, str) or not base:
        return data, None  # absent, or a wrong type its own check reports
    path = Path(base).expanduser()
    if not path.is_absolute() and file_dir is not None:
        path = file_dir / path
    path = path.resolve()
    if not path.is_dir():
        return data, Problem(
            ("base_dir",),
            f"{str(path)!r} is not a directory; base_dir names the directory `module:Class` modules are "
            "looked for in (the original mixture file's directory): fix the path or remove the key",
        )
    from ormix.server._registry import add_search_dir

    add_search_dir(path)
    data["base_dir"] = str(path)
    return data, None


def _plan_length_problems(data: Mapping[str, Any]) -> list[Problem]:
    raw_train = data.get("train")
    steps = raw_train.get("max_steps") if isinstance(raw_train, Mapping) else None
    k, rows, num_steps = data.get("prompts_per_step"), data.get("num_samples"), data.get("num_steps")
    if not all(v is None or _positive_int(v) for v in (steps, k, rows, num_steps)):
        return []  # a wrong value is reported by its own check
    problem = plan_length_problem(steps, k, rows, num_steps)
    return [Problem(("num_samples",), problem)] if problem else []


def load_mixture_config(
    path: str | os.PathLike[str],
    *,
    environ: Mapping[str, str] | None = None,
    defer_missing_secrets: bool = False,
    train_check: TrainCheck | None = None,
) -> MixtureConfig:
    """Load and validate a mixture file; raise `MixtureConfigError` listing every problem.

    ``defer_missing_secrets``: a ``${VAR}`` secret whose variable is unset fails when it is used, not now
    (for looking at a mixture without its keys, as `ormix inspect` does).

    Example:
        >>> cfg = load_mixture_config("mixtures/local-demo.yaml")
        >>> cfg.name, cfg.train_members
        ('local-demo', ['echo', 'terminals', 'seta'])
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MixtureConfigError(
            [Problem((), "file not found; check the path (mixtures ship in the repository's mixtures/)")],
            str(p),
        ) from None
    except (OSError, UnicodeDecodeError) as e:
        raise MixtureConfigError(
            [Problem((), f"cannot read the file ({e.__class__.__name__}: {e})")], str(p)
        ) from None
    return MixtureConfig.from_yaml_text(
        text, str(p), environ=environ, defer_missing_secrets=defer_missing_secrets, train_check=train_check
    )
