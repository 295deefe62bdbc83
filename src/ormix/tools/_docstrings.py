"""Google-style docstrings: read a server's tool description, write one that ``get_json_schema`` reads back.

TRL shows the model ``transformers.utils.get_json_schema(method)``, which splits the method's docstring with
regular expressions: the description is the text before the first ``Args:``, ``Returns:`` or ``Raises:``
*anywhere*; ``Args:`` lines ``name: text`` (``name (type): text`` too) describe parameters; ``Returns:``
becomes the return description; a parameter text ending in ``(choices: [...])`` becomes an ``enum`` (and one
that is not valid JSON makes it raise).

The ORS SDK's ``@tool`` descriptions are the tool functions' docstrings, so they often carry their own
``Args:`` section. :func:`parse_docstring` reads it (by indentation, like Sphinx's napoleon: ``Args``/
``Arguments``/``Parameters``/``Params``, ``Returns``/``Return``, ``Raises``), so the parameter texts can go
where the model reads them and the description stays clean. :func:`render_docstring` writes the docstring of
a bound method; :func:`safe_text` and :func:`safe_block` make server text unable to change its structure.

Example:
    >>> doc = parse_docstring('''Echo the text back.
    ...
    ...     Args:
    ...         text: The string to echo back.
    ...     ''')
    >>> doc.summary, doc.args
    ('Echo the text back.', {'text': 'The string to echo back.'})
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from ormix.tools._schema import is_scalar
from ormix.tools._text import one_line

_SECTIONS = {
    "Args": "args",
    "Arguments": "args",
    "Parameters": "args",
    "Params": "args",
    "Returns": "returns",
    "Return": "returns",
    "Raises": "raises",
}
_HEADER_RE = re.compile(r"([ \t]*)(" + "|".join(_SECTIONS) + r"):(?:[ \t]+(.*))?\Z")
_ENTRY_RE = re.compile(r"\*{0,2}([A-Za-z_][\w.\-]*)[ \t]*(?:\([^()]*\))?[ \t]*:(?:[ \t]+(.*))?\Z")
_MARKER_RE = re.compile(r"(Args|Returns|Raises):")  # what get_json_schema splits on, anywhere in the text
_CHOICES_MARK_RE = re.compile(r"\(\s*choices\s*:", re.IGNORECASE)
_CHOICES_RE = re.compile(r"\(choices:\s*(.*?)\)\s*$", re.IGNORECASE)  # get_json_schema's own pattern


@dataclass(frozen=True)
class Docstring:
    """A parsed tool description: the text outside recognised sections, and the sections' contents.

    ``summary`` keeps its line structure (``inspect.cleandoc``-ed, blank-line runs collapsed); ``args`` maps
    each documented name to its text on one line; ``returns`` and ``raises`` are one line each (``""`` if
    absent).

    Example:
        >>> parse_docstring("Run it.\\n\\nReturns:\\n    The output.").returns
        'The output.'
    """

    summary: str
    args: dict[str, str] = field(default_factory=dict)
    returns: str = ""
    raises: str = ""


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def parse_docstring(text: str) -> Docstring:
    """Split a description into its free text and its Google-style ``Args``/``Returns``/``Raises`` sections.

    A section is a header line (``Args:``; its first entry may follow on the same line) and the lines after it
    that are blank or indented deeper; it ends at the first line indented no deeper than the header. An
    ``Args`` entry is ``name: text`` or ``name (type): text``; deeper lines continue it. Entries written flush
    with the header (no indentation) are read too, one per line. A header with nothing under it is left as
    text. The last entry of a repeated name wins (as in ``get_json_schema``). Never raises.

    Example:
        >>> doc = parse_docstring('''Search files.
        ...
        ... Args:
        ...     pattern (str): What to look for,
        ...         as a regular expression.
        ...     path: Where to look.
        ...
        ... Prefer narrow paths.''')
        >>> doc.summary
        'Search files.\\n\\nPrefer narrow paths.'
        >>> doc.args
        {'pattern': 'What to look for, as a regular expression.', 'path': 'Where to look.'}
    """
    lines = [line.rstrip() for line in inspect.cleandoc(str(text)).splitlines()]
    kept: list[str] = []
    sections: dict[str, list[str]] = {"args": [], "returns": [], "raises": []}
    args: dict[str, str] = {}
    i = 0
    while i < len(lines):
        header = _HEADER_RE.match(lines[i])
        if header is None:
            kept.append(lines[i])
            i += 1
            continue
        depth = len(header.group(1))
        kind = _SECTIONS[header.group(2)]
        j = i + 1
        body: list[str] = []
        while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) > depth):
            body.append(lines[j])
            j += 1
        margin = min((_indent(line) for line in body if line.strip()), default=depth + 1)
        if kind == "args" and not any(line.strip() for line in body):
            while j < len(lines) and _indent(lines[j]) == depth and _ENTRY_RE.match(lines[j].strip()):
                body.append(" " * margin + lines[j].strip())  # entries flush with the header
                j += 1
        if header.group(3):
            body.insert(0, " " * margin + header.group(3))  # the first entry, on the header's line
        if not any(line.strip() for line in body):
            kept.append(lines[i])
            i += 1
            continue
        if kind == "args":
            args.update(_entries(body))
        else:
            sections[kind].append(one_line(" ".join(body)))
        i = j
    summary = re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()
    return Docstring(summary, args, " ".join(sections["returns"]), " ".join(sections["raises"]))


def _entries(body: list[str]) -> dict[str, str]:
    lines = [line for line in body if line.strip()]
    margin = min(_indent(line) for line in lines)
    entries: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        entry = _ENTRY_RE.match(line.strip()) if _indent(line) == margin else None
        if entry is not None:
            current = entries[entry.group(1)] = [entry.group(2) or ""]
        elif current is not None:
            current.append(line.strip())
    return {name: one_line(" ".join(parts)) for name, parts in entries.items()}


def split_choices(text: str) -> tuple[str, str | None]:
    """Split off a trailing ``(choices: [...])`` clause that ``get_json_schema`` would turn into an ``enum``.

    Returns ``(text without the clause, clause)`` when the clause is a non-empty JSON list of scalars (the
    clause rewritten as canonical JSON), else ``(text, None)``.

    Example:
        >>> split_choices('The drink (choices: ["tea", "coffee"])')
        ('The drink', '(choices: ["tea", "coffee"])')
        >>> split_choices("Broken (choices: [tea)")
        ('Broken (choices: [tea)', None)
    """
    match = _CHOICES_RE.search(text) if text.rstrip().endswith(")") else None
    if match is None:
        return text, None
    try:
        values = json.loads(match.group(1))
    except ValueError:
        return text, None
    if not isinstance(values, list) or not values or not all(is_scalar(v) for v in values):
        return text, None
    return text[: match.start()].rstrip(), f"(choices: {json.dumps(values, ensure_ascii=False)})"


def _neutralize(text: str) -> str:
    # "Args:" / "Returns:" / "Raises:" anywhere would cut get_json_schema's sections short, and a stray
    # "(choices:" would be json-parsed (and raise) when the text ends with ")"
    if ":" not in text:
        return text
    return _CHOICES_MARK_RE.sub("(choices :", _MARKER_RE.sub(r"\1 :", text))


def safe_text(text: str, *, keep_choices: bool = False) -> str:
    """``text`` as one docstring line that ``get_json_schema`` reads back verbatim.

    Whitespace (unicode line breaks included) collapses to single spaces, ``Args:``/``Returns:``/``Raises:``
    become ``Args :`` etc., and ``(choices:`` becomes ``(choices :``; with ``keep_choices=True`` a valid
    trailing clause (see :func:`split_choices`) is kept so ``get_json_schema`` shows it as an ``enum``.
    Idempotent.

    Example:
        >>> safe_text("Count.\\nReturns: the total")
        'Count. Returns : the total'
        >>> safe_text('Mode (choices: ["r", "w"])', keep_choices=True)
        'Mode (choices: ["r", "w"])'
    """
    body, clause = split_choices(one_line(text)) if keep_choices else (one_line(text), None)
    body = _neutralize(body)
    return f"{body} {clause}".lstrip() if clause else body


def safe_block(text: str) -> str:
    """``text`` as a multi-line docstring description: lines kept, section markers neutralised.

    Example:
        >>> safe_block("First line.\\n\\nSee Args: below.")
        'First line.\\n\\nSee Args : below.'
    """
    return _neutralize("\n".join(line.rstrip() for line in str(text).splitlines()).strip())


def render_docstring(
    description: str,
    args: Iterable[tuple[str, str]] = (),
    *,
    notes: Iterable[str] = (),
    returns: str = "",
    raises: str = "",
) -> str:
    """The docstring of a bound tool method, in the form ``get_json_schema`` parses back exactly.

    ``args`` are ``(python_name, text)`` pairs; names must be identifiers that do not end in ``Returns`` or
    ``Raises`` (:func:`~ormix.tools._names.safe_identifier` with ``avoid_suffixes`` makes such names). Every
    text goes through :func:`safe_text` / :func:`safe_block`, so server text cannot add sections or arguments.

    Example:
        >>> print(render_docstring("Echo.", [("text", "The string.")], returns="The same string."))
        Echo.
        <BLANKLINE>
        Args:
            text: The string.
        <BLANKLINE>
        Returns:
            The same string.
    """
    doc = safe_block(description)
    note_lines = [safe_text(f"Note: {n}.") for n in notes]
    if note_lines:
        doc += "\n\n" + "\n".join(note_lines)
    arg_lines = [f"    {name}: {safe_text(text, keep_choices=True) or name}" for name, text in args]
    if arg_lines:
        doc += "\n\nArgs:\n" + "\n".join(arg_lines)
    if returns.strip():
        doc += "\n\nReturns:\n    " + safe_text(returns)
    if raises.strip():
        doc += "\n\nRaises:\n    " + safe_text(raises)
    return doc
