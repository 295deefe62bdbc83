"""The one schema walker: `$ref`, `allOf`, unions, nullables, inference, cycle and depth guards (pure)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings

from ormix.tools._schema import JSON_TYPES, Node, SchemaWalker
from support.schema_strategies import root_schemas

KINDS = JSON_TYPES | {"union", "any", "never", "cycle", "deep", "unknown"}


def test_refs_resolve_with_siblings_overriding_and_pointer_escapes():
    root = {
        "$defs": {"a/b": {"type": "string", "description": "target"}, "L": [{"type": "integer"}]},
        "properties": {
            "p": {"$ref": "#/$defs/a~1b", "description": "mine"},
            "q": {"$ref": "#/$defs/L/0"},
            "gone": {"$ref": "#/$defs/nope", "type": "boolean"},
            "remote": {"$ref": "https://example.com/s.json"},
        },
    }
    walker = SchemaWalker(root)
    fields = dict(walker.fields(walker.node()))
    assert (fields["p"].kind, fields["p"].schema["description"], fields["p"].label) == (
        "string",
        "mine",
        "a/b",
    )
    assert fields["q"].kind == "integer"
    assert fields["gone"].kind == "boolean"  # a broken $ref leaves its siblings...
    assert fields["gone"].issues == ('reference "#/$defs/nope" cannot be resolved',)  # ...and says so
    assert fields["remote"].kind == "any" and "cannot be resolved" in fields["remote"].issues[0]


def test_cycles_stop_at_the_repeated_ref():
    root = {"$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}, "$ref": "#/$defs/A"}
    node = SchemaWalker(root).node()
    assert (node.kind, node.ref, node.refs) == ("cycle", "#/$defs/A", ("#/$defs/A", "#/$defs/B"))
    tree = {
        "$defs": {
            "T": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/T"}}}}
        }
    }
    walker = SchemaWalker(tree)
    top = walker.node({"$ref": "#/$defs/T"})
    (kids,) = [n for _, n in walker.fields(top)]
    item = walker.rest_items(kids)
    assert (kids.kind, item.kind, item.label) == ("array", "cycle", "T")
    assert item.schema["type"] == "object"  # the recursive target, so consumers can say what it is


def test_all_of_members_merge_and_say_so():
    root = {
        "$defs": {"Base": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}},
        "allOf": [{"$ref": "#/$defs/Base"}, {"properties": {"b": {"type": "integer"}}, "required": ["b"]}],
    }
    walker = SchemaWalker(root)
    node = walker.node()
    assert node.kind == "object" and [n for n, _ in walker.fields(node)] == ["a", "b"]
    assert walker.required(node) == ["a", "b"]
    assert node.issues == ("`allOf` members are merged into one shape",)
    first = walker.node({"allOf": [5, {"type": "string"}]})
    assert first.kind == "any" and "shown by its first member" in " ".join(first.issues)


def test_unions_nullables_and_inherited_assertions():
    walker = SchemaWalker({})
    optional = walker.node({"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None, "title": "N"})
    assert (optional.kind, optional.nullable, [m.kind for m in optional.members]) == (
        "union",
        True,
        ["integer"],
    )
    assert "default" not in optional.members[0].schema  # annotations stay with the parent
    listed = walker.node({"type": ["string", "integer", "null"], "minLength": 2})
    assert listed.nullable and [(m.kind, m.schema.get("minLength")) for m in listed.members] == [
        ("string", 2),
        ("integer", 2),
    ]
    shaped = walker.node(
        {
            "type": "object",
            "properties": {"a": {}, "b": {}},
            "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
        }
    )
    assert [walker.required(m) for m in shaped.members] == [["a"], ["b"]]
    assert all(
        m.kind == "object" and "properties" in m.schema for m in shaped.members
    )  # parent's fields kept
    assert walker.node({"type": "string", "nullable": True}).nullable
    assert walker.node({"anyOf": [{"type": "null"}, {"const": None}]}).kind == "null"
    assert walker.node({"type": ["null"]}).kind == "null"


def test_missing_types_are_inferred_and_odd_ones_named():
    walker = SchemaWalker({})
    assert [
        walker.node(s).kind for s in ({"properties": {}}, {"items": {}}, {"default": 1.5}, {"default": True})
    ] == [
        "object",
        "array",
        "number",
        "boolean",
    ]
    assert walker.node({"enum": ["a", 1]}).values == ("a", 1)
    assert walker.node({"description": "x"}).issues == ("no type is given; any value is accepted",)
    assert walker.node({"type": "file"}).kind == "unknown"
    assert walker.node(False).kind == "never" and walker.node([1]).kind == "any"
    draft4 = walker.node(
        {"type": "array", "items": [{"type": "integer"}], "additionalItems": {"type": "string"}}
    )
    assert [n.kind for n in walker.prefix_items(draft4)] == ["integer"] and walker.rest_items(
        draft4
    ).kind == "string"


def test_depth_is_bounded():
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(100):
        schema = {"type": "array", "items": schema}
    walker = SchemaWalker(schema, max_depth=5)
    node = walker.node()
    while node.kind == "array":
        node = walker.rest_items(node)
    assert (node.kind, node.depth) == ("deep", 6)
    assert node.issues == ("parts nested deeper than 5 levels are shown as any value",)


def _walk(walker: SchemaWalker, node: Node, seen: list[Node]) -> None:
    seen.append(node)
    children = [*node.members, *walker.prefix_items(node), *(n for _, n in walker.fields(node))]
    for extra in (walker.rest_items(node), walker.extra_properties(node)):
        if extra is not None:
            children.append(extra)
    for child in children:
        _walk(walker, child, seen)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=root_schemas)
def test_every_node_of_a_hostile_schema_is_well_formed(schema: Any) -> None:
    """The walker never raises, terminates (depth and cycle guards), and every node keeps its invariants."""
    walker = SchemaWalker(schema, max_depth=8)
    seen: list[Node] = []
    _walk(walker, walker.node(), seen)
    for node in seen:
        assert node.kind in KINDS and node.depth <= walker.max_depth + 1
        assert (node.kind == "union") == bool(node.members)
        assert not any(m.is_null for m in node.members)  # null members become `nullable`
        assert "$ref" not in node.schema or node.kind == "cycle"
        # merged (an empty one is inert); a cycle's schema is its target as written
        assert not node.schema.get("allOf") or node.kind in ("any", "deep", "cycle")
        assert len(set(node.issues)) == len(node.issues)
