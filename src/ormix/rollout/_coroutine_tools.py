"""Coroutine tool methods for ormix's episodes, for event-loop rollout workers (TRL's `AsyncGRPOTrainer`).

TRL 1.16's async rollout worker (``trl/experimental/async_grpo/async_rollout_worker.py``,
``_execute_tool_calls``) awaits a tool method that is a coroutine function and runs any other in a thread
pool (``run_in_executor``). An `Episode`'s tool methods are plain: each blocks a pool thread on the ORS
portal (`ormix.ors._bridge.run_sync`) for the whole call. `async_episode_class` gives the same class with
every tool method a coroutine function of the same name, docstring, signature and annotations (so TRL
renders the same schema for the model) that hands the call to the portal and awaits it without a thread:
the worker's loop only waits on a future, and hundreds of in-flight episodes share it with the generation
requests. Results and errors are the sync methods' (the same `Episode._acall_tool` runs; a failed call
raises the same `ToolCallError`, which TRL turns into the same ``{"error": ...}`` message).

`AsyncEpisodeFactory` wraps an environment factory (picklable, as TRL's spawned worker needs) so the
episodes it makes have coroutine tools. `reset` stays a plain method: TRL always runs it in its pool.

Example:
    >>> import inspect
    >>> from ormix import OpenRewardSpec
    >>> factory = AsyncEpisodeFactory(OpenRewardSpec("local:echo", num_tasks=1).environment_factory)
    >>> episode = factory()
    >>> inspect.iscoroutinefunction(episode.echo), inspect.signature(episode.echo)
    (True, <Signature (text: str) -> str>)
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from ormix.ors._bridge import portal
from ormix.rollout._episode import Episode
from ormix.tools._binding import make_method


class _CoroutineTools:
    """What a coroutine tool method dispatches to: the episode's `_acall_tool`, run on the ORS portal."""

    async def _acall_tool_anywhere(self: Any, wire_name: str, arguments: dict[str, Any]) -> str:
        # The sessions live on the portal's loop (their HTTP clients are bound to it); from another loop the
        # call is started there and its future awaited here, so no thread waits.
        future = portal().start_task_soon(self._acall_tool, wire_name, arguments)
        return await asyncio.wrap_future(future)


# One coroutine-tool class per episode class (weakly keyed: episode classes are made per spec).
_CLASSES: weakref.WeakKeyDictionary[type, type[Episode]] = weakref.WeakKeyDictionary()


def _coroutine_method(binding: Any) -> Any:
    dispatch = make_method(binding, dispatch="_acall_tool_anywhere")  # returns the coroutine, unawaited

    async def method(*args: Any, **kwargs: Any) -> Any:
        return await dispatch(*args, **kwargs)

    for attribute in ("__name__", "__qualname__", "__doc__", "__signature__", "__annotations__"):
        setattr(method, attribute, getattr(dispatch, attribute))
    return method


def async_episode_class(cls: type[Episode]) -> type[Episode]:
    """``cls`` with coroutine tool methods (same names, docstrings, signatures); cached per class.

    Example:
        >>> import inspect
        >>> from ormix.rollout._episode import EpisodeConfig, make_episode_class
        >>> config = EpisodeConfig("echo", token="t", open_session=None, max_output_chars=100)
        >>> spec = {"name": "echo", "input_schema": {"properties": {"text": {"type": "string"}}}}
        >>> cls = async_episode_class(make_episode_class("Echo", config, [spec]))
        >>> cls.__name__, inspect.iscoroutinefunction(cls.echo)
        ('EchoEpisode', True)
    """
    made = _CLASSES.get(cls)
    if made is None:
        namespace: dict[str, Any] = {"__module__": cls.__module__, "__qualname__": cls.__qualname__}
        for binding in cls.binding.bindings:
            namespace[binding.method_name] = _coroutine_method(binding)
        made = _CLASSES.setdefault(cls, type(cls.__name__, (_CoroutineTools, cls), namespace))
    return made


class AsyncEpisodeFactory:
    """An environment factory whose episodes have coroutine tool methods (`async_episode_class`).

    Wraps ``factory`` (an `ormix._spec.EpisodeFactory` or any zero-argument callable returning `Episode`s);
    anything else it returns is returned as is (a `RoutingEnvironment` keeps plain tools). Pickles when
    ``factory`` does.
    """

    def __init__(self, factory: Any) -> None:
        self.factory = factory
        self.__name__ = getattr(factory, "__name__", "environment")

    def __call__(self) -> Any:
        episode = self.factory()
        if isinstance(episode, Episode):
            episode.__class__ = async_episode_class(type(episode))
        return episode

    def episode_config_for(self, row: Any) -> Any:
        """The wrapped factory's (for opening sessions ahead)."""
        return self.factory.episode_config_for(row)

    def __repr__(self) -> str:
        return f"AsyncEpisodeFactory({self.factory!r})"
