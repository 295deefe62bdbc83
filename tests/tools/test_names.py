"""Identifier-safe, reversible names for server-provided tool and parameter names (pure; Hypothesis properties)."""

from __future__ import annotations

import keyword

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ormix.tools import NameMap, NameMapError, is_safe_identifier, safe_identifier
from ormix.tools.names import validate_prefix

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("bash", "bash"),
        ("class", "class_"),
        ("run-tests", "run_tests"),
        ("fs.read", "fs_read"),
        ("_private", "private"),
        ("__init__", "init__"),
        ("", "tool"),
        ("___", "tool"),
        ("3d", "tool_3d"),
        ("naïve", "naive"),
        ("None", "None_"),
        ("match", "match"),  # soft keywords are valid names
    ],
)
def test_safe_identifier_examples(name: str, expected: str) -> None:
    assert safe_identifier(name, set()) == expected


def test_safe_identifier_long_and_clashing_names() -> None:
    long = "x" * 300
    short = safe_identifier(long, set())
    assert len(short) == 64 and short.startswith("x" * 40) and short != safe_identifier("x" * 299, set())
    assert safe_identifier("reset", {"reset"}) == "reset_"
    third = safe_identifier("reset", {"reset", "reset_"})
    assert third.startswith("reset_") and len(third) == len("reset_") + 8
    assert safe_identifier("bash", set(), prefix="seta__") == "seta__bash"
    with pytest.raises(ValueError, match="prefix"):
        safe_identifier("bash", set(), prefix="_hidden")
    with pytest.raises(ValueError, match="room"):
        safe_identifier("bash", set(), prefix="p" * 60)


names_text = st.text(max_size=80) | st.sampled_from(
    ["class", "from", "self", "lambda", "_", "__", "run-tests", "fs.read", "None", "x" * 300, "ǅ", "١٢٣"]
)


@FAST
@given(name=names_text, taken=st.sets(names_text | st.sampled_from(["tool", "tool_", "class_", "run_tests"])))
def test_safe_identifier_properties(name: str, taken: set[str]) -> None:
    out = safe_identifier(name, taken)
    assert out.isidentifier() and out.isascii()
    assert not keyword.iskeyword(out)
    assert not out.startswith("_")
    assert out not in taken
    assert len(out) <= 64
    assert out == safe_identifier(name, set(taken))  # deterministic
    prefixed = safe_identifier(name, taken, prefix="env__", max_len=40)
    assert prefixed.startswith("env__") and len(prefixed) <= 40 and is_safe_identifier(prefixed)


@FAST
@given(wires=st.lists(names_text, unique=True, max_size=30), prefix=st.sampled_from(["", "seta__", "a"]))
def test_name_map_is_reversible(wires: list[str], prefix: str) -> None:
    names = NameMap()
    pys = [names.assign(w, prefix=prefix, taken={"reset"}) for w in wires]
    assert len(set(pys)) == len(wires)
    assert "reset" not in pys
    for w, py in zip(wires, pys, strict=True):
        assert names.to_wire(py) == w and names.to_python(w) == py
        assert names.assign(w, prefix=prefix) == py  # stable
    assert dict(names.items()) == {py: w for py, w in zip(pys, wires, strict=True)}
    assert names.renamed == {py: w for py, w in zip(pys, wires, strict=True) if py != w}


def test_name_map_errors_are_clear() -> None:
    names = NameMap({"fs_read": "fs.read"})
    with pytest.raises(NameMapError, match="no tool method named 'nope'"):
        names.to_wire("nope")
    with pytest.raises(NameMapError, match="already maps"):
        names.add("fs_read", "other")
    with pytest.raises(NameMapError, match="not a safe identifier"):
        names.add("_x", "x")


@FAST
@given(name=names_text, suffix=st.sampled_from(["Returns", "Raises"]))
def test_avoided_suffixes_never_end_a_name(name: str, suffix: str) -> None:
    """Parameter names must not end like a docstring section (`numReturns:` would end the Args block)."""
    out = safe_identifier(name + suffix, set(), avoid_suffixes=("Returns", "Raises"))
    assert not out.endswith(("Returns", "Raises")) and is_safe_identifier(out)


@pytest.mark.parametrize("prefix", ["_x", "1a", "a-b", "é"])
def test_unusable_prefixes_are_refused(prefix: str) -> None:
    with pytest.raises(ValueError, match="prefix"):
        validate_prefix(prefix)
