"""Field-by-field fidelity of bound tool methods on the real ORS tool surfaces (SETA, SWE-rebench-V2).

What the model sees is `transformers.utils.get_json_schema(method)`; every property, the required list,
enums, array item types, tuples, nullability, defaults and descriptions of the published input schemas must
survive into it.
Calls go through the real dispatch contract: a class whose `_call_tool(name, arguments)` records what it gets.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from transformers.utils import get_json_schema

from ormix.tools import NO_DEFAULT, ServerDefault, bind_tools
from support.plain_http import blocking_request

SURFACES = Path(__file__).resolve().parents[1] / "data" / "tool-surfaces"
SURFACE_FILES = sorted(SURFACES.glob("*.json"))
JSON_TYPES = {"string", "integer", "number", "boolean", "array", "object", "null"}


class Recorder:
    """The dispatch contract every bound method relies on: `_call_tool(wire_name, wire_arguments)`."""

    def reset(self, **row: Any) -> None:
        self.calls: list[tuple[str, Any]] = []

    def _call_tool(self, name: str, arguments: Any) -> str:
        self.calls.append((name, arguments))
        return f"called {name}"


def _surface(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _bound(path: Path) -> tuple[type, Any, dict[str, Any]]:
    cls = type(f"Env_{path.stem.replace('-', '_')}", (Recorder,), {})
    surface = _surface(path)
    report = bind_tools(cls, surface["tools"])
    return cls, report, surface


def _deref(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    node: Any = root
    for part in ref.lstrip("#/").split("/"):
        node = node[part]
    return node


def _split_nullable(prop: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """(non-null schema, nullable) for the Optional shapes pydantic emits."""
    if "anyOf" in prop:
        members = [m for m in prop["anyOf"] if m.get("type") != "null"]
        assert len(members) == 1, "surfaces only use Optional[T] unions"
        return members[0], len(members) < len(prop["anyOf"])
    return prop, False


def _one_line(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("path", SURFACE_FILES, ids=lambda p: p.stem)
def test_every_tool_is_bound_under_its_own_name(path: Path) -> None:
    cls, report, surface = _bound(path)
    wire_names = [t["name"] for t in surface["tools"]]
    assert list(report.method_names) == wire_names  # all real names are plain identifiers: nothing renamed
    assert not report.renamed and not report.skipped
    assert [report.binding(n).wire_name for n in wire_names] == wire_names
    # TRL's discovery: class functions, public, minus reset/get_reward; it routes calls by __name__
    found = {
        name
        for name, _ in inspect.getmembers(cls, predicate=inspect.isfunction)
        if not name.startswith("_") and name not in ("reset", "get_reward")
    }
    assert found == set(wire_names)
    instance = cls()
    assert all(getattr(instance, n).__name__ == n for n in wire_names)


@pytest.mark.parametrize("path", SURFACE_FILES, ids=lambda p: p.stem)
def test_schema_fields_survive_into_get_json_schema(path: Path) -> None:
    cls, report, surface = _bound(path)
    instance = cls()
    checked = 0
    for tool in surface["tools"]:
        schema = tool["input_schema"]
        fn = get_json_schema(getattr(instance, tool["name"]))["function"]
        assert fn["name"] == tool["name"]
        assert fn["description"] == inspect.cleandoc(tool["description"])
        params = fn["parameters"]
        props = schema.get("properties", {})
        assert set(params["properties"]) == set(props)
        assert set(params.get("required", [])) == set(schema.get("required", []))
        for name, prop in props.items():
            out = params["properties"][name]
            inner, nullable = _split_nullable(prop)
            inner = _deref(inner, schema)
            assert out.get("nullable", False) is nullable, (tool["name"], name)
            assert inner["type"] in JSON_TYPES
            assert out["type"] == inner["type"], (tool["name"], name)
            if "enum" in inner:
                assert out["enum"] == inner["enum"]
            if inner["type"] == "array" and "prefixItems" in inner:
                assert out["prefixItems"] == [{"type": p["type"]} for p in inner["prefixItems"]]
            elif inner["type"] == "array":
                items = _deref(inner["items"], schema)
                assert out["items"]["type"] == items["type"], (tool["name"], name)
            text = prop.get("description") or prop["title"]
            assert _one_line(text) in out["description"]
            if "default" in prop:
                assert f"Default: {json.dumps(prop['default'])}." in out["description"]
            checked += 1
    assert checked == sum(len(t["input_schema"].get("properties", {})) for t in surface["tools"])


def test_seta_todo_items_are_described_field_by_field() -> None:
    path = SURFACES / "seta.json"
    cls, report, surface = _bound(path)
    out = get_json_schema(cls().todo_write)["function"]["parameters"]["properties"]["todos"]
    assert out["type"] == "array" and out["items"] == {"type": "object"}
    item = next(t for t in surface["tools"] if t["name"] == "todo_write")["input_schema"]["$defs"]["TodoItem"]
    text = out["description"]
    for field_name, field_schema in item["properties"].items():
        optional = "" if field_name in item["required"] else "?"
        assert f"{field_name}{optional}: " in text
        if "enum" in field_schema:
            assert " | ".join(json.dumps(v) for v in field_schema["enum"]) in text
        if "default" in field_schema:
            assert f"(default {json.dumps(field_schema['default'])})" in text


@pytest.mark.parametrize("path", SURFACE_FILES, ids=lambda p: p.stem)
def test_param_bindings_carry_defaults_and_order(path: Path) -> None:
    cls, report, surface = _bound(path)
    for tool in surface["tools"]:
        binding = report.binding(tool["name"])
        schema = tool["input_schema"]
        required = schema.get("required", [])
        flags = [p.required for p in binding.params]
        assert flags == sorted(flags, reverse=True)  # required first
        sig = inspect.signature(getattr(cls, tool["name"]))
        assert list(sig.parameters)[0] == "self"
        assert sig.return_annotation is str
        for p in binding.params:
            prop = schema["properties"][p.wire_name]
            assert p.required is (p.wire_name in required)
            assert p.default == prop.get("default", NO_DEFAULT)
            default = sig.parameters[p.py_name].default
            if p.required:
                assert default is inspect.Parameter.empty
            else:
                assert isinstance(default, ServerDefault) and repr(default) == repr(prop.get("default"))


@pytest.mark.parametrize("path", SURFACE_FILES, ids=lambda p: p.stem)
def test_calls_send_wire_names_and_omit_what_the_model_did_not_pass(path: Path) -> None:
    cls, report, surface = _bound(path)
    instance = cls()
    instance.reset()
    sample = {"string": "s", "integer": 3, "number": 1.5, "boolean": True, "array": [1, 2], "object": {}}
    for tool in surface["tools"]:
        schema = tool["input_schema"]
        props = schema.get("properties", {})
        required = {
            n: sample[_deref(_split_nullable(props[n])[0], schema)["type"]]
            for n in schema.get("required", [])
        }
        assert getattr(instance, tool["name"])(**required) == f"called {tool['name']}"
        assert instance.calls[-1] == (tool["name"], required)  # optional params left to the server's defaults
        everything = {n: sample[_deref(_split_nullable(p)[0], schema)["type"]] for n, p in props.items()}
        getattr(instance, tool["name"])(**everything)
        assert instance.calls[-1] == (tool["name"], everything)


def test_explicit_none_and_explicit_default_are_sent() -> None:
    cls, _, _ = _bound(SURFACES / "seta.json")
    env = cls()
    env.reset()
    env.bash(command="ls", timeout=None)
    env.ls(path=".")
    env.edit("f.py", "a", "b")  # positional, as a plain method call
    assert env.calls == [
        ("bash", {"command": "ls", "timeout": None}),
        ("ls", {"path": "."}),
        ("edit", {"file_path": "f.py", "old_string": "a", "new_string": "b"}),
    ]


def test_bad_calls_raise_type_errors_naming_the_tool() -> None:
    cls, _, _ = _bound(SURFACES / "swe-rebench-v2.json")
    env = cls()
    env.reset()
    with pytest.raises(TypeError, match=r"bash\(\): missing a required argument: 'description'"):
        env.bash(command="ls")
    with pytest.raises(TypeError, match=r"view\(\).*unexpected keyword argument 'nope'"):
        env.view(path="/", description="d", nope=1)
    assert env.calls == []


def test_tools_listed_by_a_live_echo_server_bind_and_render(echo_server) -> None:
    """The tool list as a real ORS server sends it over HTTP binds into a schema the model can use."""
    env_name = echo_server.env_names[0]
    listing = blocking_request("GET", f"{echo_server.url}/{env_name}/tools", timeout_s=10).json()
    cls = type("EchoEnv", (Recorder,), {})
    report = bind_tools(cls, listing["tools"])
    assert set(report.method_names) >= {"echo", "submit"}
    env = cls()
    env.reset()
    fn = get_json_schema(env.echo)["function"]
    assert fn["parameters"]["properties"]["text"]["type"] == "string"
    assert fn["parameters"]["required"] == ["text"]
    env.echo(text="apple")
    assert env.calls == [("echo", {"text": "apple"})]
