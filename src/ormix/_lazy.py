"""The one `__getattr__` of the lazy package faces below `ormix` (`evaluation`, `trl`, `app`): a name
is imported from its module the first time it is asked for, so importing a face stays light. (`ormix`
itself writes it out: every subpackage import runs its `__init__`, which must load nothing else.)"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package` that imports each of `exports` (name → module) on first use and
    keeps it on the package.

    Example:
        >>> getattr_ = lazy_getattr("ormix", {"pass_at_k": "ormix.evaluation._stats"})
        >>> getattr_("pass_at_k")(4, 1, 4)
        1.0
        >>> getattr_("nope")
        Traceback (most recent call last):
        ...
        AttributeError: module 'ormix' has no attribute 'nope'
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
