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
    return "\n".join(
        b.get("text", "")
        for b in blocks
        if isinstance(b, dict) and b.get("type", "text") == "text" and "text" in b
    )


class ToolSpec(BaseModel):
    """A tool as the server describes it: name, description, JSON-schema of its input.

    Example:
        >>> ToolSpec(name="echo").input_schema
        {}
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str
    description: str = ""
    # Normally a JSON-schema object; any other JSON value a server sends (`true`, a list, a string) is
    # kept as sent: the binder copes with it and says so in its notes.
    input_schema: Any = Field(default_factory=dict)

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> ToolSpec:
        """Build from the server's dict, where `description`/`input_schema` may be null.

        Raises `KeyError`/`TypeError` when `d` is not a dict with a string `name` (the client turns
        them into `ProtocolError`).
        """
        name = d["name"]
        if not isinstance(name, str):
            raise TypeError(f"tool name must be a string, got {type(name).__name__}")
        desc = d.get("description")
        schema = d.get("input_schema")
        return cls(
            name=name,
            description=desc if isinstance(desc, str) else ("" if desc is None else str(desc)),
            input_schema={} if schema is None else schema,
        )


class ToolResult(BaseModel):
    """The output of one tool call.

    `truncated` is True when the client kept only the head of an output larger than its
    `max_kept_chars` (memory stays bounded however much the server sends); `full_chars` is then the
    length `text` would have had in full. When not truncated, `full_chars` is `len(text)` (or None when
    whoever built the result did not count).

    Example:
        >>> ToolResult(blocks=[{"type": "text", "text": "ok"}], metadata=None, reward=None, finished=False).text
        'ok'
    """

    model_config = ConfigDict(extra="ignore")

    blocks: list[dict[str, Any]]
    metadata: dict[str, Any] | None = None
    reward: float | None = None
    finished: bool = False
    truncated: bool = False
    full_chars: int | None = None

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
