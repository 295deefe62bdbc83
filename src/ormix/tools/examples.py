"""Example arguments generated from a tool's JSON schema, for ``ormix check`` to call every tool once.

The schema is read with the same walker as type hints and descriptions (:mod:`ormix.tools.schema`): ``$ref``,
``allOf``, ``anyOf``/``oneOf``/``type: [...]`` and nullables mean the same thing everywhere.

Example:
    >>> example_arguments({"type": "object", "required": ["path", "mode"],
    ...                    "properties": {"path": {"type": "string"}, "mode": {"enum": ["r", "w"]},
    ...                                   "depth": {"type": "integer", "default": 2}}})
    {'path': 'test', 'mode': 'r'}

Values are built :data:`EXAMPLE_DEPTH` levels deep; below that (and in recursive parts) they are ``None``:

    >>> EXAMPLE_DEPTH
    12
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

from ormix.tools.schema import Node, SchemaWalker

__all__ = ["EXAMPLE_DEPTH", "example_arguments", "example_value"]

#: Nesting levels an example value is built to; deeper parts are ``None``.
EXAMPLE_DEPTH = 12

_FORMATS = {
    "date-time": "2024-01-01T00:00:00Z",
    "date": "2024-01-01",
    "time": "00:00:00",
    "email": "test@example.com",
    "uri": "https://example.com",
    "url": "https://example.com",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "ipv4": "127.0.0.1",
    "hostname": "localhost",
}


def example_arguments(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """Arguments for a tool whose input is ``schema``: every required field, with a type-appropriate value.

    Optional fields are left out (the tool's defaults apply). Values: the field's ``default``, else ``const``,
    the first ``enum`` value, the first of ``examples``, else a small value of its type within its bounds.

    Example:
        >>> example_arguments({"type": "object", "properties": {"n": {"type": "integer", "minimum": 5}},
        ...                    "required": ["n"]})
        {'n': 5}
        >>> example_arguments(None)
        {}
    """
    if not isinstance(schema, Mapping):
        return {}
    value = example_value(schema)
    return value if isinstance(value, dict) else {}


def example_value(schema: Any, *, root: Mapping[str, Any] | None = None) -> Any:
    """One value that satisfies ``schema`` (JSON Schema as pydantic and the ORS SDK write it).

    ``root`` is the schema ``$ref`` pointers resolve in (default: ``schema`` itself).

    Example:
        >>> example_value({"anyOf": [{"type": "null"}, {"type": "array", "items": {"type": "number"},
        ...                                             "minItems": 2}]})
        [1.0, 1.0]
        >>> example_value({"$ref": "#/$defs/N"}, root={"$defs": {"N": {"type": "integer", "maximum": 0}}})
        0
    """
    walker = SchemaWalker(schema if root is None else root, max_depth=EXAMPLE_DEPTH)
    return _example(walker, walker.node(schema))


def _example(walker: SchemaWalker, node: Node) -> Any:
    schema = node.schema
    if node.kind in ("deep", "never", "cycle", "unknown"):
        return None
    if "default" in schema:
        return copy.deepcopy(schema["default"])
    if node.values is not None:
        return copy.deepcopy(node.values[0])
    if isinstance(schema.get("examples"), list) and schema["examples"]:
        return copy.deepcopy(schema["examples"][0])
    kind = node.kind
    if kind == "union":
        return _example(walker, node.members[0])
    if kind in ("string", "any"):
        return _string(schema)
    if kind in ("integer", "number"):
        return _number(schema, integer=kind == "integer")
    if kind == "boolean":
        return False
    if kind == "array":
        values = [_example(walker, p) for p in walker.prefix_items(node)]
        rest = walker.rest_items(node)
        missing = max(int(schema.get("minItems") or 0) - len(values), 0)
        return values + [_example(walker, rest) if rest is not None else "test" for _ in range(missing)]
    if kind == "object":
        fields = dict(walker.fields(node))
        return {
            name: _example(walker, fields[name]) if name in fields else "test"
            for name in walker.required(node)
        }
    return None  # null


def _string(schema: Mapping[str, Any]) -> str:
    value = _FORMATS.get(str(schema.get("format")), "test")
    lo = int(schema.get("minLength") or 0)
    hi = schema.get("maxLength")
    if len(value) < lo:
        value = value + "t" * (lo - len(value))
    if isinstance(hi, int) and len(value) > hi:
        value = value[:hi]
    return value


def _number(schema: Mapping[str, Any], *, integer: bool) -> int | float:
    lo = schema.get("minimum")
    hi = schema.get("maximum")
    step = 1 if integer else 1e-3
    xlo, xhi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if isinstance(xlo, (int, float)) and not isinstance(xlo, bool):
        lo = xlo + step if lo is None else max(lo, xlo + step)
    if isinstance(xhi, (int, float)) and not isinstance(xhi, bool):
        hi = xhi - step if hi is None else min(hi, xhi - step)
    value: float = 1
    if lo is not None:
        value = max(value, lo)
    if hi is not None:
        value = min(value, hi)
    multiple = schema.get("multipleOf")
    if isinstance(multiple, (int, float)) and multiple > 0:
        value = -(-value // multiple) * multiple
    return int(math.ceil(value)) if integer else float(value)
