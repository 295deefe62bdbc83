"""Where ormix keeps what it can rebuild but would rather not: the tiny model, warm starts, what it reads of
the installed TRL.

Example:
    >>> from unittest import mock
    >>> with mock.patch.dict(os.environ, {"ORMIX_CACHE_DIR": "/data/ormix-cache"}):
    ...     default_cache_dir()
    PosixPath('/data/ormix-cache')
    >>> with mock.patch.dict(os.environ, {"XDG_CACHE_HOME": "/home/me/.cache"}):
    ...     _ = os.environ.pop("ORMIX_CACHE_DIR", None)
    ...     default_cache_dir()
    PosixPath('/home/me/.cache/ormix')
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import tempfile
from collections.abc import Callable
from typing import Any


def default_cache_dir() -> pathlib.Path:
    """``$ORMIX_CACHE_DIR``, else ``$XDG_CACHE_HOME/ormix``, else ``~/.cache/ormix``."""
    explicit = os.environ.get("ORMIX_CACHE_DIR")
    if explicit:
        return pathlib.Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = pathlib.Path(xdg).expanduser() if xdg else pathlib.Path.home() / ".cache"
    return base / "ormix"


def cached_json(name: str, build: Callable[[], Any], *, valid: Callable[[Any], bool] | None = None) -> Any:
    """The JSON value cached under ``name`` in `default_cache_dir`, built (and written) when absent,
    unreadable or not ``valid``. ``name`` must change whenever ``build``'s answer would (put versions in it).

    A cache that cannot be written (read-only home, full disk) costs only the rebuild next time, so a
    failed write is not an error; the file is replaced atomically, so concurrent runs never read half of one,
    and is readable by everyone who can read the directory (a shared ``ORMIX_CACHE_DIR``).

    Example:
        >>> import tempfile
        >>> from unittest import mock
        >>> with tempfile.TemporaryDirectory() as d, mock.patch.dict(os.environ, {"ORMIX_CACHE_DIR": d}):
        ...     first = cached_json("answer-v1", lambda: {"value": 42})
        ...     again = cached_json("answer-v1", lambda: 1 / 0)  # read back, not rebuilt
        >>> first == again == {"value": 42}
        True
    """
    path = default_cache_dir() / f"{name}.json"
    with contextlib.suppress(OSError, ValueError):
        cached = json.loads(path.read_text(encoding="utf-8"))
        if valid is None or valid(cached):
            return cached
    text = json.dumps(build(), sort_keys=True)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide it from the others sharing the cache
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return json.loads(text)
