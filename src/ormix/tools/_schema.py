"""The one JSON Schema walker behind type hints, descriptions, example arguments and the binder's input view.

A tool's ``input_schema`` is untrusted data in any dialect servers emit (pydantic, hand-written, draft-04 to
2020-12). :class:`SchemaWalker` answers "what is this sub-schema?" once, as a :class:`Node`, for every
consumer:

- local ``$ref`` (``#``, ``#/$defs/X``, ``#/definitions/X``, any JSON pointer) is followed; keywords next to
  the ``$ref`` override the target's. A ``$ref`` back to a schema on the way here is a *cycle*
  (``kind="cycle"``); a ``$ref`` that cannot be resolved leaves its siblings (and an issue saying so);
- ``allOf`` members are merged into one schema (properties and ``required`` unioned);
- ``anyOf`` / ``oneOf`` / ``type: [...]`` become ``kind="union"`` with :attr:`Node.members`; each member
  carries the parent's assertions (``type``, ``properties``, constraints) it does not override. ``null``
  members, a ``null`` in a type list and ``nullable: true`` become :attr:`Node.nullable`;
- ``const`` / ``enum`` are :attr:`Node.values`; a missing ``type`` is inferred from the keywords present;
- depth is bounded: nodes deeper than ``max_depth`` are ``kind="deep"``, so hostile nesting never raises
  ``RecursionError``.

Nothing here raises on bad input: what had to be approximated is in :attr:`Node.issues`, as text a model or a
log can read. Children are built on demand (:meth:`SchemaWalker.child`, :meth:`SchemaWalker.prefix_items`,
:meth:`SchemaWalker.rest_items`, :meth:`SchemaWalker.fields`, :meth:`SchemaWalker.extra_properties`), so a
consumer only pays for what it looks at.

Example:
    >>> walker = SchemaWalker({"$defs": {"N": {"type": ["integer", "null"]}}, "$ref": "#/$defs/N"})
    >>> node = walker.node()
    >>> node.kind, node.nullable, node.label
    ('integer', True, 'N')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ormix.tools._text import snippet

#: The type names of JSON Schema; any other ``type`` is ``kind="unknown"``.
JSON_TYPES = frozenset({"string", "integer", "number", "boolean", "null", "array", "object"})
#: Default nesting limit of a :class:`SchemaWalker`.
MAX_DEPTH = 24

_SCALAR_TYPES = (str, int, float, bool, type(None))
# Keywords a union member does not take over from its parent: the alternatives themselves and annotations
_NOT_INHERITED = frozenset(
    (
        "anyOf oneOf const enum nullable title description default examples $comment $defs definitions $id "
        "$schema"
    ).split()
)
_JSON_TYPE_OF = {bool: "boolean", int: "integer", float: "number", str: "string"}
_NO_TYPE = "no type is given; any value is accepted"


def _unique(issues: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(issues))


def _inherited(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The keywords of a schema its union members take over: its assertions, not alternatives or texts."""
    return {k: v for k, v in schema.items() if k not in _NOT_INHERITED}


def required_names(schema: Mapping[str, Any]) -> list[str]:
    """The required property names of an object schema (strings only; ``[]`` when ``required`` is not a list).

    Example:
        >>> required_names({"required": ["a", 3]}), required_names({"required": "a"})
        (['a'], [])
    """
    required = schema.get("required")
    return [r for r in required if isinstance(r, str)] if isinstance(required, list) else []


def is_scalar(value: Any) -> bool:
    """True for JSON scalars (string, number, boolean, null): the values a ``Literal`` or an enum can hold.

    Example:
        >>> is_scalar("a"), is_scalar(None), is_scalar([1])
        (True, True, False)
    """
    return type(value) in _SCALAR_TYPES


@dataclass(frozen=True)
class Node:
    """One sub-schema as the walker sees it: ``$ref`` followed, ``allOf`` merged, its kind decided.

    ``schema`` is the resolved schema (``{}`` when there is none). ``kind`` is a JSON type name, ``"union"``
    (see ``members``), ``"any"`` (no constraint, or none that is known), ``"never"`` (``false``), ``"cycle"``
    (``schema`` is the recursive target), ``"deep"`` (beyond the depth limit) or ``"unknown"`` (a ``type``
    that is not JSON Schema's). ``values`` are the allowed values of ``const``/``enum`` (``None`` when not
    restricted). ``ref`` is the last ``$ref`` followed to get here and ``refs`` every one on the way (the
    cycle guard).

    Example:
        >>> node = SchemaWalker({"anyOf": [{"type": "string"}, {"type": "null"}]}).node()
        >>> node.kind, [m.kind for m in node.members], node.nullable
        ('union', ['string'], True)
    """

    schema: Mapping[str, Any]
    kind: str
    depth: int = 0
    refs: tuple[str, ...] = ()
    ref: str | None = None
    values: tuple[Any, ...] | None = None
    nullable: bool = False
    members: tuple[Node, ...] = ()
    issues: tuple[str, ...] = ()

    @property
    def label(self) -> str | None:
        """The name of the definition this node came from (``"TodoItem"`` for ``#/$defs/TodoItem``).

        Example:
            >>> SchemaWalker({"$defs": {"A": {}}, "$ref": "#/$defs/A"}).node().label
            'A'
        """
        if self.ref is None:
            return None
        return self.ref.rsplit("/", 1)[-1].replace("~1", "/").replace("~0", "~") or "root"

    @property
    def is_null(self) -> bool:
        """True when only ``null`` is allowed (``type: null``, ``const: null``, ``enum: [null]``)."""
        return self.kind == "null" or (self.values is not None and all(v is None for v in self.values))


class SchemaWalker:
    """Builds :class:`Node` views of the sub-schemas of one root schema (where ``$ref`` pointers resolve).

    Args:
        root: The whole schema (e.g. a tool's ``input_schema`` with its ``$defs``).
        max_depth: Nodes nested deeper than this are ``kind="deep"``.

    Example:
        >>> walker = SchemaWalker({"properties": {"n": {"type": "integer"}}, "required": ["n"]})
        >>> top = walker.node()
        >>> [(name, child.kind) for name, child in walker.fields(top)], walker.required(top)
        ([('n', 'integer')], ['n'])
    """

    def __init__(self, root: Any, *, max_depth: int = MAX_DEPTH) -> None:
        self.root = root
        self.max_depth = max_depth

    # ── resolution ───────────────────────────────────────────────────────────────────────────────

    def resolve(self, ref: Any) -> Any:
        """The schema a local JSON pointer (``#``, ``#/$defs/X``, ``#/a/b/0``) names, or None if none.

        Example:
            >>> SchemaWalker({"$defs": {"a/b": {"type": "string"}}}).resolve("#/$defs/a~1b")
            {'type': 'string'}
        """
        if not isinstance(ref, str) or not ref.startswith("#"):
            return None
        node: Any = self.root
        pointer = ref[1:]
        if pointer in ("", "/"):
            return node if isinstance(node, Mapping) else None
        for raw in pointer.lstrip("/").split("/"):
            token = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                return None
        return node if isinstance(node, (Mapping, bool)) else None

    # ── nodes ────────────────────────────────────────────────────────────────────────────────────

    def node(self, schema: Any = ...) -> Node:
        """The :class:`Node` of ``schema`` (default: the root), at depth 0 with no ``$ref`` followed yet.

        Example:
            >>> SchemaWalker({"properties": {"a": {}}}).node().kind   # no type: inferred from the keywords
            'object'
        """
        return self._build(self.root if schema is ... else schema, 0, (), None, [])

    def child(self, parent: Node, schema: Any) -> Node:
        """The :class:`Node` of ``schema`` found inside ``parent`` (one level deeper, same cycle guard).

        Example:
            >>> walker = SchemaWalker({"$defs": {"L": {"items": {"$ref": "#/$defs/L"}}}, "$ref": "#/$defs/L"})
            >>> top = walker.node()
            >>> walker.child(top, top.schema["items"]).kind
            'cycle'
        """
        return self._build(schema, parent.depth + 1, parent.refs, None, [])

    def _build(
        self, schema: Any, depth: int, refs: tuple[str, ...], ref: str | None, issues: list[str]
    ) -> Node:
        """Guards, then ``$ref`` and ``allOf``; what is left is classified by :meth:`_classify`."""
        if depth > self.max_depth:
            issues.append(f"parts nested deeper than {self.max_depth} levels are shown as any value")
            return Node({}, "deep", depth, refs, ref, issues=_unique(issues))
        if schema is True or schema is None:
            return Node({}, "any", depth, refs, ref, issues=_unique(issues))
        if not isinstance(schema, Mapping):
            issues.append(
                "the schema accepts no value (`false`)"
                if schema is False
                else f"a sub-schema is not an object ({type(schema).__name__}); shown as any value"
            )
            return Node({}, "never" if schema is False else "any", depth, refs, ref, issues=_unique(issues))

        while "$ref" in schema:
            key = schema["$ref"] if isinstance(schema["$ref"], str) else repr(schema["$ref"])
            siblings = {k: v for k, v in schema.items() if k != "$ref"}
            target = self.resolve(schema["$ref"])
            if key in refs:
                target = target if isinstance(target, Mapping) else siblings
                return Node(target, "cycle", depth, refs, key, issues=_unique(issues))
            if not isinstance(target, Mapping):
                if target is not True:
                    issues.append(f"reference {snippet(schema['$ref'], 80)} cannot be resolved")
                schema = siblings
                break
            refs, ref = (*refs, key), key
            schema = {**target, **siblings}  # a `$ref` of the target survives and is followed next

        all_of = schema.get("allOf")
        if isinstance(all_of, list) and all_of:
            merged = self._merge_all_of(schema, all_of, depth, refs, issues)
            if merged is None:
                issues.append("an `allOf` with non-object members is shown by its first member")
                return self._build(all_of[0], depth + 1, refs, ref, issues)
            if len(all_of) > 1:
                issues.append("`allOf` members are merged into one shape")
            return self._build(merged, depth + 1, refs, ref, issues)
        return self._classify(schema, depth, refs, ref, issues)

    def _classify(
        self, schema: Mapping[str, Any], depth: int, refs: tuple[str, ...], ref: str | None, issues: list[str]
    ) -> Node:
        """Kind, allowed values, nullability and union members of a schema without ``$ref``/``allOf``."""
        values: tuple[Any, ...] | None = None
        if "const" in schema:
            values = (schema["const"],)
        elif isinstance(schema.get("enum"), list) and schema["enum"]:
            values = tuple(schema["enum"])
        nullable = schema.get("nullable") is True
        declared = schema.get("type")
        variants: list[Any] | None = None
        for key in ("anyOf", "oneOf"):
            alternatives = schema.get(key)
            if isinstance(alternatives, list) and alternatives:
                if key == "oneOf" and len(alternatives) > 1:
                    issues.append("`oneOf` (exactly one) is shown as `anyOf` (at least one)")
                inherited = _inherited(schema)
                variants = [{**inherited, **m} if isinstance(m, Mapping) else m for m in alternatives]
                break
        if variants is not None:
            kind = "union"
        elif isinstance(declared, list):
            names = [t for t in declared if isinstance(t, str)]
            nullable = nullable or "null" in names
            others = [t for t in dict.fromkeys(names) if t != "null"]
            if len(others) > 1:
                inherited = _inherited(schema)
                kind, variants = "union", [{**inherited, "type": t} for t in others]
            else:
                kind = others[0] if others else ("null" if names else "any")
        elif declared is None:
            kind = self._infer(schema)
            if kind == "any" and values is None:
                issues.append(_NO_TYPE)
        else:
            kind = declared if isinstance(declared, str) else ""
        if kind not in JSON_TYPES and kind not in ("any", "union"):
            issues.append(f"type {snippet(declared, 60)} is not understood; shown as any value")
            kind = "unknown"
        members: list[Node] = []
        for variant in variants or ():
            member = self._build(variant, depth + 1, refs, None, [])
            if member.is_null:
                nullable = True
            else:
                members.append(member)
        if kind == "union" and not members:
            kind, nullable = ("null" if nullable else "any"), False
        return Node(
            schema,
            kind,
            depth,
            refs,
            ref,
            values=values,
            nullable=nullable,
            members=tuple(members),
            issues=_unique(issues),
        )

    @staticmethod
    def _infer(schema: Mapping[str, Any]) -> str:
        if "properties" in schema or "additionalProperties" in schema:
            return "object"
        if "items" in schema or "prefixItems" in schema:
            return "array"
        default = schema.get("default")
        return _JSON_TYPE_OF.get(type(default), "any")

    def _merge_all_of(
        self,
        schema: Mapping[str, Any],
        parts: list[Any],
        depth: int,
        refs: tuple[str, ...],
        issues: list[str],
    ) -> dict[str, Any] | None:
        """Shallow-merge ``allOf`` members (properties and required unioned); None if one is not an object."""
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        props = dict(merged["properties"]) if isinstance(merged.get("properties"), Mapping) else {}
        required = list(merged["required"]) if isinstance(merged.get("required"), list) else []
        for part in parts:
            part_issues: list[str] = []
            resolved = self._build(
                part, depth + 1, refs, None, part_issues
            )  # its own $ref and allOf, resolved
            if not isinstance(part, Mapping) or resolved.kind in ("cycle", "deep"):
                return None
            issues += [i for i in part_issues if i != _NO_TYPE]  # the merged schema may well have a type
            for key, value in resolved.schema.items():
                if key == "properties" and isinstance(value, Mapping):
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

    # ── children ─────────────────────────────────────────────────────────────────────────────────

    def prefix_items(self, node: Node) -> list[Node]:
        """The fixed leading items of an array (``prefixItems``, or the draft-04 list form of ``items``).

        Example:
            >>> w = SchemaWalker({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]})
            >>> [n.kind for n in w.prefix_items(w.node())]
            ['integer', 'string']
        """
        prefix = node.schema.get("prefixItems")
        if not isinstance(prefix, list) and isinstance(node.schema.get("items"), list):
            prefix = node.schema["items"]
        return [self.child(node, p) for p in prefix] if isinstance(prefix, list) else []

    def rest_items(self, node: Node) -> Node | None:
        """The array items after the prefix (all items when there is none); None if absent or ``false``."""
        schema = node.schema
        if isinstance(schema.get("prefixItems"), list):
            rest = schema.get("items")
        elif isinstance(schema.get("items"), list):
            rest = schema.get("additionalItems")
        else:
            rest = schema.get("items")
        return None if rest is None or rest is False else self.child(node, rest)

    def fields(self, node: Node) -> list[tuple[str, Node]]:
        """The object's properties (string names only) as ``(name, node)`` pairs, in schema order."""
        props = node.schema.get("properties")
        if not isinstance(props, Mapping):
            return []
        return [(name, self.child(node, sub)) for name, sub in props.items() if isinstance(name, str)]

    @staticmethod
    def required(node: Node) -> list[str]:
        """The object's required property names (see :func:`required_names`)."""
        return required_names(node.schema)

    def extra_properties(self, node: Node) -> Node | None:
        """The schema of an object's additional properties when it is a non-empty schema, else None."""
        extra = node.schema.get("additionalProperties")
        return self.child(node, extra) if isinstance(extra, Mapping) and extra else None
