"""Calling an episode's tool the way TRL does: the result, or (a failed call raises) the text the model
reads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ormix.rollout._episode import ToolCallError


def tool_text(method: Callable[..., Any], /, **arguments: Any) -> str:
    """What the model reads after calling `method`: its result, or the failed call's message."""
    try:
        return str(method(**arguments))
    except ToolCallError as e:
        return str(e)
