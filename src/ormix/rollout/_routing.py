"""`RoutingEnvironment`: one adapter class for a whole mixture, with every member's tools namespaced.

For trainers that take a single `environment_factory` (and TRL versions without the dict form): methods
are named `<member>__<tool>`; `reset(**row)` opens the session of the row's member (`environment` column)
and each call is dispatched to that member's `Episode`. A call to another member's tool is answered with a
short error and counted as `wrong_env` on the rollout.
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar

from ormix._errors import MixtureError
from ormix.rollout._episode import Episode, ToolCallError, call_tool, close_episode, failed_call
from ormix.tools import BindingConflictError, bind_tools

SEPARATOR = "__"


class RoutingEnvironment:
    """Dispatches namespaced tool calls to the `Episode` of the row's member.

    Example:
        >>> from ormix import MixtureSpec, OpenRewardSpec
        >>> from ormix.rollout._episode import close_episode
        >>> mix = MixtureSpec({"echo": OpenRewardSpec("local:echo", num_tasks=2, local_serve="thread"),
        ...                    "seta": OpenRewardSpec("local:seta", num_tasks=2, local_serve="thread")},
        ...                   routing="namespaced")
        >>> env = mix.environment_factory()
        >>> env.reset(environment="seta", task_index=0, prompt=[]).splitlines()[2][:48]
        'Task (Easy, file-operations): Create `hello.txt`'
        >>> env.seta__bash(command="echo 'Hello, SETA!' > hello.txt && cat hello.txt").splitlines()
        ['Hello, SETA!', '', '(exit 0)']
        >>> env.seta__submit_solution(), env.member, env.reward
        ('Score 1.00. 2/2 checks passed.', 'seta', 1.0)
        >>> close_episode(env)
    """

    _members: ClassVar[dict[str, type[Episode]]]

    def __init__(self) -> None:
        self._episodes: dict[str, Episode] = {}
        self.episode: Episode | None = None
        self._round: Any = None  # a ToolRound while a trainer runs a batch's tool rounds together

    def reset(self, **row: Any) -> str:
        """Open the session of the row's member (named by its `environment` column) and return its prompt."""
        member = row.get("environment")
        if member not in self._members:
            raise MixtureError(
                f"row has environment={member!r}, which is not a member of this mixture "
                f"({sorted(self._members)}); build the dataset with MixtureSpec.train_dataset"
            )
        episode = self._episodes.get(member)
        if episode is None:
            episode = self._episodes[member] = self._members[member]()
        if self.episode is not None and self.episode is not episode:
            close_episode(self.episode)
        self.episode = episode
        return episode.reset(**{k: v for k, v in row.items() if k != "environment"})

    def _route(self, member: str, wire_name: str, arguments: dict[str, Any]) -> str:
        if self._round is not None:
            run = functools.partial(self._route_now, member, wire_name, arguments)
            return self._round.intercept(self, (f"route:{member}", wire_name, arguments), run)
        return self._route_now(member, wire_name, arguments)

    def _route_now(self, member: str, wire_name: str, arguments: dict[str, Any]) -> str:
        episode = self.episode
        if episode is None:
            raise ToolCallError("no task is active; reset() was not called")
        if member != episode.member:
            text = (
                f"tool {member}{SEPARATOR}{wire_name} belongs to environment {member!r}, but this task "
                f"runs in {episode.member!r}. Use the {episode.member}{SEPARATOR}* tools."
            )
            raise failed_call(episode, f"{member}{SEPARATOR}{wire_name}", "wrong_env", text, text)
        return call_tool(episode, wire_name, arguments)

    def _close(self) -> None:
        for episode in self._episodes.values():
            close_episode(episode)

    # Episode state, read by reward functions and telemetry, is the active member's.
    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "episode":
            raise AttributeError(name)
        episode = self.__dict__.get("episode")
        if episode is None:
            raise AttributeError(f"{name}: no task is active")
        return getattr(episode, name)


def make_routing_class(members: dict[str, type[Episode]]) -> type[RoutingEnvironment]:
    """A `RoutingEnvironment` subclass with `<member>__<tool>` methods for every member's tools.

    Raises `ormix._errors.MixtureError` when two tools end up with one method name after namespacing.
    """
    cls = type(
        "MixtureRoutingEnvironment",
        (RoutingEnvironment,),
        {"_members": dict(members), "__module__": __name__},
    )
    for member, episode_cls in members.items():

        def dispatch(self, wire_name, arguments, _member=member):
            return self._route(_member, wire_name, arguments)

        setattr(cls, f"_dispatch_{member}", dispatch)
        try:
            bind_tools(
                cls,
                list(episode_cls.tool_specs),
                dispatch=f"_dispatch_{member}",
                prefix=f"{member}{SEPARATOR}",
                on_conflict="raise",
            )
        except BindingConflictError as e:
            raise MixtureError(f"namespacing member {member!r}'s tools: {e}; rename the member") from e
    return cls
