"""Target-string parsing: the four accepted forms, their canonical strings, and the errors for the rest."""

from __future__ import annotations

import keyword
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ormix._targets import Target, TargetError, parse_target

EXAMPLES = ('"Eigent/SETA"', '"http://localhost:8080"', '"local:terminals"', '"my_pkg.envs:MyEnv"')

catalog_part = st.text(alphabet=string.ascii_letters + string.digits + "_.-", min_size=1, max_size=20).filter(
    lambda p: set(p) != {"."}
)
identifier = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}", fullmatch=True).filter(
    lambda s: not keyword.iskeyword(s)
)
local_name = st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,20}", fullmatch=True)
host = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?(\.[a-z0-9]{1,8}){0,3}", fullmatch=True)


def assert_lists_forms(err: TargetError) -> None:
    for example in EXAMPLES:
        assert example in str(err), f"{example} missing from: {err}"


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("Eigent/SETA", "catalog", "Eigent/SETA"),
        ("kanishk/EndlessTerminals", "catalog", "kanishk/EndlessTerminals"),
        ("nebius/SWE-rebench-V2", "catalog", "nebius/SWE-rebench-V2"),
        ("http://localhost:8080", "url", "http://localhost:8080"),
        ("https://envs.example.com/ors/v1", "url", "https://envs.example.com/ors/v1"),
        ("HTTP://127.0.0.1:9000", "url", "HTTP://127.0.0.1:9000"),
        ("local:terminals", "local", "terminals"),
        ("my_pkg.envs:MyEnv", "module", "my_pkg.envs:MyEnv"),
        ("  Eigent/SETA \n", "catalog", "Eigent/SETA"),
    ],
)
def test_accepted_forms(text: str, kind: str, value: str) -> None:
    t = parse_target(text)
    assert t == Target(kind, value)  # type: ignore[arg-type]
    assert parse_target(str(t)) == t


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("seta", "neither"),
        ("", "empty"),
        ("Eigent/SETA/extra", "exactly one '/'"),
        ("/SETA", "owner and name"),
        ("Eigent/", "owner and name"),
        ("../SETA", "owner and name"),
        ("Eig ent/SETA", "owner and name"),
        ("local:", "environment name"),
        ("local:bad name", "environment name"),
        ("local:9lives", "environment name"),
        ("my_pkg.envs:", "class name"),
        ("1pkg:Env", "module path"),
        ("pkg..mod:Env", "module path"),
        ("pkg:class", "class name"),
        ("localhost:8080", "http://localhost:8080"),
        ("ftp://host/x", "http:// or https://"),
        ("http://", "no host"),
        ("http://host:99999", "does not parse"),
        ("http://ho st", "whitespace"),
    ],
)
def test_rejected_forms_explain_and_list_accepted_forms(text: str, why: str) -> None:
    with pytest.raises(TargetError) as info:
        parse_target(text)
    assert why in str(info.value)
    assert_lists_forms(info.value)
    assert isinstance(info.value, ValueError)


def test_non_string() -> None:
    with pytest.raises(TargetError, match="must be a string"):
        parse_target(42)  # type: ignore[arg-type]


@given(catalog_part, catalog_part)
def test_catalog_names_parse(owner: str, name: str) -> None:
    t = parse_target(f"{owner}/{name}")
    assert t == Target("catalog", f"{owner}/{name}")
    assert str(t) == f"{owner}/{name}"


@given(local_name)
def test_local_names_parse(name: str) -> None:
    t = parse_target(f"local:{name}")
    assert t == Target("local", name)
    assert str(t) == f"local:{name}"


@given(st.lists(identifier, min_size=1, max_size=4), identifier)
def test_module_targets_parse(parts: list[str], cls: str) -> None:
    text = ".".join(parts) + ":" + cls
    t = parse_target(text)
    assert t == Target("module", text)


@given(
    st.sampled_from(["http", "https"]),
    host,
    st.none() | st.integers(1, 65535),
    st.from_regex(r"(/[a-z0-9_-]{1,8}){0,3}", fullmatch=True),
)
def test_urls_parse(scheme: str, hostname: str, port: int | None, path: str) -> None:
    text = f"{scheme}://{hostname}{f':{port}' if port else ''}{path}"
    t = parse_target(text)
    assert t == Target("url", text)


@given(st.text(max_size=40))
def test_any_text_parses_or_raises_target_error(text: str) -> None:
    try:
        t = parse_target(text)
    except TargetError as e:
        assert_lists_forms(e)
    else:
        assert t.kind in ("catalog", "url", "local", "module")
        assert parse_target(str(t)) == t  # the canonical string is a fixed point


@given(st.text(alphabet=string.ascii_letters + string.digits + "/:._-", max_size=30))
def test_target_like_text_is_classified_by_its_shape(text: str) -> None:
    try:
        t = parse_target(text)
    except TargetError:
        return
    if t.kind == "local":
        assert text.startswith("local:")
    elif t.kind == "module":
        assert text.count(":") == 1 and "/" not in text
    elif t.kind == "catalog":
        assert text.count("/") == 1 and ":" not in text
