"""Plan the Python method for one ORS tool spec: names, parameters, type hints, docstring. Pure.

:func:`plan_tool` reads a spec (``name``, ``description``, JSON-Schema ``input_schema``) and returns a
:class:`ToolBinding`; nothing is executed, evaluated or compiled: server text only becomes names (sanitised),
typing objects (:mod:`~ormix.tools.hints`) and docstring text (:mod:`~ormix.tools.descriptions`,
:mod:`~ormix.tools.docstrings`). Parameter texts written in the tool's own description (a Google-style
``Args:`` section, as the ORS SDK's ``@tool`` docstrings have) become the parameters' descriptions, and the
description the model reads keeps only the rest.

Example:
    >>> b = plan_tool({"name": "echo", "description": "Echo it.\\n\\nArgs:\\n    text: The string to echo back.",
    ...     "input_schema": {"properties": {"text": {"type": "string", "title": "Text"}}, "required": ["text"]}})
    >>> b.description, [(p.py_name, p.description) for p in b.params]
    ('Echo it.', [('text', 'The string to echo back.')])

A parameter whose schema gives no default has :data:`NO_DEFAULT`:

    >>> b.params[0].default is NO_DEFAULT
    True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ormix.tools.descriptions import ParamText, param_text
from ormix.tools.docstrings import parse_docstring, render_docstring, safe_block
from ormix.tools.hints import type_hint
from ormix.tools.names import DEFAULT_MAX_LEN, is_safe_identifier, safe_identifier
from ormix.tools.schema import Node, SchemaWalker
from ormix.tools.specs import canonical_hash, canonical_json, normalize_spec, schema_hash
from ormix.tools.text import snippet

__all__ = ["NO_DEFAULT", "BindingConflictError", "ParamBinding", "ToolBinding", "plan_tool"]

_PARAM_SUFFIXES = ("Returns", "Raises")  # a param line "xReturns: ..." would end the docstring's Args block


class BindingConflictError(ValueError):
    """Two tools (or a tool and an existing attribute) need the same method name and the caller asked for an error.

    Raised by ``bind_tools`` with ``on_conflict="raise"`` and by :func:`plan_tool` when an explicit
    ``method_name`` is unusable. Resolve it by choosing a prefix, renaming, or allowing ``on_conflict="rename"``.

    Example:
        >>> try:
        ...     plan_tool({"name": "x"}, method_name="_hidden")
        ... except BindingConflictError as exc:
        ...     print("not usable" in str(exc))
        True
    """


class _NoDefault:
    """The type of :data:`NO_DEFAULT`: prints and pickles as that name."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_DEFAULT"

    def __reduce__(self) -> str:
        return "NO_DEFAULT"


#: :attr:`ParamBinding.default` when the schema gives no default.
NO_DEFAULT: Any = _NoDefault()


@dataclass(frozen=True)
class ParamBinding:
    """One tool parameter: its Python and wire names, type hint, whether required, schema default and description.

    ``default`` is the schema's default or :data:`NO_DEFAULT`. ``description`` is the single line the model sees
    (see :class:`~ormix.tools.descriptions.ParamText`); ``text`` holds its parts. ``notes`` say what was
    approximated.

    Example:
        >>> (p,) = plan_tool({"name": "t", "input_schema": {"properties": {"from": {"type": "integer"}}}}).params
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
    schema: Any = field(default=None, repr=False, compare=False)
    text: ParamText | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class ToolBinding:
    """Everything needed to build one tool method, computed by :func:`plan_tool` without side effects.

    ``description`` is the tool's description without its ``Args``/``Returns``/``Raises`` sections;
    ``docstring`` is the method's whole docstring. ``raw_input`` is true for a non-object input schema (e.g.
    ``{"type": "string"}``): the method then takes one parameter and passes its value itself (not a dict) to the
    dispatch method.

    Example:
        >>> b = plan_tool({"name": "fs.read", "input_schema": {"type": "string"}})
        >>> b.method_name, b.renamed, b.raw_input, [p.py_name for p in b.params]
        ('fs_read', True, True, ['input'])
    """

    method_name: str
    wire_name: str
    description: str
    params: tuple[ParamBinding, ...]
    docstring: str
    notes: tuple[str, ...] = ()
    schema_hash: str = ""
    spec_hash: str = ""
    prefix: str = ""
    raw_input: bool = False
    input_schema: Any = field(default=None, repr=False, compare=False)

    @property
    def renamed(self) -> bool:
        """True when the method name differs from the wire name (a prefix counts).

        Example:
            >>> plan_tool({"name": "ls"}).renamed, plan_tool({"name": "ls"}, prefix="env__").renamed
            (False, True)
        """
        return self.method_name != self.wire_name


def plan_tool(
    spec: Any,
    *,
    method_name: str | None = None,
    taken: Iterable[str] | None = None,
    prefix: str = "",
    max_len: int = DEFAULT_MAX_LEN,
) -> ToolBinding:
    """Plan the Python method for one ORS tool spec (pure: no class is touched, nothing is executed).

    Args:
        spec: A dict or object with ``name``, ``description``, ``input_schema``.
        method_name: Use exactly this method name (must be a safe identifier not in ``taken``, else
            :class:`BindingConflictError`). Default: derived from the wire name with :func:`safe_identifier`.
        taken: Method names that are already in use.
        prefix: Prepended to the derived method name (e.g. ``"seta__"``).
        max_len: Longest derived method name, prefix included.

    Returns:
        A :class:`ToolBinding`. Hostile schemas never raise: what cannot be carried is approximated and noted.
        Raises :class:`~ormix.tools.specs.ToolSpecError` only for a spec without a usable name.

    Example:
        >>> b = plan_tool({"name": "view", "input_schema": {"type": "object",
        ...     "properties": {"path": {"type": "string", "description": "File."}}, "required": ["path"]}})
        >>> [(p.py_name, p.annotation, p.required) for p in b.params]
        [('path', <class 'str'>, True)]
    """
    norm = normalize_spec(spec)
    wire_name: str = norm["name"]
    # bind_tools passes its live set: copying it per tool would make binding n tools quadratic
    taken_set = taken if isinstance(taken, (set, frozenset)) else set(taken or ())
    tool_notes: list[str] = []

    if method_name is not None:
        if not is_safe_identifier(method_name):
            raise BindingConflictError(
                f"method name {method_name!r} for tool {wire_name!r} is not usable (must be an ASCII identifier, "
                "not a keyword, not starting with '_'); pass another name or None to derive one"
            )
        if method_name in taken_set:
            raise BindingConflictError(
                f"method name {method_name!r} for tool {wire_name!r} is already taken; pass another name or None"
            )
        py_name = method_name
    else:
        py_name = safe_identifier(wire_name, taken_set, prefix=prefix, max_len=max_len)
    if py_name != wire_name:
        tool_notes.append(f"tool {wire_name!r} is exposed as method {py_name!r}")

    raw_schema = norm["input_schema"]
    canonical, exact = canonical_json(raw_schema)
    input_hash = canonical_hash(canonical)
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
    return ToolBinding(
        method_name=py_name,
        wire_name=wire_name,
        description=description,
        params=params,
        docstring=docstring,
        notes=tuple(tool_notes),
        schema_hash=input_hash,
        spec_hash=schema_hash([wire_name, norm["description"], input_hash]),
        prefix=prefix,
        raw_input=raw_input,
        input_schema=raw_schema,
    )


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
    """The schema-dependent part of a plan: parameters, notes (with a tool placeholder), model notes, raw flag."""
    tool_notes: list[str] = []
    model_notes: list[str] = []
    walker = SchemaWalker(raw_schema)
    obj = _object_view(walker, raw_schema, tool_notes, model_notes)
    if obj is None:
        text = "the input is a single value, not named fields"
        tool_notes.append(f"{text}; bound as one parameter 'input'")
        model_notes.append(f"{text}; pass it as `input`")
        params = [_param(walker, walker.node(), "input", "", required=True, schema=raw_schema)]
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
        merged: dict[str, Any] = {}
        for member in objects:
            for name, sub in member.schema["properties"].items():
                merged.setdefault(name, sub)
        common = set.intersection(*(set(SchemaWalker.required(m)) for m in objects))
        text = (
            "the input may take one of several shapes; their fields are merged and only fields every shape "
            "requires are required"
        )
        tool_notes.append(text)
        model_notes.append(text)
        return {"type": "object", "properties": merged, "required": [n for n in merged if n in common]}
    kinds = {node.kind, *(m.kind for m in node.members)}
    if kinds & {"object", "any", "cycle"} or view.get("properties"):
        return view
    return None


def _plan_params(
    walker: SchemaWalker, schema: Mapping[str, Any], tool_notes: list[str]
) -> list[ParamBinding]:
    raw_props = schema.get("properties")
    props: Mapping[Any, Any] = raw_props if isinstance(raw_props, Mapping) else {}
    required_raw = schema.get("required")
    required: list[str] = []
    if isinstance(required_raw, list):
        required = [r for r in required_raw if isinstance(r, str)]
        if len(required) != len(required_raw):
            tool_notes.append("non-string entries in `required` are ignored")
    elif required_raw is not None:
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
        param = _param(walker, walker.node(sub), py, name, required=name in required, schema=sub)
        tool_notes += [f"{_TOOL}.{name}: {n}" for n in param.notes]
        planned.append(param)
    # Python needs parameters without defaults first; the order within each group is the schema's
    return [p for p in planned if p.required] + [p for p in planned if not p.required]


def _param(
    walker: SchemaWalker, node: Node, py_name: str, wire_name: str, *, required: bool, schema: Any
) -> ParamBinding:
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
        schema=schema,
        text=text,
    )
