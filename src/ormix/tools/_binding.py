"""ORS tool specs to Python methods TRL can show the model: plan each tool, then attach it; no text is run.

TRL lists an environment's public methods as tools and shows the model
``transformers.utils.get_json_schema(method)``: the signature, the type hints and the Google-style ``Args:``
docstring. :func:`plan_tool` reads a spec (``name``, ``description``, JSON-Schema ``input_schema``) into a
:class:`ToolBinding` (pure): server text only becomes names (sanitised), typing objects
(:mod:`~ormix.tools._hints`) and docstring text (:mod:`~ormix.tools._descriptions`,
:mod:`~ormix.tools._docstrings`). Parameter texts written in the tool's own description (a Google-style
``Args:`` section, as the ORS SDK's ``@tool`` docstrings have) become the parameters' descriptions.
:func:`make_method` turns a binding into a plain closure whose ``__signature__``, ``__annotations__``,
``__doc__`` and ``__name__`` are set from data (no exec/eval/compile); :func:`bind_tools` attaches one per
spec, unique on the class.

Optional parameters and "not given": an optional parameter's Python default is a :class:`ServerDefault` marker
(its ``repr`` shows the schema default). An argument the model did not pass is left out of the wire call, so
the server applies its own default; an argument it passed explicitly (even one equal to the default, even
``None``) is sent. TRL's exec-based binder instead sends ``None`` for every omitted optional parameter, which
a server rejects when the field is not nullable.

Example:
    >>> class Env:
    ...     def _call_tool(self, name, arguments):
    ...         return f"{name} {arguments}"
    >>> spec = {"name": "run-tests", "description": "Run the tests.\\n\\nArgs:\\n    from: First test.",
    ...         "input_schema": {"type": "object", "properties": {"from": {"type": "string"}}}}
    >>> report = bind_tools(Env, [spec])
    >>> Env().run_tests(from_="a")
    "run-tests {'from': 'a'}"
    >>> report.renamed[0].method_name, report.binding("run_tests").params[0].description
    ('run_tests', 'First test.')
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ormix.tools._descriptions import ParamText, param_text
from ormix.tools._docstrings import parse_docstring, render_docstring, safe_block
from ormix.tools._hints import type_hint
from ormix.tools._names import DEFAULT_MAX_LEN, BindingConflictError, safe_identifier, validate_prefix
from ormix.tools._schema import Node, SchemaWalker, required_names
from ormix.tools._specs import ToolSpecError, exact_json, normalize_spec, union_of_objects
from ormix.tools._text import snippet

#: Method names a tool may never take: TRL treats ``reset`` and ``get_reward`` specially, ``close`` is the
#: environment's own cleanup. Anything already defined on the target class is reserved as well.
RESERVED_METHOD_NAMES: frozenset[str] = frozenset({"reset", "close", "get_reward"})

#: A tool whose docstring (description and parameter texts, what TRL shows the model) is longer than this many
#: characters gets a note: it enters every prompt whole, so it takes the model's context on each turn.
LONG_TOOL_TEXT = 8_000

_PARAM_SUFFIXES = ("Returns", "Raises")  # a param line "xReturns: ..." would end the docstring's Args block


class _NoDefault:
    """The type of :data:`NO_DEFAULT`: prints and pickles as that name."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_DEFAULT"

    def __reduce__(self) -> str:
        return "NO_DEFAULT"


#: :attr:`ParamBinding.default` when the schema gives no default.
NO_DEFAULT: Any = _NoDefault()


class ServerDefault:
    """Signature default of an optional tool parameter: "not given; the server applies its own default".

    A bound method leaves a parameter out of the wire call when it was not passed or was passed this very
    marker. ``repr`` shows the schema's default so ``inspect.signature`` reads naturally.

    Example:
        >>> ServerDefault(False), ServerDefault()
        (False, <server default>)
    """

    __slots__ = ("value",)

    def __init__(self, value: Any = NO_DEFAULT) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "<server default>" if self.value is NO_DEFAULT else snippet(self.value, 80, python=True)


@dataclass(frozen=True)
class ParamBinding:
    """One tool parameter: its Python and wire names, type hint, whether required, schema default and
    description.

    ``default`` is the schema's default or :data:`NO_DEFAULT`. ``description`` is the single line the model
    sees (see :class:`~ormix.tools._descriptions.ParamText`); ``text`` holds its parts. ``notes`` say what was
    approximated.

    Example:
        >>> t = {"name": "t", "input_schema": {"properties": {"from": {"type": "integer"}}}}
        >>> (p,) = plan_tool(t).params
        >>> p.py_name, p.wire_name, p.annotation, p.required, p.default
        ('from_', 'from', <class 'int'>, False, NO_DEFAULT)
    """

    py_name: str
    wire_name: str
    annotation: Any
    required: bool
    default: Any = NO_DEFAULT
    description: str = ""
    notes: tuple[str, ...] = ()
    text: ParamText | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class ToolBinding:
    """Everything needed to build one tool method, computed by :func:`plan_tool` without side effects.

    ``description`` is the tool's description without its ``Args``/``Returns``/``Raises`` sections;
    ``docstring`` is the method's whole docstring. ``raw_input`` is true for a non-object input schema (e.g.
    ``{"type": "string"}``): the method then takes one parameter and passes its value itself (not a dict) to
    the dispatch method.

    Example:
        >>> b = plan_tool({"name": "fs.read", "input_schema": {"type": "string"}})
        >>> b.method_name, b.raw_input, [p.py_name for p in b.params]
        ('fs_read', True, ['input'])
    """

    method_name: str
    wire_name: str
    description: str
    params: tuple[ParamBinding, ...]
    docstring: str
    notes: tuple[str, ...] = ()
    raw_input: bool = False


@dataclass(frozen=True)
class RenamedTool:
    """A tool whose method name differs from its wire name, and why."""

    wire_name: str
    method_name: str
    reason: str


@dataclass(frozen=True)
class SkippedTool:
    """A spec :func:`bind_tools` did not bind: its position in the input, its name (if any) and why."""

    index: int
    name: str | None
    reason: str


@dataclass(frozen=True)
class BindingReport:
    """What :func:`bind_tools` did: the bindings (each with its wire name), and every rename and skip with
    reasons.

    Example:
        >>> class Env:
        ...     def _call_tool(self, name, arguments): ...
        >>> report = bind_tools(Env, [{"name": "fs.read"}, {"name": "ls"}, {"name": "ls"}])
        >>> report.method_names, report.binding("fs_read").wire_name
        (('fs_read', 'ls'), 'fs.read')
        >>> report.renamed[0].reason, report.skipped[0].index
        ('not a usable Python name', 2)
    """

    bindings: tuple[ToolBinding, ...]
    renamed: tuple[RenamedTool, ...] = ()
    skipped: tuple[SkippedTool, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def method_names(self) -> tuple[str, ...]:
        """The bound method names, in spec order."""
        return tuple(b.method_name for b in self.bindings)

    def binding(self, method_name: str) -> ToolBinding:
        """The :class:`ToolBinding` of one bound method; raises ``KeyError`` if there is none."""
        for b in self.bindings:
            if b.method_name == method_name:
                return b
        raise KeyError(
            f"no tool method {method_name!r} in this report; bound: {list(self.method_names)[:20]}"
        )


# ── planning ──────────────────────────────────────────────────────────────────────────────────────


def plan_tool(spec: Any, *, method_name: str | None = None) -> ToolBinding:
    """Plan the Python method for one ORS tool spec (pure: no class is touched, nothing is executed).

    Args:
        spec: A dict or object with ``name``, ``description``, ``input_schema``.
        method_name: Use this method name (``bind_tools`` passes one unique on its class). Default:
            :func:`~ormix.tools._names.safe_identifier` of the wire name.

    Returns:
        A :class:`ToolBinding`. Hostile schemas never raise: what cannot be carried is approximated and noted.
        Raises :class:`~ormix.tools._specs.ToolSpecError` only for a spec without a usable name.

    Example:
        >>> b = plan_tool({"name": "echo", "description": "Echo it.\\n\\nArgs:\\n    text: The string.",
        ...     "input_schema": {"properties": {"text": {"type": "string", "title": "Text"}},
        ...                      "required": ["text"]}})
        >>> b.description, [(p.py_name, p.annotation, p.required, p.description) for p in b.params]
        ('Echo it.', [('text', <class 'str'>, True, 'The string.')])
    """
    norm = normalize_spec(spec)
    wire_name: str = norm["name"]
    py_name = method_name or safe_identifier(wire_name)
    tool_notes = [f"tool {wire_name!r} is exposed as method {py_name!r}"] if py_name != wire_name else []

    raw_schema = norm["input_schema"]
    canonical, exact = exact_json(raw_schema)
    shape = _SHAPE_CACHE.get(canonical) if exact else None
    if shape is None:
        shape = _plan_shape(raw_schema)
        if exact:
            if len(_SHAPE_CACHE) >= _SHAPE_CACHE_MAX:
                _SHAPE_CACHE.clear()
            _SHAPE_CACHE[canonical] = shape
    params, schema_notes, model_notes, raw_input = shape
    tool_notes += [n.replace(_TOOL, wire_name) for n in schema_notes]

    doc = parse_docstring(norm["description"])
    params = _documented(params, doc.args, wire_name, tool_notes)
    description = safe_block(doc.summary) or f"Call the {py_name} tool."
    docstring = render_docstring(
        description,
        [(p.py_name, p.description) for p in params],
        notes=model_notes,
        returns=doc.returns,
        raises=doc.raises,
    )
    if len(docstring) > LONG_TOOL_TEXT:
        # Shown whole, as TRL's own spec shows it: cutting an environment's text would change the task.
        tool_notes.append(
            f"{wire_name}: its description and parameter texts are {len(docstring):,} characters, all of "
            "them in every prompt; shorten them in the environment if they crowd out the task"
        )
    return ToolBinding(py_name, wire_name, description, params, docstring, tuple(tool_notes), raw_input)


def _documented(
    params: tuple[ParamBinding, ...], documented: Mapping[str, str], tool: str, tool_notes: list[str]
) -> tuple[ParamBinding, ...]:
    """``params`` with the texts the tool's docstring gives them (by wire or Python name) folded in."""
    if not documented:
        return params
    by_name = {p.py_name: p for p in params} | {p.wire_name: p for p in params}
    texts: dict[str, str] = {}
    for name, text in documented.items():
        param = by_name.get(name)
        if param is None:
            tool_notes.append(
                f"{tool}: the description documents {name!r}, which is not a parameter; not shown"
            )
        elif text:
            texts[param.py_name] = text
    return tuple(
        dataclasses.replace(p, description=p.text.render(texts[p.py_name]))
        if p.py_name in texts and p.text is not None
        else p
        for p in params
    )


# Many tools (and every task's copy of a shared tool) have the same input schema: plan each schema once.
_Shape = tuple[tuple[ParamBinding, ...], tuple[str, ...], tuple[str, ...], bool]
_SHAPE_CACHE: dict[str, _Shape] = {}
_SHAPE_CACHE_MAX = 4096
_TOOL = "\x00tool\x00"  # stands for the tool's wire name in cached notes


def _plan_shape(raw_schema: Any) -> _Shape:
    """The schema-dependent part of a plan: params, notes (with a tool placeholder), model notes, raw flag."""
    tool_notes: list[str] = []
    model_notes: list[str] = []
    walker = SchemaWalker(raw_schema)
    obj = _object_view(walker, raw_schema, tool_notes, model_notes)
    if obj is None:
        text = "the input is a single value, not named fields"
        tool_notes.append(f"{text}; bound as one parameter 'input'")
        model_notes.append(f"{text}; pass it as `input`")
        params = [_param(walker, walker.node(), "input", "", required=True)]
    else:
        params = _plan_params(walker, obj, tool_notes)
        extra = obj.get("additionalProperties")
        if extra is True or (isinstance(extra, Mapping) and extra):
            tool_notes.append("the input accepts extra keys that are not exposed as parameters")
    return tuple(params), tuple(tool_notes), tuple(model_notes), obj is None


def _object_view(
    walker: SchemaWalker, schema: Any, tool_notes: list[str], model_notes: list[str]
) -> Mapping[str, Any] | None:
    """The input schema as an object with properties, or None for a non-object input (one raw parameter)."""
    if schema is None or schema is True or schema == {}:
        return {}
    if not isinstance(schema, Mapping):
        tool_notes.append(
            f"input schema is not a JSON object ({type(schema).__name__}); bound without parameters"
        )
        return {}
    node = walker.node()
    view = node.schema
    props = view.get("properties")
    if props is not None and not isinstance(props, Mapping):
        tool_notes.append(f"input schema `properties` is a {type(props).__name__}, not an object; ignored")
        view = {k: v for k, v in view.items() if k != "properties"}
    objects = [
        m for m in node.members if m.kind == "object" and isinstance(m.schema.get("properties"), Mapping)
    ]
    if not view.get("properties") and objects:
        text = (
            "the input may take one of several shapes; their fields are merged and only fields every shape "
            "requires are required"
        )
        tool_notes.append(text)
        model_notes.append(text)
        return union_of_objects([m.schema for m in objects])
    kinds = {node.kind, *(m.kind for m in node.members)}
    if kinds & {"object", "any", "cycle"} or view.get("properties"):
        return view
    return None


def _plan_params(
    walker: SchemaWalker, schema: Mapping[str, Any], tool_notes: list[str]
) -> list[ParamBinding]:
    raw_props = schema.get("properties")
    props: Mapping[Any, Any] = raw_props if isinstance(raw_props, Mapping) else {}
    required_raw, required = schema.get("required"), required_names(schema)
    if isinstance(required_raw, list) and len(required) != len(required_raw):
        tool_notes.append("non-string entries in `required` are ignored")
    elif required_raw is not None and not isinstance(required_raw, list):
        tool_notes.append("`required` is not a list; every parameter is treated as optional")

    entries: list[tuple[str, Any]] = []
    for name, sub in props.items():
        if not isinstance(name, str):
            tool_notes.append(f"property key {snippet(name, 40)} is not a string; dropped")
            continue
        entries.append((name, sub))
    for name in required:
        if name not in props:
            entries.append((name, {}))
            tool_notes.append(
                f"{_TOOL}: parameter {name!r} is required but has no schema; any value is accepted"
            )

    taken: set[str] = {"self"}
    planned: list[ParamBinding] = []
    for name, sub in entries:
        py = safe_identifier(name, taken, fallback="arg", avoid_suffixes=_PARAM_SUFFIXES)
        taken.add(py)
        if py != name:
            tool_notes.append(f"{_TOOL}: parameter {name!r} is exposed as {py!r}")
        param = _param(walker, walker.node(sub), py, name, required=name in required)
        tool_notes += [f"{_TOOL}.{name}: {n}" for n in param.notes]
        planned.append(param)
    # Python needs parameters without defaults first; the order within each group is the schema's
    return [p for p in planned if p.required] + [p for p in planned if not p.required]


def _param(walker: SchemaWalker, node: Node, py_name: str, wire_name: str, *, required: bool) -> ParamBinding:
    annotation, hint_notes = type_hint(walker, node)
    text = param_text(walker, node, wire_name or py_name, hint_notes)
    return ParamBinding(
        py_name=py_name,
        wire_name=wire_name,
        annotation=annotation,
        required=required,
        default=node.schema["default"] if wire_name and "default" in node.schema else NO_DEFAULT,
        description=text.render(),
        notes=text.notes,
        text=text,
    )


# ── methods ───────────────────────────────────────────────────────────────────────────────────────


def make_method(binding: ToolBinding, dispatch: str = "_call_tool") -> Callable[..., Any]:
    """Build the tool method for ``binding`` as a closure (no exec/eval/compile).

    The function has ``__name__``/``__qualname__`` = ``binding.method_name``, the planned docstring,
    annotations (return ``str``) and an ``inspect.Signature`` with ``self`` first, required parameters before
    optional ones, all positional-or-keyword. Called as a method, it binds the arguments against that
    signature (so unknown or missing arguments raise a ``TypeError`` naming the tool, which TRL reports to the
    model), also accepts the original wire names of renamed parameters as keywords, drops optional arguments
    that were not given, and returns ``getattr(self, dispatch)(binding.wire_name, {wire_name: value, ...})``.
    For a ``raw_input`` binding the second argument is the single value itself.

    Example:
        >>> b = plan_tool({"name": "echo", "input_schema": {"properties": {"text": {"type": "string"}}}})
        >>> class Env:
        ...     def _call_tool(self, name, args):
        ...         return (name, args)
        >>> method = make_method(b)
        >>> method(Env(), "hi"), method(Env()), inspect.signature(method)
        (('echo', {'text': 'hi'}), ('echo', {}), <Signature (self, text: str = <server default>) -> str>)
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
    tool_name, label, raw_input = binding.wire_name, binding.method_name, binding.raw_input

    def method(*args: Any, **kwargs: Any) -> Any:
        if aliases and kwargs:
            kwargs = {
                aliases.get(k, k) if aliases.get(k, k) not in kwargs else k: v for k, v in kwargs.items()
            }
        try:
            values = signature.bind(*args, **kwargs).arguments
        except TypeError as exc:
            raise TypeError(f"{label}(): {exc}") from None
        receiver = values.pop("self")
        if raw_input:
            payload = next(iter(values.values()))
        else:
            payload = {py_to_wire[k]: v for k, v in values.items() if not isinstance(v, ServerDefault)}
        return getattr(receiver, dispatch)(tool_name, payload)

    method.__name__ = method.__qualname__ = binding.method_name
    method.__doc__ = binding.docstring
    method.__signature__ = signature  # type: ignore[attr-defined]
    method.__annotations__ = {**{p.py_name: p.annotation for p in params}, "return": str}
    return method


def bind_tools(
    cls: type,
    specs: Iterable[Any] | None,
    *,
    dispatch: str = "_call_tool",
    prefix: str = "",
    reserved: Iterable[str] = (),
    on_conflict: Literal["rename", "raise"] = "rename",
) -> BindingReport:
    """Attach one tool method per spec to ``cls`` and report every decision.

    Method names are ``prefix`` + :func:`~ormix.tools._names.safe_identifier` of the wire name, unique on the
    class. Names that would clash with :data:`RESERVED_METHOD_NAMES`, ``reserved``, the ``dispatch`` method,
    anything else already on the class (own or inherited), or another tool of this call are made unique
    (``name_`` or a hash suffix) and listed in ``report.renamed``.

    Never raises on hostile specs: a spec without a usable name or a repeated wire name is skipped
    (``report.skipped``; merge probes with :func:`~ormix.tools._specs.merge_tool_specs` first). Raises
    :class:`~ormix.tools._names.BindingConflictError` for an unusable ``prefix``, and with
    ``on_conflict="raise"`` when a tool needs a method name that is taken.

    Args:
        cls: The environment class to attach methods to.
        specs: Tool specs (dicts or ``ToolSpec``-like objects); ``None`` binds nothing.
        dispatch: Name of the method every tool calls as ``self.<dispatch>(wire_name, arguments)``.
        prefix: Prepended to every method name (``"seta__"`` for namespaced routing).
        reserved: More names tools must not take.
        on_conflict: ``"rename"`` (default) makes clashing names unique; ``"raise"`` raises instead.

    Example:
        >>> class Env:
        ...     def reset(self, **row): ...
        ...     def _call_tool(self, name, arguments): return name
        >>> report = bind_tools(Env, [{"name": "reset"}, {"name": "fs.read"}])
        >>> report.method_names, Env().fs_read(), report.renamed[0].reason
        (('reset_', 'fs_read'), 'fs.read', "'reset' is reserved by TRL/ormix")
    """
    validate_prefix(prefix)
    notes: list[str] = []
    if getattr(cls, dispatch, None) is None:
        notes.append(f"{cls.__name__} has no {dispatch!r} method yet; tool calls will fail until it exists")
    reserved = set(reserved)
    taken = set(dir(cls)) | set(dir(type(cls))) | RESERVED_METHOD_NAMES | reserved | {dispatch}
    bindings: list[ToolBinding] = []
    renamed: list[RenamedTool] = []
    skipped: list[SkippedTool] = []
    seen: set[str] = set()
    clash = _Clash(cls, dispatch, reserved, bindings, on_conflict)
    for index, spec in enumerate(specs or ()):
        norm = _readable_spec(index, spec, seen)
        if isinstance(norm, SkippedTool):
            skipped.append(norm)
            continue
        wire = norm["name"]
        seen.add(wire)
        method_name, renaming = _method_name(wire, prefix, taken, clash)
        if renaming is not None:
            renamed.append(renaming)
        binding = plan_tool(norm, method_name=method_name)
        method = make_method(binding, dispatch)
        method.__qualname__ = f"{cls.__qualname__}.{method_name}"
        method.__module__ = cls.__module__
        setattr(cls, method_name, method)
        taken.add(method_name)
        bindings.append(binding)
    return BindingReport(tuple(bindings), tuple(renamed), tuple(skipped), tuple(notes))


def _readable_spec(index: int, spec: Any, seen: set[str]) -> dict[str, Any] | SkippedTool:
    """The spec normalised, or why it is skipped: unreadable, or a wire name already bound."""
    try:
        norm = normalize_spec(spec)
    except ToolSpecError as exc:
        return SkippedTool(index, None, str(exc))
    except Exception as exc:  # noqa: BLE001 - a hostile object's attribute access must not stop binding
        return SkippedTool(index, None, f"spec could not be read: {type(exc).__name__}: {exc}")
    if norm["name"] in seen:
        reason = "duplicate tool name; the first spec was bound (use merge_tool_specs)"
        return SkippedTool(index, norm["name"], reason)
    return norm


@dataclass(frozen=True)
class _Clash:
    """What a method name can clash with while `bind_tools` binds, and what to do then."""

    cls: type
    dispatch: str
    reserved: set[str]
    bindings: list[ToolBinding]
    on_conflict: Literal["rename", "raise"]


def _method_name(wire: str, prefix: str, taken: set[str], clash: _Clash) -> tuple[str, RenamedTool | None]:
    """A tool's unique method name, and why it differs from ``prefix + wire`` (``None``: it does not).

    Raises `BindingConflictError` when the name is taken and ``on_conflict="raise"``.
    """
    plain = prefix + wire
    base = safe_identifier(wire, prefix=prefix)  # the sanitised name, before uniqueness
    reasons: list[str] = []
    if base != plain:
        reasons.append("too long" if len(plain) > DEFAULT_MAX_LEN else "not a usable Python name")
    if base in taken:
        why = _clash_reason(base, clash)
        if clash.on_conflict == "raise":
            raise BindingConflictError(
                f"tool {wire!r} needs method name {base!r}, which {why}; choose a prefix, rename the "
                "tool on the server, or bind with on_conflict='rename'"
            )
        reasons.append(f"{base!r} {why}")
    method_name = safe_identifier(wire, taken, prefix=prefix)
    if method_name == plain:
        return method_name, None
    return method_name, RenamedTool(wire, method_name, "; ".join(reasons) or "renamed")


def _clash_reason(name: str, clash: _Clash) -> str:
    for b in clash.bindings:
        if b.method_name == name:
            return f"tool {b.wire_name!r} already has"
    if name in RESERVED_METHOD_NAMES:
        return "is reserved by TRL/ormix"
    if name == clash.dispatch:
        return "is the dispatch method"
    if name in clash.reserved:
        return "is reserved by the caller"
    return f"is already an attribute of {clash.cls.__name__}"
