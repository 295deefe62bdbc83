"""Example arguments from JSON schemas (what `ormix check` calls every tool with).

Two real validators: pydantic, for schemas made from pydantic models (as the ORS SDK makes them), and a small
JSON Schema checker below for random schemas built from every feature the walker supports (`jsonschema` is not
installed here).
"""

from __future__ import annotations

import json
import math
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, create_model

from ormix.app._check import example_arguments, example_value

SURFACES = Path(__file__).resolve().parents[1] / "data" / "tool-surfaces"


def test_example_arguments_on_real_tool_surfaces():
    bash = {
        "type": "object",
        "required": ["command"],
        "properties": {
            "command": {"type": "string"},
            "timeout": {"anyOf": [{"type": "number"}, {"type": "null"}], "default": None},
        },
    }
    assert example_arguments(bash) == {"command": "test"}
    assert example_arguments({"type": "object", "properties": {}}) == {}
    assert example_arguments(None) == {}
    ref = {
        "$defs": {"Mode": {"enum": ["fast", "slow"], "type": "string"}},
        "type": "object",
        "required": ["mode", "n"],
        "properties": {
            "mode": {"$ref": "#/$defs/Mode"},
            "n": {"type": "integer", "exclusiveMinimum": 3, "maximum": 9},
        },
    }
    assert example_arguments(ref) == {"mode": "fast", "n": 4}
    assert example_value({"type": "string", "minLength": 8}) == "testtttt"
    assert example_value({"type": "string", "format": "email"}) == "test@example.com"
    assert example_value({"type": ["null", "boolean"]}) is False
    for path in sorted(SURFACES.glob("*.json")):
        tools = json.loads(path.read_text())["tools"]
        assert tools
        for tool in tools:
            args = example_arguments(tool["input_schema"])
            assert set(args) == set(tool["input_schema"].get("required", [])), tool["name"]
            assert valid(args, tool["input_schema"], tool["input_schema"]), (tool["name"], args)


def test_hostile_schemas_give_a_value_and_never_raise():
    loop = {"$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}, "$ref": "#/$defs/A"}
    assert example_value(loop) is None
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(300):
        deep = {"type": "array", "items": deep, "minItems": 1}
    assert isinstance(example_value(deep), list)
    assert example_value({"$ref": "#/nowhere", "type": "integer"}) == 1  # the siblings of a broken $ref
    assert example_value({"allOf": [{"type": "integer"}, {"minimum": 4}]}) == 4
    assert example_value({"type": "file"}) is None and example_value(False) is None
    assert example_arguments({"type": "object", "required": ["x"]}) == {"x": "test"}  # required, no schema


class Color(str, Enum):
    red = "red"
    blue = "blue"


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    size: Annotated[int, Field(ge=3, le=7)]


FIELD_TYPES = {
    "s": (str, ...),
    "i": (int, ...),
    "f": (float, ...),
    "b": (bool, ...),
    "lit": (Literal["a", "b"], ...),
    "ints": (list[int], ...),
    "opt": (str | None, None),
    "bounded": (Annotated[int, Field(gt=10, lt=20)], ...),
    "longstr": (Annotated[str, Field(min_length=9)], ...),
    "fl": (Annotated[float, Field(ge=2.5, le=3.0)], ...),
    "color": (Color, ...),
    "inner": (Inner, ...),
    "inners": (Annotated[list[Inner], Field(min_length=2)], ...),
    "mapping": (dict[str, int], ...),
    "defaulted": (int, 7),
    "maybe_inner": (Inner | None, ...),
    "mult": (Annotated[int, Field(multiple_of=5, ge=6)], ...),
    "pair": (tuple[int, str], ...),
}


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from(sorted(FIELD_TYPES)), min_size=0, max_size=8, unique=True))
def test_generated_arguments_validate_against_the_pydantic_model_that_made_the_schema(names):
    """Real validator: the ORS SDK builds tool schemas from pydantic models (extra='forbid'); so do we."""
    model = create_model(
        "Params", __config__=ConfigDict(extra="forbid"), **{n: FIELD_TYPES[n] for n in names}
    )
    args = example_arguments(model.model_json_schema())
    model.model_validate(args)  # raises if a generated value breaks the schema
    required = {n for n in names if FIELD_TYPES[n][1] is ...}
    assert set(args) == required  # optional fields are left to the tool's defaults


# ── a small JSON Schema checker for the features the walker supports ───────────────────────────


def _json_type(value: Any) -> set[str]:
    if value is None:
        return {"null"}
    if isinstance(value, bool):
        return {"boolean"}
    if isinstance(value, int):
        return {"integer", "number"}
    if isinstance(value, float):
        return {"number", "integer"} if value.is_integer() else {"number"}
    if isinstance(value, str):
        return {"string"}
    if isinstance(value, list):
        return {"array"}
    return {"object"} if isinstance(value, dict) else set()


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _resolve(ref: str, root: Any) -> Any:
    node = root
    for part in ref.lstrip("#").strip("/").split("/") if ref.strip("#/") else []:
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def valid(value: Any, schema: Any, root: Any) -> bool:
    """Whether `value` satisfies `schema` (JSON Schema 2020-12 semantics, plus OpenAPI's `nullable`)."""
    if schema is True:
        return True
    if schema is False:
        return False
    if "$ref" in schema:
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        return valid(value, _resolve(schema["$ref"], root), root) and valid(value, rest, root)
    if schema.get("nullable") is True and value is None:
        return True
    checks = [
        all(valid(value, part, root) for part in schema.get("allOf", [])),
        not schema.get("anyOf") or any(valid(value, m, root) for m in schema["anyOf"]),
        not schema.get("oneOf") or sum(valid(value, m, root) for m in schema["oneOf"]) == 1,
        "enum" not in schema or any(_same(value, v) for v in schema["enum"]),
        "const" not in schema or _same(value, schema["const"]),
    ]
    declared = schema.get("type")
    if declared is not None:
        names = declared if isinstance(declared, list) else [declared]
        checks.append(bool(_json_type(value) & set(names)))
    kinds = _json_type(value)
    if "string" in kinds:
        checks += [len(value) >= schema.get("minLength", 0), len(value) <= schema.get("maxLength", math.inf)]
    if "number" in kinds and not isinstance(value, bool):
        checks += [
            value >= schema.get("minimum", -math.inf),
            value <= schema.get("maximum", math.inf),
            value > schema.get("exclusiveMinimum", -math.inf),
            value < schema.get("exclusiveMaximum", math.inf),
            "multipleOf" not in schema or value % schema["multipleOf"] == 0,
        ]
    if "array" in kinds:
        prefix = schema.get("prefixItems", [])
        rest = schema.get("items", True)
        checks += [
            len(value) >= schema.get("minItems", 0),
            len(value) <= schema.get("maxItems", math.inf),
            all(valid(v, s, root) for v, s in zip(value, prefix, strict=False)),
            all(valid(v, rest, root) for v in value[len(prefix) :]),
        ]
    if "object" in kinds:
        props = schema.get("properties", {})
        checks += [
            all(name in value for name in schema.get("required", [])),
            all(valid(v, props[k], root) for k, v in value.items() if k in props),
            schema.get("additionalProperties", True) is not False or set(value) <= set(props),
        ]
    return all(checks)


def test_the_checker_rejects_what_it_should():
    """The property below is only as good as its checker: make sure it says no."""
    assert not valid("ab", {"type": "string", "minLength": 3}, {})
    assert not valid(5, {"type": "integer", "exclusiveMaximum": 5}, {})
    assert not valid([1], {"type": "array", "prefixItems": [{"type": "string"}]}, {})
    assert not valid({}, {"type": "object", "required": ["a"]}, {})
    assert not valid({"a": 1, "b": 2}, {"properties": {"a": {}}, "additionalProperties": False}, {})
    assert not valid(1, {"oneOf": [{"type": "integer"}, {"type": "number"}]}, {})
    assert not valid(None, {"$ref": "#/$defs/S"}, {"$defs": {"S": {"type": "string"}}})
    assert valid(None, {"type": "string", "nullable": True}, {})


# ── random schemas from the walker's features ──────────────────────────────────────────────────


@st.composite
def strings(draw: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    if draw(st.booleans()):
        schema["minLength"] = draw(st.integers(0, 12))
    if draw(st.booleans()):
        schema["maxLength"] = schema.get("minLength", 0) + draw(st.integers(0, 6))
    if draw(st.booleans()):
        schema["format"] = draw(st.sampled_from(["email", "date", "uuid", "uri", "made-up"]))
    return schema


@st.composite
def numbers(draw: Any) -> dict[str, Any]:
    kind = draw(st.sampled_from(["integer", "number"]))
    schema: dict[str, Any] = {"type": kind}
    lo = draw(st.none() | st.integers(-50, 50))
    if lo is not None:
        schema["exclusiveMinimum" if draw(st.booleans()) else "minimum"] = lo
    if draw(st.booleans()):
        high = (lo if lo is not None else 0) + draw(st.integers(2, 20))
        schema["exclusiveMaximum" if draw(st.booleans()) else "maximum"] = high
    elif kind == "integer" and draw(st.booleans()):
        schema["multipleOf"] = draw(st.integers(1, 7))
    return schema


scalars = st.one_of(
    strings(),
    numbers(),
    st.just({"type": "boolean"}),
    st.just({"type": "null"}),
    st.lists(st.text(max_size=4) | st.integers(-3, 3), min_size=1, max_size=4, unique=True).map(
        lambda values: {"enum": values}
    ),
    (st.text(max_size=4) | st.integers() | st.booleans()).map(lambda value: {"const": value}),
    st.lists(st.text(max_size=4), min_size=1, max_size=3, unique=True).map(
        lambda values: {"type": "string", "enum": values}
    ),
)
field_names = st.sampled_from(["a", "b", "path", "from", "n", "x-y", "items"])


def containers(inner: st.SearchStrategy) -> st.SearchStrategy:
    def array(items: Any, min_items: int, extra: int) -> dict[str, Any]:
        return {"type": "array", "items": items, "minItems": min_items, "maxItems": min_items + extra}

    def tuple_(prefix: list[Any], rest: Any, extra: int) -> dict[str, Any]:
        if rest is None:  # exactly the prefix
            return {"type": "array", "prefixItems": prefix, "items": False}
        count = len(prefix) + extra  # more items than the prefix: the rest are filled from `items`
        return {"type": "array", "prefixItems": prefix, "items": rest, "minItems": count, "maxItems": count}

    def object_(props: dict[str, Any], pick: list[bool], closed: bool) -> dict[str, Any]:
        required = [name for name, keep in zip(props, pick, strict=False) if keep]
        schema = {"type": "object", "properties": props, "required": required}
        return {**schema, "additionalProperties": False} if closed else schema

    objects = st.builds(
        object_,
        st.dictionaries(field_names, inner, max_size=4),
        st.lists(st.booleans(), max_size=4),
        st.booleans(),
    )

    def all_of(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
        def renamed(schema: dict[str, Any]) -> dict[str, Any]:  # disjoint fields, so the parts never disagree
            props = {f"b_{k}": v for k, v in schema["properties"].items()}
            return {"type": "object", "properties": props, "required": [f"b_{r}" for r in schema["required"]]}

        return {"allOf": [{k: v for k, v in first.items() if k != "additionalProperties"}, renamed(second)]}

    return st.one_of(
        st.builds(array, inner, st.integers(0, 3), st.integers(0, 2)),
        st.builds(tuple_, st.lists(inner, min_size=1, max_size=3), st.none() | inner, st.integers(0, 2)),
        objects,
        st.builds(all_of, objects, objects),
        st.lists(inner, min_size=1, max_size=3).map(lambda members: {"anyOf": members}),
        inner.map(lambda s: {"anyOf": [s, {"type": "null"}], "default": None, "title": "Optional"}),
        st.sampled_from(["string", "integer", "boolean"]).flatmap(
            lambda t: st.just({"oneOf": [{"type": t}, {"type": "null"}]})
        ),
        inner.map(lambda s: {"type": "array", "items": s, "nullable": True}),
        inner.map(lambda s: {"__def__": s}),  # becomes a `$ref` into `$defs`, below
        inner.map(lambda s: {"__def__": s, "description": "sibling text"}),
    )


def _lift_definitions(schema: Any, defs: dict[str, Any], key: str) -> Any:
    """Replace every `{"__def__": s}` by a `$ref` to a fresh definition `s` (never recursive)."""
    if isinstance(schema, list):
        return [_lift_definitions(s, defs, key) for s in schema]
    if not isinstance(schema, dict):
        return schema
    lifted = {k: _lift_definitions(v, defs, key) for k, v in schema.items()}
    if "__def__" in lifted:
        name = f"D{len(defs)}"
        defs[name] = lifted.pop("__def__")
        lifted["$ref"] = f"#/{key}/{name}"
    return lifted


@st.composite
def rooted_schemas(draw: Any) -> dict[str, Any]:
    body = draw(st.recursive(scalars, containers, max_leaves=10))
    key = draw(st.sampled_from(["$defs", "definitions"]))
    defs: dict[str, Any] = {}
    schema = _lift_definitions({"root": body}, defs, key)["root"]
    if "$ref" in schema and draw(st.booleans()):
        schema = {"type": "object", "properties": {"p": schema}, "required": ["p"]}
    return {**schema, key: defs} if defs else schema


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rooted_schemas())
def test_example_values_validate_against_random_schemas(schema):
    value = example_value(schema)
    assert valid(value, schema, schema), value
    if isinstance(value, dict) and schema.get("type") == "object":
        assert example_arguments(schema) == value
