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
`MixtureFileError` that lists every problem, one per line, each with the file, the line, the key path
(``members.seta.num_tasks``), what is wrong and how to fix it.

Secrets. A member's ``secrets`` values may reference environment variables as ``${NAME}``; they are
expanded when the file is loaded, and a missing variable is an error naming it. ``$${`` writes a literal
``${``. Literal values are accepted too (no warning), but then the file itself is a secret: keep it out of
version control, and know that `MixtureConfig.to_yaml` writes such literals back as they were. Secret values
never appear in reprs, error messages or `MixtureConfig.manifest_dict` (which keeps only secret names).

This module imports nothing of ormix except `ormix.targets`.

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

import difflib
import hashlib
import json
import os
import re
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError, core_schema
from typing_extensions import Self

from ormix.targets import Target, TargetError, parse_target

__all__ = [
    "DEFAULT_API_KEY_ENV",
    "EvalConfig",
    "MemberConfig",
    "MixtureConfig",
    "MixtureConfigError",
    "MixtureFileError",
    "PhaseConfig",
    "Problem",
    "Secret",
    "load_mixture_config",
]

#: The environment variable a catalog member reads its OpenReward API key from unless `api_key_env` says.
DEFAULT_API_KEY_ENV = "OPENREWARD_API_KEY"

MEMBER_NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,31}")
_MIXTURE_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_ENV_VAR_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# `$${` escapes a literal `${`; `${NAME}` is a reference. Braces inside are not allowed, so an unclosed or
# nested `${` in a literal secret simply stays literal.
_ENV_REF_RE = re.compile(r"\$\$\{|\$\{([^{}]*)\}")
_ERR = "ormix_config"  # pydantic error type of every problem this module words itself

Loc = tuple[str | int, ...]


# --------------------------------------------------------------------------------------------------------
# Problems and errors


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a mixture config: where (key path, line when known) and what to do.

    Example:
        >>> Problem(("members", "seta", "num_tasks"), "use either num_tasks or indices, not both", 7).render("m.yaml")
        'm.yaml:7: members.seta.num_tasks: use either num_tasks or indices, not both'
    """

    path: Loc
    message: str
    line: int | None = None

    @property
    def key_path(self) -> str:
        """The path as written in messages: ``members.seta.num_tasks``, ``schedule[1].until_step``."""
        return render_path(self.path)

    def render(self, source: str) -> str:
        where = f"{source}:{self.line}" if self.line is not None else source
        return f"{where}: {self.key_path}: {self.message}"


def render_path(path: Iterable[str | int]) -> str:
    """Render a key path for messages (``members.seta.weight``, ``schedule[0].weights``)."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


class MixtureConfigError(ValueError):
    """A mixture config that is not valid; ``problems`` lists every problem found.

    The message has one line per problem, each naming the source, key path, what is wrong and the fix.
    """

    def __init__(self, problems: list[Problem], source: str) -> None:
        self.problems = list(problems)
        self.source = source
        n = len(self.problems)
        head = f"{source}: {n} problem{'s' if n != 1 else ''} in the mixture config:"
        super().__init__("\n".join([head, *(f"  {p.render(source)}" for p in self.problems)]))


class MixtureFileError(MixtureConfigError):
    """A mixture file that cannot be loaded: YAML syntax, duplicate keys, or an invalid config."""


def _problem_error(message: str) -> PydanticCustomError:
    return PydanticCustomError(_ERR, "{message}", {"message": message})


def _suggest(word: str, options: Iterable[str]) -> str:
    match = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f"; did you mean {match[0]!r}?" if match else ""


# --------------------------------------------------------------------------------------------------------
# Secrets


class Secret:
    """A secret value from a mixture file, as written (``source``) and as expanded (`get_secret_value`).

    ``source`` is the text in the file: a reference such as ``${OPENREWARD_API_KEY}`` or, for a literal
    secret, the secret itself. ``repr``/``str`` never show a value, only referenced variable names.

    Example:
        >>> s = Secret.expand("${TOKEN}", {"TOKEN": "abc"})
        >>> s, s.get_secret_value(), s.env_vars
        (Secret(from $TOKEN), 'abc', ('TOKEN',))
    """

    __slots__ = ("_source", "_value", "env_vars")

    def __init__(self, source: str, value: str, env_vars: tuple[str, ...] = ()) -> None:
        self._source = source
        self._value = value
        self.env_vars = env_vars

    @classmethod
    def expand(cls, source: str, environ: Mapping[str, str] | None = None) -> Secret:
        """Expand ``${NAME}`` references in ``source`` from ``environ`` (default: ``os.environ``).

        Raises ``ValueError`` naming the missing variables (never the value).
        """
        env = os.environ if environ is None else environ
        names: list[str] = []
        missing: list[str] = []
        bad = False

        def sub(m: re.Match[str]) -> str:
            nonlocal bad
            if m.group(0) == "$${":
                return "${"
            name = m.group(1)
            if not _ENV_VAR_RE.fullmatch(name):
                bad = True
                return ""
            names.append(name)
            if not env.get(name):
                missing.append(name)
                return ""
            return env[name]

        value = _ENV_REF_RE.sub(sub, source)
        if bad:
            # The text between the braces may be part of a literal secret: do not echo it.
            raise ValueError(
                "a ${...} reference must hold an environment variable name (letters, digits, '_'); "
                "write '$${' for a literal '${'"
            )
        if missing:
            listed = ", ".join(dict.fromkeys(missing))
            raise ValueError(
                f"environment variable {listed} is not set or empty; export it before loading "
                f"(export {missing[0]}=...) or remove the reference"
            )
        return cls(source, value, tuple(dict.fromkeys(names)))

    @property
    def source(self) -> str:
        """The text as written in the file (a literal secret if it has no ``${NAME}`` reference)."""
        return self._source

    @property
    def is_reference(self) -> bool:
        """True when the value comes from environment variables rather than the file."""
        return bool(self.env_vars)

    def get_secret_value(self) -> str:
        """The expanded secret; pass it on, never log it."""
        return self._value

    def __repr__(self) -> str:
        if self.env_vars:
            return "Secret(from " + ", ".join(f"${n}" for n in self.env_vars) + ")"
        return "Secret('**********')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return self._source == other._source and self._value == other._value

    def __hash__(self) -> int:
        return hash(self._source)

    @classmethod
    def __get_pydantic_core_schema__(cls, source_type: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.with_info_plain_validator_function(
            cls._pydantic_validate,
            serialization=core_schema.plain_serializer_function_ser_schema(lambda s: s.source),
        )

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: Any, handler: Any) -> dict[str, Any]:
        return {"type": "string", "description": "a secret, or ${ENV_VAR} references expanded at load"}

    @classmethod
    def _pydantic_validate(cls, value: Any, info: core_schema.ValidationInfo) -> Secret:
        if isinstance(value, Secret):
            return value
        if not isinstance(value, str):
            raise _problem_error(
                f"a secret must be a string, not {type(value).__name__}; quote it in the file"
            )
        context = info.context if isinstance(info.context, Mapping) else {}
        try:
            return cls.expand(value, context.get("environ"))
        except ValueError as e:
            raise _problem_error(str(e)) from None


# --------------------------------------------------------------------------------------------------------
# Cross-field checks. They read raw input (dicts from YAML, or model instances) defensively, so they run
# even when pydantic rejected other fields: a file with several problems gets all of them reported.


def _fields(obj: Any) -> dict[str, Any]:
    if isinstance(obj, BaseModel):
        return dict(obj)
    return dict(obj) if isinstance(obj, Mapping) else {}


def _num(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    return None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _selection_checks(d: Mapping[str, Any]) -> list[Problem]:
    out = []
    if d.get("num_tasks") is not None and d.get("indices") is not None:
        out.append(
            Problem(
                ("num_tasks",),
                "num_tasks and indices are both set; use either num_tasks or indices, not both",
            )
        )
    if isinstance(d.get("indices"), list) and not d["indices"]:
        out.append(Problem(("indices",), "indices is empty; list at least one task index or remove indices"))
    return out


def _member_checks(d: Mapping[str, Any]) -> list[Problem]:
    out = _selection_checks(d)
    if d.get("role") == "eval" and d.get("weight") is not None:
        out.append(
            Problem(
                ("weight",),
                "an eval-only member (role: eval) is never trained on, so it takes no weight; "
                "remove weight or set role: both",
            )
        )
    where = d.get("where")
    if isinstance(where, Mapping):
        for key, value in where.items():
            if isinstance(value, list) and not value:
                out.append(
                    Problem(
                        ("where", key),
                        "an empty list matches no task; list at least one value or remove the key",
                    )
                )
    return out


def _roles(members: Mapping[Any, Any]) -> dict[str, str]:
    roles = {}
    for name, m in members.items():
        role = _fields(m).get("role", "train")
        roles[str(name)] = role if role in ("train", "eval", "both") else "train"
    return roles


def _weight_map_checks(path: Loc, weights: Any, roles: dict[str, str], what: str) -> list[Problem]:
    if not isinstance(weights, Mapping):
        return []
    out = []
    train = [n for n, r in roles.items() if r != "eval"]
    known = ", ".join(roles) or "(none)"
    for key, value in weights.items():
        name = str(key)
        if name not in roles:
            out.append(
                Problem(
                    (*path, name),
                    f"{what} names unknown member {name!r}{_suggest(name, roles)} "
                    f"Use one of the members: {known}",
                )
            )
        elif roles[name] == "eval":
            out.append(
                Problem(
                    (*path, name),
                    f"member {name!r} has role: eval and is never trained on, so it takes no weight; "
                    f"remove it from {what} or set its role to both",
                )
            )
        v = _num(value)
        if v is not None and v < 0:
            out.append(Problem((*path, name), f"weight {v:g} is negative; use a weight >= 0"))
    missing = [n for n in train if n not in {str(k) for k in weights}]
    if missing and roles:
        example = f"{missing[0]}: 0.5"
        out.append(
            Problem(
                path,
                f"{what} gives no weight to train member(s) {', '.join(missing)}; add them "
                f"(e.g. `{example}`, 0 to leave one out for now) or set their role: eval",
            )
        )
    present = [_num(weights[k]) for k in weights if str(k) in train]
    if present and not missing and all(v == 0 for v in present):
        out.append(
            Problem(path, f"every train member's weight in {what} is 0; give at least one a weight > 0")
        )
    return out


def _mixture_checks(d: Mapping[str, Any]) -> list[Problem]:
    out: list[Problem] = []
    members = d.get("members")
    members = members if isinstance(members, Mapping) else None
    roles = _roles(members) if members is not None else {}

    if members is not None:
        if not members:
            out.append(Problem(("members",), "no members; add at least one environment under members:"))
        for name in members:
            if not isinstance(name, str):
                continue  # pydantic reports non-string keys
            rule = (
                "use a short identifier: a lowercase letter, then lowercase letters, digits or '_', "
                "at most 32 characters (e.g. seta, endless_terminals)"
            )
            if not MEMBER_NAME_RE.fullmatch(name):
                out.append(Problem(("members", name), f"invalid member name {name!r}; {rule}"))
            elif "__" in name:
                out.append(
                    Problem(
                        ("members", name),
                        f"member name {name!r} contains '__', which ormix uses to join <member>__<tool> "
                        "in namespaced tool names; use a single '_'",
                    )
                )
            elif name.endswith("_"):
                out.append(
                    Problem(
                        ("members", name),
                        f"member name {name!r} ends with '_', which makes <member>__<tool> names "
                        "ambiguous; drop the trailing '_'",
                    )
                )
        if members and all(r == "eval" for r in roles.values()):
            out.append(
                Problem(
                    ("members",),
                    "no member is trained on (every member has role: eval); "
                    "set role: train or both on at least one member",
                )
            )

    weights = d.get("weights")
    schedule = d.get("schedule")
    strategy = d.get("strategy", "weights")
    # Eval-only members with a weight are reported by the member check; leave them out here.
    per_member = {
        n: _fields(m).get("weight")
        for n, m in (members or {}).items()
        if _fields(m).get("weight") is not None and roles.get(str(n)) != "eval"
    }
    has_weights = weights is not None or bool(per_member)

    if weights is not None and per_member:
        listed = ", ".join(f"members.{n}.weight" for n in per_member)
        out.append(
            Problem(
                ("weights",),
                f"weights are given both in `weights:` and per member ({listed}); keep one of the two",
            )
        )
    if has_weights and schedule is not None:
        out.append(
            Problem(
                ("schedule",),
                "both static weights and a schedule are given; the schedule sets weights per phase, so "
                "remove `weights:` (and member `weight:`) or remove the schedule",
            )
        )
    if strategy in ("temperature", "round_robin"):
        if has_weights:
            out.append(
                Problem(
                    ("strategy",),
                    f"strategy {strategy} does not use weights; remove the weights or set strategy: weights",
                )
            )
        if schedule is not None:
            out.append(
                Problem(
                    ("strategy",),
                    f"a schedule needs strategy: weights (not {strategy}); "
                    "remove strategy or remove the schedule",
                )
            )

    if weights is not None and members is not None:
        out += _weight_map_checks(("weights",), weights, roles, "weights")
    if per_member and members is not None:
        train = [n for n, r in roles.items() if r != "eval"]
        for n in train:
            if n not in per_member:
                out.append(
                    Problem(
                        ("members", n, "weight"),
                        "some members have a weight and this train member has none; give every train "
                        "member a weight, or move all of them to `weights:`",
                    )
                )
        for n, w in per_member.items():
            v = _num(w)
            if v is not None and v < 0:
                out.append(Problem(("members", n, "weight"), f"weight {v:g} is negative; use a weight >= 0"))
        train_weights = [_num(per_member[n]) for n in train if n in per_member]
        if train_weights and len(train_weights) == len(train) and all(v == 0 for v in train_weights):
            out.append(
                Problem(("members",), "every train member's weight is 0; give at least one a weight > 0")
            )

    if isinstance(schedule, list):
        out += _schedule_checks(schedule, roles if members is not None else None)
        if d.get("prompts_per_step") is None:
            out.append(
                Problem(
                    ("prompts_per_step",),
                    "a schedule counts optimizer steps, so ormix needs the number of prompts per step to "
                    "lay out the dataset; add `prompts_per_step: N`",
                )
            )
    return out


def _schedule_checks(schedule: list[Any], roles: dict[str, str] | None) -> list[Problem]:
    out: list[Problem] = []
    if not schedule:
        return [Problem(("schedule",), "schedule is empty; add phases or remove schedule")]
    last = len(schedule) - 1
    prev: int | None = None
    for i, phase in enumerate(schedule):
        p = _fields(phase)
        until = _int(p.get("until_step"))
        if p.get("until_step") is None and i != last:
            out.append(
                Problem(
                    ("schedule", i, "until_step"),
                    "only the last phase may be open-ended; give this phase an until_step or move it last",
                )
            )
        if until is not None and prev is not None and until <= prev:
            out.append(
                Problem(
                    ("schedule", i, "until_step"),
                    f"until_step {until} does not come after the previous phase's {prev}; "
                    "order phases by strictly increasing until_step",
                )
            )
        if until is not None:
            prev = until
        if i == last and p.get("interpolate") is True:
            out.append(
                Problem(
                    ("schedule", i, "interpolate"),
                    "the last phase has no next phase to interpolate toward; remove interpolate",
                )
            )
        if roles is not None:
            out += _weight_map_checks(("schedule", i, "weights"), p.get("weights"), roles, f"phase {i}")
    return out


def _raise_with(cls_name: str, errors: list[InitErrorDetails], problems: list[Problem]) -> None:
    if errors or problems:
        details = errors + [
            InitErrorDetails(type=_problem_error(p.message), loc=p.path, input=None) for p in problems
        ]
        raise ValidationError.from_exception_data(cls_name, details, hide_input=True)


def _carry(e: ValidationError) -> list[InitErrorDetails]:
    """Re-emit pydantic's errors so they can be raised together with this module's own problems."""
    out: list[InitErrorDetails] = []
    for err in e.errors():
        loc = tuple(err["loc"])
        # Container inputs (a member's mapping, say) may hold secret values: keep only plain scalars.
        keep_input = "secrets" not in loc and isinstance(err.get("input"), (str, int, float, bool))
        if err["type"] == _ERR:
            out.append(InitErrorDetails(type=_problem_error(err["msg"]), loc=loc, input=None))
        else:
            detail = InitErrorDetails(
                type=err["type"], loc=loc, input=err.get("input") if keep_input else None
            )
            if err.get("ctx"):
                detail["ctx"] = err["ctx"]
            out.append(detail)
    return out


def _checked(
    cls: type[BaseModel], data: Any, handler: Any, checks: Callable[[Mapping[str, Any]], list[Problem]]
):
    errors: list[InitErrorDetails] = []
    result = None
    try:
        result = handler(data)
    except ValidationError as e:
        errors = _carry(e)
    problems = checks(_fields(data)) if isinstance(data, (Mapping, BaseModel)) else []
    _raise_with(cls.__name__, errors, problems)
    return result


# --------------------------------------------------------------------------------------------------------
# Models

_MODEL_CONFIG = ConfigDict(extra="forbid", hide_input_in_errors=True, allow_inf_nan=False, frozen=True)

Scalar = str | int | float | bool


class EvalConfig(BaseModel):
    """Which tasks of a member form its eval set.

    ``split`` defaults to the member's split. ``num_tasks`` and ``indices`` are mutually exclusive, as for
    training; with neither, the whole split is used.

    Example:
        >>> EvalConfig(split="test", num_tasks=32).num_tasks
        32
    """

    model_config = _MODEL_CONFIG

    split: str | None = Field(None, min_length=1)
    num_tasks: int | None = Field(None, ge=1)
    indices: list[int] | None = None

    @field_validator("indices")
    @classmethod
    def _indices_non_negative(cls, v: list[int] | None) -> list[int] | None:
        if v is not None and any(i < 0 for i in v):
            raise _problem_error("task indices start at 0; remove negative indices")
        return v

    @model_validator(mode="wrap")
    @classmethod
    def _cross_checks(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        return _checked(cls, data, handler, _selection_checks)


class MemberConfig(BaseModel):
    """One environment of a mixture: where it is, which tasks, how it is weighted, scored and evaluated.

    Arguments mirror ``OpenRewardSpec`` (``num_tasks``/``indices``/``split``/``env_name``/...), plus:
    ``where`` (metadata filter, a value or a list of accepted values per key), ``weight`` (alternative to the
    mixture's ``weights:``), ``role`` (``train``, ``eval`` or ``both``), ``scale`` (reward multiplier),
    ``unscored_reward`` (reward for a rollout that got no score; ``None`` leaves it out of GRPO),
    ``transport`` (``ormix`` client or the ``sdk``), ``api_key_env`` (variable holding the API key;
    ``OPENREWARD_API_KEY`` for catalog targets) and ``eval`` (eval task selection).

    An eval-only member (``role: eval``) without ``eval:`` uses its own ``split``/``num_tasks``/``indices``
    as its eval set.

    Example:
        >>> m = MemberConfig(target="Eigent/SETA", num_tasks=64, where={"difficulty": ["Medium", "Hard"]})
        >>> m.parsed_target.kind, m.resolved_api_key_env
        ('catalog', 'OPENREWARD_API_KEY')
    """

    model_config = _MODEL_CONFIG

    target: str
    num_tasks: int | None = Field(None, ge=1)
    indices: list[int] | None = None
    split: str = Field("train", min_length=1)
    where: dict[str, Scalar | list[Scalar]] = Field(default_factory=dict)
    env_name: str | None = Field(None, min_length=1)
    include_metadata: bool = True
    discover_task_tools: bool = True
    task_tools_discovery_index: int | None = Field(None, ge=0)
    secrets: dict[str, Secret] = Field(default_factory=dict)
    api_key_env: str | None = None
    transport: Literal["ormix", "sdk"] = "ormix"
    weight: float | None = None
    role: Literal["train", "eval", "both"] = "train"
    scale: float = Field(1.0, gt=0)
    unscored_reward: float | None = None
    eval: EvalConfig | None = None

    @field_validator("target")
    @classmethod
    def _parse_target(cls, v: str) -> str:
        try:
            return str(parse_target(v))
        except TargetError as e:
            raise _problem_error(str(e)) from None

    @field_validator("indices")
    @classmethod
    def _indices_non_negative(cls, v: list[int] | None) -> list[int] | None:
        if v is not None and any(i < 0 for i in v):
            raise _problem_error("task indices start at 0; remove negative indices")
        return v

    @field_validator("api_key_env")
    @classmethod
    def _env_var_name(cls, v: str | None) -> str | None:
        if v is not None and not _ENV_VAR_RE.fullmatch(v):
            raise _problem_error(
                "api_key_env is the NAME of an environment variable (letters, digits, '_'), "
                "not the key itself; e.g. api_key_env: OPENREWARD_API_KEY"
            )
        return v

    @model_validator(mode="wrap")
    @classmethod
    def _cross_checks(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        return _checked(cls, data, handler, _member_checks)

    @property
    def parsed_target(self) -> Target:
        """The target as a `Target` (kind and value)."""
        return parse_target(self.target)

    @property
    def resolved_api_key_env(self) -> str | None:
        """The variable holding the API key: ``api_key_env``, else ``OPENREWARD_API_KEY`` for catalog targets."""
        if self.api_key_env is not None:
            return self.api_key_env
        return DEFAULT_API_KEY_ENV if self.parsed_target.kind == "catalog" else None

    def api_key(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The API key from `resolved_api_key_env`, or ``None`` when unset. Never log it."""
        name = self.resolved_api_key_env
        env = os.environ if environ is None else environ
        return (env.get(name) or None) if name else None

    def secret_values(self) -> dict[str, str]:
        """The expanded secrets, for sending to the environment. Never log them."""
        return {k: s.get_secret_value() for k, s in self.secrets.items()}

    @property
    def trains(self) -> bool:
        """True if the member contributes training rows (role train or both)."""
        return self.role != "eval"

    @property
    def evaluates(self) -> bool:
        """True if the member has an eval set (role eval or both, or an ``eval:`` section)."""
        return self.role != "train" or self.eval is not None


class PhaseConfig(BaseModel):
    """One phase of a step schedule: the weights in force until ``until_step`` (exclusive).

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


class MixtureConfig(BaseModel):
    """A whole mixture: members, how they are mixed, and overrides for ``ormix train``.

    Mixing: with ``strategy: weights`` (default) rows are drawn in proportion to ``weights:`` (or per-member
    ``weight``; equal weights if neither), or per ``schedule`` phase. Weights need not sum to 1; every
    train member needs one (0 keeps it out of training for now). ``temperature`` weighs members by task count
    (p ∝ n^(1/T)); ``round_robin`` alternates. ``train`` holds GRPOConfig overrides and ``telemetry`` alarm
    thresholds; both are checked by their consumers.

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
    strategy: Literal["weights", "temperature", "round_robin"] = "weights"
    temperature: float = Field(1.0, gt=0)
    schedule: list[PhaseConfig] | None = None
    num_samples: int | None = Field(None, ge=1)
    prompts_per_step: int | None = Field(None, ge=1)
    routing: Literal["auto", "per_env", "namespaced"] = "auto"
    seed: int = Field(0, ge=0)
    train: dict[str, Any] = Field(default_factory=dict)
    telemetry: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _name_syntax(cls, v: str) -> str:
        if not _MIXTURE_NAME_RE.fullmatch(v):
            raise _problem_error(
                "a mixture name uses letters, digits, '_', '.' or '-', starts with a letter or digit, "
                "and has at most 128 characters"
            )
        return v

    @model_validator(mode="wrap")
    @classmethod
    def _cross_checks(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        return _checked(cls, data, handler, _mixture_checks)

    # ---- construction ---------------------------------------------------------------------------------

    @classmethod
    def from_dict(
        cls, data: Any, source: str = "<dict>", *, environ: Mapping[str, str] | None = None
    ) -> MixtureConfig:
        """Validate plain data; raise `MixtureConfigError` listing every problem.

        ``environ`` replaces ``os.environ`` for ``${VAR}`` expansion in secrets.
        """
        if not isinstance(data, Mapping):
            raise MixtureConfigError([_not_a_mapping(data)], source)
        try:
            return cls.model_validate(dict(data), context={"environ": environ})
        except ValidationError as e:
            raise MixtureConfigError(_problems_from(e), source) from None

    @classmethod
    def from_yaml_text(
        cls, text: str, source: str = "<string>", *, environ: Mapping[str, str] | None = None
    ) -> MixtureConfig:
        """Parse and validate a mixture file's text; raise `MixtureFileError` listing every problem.

        Without a ``name:`` key the name is the stem of ``source`` when it is a path.

        Example:
            >>> MixtureConfig.from_yaml_text("members: {a: {target: 'local:echo'}}", "mixtures/x.yaml").name
            'x'
        """
        try:
            data, lines, problems = _load_yaml(text)
        except yaml.YAMLError as e:
            raise MixtureFileError([_yaml_syntax_problem(e)], source) from None
        if not isinstance(data, dict):
            raise MixtureFileError([_not_a_mapping(data)], source)
        if "name" not in data and not source.startswith("<"):
            data = {"name": _name_from_stem(Path(source).stem), **data}
        try:
            cfg = cls.model_validate(data, context={"environ": environ})
        except ValidationError as e:
            problems += _problems_from(e)
            cfg = None
        if problems:
            located = [
                Problem(p.path, p.message, p.line if p.line is not None else _line_of(p.path, lines))
                for p in problems
            ]
            located.sort(key=lambda p: (p.line if p.line is not None else 1 << 30, p.key_path))
            raise MixtureFileError(located, source)
        assert cfg is not None
        return cfg

    # ---- views ----------------------------------------------------------------------------------------

    @property
    def train_members(self) -> list[str]:
        """Names of members that contribute training rows, in file order."""
        return [n for n, m in self.members.items() if m.trains]

    @property
    def eval_members(self) -> list[str]:
        """Names of members with an eval set, in file order."""
        return [n for n, m in self.members.items() if m.evaluates]

    def static_weights(self) -> dict[str, float] | None:
        """Per train member weight for ``strategy: weights`` without a schedule; ``None`` otherwise.

        Taken from ``weights:``, else from member ``weight``, else 1.0 each (equal).
        """
        if self.strategy != "weights" or self.schedule is not None:
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
        body = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
        if header:
            body = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines()) + body
        return body

    def manifest_dict(self) -> dict[str, Any]:
        """The config as plain JSON data, defaults included, with secret values removed (names kept)."""
        data = self.model_dump(mode="json")
        for member in data["members"].values():
            member["secrets"] = sorted(member["secrets"])
        return data

    def config_hash(self) -> str:
        """sha256 (hex) of the canonical JSON of `manifest_dict`: stable across key order and runs."""
        canonical = json.dumps(
            self.manifest_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    # ---- ablations ------------------------------------------------------------------------------------

    def without(self, *names: str) -> MixtureConfig:
        """The mixture without the named members (dropped from weights and schedule too).

        Named ``<name>-without-<a>[-<b>...]``. When one train member is left, its weights and schedule are
        dropped (a one-member mixture trains on that member only).
        """
        self._require_known(names, "without")
        if not names:
            raise MixtureConfigError(
                [Problem(("members",), "without() needs at least one member name")], self.name
            )
        keep = [n for n in self.members if n not in names]
        return self._subset(keep, f"{self.name}-without-{'-'.join(names)}")

    def only(self, *names: str) -> MixtureConfig:
        """The mixture with only the named members. Named ``<name>-only-<a>[-<b>...]``."""
        self._require_known(names, "only")
        if not names:
            raise MixtureConfigError(
                [Problem(("members",), "only() needs at least one member name")], self.name
            )
        keep = [n for n in self.members if n in names]
        return self._subset(keep, f"{self.name}-only-{'-'.join(keep)}")

    def reweight(self, **weights: float) -> MixtureConfig:
        """The mixture with static weights: the given ones, others keep their current static weight.

        Replaces any schedule and sets ``strategy: weights``; per-member weights move to ``weights:``.
        Named ``<name>-reweighted``.

        Example:
            >>> cfg = MixtureConfig(members={"a": {"target": "local:echo"}, "b": {"target": "local:seta"}})
            >>> cfg.reweight(b=3).weights
            {'a': 1.0, 'b': 3.0}
        """
        self._require_known(tuple(weights), "reweight")
        base = self.static_weights() or {}
        new = {n: float(weights.get(n, base.get(n, 1.0))) for n in self.train_members}
        # An explicitly named eval-only member stays in, so validation says why it cannot take a weight.
        new.update({n: float(w) for n, w in weights.items() if n not in new})
        members = {n: m.model_copy(update={"weight": None}) for n, m in self.members.items()}
        return self._rebuild(
            name=_derived_name(f"{self.name}-reweighted"),
            members=members,
            weights=new,
            schedule=None,
            strategy="weights",
        )

    def renamed(self, name: str) -> MixtureConfig:
        """The same mixture under another name."""
        return self._rebuild(name=name)

    def _require_known(self, names: Iterable[str], op: str) -> None:
        unknown = [n for n in names if n not in self.members]
        if unknown:
            raise MixtureConfigError(
                [
                    Problem(
                        ("members",),
                        f"{op}() got unknown member(s) {', '.join(map(repr, unknown))}; "
                        f"known members: {', '.join(self.members)}",
                    )
                ],
                self.name,
            )

    def _subset(self, keep: list[str], name: str) -> MixtureConfig:
        members = {n: self.members[n] for n in keep}
        weights = {n: w for n, w in self.weights.items() if n in members} if self.weights else self.weights
        schedule = (
            [
                ph.model_copy(update={"weights": {n: w for n, w in ph.weights.items() if n in members}})
                for ph in self.schedule
            ]
            if self.schedule
            else self.schedule
        )
        strategy = self.strategy
        if sum(m.trains for m in members.values()) == 1:
            weights, schedule, strategy = None, None, "weights"
            members = {n: m.model_copy(update={"weight": None}) for n, m in members.items()}
        return self._rebuild(
            name=_derived_name(name), members=members, weights=weights, schedule=schedule, strategy=strategy
        )

    def _rebuild(self, **updates: Any) -> MixtureConfig:
        # Pass the validated members themselves: pydantic does not revalidate model instances, so
        # secrets are not expanded a second time (the variables may be gone by now).
        data = {name: getattr(self, name) for name in type(self).model_fields}
        data.update(updates)
        try:
            return type(self).model_validate(data)
        except ValidationError as e:
            raise MixtureConfigError(_problems_from(e), data.get("name", self.name)) from None


def load_mixture_config(
    path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None
) -> MixtureConfig:
    """Load and validate a mixture file; raise `MixtureFileError` listing every problem.

    Example:
        >>> cfg = load_mixture_config("mixtures/local-demo.yaml")   # doctest: +SKIP
        >>> cfg.name                                                 # doctest: +SKIP
        'local-demo'
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MixtureFileError(
            [Problem((), "file not found; check the path (mixtures ship in the repository's mixtures/)")],
            str(p),
        ) from None
    except (OSError, UnicodeDecodeError) as e:
        raise MixtureFileError(
            [Problem((), f"cannot read the file ({e.__class__.__name__}: {e})")], str(p)
        ) from None
    return MixtureConfig.from_yaml_text(text, str(p), environ=environ)


# --------------------------------------------------------------------------------------------------------
# YAML: a loader that reports duplicate keys with their lines and reads 1e-5 as a float


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that records duplicate mapping keys instead of silently keeping the last one."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.node_paths: dict[int, Loc] = {}
        self.duplicates: list[Problem] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                try:
                    key = self.construct_object(key_node, deep=True)
                    hash(key)
                except (yaml.YAMLError, TypeError):
                    continue  # the base constructor reports unhashable keys
                line = key_node.start_mark.line + 1
                if key in seen:
                    path = (*self.node_paths.get(id(node), ()), str(key))
                    fix = (
                        "each member needs its own name; rename or remove one"
                        if self.node_paths.get(id(node)) == ("members",)
                        else "keep one of them"
                    )
                    self.duplicates.append(
                        Problem(path, f"duplicate key {key!r} (first on line {seen[key]}); {fix}", line)
                    )
                else:
                    seen[key] = line
        return super().construct_mapping(node, deep=deep)


# YAML 1.1 (PyYAML) reads `1e-5` as a string; learning rates are written that way, so accept it as a float.
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _index_nodes(node: yaml.Node, path: Loc, node_paths: dict[int, Loc], lines: dict[Loc, int]) -> None:
    if isinstance(node, yaml.MappingNode):
        node_paths[id(node)] = path
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            child = (*path, key_node.value)
            # PyYAML keeps the last of duplicate keys, so the last occurrence gives the line.
            lines[child] = key_node.start_mark.line + 1
            _index_nodes(value_node, child, node_paths, lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            child = (*path, i)
            lines[child] = item.start_mark.line + 1
            _index_nodes(item, child, node_paths, lines)


def _load_yaml(text: str) -> tuple[Any, dict[Loc, int], list[Problem]]:
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        lines: dict[Loc, int] = {}
        if node is None:
            return None, lines, []
        _index_nodes(node, (), loader.node_paths, lines)
        data = loader.construct_document(node)
        return data, lines, list(loader.duplicates)
    finally:
        loader.dispose()


def _line_of(path: Loc, lines: Mapping[Loc, int]) -> int | None:
    for end in range(len(path), 0, -1):
        key = tuple(str(p) if not isinstance(p, int) else p for p in path[:end])
        if key in lines:
            return lines[key]
    return None


def _yaml_syntax_problem(e: yaml.YAMLError) -> Problem:
    mark = getattr(e, "problem_mark", None)
    what = getattr(e, "problem", None) or str(e)
    line = mark.line + 1 if mark is not None else None
    col = f", column {mark.column + 1}" if mark is not None else ""
    return Problem((), f"YAML syntax error{col}: {what}; fix the YAML (check indentation and quoting)", line)


def _not_a_mapping(data: Any) -> Problem:
    if data is None:
        return Problem((), "the file is empty; a mixture file is a mapping with at least `members:`")
    return Problem(
        (),
        f"expected a mapping with `members:` at the top level, got a {type(data).__name__}; "
        "see mixtures/local-demo.yaml for the layout",
    )


def _name_from_stem(stem: str) -> str:
    return _derived_name(re.sub(r"[^A-Za-z0-9_.-]+", "-", stem).strip("-._") or "mixture")


def _derived_name(name: str) -> str:
    return name[:128]


class _Dumper(yaml.SafeDumper):
    """Block style for mappings, flow style for short lists of scalars (``indices: [0, 1, 2]``)."""


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    flow = all(not isinstance(x, (list, dict)) for x in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(list, _represent_list)


# --------------------------------------------------------------------------------------------------------
# pydantic errors → problems


_TYPE_FIXES: dict[str, str] = {
    "int_type": "write a whole number, e.g. 16",
    "int_parsing": "write a whole number, e.g. 16",
    "int_from_float": "write a whole number, e.g. 16",
    "float_type": "write a number, e.g. 0.5",
    "float_parsing": "write a number, e.g. 0.5",
    "finite_number": "write a finite number",
    "bool_type": "write true or false",
    "bool_parsing": "write true or false",
    "string_type": "write a string (quote it if YAML reads it as a number or boolean)",
    "string_too_short": "write a non-empty string or remove the key",
    "dict_type": "write a mapping (`key: value` lines indented below)",
    "list_type": "write a list, e.g. [0, 1, 2]",
    "model_type": "write a mapping (`key: value` lines indented below)",
    "model_attributes_type": "write a mapping (`key: value` lines indented below)",
}


def _allowed_keys(loc: Loc) -> list[str] | None:
    """Keys allowed by the model found at ``loc`` (walking MixtureConfig's annotations), if any."""
    ann: Any = MixtureConfig
    for part in loc:
        ann = _unwrap_optional(ann)
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            field = ann.model_fields.get(str(part))
            if field is None:
                return None
            ann = field.annotation
            continue
        origin = get_origin(ann)
        if origin is dict:
            ann = get_args(ann)[1]
        elif origin is list:
            ann = get_args(ann)[0]
        else:
            return None
    ann = _unwrap_optional(ann)
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return list(ann.model_fields)
    return None


def _unwrap_optional(ann: Any) -> Any:
    if get_origin(ann) in (Union, types.UnionType):
        args = [a for a in get_args(ann) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return ann


def _shown(value: Any) -> str:
    if isinstance(value, (bool, int, float)) or value is None:
        return repr(value)
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:37] + "...")
    return f"a {type(value).__name__}"


def _problems_from(e: ValidationError) -> list[Problem]:
    seen: set[tuple[Loc, str]] = set()
    out: list[Problem] = []
    for err in e.errors():
        loc = tuple(err["loc"])
        typ = err["type"]
        secret = "secrets" in loc
        value = err.get("input")
        if typ == _ERR:
            msg = err["msg"]
        elif "[key]" in loc or typ == "invalid_key":
            loc = loc[: loc.index("[key]")] if "[key]" in loc else loc
            msg = "keys here must be strings; quote the key (e.g. '1': ...)"
        elif "where" in loc and len(loc) > loc.index("where") + 1:
            loc = loc[: loc.index("where") + 2]
            msg = "a where filter value is a string, number, boolean, or a list of them"
        elif typ == "extra_forbidden":
            key = str(loc[-1])
            allowed = _allowed_keys(loc[:-1]) or []
            hint = _suggest(key, allowed)
            if hint:
                msg = f"unknown key {key!r}{hint}"
            elif allowed:
                msg = f"unknown key {key!r}; remove it or use one of: {', '.join(allowed)}"
            else:
                msg = f"unknown key {key!r}; remove it"
        elif typ == "missing":
            key = str(loc[-1])
            example = {"target": 'target: "Eigent/SETA"', "members": "members: {seta: {target: local:seta}}"}
            msg = f"required key {key!r} is missing; add it" + (
                f" (e.g. `{example[key]}`)" if key in example else ""
            )
        elif typ == "literal_error":
            expected = err.get("ctx", {}).get("expected", "")
            got = "" if secret else f", got {_shown(value)}"
            options = re.findall(r"'([^']*)'", str(expected))
            hint = _suggest(value, options) if isinstance(value, str) and not secret else ""
            msg = f"must be one of {expected}{got}{hint}"
        elif typ in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
            got = "" if secret else f" (got {_shown(value)})"
            msg = f"{err['msg'].replace('Input should be', 'must be')}{got}; change the value"
        else:
            got = "" if secret else f", got {_shown(value)}"
            fix = _TYPE_FIXES.get(typ, "fix the value")
            msg = f"{err['msg'].replace('Input should be', 'must be')}{got}; {fix}"
        if (loc, msg) not in seen:
            seen.add((loc, msg))
            out.append(Problem(loc, msg))
    return out
