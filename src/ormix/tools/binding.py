"""Attach ORS tools to a class as Python methods TRL can expose to the model, without generating code.

TRL lists an environment's public methods as tools and shows the model ``transformers.utils.get_json_schema(method)``:
the signature, the type hints and the Google-style ``Args:`` docstring. :func:`make_method` builds such a method
from a :class:`~ormix.tools.plan.ToolBinding` as a plain closure whose ``__signature__``, ``__annotations__``,
``__doc__`` and ``__name__`` are set from data; :func:`bind_tools` plans (:func:`~ormix.tools.plan.plan_tool`)
and attaches one per spec, unique on the class, and returns a :class:`BindingReport`.

Optional parameters and "not given": an optional parameter's Python default is a :class:`ServerDefault` marker
(its ``repr`` shows the schema default). An argument the model did not pass is left out of the wire call, so the
server applies its own default; an argument it passed explicitly (even one equal to the default, even ``None``) is
sent. TRL's exec-based binder instead sends ``None`` for every omitted optional parameter, which a server rejects
when the field is not nullable.

:data:`RESERVED_METHOD_NAMES` (``reset``, ``close``, ``get_reward``) are never given to a tool: TRL treats
``reset`` and ``get_reward`` specially, ``close`` is the environment's own cleanup.

Example:
    >>> class Env:
    ...     def _call_tool(self, name, arguments):
    ...         return f"{name} {arguments}"
    >>> spec = {"name": "run-tests", "description": "Run the tests.",
    ...         "input_schema": {"type": "object", "properties": {"from": {"type": "string"}}}}
    >>> report = bind_tools(Env, [spec])
    >>> Env().run_tests(from_="a")
    "run-tests {'from': 'a'}"
    >>> sorted(RESERVED_METHOD_NAMES)
    ['close', 'get_reward', 'reset']
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from ormix.tools.names import DEFAULT_MAX_LEN, NameMap, safe_identifier, validate_prefix
from ormix.tools.plan import NO_DEFAULT, BindingConflictError, ToolBinding, plan_tool
from ormix.tools.specs import ToolSpecError, normalize_spec
from ormix.tools.text import snippet

__all__ = [
    "RESERVED_METHOD_NAMES",
    "BindingReport",
    "RenamedTool",
    "ServerDefault",
    "SkippedTool",
    "bind_tools",
    "make_method",
]

#: Method names a tool may never take: TRL treats ``reset`` and ``get_reward`` specially, ``close`` is the
#: environment's own cleanup. Anything already defined on the target class is reserved as well.
RESERVED_METHOD_NAMES: frozenset[str] = frozenset({"reset", "close", "get_reward"})


class ServerDefault:
    """Signature default of an optional tool parameter: "not given; the server applies its own default".

    A bound method leaves a parameter out of the wire call when it was not passed or was passed this very marker.
    ``repr`` shows the schema's default so ``inspect.signature`` reads naturally.

    Example:
        >>> ServerDefault(False)
        False
        >>> ServerDefault()
        <server default>
    """

    __slots__ = ("has_value", "value")

    def __init__(self, value: Any = NO_DEFAULT) -> None:
        self.value = value
        self.has_value = value is not NO_DEFAULT

    def __repr__(self) -> str:
        return snippet(self.value, 80, python=True) if self.has_value else "<server default>"


@dataclass(frozen=True)
class RenamedTool:
    """A tool whose method name differs from its wire name, and why.

    Example:
        >>> class Env:
        ...     def _call_tool(self, name, arguments): ...
        >>> bind_tools(Env, [{"name": "fs.read"}]).renamed
        (RenamedTool(wire_name='fs.read', method_name='fs_read', reason='not a usable Python name'),)
    """

    wire_name: str
    method_name: str
    reason: str


@dataclass(frozen=True)
class SkippedTool:
    """A spec :func:`bind_tools` did not bind: its position in the input, its name (if any) and why.

    Example:
        >>> class Env:
        ...     def _call_tool(self, name, arguments): ...
        >>> bind_tools(Env, [{"name": "ls"}, {"name": "ls"}]).skipped[0].index
        1
    """

    index: int
    name: str | None
    reason: str


@dataclass(frozen=True)
class BindingReport:
    """What :func:`bind_tools` did: the name map, the bindings, and every rename, skip and removal with reasons.

    Example:
        >>> class Env:
        ...     def _call_tool(self, name, arguments): ...
        >>> report = bind_tools(Env, [{"name": "run-tests"}])
        >>> report.names.to_wire("run_tests"), report.binding("run_tests").wire_name
        ('run-tests', 'run-tests')
    """

    names: NameMap
    bindings: tuple[ToolBinding, ...]
    renamed: tuple[RenamedTool, ...] = ()
    skipped: tuple[SkippedTool, ...] = ()
    removed: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def method_names(self) -> tuple[str, ...]:
        """The bound method names, in spec order.

        Example:
            >>> class Env:
            ...     def _call_tool(self, name, arguments): ...
            >>> bind_tools(Env, [{"name": "b"}, {"name": "a"}]).method_names
            ('b', 'a')
        """
        return tuple(b.method_name for b in self.bindings)

    def binding(self, method_name: str) -> ToolBinding:
        """The :class:`~ormix.tools.plan.ToolBinding` of one bound method; raises ``KeyError`` if there is none.

        Example:
            >>> class Env:
            ...     def _call_tool(self, name, arguments): ...
            >>> bind_tools(Env, [{"name": "ls"}]).binding("ls").method_name
            'ls'
        """
        for b in self.bindings:
            if b.method_name == method_name:
                return b
        raise KeyError(
            f"no tool method {method_name!r} in this report; bound: {list(self.method_names)[:20]}"
        )

    def summary(self) -> str:
        """A few human-readable lines for logs and ``ormix inspect``.

        Example:
            >>> class Env:
            ...     def _call_tool(self, name, arguments): ...
            >>> print(bind_tools(Env, [{"name": "reset"}]).summary())
            bound 1 tool(s)
              renamed 'reset' -> reset_ ('reset' is reserved by TRL/ormix)
        """
        lines = [f"bound {len(self.bindings)} tool(s)"]
        lines += [f"  renamed {r.wire_name!r} -> {r.method_name} ({r.reason})" for r in self.renamed]
        lines += [f"  skipped #{s.index} {s.name!r}: {s.reason}" for s in self.skipped]
        lines += [f"  removed stale method {name}" for name in self.removed]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


# ── method construction ───────────────────────────────────────────────────────────────────────────


def make_method(
    binding: ToolBinding, dispatch: str = "_call_tool", *, asynchronous: bool = False
) -> Callable:
    """Build the tool method for ``binding`` as a closure (no exec/eval/compile).

    The function has ``__name__``/``__qualname__`` = ``binding.method_name``, the planned docstring, annotations
    (return ``str``) and an ``inspect.Signature`` with ``self`` first, required parameters before optional ones,
    all positional-or-keyword. Called as a method, it binds the arguments against that signature (so unknown or
    missing arguments raise a ``TypeError`` naming the tool, which TRL reports to the model), also accepts the
    original wire names of renamed parameters as keywords, drops optional arguments that were not given, and
    returns ``getattr(self, dispatch)(binding.wire_name, {wire_name: value, ...})``. For a ``raw_input`` binding the
    second argument is the single value itself. With ``asynchronous=True`` the method is a coroutine function
    that awaits the dispatch method.

    Example:
        >>> b = plan_tool({"name": "echo", "input_schema": {"properties": {"text": {"type": "string"}}}})
        >>> class Env:
        ...     def _call_tool(self, name, args):
        ...         return (name, args)
        >>> method = make_method(b)
        >>> method(Env(), "hi"), method(Env())
        (('echo', {'text': 'hi'}), ('echo', {}))
    """
    params = binding.params
    py_to_wire = {p.py_name: p.wire_name for p in params}
    aliases = {
        p.wire_name: p.py_name
        for p in params
        if p.wire_name != p.py_name and p.wire_name and p.wire_name not in py_to_wire
    }
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for p in params:
        parameters.append(
            inspect.Parameter(
                p.py_name,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                annotation=p.annotation,
                default=inspect.Parameter.empty if p.required else ServerDefault(p.default),
            )
        )
    signature = inspect.Signature(parameters, return_annotation=str)
    tool_name = binding.wire_name
    label = binding.method_name
    raw_input = binding.raw_input

    def arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
        if aliases and kwargs:
            kwargs = {
                aliases.get(k, k) if aliases.get(k, k) not in kwargs else k: v for k, v in kwargs.items()
            }
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{label}(): {exc}") from None
        values = bound.arguments
        receiver = values.pop("self")
        if raw_input:
            return receiver, next(iter(values.values()))
        return receiver, {py_to_wire[k]: v for k, v in values.items() if not isinstance(v, ServerDefault)}

    method: Any  # a function that gets a signature and a binding attached below
    if asynchronous:

        async def method(*args: Any, **kwargs: Any) -> Any:
            receiver, payload = arguments(args, kwargs)
            return await getattr(receiver, dispatch)(tool_name, payload)

    else:

        def method(*args: Any, **kwargs: Any) -> Any:
            receiver, payload = arguments(args, kwargs)
            return getattr(receiver, dispatch)(tool_name, payload)

    method.__name__ = binding.method_name
    method.__qualname__ = binding.method_name
    method.__doc__ = binding.docstring
    method.__signature__ = signature
    method.__annotations__ = {**{p.py_name: p.annotation for p in params}, "return": str}
    method.__ormix_binding__ = binding
    return method


# ── binding onto a class ──────────────────────────────────────────────────────────────────────────


def bind_tools(
    cls: type,
    specs: Iterable[Any] | None,
    *,
    dispatch: str = "_call_tool",
    prefix: str = "",
    reserved: Iterable[str] = (),
    on_conflict: Literal["rename", "raise"] = "rename",
    replace: bool = True,
    asynchronous: bool | None = None,
) -> BindingReport:
    """Attach one tool method per spec to ``cls`` and report the name map and every decision.

    Method names are ``prefix`` + :func:`safe_identifier` of the wire name, unique on the class. Names that would
    clash with :data:`RESERVED_METHOD_NAMES`, ``reserved``, the ``dispatch`` method, anything else already on the
    class (own or inherited), or another tool of this call are made unique (``name_`` or a hash suffix) and listed in
    ``report.renamed``. Binding again is idempotent: a tool bound earlier by ormix under the same prefix keeps its
    method name; with ``replace=True`` (default) ormix-bound methods of this prefix whose tool is no longer in
    ``specs`` are removed (``report.removed``), so ``specs`` is the whole surface for that prefix.

    Never raises on hostile specs: a spec without a usable name or a repeated wire name is skipped
    (``report.skipped``; merge probes with :func:`merge_tool_specs` first). Raises
    :class:`BindingConflictError` only with ``on_conflict="raise"`` when two tools (or a tool and an existing
    attribute) need the same method name, and ``ValueError`` for an unusable ``prefix``.

    Args:
        cls: The environment class to attach methods to.
        specs: Tool specs (dicts or ``ToolSpec``-like objects); ``None`` binds nothing.
        dispatch: Name of the method every tool calls as ``self.<dispatch>(wire_name, arguments)``.
        prefix: Prepended to every method name (``"seta__"`` for namespaced routing).
        reserved: More names tools must not take.
        on_conflict: ``"rename"`` (default) makes clashing names unique; ``"raise"`` raises instead.
        replace: Remove this prefix's previously bound tools that are not in ``specs``.
        asynchronous: Build coroutine methods; default: whether ``cls.<dispatch>`` is a coroutine function.

    Returns:
        A :class:`BindingReport`.

    Example:
        >>> class Env:
        ...     def reset(self, **row): ...
        ...     def _call_tool(self, name, arguments): return name
        >>> report = bind_tools(Env, [{"name": "reset"}, {"name": "fs.read"}])
        >>> report.method_names, Env().fs_read()
        (('reset_', 'fs_read'), 'fs.read')
    """
    validate_prefix(prefix)
    if asynchronous is None:
        asynchronous = inspect.iscoroutinefunction(getattr(cls, dispatch, None))
    report_notes: list[str] = []
    if getattr(cls, dispatch, None) is None:
        report_notes.append(
            f"{cls.__name__} has no {dispatch!r} method yet; tool calls will fail until it exists"
        )

    previous: dict[str, str] = {}  # wire name -> method name, for ormix-bound methods with this prefix
    for name, value in list(vars(cls).items()):
        bound = getattr(value, "__ormix_binding__", None)
        if isinstance(bound, ToolBinding) and bound.prefix == prefix and name == bound.method_name:
            previous[bound.wire_name] = name
    previous_names = set(previous.values())
    # Inherited ormix-bound methods stay reserved: only this class's own can be replaced
    taken: set[str] = {n for n in dir(cls) if n not in previous_names} | set(dir(type(cls)))
    taken |= RESERVED_METHOD_NAMES | set(reserved) | {dispatch}

    names = NameMap()
    bindings: list[ToolBinding] = []
    renamed: list[RenamedTool] = []
    skipped: list[SkippedTool] = []
    seen: set[str] = set()
    for index, spec in enumerate(specs or ()):
        try:
            norm = normalize_spec(spec)
        except ToolSpecError as exc:
            skipped.append(SkippedTool(index, None, str(exc)))
            continue
        except Exception as exc:  # noqa: BLE001 - a hostile object's attribute access must not stop binding
            skipped.append(SkippedTool(index, None, f"spec could not be read: {type(exc).__name__}: {exc}"))
            continue
        wire = norm["name"]
        if wire in seen:
            skipped.append(
                SkippedTool(
                    index, wire, "duplicate tool name; the first spec was bound (use merge_tool_specs)"
                )
            )
            continue
        seen.add(wire)

        plain = prefix + wire
        base = safe_identifier(wire, (), prefix=prefix)  # the sanitised name, before uniqueness
        method_name = previous.get(wire)
        reasons: list[str] = []
        if method_name is not None and method_name not in taken:
            if method_name != plain:
                reasons.append("kept from an earlier binding")
        else:
            if base in taken:
                clash = _clash_reason(base, cls, dispatch, reserved, bindings)
                if on_conflict == "raise":
                    raise BindingConflictError(
                        f"tool {wire!r} needs method name {base!r}, which {clash}; choose a prefix, rename the "
                        "tool on the server, or bind with on_conflict='rename'"
                    )
                reasons.append(f"{base!r} {clash}")
            method_name = safe_identifier(wire, taken, prefix=prefix)
            if base != plain:
                reasons.insert(0, "too long" if len(plain) > DEFAULT_MAX_LEN else "not a usable Python name")
        if method_name != plain:
            renamed.append(RenamedTool(wire, method_name, "; ".join(reasons) or "renamed"))

        binding = plan_tool(norm, method_name=method_name, taken=taken, prefix=prefix)
        method = make_method(binding, dispatch, asynchronous=asynchronous)
        method.__qualname__ = f"{cls.__qualname__}.{method_name}"
        method.__module__ = cls.__module__
        setattr(cls, method_name, method)
        taken.add(method_name)
        names.add(method_name, wire)
        bindings.append(binding)

    removed: list[str] = []
    if replace:
        for wire, name in previous.items():
            if wire not in seen and name not in names:
                delattr(cls, name)
                removed.append(name)
    return BindingReport(
        names=names,
        bindings=tuple(bindings),
        renamed=tuple(renamed),
        skipped=tuple(skipped),
        removed=tuple(removed),
        notes=tuple(report_notes),
    )


def _clash_reason(
    name: str, cls: type, dispatch: str, reserved: Iterable[str], bindings: list[ToolBinding]
) -> str:
    for b in bindings:
        if b.method_name == name:
            return f"tool {b.wire_name!r} already has"
    if name in RESERVED_METHOD_NAMES:
        return "is reserved by TRL/ormix"
    if name == dispatch:
        return "is the dispatch method"
    if name in set(reserved):
        return "is reserved by the caller"
    return f"is already an attribute of {cls.__name__}"
