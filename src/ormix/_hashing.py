"""Content hashes of JSON data: one canonical form, so the same content hashes the same everywhere (pure).

Example:
    >>> canonical_json({"b": 1, "a": [1.5, "é"]})
    '{"a":[1.5,"é"],"b":1}'
    >>> content_hash({"b": 1, "a": 2}) == content_hash({"a": 2, "b": 1})
    True
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any


def canonical_json(data: Any, *, default: Callable[[Any], Any] = str) -> str:
    """``data`` as JSON: sorted keys, no spaces, unescaped unicode; NaN refused; other objects through
    ``default`` (``str``)."""
    return json.dumps(
        data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=default
    )


def content_hash(data: Any) -> str:
    """sha256 (hex) of `canonical_json` of ``data``."""
    return hashlib.sha256(canonical_json(data).encode("utf-8")).hexdigest()
