"""JSON Schema → Python type hints: the part of a tool schema ``get_json_schema`` reads from annotations.

===========================================  ===============================================================
JSON Schema                                  annotation
===========================================  ===============================================================
string / integer / number / boolean / null   ``str`` / ``int`` / ``float`` / ``bool`` / ``NoneType``
``enum`` / ``const`` of JSON scalars         ``Literal[...]`` (a ``null`` member → ``Optional[Literal[...]]``)
                                             (over `LITERAL_LIMIT` values: their types, a sample noted)
array with ``items``                         ``list[T]`` (recursively)
array with ``prefixItems`` (2+ entries)      ``tuple[A, B, ...]`` (one entry → ``list[A]``, noted)
``anyOf``/``oneOf``/``type: [..]``           ``Union[...]``; a ``null`` member or ``nullable`` → ``Optional``
object with ``properties``                   ``dict``; the fields are described in the parameter text
object with only ``additionalProperties: S``  ``dict[str, S]``
``$ref`` / ``$defs`` / ``definitions``       resolved; a cycle degrades to ``dict`` (or ``Any``), noted
no type / unknown type / unresolvable ref    ``Any`` (``get_json_schema`` shows ``{}``: any value), noted
===========================================  ===============================================================

What a hint cannot carry comes back as notes (model-facing text); :mod:`ormix.tools._descriptions` puts it,
and
the shapes, constraints and defaults, into the parameter's description.

Example:
    >>> walker = SchemaWalker({"anyOf": [{"type": "array", "items": {"enum": ["a", "b"]}}, {"type": "null"}]})
    >>> type_hint(walker, walker.node())
    (typing.Optional[list[typing.Literal['a', 'b']]], ())
"""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from ormix.tools._schema import Node, SchemaWalker, is_scalar
from ormix.tools._text import snippet

#: Most allowed values an enum's type lists (``Literal[...]``); more are shown by their type, and a sample in
#: the text.
LITERAL_LIMIT = 64

_PRIMITIVES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "null": type(None),
}


def type_hint(walker: SchemaWalker, node: Node) -> tuple[Any, tuple[str, ...]]:
    """The typing object for ``node`` and the notes on what it could not carry (deduplicated, in order).

    Example:
        >>> walker = SchemaWalker({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]})
        >>> type_hint(walker, walker.node())
        (tuple[int, str], ())
        >>> type_hint(walker, walker.node({"type": "file"}))
        (typing.Any, ('type "file" is not understood; shown as any value',))
    """
    notes: list[str] = []
    annotation = _hint(walker, node, notes)
    return annotation, tuple(dict.fromkeys(notes))


def _hint(walker: SchemaWalker, node: Node, notes: list[str]) -> Any:
    notes.extend(node.issues)
    if node.kind == "cycle":
        schema = node.schema
        is_object = any(k in schema for k in ("properties", "additionalProperties"))
        shown, name = (dict, "dict") if is_object or schema.get("type") == "object" else (Any, "Any")
        notes.append(f"recursive structure at {snippet(node.ref, 80)} is shown as {name}")
        return shown
    values = node.values
    if values is not None:
        if all(is_scalar(v) for v in values) and len(values) > LITERAL_LIMIT:
            # Every value would go into the tool's schema in every prompt (a hostile schema's 100,000 cost
            # 0.7 MB): the type carries their kinds, the text a bounded sample.
            notes.append(f"one of {len(values)} allowed values: {snippet(list(values), 400)}")
            return _optional(_kinds_of(values), node.nullable)
        if all(is_scalar(v) for v in values):
            return _optional(_literal(values), node.nullable)
        if "const" in node.schema:
            notes.append(f"constant {snippet(values[0], 80)} is not a JSON scalar; shown by its type")
        else:
            notes.append("allowed values are not all JSON scalars; they are listed in the text")
        if node.kind == "any":
            return _optional(_kinds_of(values), node.nullable)
    return _optional(_structure(walker, node, notes), node.nullable)


def _structure(walker: SchemaWalker, node: Node, notes: list[str]) -> Any:
    kind = node.kind
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    if kind == "union":
        return _union([_hint(walker, m, notes) for m in node.members])
    if kind == "array":
        prefix = walker.prefix_items(node)
        rest = walker.rest_items(node)
        if prefix:
            parts = [_hint(walker, p, notes) for p in prefix]
            if len(parts) == 1:
                notes.append("a one-element tuple is shown as a list of that element")
                return list if parts[0] is Any else list[parts[0]]  # type: ignore[valid-type]
            if rest is not None and node.schema.get("maxItems") != len(parts):
                notes.append(f"only the first {len(parts)} items have fixed types; more are allowed")
            return tuple[tuple(parts)]  # type: ignore[misc]
        inner = Any if rest is None else _hint(walker, rest, notes)
        return list if inner is Any else list[inner]  # type: ignore[valid-type]
    if kind == "object":
        extra = walker.extra_properties(node)
        if extra is not None and not node.schema.get("properties"):
            inner = _hint(walker, extra, notes)
            return dict if inner is Any else dict[str, inner]  # type: ignore[valid-type]
        return dict
    return Any  # any, never, deep, unknown: the issues say why


def _kinds_of(values: tuple[Any, ...]) -> Any:
    """The union of the Python types of non-scalar enum values (``dict``, ``list`` and scalar types)."""
    kinds = [dict if isinstance(v, dict) else list if isinstance(v, list) else type(v) for v in values]
    known = [k for k in kinds if k in (dict, list, str, int, float, bool)]
    if len(known) != len(kinds) - kinds.count(type(None)):
        return Any
    return _optional(_union(known), type(None) in kinds)


def _union(members: list[Any]) -> Any:
    unique = list(dict.fromkeys(members))
    if not unique or Any in unique:
        return Any
    if len(unique) == 1:
        return unique[0]
    return Union[tuple(unique)]  # noqa: UP007 - built from a runtime list


def _optional(annotation: Any, nullable: bool) -> Any:
    if not nullable or annotation is Any or annotation is type(None):
        return annotation
    return Optional[annotation]  # noqa: UP007, UP045 - built at runtime


def _literal(values: tuple[Any, ...]) -> Any:
    non_null = tuple(v for v in values if v is not None)
    if not non_null:
        return type(None)
    return _optional(Literal[non_null], len(non_null) < len(values))
