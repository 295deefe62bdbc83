"""Tool specs as plain data: one normal form for every shape a server sends, an identity, and a merge.

ORS servers send ``{"name", "description", "input_schema"}``; MCP says ``inputSchema``, OpenAI ``parameters``;
the SDK hands out ``ToolSpec`` objects. :func:`normalize_spec` turns all of them into one dict,
:func:`schema_hash` gives a JSON value an identity that ignores key order, and :func:`merge_tool_specs` makes
the tool lists of several probes (e.g. ``/task_tools`` of several tasks) one surface, by name.

Example:
    >>> normalize_spec({"name": "ls", "parameters": {"type": "object"}})
    {'name': 'ls', 'description': '', 'input_schema': {'type': 'object'}}
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ormix._errors import UsageError
from ormix._hashing import canonical_json
from ormix.tools._names import short_hash
from ormix.tools._schema import required_names
from ormix.tools._text import snippet

_HASH_LEN = 16


class ToolSpecError(UsageError):
    """A tool spec cannot be bound at all (it has no usable name). ``bind_tools`` skips such specs."""


def exact_json(obj: Any) -> tuple[str, bool]:
    """`ormix._hashing.canonical_json` of a server's schema, and whether it is exact; never raises.

    Exact means pure JSON data: nothing (a set, NaN, a cycle) had to be replaced by its ``repr``.

    Example:
        >>> exact_json({"b": 1, "a": [True, None]})
        ('{"a":[true,null],"b":1}', True)
        >>> exact_json({"x": {1, 2}})[1]
        False
    """
    inexact: list[bool] = []

    def fallback(value: Any) -> str:
        inexact.append(True)
        return repr(value)

    try:
        text = canonical_json(obj, default=fallback)
        return text, not inexact
    except (TypeError, ValueError, RecursionError):
        try:
            return repr(obj), False
        except RecursionError:  # pathological self-nesting; still deterministic for this process
            return f"<unrepresentable {type(obj).__name__}>", False


def schema_hash(obj: Any) -> str:
    """A 16-hex-digit identity of a JSON value (canonical JSON, sorted keys), for comparing tool specs.

    Example:
        >>> schema_hash({"a": 1, "b": 2}) == schema_hash({"b": 2, "a": 1})
        True
        >>> len(schema_hash([]))
        16
    """
    return short_hash(exact_json(obj)[0], _HASH_LEN)


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
    schema = next(
        (s for key in ("input_schema", "inputSchema", "parameters") if (s := get(key)) is not None), None
    )
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except ValueError:
            pass
    return {
        "name": name,
        "description": "" if description is None else str(description),
        "input_schema": {} if schema is None else schema,
    }


@dataclass(frozen=True)
class ToolConflict:
    """Two or more probes disagreed about one tool; ``resolution`` says which shape was kept.

    ``variants`` are the :func:`~ormix.tools._specs.schema_hash` values of the differing schemas (or
    descriptions).

    Example:
        >>> _, (conflict,) = merge_tool_specs([[{"name": "x", "description": "v1"}], [{"name": "x"}]])
        >>> conflict.name, conflict.kind, conflict.resolution
        ('x', 'description', 'kept the first description')
    """

    name: str
    kind: Literal["schema", "description", "invalid"]
    resolution: str
    variants: tuple[str, ...] = ()


def merge_tool_specs(
    spec_lists: Iterable[Iterable[Any]],
) -> tuple[list[dict[str, Any]], list[ToolConflict]]:
    """Merge tool lists from several probes (e.g. ``/task_tools`` of several tasks) into one list, by name.

    Same name and identical input schema → one spec. Different descriptions → the first is kept (conflict
    ``"description"``). Different schemas → if they are compatible (object schemas whose shared properties and
    ``$defs`` are identical), the union of their properties, where a parameter is required only if every
    variant requires it (conflict ``"schema"``, resolution says "union"); otherwise the first variant in probe
    order is kept (conflict ``"schema"``, resolution names the differing property). Specs without a usable
    name are dropped (conflict ``"invalid"``). Output order: first appearance. Deterministic for a given input
    order.

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
    for s in schemas:
        for name, sub in (s.get("properties") or {}).items():
            if name in props and exact_json(props[name])[0] != exact_json(sub)[0]:
                return None, f"property {name!r} differs between variants"
            props.setdefault(name, sub)
        for key in ("$defs", "definitions"):
            for def_name, sub in (s.get(key) or {}).items() if isinstance(s.get(key), dict) else ():
                bucket = defs.setdefault(key, {})
                if def_name in bucket and exact_json(bucket[def_name])[0] != exact_json(sub)[0]:
                    return None, f"definition {def_name!r} differs between variants"
                bucket.setdefault(def_name, sub)
    union: dict[str, Any] = {
        k: v for k, v in schemas[0].items() if k not in ("properties", "required", "$defs", "definitions")
    }
    union.update(union_of_objects(schemas))
    union.update(defs)
    return union, ""


def union_of_objects(schemas: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One object schema for an input that may take any of these object shapes: every property (the first
    definition of a name wins), required only where every shape requires it.

    Example:
        >>> union_of_objects([{"properties": {"a": {}, "b": {}}, "required": ["a", "b"]},
        ...                   {"properties": {"a": {}, "c": {}}, "required": ["a"]}])
        {'type': 'object', 'properties': {'a': {}, 'b': {}, 'c': {}}, 'required': ['a']}
    """
    props: dict[str, Any] = {}
    for schema in schemas:
        if isinstance(schema.get("properties"), Mapping):
            for name, sub in schema["properties"].items():
                props.setdefault(name, sub)
    required = set.intersection(*(set(required_names(schema)) for schema in schemas))
    union: dict[str, Any] = {"type": "object", "properties": props}
    if any(name in required for name in props):
        union["required"] = [name for name in props if name in required]
    return union
