"""Turn ORS tool specs into Python methods TRL can expose to the model, without generating code.

TRL lists an environment's public methods as tools and shows the model ``transformers.utils.get_json_schema(method)``:
the signature, the type hints and the Google-style ``Args:`` docstring. This module builds such methods from an
ORS tool spec (``name``, ``description``, JSON-Schema ``input_schema``) as plain closures whose ``__signature__``,
``__annotations__``, ``__doc__`` and ``__name__`` are set from data. Nothing the server sends is ever executed,
evaluated or compiled: it only becomes names (sanitised), typing objects and docstring text.

Three layers, each usable alone:

- :func:`plan_tool` (pure): spec → :class:`ToolBinding` (method name, parameters with real typing objects,
  docstring, notes on what was renamed, approximated or dropped, a schema hash).
- :func:`make_method`: :class:`ToolBinding` → function. Calling it as a method maps Python parameter names back to
  wire names and returns ``getattr(self, dispatch)(wire_tool_name, wire_arguments)``.
- :func:`bind_tools`: attach one method per spec to a class; returns a :class:`BindingReport` with the
  :class:`~ormix.env.naming.NameMap`.

Schema → type hints (what ``get_json_schema`` then shows):

=============================================  ===============================================================
JSON Schema                                    annotation
=============================================  ===============================================================
string / integer / number / boolean / null     ``str`` / ``int`` / ``float`` / ``bool`` / ``NoneType``
``enum`` / ``const`` of JSON scalars           ``Literal[...]`` (``null`` member → ``Optional[Literal[...]]``)
array with ``items``                           ``list[T]`` (recursively)
array with ``prefixItems`` (2+ entries)        ``tuple[A, B, ...]`` (one entry → ``list[A]``, noted)
``anyOf``/``oneOf``/``type: [..]``             ``Union[...]``; a ``null`` member or ``nullable`` → ``Optional``
object with ``properties``                     ``dict``; the fields are described in the parameter text
object with only ``additionalProperties: S``   ``dict[str, S]``
``$ref`` / ``$defs`` / ``definitions``         resolved; a cycle degrades to ``dict`` (or ``Any``), noted
no type / unknown type / unresolvable ref      ``Any`` (``get_json_schema`` shows ``{}``: any value), noted
=============================================  ===============================================================

Defaults, constraints (``pattern``, ``minimum``, ``maxItems``...), non-scalar enums and nested object fields
cannot be type hints; they go into the parameter's description ("Default: ...", "Constraints: ...",
"Shape: ..."), which ``get_json_schema`` passes to the model.

Optional parameters and "not given": an optional parameter's Python default is a :class:`ServerDefault` marker
(its ``repr`` shows the schema default). An argument the model did not pass is left out of the wire call, so the
server applies its own default; an argument it passed explicitly (even one equal to the default, even ``None``) is
sent. TRL's exec-based binder instead sends ``None`` for every omitted optional parameter, which a server rejects
when the field is not nullable.

Example:
    >>> class Env:
    ...     def _call_tool(self, name, arguments):
    ...         return f"{name} {arguments}"
    >>> spec = {"name": "run-tests", "description": "Run the tests.",
    ...         "input_schema": {"type": "object", "properties": {"from": {"type": "string"}}}}
    >>> report = bind_tools(Env, [spec])
    >>> Env().run_tests(from_="a")
    "run-tests {'from': 'a'}"
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Optional, Union

from ormix.tools.names import DEFAULT_MAX_LEN, NameMap, is_safe_identifier, safe_identifier, validate_prefix

__all__ = [
    "NO_DEFAULT",
    "RESERVED_METHOD_NAMES",
    "BindingConflictError",
    "BindingReport",
    "ParamBinding",
    "RenamedTool",
    "ServerDefault",
    "SkippedTool",
    "ToolBinding",
    "ToolConflict",
    "ToolSpecError",
    "bind_tools",
    "make_method",
    "merge_tool_specs",
    "normalize_spec",
    "plan_tool",
    "schema_hash",
]

#: Method names a tool may never take: TRL treats ``reset`` and ``get_reward`` specially, ``close`` is the
#: environment's own cleanup. Anything already defined on the target class is reserved as well.
RESERVED_METHOD_NAMES: frozenset[str] = frozenset({"reset", "close", "get_reward"})

_MAX_DEPTH = 24  # nesting levels translated into type hints; deeper parts become Any (never a RecursionError)
_SUMMARY_DEPTH = 6  # nesting levels spelled out in a parameter's "Shape:" text
_SUMMARY_LIMIT = 1500  # characters of "Shape:" text per parameter
_SNIPPET_LIMIT = 200  # characters of one JSON value (default, enum, extra keyword) in a description
_PARAM_SUFFIXES = ("Returns", "Raises")  # a param line "xReturns: ..." would end the docstring's Args block
_SECTION_RE = re.compile(r"(Args|Returns|Raises):")
_CHOICES_RE = re.compile(
    r"\(choices:\s*(.*?)\)\s*$", re.IGNORECASE
)  # get_json_schema json-parses this suffix
_JSON_SCALARS = (str, int, float, bool, type(None))
_PRIMITIVES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "null": type(None),
}
_CONSTRAINT_KEYS = (
    "format",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "contentMediaType",
    "contentEncoding",
)
_UNCARRIED_KEYS = (
    "not",
    "if",
    "then",
    "else",
    "patternProperties",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "propertyNames",
    "contains",
    "unevaluatedProperties",
    "unevaluatedItems",
)
_TYPE_HINT_KEYS = frozenset(
    {"type", "$ref", "enum", "const", "anyOf", "oneOf", "allOf", "properties", "items", "prefixItems"}
)


# ── errors ────────────────────────────────────────────────────────────────────────────────────────


class ToolSpecError(ValueError):
    """A tool spec cannot be bound at all (e.g. it has no usable name). :func:`bind_tools` skips such specs."""


class BindingConflictError(ValueError):
    """Two tools (or a tool and an existing attribute) need the same method name and the caller asked for an error.

    Raised by :func:`bind_tools` with ``on_conflict="raise"`` and by :func:`plan_tool` when an explicit
    ``method_name`` is unusable. Resolve it by choosing a prefix, renaming, or allowing ``on_conflict="rename"``.
    """


# ── data ──────────────────────────────────────────────────────────────────────────────────────────


class _NoDefault:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_DEFAULT"

    def __reduce__(self) -> str:
        return "NO_DEFAULT"


#: :attr:`ParamBinding.default` when the schema gives no default.
NO_DEFAULT: Any = _NoDefault()


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
        return _snippet(self.value, 80, python=True) if self.has_value else "<server default>"


@dataclass(frozen=True)
class ParamBinding:
    """One tool parameter: its Python and wire names, type hint, whether required, schema default and description.

    ``default`` is the schema's default or :data:`NO_DEFAULT`. ``description`` is the single-line text the model
    sees (description or title, plus default, constraints and shape). ``notes`` says what was approximated.
    """

    py_name: str
    wire_name: str
    annotation: Any
    required: bool
    default: Any = NO_DEFAULT
    description: str = ""
    notes: tuple[str, ...] = ()
    schema: Any = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class ToolBinding:
    """Everything needed to build one tool method, computed by :func:`plan_tool` without side effects.

    ``raw_input`` is true for a non-object input schema (e.g. ``{"type": "string"}``): the method then takes one
    parameter and passes its value itself (not a dict) to the dispatch method.
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
        """True when the method name differs from the wire name (a prefix counts)."""
        return self.method_name != self.wire_name


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
class ToolConflict:
    """Two or more probes disagreed about one tool; ``resolution`` says which shape was kept."""

    name: str
    kind: Literal["schema", "description", "invalid"]
    resolution: str
    variants: tuple[str, ...] = ()


@dataclass(frozen=True)
class BindingReport:
    """What :func:`bind_tools` did: the name map, the bindings, and every rename, skip and removal with reasons."""

    names: NameMap
    bindings: tuple[ToolBinding, ...]
    renamed: tuple[RenamedTool, ...] = ()
    skipped: tuple[SkippedTool, ...] = ()
    removed: tuple[str, ...] = ()
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

    def summary(self) -> str:
        """A few human-readable lines for logs and ``ormix inspect``."""
        lines = [f"bound {len(self.bindings)} tool(s)"]
        lines += [f"  renamed {r.wire_name!r} -> {r.method_name} ({r.reason})" for r in self.renamed]
        lines += [f"  skipped #{s.index} {s.name!r}: {s.reason}" for s in self.skipped]
        lines += [f"  removed stale method {name}" for name in self.removed]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


# ── small helpers ─────────────────────────────────────────────────────────────────────────────────


def _canonical_exact(obj: Any) -> tuple[str, bool]:
    """Canonical JSON text of ``obj`` and whether it is exact (pure JSON data, nothing replaced by ``repr``)."""
    inexact: list[bool] = []

    def fallback(value: Any) -> str:
        inexact.append(True)
        return repr(value)

    try:
        text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=fallback)
        return text, not inexact
    except (TypeError, ValueError, RecursionError):
        try:
            return repr(obj), False
        except RecursionError:  # pathological self-nesting; still deterministic for this process
            return f"<unrepresentable {type(obj).__name__}>", False


def _canonical(obj: Any) -> str:
    return _canonical_exact(obj)[0]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def schema_hash(obj: Any) -> str:
    """A 16-hex-digit identity of a JSON value (canonical JSON, sorted keys), for comparing tool specs.

    Example:
        >>> schema_hash({"a": 1, "b": 2}) == schema_hash({"b": 2, "a": 1})
        True
    """
    return _digest(_canonical(obj))


def _snippet(value: Any, limit: int = _SNIPPET_LIMIT, *, python: bool = False) -> str:
    try:
        text = repr(value) if python else json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _one_line(text: Any) -> str:
    # Every unicode line break collapses: inspect.getdoc would turn \u2028 etc. into real newlines, and a new
    # line that looks like "name:" would be parsed as another argument.
    return " ".join(str(text).split())


def _neutralize(text: str) -> str:
    # "Args:" / "Returns:" / "Raises:" anywhere in the text would cut get_json_schema's sections short
    return _SECTION_RE.sub(r"\1 :", text)


def _clean_param_text(text: str) -> str:
    text = _neutralize(_one_line(text))
    if _CHOICES_RE.search(text):
        # get_json_schema json-parses a trailing "(choices: ...)"; server text must not trigger (or crash) that
        text += "."
    return text


def _clean_block(text: Any) -> str:
    # cleandoc: SDK descriptions are docstrings with their source indentation; lines are normalised to "\n"
    lines = [line.rstrip() for line in inspect.cleandoc(str(text)).splitlines()]
    return _neutralize("\n".join(lines).strip())


def _is_scalar(value: Any) -> bool:
    return type(value) in _JSON_SCALARS


def _union(members: list[Any]) -> Any:
    unique: list[Any] = []
    for m in members:
        if m not in unique:
            unique.append(m)
    if not unique or Any in unique:
        return Any
    if len(unique) == 1:
        return unique[0]
    return Union[tuple(unique)]  # noqa: UP007 - built from a runtime list


def _optional(annotation: Any) -> Any:
    if annotation is Any or annotation is type(None):
        return annotation
    return Optional[annotation]  # noqa: UP007, UP045 - built at runtime


def _literal(values: list[Any]) -> Any:
    non_null = [v for v in values if v is not None]
    if not non_null:
        return type(None)
    lit = Literal[tuple(non_null)]
    return _optional(lit) if len(non_null) < len(values) else lit


def _type_name(annotation: Any) -> str:
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


def _looks_object(schema: Any) -> bool:
    return isinstance(schema, dict) and (
        schema.get("type") == "object" or "properties" in schema or "additionalProperties" in schema
    )


def _unescape_pointer(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


class _Resolver:
    """Resolves local ``$ref`` JSON pointers (``#``, ``#/$defs/X``, ``#/definitions/X``, any ``#/a/b/0``)."""

    def __init__(self, root: Any) -> None:
        self.root = root

    def resolve(self, ref: Any) -> Any:
        if not isinstance(ref, str) or not ref.startswith("#"):
            return None
        node: Any = self.root
        pointer = ref[1:]
        if pointer in ("", "/"):
            return node if isinstance(node, dict) else None
        for raw in pointer.lstrip("/").split("/"):
            token = _unescape_pointer(raw)
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                return None
        return node if isinstance(node, (dict, bool)) else None

    def deref(self, schema: Any, limit: int = 8) -> Any:
        """Follow a chain of top-level ``$ref``s (siblings override), stopping at cycles or ``limit``."""
        seen: set[str] = set()
        while isinstance(schema, dict) and "$ref" in schema and limit > 0:
            ref = schema["$ref"]
            key = ref if isinstance(ref, str) else repr(ref)
            if key in seen:
                break
            seen.add(key)
            target = self.resolve(ref)
            if not isinstance(target, dict):
                break
            siblings = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**target, **siblings}
            if "$ref" not in target:
                schema.pop("$ref", None)
            limit -= 1
        return schema


def _merge_all_of(schema: dict[str, Any], parts: list[Any], resolver: _Resolver) -> dict[str, Any] | None:
    """Shallow-merge ``allOf`` members into one schema (properties and required unioned); None if not dicts."""
    merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
    props: dict[str, Any] = (
        dict(merged.get("properties") or {}) if isinstance(merged.get("properties"), dict) else {}
    )
    required: list[Any] = (
        list(merged.get("required") or []) if isinstance(merged.get("required"), list) else []
    )
    for part in parts:
        part = resolver.deref(part)
        if not isinstance(part, dict):
            return None
        for key, value in part.items():
            if key == "properties" and isinstance(value, dict):
                for name, sub in value.items():
                    props.setdefault(name, sub)
            elif key == "required" and isinstance(value, list):
                required += [r for r in value if r not in required]
            else:
                merged.setdefault(key, value)
    if props:
        merged["properties"] = props
    if required:
        merged["required"] = required
    return merged


# ── schema → type hint ────────────────────────────────────────────────────────────────────────────


class _Translator:
    """Turns one property schema into a typing object, recording what it could not carry (model-facing text)."""

    def __init__(self, resolver: _Resolver) -> None:
        self.resolver = resolver
        self.notes: list[str] = []

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def annotation(self, schema: Any, depth: int = 0, refs: tuple[str, ...] = ()) -> Any:
        if depth > _MAX_DEPTH:
            self.note(f"parts nested deeper than {_MAX_DEPTH} levels are shown as any value")
            return Any
        if schema is True or schema is None:
            return Any
        if schema is False:
            self.note("the schema accepts no value (`false`)")
            return Any
        if not isinstance(schema, dict):
            self.note(f"a sub-schema is not an object ({type(schema).__name__}); shown as any value")
            return Any

        if "$ref" in schema:
            ref = schema["$ref"]
            key = ref if isinstance(ref, str) else repr(ref)
            target = self.resolver.resolve(ref)
            siblings = {k: v for k, v in schema.items() if k != "$ref"}
            if target is None:
                self.note(f"reference {_snippet(ref, 80)} cannot be resolved; shown as any value")
                return (
                    self.annotation(siblings, depth + 1, refs) if siblings.keys() & _TYPE_HINT_KEYS else Any
                )
            if key in refs:
                shown = dict if _looks_object(target) else Any
                self.note(f"recursive structure at {_snippet(ref, 80)} is shown as {_type_name(shown)}")
                return shown
            merged = {**target, **siblings} if isinstance(target, dict) else siblings
            if isinstance(target, dict) and "$ref" not in target:
                merged.pop("$ref", None)
            return self.annotation(merged, depth + 1, (*refs, key))

        all_of = schema.get("allOf")
        if isinstance(all_of, list) and all_of:
            merged_all = _merge_all_of(schema, all_of, self.resolver)
            if merged_all is None:
                self.note("an `allOf` with non-object members is shown by its first member")
                return self.annotation(all_of[0], depth + 1, refs)
            if len(all_of) > 1:
                self.note("`allOf` members are merged into one shape")
            return self.annotation(merged_all, depth + 1, refs)

        if "const" in schema:
            value = schema["const"]
            if _is_scalar(value):
                return _literal([value])
            self.note(f"constant {_snippet(value, 80)} is not a JSON scalar; shown by its type")

        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            if all(_is_scalar(v) for v in enum):
                return _literal(enum)
            self.note("allowed values are not all JSON scalars; they are listed in the text")
            if "type" not in schema and not any(k in schema for k in ("anyOf", "oneOf")):
                kinds = [
                    dict if isinstance(v, dict) else list if isinstance(v, list) else type(v) for v in enum
                ]
                known = [k for k in kinds if k in (dict, list, *_JSON_SCALARS) and k is not type(None)]
                result_kinds = _union(known) if len(known) == len(kinds) - kinds.count(type(None)) else Any
                return _optional(result_kinds) if type(None) in kinds else result_kinds

        nullable = schema.get("nullable") is True
        declared = schema.get("type")
        result: Any
        alternatives = None
        for key in ("anyOf", "oneOf"):
            value = schema.get(key)
            if isinstance(value, list) and value:
                alternatives = (key, value)
                break
        if alternatives is not None and (declared is None or self._typed_members(alternatives[1])):
            key, members = alternatives
            if key == "oneOf" and len(members) > 1:
                self.note("`oneOf` (exactly one) is shown as `anyOf` (at least one)")
            result, has_null = self._members(members, depth, refs)
            nullable = nullable or has_null
        elif isinstance(declared, list):
            names = [t for t in declared if isinstance(t, str)]
            nullable = nullable or "null" in names
            others = [t for t in dict.fromkeys(names) if t != "null"]
            if not others:
                result = type(None) if names else Any
            else:
                result = _union([self._typed(t, schema, depth, refs) for t in others])
        elif isinstance(declared, str):
            result = self._typed(declared, schema, depth, refs)
        elif declared is None:
            result = self._untyped(schema, depth, refs)
        else:
            self.note(f"type {_snippet(declared, 60)} is not understood; shown as any value")
            result = Any
        return _optional(result) if nullable else result

    @staticmethod
    def _typed_members(members: list[Any]) -> bool:
        return any(isinstance(m, dict) and m.keys() & _TYPE_HINT_KEYS for m in members)

    def _members(self, members: list[Any], depth: int, refs: tuple[str, ...]) -> tuple[Any, bool]:
        has_null = False
        options: list[Any] = []
        for member in members:
            resolved = self.resolver.deref(member)
            if isinstance(resolved, dict) and (
                resolved.get("type") == "null" or ("const" in resolved and resolved["const"] is None)
            ):
                has_null = True
                continue
            option = self.annotation(member, depth + 1, refs)
            if option is type(None):
                has_null = True
                continue
            options.append(option)
        if not options:
            return (type(None) if has_null else Any), False
        return _union(options), has_null

    def _typed(self, name: str, schema: dict[str, Any], depth: int, refs: tuple[str, ...]) -> Any:
        if name in _PRIMITIVES:
            return _PRIMITIVES[name]
        if name == "array":
            return self._array(schema, depth, refs)
        if name == "object":
            return self._object(schema, depth, refs)
        self.note(f"type {_snippet(name, 60)} is not a JSON Schema type; shown as any value")
        return Any

    def _array(self, schema: dict[str, Any], depth: int, refs: tuple[str, ...]) -> Any:
        prefix = schema.get("prefixItems")
        if not isinstance(prefix, list) and isinstance(schema.get("items"), list):
            prefix = schema["items"]  # draft-04..2019 tuple form
        if isinstance(prefix, list) and prefix:
            parts = [self.annotation(p, depth + 1, refs) for p in prefix]
            if len(parts) == 1:
                self.note("a one-element tuple is shown as a list of that element")
                return list[parts[0]]
            extra = (
                schema.get("items")
                if isinstance(schema.get("prefixItems"), list)
                else schema.get("additionalItems")
            )
            if extra not in (False, None) and schema.get("maxItems") != len(parts):
                self.note(f"only the first {len(parts)} items have fixed types; more are allowed")
            return tuple[tuple(parts)]
        items = schema.get("items")
        if isinstance(items, dict) and items:
            inner = self.annotation(items, depth + 1, refs)
            return list if inner is Any else list[inner]
        return list

    def _object(self, schema: dict[str, Any], depth: int, refs: tuple[str, ...]) -> Any:
        extra = schema.get("additionalProperties")
        if not schema.get("properties") and isinstance(extra, dict) and extra:
            inner = self.annotation(extra, depth + 1, refs)
            return dict if inner is Any else dict[str, inner]
        return dict

    def _untyped(self, schema: dict[str, Any], depth: int, refs: tuple[str, ...]) -> Any:
        if "properties" in schema or "additionalProperties" in schema:
            return self._object(schema, depth, refs)
        if "items" in schema or "prefixItems" in schema:
            return self._array(schema, depth, refs)
        if "default" in schema and _is_scalar(schema["default"]) and schema["default"] is not None:
            return type(schema["default"])
        self.note("no type is given; any value is accepted")
        return Any


# ── schema → text ─────────────────────────────────────────────────────────────────────────────────


def _summarize(schema: Any, resolver: _Resolver, depth: int = 0, refs: tuple[str, ...] = ()) -> str:
    """A compact TypeScript-like picture of a schema, for shapes type hints cannot carry."""
    if depth > _SUMMARY_DEPTH:
        return "…"
    if schema is True or schema is None or schema == {}:
        return "any"
    if not isinstance(schema, dict):
        return "nothing" if schema is False else "any"
    if "$ref" in schema:
        ref = schema["$ref"]
        key = ref if isinstance(ref, str) else repr(ref)
        label = key.rsplit("/", 1)[-1] or "root"
        if key in refs:
            return f"{label} (recursive)"
        target = resolver.resolve(ref)
        if not isinstance(target, dict):
            return "any"
        merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        if "$ref" not in target:
            merged.pop("$ref", None)
        return _summarize(merged, resolver, depth + 1, (*refs, key))
    if isinstance(schema.get("allOf"), list) and schema["allOf"]:
        merged_all = _merge_all_of(schema, schema["allOf"], resolver)
        return _summarize(
            merged_all if merged_all is not None else schema["allOf"][0], resolver, depth + 1, refs
        )
    if "const" in schema:
        return _snippet(schema["const"], 80)
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return " | ".join(_snippet(v, 80) for v in schema["enum"][:50]) + (
            " | …" if len(schema["enum"]) > 50 else ""
        )
    for key in ("anyOf", "oneOf"):
        members = schema.get(key)
        if isinstance(members, list) and members:
            parts = list(dict.fromkeys(_summarize(m, resolver, depth + 1, refs) for m in members))
            return " | ".join(parts)
    declared = schema.get("type")
    if isinstance(declared, list):
        parts = [
            _summarize({**schema, "type": t}, resolver, depth + 1, refs)
            for t in declared
            if isinstance(t, str)
        ]
        return " | ".join(dict.fromkeys(parts)) or "any"
    if declared is None:
        if "properties" in schema or "additionalProperties" in schema:
            declared = "object"
        elif "items" in schema or "prefixItems" in schema:
            declared = "array"
    if declared == "array":
        prefix = schema.get("prefixItems")
        if not isinstance(prefix, list) and isinstance(schema.get("items"), list):
            prefix = schema["items"]
        if isinstance(prefix, list) and prefix:
            return "[" + ", ".join(_summarize(p, resolver, depth + 1, refs) for p in prefix) + "]"
        items = schema.get("items")
        return (
            f"list of {_summarize(items, resolver, depth + 1, refs)}" if isinstance(items, dict) else "list"
        )
    if declared == "object":
        props = schema.get("properties")
        if isinstance(props, dict) and props:
            required = schema.get("required") if isinstance(schema.get("required"), list) else []
            fields = []
            for name, sub in props.items():
                text = (
                    f"{name}{'' if name in required else '?'}: {_summarize(sub, resolver, depth + 1, refs)}"
                )
                sub_d = resolver.deref(sub)
                if isinstance(sub_d, dict):
                    if "default" in sub_d:
                        text += f" (default {_snippet(sub_d['default'], 60)})"
                    about = sub_d.get("description")
                    if isinstance(about, str) and about.strip():
                        about = _one_line(about)
                        text += f" — {about if len(about) <= 120 else about[:119] + '…'}"
                fields.append(text)
            return "{" + "; ".join(fields) + "}"
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            return f"object of {_summarize(extra, resolver, depth + 1, refs)}"
        return "object"
    if isinstance(declared, str):
        constraints = _constraints(schema)
        return declared + (f" ({constraints})" if constraints else "")
    return "any"


def _constraints(schema: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_snippet(schema[k], 80)}" for k in _CONSTRAINT_KEYS if k in schema)


def _needs_shape(
    schema: Any, resolver: _Resolver, depth: int = 0, refs: tuple[str, ...] = (), nested: bool = False
) -> bool:
    """True when the schema holds structure the type hint cannot show (object fields, nested constraints).

    ``nested`` is set below array items / object values: constraints there are not in the "Constraints:" text.
    """
    if depth > _SUMMARY_DEPTH or not isinstance(schema, dict):
        return False
    if "$ref" in schema:
        key = schema["$ref"] if isinstance(schema["$ref"], str) else repr(schema["$ref"])
        if key in refs:
            return True
        if not isinstance(resolver.resolve(schema["$ref"]), dict):
            return False  # unresolvable: the note says so, a "Shape: any" would add nothing
        return _needs_shape(resolver.deref(schema, limit=1), resolver, depth + 1, (*refs, key), nested)
    if isinstance(schema.get("properties"), dict) and schema["properties"]:
        return True
    if nested and (_constraints(schema) or any(k in schema for k in _UNCARRIED_KEYS)):
        return True
    if nested and isinstance(schema.get("enum"), list) and not all(_is_scalar(v) for v in schema["enum"]):
        return True  # at the top level the "One of:" text lists them
    alternatives = [
        m for k in ("anyOf", "oneOf", "allOf") if isinstance(schema.get(k), list) for m in schema[k]
    ]
    inner: list[Any] = list(schema["prefixItems"]) if isinstance(schema.get("prefixItems"), list) else []
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            inner.append(schema[key])
        elif isinstance(schema.get(key), list):
            inner += schema[key]
    return any(_needs_shape(c, resolver, depth + 1, refs, nested) for c in alternatives) or any(
        _needs_shape(c, resolver, depth + 1, refs, True) for c in inner
    )


def _param_text(wire_name: str, schema: Any, resolver: _Resolver, notes: list[str], annotation: Any) -> str:
    top = resolver.deref(schema)
    top = top if isinstance(top, dict) else {}
    base = top.get("description")
    if not (isinstance(base, str) and base.strip()):
        base = top.get("title")
    if not (isinstance(base, str) and base.strip()):
        base = f"The {wire_name} value."
    parts = [_one_line(base)]
    first = len(parts)
    if _needs_shape(schema, resolver):
        shape = _summarize(schema, resolver)
        if len(shape) > _SUMMARY_LIMIT:
            shape = shape[: _SUMMARY_LIMIT - 1] + "…"
            notes.append("the shape description is truncated")
        parts.append(f"Shape: {shape}.")
    enum = top.get("enum")
    if isinstance(enum, list) and enum and not all(_is_scalar(v) for v in enum):
        parts.append(f"One of: {_snippet(enum, 400)}.")
    constraint_sources = [top] + [
        m for k in ("anyOf", "oneOf") if isinstance(top.get(k), list) for m in top[k] if isinstance(m, dict)
    ]
    constraints = [c for c in (_constraints(s) for s in constraint_sources) if c]
    if constraints:
        parts.append(f"Constraints: {'; '.join(dict.fromkeys(constraints))}.")
    uncarried = {k: top[k] for k in _UNCARRIED_KEYS if k in top}
    if uncarried:
        parts.append(f"Also: {_snippet(uncarried, 300)}.")
        notes.append(f"schema keywords {sorted(uncarried)} are described in text only")
    if "default" in top:
        parts.append(f"Default: {_snippet(top['default'])}.")
    if notes:
        parts.append("Note: " + "; ".join(notes) + ".")
    if len(parts) > first and parts[0] and parts[0][-1] not in ".!?:;":
        parts[0] += "."  # the added sentences must not run into the server's text
    return _clean_param_text(" ".join(parts))


# ── planning ──────────────────────────────────────────────────────────────────────────────────────


def normalize_spec(spec: Any) -> dict[str, Any]:
    """Return ``{"name", "description", "input_schema"}`` from a dict or a ``ToolSpec``-like object.

    Accepts ``input_schema`` (ORS), ``inputSchema`` (MCP) or ``parameters`` (OpenAI) and a JSON string schema.
    Raises :class:`ToolSpecError` if there is no non-empty string name.

    Example:
        >>> normalize_spec({"name": "ls"})["input_schema"]
        {}
    """
    if isinstance(spec, Mapping):
        get = spec.get
    else:

        def get(key: str, default: Any = None) -> Any:
            return getattr(spec, key, default)

    name = get("name")
    if not isinstance(name, str) or not name:
        raise ToolSpecError(
            f"tool spec has no usable name (got {_snippet(name, 60)}); the server's tool list is malformed"
        )
    description = get("description")
    schema = get("input_schema")
    if schema is None:
        schema = get("inputSchema")
    if schema is None:
        schema = get("parameters")
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except ValueError:
            pass
    return {
        "name": name,
        "description": description
        if isinstance(description, str)
        else ("" if description is None else str(description)),
        "input_schema": {} if schema is None else schema,
    }


def _object_view(
    schema: Any, resolver: _Resolver, tool_notes: list[str], model_notes: list[str]
) -> dict | None:
    """The schema as an object with properties, or None for a non-object input (bound as one raw parameter)."""
    if schema is None or schema is True or schema == {}:
        return {}
    schema = resolver.deref(schema)
    if not isinstance(schema, dict):
        tool_notes.append(
            f"input schema is not a JSON object ({type(schema).__name__}); bound without parameters"
        )
        return {}
    if isinstance(schema.get("allOf"), list) and schema["allOf"]:
        merged = _merge_all_of(schema, schema["allOf"], resolver)
        if merged is not None:
            schema = merged
    props = schema.get("properties")
    if props is not None and not isinstance(props, dict):
        tool_notes.append(f"input schema `properties` is a {type(props).__name__}, not an object; ignored")
        schema = {k: v for k, v in schema.items() if k != "properties"}
    if not schema.get("properties"):
        for key in ("anyOf", "oneOf"):
            members = schema.get(key)
            if isinstance(members, list) and members:
                shapes = [resolver.deref(m) for m in members]
                objects = [s for s in shapes if isinstance(s, dict) and isinstance(s.get("properties"), dict)]
                if objects:
                    merged_props: dict[str, Any] = {}
                    for s in objects:
                        for name, sub in s["properties"].items():
                            merged_props.setdefault(name, sub)
                    required_sets = [
                        set(s.get("required") or []) for s in objects if isinstance(s.get("required"), list)
                    ]
                    common = set.intersection(*required_sets) if len(required_sets) == len(objects) else set()
                    text = (
                        "the input may take one of several shapes; their fields are merged and only fields "
                        "every shape requires are required"
                    )
                    tool_notes.append(text)
                    model_notes.append(text)
                    return {
                        "type": "object",
                        "properties": merged_props,
                        "required": [n for n in merged_props if n in common],
                    }
    declared = schema.get("type")
    kinds = declared if isinstance(declared, list) else [declared]
    if "object" in kinds or declared is None or schema.get("properties"):
        return schema
    return None


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
        Raises :class:`ToolSpecError` only for a spec without a usable name.

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
    model_notes: list[str] = []

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
    canonical, exact = _canonical_exact(raw_schema)
    input_hash = _digest(canonical)
    shape = _SHAPE_CACHE.get(canonical) if exact else None
    if shape is None:
        shape = _plan_shape(raw_schema)
        if exact:
            if len(_SHAPE_CACHE) >= _SHAPE_CACHE_MAX:
                _SHAPE_CACHE.clear()
            _SHAPE_CACHE[canonical] = shape
    params, schema_notes, shape_model_notes, raw_input = shape
    tool_notes += [n.replace(_TOOL, wire_name) for n in schema_notes]
    model_notes += shape_model_notes

    description = _clean_block(norm["description"]) or f"Call the {py_name} tool."
    doc = description
    if model_notes:
        doc += "\n\n" + "\n".join(_clean_param_text(f"Note: {n}.") for n in model_notes)
    if params:
        doc += "\n\nArgs:\n" + "\n".join(f"    {p.py_name}: {p.description}" for p in params)
    return ToolBinding(
        method_name=py_name,
        wire_name=wire_name,
        description=description,
        params=params,
        docstring=doc,
        notes=tuple(tool_notes),
        schema_hash=input_hash,
        spec_hash=schema_hash([wire_name, norm["description"], input_hash]),
        prefix=prefix,
        raw_input=raw_input,
        input_schema=raw_schema,
    )


# Many tools (and every task's copy of a shared tool) have the same input schema: plan each schema once.
_SHAPE_CACHE: dict[str, tuple[tuple[ParamBinding, ...], tuple[str, ...], tuple[str, ...], bool]] = {}
_SHAPE_CACHE_MAX = 4096
_TOOL = "\x00tool\x00"  # stands for the tool's wire name in cached notes


def _plan_shape(raw_schema: Any) -> tuple[tuple[ParamBinding, ...], tuple[str, ...], tuple[str, ...], bool]:
    """The schema-dependent part of a plan: parameters, notes (with a tool placeholder), model notes, raw flag."""
    tool_notes: list[str] = []
    model_notes: list[str] = []
    resolver = _Resolver(raw_schema)
    obj = _object_view(raw_schema, resolver, tool_notes, model_notes)
    params: list[ParamBinding] = []
    raw_input = obj is None
    if raw_input:
        translator = _Translator(resolver)
        annotation = translator.annotation(raw_schema)
        text = "the input is a single value, not named fields"
        tool_notes.append(f"{text}; bound as one parameter 'input'")
        model_notes.append(f"{text}; pass it as `input`")
        params.append(
            ParamBinding(
                py_name="input",
                wire_name="",
                annotation=annotation,
                required=True,
                description=_param_text("input", raw_schema, resolver, list(translator.notes), annotation),
                notes=tuple(translator.notes),
                schema=raw_schema,
            )
        )
    else:
        params = _plan_params(_TOOL, obj or {}, resolver, tool_notes)
        extra = (obj or {}).get("additionalProperties")
        if extra is True or (isinstance(extra, dict) and extra):
            tool_notes.append("the input accepts extra keys that are not exposed as parameters")
    return tuple(params), tuple(tool_notes), tuple(model_notes), raw_input


def _plan_params(
    tool: str, schema: dict[str, Any], resolver: _Resolver, tool_notes: list[str]
) -> list[ParamBinding]:
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
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
            tool_notes.append(f"property key {_snippet(name, 40)} is not a string; dropped")
            continue
        entries.append((name, sub))
    for name in required:
        if name not in props:
            entries.append((name, {}))
            tool_notes.append(
                f"{tool}: parameter {name!r} is required but has no schema; any value is accepted"
            )

    taken: set[str] = {"self"}
    planned: list[ParamBinding] = []
    for name, sub in entries:
        py = safe_identifier(name, taken, fallback="arg", avoid_suffixes=_PARAM_SUFFIXES)
        taken.add(py)
        if py != name:
            tool_notes.append(f"{tool}: parameter {name!r} is exposed as {py!r}")
        translator = _Translator(resolver)
        annotation = translator.annotation(sub)
        top = resolver.deref(sub)
        default = top["default"] if isinstance(top, dict) and "default" in top else NO_DEFAULT
        param_notes = list(translator.notes)
        description = _param_text(name, sub, resolver, param_notes, annotation)
        tool_notes += [f"{tool}.{name}: {n}" for n in param_notes]
        planned.append(
            ParamBinding(
                py_name=py,
                wire_name=name,
                annotation=annotation,
                required=name in required,
                default=default,
                description=description,
                notes=tuple(param_notes),
                schema=sub,
            )
        )
    # Python needs parameters without defaults first; the order within each group is the schema's
    return [p for p in planned if p.required] + [p for p in planned if not p.required]


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
    method.__signature__ = signature  # type: ignore[attr-defined]
    method.__annotations__ = {**{p.py_name: p.annotation for p in params}, "return": str}
    method.__ormix_binding__ = binding  # type: ignore[attr-defined]
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


# ── merging probes ────────────────────────────────────────────────────────────────────────────────


def merge_tool_specs(
    spec_lists: Iterable[Iterable[Any]],
) -> tuple[list[dict[str, Any]], list[ToolConflict]]:
    """Merge tool lists from several probes (e.g. ``/task_tools`` of several tasks) into one list, by name.

    Same name and identical input schema → one spec. Different descriptions → the first is kept (conflict
    ``"description"``). Different schemas → if they are compatible (object schemas whose shared properties and
    ``$defs`` are identical), the union of their properties, where a parameter is required only if every variant
    requires it (conflict ``"schema"``, resolution says "union"); otherwise the first variant in probe order is
    kept (conflict ``"schema"``, resolution names the differing property). Specs without a usable name are dropped
    (conflict ``"invalid"``). Output order: first appearance. Deterministic for a given input order.

    Example:
        >>> a = {"name": "ls", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}
        >>> b = {"name": "ls", "input_schema": {"type": "object", "properties": {"all": {"type": "boolean"}}}}
        >>> merged, conflicts = merge_tool_specs([[a], [b]])
        >>> sorted(merged[0]["input_schema"]["properties"]), conflicts[0].kind
        (['all', 'path'], 'schema')
    """
    grouped: dict[str, list[dict[str, Any]]] = {}
    conflicts: list[ToolConflict] = []
    for specs in spec_lists or ():
        for spec in specs or ():
            try:
                norm = normalize_spec(spec)
            except Exception as exc:  # noqa: BLE001 - hostile probe data never stops a merge
                conflicts.append(ToolConflict("", "invalid", f"dropped: {exc}"))
                continue
            grouped.setdefault(norm["name"], []).append(norm)

    merged: list[dict[str, Any]] = []
    for name, variants in grouped.items():
        first = variants[0]
        by_schema: dict[str, dict[str, Any]] = {}
        for v in variants:
            by_schema.setdefault(schema_hash(v["input_schema"]), v)
        descriptions = list(dict.fromkeys(v["description"] for v in variants))
        if len(descriptions) > 1:
            conflicts.append(
                ToolConflict(
                    name,
                    "description",
                    "kept the first description",
                    tuple(schema_hash(d) for d in descriptions),
                )
            )
        if len(by_schema) == 1:
            merged.append(dict(first))
            continue
        schemas = [v["input_schema"] for v in by_schema.values()]
        union, why = _union_schemas(schemas)
        hashes = tuple(by_schema)
        if union is not None:
            merged.append({**first, "input_schema": union})
            conflicts.append(
                ToolConflict(name, "schema", f"union of properties of {len(schemas)} variants", hashes)
            )
        else:
            merged.append(dict(first))
            conflicts.append(ToolConflict(name, "schema", f"kept the first variant: {why}", hashes))
    return merged, conflicts


def _union_schemas(schemas: list[Any]) -> tuple[dict[str, Any] | None, str]:
    if not all(isinstance(s, dict) for s in schemas):
        return None, "a variant is not an object schema"
    for s in schemas:
        declared = s.get("type", "object")
        if declared != "object" or (
            s.get("properties") is not None and not isinstance(s.get("properties"), dict)
        ):
            return None, "a variant is not an object schema with properties"
    props: dict[str, Any] = {}
    defs: dict[str, dict[str, Any]] = {}
    required_all: set[str] | None = None
    for s in schemas:
        for name, sub in (s.get("properties") or {}).items():
            if name in props and _canonical(props[name]) != _canonical(sub):
                return None, f"property {name!r} differs between variants"
            props.setdefault(name, sub)
        for key in ("$defs", "definitions"):
            for def_name, sub in (s.get(key) or {}).items() if isinstance(s.get(key), dict) else ():
                bucket = defs.setdefault(key, {})
                if def_name in bucket and _canonical(bucket[def_name]) != _canonical(sub):
                    return None, f"definition {def_name!r} differs between variants"
                bucket.setdefault(def_name, sub)
        req = (
            {r for r in (s.get("required") or []) if isinstance(r, str)}
            if isinstance(s.get("required"), list)
            else set()
        )
        required_all = req if required_all is None else required_all & req
    union: dict[str, Any] = {
        k: v for k, v in schemas[0].items() if k not in ("properties", "required", "$defs", "definitions")
    }
    union["type"] = "object"
    union["properties"] = props
    required = [n for n in props if n in (required_all or set())]
    if required:
        union["required"] = required
    union.update(defs)
    return union, ""
