"""What an `openreward.environments.Environment` subclass must look like, checked before a server starts.

The SDK is quiet about most mistakes: a ``@tool`` without type annotations, or one taking a plain ``str``, is
silently not a tool; a ``list_tasks`` written as an instance method fails only when a client lists tasks; and
the server's own start-up check ("has no tools defined") says nothing of why. `shape_problems` names each
mistake with the shape the SDK expects, so a `module:Class` target is refused when it is resolved (the
mixture file's line), not by a child process that exits during start-up.

The shapes (the SDK's `Environment._is_tool` and `Server.__init__`):

- a tool is ``@tool def NAME(self, params: SomeModel) -> ToolOutput`` with ``SomeModel`` a pydantic
  ``BaseModel`` (or no argument besides ``self``), both annotations written out;
- ``list_splits(cls)`` and ``list_tasks(cls, split)`` are ``@classmethod`` s; at least one split;
- ``get_prompt(self)`` (or ``get_messages``) returns the task's prompt, e.g. ``[TextBlock(text=...)]``.

Example:
    >>> from ormix.server._registry import load_environment_class
    >>> shape_problems(load_environment_class("local:echo"))
    []
"""

from __future__ import annotations

import inspect
from typing import Any, get_type_hints

#: How a tool is written, quoted in every tool problem.
TOOL_SHAPE = (
    "a tool is `@tool def NAME(self, params: SomeModel) -> ToolOutput` with SomeModel a pydantic BaseModel "
    "(or no argument but self), both annotations written out"
)


def _tool_problem(name: str, fn: Any) -> str | None:
    """Why the SDK does not count `fn` (marked ``@tool``) as a tool, or ``None`` when it does."""
    from openreward.environments import Environment, ToolOutput
    from pydantic import BaseModel

    if Environment._is_tool(fn):
        return None
    real = inspect.unwrap(fn)
    try:
        hints = get_type_hints(real)
    except Exception as e:  # noqa: BLE001 - an annotation that does not resolve: say which
        return f"tool {name!r}: its annotations do not resolve ({type(e).__name__}: {e}); {TOOL_SHAPE}"
    params = [p for p in inspect.signature(real).parameters.values() if p.name != "self"]
    if len(params) > 1:
        names = ", ".join(p.name for p in params)
        return (
            f"tool {name!r} takes {len(params)} arguments ({names}); put them in one pydantic model; "
            + TOOL_SHAPE
        )
    if params:
        hint = hints.get(params[0].name)
        if hint is None:
            return f"tool {name!r}: argument {params[0].name!r} has no type annotation; {TOOL_SHAPE}"
        if not (inspect.isclass(hint) and issubclass(hint, BaseModel)):
            shown = getattr(hint, "__name__", str(hint))
            return (
                f"tool {name!r}: argument `{params[0].name}: {shown}` is not a pydantic model; " + TOOL_SHAPE
            )
    if hints.get("return") is not ToolOutput:
        ret = hints.get("return")
        said = "has no return annotation" if ret is None else f"returns {getattr(ret, '__name__', ret)}"
        return f"tool {name!r} {said}, not `-> ToolOutput`; {TOOL_SHAPE}"
    return f"tool {name!r} is not a valid tool; {TOOL_SHAPE}"  # pragma: no cover - a shape the SDK added


def shape_problems(cls: type) -> list[str]:
    """Every mistake in an `Environment` subclass that would stop its server, or leave a tool out.

    Calls the class's ``list_splits()`` (and lists its tools), nothing else of its code.

    Example:
        >>> from openreward.environments import Environment, TextBlock, ToolOutput, tool
        >>> class Bad(Environment):
        ...     @classmethod
        ...     def list_splits(cls): return ["train"]
        ...     def list_tasks(self, split): return [{}]
        ...     def get_prompt(self): return [TextBlock(text="hi")]
        ...     @tool
        ...     def answer(self, text: str) -> ToolOutput: ...
        >>> for line in shape_problems(Bad):
        ...     print(line[:72])
        tool 'answer': argument `text: str` is not a pydantic model; a tool is `
        list_tasks must be a @classmethod (`@classmethod def list_tasks(cls, spl
        so it has no tool at all (the server refuses to start)
    """
    from openreward.environments import Environment

    problems: list[str] = []
    for name in dir(cls):
        fn = getattr(cls, name, None)
        if callable(fn) and getattr(fn, "_env_tool", False):
            problem = _tool_problem(name, fn)
            if problem:
                problems.append(problem)
    for name, signature in (("list_splits", "list_splits(cls)"), ("list_tasks", "list_tasks(cls, split)")):
        if not isinstance(inspect.getattr_static(cls, name, None), (classmethod, staticmethod)):
            problems.append(
                f"{name} must be a @classmethod (`@classmethod def {signature}`): the server calls it on "
                "the class, before any task is opened"
            )
    own: Any = cls
    if own.get_prompt is Environment.get_prompt and own.get_messages is Environment.get_messages:
        problems.append(
            "it has no get_prompt: add `def get_prompt(self) -> list[TextBlock]` returning the task's prompt"
        )
    try:
        listed = cls.list_tools()  # type: ignore[attr-defined]
    except Exception as e:  # noqa: BLE001 - the SDK's own refusal (a tool name collision, a bad @terminal)
        problems.append(f"its tools cannot be listed: {type(e).__name__}: {e}")
    else:
        if not listed.tools and listed.terminal_tool is None:
            if any(p.startswith("tool ") for p in problems):
                problems.append("so it has no tool at all (the server refuses to start)")
            else:
                problems.append(f"it has no tool: add at least one @tool; {TOOL_SHAPE}")
    if not any(p.startswith("list_splits") for p in problems):
        try:
            splits = cls.list_splits()  # type: ignore[attr-defined]
        except Exception as e:  # noqa: BLE001 - the user's code: its own error is the message
            problems.append(f"list_splits() raised {type(e).__name__}: {e}")
        else:
            if inspect.isawaitable(splits):  # an async list_splits: the server awaits it
                getattr(splits, "close", lambda: None)()
            elif not list(splits):
                problems.append("list_splits() returned no split: return e.g. ['train']")
    return problems
