"""Which tasks each member is evaluated on, and why: `eval_tasks` (it asks the members' servers).

Per member: `MixtureSpec.eval_selection`, the one choice of a member's eval tasks: its ``eval:`` set
(`MixtureSpec.eval_set`: another split, held-out or given tasks; for ``role: eval`` without one, its own
selection), else its environment's ``test`` split, else its training tasks (said so: ``source: "train
tasks"``). ``--split`` evaluates every member on that split instead. A task is
known everywhere by its key ``(member, split, task_index)`` (`task_key`): what an eval's records pair on.

Example:
    >>> task_key({"member": "echo", "split": "test", "task_index": 3})
    ('echo', 'test', 3)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import TYPE_CHECKING, Any

from ormix.evaluation._errors import EvalError
from ormix.evaluation._summary import TaskKey  # a task's identity in an eval: (member, split, task_index)

if TYPE_CHECKING:  # pragma: no cover
    from ormix.config import MixtureConfig
    from ormix.mixture import MixtureSpec
    from ormix.mixture._mixture import EvalSet

#: A member's eval set when it has no ``eval:`` (said where the servers are not asked).
DEFAULT_EVAL_SET = "no eval: set: its environment's test split if it has one, else its training tasks"


@dataclass(frozen=True)
class EvalTasks:
    """One member's eval tasks and why they are these.

    Attributes:
        member, target, split: the member, its target, the split of its eval tasks.
        indices: the task indices, in order.
        source: where the tasks come from: ``eval set`` (its ``eval:``), ``eval member`` (``role: eval``
            without ``eval:``), ``test split``, ``train tasks`` (nothing held out: the training tasks), or
            ``split S (--split)``.
        rows: task index → the dataset row a trainer gets (`MixtureSpec.eval_rows`: ``environment``,
            ``task_index``, metadata, the split column when it is not the member's own).
        task_specs: task index → the task as the server lists it.

    Example:
        >>> t = EvalTasks("echo", "local:echo", "test", (0, 1), "test split")
        >>> t.as_dict()
        {'target': 'local:echo', 'split': 'test', 'tasks': [0, 1], 'source': 'test split'}
        >>> t.keys()
        [('echo', 'test', 0), ('echo', 'test', 1)]
    """

    member: str
    target: str
    split: str
    indices: tuple[int, ...]
    source: str
    rows: Mapping[int, Mapping[str, Any]] = field(default_factory=dict, repr=False, compare=False)
    task_specs: Mapping[int, Mapping[str, Any]] = field(default_factory=dict, repr=False, compare=False)

    def as_dict(self) -> dict[str, Any]:
        """The manifest's entry for this member."""
        return {
            "target": self.target,
            "split": self.split,
            "tasks": list(self.indices),
            "source": self.source,
        }

    def keys(self) -> list[tuple[str, str, int]]:
        """The `task_key` of each task, in order."""
        return [(self.member, self.split, i) for i in self.indices]


def task_key(record: Mapping[str, Any]) -> TaskKey | None:
    """The task a rollout record belongs to, ``(member, split, task_index)`` (``None``: not a rollout's).

    Example:
        >>> task_key({"member": "a", "task_index": 0}), task_key({"v": 1})
        (('a', None, 0), None)
    """
    member, index = record.get("member"), record.get("task_index")
    if not isinstance(member, str) or not isinstance(index, int):
        return None
    split = record.get("split")
    return member, split if isinstance(split, str) else None, index


def interleaved_chunks(keys: Sequence[tuple[str, str, int]], size: int) -> list[list[tuple[str, str, int]]]:
    """Tasks in chunks of ``size``, members interleaved (every chunk mixes them, as training batches do).

    Example:
        >>> interleaved_chunks([("a", "t", 0), ("a", "t", 1), ("b", "t", 0)], 2)
        [[('a', 't', 0), ('b', 't', 0)], [('a', 't', 1)]]
    """
    by_member: dict[str, list[tuple[str, str, int]]] = {}
    for key in keys:
        by_member.setdefault(key[0], []).append(key)
    order = [key for turn in zip_longest(*by_member.values()) for key in turn if key is not None]
    return [order[i : i + size] for i in range(0, len(order), size)]


def eval_tasks(
    config: MixtureConfig | MixtureSpec,
    members: Sequence[str] = (),
    split: str | None = None,
) -> dict[str, EvalTasks]:
    """Which tasks each member is evaluated on, and why (contacts the servers: splits and task lists).

    Per member: its ``eval:`` set (or, for ``role: eval``, its own selection), else its environment's
    ``test`` split, else its training tasks. ``split`` evaluates every member on that split instead (an
    ``eval:`` set's ``num_tasks``/``indices`` still apply). ``members`` picks members (default: all).

    Raises:
        EvalError (an unknown member, a missing split, no task to evaluate); `ormix._errors.MixtureError`
        for an eval set its environment cannot give (`MixtureSpec.eval_set`).

    Example:
        >>> from ormix.config import MixtureConfig
        >>> cfg = MixtureConfig(members={"echo": {"target": "local:echo", "num_tasks": 2,
        ...                                       "local_serve": "thread"}})
        >>> tasks = eval_tasks(cfg)
        >>> tasks["echo"].source, tasks["echo"].split, tasks["echo"].indices
        ('test split', 'test', (0, 1, 2, 3))
    """
    from ormix.mixture import MixtureSpec

    mix = config if isinstance(config, MixtureSpec) else MixtureSpec.from_config(config)
    chosen = list(members) or list(mix.members)
    unknown = [m for m in chosen if m not in mix.members]
    if unknown:
        raise EvalError(
            f"unknown member(s) {', '.join(map(repr, unknown))}: this mixture's members are "
            f"{', '.join(mix.members)}"
        )
    out: dict[str, EvalTasks] = {}
    for member in chosen:
        if split is not None:
            _require_split(mix, member, split)
        selection = mix.eval_selection_spec(member, split)
        task_specs = dict(selection.task_specs)
        if not task_specs:
            raise _no_task(member, selection.split)
        rows = {row["task_index"]: row for row in mix.eval_rows(member, selection)}
        target = mix.spec(member).target
        kind = mix.eval_selection(member, split).kind
        out[member] = EvalTasks(
            member, target, selection.split, tuple(task_specs), kind, rows=rows, task_specs=task_specs
        )
    if not out:
        raise EvalError("no member to evaluate: --members picked none")
    return out


def default_eval_set(mix: MixtureSpec, member: str) -> EvalSet:
    """The eval set `ormix eval` and `ormix train` use for ``member`` (asks its server):
    `MixtureSpec.eval_selection`, its ``eval:`` set, else the ``test`` split of its environment, else its
    training tasks (what `ormix inspect` and `ormix check` show).

    Raises:
        EvalError (no task there); `ormix._errors.MixtureError` for an ``eval:`` set its environment
        cannot give.

    Example:
        >>> from ormix.mixture import MixtureSpec
        >>> from ormix._spec import OpenRewardSpec
        >>> mix = MixtureSpec({"echo": OpenRewardSpec("local:echo", num_tasks=2, local_serve="thread")})
        >>> found = default_eval_set(mix, "echo")
        >>> found.split, found.task_indices, found.overlap
        ('test', (0, 1, 2, 3), 0)
    """
    found = mix.eval_selection(member)
    if not found.task_indices and not mix.config.members[member].evaluates:
        raise _no_task(member, found.split)
    return found


def _no_task(member: str, split: str | None) -> EvalError:
    return EvalError(
        f"member {member!r} has no task in split {split!r} to evaluate on: check its "
        "eval: set (num_tasks, indices, where) or pick another --split"
    )


def _require_split(mix: MixtureSpec, member: str, split: str) -> None:
    """``--split``: the split must exist on the member's environment."""
    names, size = mix.split_facts(member, split)
    if size is None:
        raise EvalError(
            f"member {member!r} ({mix.spec(member).target}): --split asks for split {split!r}, which its "
            f"environment does not have (splits: {', '.join(names or []) or 'none'}); name one of those"
        )
