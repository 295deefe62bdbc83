"""Cross-field checks of a mixture config (every problem at once, with its key path)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import InitErrorDetails

from ormix.config._problems import PROBLEM_TYPE, Loc, Problem, problem_error, suggest

# The checks read raw input (dicts from YAML, or model instances) defensively, so they run even when pydantic
# rejected other fields: a file with several problems gets all of them reported.

#: A member name: a short identifier (it prefixes namespaced tool names as ``<member>__<tool>``).
MEMBER_NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,31}")


def _fields(obj: Any) -> dict[str, Any]:
    return dict(obj) if isinstance(obj, (BaseModel, Mapping)) else {}


def selection_checks(d: Mapping[str, Any]) -> list[Problem]:
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


def held_out(trained: Iterable[int], candidates: Iterable[int], n: int) -> list[int] | None:
    """The eval tasks of ``eval: {num_tasks: n}`` on a member's own split: the first ``n`` of ``candidates``
    (the split's task indices, in order) the member does not train on; ``None`` when fewer than ``n`` remain.

    Example:
        >>> held_out(range(4), range(16), 2)      # trains on 0-3: evaluates on the two tasks after them
        [4, 5]
        >>> held_out([1, 3], range(6), 3), held_out(range(4), range(5), 2)
        ([0, 2, 4], None)
    """
    seen = set(trained)
    out = [i for i in candidates if i not in seen][: max(n, 0)]
    return out if len(out) == n else None


def eval_overlap_note(member: str, split: str, total: int, trained: int, wanted: int, overlap: int) -> str:
    """What is said when ``eval: {num_tasks: wanted}`` cannot be held out of a member's training tasks.

    Example:
        >>> print(eval_overlap_note("echo", "train", 4, 4, 2, 2))  # doctest: +NORMALIZE_WHITESPACE
        echo: eval overlaps training: split 'train' has 4 tasks and echo trains on 4, so 0 are left for
        eval: {num_tasks: 2}; its eval set is the split's first 2 tasks, 2 of them trained on (held-out
        numbers need eval: {split: test} or fewer training tasks)
    """
    left = max(total - trained, 0)
    return (
        f"{member}: eval overlaps training: split {split!r} has {total} tasks and {member} trains on "
        f"{trained}, so {left} {'is' if left == 1 else 'are'} left for eval: {{num_tasks: {wanted}}}; "
        f"its eval set is the split's first {min(wanted, total)} tasks, {overlap} of them trained on "
        "(held-out numbers need eval: {split: test} or fewer training tasks)"
    )


def member_checks(d: Mapping[str, Any]) -> list[Problem]:
    out = selection_checks(d)
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


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def weight_problems(weights: Mapping[str, object], members: Sequence[str]) -> list[tuple[str | None, str]]:
    """Everything wrong with a weight map over ``members``, as ``(member or None, message)`` pairs.

    The rules, written once (mixture files report them with their key path): a weight names a known member,
    is a finite number >= 0, and not every weight is zero.

    Example:
        >>> [m for m, _ in weight_problems({"a": -1, "zz": 1}, ["a", "b"])]
        ['a', 'zz']
        >>> weight_problems({"a": 0, "b": 0.0}, ["a", "b"])[0][1][:21]
        'all weights are zero '
    """
    known = sorted(members)
    out: list[tuple[str | None, str]] = []
    values: list[float] = []
    for member in sorted(weights, key=str):
        value = weights[member]
        if member not in known:
            out.append(
                (
                    member,
                    f"weights name unknown member {member!r}; members are {known}: "
                    "fix the name or add the member",
                )
            )
            continue
        w = _number(value)
        if w is None:
            out.append(
                (
                    member,
                    f"weight of member {member!r} is {value!r}, not a number; set a non-negative number",
                )
            )
        elif math.isnan(w) or math.isinf(w):
            out.append((member, f"weight of member {member!r} is {w}; set a finite non-negative number"))
        elif w < 0:
            out.append(
                (
                    member,
                    f"weight of member {member!r} is negative ({w}); weights must be >= 0 (0 leaves it out)",
                )
            )
        else:
            values.append(w)
    if not out and not any(v > 0 for v in values):
        out.append(
            (
                None,
                f"all weights are zero (members {known}); give at least one member a positive weight",
            )
        )
    return out


def schedule_problems(
    until_steps: Sequence[object], interpolates: Sequence[object]
) -> list[tuple[int | None, str, str]]:
    """Everything wrong with a schedule's phase boundaries, as ``(phase index, field, message)``.

    The rules, written once: at least one phase; only the last phase may be open-ended (``until_step``
    ``None``); boundaries strictly increase, from after step 1 (``until_step`` is exclusive and steps count
    from 1); the last phase cannot interpolate (nothing comes after it).
    Mixture files report these with their key path.

    Example:
        >>> schedule_problems([None, 10], [False, True])[0][2]
        'only the last phase may be open-ended; give this phase an until_step or move it last'
    """
    if not until_steps:
        return [(None, "", "the schedule is empty; add phases (the last may be open-ended) or remove it")]
    out: list[tuple[int | None, str, str]] = []
    last = len(until_steps) - 1
    prev: int | None = None
    for i, until in enumerate(until_steps):
        step = until if isinstance(until, int) and not isinstance(until, bool) else None
        if until is None and i != last:
            out.append(
                (
                    i,
                    "until_step",
                    "only the last phase may be open-ended; give this phase an until_step or move it last",
                )
            )
        # Steps count from 1 and until_step is exclusive: a first phase needs until_step >= 2 to hold a step.
        if step is not None and step <= (prev if prev is not None else 1):
            after = f"the previous phase's {prev}" if prev is not None else "step 1, the first step"
            out.append(
                (
                    i,
                    "until_step",
                    f"until_step {step} does not come after {after}; order phases by "
                    "strictly increasing until_step",
                )
            )
        if step is not None:
            prev = step
        if i == last and interpolates[i] is True:
            out.append(
                (
                    i,
                    "interpolate",
                    "the last phase has no next phase to interpolate toward; remove interpolate",
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
    given = {str(k): v for k, v in weights.items()}
    for name in given:
        if name in roles and roles[name] == "eval":
            out.append(
                Problem(
                    (*path, name),
                    f"member {name!r} has role: eval and is never trained on, so it takes no weight; "
                    f"remove it from {what} or set its role to both",
                )
            )
    missing = [n for n in train if n not in given]
    scored = {n: v for n, v in given.items() if n not in roles or roles[n] != "eval"}
    for member, message in weight_problems(scored, train):
        if member is None:
            if not missing:
                out.append(
                    Problem(
                        path, f"every train member's weight in {what} is 0; give at least one a weight > 0"
                    )
                )
        elif member not in roles:
            out.append(
                Problem(
                    (*path, member),
                    f"{what} names unknown member {member!r}{suggest(member, roles)}; "
                    f"use one of the members: {', '.join(roles) or '(none)'}",
                )
            )
        else:
            out.append(Problem((*path, member), message))
    if missing and roles:
        example = f"{missing[0]}: 0.5"
        out.append(
            Problem(
                path,
                f"{what} gives no weight to train member(s) {', '.join(missing)}; add them "
                f"(e.g. `{example}`, 0 to leave one out for now) or set their role: eval",
            )
        )
    return out


def member_name_problem(name: str) -> str | None:
    """What is wrong with a member name, or ``None`` (the one rule for member names).

    Example:
        >>> member_name_problem("seta_easy") is None, member_name_problem("seta__x")[:30]
        (True, "member name 'seta__x' contains")
    """
    if not MEMBER_NAME_RE.fullmatch(name):
        return (
            f"invalid member name {name!r}; use a short identifier: a lowercase letter, then lowercase "
            "letters, "
            "digits or '_', at most 32 characters (e.g. seta, endless_terminals)"
        )
    if "__" in name:
        return (
            f"member name {name!r} contains '__', which ormix uses to join <member>__<tool> in namespaced "
            "tool "
            "names; use a single '_'"
        )
    if name.endswith("_"):
        return (
            f"member name {name!r} ends with '_', which makes <member>__<tool> names ambiguous; "
            "drop the trailing '_'"
        )
    return None


def mixture_checks(d: Mapping[str, Any]) -> list[Problem]:
    members = d.get("members")
    members = members if isinstance(members, Mapping) else None
    roles = _roles(members) if members is not None else {}
    # Eval-only members with a weight are reported by the member check; leave them out here.
    per_member = {
        n: _fields(m).get("weight")
        for n, m in (members or {}).items()
        if _fields(m).get("weight") is not None and roles.get(str(n)) != "eval"
    }
    out = _member_set_checks(members, roles) if members is not None else []
    out += _strategy_checks(d, members, bool(per_member))
    out += _weights_checks(d, members, roles, per_member)
    return out


def _member_set_checks(members: Mapping[Any, Any], roles: dict[str, str]) -> list[Problem]:
    """Members at all, their names, and at least one trained on."""
    out: list[Problem] = []
    if not members:
        out.append(Problem(("members",), "no members; add at least one environment under members:"))
    for name in members:
        if not isinstance(name, str):
            continue  # pydantic reports non-string keys
        problem = member_name_problem(name)
        if problem is not None:
            out.append(Problem(("members", name), problem))
    if members and all(r == "eval" for r in roles.values()):
        out.append(
            Problem(
                ("members",),
                "no member is trained on (every member has role: eval); "
                "set role: train or both on at least one member",
            )
        )
    return out


def _strategy_checks(
    d: Mapping[str, Any], members: Mapping[Any, Any] | None, member_weights: bool
) -> list[Problem]:
    """What each strategy needs and refuses: weights, a schedule, adaptive settings, task filters."""
    out: list[Problem] = []
    weights, schedule = d.get("weights"), d.get("schedule")
    strategy = d.get("strategy", "weights")
    has_weights = weights is not None or member_weights
    if has_weights and schedule is not None:
        out.append(
            Problem(
                ("schedule",),
                "both static weights and a schedule are given; the schedule sets weights per phase, so "
                "remove `weights:` (and member `weight:`) or remove the schedule",
            )
        )
    if strategy == "adaptive":
        if schedule is not None:
            out.append(
                Problem(
                    ("schedule",),
                    "strategy adaptive moves the weights itself; remove the schedule "
                    "(or use strategy: weights)",
                )
            )
        if d.get("prompts_per_step") is None:
            out.append(
                Problem(
                    ("prompts_per_step",),
                    "strategy adaptive decides each step's rows, so ormix needs the number of prompts per "
                    "step; "
                    "add `prompts_per_step: N`",
                )
            )
    else:
        if d.get("adaptive") is not None:
            out.append(
                Problem(
                    ("adaptive",),
                    f"adaptive: settings need strategy: adaptive (not {strategy}); set it or remove them",
                )
            )
        for name, m in (members or {}).items():
            if _fields(m).get("filter") not in (None, False):
                out.append(
                    Problem(
                        ("members", str(name), "filter"),
                        "task filtering is part of adaptive mixing; set strategy: adaptive or remove filter",
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
    return out


def _weights_checks(
    d: Mapping[str, Any], members: Mapping[Any, Any] | None, roles: dict[str, str], per_member: dict[Any, Any]
) -> list[Problem]:
    """The weights (in `weights:` or per member, not both) and the schedule's phases."""
    out: list[Problem] = []
    weights, schedule = d.get("weights"), d.get("schedule")
    if weights is not None and per_member:
        listed = ", ".join(f"members.{n}.weight" for n in per_member)
        out.append(
            Problem(
                ("weights",),
                f"weights are given both in `weights:` and per member ({listed}); keep one of the two",
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
        for member, message in weight_problems({str(n): w for n, w in per_member.items()}, train):
            if member is None:
                if len(per_member) == len(train):
                    out.append(
                        Problem(
                            ("members",), "every train member's weight is 0; give at least one a weight > 0"
                        )
                    )
            else:
                out.append(Problem(("members", member, "weight"), message))

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
    phases = [_fields(phase) for phase in schedule]
    out = [
        Problem(("schedule",) if index is None else ("schedule", index, key), message)
        for index, key, message in schedule_problems(
            [p.get("until_step") for p in phases], [p.get("interpolate") for p in phases]
        )
    ]
    if roles is not None:
        for i, p in enumerate(phases):
            out += _weight_map_checks(("schedule", i, "weights"), p.get("weights"), roles, f"phase {i}")
    return out


def _carry(e: ValidationError) -> list[InitErrorDetails]:
    """Re-emit pydantic's errors so they can be raised together with this module's own problems."""
    out: list[InitErrorDetails] = []
    for err in e.errors():
        loc = tuple(err["loc"])
        # Container inputs (a member's mapping, say) may hold secret values: keep only plain scalars.
        keep_input = "secrets" not in loc and isinstance(err.get("input"), (str, int, float, bool))
        if err["type"] == PROBLEM_TYPE:
            out.append(InitErrorDetails(type=problem_error(err["msg"]), loc=loc, input=None))
        else:
            detail = InitErrorDetails(
                type=err["type"], loc=loc, input=err.get("input") if keep_input else None
            )
            if err.get("ctx"):
                detail["ctx"] = err["ctx"]
            out.append(detail)
    return out


def checked(
    cls: type[BaseModel], data: Any, handler: Any, checks: Callable[[Mapping[str, Any]], list[Problem]]
):
    errors: list[InitErrorDetails] = []
    result = None
    try:
        result = handler(data)
    except ValidationError as e:
        errors = _carry(e)
    problems = checks(_fields(data)) if isinstance(data, (Mapping, BaseModel)) else []
    if errors or problems:
        details = errors + [
            InitErrorDetails(type=problem_error(p.message), loc=p.path, input=None) for p in problems
        ]
        raise ValidationError.from_exception_data(cls.__name__, details, hide_input=True)
    return result
