"""Hypothesis strategies for hostile JSON schemas: every keyword the tool binder reads, in every wrong shape.

`root_schemas` puts `$defs`/`definitions` (targets of the generated `$ref`s, which may loop or be missing)
next to a random body. Shared by the binding, type-hint and walker property tests.
"""

from __future__ import annotations

from hypothesis import strategies as st

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(allow_nan=False, width=16)
    | st.text(max_size=6)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
type_names = st.sampled_from(["string", "integer", "number", "boolean", "null", "array", "object", "file"])
prop_names = st.text(max_size=10) | st.sampled_from(
    ["from", "self", "lambda", "numReturns", "Args", "_x", "a-b"]
)
refs = st.sampled_from(
    ["#", "#/$defs/A", "#/$defs/B", "#/definitions/C", "#/$defs/Missing", "http://x/s.json"]
)
text_values = st.text(max_size=30) | st.sampled_from(
    ["Args:\n  x: y", "Returns: z", "(choices: [1, 2])", '"""']
)

leaf_schemas = st.booleans() | st.fixed_dictionaries(
    {},
    optional={
        "type": type_names | st.lists(type_names, max_size=3) | st.integers(),
        "description": text_values,
        "title": text_values,
        "default": json_values,
        "enum": st.lists(json_values, max_size=4),
        "const": json_values,
        "$ref": refs,
        "pattern": st.text(max_size=5),
        "minimum": st.integers(),
        "nullable": st.booleans(),
    },
)


def extend_schemas(inner: st.SearchStrategy) -> st.SearchStrategy:
    return st.fixed_dictionaries(
        {},
        optional={
            "type": type_names | st.lists(type_names, max_size=3),
            "description": text_values,
            "items": inner | st.lists(inner, max_size=3),
            "prefixItems": st.lists(inner, max_size=3),
            "properties": st.dictionaries(prop_names, inner, max_size=4),
            "required": st.lists(prop_names | st.integers(), max_size=3),
            "anyOf": st.lists(inner, max_size=3),
            "oneOf": st.lists(inner, max_size=3),
            "allOf": st.lists(inner, max_size=2),
            "additionalProperties": inner,
            "not": inner,
            "default": json_values,
        },
    )


schemas = st.recursive(leaf_schemas, extend_schemas, max_leaves=12)
root_schemas = st.builds(
    lambda body, a, b, c: (
        {**body, "$defs": {"A": a, "B": b}, "definitions": {"C": c}} if isinstance(body, dict) else body
    ),
    schemas,
    schemas,
    schemas,
    schemas,
)
