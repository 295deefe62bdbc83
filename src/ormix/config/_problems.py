"""Problems in a mixture config: where (key path, line) and what to do; pydantic errors worded as problems."""

from __future__ import annotations

import difflib
import re
import types
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticCustomError

from ormix._errors import MixtureError

#: The pydantic error type of every problem ormix words itself (its message is used as is).
PROBLEM_TYPE = "ormix_config"

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a mixture config: where (key path, line when known) and what to do.

    Example:
        >>> problem = Problem(("members", "seta", "num_tasks"), "use num_tasks or indices, not both", 7)
        >>> problem.render("m.yaml")
        'm.yaml:7: members.seta.num_tasks: use num_tasks or indices, not both'
    """

    path: Loc
    message: str
    line: int | None = None

    @property
    def key_path(self) -> str:
        """The path as written in messages: ``members.seta.num_tasks``, ``schedule[1].until_step``."""
        return render_path(self.path)

    def render(self, source: str) -> str:
        """``source:line: key.path: message`` (the line left out when unknown)."""
        where = f"{source}:{self.line}" if self.line is not None else source
        return f"{where}: {self.key_path}: {self.message}"


def render_path(path: Iterable[str | int]) -> str:
    """Render a key path for messages (``members.seta.weight``, ``schedule[0].weights``).

    Example:
        >>> render_path(("schedule", 0, "weights")), render_path(())
        ('schedule[0].weights', '(top level)')
    """
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


class MixtureConfigError(MixtureError):
    """A mixture config that is not valid; ``problems`` lists every problem found.

    The message has one line per problem, each naming the source, key path, what is wrong and the fix.

    Example:
        >>> print(MixtureConfigError([Problem(("seed",), "must be >= 0")], "m.yaml"))
        m.yaml: 1 problem in the mixture config:
          m.yaml: seed: must be >= 0
    """

    def __init__(self, problems: list[Problem], source: str) -> None:
        self.problems = list(problems)
        self.source = source
        n = len(self.problems)
        head = f"{source}: {n} problem{'s' if n != 1 else ''} in the mixture config:"
        super().__init__("\n".join([head, *(f"  {p.render(source)}" for p in self.problems)]))


def problem_error(message: str) -> PydanticCustomError:
    """A pydantic error carrying one of ormix's own worded problems (raise it inside a validator).

    Example:
        >>> problem_error("use a weight >= 0").type
        'ormix_config'
    """
    return PydanticCustomError(PROBLEM_TYPE, "{message}", {"message": message})


def suggest(word: str, options: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest of ``options`` to ``word``, else ``""``.

    Example:
        >>> suggest("min_coverge", ["min_coverage", "stop"])
        "; did you mean 'min_coverage'?"
    """
    match = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f"; did you mean {match[0]!r}?" if match else ""


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


def _allowed_keys(root: type[BaseModel], loc: Loc) -> list[str] | None:
    """Keys allowed by the model found at ``loc`` (walking ``root``'s annotations), if any."""
    ann: Any = root
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


def problems_from(e: ValidationError, root: type[BaseModel]) -> list[Problem]:
    """Every error of a pydantic validation of ``root`` as a worded `Problem` (no secret value shown).

    Example:
        >>> class M(BaseModel, extra="forbid"):
        ...     seed: int = 0
        >>> try:
        ...     M.model_validate({"sede": 1})
        ... except ValidationError as e:
        ...     print(problems_from(e, M)[0].message)
        unknown key 'sede'; did you mean 'seed'?
    """
    seen: set[tuple[Loc, str]] = set()
    out: list[Problem] = []
    for err in e.errors():
        loc = tuple(err["loc"])
        typ = err["type"]
        secret = "secrets" in loc
        value = err.get("input")
        if typ == PROBLEM_TYPE:
            msg = err["msg"]
        elif "[key]" in loc or typ == "invalid_key":
            loc = loc[: loc.index("[key]")] if "[key]" in loc else loc
            msg = "keys here must be strings; quote the key (e.g. '1': ...)"
        elif "where" in loc and len(loc) > loc.index("where") + 1:
            loc = loc[: loc.index("where") + 2]
            msg = "a where filter value is a string, number, boolean, or a list of them"
        elif typ == "extra_forbidden":
            key = str(loc[-1])
            allowed = _allowed_keys(root, loc[:-1]) or []
            hint = suggest(key, allowed)
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
            hint = suggest(value, options) if isinstance(value, str) and not secret else ""
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
