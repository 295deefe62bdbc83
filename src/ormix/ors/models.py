"""Data the ORS client hands back: tool specs, tool results, splits.

Example:
    >>> r = ToolResult(blocks=[{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}],
    ...                metadata=None, reward=1.0, finished=True)
    >>> r.text
    'a\\nb'
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Split", "ToolResult", "ToolSpec", "text_of"]


def text_of(blocks: list[dict[str, Any]] | None) -> str:
    """Join the text of `text` blocks with newlines; other blocks (images) are skipped.

    Example:
        >>> text_of([{"type": "text", "text": "hi"}, {"type": "image", "data": "..."}])
        'hi'
    """
    if not blocks:
        return ""
    return "\n".join(b.get("text", "") for b in blocks
                     if isinstance(b, dict) and b.get("type", "text") == "text" and "text" in b)


class ToolSpec(BaseModel):
    """A tool as the server describes it: name, description, JSON-schema of its input.

    Example:
        >>> ToolSpec(name="echo").input_schema
        {}
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> ToolSpec:
        """Build from the server's dict, where `description`/`input_schema` may be null."""
        return cls(name=d["name"], description=d.get("description") or "",
                   input_schema=d.get("input_schema") or {})


class ToolResult(BaseModel):
    """The output of one tool call.

    Example:
        >>> ToolResult(blocks=[{"type": "text", "text": "ok"}], metadata=None, reward=None, finished=False).text
        'ok'
    """

    model_config = ConfigDict(extra="ignore")

    blocks: list[dict[str, Any]]
    metadata: dict[str, Any] | None = None
    reward: float | None = None
    finished: bool = False

    @property
    def text(self) -> str:
        """Text blocks joined by newlines; non-text blocks are skipped."""
        return text_of(self.blocks)


class Split(BaseModel):
    """A task split: `name` and its `type` (`train`, `validation` or `test`).

    Example:
        >>> Split(name="train", type="train").name
        'train'
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str
    type: str = "train"
