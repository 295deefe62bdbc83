"""Tool specs as plain data: one normal form for every shape a server sends, and a stable identity.

ORS servers send ``{"name", "description", "input_schema"}``; MCP says ``inputSchema``, OpenAI ``parameters``; the
SDK hands out ``ToolSpec`` objects. :func:`normalize_spec` turns all of them into one dict, and
:func:`schema_hash` gives a JSON value an identity that ignores key order.

Example:
    >>> normalize_spec({"name": "ls", "parameters": {"type": "object"}})
    {'name': 'ls', 'description': '', 'input_schema': {'type': 'object'}}
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ormix.tools.names import short_hash
from ormix.tools.text import snippet

__all__ = ["ToolSpecError", "canonical_hash", "canonical_json", "normalize_spec", "schema_hash"]

_HASH_LEN = 16


class ToolSpecError(ValueError):
    """A tool spec cannot be bound at all (it has no usable name). ``bind_tools`` skips such specs.

    Example:
        >>> try:
        ...     normalize_spec({"name": ""})
        ... except ToolSpecError as exc:
        ...     print("no usable name" in str(exc))
        True
    """


def canonical_json(obj: Any) -> tuple[str, bool]:
    """Canonical JSON text of ``obj`` (sorted keys, no spaces) and whether it is exact.

    Exact means pure JSON data: nothing had to be replaced by its ``repr``. Never raises.

    Example:
        >>> canonical_json({"b": 1, "a": [True, None]})
        ('{"a":[true,null],"b":1}', True)
        >>> canonical_json({"x": {1, 2}})[1]
        False
    """
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


def canonical_hash(canonical: str) -> str:
    """The 16-hex-digit identity of a text made by :func:`canonical_json` (for a caller that already has it).

    Example:
        >>> canonical_hash(canonical_json({"a": 1})[0]) == schema_hash({"a": 1})
        True
    """
    return short_hash(canonical, _HASH_LEN)


def schema_hash(obj: Any) -> str:
    """A 16-hex-digit identity of a JSON value (canonical JSON, sorted keys), for comparing tool specs.

    Example:
        >>> schema_hash({"a": 1, "b": 2}) == schema_hash({"b": 2, "a": 1})
        True
        >>> len(schema_hash([]))
        16
    """
    return canonical_hash(canonical_json(obj)[0])


def normalize_spec(spec: Any) -> dict[str, Any]:
    """Return ``{"name", "description", "input_schema"}`` from a dict or a ``ToolSpec``-like object.

    Accepts ``input_schema`` (ORS), ``inputSchema`` (MCP) or ``parameters`` (OpenAI) and a JSON string schema.
    Raises :class:`ToolSpecError` if there is no non-empty string name.

    Example:
        >>> normalize_spec({"name": "ls"})["input_schema"]
        {}
        >>> normalize_spec({"name": "ls", "inputSchema": '{"type": "object"}'})["input_schema"]
        {'type': 'object'}
    """
    if isinstance(spec, Mapping):
        get = spec.get
    else:

        def get(key: str, default: Any = None) -> Any:
            return getattr(spec, key, default)

    name = get("name")
    if not isinstance(name, str) or not name:
        raise ToolSpecError(
            f"tool spec has no usable name (got {snippet(name, 60)}); the server's tool list is malformed"
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
