"""The oracle run (``ormix eval --policy reference``): each task's reference solution, played through the same
trainer path as a model's eval, a `ormix.workbench._scripted.ScriptedPolicy` replacing generation.

The solutions come from `ormix.workbench._references` (the member's own ``reference:`` hook, else the shipped
one);
a task without one is not run and is reported as such (``no_reference``), never as a 0. The trainer's
budgets are raised so that they cannot cut a solution (`reference_settings`): the oracle checks the
environment, not the budget.

Example:
    >>> settings, note = reference_settings({"max_completion_length": 64}, given={}, longest_solution=3)
    >>> settings["max_completion_length"], settings["max_tool_calling_iterations"], settings["use_vllm"]
    (2048, 10, False)
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from ormix._errors import OrmixRuntimeError

if TYPE_CHECKING:  # pragma: no cover
    from ormix.evaluation._tasks import EvalTasks
    from ormix.mixture import MixtureSpec

#: The completion budget and tool rounds the reference policy gets at least (budgets must not cut a
#: reference solution: the oracle checks the environment, not the budget).
REFERENCE_MIN_COMPLETION = 2048
REFERENCE_MIN_ROUNDS = 10
#: What the reference policy answers after its last call.
FINAL_ANSWER = "Done."

#: ``(member, split, task_index)`` → the task's reference calls, ``(tool_name, arguments)``, submit included.
ReferenceCalls = Mapping[tuple[str, str | None, int], list[tuple[str, dict]]]


def reference_settings(
    settings: Mapping[str, Any], given: Mapping[str, Any], longest_solution: int
) -> tuple[dict[str, Any], str]:
    """The trainer settings of an oracle run: ``settings`` with room for every solution (a completion budget
    of at least `REFERENCE_MIN_COMPLETION`, tool rounds for the longest solution and at least
    `REFERENCE_MIN_ROUNDS`; each unless ``given`` — the user's ``--set`` — names it) and no vLLM (nothing
    is generated); and the note that says so.

    Example:
        >>> reference_settings({}, given={"max_completion_length": 32}, longest_solution=12)[0]
        {'max_tool_calling_iterations': 13, 'use_vllm': False}
    """
    out = dict(settings)
    if "max_completion_length" not in given:
        budget = int(out.get("max_completion_length") or 0)
        out["max_completion_length"] = max(budget, REFERENCE_MIN_COMPLETION)
    if "max_tool_calling_iterations" not in given:
        rounds = max(int(out.get("max_tool_calling_iterations") or 0), REFERENCE_MIN_ROUNDS)
        out["max_tool_calling_iterations"] = max(rounds, longest_solution + 1)
    out["use_vllm"] = False
    note = (
        f"reference policy: max_completion_length={out.get('max_completion_length')}, "
        f"max_tool_calling_iterations={out.get('max_tool_calling_iterations')} (room for every solution; "
        "--set changes them)"
    )
    return out, note


def reference_calls(
    mix: MixtureSpec, tasks: Mapping[str, EvalTasks]
) -> tuple[dict[tuple[str, str | None, int], list[tuple[str, dict]]], dict[str, list[int]]]:
    """Each task's reference calls, and per member the tasks that have none (not run: reported).

    Raises `ormix._errors.MixtureError` when a member's hook cannot be imported.

    Example:
        >>> from ormix.evaluation._tasks import EvalTasks
        >>> from ormix.mixture import MixtureSpec
        >>> from ormix._spec import OpenRewardSpec
        >>> mix = MixtureSpec({"echo": OpenRewardSpec("local:echo")})
        >>> rows = {0: {"task_index": 0, "word": "river"}, 1: {"task_index": 1}}
        >>> tasks = {"echo": EvalTasks("echo", "local:echo", "test", (0, 1), "test split", rows=rows)}
        >>> reference_calls(mix, tasks)
        ({('echo', 'test', 0): [('submit', {'text': 'river'})]}, {'echo': [1]})
    """
    from ormix.workbench._references import reference_solver, solver_row

    calls: dict[tuple[str, str | None, int], list[tuple[str, dict]]] = {}
    missing: dict[str, list[int]] = {}
    for member, selection in tasks.items():
        solve = reference_solver(member, mix.members[member])
        for index in selection.indices:
            row = solver_row(
                selection.rows.get(index, {"task_index": index}),
                member=member,
                split=selection.split,
                task_spec=selection.task_specs.get(index),
            )
            found = solve(row) if solve is not None else None
            if found:
                calls[(member, selection.split, index)] = found
            else:
                missing.setdefault(member, []).append(index)
    return calls, missing


def _env_tools(environment: Any) -> frozenset[str]:
    import inspect

    from ormix.tools._binding import RESERVED_METHOD_NAMES

    return frozenset(
        name
        for name, _ in inspect.getmembers(type(environment), predicate=inspect.isfunction)
        if not name.startswith("_") and name not in RESERVED_METHOD_NAMES
    )


class ReferenceScript:
    """The script a `ScriptedPolicy` plays for ``--policy reference``: each rollout's task's reference calls,
    one a turn, then a short final answer.

    A rollout's task is found from the trainer's environments of the batch: the one whose `reset`
    observation is the prompt's last user message (and whose tools are the prompt's), the ``k``-th of those
    for the ``k``-th identical prompt.

    Args:
        trainer: the trainer whose ``environments`` hold the batch.
        calls: ``(member, split, task_index)`` → the reference calls (submit included).

    Example:
        >>> script = ReferenceScript(trainer=None, calls={("echo", "test", 0): [("submit", {"text": "x"})]})
        >>> sorted(script.calls)
        [('echo', 'test', 0)]
    """

    def __init__(self, trainer: Any, calls: ReferenceCalls):
        self.trainer = trainer
        self.calls = dict(calls)

    def task_of(self, ctx: Any) -> tuple[str, str | None, int]:
        """The ``(member, split, task_index)`` of the rollout a script context belongs to."""
        environments = list(getattr(self.trainer, "environments", None) or [])
        user = ctx.user.strip()
        tools = frozenset(ctx.tools)
        found = []
        for environment in environments:
            observation = (getattr(environment, "observation", "") or "").strip()
            if observation and observation in user and (not tools or _env_tools(environment) == tools):
                found.append(environment)
        # A prompt can contain another task's ("river" in "riverbank"): the longest match is the rollout's.
        longest = max((len(environment.observation.strip()) for environment in found), default=0)
        found = [e for e in found if len(e.observation.strip()) == longest]
        if not found:
            raise OrmixRuntimeError(
                "the reference policy could not tell which task a rollout plays (no environment of the batch "
                "was reset with its prompt); the installed TRL renders prompts differently than ormix expects"
            )
        chosen = found[ctx.sample % len(found)]
        return chosen.member, chosen.split, chosen.task_index

    def __call__(self, ctx: Any) -> str:
        from ormix.workbench._scripted import tool_call

        member, split, index = self.task_of(ctx)
        calls = self.calls.get((member, split, index))
        if calls is None:
            raise OrmixRuntimeError(
                f"the reference policy has no solution for task {index} of {member!r} (split {split!r})"
            )
        if ctx.turn >= len(calls):
            return FINAL_ANSWER
        name, arguments = calls[ctx.turn]
        if name not in ctx.tools and f"{member}__{name}" in ctx.tools:
            name = f"{member}__{name}"  # namespaced routing
        return tool_call(name, **arguments)


def attach_reference_policy(trainer: Any, calls: ReferenceCalls) -> Any:
    """Make ``trainer`` play the reference calls instead of generating; returns the attached
    `ormix.workbench._scripted.ScriptedPolicy` (``detach()`` it to generate again).

    Example:
        Not run as a doctest: it needs a built trainer.

        >>> policy = attach_reference_policy(trainer, calls)                      # doctest: +SKIP
        >>> policy.detach()                                                       # doctest: +SKIP
    """
    from ormix.workbench._scripted import ScriptedPolicy

    return ScriptedPolicy(ReferenceScript(trainer, calls)).attach(trainer)


def oracle_failures(summary: Mapping[str, Any], reported: Collection[str] = ()) -> list[str]:
    """Why an oracle run (``ormix eval --policy reference``) failed: one line per member whose reference
    solutions were never scored (coverage 0), but the ``reported`` members (already given a line: one that
    failed on every rollout, `ormix.app._eval.all_errors`). The oracle plays answers known to work, so a
    member it cannot score is a broken environment (or reference), not a result: ``ormix eval`` prints each
    line as an ``error:`` and exits 1.

    Example:
        >>> summary = {"policy": "reference", "members": {
        ...     "mine": {"samples": 2, "coverage": {"value": 0.0}, "error_rate": {"value": 0.0}},
        ...     "echo": {"samples": 2, "coverage": {"value": 1.0}, "error_rate": {"value": 0.0}}}}
        >>> print(oracle_failures(summary)[0])  # doctest: +ELLIPSIS
        the reference solutions of 'mine' were never scored (coverage 0.00 over 2 rollouts): ...
        >>> oracle_failures({**summary, "policy": "model"}), oracle_failures(summary, reported={"mine"})
        ([], [])
    """
    if summary.get("policy") != "reference":
        return []
    out = []
    for member, metrics in (summary.get("members") or {}).items():
        coverage = (metrics.get("coverage") or {}).get("value")
        if member in reported or not metrics.get("samples") or coverage is None or coverage > 0:
            continue
        errors = (metrics.get("error_rate") or {}).get("value") or 0.0
        why = (
            "every rollout failed in the environment (see the error mix in report.md)"
            if errors >= 1
            else "its episodes ended without a reward; a scoring tool returns ToolOutput(..., reward=..., "
            "finished=True)"
        )
        out.append(
            f"the reference solutions of {member!r} were never scored (coverage 0.00 over "
            f"{metrics['samples']} rollouts): {why}; `ormix check FILE` calls every tool once"
        )
    return out
