"""Parsing of environment targets: what a member of a mixture connects to.

A target is one of four forms:

- a catalog name ``owner/name`` (``"Eigent/SETA"``), served by the OpenReward platform;
- a URL ``http(s)://host[:port][/path]`` (``"http://localhost:8080"``) of a self-hosted ORS server;
- ``local:NAME`` (``"local:terminals"``), an environment that ships with ormix, served on loopback;
- ``module:Class`` (``"my_pkg.envs:MyEnv"``), the user's own ``openreward.environments.Environment``
  subclass, served on loopback the same way.

This module only checks syntax: it never imports the environment registry or the user's module, and it
never touches the network. Whether ``local:NAME`` names a shipped environment is decided when the member is
built (``ormix.server._registry``).

Example:
    >>> parse_target("Eigent/SETA")
    Target(kind='catalog', value='Eigent/SETA')
    >>> str(parse_target("local:terminals"))
    'local:terminals'
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from ormix._errors import TargetError

TargetKind = Literal["catalog", "url", "local", "module"]

#: One line naming the four accepted forms, appended to every parse error.
ACCEPTED_FORMS = (
    'a catalog name owner/name (e.g. "Eigent/SETA"), '
    'a URL http(s)://host[:port] (e.g. "http://localhost:8080"), '
    'a shipped environment local:NAME (e.g. "local:terminals"), '
    'or your own environment class module:Class (e.g. "my_pkg.envs:MyEnv")'
)

_CATALOG_PART = re.compile(r"[A-Za-z0-9_.-]+")
_LOCAL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_URL_SCHEME = re.compile(r"(?i)https?:")


@dataclass(frozen=True)
class Target:
    """A parsed target.

    ``value`` holds, per kind: ``owner/name`` (catalog), the URL (url), ``NAME`` without the ``local:``
    prefix (local), ``dotted.module:Class`` (module). ``str(target)`` gives back the canonical target
    string, which parses to an equal ``Target``.

    Example:
        >>> parse_target("my_pkg.envs:MyEnv")
        Target(kind='module', value='my_pkg.envs:MyEnv')
    """

    kind: TargetKind
    value: str

    def __str__(self) -> str:
        return f"local:{self.value}" if self.kind == "local" else self.value


def _fail(s: str, why: str) -> TargetError:
    shown = s if len(s) <= 80 else s[:77] + "..."
    return TargetError(f"invalid target {shown!r}: {why}. Use {ACCEPTED_FORMS}.")


def is_identifier(part: str) -> bool:
    return part.isidentifier() and part.isascii() and not keyword.iskeyword(part)


def _parse_url(s: str) -> Target:
    try:
        parts = urlsplit(s)
        _ = parts.port  # raises ValueError on a non-numeric or out-of-range port
    except ValueError as e:
        raise _fail(s, f"the URL does not parse ({e})") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise _fail(s, "a URL must start with http:// or https://")
    if not parts.hostname:
        raise _fail(s, "the URL has no host")
    if any(c.isspace() for c in s):
        raise _fail(s, "the URL contains whitespace")
    return Target("url", s)


def _parse_module(s: str) -> Target:
    module, _, attr = s.partition(":")
    if attr.isdigit():
        scheme = re.match(r"(?i)(https?)//?", module)
        if scheme:  # `http//host:8080`: the colon after the scheme is missing
            fixed = f"{scheme.group(1).lower()}://{module[scheme.end() :]}:{attr}"
            raise _fail(s, f"the ':' after {scheme.group(1)} is missing; write {fixed}")
        raise _fail(s, f"this looks like host:port; write a URL such as http://{s}")
    if not module or not all(is_identifier(p) for p in module.split(".")):
        raise _fail(s, f"{module!r} is not a dotted Python module path")
    if not is_identifier(attr):
        raise _fail(s, f"{attr!r} is not a Python class name")
    return Target("module", s)


def parse_target(s: str) -> Target:
    """Parse a target string into a `Target`; raise `TargetError` if it is none of the accepted forms.

    Surrounding whitespace is ignored. Only syntax is checked (no import, no network).

    Example:
        >>> parse_target("http://localhost:8080").kind
        'url'
        >>> parse_target("local:seta").value
        'seta'
        >>> parse_target("seta")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ormix._errors.TargetError: invalid target 'seta': ...
    """
    if not isinstance(s, str):
        raise TargetError(f"a target must be a string, not {type(s).__name__}. Use {ACCEPTED_FORMS}.")
    s = s.strip()
    if not s:
        raise _fail(s, "it is empty")
    if "://" in s or _URL_SCHEME.match(s):
        return _parse_url(s)
    if s.startswith("local:"):
        name = s[len("local:") :]
        if not _LOCAL_NAME.fullmatch(name):
            raise _fail(s, "after local: comes an environment name of letters, digits, '_' or '-'")
        return Target("local", name)
    if ":" in s:
        return _parse_module(s)
    if "/" in s:
        parts = s.split("/")
        if len(parts) != 2:
            raise _fail(s, "a catalog name has exactly one '/' (owner/name)")
        for part in parts:
            if not _CATALOG_PART.fullmatch(part) or set(part) == {"."}:
                raise _fail(s, "owner and name may use only letters, digits, '_', '.' and '-'")
        return Target("catalog", s)
    raise _fail(s, "it has neither '/', '://' nor ':'")
