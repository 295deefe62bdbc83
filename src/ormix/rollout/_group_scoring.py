"""Group scoring's rules (pure, no I/O): which rollouts form a group, what a candidate is, how a group score
combines with the pointwise reward.

An environment that implements ORS's ``score_group`` scores a whole GRPO group of one task at once (a
preference judge, a tournament): one `GroupScore` per candidate, beside the pointwise rewards its sessions
gave. A member's `GroupScoringRule` says whether ormix asks (``auto``: when the environment advertises
``supports_score_group``; ``on``; ``off``), what it sends (each rollout's final output, or its whole
trajectory) and how the two rewards combine (`combine_rewards`). The I/O is `ormix.rollout._group_scorer`.

Example:
    >>> rule = GroupScoringRule(combine="weighted", weight=0.25)
    >>> combine_rewards(1.0, 0.0, rule), combine_rewards(None, 0.5, rule), combine_rewards(1.0, None, rule)
    (0.75, 0.5, 1.0)
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Mode = Literal["auto", "on", "off"]
Combine = Literal["replace", "add", "weighted"]
View = Literal["output", "trajectory"]

#: How a group score combines with the pointwise reward.
COMBINES: tuple[str, ...] = ("replace", "add", "weighted")

#: What became of a rollout's group scoring (its record's ``group_status``): ``scored``; ``failed`` (the
#: environment's judge raised or answered badly, or the call failed); ``unsupported`` (the environment has no
#: ``score_group``, with ``mode: on``); ``skipped`` (fewer than two candidates in its group, or no open
#: session to score on). In every case but ``scored`` the pointwise reward stands.
GROUP_STATUSES: tuple[str, ...] = ("scored", "failed", "unsupported", "skipped")


@dataclass(frozen=True)
class GroupScoringRule:
    """One member's group scoring (picklable; built from its ``group_scoring:`` option).

    Attributes:
        mode: ``auto`` (score when the environment advertises ``supports_score_group``; otherwise nothing
            is asked and nothing counted), ``on`` (always ask: an environment without it counts as
            ``unsupported``), ``off``.
        combine: ``replace`` (the group score is the reward), ``add`` (pointwise + group) or ``weighted``
            (``(1 - weight) * pointwise + weight * group``). A rollout without a pointwise reward (unscored)
            takes the group score alone; one with an infrastructure error is never a candidate.
        weight: the group score's weight under ``weighted``.
        candidates: ``output`` (each rollout's final assistant message) or ``trajectory`` (every message of
            the completion: text, tool calls and their results).

    Example:
        >>> GroupScoringRule().active, GroupScoringRule(mode="off").active
        (True, False)
    """

    mode: Mode = "auto"
    combine: Combine = "add"
    weight: float = 0.5
    candidates: View = "output"

    @property
    def active(self) -> bool:
        """Whether this rule may score at all (``mode`` is not ``off``)."""
        return self.mode != "off"


def combine_rewards(pointwise: float | None, group: float | None, rule: GroupScoringRule) -> float | None:
    """The reward GRPO sees from a rollout's pointwise reward (already scaled, `None` when unscored) and its
    group score (already scaled, `None` when its group was not scored: the pointwise reward stands).

    Example:
        >>> add = GroupScoringRule(combine="add")
        >>> combine_rewards(1.0, 0.5, add), combine_rewards(None, 0.5, add), combine_rewards(None, None, add)
        (1.5, 0.5, None)
        >>> combine_rewards(0.0, 1.0, GroupScoringRule(combine="replace"))
        1.0
    """
    if group is None:
        return pointwise
    if pointwise is None or rule.combine == "replace":
        return float(group)
    if rule.combine == "add":
        return float(pointwise) + float(group)
    return (1.0 - rule.weight) * float(pointwise) + rule.weight * float(group)


def groups_of(group_ids: Sequence[int], positions: Sequence[int]) -> list[list[int]]:
    """The positions of `positions` gathered by GRPO group (`group_ids[position]`), groups in order of
    their first position.

    Example:
        >>> groups_of([0, 0, 2, 2, 4], [0, 1, 3, 4])
        [[0, 1], [3], [4]]
    """
    out: dict[int, list[int]] = {}
    for position in positions:
        out.setdefault(group_ids[position], []).append(position)
    return list(out.values())


def candidate_messages(completion: Any, view: View = "output") -> list[dict[str, Any]]:
    """One rollout's completion (TRL's: a string, or chat messages with tool calls and tool results) as ORS
    messages (``{"role", "blocks"}``, the SDK's wire shape).

    ``output``: the final assistant message's text alone (what judges read by default). ``trajectory``:
    every message; an assistant's tool calls become ``tool_call`` blocks and each tool's answer a
    ``tool_result`` block in a user turn (ORS has no ``tool`` role), matched by call id in order.

    Example:
        >>> completion = [
        ...     {"role": "assistant", "content": "", "tool_calls": [
        ...         {"type": "function", "function": {"name": "submit", "arguments": {"answer": "4"}}}]},
        ...     {"role": "tool", "name": "submit", "content": "correct"},
        ...     {"role": "assistant", "content": "Done: 4"}]
        >>> candidate_messages(completion)
        [{'role': 'assistant', 'blocks': [{'type': 'text', 'text': 'Done: 4'}]}]
        >>> [m["role"] for m in candidate_messages(completion, "trajectory")]
        ['assistant', 'user', 'assistant']
        >>> candidate_messages(completion, "trajectory")[1]["blocks"][0]["tool_call_id"]
        'call_0'
    """
    if isinstance(completion, str):
        return [_text_message("assistant", completion)]
    messages = [m for m in completion or [] if isinstance(m, Mapping)]
    if view == "output":
        return [_text_message("assistant", _final_text(messages))]
    return _trajectory(messages)


def _final_text(messages: list[Mapping[str, Any]]) -> str:
    """The text of the last assistant message that has some (empty: none has)."""
    for message in reversed(messages):
        if message.get("role") == "assistant" and _text(message.get("content")):
            return _text(message.get("content"))
    return ""


class _CallIds:
    """A transcript's tool-call ids, in order: each call's own id (else ``call_<n>``); each tool answer takes
    the oldest call not answered yet."""

    def __init__(self) -> None:
        self.pending: list[str] = []
        self.count = 0

    def called(self, call: Mapping[str, Any]) -> str:
        call_id = str(call.get("id") or f"call_{self.count}")
        self.count += 1
        self.pending.append(call_id)
        return call_id

    def answered(self) -> str:
        if self.pending:
            return self.pending.pop(0)
        # A tool answer without its call (a cut transcript): an id of its own.
        call_id = f"call_{self.count}"
        self.count += 1
        return call_id


def _trajectory(messages: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every message as ORS messages; tool answers as ``tool_result`` blocks of user turns."""
    out: list[dict[str, Any]] = []
    ids = _CallIds()
    for message in messages:
        role = message.get("role")
        if role == "tool":
            _add_tool_result(out, message, ids.answered())
        elif role in ("system", "user", "assistant"):
            blocks = _message_blocks(message, ids)
            out.append({"role": role, "blocks": blocks or [{"type": "text", "text": ""}]})
    return out


def _add_tool_result(out: list[dict[str, Any]], message: Mapping[str, Any], call_id: str) -> None:
    """A tool's answer as a ``tool_result`` block: consecutive answers share one user turn."""
    block = {
        "type": "tool_result",
        "tool_call_id": call_id,
        "blocks": [{"type": "text", "text": _text(message.get("content"))}],
        "is_error": _is_error(message.get("content")),
    }
    if out and out[-1]["role"] == "user" and all(b["type"] == "tool_result" for b in out[-1]["blocks"]):
        out[-1]["blocks"].append(block)
    else:
        out.append({"role": "user", "blocks": [block]})


def _message_blocks(message: Mapping[str, Any], ids: _CallIds) -> list[dict[str, Any]]:
    """A message's blocks: an assistant's reasoning, the text, then an assistant's tool calls."""
    blocks: list[dict[str, Any]] = []
    assistant = message.get("role") == "assistant"
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if assistant and isinstance(reasoning, str) and reasoning:
        blocks.append({"type": "reasoning", "text": reasoning})
    text = _text(message.get("content"))
    if text:
        blocks.append({"type": "text", "text": text})
    for call in (message.get("tool_calls") or []) if assistant else []:
        blocks.append(_tool_call_block(call, ids.called(call)))
    return blocks


def _tool_call_block(call: Mapping[str, Any], call_id: str) -> dict[str, Any]:
    """One tool call (OpenAI's shape, arguments as JSON text or a dict) as a ``tool_call`` block."""
    function = call.get("function") or {}
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            arguments = {"arguments": arguments}
    return {
        "type": "tool_call",
        "id": call_id,
        "name": str(function.get("name") or call.get("name") or "unknown"),
        "input": arguments if isinstance(arguments, dict) else {"arguments": arguments},
    }


def finite(value: Any) -> float | None:
    """``value`` as a float when it is a finite number, else `None`.

    Example:
        >>> finite(1), finite(float("nan")), finite("x")
        (1.0, None, None)
    """
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _text_message(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "blocks": [{"type": "text", "text": text}]}


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        )
    return str(content)


def _is_error(content: Any) -> bool:
    # TRL turns a tool's exception into the text of {"error": ...}.
    return isinstance(content, str) and content.startswith("{'error':")
