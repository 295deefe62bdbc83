"""`ormix check`: real servers (echo, faulty) plus a member on a closed port; and the schema→arguments generator."""

from __future__ import annotations

import io
import socket
from enum import Enum
from typing import Annotated, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, create_model
from rich.console import Console

from ormix.diagnostics.check import check_command, example_arguments, example_value, looks_final, order_tools


@pytest.fixture
def thread_serving(monkeypatch):
    """Serve `local:` members in this process."""

    monkeypatch.setenv("ORMIX_LOCAL_SERVE", "thread")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_check_names_the_dead_member_and_still_checks_the_others(tmp_path, thread_serving):
    port = closed_port()
    path = tmp_path / "mix.yaml"
    path.write_text(
        "members:\n"
        "  echo: {target: 'local:echo', num_tasks: 2}\n"
        f"  gone: {{target: 'http://127.0.0.1:{port}', env_name: echo}}\n"
        "  faulty: {target: 'local:faulty', indices: [0]}\n"
    )
    buf = io.StringIO()
    code = check_command(path, Console(file=buf, width=250, color_system=None))
    text = buf.getvalue()
    assert code == 1
    assert f"environment 'gone' (http://127.0.0.1:{port}) is unusable: connect:" in text
    assert "connect" in text.split("'gone'")[1].lower() or "refused" in text.lower()
    lines = {
        line.split()[1]: line for line in text.splitlines() if line.startswith("│ ") and "local:" in line
    }
    # echo: both tools worked; its tool calls are listed with latencies.
    assert "ok" in lines["echo"] and "2/2" in lines["echo"]
    # faulty still checked after the dead member: 9 tools, `boom` raises (reported, not fatal).
    assert "9" in lines["faulty"] and "tool error" in lines["faulty"]
    assert "tool_failed" in text and "boom" in text
    # `die` and `submit` (they look like they end the episode) ran after the others; `die` killed its session
    # and `submit` still ran, on a fresh one.
    cells = [
        [c.strip() for c in line.split("│")[1:-1]]
        for line in text.splitlines()
        if line.startswith("│ faulty")
    ]
    tools_in_order = [row[1] for row in cells if row[1] != "local:faulty"]
    assert tools_in_order[-2:] == ["die", "submit"] and len(tools_in_order) == 9
    assert "the session was gone after this call" in text
    assert "gone" not in lines  # the dead member's row names no local target
    assert "rejected" not in text  # the generated arguments satisfied every real schema


def test_check_exit_zero_when_every_member_works(tmp_path, thread_serving):
    path = tmp_path / "ok.yaml"
    path.write_text("members:\n  echo: {target: 'local:echo', num_tasks: 1}\n")
    buf = io.StringIO()
    assert check_command(path, Console(file=buf, width=200, color_system=None)) == 0
    assert "all 1 environment(s) usable" in buf.getvalue()


def test_check_refuses_a_bad_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("members:\n  echo: {target: 'local:echo'}\ntelemetry: {min_coverag: 0.3}\n")
    buf = io.StringIO()
    assert check_command(path, Console(file=buf, width=200, color_system=None)) == 2
    assert "min_coverag" in buf.getvalue()


# ── pure: schema → arguments ────────────────────────────────────────────────────────────────────────────────


def test_example_arguments_on_real_tool_surfaces():
    import json
    from pathlib import Path

    surface = json.loads(
        (Path(__file__).resolve().parents[1] / "data" / "tool-surfaces" / "seta.json").read_text()
    )
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
    assert surface["tools"]
    for tool in surface["tools"]:
        assert isinstance(example_arguments(tool["input_schema"]), dict)


def test_submit_like_tools_go_last():
    assert looks_final("submit") and looks_final("submit_solution") and looks_final("finalAnswer")
    assert not looks_final("bash") and not looks_final("read_file") and not looks_final("append")
    assert looks_final("grade_it", "") and looks_final("x", "Submit and end the episode.")
    names = [
        t["name"]
        for t in order_tools(
            [{"name": "submit_solution"}, {"name": "bash"}, {"name": "write", "description": "write a file"}]
        )
    ]
    assert names == ["bash", "write", "submit_solution"]


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
}


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from(sorted(FIELD_TYPES)), min_size=0, max_size=8, unique=True))
def test_generated_arguments_validate_against_the_pydantic_model_that_made_the_schema(names):
    """Real validator: the ORS SDK builds tool schemas from pydantic models (extra='forbid'), and so do we here."""
    model = create_model(
        "Params", __config__=ConfigDict(extra="forbid"), **{n: FIELD_TYPES[n] for n in names}
    )
    args = example_arguments(model.model_json_schema())
    model.model_validate(args)  # raises if a generated value breaks the schema
    required = {n for n in names if FIELD_TYPES[n][1] is ...}
    assert set(args) == required  # optional fields are left to the tool's defaults
