"""Small text helpers shared by the tool-binding modules: one-line text and bounded JSON snippets."""

from __future__ import annotations

import json
from typing import Any

#: Characters of one JSON value (a default, an enum, an extra keyword) shown in a description.
SNIPPET_LIMIT = 200


def one_line(text: Any) -> str:
    """``text`` with every run of whitespace, unicode line breaks included, collapsed to one space.

    ``inspect.getdoc`` would turn ``\\u2028`` and friends into real newlines, and a new line that looks like
    ``name:`` would be read as another docstring argument: text that must stay on one line goes through here.

    Example:
        >>> one_line(" a\\u2028b\\n\\tc ")
        'a b c'
    """
    return " ".join(str(text).split())


def snippet(value: Any, limit: int = SNIPPET_LIMIT, *, python: bool = False) -> str:
    """``value`` as JSON (or ``repr`` with ``python=True``), cut to ``limit`` characters ending in ``…``.

    Never raises: a value that cannot be rendered shows as ``<typename>``.

    Example:
        >>> snippet("x" * 10, 5)
        '"xxx…'
        >>> snippet(None), snippet(None, python=True)
        ('null', 'None')
    """
    try:
        text = repr(value) if python else json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 1] + "…"
