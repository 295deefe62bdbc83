"""Identifier-safe, reversible names for server-provided tool and parameter names.

ORS servers name tools and parameters freely (``run-tests``, ``fs.read``, ``class``, unicode, 300 characters).
TRL exposes an environment's *methods* as tools and routes the model's call by the method's ``__name__``, so every
wire name needs a Python name that is a valid ASCII identifier, not a keyword, does not start with ``_`` (TRL skips
those) and is unique on its class. :func:`safe_identifier` builds such a name deterministically and
:class:`NameMap` keeps the python ↔ wire mapping reversible.

Example:
    >>> safe_identifier("run-tests", set())
    'run_tests'
    >>> safe_identifier("class", set())
    'class_'
    >>> names = NameMap()
    >>> names.assign("fs.read")
    'fs_read'
    >>> names.to_wire("fs_read")
    'fs.read'
    >>> len(safe_identifier("x" * 300)) == DEFAULT_MAX_LEN
    True
"""

from __future__ import annotations

import hashlib
import keyword
import re
import unicodedata
from collections.abc import Container, Iterator

__all__ = [
    "DEFAULT_MAX_LEN",
    "NameMap",
    "NameMapError",
    "is_safe_identifier",
    "safe_identifier",
    "short_hash",
    "validate_prefix",
]

#: Longest Python name :func:`safe_identifier` returns (prefix included). Long enough for any real tool name,
#: short enough to keep prompts and logs readable.
DEFAULT_MAX_LEN = 64

_HASH_LEN = 8
_PREFIX_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
_NON_WORD_RE = re.compile(r"[^A-Za-z0-9_]")


def short_hash(text: str, length: int = _HASH_LEN) -> str:
    """A short, stable hex digest of ``text`` (sha256), used to keep shortened or clashing names unique.

    Example:
        >>> short_hash("run-tests") == short_hash("run-tests")
        True
    """
    # surrogatepass: a lone surrogate from JSON ("\\ud800") is still a name we must hash, not a crash
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
    """Return ``prefix`` if it can start a tool method name, else raise :class:`ValueError`.

    A prefix must be empty or an ASCII identifier that starts with a letter (``"seta__"``): a leading ``_``
    would hide every tool from TRL.

    Example:
        >>> validate_prefix("seta__")
        'seta__'
    """
    if not isinstance(prefix, str) or (prefix and not _PREFIX_RE.match(prefix)):
        raise ValueError(
            f"tool name prefix {prefix!r} is not usable: it must be empty or an ASCII identifier starting with a "
            "letter (e.g. 'seta__'); a leading '_' would hide the tools from TRL. Pick another prefix."
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
    max_len: int = DEFAULT_MAX_LEN,
    fallback: str = "tool",
    avoid_suffixes: tuple[str, ...] = (),
) -> str:
    """Map an arbitrary server name to a Python name that TRL can expose as a tool.

    The result is ``prefix`` + a sanitised form of ``name``: non-identifier characters become ``_``, accents are
    dropped, leading underscores are stripped (TRL skips ``_`` names), a leading digit gets ``fallback + "_"``, a
    keyword gets a trailing ``_``, an empty name becomes ``fallback``. If that is longer than ``max_len`` or already
    in ``taken``, ``_`` is appended if that is free, else it is shortened and suffixed with ``_`` + 8 hex digits of sha256(``name``), so the outcome depends
    only on the arguments (deterministic across runs and ranks). ``taken`` is not modified: add the result yourself,
    or use :class:`NameMap`, which does.

    Args:
        name: The wire name (any string; non-strings are converted with ``str``).
        taken: Names that must not be returned (existing attributes, names already assigned).
        prefix: Prepended verbatim (validated by :func:`validate_prefix`); counts towards ``max_len``.
        max_len: Longest name returned, prefix included (at least ``len(prefix) + 10``).
        fallback: Used for empty names and before a leading digit.
        avoid_suffixes: Endings that force a trailing ``_`` (e.g. ``("Returns",)`` for docstring safety).

    Returns:
        A valid ASCII identifier, not a keyword, not starting with ``_``, not in ``taken``, at most ``max_len`` long.

    Example:
        >>> safe_identifier("fs.read", set())
        'fs_read'
        >>> safe_identifier("fs_read", {"fs_read"}) != "fs_read"
        True
    """
    validate_prefix(prefix)
    if not is_safe_identifier(fallback):
        raise ValueError(f"fallback {fallback!r} must itself be a safe identifier (e.g. 'tool' or 'arg')")
    room = max_len - len(prefix)
    if room < _HASH_LEN + 2:
        raise ValueError(
            f"max_len={max_len} leaves no room for names after prefix {prefix!r}; use a shorter prefix or a larger max_len"
        )
    name = name if isinstance(name, str) else str(name)
    base = _sanitize(name, fallback, avoid_suffixes)

    def hashed(seed: str) -> str:
        stem = base[: room - _HASH_LEN - 1]
        return f"{prefix}{stem}_{short_hash(seed)}"

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


class NameMapError(KeyError):
    """A name was looked up in a :class:`NameMap` that does not hold it, or would break its one-to-one mapping.

    Example:
        >>> try:
        ...     NameMap().to_wire("bash")
        ... except NameMapError as exc:
        ...     print(exc)
        no tool method named 'bash'; known: []
    """

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class NameMap:
    """A reversible, one-to-one map between Python method names and wire (server) names.

    Example:
        >>> m = NameMap()
        >>> m.assign("run-tests", prefix="seta__")
        'seta__run_tests'
        >>> m.to_python("run-tests"), m.to_wire("seta__run_tests")
        ('seta__run_tests', 'run-tests')
        >>> dict(m.renamed)
        {'seta__run_tests': 'run-tests'}
    """

    __slots__ = ("_py_to_wire", "_wire_to_py")

    def __init__(self, pairs: dict[str, str] | None = None) -> None:
        self._py_to_wire: dict[str, str] = {}
        self._wire_to_py: dict[str, str] = {}
        for py, wire in (pairs or {}).items():
            self.add(py, wire)

    def add(self, py: str, wire: str) -> None:
        """Record ``py`` ↔ ``wire``; raises :class:`NameMapError` if either side is already mapped elsewhere.

        Example:
            >>> m = NameMap()
            >>> m.add("fs_read", "fs.read"); m.add("fs_read", "fs.read")  # the same pair again is fine
            >>> m.to_dict()
            {'fs_read': 'fs.read'}
        """
        if not is_safe_identifier(py):
            raise NameMapError(
                f"python name {py!r} is not a safe identifier; use safe_identifier() to build one"
            )
        if self._py_to_wire.get(py, wire) != wire or self._wire_to_py.get(wire, py) != py:
            raise NameMapError(
                f"cannot map {py!r} <-> {wire!r}: {py!r} already maps to {self._py_to_wire.get(py)!r} or "
                f"{wire!r} already maps to {self._wire_to_py.get(wire)!r}"
            )
        self._py_to_wire[py] = wire
        self._wire_to_py[wire] = py

    def assign(
        self,
        wire: str,
        *,
        taken: Container[str] = frozenset(),
        prefix: str = "",
        max_len: int = DEFAULT_MAX_LEN,
    ) -> str:
        """Return the Python name of ``wire``, creating a fresh unique one (see :func:`safe_identifier`) if needed.

        Example:
            >>> m = NameMap()
            >>> m.assign("reset", taken={"reset"}), m.assign("reset")
            ('reset_', 'reset_')
        """
        if wire in self._wire_to_py:
            return self._wire_to_py[wire]
        blocked = _Union(self._py_to_wire, taken)
        py = safe_identifier(wire, blocked, prefix=prefix, max_len=max_len)
        self.add(py, wire)
        return py

    def to_wire(self, py: str) -> str:
        """The wire name of Python name ``py``; raises :class:`NameMapError` if unknown.

        Example:
            >>> NameMap({"run_tests": "run-tests"}).to_wire("run_tests")
            'run-tests'
        """
        try:
            return self._py_to_wire[py]
        except KeyError:
            raise NameMapError(
                f"no tool method named {py!r}; known: {sorted(self._py_to_wire)[:20]}"
            ) from None

    def to_python(self, wire: str) -> str:
        """The Python name of wire name ``wire``; raises :class:`NameMapError` if unknown.

        Example:
            >>> NameMap({"run_tests": "run-tests"}).to_python("run-tests")
            'run_tests'
        """
        try:
            return self._wire_to_py[wire]
        except KeyError:
            raise NameMapError(
                f"no tool with wire name {wire!r}; known: {sorted(self._wire_to_py)[:20]}"
            ) from None

    def items(self) -> list[tuple[str, str]]:
        """``(python_name, wire_name)`` pairs in insertion order.

        Example:
            >>> NameMap({"b": "b", "a_b": "a-b"}).items()
            [('b', 'b'), ('a_b', 'a-b')]
        """
        return list(self._py_to_wire.items())

    @property
    def renamed(self) -> dict[str, str]:
        """``{python_name: wire_name}`` for the entries whose names differ (a prefix counts as a difference).

        Example:
            >>> NameMap({"ls": "ls", "fs_read": "fs.read"}).renamed
            {'fs_read': 'fs.read'}
        """
        return {py: wire for py, wire in self._py_to_wire.items() if py != wire}

    def to_dict(self) -> dict[str, str]:
        """``{python_name: wire_name}``, e.g. for a run manifest.

        Example:
            >>> NameMap({"ls": "ls"}).to_dict()
            {'ls': 'ls'}
        """
        return dict(self._py_to_wire)

    def __contains__(self, py: object) -> bool:
        return py in self._py_to_wire

    def __len__(self) -> int:
        return len(self._py_to_wire)

    def __iter__(self) -> Iterator[str]:
        return iter(self._py_to_wire)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NameMap) and self._py_to_wire == other._py_to_wire

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"NameMap({self._py_to_wire!r})"


class _Union:
    """Membership in either of two collections without copying them (binding thousands of tools stays linear)."""

    __slots__ = ("_a", "_b")

    def __init__(self, a: Container[str], b: Container[str]) -> None:
        self._a, self._b = a, b

    def __contains__(self, item: object) -> bool:
        return item in self._a or item in self._b
