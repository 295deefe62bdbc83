"""Tool binding without exec: plans, descriptions, hostile specs, dispatch, merging, speed.

Names are tested in `test_names.py`, type hints in `test_hints.py`, the walker in `test_schema.py`,
docstrings in `test_docstrings.py`, and the whole against TRL in `test_trl_fidelity.py`.

Pure logic, so most checks are hypothesis properties. The dispatch contract is real: a tiny class whose
`_call_tool(name, arguments)` records what a bound method sends.
"""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers.utils import get_json_schema

import ormix.tools
from ormix.tools import BindingConflictError, ServerDefault, bind_tools, merge_tool_specs, plan_tool
from ormix.tools._binding import make_method
from ormix.tools._docstrings import split_choices
from ormix.tools._names import is_safe_identifier
from ormix.tools._specs import ToolSpecError
from support.schema_strategies import root_schemas, text_values


class Recorder:
    """Records the calls bound methods make: the real dispatch contract, not a server mock."""

    # Declared on the class too, so that `bind_tools` sees the name as taken (the library passes Episode's
    # instance state as `reserved=EPISODE_STATE` for the same reason): a tool named "calls" gets another name.
    calls: list[tuple[str, Any]] = []

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def reset(self, **row: Any) -> None:
        self.calls = []

    def _call_tool(self, name: str, arguments: Any) -> str:
        self.calls.append((name, arguments))
        return "ok"


def fresh_class(name: str = "Env") -> type:
    return type(name, (Recorder,), {})


def obj(properties: dict[str, Any], required: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties, **extra}
    if required is not None:
        schema["required"] = required
    return schema


def spec(name: str, schema: Any = None, description: str = "A tool.") -> dict[str, Any]:
    return {"name": name, "description": description, "input_schema": schema}


def gjs(cls: type, method_name: str) -> dict[str, Any]:
    return get_json_schema(getattr(cls(), method_name))["function"]


# ── schema → descriptions ───────────────────────────────────────────────────────────────────────


def test_descriptions_defaults_constraints_and_shapes_reach_the_model() -> None:
    schema = obj(
        {
            "q": {"type": "string", "description": "Query text.", "pattern": "^[a-z]+$", "maxLength": 9},
            "n": {"type": "integer", "title": "Count", "default": 3, "minimum": 1},
            "opts": {
                "type": "object",
                "description": "Options.",
                "properties": {"deep": {"type": "boolean", "default": False, "description": "Go deep"}},
                "required": ["deep"],
            },
            "pick": {"enum": [{"a": 1}, [2]]},
        },
        ["q"],
    )
    cls = fresh_class()
    bind_tools(cls, [spec("search", schema)])
    props = gjs(cls, "search")["parameters"]["properties"]
    assert props["q"]["description"].startswith("Query text.")
    assert 'pattern="^[a-z]+$"' in props["q"]["description"] and "maxLength=9" in props["q"]["description"]
    assert props["n"]["description"].startswith("Count.") and "Default: 3." in props["n"]["description"]
    assert "Shape: {deep: boolean (default false) — Go deep}." in props["opts"]["description"]
    assert 'One of: [{"a": 1}, [2]].' in props["pick"]["description"]
    assert props["pick"]["type"] == ["array", "object"]


def test_ref_cycles_degrade_with_a_note() -> None:
    schema = {
        "type": "object",
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"child": {"$ref": "#/$defs/Node"}, "v": {"type": "integer"}},
            },
            "A": {"$ref": "#/$defs/B"},
            "B": {"$ref": "#/$defs/A"},
            "L": {"type": "array", "items": {"$ref": "#/$defs/L"}},
        },
        "properties": {
            "node": {"$ref": "#/$defs/Node"},
            "a": {"$ref": "#/$defs/A"},
            "lst": {"$ref": "#/$defs/L"},
            "root": {"$ref": "#"},
            "missing": {"$ref": "#/$defs/Nope"},
            "remote": {"$ref": "https://example.com/schema.json"},
        },
        "required": ["node"],
    }
    b = plan_tool(spec("graph", schema))
    ann = {p.py_name: p.annotation for p in b.params}
    assert ann["node"] is dict
    assert ann["a"] is Any
    assert ann["lst"] is list  # its items are the recursive part
    assert ann["missing"] is Any and ann["remote"] is Any
    assert any("recursive" in n for n in b.notes) and any("cannot be resolved" in n for n in b.notes)
    cls = fresh_class()
    bind_tools(cls, [spec("graph", schema)])
    props = gjs(cls, "graph")["parameters"]["properties"]
    assert "Node (recursive)" in props["node"]["description"]
    assert "recursive" in props["a"]["description"]


def test_deep_nesting_stops_without_recursion_error() -> None:
    prop: dict[str, Any] = {"type": "string"}
    for _ in range(400):
        prop = {"type": "array", "items": prop}
    b = plan_tool(spec("deep", obj({"p": prop})))
    assert any("deeper than" in n for n in b.notes)
    cls = fresh_class()
    bind_tools(cls, [spec("deep", obj({"p": prop}))])
    assert gjs(cls, "deep")["parameters"]["properties"]["p"]["type"] == "array"


@pytest.mark.parametrize(
    ("schema", "params"),
    [
        (None, []),
        ({}, []),
        (True, []),
        ({"type": "object"}, []),
        ({"properties": {}}, []),
        ({"properties": 5}, []),
        ([1, 2], []),
        ("not json", []),
        ('{"type": "object", "properties": {"a": {"type": "string"}}}', ["a"]),
        ({"type": "string"}, ["input"]),
        ({"type": "array", "items": {"type": "integer"}}, ["input"]),
    ],
)
def test_odd_input_schemas_bind_without_crashing(schema: Any, params: list[str]) -> None:
    cls = fresh_class()
    report = bind_tools(cls, [spec("odd", schema)])
    assert report.method_names == ("odd",)
    fn = gjs(cls, "odd")
    assert list(fn["parameters"]["properties"]) == params
    env = cls()
    if params == ["input"]:
        env.odd("value")
        assert env.calls == [("odd", "value")]  # raw input: the value itself is the tool input
        assert "pass it as `input`" in fn["description"]
    elif params == ["a"]:
        env.odd(a="x")
        assert env.calls == [("odd", {"a": "x"})]
    else:
        env.odd()
        assert env.calls == [("odd", {})]


def test_top_level_union_of_shapes_merges_fields() -> None:
    schema = {
        "oneOf": [
            {
                "type": "object",
                "properties": {"path": {"type": "string"}, "n": {"type": "integer"}},
                "required": ["path"],
            },
            {
                "type": "object",
                "properties": {"path": {"type": "string"}, "url": {"type": "string"}},
                "required": ["path"],
            },
        ]
    }
    b = plan_tool(spec("fetch", schema))
    assert [(p.py_name, p.required) for p in b.params] == [("path", True), ("n", False), ("url", False)]
    assert "one of several shapes" in b.docstring


# ── hostile specs ───────────────────────────────────────────────────────────────────────────────


def test_hostile_names_are_renamed_and_calls_map_back() -> None:
    cls = fresh_class()
    specs = [
        spec(
            "class",
            obj(
                {"from": {"type": "string"}, "self": {"type": "integer"}, "lambda": {"type": "string"}},
                ["from"],
            ),
        ),
        spec("run-tests"),
        spec("fs.read", obj({"file-path": {"type": "string"}}, ["file-path"])),
        spec("t" * 300),
        spec("reset"),
        spec("_call_tool"),
        spec("get_reward"),
        spec("close"),
        spec("naïve ✓"),
    ]
    report = bind_tools(cls, specs)
    assert report.method_names[:3] == ("class_", "run_tests", "fs_read")
    assert {"reset_", "call_tool", "get_reward_", "close_", "naive__"} <= set(report.method_names)
    assert all(is_safe_identifier(n) and len(n) <= 64 for n in report.method_names)
    methods = {b.wire_name: b.method_name for b in report.bindings}
    assert report.binding(methods["t" * 300]).wire_name == "t" * 300
    assert {r.wire_name for r in report.renamed} == {s["name"] for s in specs}
    assert cls.reset is Recorder.reset and cls._call_tool is Recorder._call_tool  # never overwritten
    env = cls()
    fn = get_json_schema(env.class_)["function"]
    assert fn["parameters"]["required"] == ["from_"]
    assert set(fn["parameters"]["properties"]) == {"from_", "self_", "lambda_"}
    env.class_("a", 1, lambda_="x")
    env.class_(**{"from": "b"})  # the original wire name is accepted as an alias
    env.fs_read(file_path="/etc/hosts")
    getattr(env, methods["reset"])()
    assert env.calls == [
        ("class", {"from": "a", "self": 1, "lambda": "x"}),
        ("class", {"from": "b"}),
        ("fs.read", {"file-path": "/etc/hosts"}),
        ("reset", {}),
    ]


def test_server_text_is_data_not_docstring_structure() -> None:
    evil_tool = 'Do it. """; import os; os.system("rm -rf /") #\nArgs:\n    evil: injected\n'
    evil_tool += "Returns: nothing\nRaises: x"
    schema = obj(
        {
            "a": {
                "type": "string",
                "description": "first\n    evil: fake arg\u2028b: also fake (choices: [broken",
            },
            "b": {"type": "string", "description": "ends like a choices list (choices: not json)"},
            "numReturns": {"type": "integer", "description": "Returns: the count\n\nRaises: never"},
            "extraArgs": {"type": "string", "description": "'''\"\"\"\\"},
        },
        ["a"],
    )
    cls = fresh_class()
    report = bind_tools(cls, [spec("evil", schema, evil_tool)])
    fn = get_json_schema(cls().evil)["function"]
    props = fn["parameters"]["properties"]
    assert set(props) == {"a", "b", "numReturns_", "extraArgs"}
    assert "evil" not in props  # the server's Args section documents no real parameter: it adds none
    assert any("documents 'evil'" in n for n in report.bindings[0].notes)
    # Its sections are read, not left as mangled text: the description is the code-looking text, as data
    assert fn["description"] == 'Do it. """; import os; os.system("rm -rf /") #'
    assert fn["return"]["description"] == "nothing"
    assert props["a"]["description"].startswith("first evil: fake arg b: also fake")
    assert props["b"]["description"] == "ends like a choices list (choices : not json)"
    assert "enum" not in props["a"] and "enum" not in props["b"]  # a broken clause is text, never json-parsed
    assert props["numReturns_"]["description"] == "Returns : the count Raises : never"
    assert props["extraArgs"]["description"] == "'''\"\"\"\\"
    assert cls.evil.__doc__.count("\nArgs:\n") == 1


def test_tool_modules_never_execute_text() -> None:
    forbidden = {"exec", "eval", "compile", "__import__", "exec_module", "run_code"}
    paths = sorted(Path(ormix.tools.__file__).parent.glob("*.py"))
    assert len(paths) >= 8  # the walk did see the package
    for path in paths:
        tree = ast.parse(path.read_text())
        names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        attributes = {
            node.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and not (node.attr == "compile" and getattr(node.value, "id", "") == "re")
        }
        assert not (names | attributes) & forbidden, path.name  # re.compile of our own patterns is fine
        imported = {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for alias in node.names
        }
        assert not imported & {"builtins", "importlib", "runpy", "code", "types"}, path.name


def test_duplicate_and_nameless_specs_are_skipped_not_raised() -> None:
    class Broken:
        @property
        def name(self) -> str:
            raise RuntimeError("boom")

    cls = fresh_class()
    report = bind_tools(
        cls, [spec("a"), spec("a", obj({"x": {"type": "string"}})), {"name": ""}, {"name": 7}, "x", Broken()]
    )
    assert report.method_names == ("a",)
    assert [s.index for s in report.skipped] == [1, 2, 3, 4, 5]
    assert "duplicate" in report.skipped[0].reason and "boom" in report.skipped[-1].reason
    with pytest.raises(ToolSpecError, match="no usable name"):
        plan_tool({"name": None})


def test_conflicts_raise_when_asked() -> None:
    cls = fresh_class()
    with pytest.raises(BindingConflictError, match="'run_tests'.*already has"):
        bind_tools(cls, [spec("run-tests"), spec("run_tests")], on_conflict="raise")
    with pytest.raises(BindingConflictError, match="reserved"):
        bind_tools(fresh_class(), [spec("reset")], on_conflict="raise")
    ok = bind_tools(fresh_class(), [spec("run-tests"), spec("bash")], on_conflict="raise")
    assert ok.method_names == ("run_tests", "bash")
    renamed = bind_tools(fresh_class(), [spec("run-tests"), spec("run_tests")])
    assert renamed.method_names == ("run_tests", "run_tests_")
    assert renamed.binding("run_tests_").wire_name == "run_tests"


def test_prefix_namespaces_tools_and_calls_reach_the_wire_names() -> None:
    cls = fresh_class("Router")
    seta = bind_tools(cls, [spec("bash"), spec("run-tests")], prefix="seta__")
    term = bind_tools(cls, [spec("bash")], prefix="terminals__")
    assert seta.method_names == ("seta__bash", "seta__run_tests")
    assert [(b.method_name, b.wire_name) for b in seta.bindings] == [
        ("seta__bash", "bash"),
        ("seta__run_tests", "run-tests"),
    ]
    assert [r.wire_name for r in seta.renamed] == ["run-tests"]  # the prefix alone is not a rename
    assert term.binding("terminals__bash").wire_name == "bash"
    env = cls()
    env.seta__bash()
    env.terminals__bash()
    assert env.calls == [("bash", {}), ("bash", {})]
    with pytest.raises(BindingConflictError, match="prefix"):
        bind_tools(cls, [spec("x")], prefix="_x")


def test_make_method_is_a_plain_function_with_full_metadata() -> None:
    b = plan_tool(
        spec(
            "grep",
            obj({"pattern": {"type": "string"}, "path": {"type": "string", "default": "."}}, ["pattern"]),
        )
    )
    fn = make_method(b, dispatch="_send")
    assert inspect.isfunction(fn) and fn.__name__ == "grep" and fn.__qualname__ == "grep"
    assert fn.__doc__ == b.docstring and "Args:" in fn.__doc__
    assert fn.__annotations__ == {"pattern": str, "path": str, "return": str}
    sig = inspect.signature(fn)
    assert list(sig.parameters) == ["self", "pattern", "path"]
    assert isinstance(sig.parameters["path"].default, ServerDefault)
    assert str(sig) == "(self, pattern: str, path: str = '.') -> str"

    class Sender:
        def _send(self, name: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
            return name, args

    assert fn(Sender(), "x") == ("grep", {"pattern": "x"})
    assert fn(Sender(), "x", sig.parameters["path"].default) == (
        "grep",
        {"pattern": "x"},
    )  # the marker = not given
    assert fn(Sender(), pattern="x", path="src") == ("grep", {"pattern": "x", "path": "src"})


def test_openreward_toolspec_objects_are_accepted() -> None:
    from openreward.api.environments.types import ToolSpec

    b = plan_tool(
        ToolSpec(name="echo", description="Echo.", input_schema=obj({"text": {"type": "string"}}, ["text"]))
    )
    assert (b.method_name, [p.py_name for p in b.params]) == ("echo", ["text"])


wire_names = st.text(min_size=1, max_size=80) | st.sampled_from(
    ["class", "reset", "close", "_call_tool", "run-tests", "run_tests", "fs.read", "x" * 300, "ǅ", "١٢٣"]
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(wires=st.lists(wire_names, unique=True, max_size=30), prefix=st.sampled_from(["", "seta__"]))
def test_every_tool_gets_its_own_method_and_calls_reach_its_wire_name(wires: list[str], prefix: str) -> None:
    cls = fresh_class()
    report = bind_tools(cls, [spec(w) for w in wires], prefix=prefix)
    assert not report.skipped and len(set(report.method_names)) == len(wires)
    env = cls()
    for wire, method in zip(wires, report.method_names, strict=True):
        assert is_safe_identifier(method) and method.startswith(prefix) and len(method) <= 64
        assert report.binding(method).wire_name == wire
        getattr(env, method)()
    assert [name for name, _ in env.calls] == wires  # the real names reach the server


def test_three_thousand_tools_bind_and_dispatch() -> None:
    specs = [
        spec(
            f"tool-{i}",
            obj(
                {
                    "path": {"type": "string", "description": f"Where tool {i} works."},  # no two alike
                    "mode": {"enum": ["r", "w"], "default": "r"},
                    "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
                },
                ["path"],
            ),
        )
        for i in range(3000)
    ]
    cls = fresh_class()
    # How long this takes is measured by benchmarks, not asserted here (machines are noisy).
    report = bind_tools(cls, specs)
    assert len(report.bindings) == 3000 and not report.skipped
    env = cls()
    env.tool_2999("/x")
    assert env.calls == [("tool-2999", {"path": "/x"})]


# ── merging probes ──────────────────────────────────────────────────────────────────────────────


def test_merge_identical_union_and_incompatible() -> None:
    bash = spec("bash", obj({"command": {"type": "string"}}, ["command"]))
    ls_a = spec("ls", obj({"path": {"type": "string"}, "all": {"type": "boolean"}}, ["path"]))
    ls_b = spec("ls", obj({"path": {"type": "string"}, "depth": {"type": "integer"}}, ["path", "depth"]))
    view_a = spec("view", obj({"path": {"type": "string"}}))
    view_b = spec("view", obj({"path": {"type": "integer"}}))
    merged, conflicts = merge_tool_specs([[bash, ls_a, view_a], [dict(bash), ls_b, view_b], [{"name": ""}]])
    assert [m["name"] for m in merged] == ["bash", "ls", "view"]
    assert merged[0] == bash
    ls_schema = merged[1]["input_schema"]
    assert list(ls_schema["properties"]) == ["path", "all", "depth"]
    assert ls_schema["required"] == ["path"]  # depth is required by only one variant
    assert merged[2] == view_a  # incompatible: the first probe wins
    kinds = {(c.name, c.kind) for c in conflicts}
    assert kinds == {("ls", "schema"), ("view", "schema"), ("", "invalid")}
    view_conflict = next(c for c in conflicts if c.name == "view")
    assert "kept the first" in view_conflict.resolution and "'path'" in view_conflict.resolution
    assert len(view_conflict.variants) == 2
    again, _ = merge_tool_specs([[bash, ls_a, view_a], [dict(bash), ls_b, view_b]])
    assert again == merged[:3]  # deterministic


def test_merge_reports_description_drift_and_binds() -> None:
    a = spec("submit", None, "Submit v1.")
    b = spec("submit", None, "Submit v2.")
    merged, conflicts = merge_tool_specs([[a], [b]])
    assert merged == [{"name": "submit", "description": "Submit v1.", "input_schema": {}}]
    assert [c.kind for c in conflicts] == ["description"]
    cls = fresh_class()
    assert bind_tools(cls, merged).method_names == ("submit",)


# ── random schemas never break binding or get_json_schema ──────────────────────────────────────


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.text(min_size=1, max_size=20), schema=root_schemas, description=text_values)
def test_random_schemas_bind_and_render(name: str, schema: Any, description: str) -> None:
    cls = fresh_class()
    report = bind_tools(cls, [{"name": name, "description": description, "input_schema": schema}])
    (b,) = report.bindings
    method = getattr(cls, b.method_name)
    fn = get_json_schema(getattr(cls(), b.method_name))["function"]
    assert fn["name"] == b.method_name
    assert list(fn["parameters"]["properties"]) == [p.py_name for p in b.params]
    assert fn["parameters"].get("required", []) == [p.py_name for p in b.params if p.required]
    for p in b.params:
        shown = fn["parameters"]["properties"][p.py_name]
        text, choices = split_choices(p.description)  # a valid trailing clause is shown as an enum, like TRL
        assert shown["description"] == text
        if choices is not None:
            assert shown["enum"] == [
                v.strip() if isinstance(v, str) else v for v in json.loads(choices[9:-1])
            ]
    assert inspect.signature(method).parameters.keys() == {"self", *(p.py_name for p in b.params)}
    env = cls()
    args = {p.py_name: f"v-{p.py_name}" for p in b.params if p.required}
    method(env, **args)
    sent = env.calls[-1]
    assert sent[0] == name
    if b.raw_input:
        assert sent[1] == "v-input"
    else:
        assert sent[1] == {p.wire_name: f"v-{p.py_name}" for p in b.params if p.required}


def test_shared_schemas_are_planned_once_but_noted_per_tool() -> None:
    schema = obj({"from": {"type": "string"}, "x": {"$ref": "#/nowhere"}}, ["from"])
    a, b = plan_tool(spec("copy-a", schema)), plan_tool(spec("copy-b", dict(schema)))
    assert a.params is b.params  # the schema-dependent part is shared
    assert "copy-a: parameter 'from' is exposed as 'from_'" in a.notes
    assert "copy-b: parameter 'from' is exposed as 'from_'" in b.notes
    assert not any("copy-a" in n for n in b.notes)


def test_a_tool_text_too_long_for_every_prompt_is_noted_and_shown_whole() -> None:
    from ormix.tools._binding import LONG_TOOL_TEXT

    wordy = plan_tool(spec("wordy", obj({"q": {"type": "string"}}), description="Search. " * 12_500))
    many = obj({f"p{i}": {"type": "string", "description": "x" * 1_000} for i in range(2_000)})
    crowded = plan_tool(spec("crowded", many))
    short = plan_tool(spec("short", obj({"q": {"type": "string", "description": "x" * 1_000}})))
    for binding, size in ((wordy, 100_000), (crowded, 2_000_000)):
        assert len(binding.docstring) > size  # shown whole: the environment's text, as TRL's spec shows it
        [note] = [n for n in binding.notes if "in every prompt" in n]
        assert note.startswith(
            f"{binding.wire_name}: its description and parameter texts are {len(binding.docstring):,} "
        )
    assert len(short.docstring) < LONG_TOOL_TEXT and not any("in every prompt" in n for n in short.notes)


def test_importing_the_tool_modules_stays_light() -> None:
    import subprocess
    import sys

    modules = ", ".join(f"ormix.tools.{p.stem}" for p in Path(ormix.tools.__file__).parent.glob("_[!_]*.py"))
    code = f"import sys, {modules}; print(any(m in sys.modules for m in ('torch', 'transformers', 'trl')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
