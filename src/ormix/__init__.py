"""ormix: train one LLM agent on a mixture of Open Reward Standard (ORS) environments with TRL.

Public names are imported lazily so that `import ormix` stays light: it never imports torch,
transformers or TRL, and the heavy parts load only when used.

Example:
    >>> from ormix import OpenRewardSpec, MixtureSpec
    >>> spec = OpenRewardSpec("local:terminals", num_tasks=8)   # lazy: no server is contacted yet
    >>> MixtureSpec({"terminals": spec}).train_members
    ['terminals']
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "OpenRewardSpec": "ormix._spec",
    "MixtureSpec": "ormix.mixture",
    "load_mixture": "ormix.mixture",
    "ORSClient": "ormix.ors",
    "OrmixError": "ormix._errors",
}

__all__ = ["MixtureSpec", "ORSClient", "OpenRewardSpec", "OrmixError", "__version__", "load_mixture"]

if TYPE_CHECKING:  # pragma: no cover
    from ormix._errors import OrmixError
    from ormix._spec import OpenRewardSpec
    from ormix.mixture import MixtureSpec, load_mixture
    from ormix.ors import ORSClient


def __getattr__(name: str) -> Any:
    # `ormix._lazy.lazy_getattr`, written out: importing any subpackage runs this file, and `ormix.ors` must
    # load nothing of ormix but itself (tests/ors/test_client.py).
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ormix' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
