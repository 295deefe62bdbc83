"""Identifier-safe names for server-provided tool and parameter names (pure; Hypothesis properties)."""

from __future__ import annotations

import keyword

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ormix.tools._names import BindingConflictError, is_safe_identifier, safe_identifier, validate_prefix

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
    with pytest.raises(BindingConflictError, match="prefix"):
        safe_identifier("bash", set(), prefix="_hidden")
    with pytest.raises(BindingConflictError, match="room"):
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
    prefixed = safe_identifier(name, taken, prefix="env__")
    assert prefixed.startswith("env__") and len(prefixed) <= 64 and is_safe_identifier(prefixed)


@FAST
@given(name=names_text, suffix=st.sampled_from(["Returns", "Raises"]))
def test_avoided_suffixes_never_end_a_name(name: str, suffix: str) -> None:
    """Parameter names must not end like a docstring section (`numReturns:` would end the Args block)."""
    out = safe_identifier(name + suffix, set(), avoid_suffixes=("Returns", "Raises"))
    assert not out.endswith(("Returns", "Raises")) and is_safe_identifier(out)


@pytest.mark.parametrize("prefix", ["_x", "1a", "a-b", "é"])
def test_unusable_prefixes_are_refused(prefix: str) -> None:
    with pytest.raises(BindingConflictError, match="prefix"):
        validate_prefix(prefix)
