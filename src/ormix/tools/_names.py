"""Identifier-safe names for server-provided tool and parameter names.

ORS servers name tools and parameters freely (``run-tests``, ``fs.read``, ``class``, unicode, 300 characters).
TRL exposes an environment's *methods* as tools and routes the model's call by the method's ``__name__``, so
every wire name needs a Python name that is a valid ASCII identifier, not a keyword, does not start with ``_``
(TRL skips those) and is unique on its class. :func:`safe_identifier` builds such a name deterministically;
the binding keeps each method's wire name (:attr:`~ormix.tools._binding.ToolBinding.wire_name`), so calls
reach
the server under it.

Example:
    >>> safe_identifier("run-tests"), safe_identifier("class"), safe_identifier("reset", {"reset"})
    ('run_tests', 'class_', 'reset_')
    >>> len(safe_identifier("x" * 300)) == DEFAULT_MAX_LEN
    True
"""

from __future__ import annotations

import hashlib
import keyword
import re
import unicodedata
from collections.abc import Container

from ormix._errors import UsageError

#: Longest Python name :func:`safe_identifier` returns (prefix included). Long enough for any real tool name,
#: short enough to keep prompts and logs readable.
DEFAULT_MAX_LEN = 64

_HASH_LEN = 8
_PREFIX_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
_NON_WORD_RE = re.compile(r"[^A-Za-z0-9_]")


class BindingConflictError(UsageError):
    """A tool cannot get the method name it needs: a clash the caller asked to hear of, or an unusable prefix.

    Raised by ``bind_tools(..., on_conflict="raise")`` (namespaced routing turns it into a ``MixtureError``
    naming the member) and for a prefix that cannot start a method name.

    Example:
        >>> try:
        ...     validate_prefix("_seta__")
        ... except BindingConflictError as exc:
        ...     print("leading '_' would hide the tools" in str(exc))
        True
    """


def short_hash(text: str, length: int = _HASH_LEN) -> str:
    """A short, stable hex digest of ``text`` (sha256), used to keep shortened or clashing names unique."""
    # surrogatepass: a lone surrogate from JSON ("\ud800") is still a name we must hash, not a crash
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:length]


def is_safe_identifier(name: str) -> bool:
    """True when ``name`` is an ASCII identifier, not a keyword and not starting with ``_``.

    Example:
        >>> is_safe_identifier("bash"), is_safe_identifier("class"), is_safe_identifier("_x")
        (True, False, False)
    """
    return (
        isinstance(name, str)
        and name.isascii()
        and name.isidentifier()
        and not keyword.iskeyword(name)
        and not name.startswith("_")
    )


def validate_prefix(prefix: str) -> str:
    """Return ``prefix`` if it can start a tool method name, else raise :class:`BindingConflictError`.

    A prefix must be empty or an ASCII identifier that starts with a letter (``"seta__"``) and leaves room for
    the tool's own name: a leading ``_`` would hide every tool from TRL.
    """
    if not isinstance(prefix, str) or (prefix and not _PREFIX_RE.match(prefix)):
        raise BindingConflictError(
            f"tool name prefix {prefix!r} is not usable: it must be empty or an ASCII identifier starting "
            "with a letter (e.g. 'seta__'); a leading '_' would hide the tools from TRL. Pick another prefix."
        )
    if DEFAULT_MAX_LEN - len(prefix) < _HASH_LEN + 2:
        raise BindingConflictError(
            f"tool name prefix {prefix!r} leaves no room for the tools' names (methods have at most "
            f"{DEFAULT_MAX_LEN} characters); use a shorter prefix"
        )
    return prefix


def _ascii_char(ch: str) -> str:
    if ch.isascii():
        return ch if (ch.isalnum() or ch == "_") else "_"
    # Keep accented letters readable ("naïve" -> "naive"); anything else becomes "_"
    decomposed = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode("ascii")
    kept = "".join(c for c in decomposed if c.isalnum() or c == "_")
    return kept or "_"


def _sanitize(name: str, fallback: str, avoid_suffixes: tuple[str, ...]) -> str:
    """The readable base name (no uniqueness, no length cap)."""
    if name.isascii():
        text = _NON_WORD_RE.sub("_", name).lstrip("_")
    else:
        text = "".join(_ascii_char(ch) for ch in name).lstrip("_")
    if not text:
        return fallback
    if text[0].isdigit():
        text = f"{fallback}_{text}"
    if keyword.iskeyword(text) or text.endswith(avoid_suffixes):
        text += "_"
    return text


def safe_identifier(
    name: str,
    taken: Container[str] = frozenset(),
    *,
    prefix: str = "",
    fallback: str = "tool",
    avoid_suffixes: tuple[str, ...] = (),
) -> str:
    """Map an arbitrary server name to a Python name that TRL can expose as a tool.

    The result is ``prefix`` + a sanitised form of ``name``: non-identifier characters become ``_``, accents
    are dropped, leading underscores are stripped (TRL skips ``_`` names), a leading digit gets ``fallback +
    "_"``, a keyword gets a trailing ``_``, an empty name becomes ``fallback``. If that is in ``taken``, ``_``
    is appended if that is free; if it is longer than :data:`DEFAULT_MAX_LEN` or still taken, it is shortened
    and suffixed with ``_`` + 8 hex digits of sha256(``name``), so the outcome depends only on the arguments
    (deterministic across runs and ranks). ``taken`` is not modified.

    Args:
        name: The wire name (any string; non-strings are converted with ``str``).
        taken: Names that must not be returned (existing attributes, names already assigned).
        prefix: Prepended verbatim (checked by :func:`validate_prefix`); counts towards the length.
        fallback: Used for empty names and before a leading digit (a safe identifier itself).
        avoid_suffixes: Endings that force a trailing ``_`` (e.g. ``("Returns",)`` for docstring safety).

    Example:
        >>> safe_identifier("fs.read"), safe_identifier("3d", fallback="arg")
        ('fs_read', 'arg_3d')
        >>> safe_identifier("x" * 300).startswith("x" * 55 + "_")   # shortened, with a hash of the full name
        True
    """
    validate_prefix(prefix)
    room = DEFAULT_MAX_LEN - len(prefix)
    name = name if isinstance(name, str) else str(name)
    base = _sanitize(name, fallback, avoid_suffixes)

    def hashed(seed: str) -> str:
        return f"{prefix}{base[: room - _HASH_LEN - 1]}_{short_hash(seed)}"

    candidate = prefix + base if len(base) <= room else hashed(name)
    if candidate in taken and len(base) < room and prefix + base + "_" not in taken:
        # A readable second choice ("reset" -> "reset_", "self" -> "self_") before a hash suffix
        return prefix + base + "_"
    counter = 0
    while candidate in taken or not is_safe_identifier(candidate):
        # Deterministic further choices: the name's own hash first, then numbered re-hashes.
        counter += 1
        candidate = hashed(name if counter == 1 else f"{name}\x00{counter}")
    return candidate
