"""JSON Schema → type hints → what `get_json_schema` shows the model (pure; Hypothesis round trip)."""

from __future__ import annotations

from typing import Any, Literal, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from transformers.utils import get_json_schema

from ormix.tools._hints import type_hint
from ormix.tools._schema import SchemaWalker
from support.schema_strategies import root_schemas


def hint(schema: Any, root: Any = None) -> Any:
    walker = SchemaWalker(schema if root is None else root)
    return type_hint(walker, walker.node(schema))[0]


def rendered(annotation: Any) -> dict[str, Any]:
    """The parameter schema `get_json_schema` makes of a parameter with this annotation."""

    def tool(x):  # annotated below, as a bound tool method is
        """Use it.

        Args:
            x: The value.
        """

    tool.__annotations__ = {"x": annotation}
    out = dict(get_json_schema(tool)["function"]["parameters"]["properties"]["x"])
    out.pop("description")
    return out


@pytest.mark.parametrize(
    ("prop", "annotation", "shown"),
    [
        ({"type": "string"}, str, {"type": "string"}),
        ({"type": "integer"}, int, {"type": "integer"}),
        ({"type": "number"}, float, {"type": "number"}),
        ({"type": "boolean"}, bool, {"type": "boolean"}),
        ({"enum": ["a", "b"]}, Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        ({"type": "integer", "enum": [1, 2]}, Literal[1, 2], {"type": "integer", "enum": [1, 2]}),
        ({"const": "x"}, Literal["x"], {"type": "string", "enum": ["x"]}),
        ({"enum": ["a", None]}, Literal["a"] | None, {"type": "string", "enum": ["a"], "nullable": True}),
        (
            {"type": "array", "items": {"type": "integer"}},
            list[int],
            {"type": "array", "items": {"type": "integer"}},
        ),
        (
            {"type": "array", "items": {"type": "array", "items": {"enum": ["x"]}}},
            list[list[Literal["x"]]],
            {"type": "array", "items": {"type": "array", "items": {"type": "string", "enum": ["x"]}}},
        ),
        (
            {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
            tuple[int, str],
            {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
        ),
        ({"type": ["string", "null"]}, str | None, {"type": "string", "nullable": True}),
        (
            {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            int | None,
            {"type": "integer", "nullable": True},
        ),
        ({"type": "string", "nullable": True}, str | None, {"type": "string", "nullable": True}),
        (
            {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            str | int,
            {"type": ["integer", "string"]},
        ),
        ({"type": "object", "properties": {"a": {"type": "string"}}}, dict, {"type": "object"}),
        (
            {"type": "object", "additionalProperties": {"type": "number"}},
            dict[str, float],
            {"type": "object", "additionalProperties": {"type": "number"}},
        ),
        ({"description": "untyped"}, Any, {}),
    ],
)
def test_schema_feature_becomes_type_hint(
    prop: dict[str, Any], annotation: Any, shown: dict[str, Any]
) -> None:
    assert hint(prop) == annotation
    assert rendered(annotation) == shown


def test_what_a_hint_cannot_carry_is_noted() -> None:
    walker = SchemaWalker(
        {"$defs": {"N": {"properties": {"next": {"$ref": "#/$defs/N"}}}}, "$ref": "#/$defs/N"}
    )
    node = walker.node()
    (child,) = [n for _, n in walker.fields(node)]
    assert type_hint(walker, child) == (dict, ('recursive structure at "#/$defs/N" is shown as dict',))
    assert type_hint(walker, walker.node({"type": "array", "prefixItems": [{"type": "integer"}]}))[1] == (
        "a one-element tuple is shown as a list of that element",
    )
    _, notes = type_hint(walker, walker.node({"oneOf": [{"type": "string"}, {"enum": [{"a": 1}]}]}))
    assert notes == (
        "`oneOf` (exactly one) is shown as `anyOf` (at least one)",
        "allowed values are not all JSON scalars; they are listed in the text",
    )


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=root_schemas)
def test_hints_round_trip_through_get_json_schema(schema: Any) -> None:
    """Reading back what get_json_schema shows gives the same hint: it carries exactly what the model sees.

    For any schema (hostile ones included), hint → get_json_schema's schema → hint is the identity, and
    get_json_schema's schema of it is then a fixed point.
    """
    annotation = hint(schema)
    shown = rendered(annotation)
    assert hint(shown) == annotation, shown
    assert rendered(hint(shown)) == shown


def test_an_enum_too_long_for_every_prompt_is_shown_by_its_type_and_a_sample() -> None:
    # A hostile (or careless) schema: 100,000 allowed values would enter every prompt as the tool's schema.
    values = list(range(100_000))
    walker = SchemaWalker({"enum": values})
    annotation, notes = type_hint(walker, walker.node())
    assert annotation is int and rendered(annotation) == {"type": "integer"}
    assert (
        len(notes) == 1
        and notes[0].startswith("one of 100000 allowed values: [0, 1, 2")
        and len(notes[0]) < 500
    )
    walker = SchemaWalker({"enum": [*map(str, range(65)), None]})
    assert type_hint(walker, walker.node())[0] == Optional[str]  # noqa: UP045 - as the hint is built
    small = SchemaWalker({"enum": list(range(64))})
    assert type_hint(small, small.node()) == (Literal[tuple(range(64))], ())
