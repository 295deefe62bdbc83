"""Data the ORS client hands back: tool specs, tool results, splits.

Example:
    >>> blocks = [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]
    >>> ToolResult(blocks=blocks, reward=1.0, finished=True).text
    'a\\nb'
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, field_validator


def text_of(blocks: list[dict[str, Any]] | None) -> str:
    """Join the text of `text` blocks with newlines; other blocks (images) are skipped.

    Example:
        >>> text_of([{"type": "text", "text": "hi"}, {"type": "image", "data": "..."}])
        'hi'
    """
    return "\n".join(
        b.get("text", "")
        for b in blocks or ()
        if isinstance(b, dict) and b.get("type", "text") == "text" and "text" in b
    )


def bad_text_block(blocks: list[dict[str, Any]] | None) -> str | None:
    """What is wrong with the first text block whose `text` is not a string (`None` when every one is):
    such a block has no text to show, and joining it would fail far from the server that sent it.

    Example:
        >>> bad_text_block([{"type": "text", "text": "a"}, {"type": "text", "text": None}])
        'block 1 is a text block whose `text` is null, not a string'
        >>> bad_text_block([{"type": "image", "data": "..."}, {"type": "text"}]) is None
        True
    """
    for at, b in enumerate(blocks or ()):
        if isinstance(b, dict) and b.get("type", "text") == "text" and "text" in b:
            text = b["text"]
            if not isinstance(text, str):
                what = "null" if text is None else type(text).__name__
                return f"block {at} is a text block whose `text` is {what}, not a string"
    return None


class ToolSpec(BaseModel):
    """A tool as the server describes it: name, description, JSON-schema of its input.

    Built from the server's dict with `model_validate`: a null `description` or `input_schema` is the
    default, a description that is not a string is kept as its text, a name must be a string.

    Example:
        >>> ToolSpec.model_validate({"name": "echo", "description": None, "input_schema": None})
        ToolSpec(name='echo', description='', input_schema={})
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: StrictStr
    description: str = ""
    # Normally a JSON-schema object; any other JSON value a server sends (`true`, a list, a string) is
    # kept as sent: the binder copes with it and says so in its notes.
    input_schema: Any = Field(default_factory=dict)

    @field_validator("description", mode="before")
    @classmethod
    def _text(cls, value: Any) -> str:
        return "" if value is None else value if isinstance(value, str) else str(value)

    @field_validator("input_schema", mode="before")
    @classmethod
    def _schema(cls, value: Any) -> Any:
        return {} if value is None else value


class ToolResult(BaseModel):
    """The output of one tool call.

    `truncated` is True when the client kept only the head of an output larger than its
    `max_kept_chars` (memory stays bounded however much the server sends); `full_chars` is then the
    length `text` would have had in full. When not truncated, `full_chars` is `len(text)` (or None when
    whoever built the result did not count).

    Example:
        >>> ToolResult(reward=float("nan"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        pydantic_core._pydantic_core.ValidationError: 1 validation error for ToolResult
        reward
          Input should be a finite number ...
    """

    model_config = ConfigDict(extra="ignore")

    blocks: list[dict[str, Any]] = Field(default_factory=list)
    metadata: dict[str, Any] | None = None
    reward: float | None = Field(default=None, strict=True, allow_inf_nan=False)  # no bool, no NaN
    finished: bool = False
    truncated: bool = False
    full_chars: int | None = None

    @field_validator("blocks")
    @classmethod
    def _texts_are_strings(cls, blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        why = bad_text_block(blocks)
        if why is not None:
            raise ValueError(why)
        return blocks

    @property
    def text(self) -> str:
        """Text blocks joined by newlines; non-text blocks are skipped."""
        return text_of(self.blocks)

    def dropped(self) -> dict[str, int]:
        """The blocks `text` leaves out (images, audio...), counted by type.

        Example:
            >>> blocks = [{"type": "image"}, {"type": "text", "text": "a"}, {"type": "image"}]
            >>> ToolResult(blocks=blocks).dropped()
            {'image': 2}
        """
        counts: dict[str, int] = {}
        for b in self.blocks:
            kind = b.get("type", "text")
            if kind != "text":
                counts[str(kind)] = counts.get(str(kind), 0) + 1
        return counts


class Split(BaseModel):
    """A task split: `name` and its `type` (`train`, `validation` or `test`).

    Example:
        >>> Split(name="train", type="train").name
        'train'
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str
    type: str = "train"


def invalid_because(e: ValidationError) -> str:
    """The first problem pydantic found in a server's answer, as `` `where`: what `` (never the value:
    it may be large, or echo a secret).

    Example:
        >>> try:
        ...     ToolSpec.model_validate({"name": 7})
        ... except ValidationError as e:
        ...     invalid_because(e)
        '`name`: Input should be a valid string'
    """
    err = e.errors()[0]
    where = ".".join(map(str, err["loc"]))
    return f"`{where}`: {err['msg']}" if where else err["msg"]


class GroupScore(BaseModel):
    """One candidate's score from ``POST /{env}/score_group`` (index-aligned with the candidates sent).

    ``reward`` is the comparative reward; it comes beside, never instead of, the pointwise rewards of the
    candidate's own session. ``metadata`` is the environment's judging detail, if any.

    Example:
        >>> GroupScore.model_validate({"reward": 1, "metadata": {"rank": 0}})
        GroupScore(reward=1.0, metadata={'rank': 0})
    """

    model_config = ConfigDict(extra="ignore")

    reward: float = Field(allow_inf_nan=False)
    metadata: dict[str, Any] | None = None
