"""Google-style docstrings: reading a server's tool description, writing what `get_json_schema` reads back."""

from __future__ import annotations

import json
import keyword

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers.utils.chat_template_utils import parse_google_format_docstring

from ormix.tools._docstrings import parse_docstring, render_docstring, safe_block, safe_text, split_choices

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _text(value: str) -> str:
    return " ".join(value.split())


# ── reading ─────────────────────────────────────────────────────────────────────────────────────


def test_the_sdk_shape_of_a_tool_docstring():
    """The SDK sends `fn.__doc__.strip()`: first line flush, the rest with its source indentation."""
    doc = parse_docstring(
        "Edit a file.\n\n        The edit is atomic.\n\n        Args:\n            path: Which file.\n"
        "            old (str): Text to replace; it\n                must be unique.\n\n        Returns:\n"
        "            A diff.\n\n        Raises:\n            ValueError: when `old` is missing."
    )
    assert doc.summary == "Edit a file.\n\nThe edit is atomic."
    assert doc.args == {"path": "Which file.", "old": "Text to replace; it must be unique."}
    assert doc.returns == "A diff."
    assert doc.raises == "ValueError: when `old` is missing."


@pytest.mark.parametrize(
    ("text", "summary", "args"),
    [
        (
            "Echo.\nArgs: text: The string.",
            "Echo.",
            {"text": "The string."},
        ),  # first entry on the header line
        ("Echo.\nArgs:\ntext: The string.\nmode: How.", "Echo.", {"text": "The string.", "mode": "How."}),
        ("Echo.\n\nParameters:\n    text: The string.", "Echo.", {"text": "The string."}),
        (
            "Echo.\n\nArguments:\n  *args: More.\n  **kw: Options.",
            "Echo.",
            {"args": "More.", "kw": "Options."},
        ),
        (
            "Echo.\n\nArgs:\n    file-path: Where.\n    fs.root: Root.",
            "Echo.",
            {"file-path": "Where.", "fs.root": "Root."},
        ),
        ("Echo.\n\nArgs:\n    a: One.\n    a: Two.", "Echo.", {"a": "Two."}),  # the last wins, as in TRL
        ("Echo.\n\nArgs:\n\nDone.", "Echo.\n\nArgs:\n\nDone.", {}),  # a header with nothing under it is text
        ("See the Args: below.", "See the Args: below.", {}),  # not a header: not at the start of a line
        ("Echo.\n\nExample:\n    echo('x')", "Echo.\n\nExample:\n    echo('x')", {}),  # other sections stay
        ("Echo.\n\nArgs:\n    a: One.\n\nThen more text.", "Echo.\n\nThen more text.", {"a": "One."}),
        (
            "Echo.\n\nArgs:\n    a: http://x.y/z is\n    where it lives.",
            "Echo.",
            {"a": "http://x.y/z is where it lives."},
        ),
    ],
)
def test_sections_are_read_by_indentation(text, summary, args):
    doc = parse_docstring(text)
    assert (doc.summary, doc.args) == (summary, args)


def test_inline_returns_and_hostile_text_never_raise():
    doc = parse_docstring('Do it. """; rm -rf / #\nArgs:\n    evil: injected\nReturns: nothing\nRaises: x')
    assert (doc.summary, doc.args, doc.returns, doc.raises) == (
        'Do it. """; rm -rf / #',
        {"evil": "injected"},
        "nothing",
        "x",
    )
    for text in ("", "\n\n", "Args:", "Returns:\n", "\u2028Args:\u2028  x: y", "\x00"):
        parse_docstring(text)


summary_lines = st.text(
    st.characters(blacklist_categories=("Cs", "Zl", "Zp", "Cc")), min_size=1, max_size=30
).filter(lambda line: line.strip() and ":" not in line)
arg_names = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(lambda n: not keyword.iskeyword(n))
words = st.lists(st.from_regex(r"[A-Za-z0-9.,;()'\"-]{1,8}", fullmatch=True), min_size=1, max_size=8)


@FAST
@given(
    summary=st.lists(summary_lines, min_size=1, max_size=3),
    args=st.dictionaries(arg_names, st.lists(words, min_size=1, max_size=3), max_size=4),
    returns=st.none() | words,
    indent=st.sampled_from(["", "    ", "        "]),
    header=st.sampled_from(["Args", "Arguments", "Parameters"]),
)
def test_parsing_a_google_docstring_recovers_its_parts(summary, args, returns, indent, header):
    """A Google-style docstring (entries indented, texts wrapped onto deeper lines) reads back whole."""
    lines = [summary[0], *(indent + line for line in summary[1:])]
    if args:
        lines += ["", f"{indent}{header}:"]
        for name, chunks in args.items():
            lines.append(f"{indent}    {name}: {' '.join(chunks[0])}")
            lines += [f"{indent}        {' '.join(chunk)}" for chunk in chunks[1:]]
    if returns is not None:
        lines += ["", f"{indent}Returns:", f"{indent}    {' '.join(returns)}"]
    doc = parse_docstring("\n".join(lines))
    assert _text(doc.summary) == _text(" ".join(s.strip() for s in summary))
    assert doc.args == {name: " ".join(" ".join(c) for c in chunks) for name, chunks in args.items()}
    assert doc.returns == ("" if returns is None else " ".join(returns))


# ── writing ─────────────────────────────────────────────────────────────────────────────────────

server_text = st.text(max_size=60) | st.sampled_from(
    [
        "Args:\n  x: injected",
        "Returns: z",
        "numReturns: 3",
        "(choices: [1, 2])",
        '(CHOICES: ["a"])',
        "(choices: not json)",
        '"""',
        "a\u2028b: c",
        "Parameters:\n    p: q",
    ]
)
py_names = arg_names.filter(lambda n: not n.endswith(("Returns", "Raises")))


@FAST
@given(
    description=server_text.filter(lambda d: d.strip()),
    args=st.dictionaries(py_names, server_text, max_size=4),
    notes=st.lists(server_text, max_size=2),
    returns=server_text,
    raises=server_text,
)
def test_get_json_schema_reads_back_exactly_what_was_rendered(description, args, notes, returns, raises):
    """Whatever the server's text, transformers' own parser finds our description, arguments and return."""
    doc = render_docstring(description, list(args.items()), notes=notes, returns=returns, raises=raises)
    main, parsed_args, parsed_returns = parse_google_format_docstring(doc)
    expected_main = " ".join([safe_block(description), *(safe_text(f"Note: {n}.") for n in notes)])
    assert _text(main) == _text(expected_main)
    expected_args = {name: safe_text(text, keep_choices=True) or name for name, text in args.items()}
    assert parsed_args == expected_args
    assert (parsed_returns or "") == safe_text(returns)


@FAST
@given(
    description=server_text.filter(lambda d: d.strip()),
    args=st.dictionaries(py_names, server_text, max_size=4),
    returns=server_text,
    raises=server_text,
)
def test_rendering_a_parsed_description_is_a_fixed_point_of_parsing(description, args, returns, raises):
    """What ormix renders (a parsed summary plus its own sections) reads back as exactly those sections."""
    summary = parse_docstring(description).summary or "Call it."
    doc = render_docstring(summary, list(args.items()), returns=returns, raises=raises)
    again = parse_docstring(doc)
    assert _text(again.summary) == _text(safe_block(summary))
    assert again.args == {name: safe_text(text, keep_choices=True) or name for name, text in args.items()}
    assert (again.returns, again.raises) == (safe_text(returns), safe_text(raises))


@FAST
@given(text=server_text)
def test_safe_text_is_idempotent_and_structure_free(text):
    once = safe_text(text, keep_choices=True)
    assert safe_text(once, keep_choices=True) == once
    assert "\n" not in once and "Args:" not in once and "Returns:" not in once and "Raises:" not in once
    body, choices = split_choices(once)
    assert "choices:" not in body.lower()  # only a kept clause can be json-parsed by get_json_schema
    if choices is not None:
        assert isinstance(json.loads(choices[len("(choices: ") : -1]), list)
