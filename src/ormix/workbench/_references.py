"""Reference solvers: for each task of a member, the tool calls that solve it.

A solver is a function from a task's row to the calls that solve it, the final (submit) call included, as
``(tool_name, arguments)`` pairs; ``None`` for a task it has no solution for. The row is the member's dataset
row (``task_index`` and the task's metadata columns, such as ``task_id``) plus ``task_spec`` (the task as the
server lists it), ``split`` and ``member``. Tool names are the environment's own (``submit``); ormix finds
them under a namespaced routing too (``terminals__submit``).

Two places play them through the member's real sessions: the supervised warm start
(`ormix.workbench._warmup`) and
the oracle run, ``ormix eval --policy reference`` (which checks that an environment scores its own reference
solutions, ≈1.0, before a model is blamed). `reference_solver` picks a member's: its own hook, the member
config's ``reference: "module:function"`` (imported when first used, found like a ``module:Class`` target:
next to the mixture file, in the working directory, then installed), else the shipped solutions of
``local:echo``, ``local:terminals`` and ``local:seta`` (`ormix.workbench.envs.solutions`).

Example:
    >>> from ormix.config import MemberConfig
    >>> solve = reference_solver("seta", MemberConfig(target="local:seta"))
    >>> solve({"task_id": "seta-hello-file"})[-1]
    ('submit_solution', {})
    >>> reference_solver("mine", MemberConfig(target="http://localhost:8080")) is None
    True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ormix._errors import MixtureError
from ormix.workbench.envs.solutions import Solver  # a task's row -> its solution's tool calls (None: none)

if TYPE_CHECKING:  # pragma: no cover
    from ormix.config import MemberConfig


def solver_row(
    row: Mapping[str, Any], *, member: str, split: str | None, task_spec: Mapping[str, Any] | None
) -> dict[str, Any]:
    """What a solver is handed for one task: the dataset row plus ``task_spec``, ``split`` and ``member``.

    Example:
        >>> row = solver_row({"task_index": 3, "word": "river"}, member="echo", split="test", task_spec={})
        >>> row
        {'task_index': 3, 'word': 'river', 'task_spec': {}, 'split': 'test', 'member': 'echo'}
    """
    return {
        **{k: v for k, v in row.items() if k not in ("prompt", "environment")},
        "task_spec": dict(task_spec) if task_spec is not None else None,
        "split": split,
        "member": member,
    }


def _checked(member: str, ref: str, function: Callable[..., Any]) -> Solver:
    def solve(row: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]] | None:
        calls = function(dict(row))
        if calls is None:
            return None
        try:
            return [(str(name), dict(arguments)) for name, arguments in calls]
        except (TypeError, ValueError):
            raise MixtureError(
                f"member {member!r}: reference {ref} returned {type(calls).__name__}; it returns a list of "
                "(tool_name, arguments) pairs (or None for a task without a solution)"
            ) from None

    solve.__name__ = getattr(function, "__name__", "reference")
    return solve


def _load(member: str, ref: str) -> Solver:
    from ormix.server._registry import import_module

    module_name, _, attr = ref.partition(":")
    what = f"member {member!r}'s reference {ref!r}"
    module = import_module(module_name, what, MixtureError)
    function = getattr(module, attr, None)
    if function is None:
        raise MixtureError(f"module {module_name!r} has no {attr!r} ({what})")
    if not callable(function):
        raise MixtureError(f"{ref!r} is a {type(function).__name__}, not a function ({what})")
    return _checked(member, ref, function)


def reference_solver(member_name: str, member_config: MemberConfig) -> Solver | None:
    """The reference solver of a member: its ``reference:`` hook, else the one shipped for its ``local:``
    target, else ``None`` (the member has no reference solutions).

    Raises:
        MixtureError: the hook's module or function cannot be found.
    """
    ref = getattr(member_config, "reference", None)
    if ref:
        return _load(member_name, ref)
    from ormix.workbench.envs.solutions import reference_for

    return reference_for(member_config.target)
