"""Scripted generation for GRPOTrainer: force exact tool calls through TRL's own tool loop.

Tests, examples and ``--warmup`` need rollouts that really call tools (so ``environment_factory`` sessions,
reward functions and metrics are exercised end to end) without a model that knows how to. A random tiny
model never emits a parseable ``<tool_call>``; a script does.

What TRL 1.16 does (``trl/trainer/grpo_trainer.py``, checked by running it):

- ``rollout_func(prompts, trainer)`` is called ONCE per generation batch, for the first turn only, with the
  conversational prompts (already repeated ``num_generations`` times, with each environment's ``reset()``
  observation appended to the last user message). It must return ``prompt_ids``, ``completion_ids`` and
  ``logprobs`` (``None`` is accepted with the transformers backend); extra keys go to the reward functions
  (``env_mask`` is ignored when tools are present). It also has to render the prompt itself, tool schema
  included, which for a dict ``environment_factory`` means reading the trainer's private per-environment
  tool lists.
- TRL then parses those completions with ``parse_response`` and, when the trainer has tools, runs its tool
  loop: it calls the environment's methods, appends the tool results, and generates EVERY later turn with
  ``_generate_single_turn``, i.e. ``model.generate`` (or vLLM), never ``rollout_func`` again. A
  ``rollout_func`` therefore scripts only the first turn; what follows a tool result comes from the model.

So the one hook that sees every turn is generation itself. :class:`ScriptedPolicy` replaces ``generate`` on
the model instance: TRL still renders the prompts (per-environment tool schemas included), resets the
environments, parses the completions, runs the tools, caps rounds with ``max_tool_calling_iterations``,
drops overlong tool results, masks tool tokens and computes log-probabilities with the real model; only the
sampling is replaced by the script. Works with the transformers generation backend (the default; not with
vLLM or ``use_transformers_continuous_batching``).

The script is called per rollout and per turn with a :class:`ScriptContext`: the decoded first-turn prompt
(which carries the task text and the environment's ``reset()`` observation, and, in dict
``environment_factory`` mode, only that environment's tools), the turn index, the tool results seen so far and
the rollout's index within its group of identical prompts. It returns the completion text, typically
:func:`tool_call` markup, then a final answer. Each rollout's turns are chained exactly: a turn's input is
recognised as the previous turn's input + scripted completion + TRL's tool-result suffix.

Example:
    >>> from ormix.workbench._scripted import ScriptedPolicy, tool_call
    >>> def script(ctx):
    ...     if ctx.turn == 0:
    ...         return tool_call("echo", text="apple")
    ...     return "done"
    >>> policy = ScriptedPolicy(script)
    >>> # Not run as a doctest from here on: it needs a GRPOTrainer (a torch model) and a training run.
    >>> policy.attach(trainer)          # doctest: +SKIP
    >>> trainer.train()                 # doctest: +SKIP
    >>> [(t.context.turn, t.completion) for t in policy.turns[:2]]   # doctest: +SKIP
    [(0, '<tool_call>...</tool_call>'), (0, '<tool_call>...</tool_call>')]
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ormix._errors import UsageError

_USER_RE = re.compile(r"<\|im_start\|>user\n(.*?)<\|im_end\|>", re.DOTALL)
_TOOLS_RE = re.compile(r"<tools>\n(.*?)\n</tools>", re.DOTALL)
_TOOL_RESPONSE_RE = re.compile(r"<tool_response>\n(.*?)\n</tool_response>", re.DOTALL)
_REGISTRY_LIMIT = 50_000  # chained sequences remembered; cleared wholesale beyond this (tests never get near)


@dataclass(frozen=True)
class ScriptContext:
    """What the script knows when it writes one turn of one rollout.

    Attributes:
        prompt: The first turn's prompt as the model saw it (chat template applied, special tokens kept):
            system message with the rendered tool schema, then the user message.
        user: The content of the last user message of that prompt: the dataset prompt plus the text the
            environment's ``reset()`` returned (TRL appends it). Use it to tell tasks/environments apart.
        tools: Names of the tools rendered in the prompt (ChatML ``<tools>`` block), in order.
        turn: 0 for the first generation; k after k rounds of tool results.
        tool_results: Every tool result this rollout has received so far, in order, as the model saw it.
        sample: Index of this rollout among identical prompts in the batch (0..num_generations-1 for a
            GRPO group), so a script can make the members of a group differ.
    """

    prompt: str
    user: str
    tools: tuple[str, ...]
    turn: int
    tool_results: tuple[str, ...]
    sample: int


@dataclass(frozen=True)
class ScriptedTurn:
    """One scripted generation: its context, the text the script returned, and the ids fed back to TRL.

    ``truncated`` is true when the completion budget cut it: ``max_new_tokens`` (= ``max_completion_length``)
    minus what earlier turns and tool results of the rollout already used, exactly as TRL cuts a turn.
    """

    context: ScriptContext
    completion: str
    completion_ids: tuple[int, ...]
    truncated: bool


#: A script: the completion text for one turn of one rollout.
Script = Callable[[ScriptContext], str]


def tool_call(name: str, /, **arguments: Any) -> str:
    """Qwen3/Hermes tool-call markup that TRL's response parser turns into a call of `name`.

    Example:
        >>> tool_call("echo", text="hi")
        '<tool_call>\\n{"name": "echo", "arguments": {"text": "hi"}}\\n</tool_call>'
    """
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


class ScriptedPolicy:
    """Replaces ``model.generate`` with a script, so TRL's own tool loop runs on scripted tool calls.

    Args:
        script: Called once per rollout and turn with a :class:`ScriptContext`; returns the completion text.
            The end-of-turn token is appended when missing.
        tokenizer: Tokenizer of the model. Taken from the trainer by :meth:`attach` when omitted.

    Attributes:
        turns: Every scripted generation so far, in call order (clear it between phases if needed).

    Example:
        >>> policy = ScriptedPolicy(lambda ctx: tool_call("submit", text="x") if ctx.turn == 0 else "ok")
        >>> policy.turns
        []
        >>> # Not run as a doctest: attaching needs a GRPOTrainer, with its torch model.
        >>> policy.attach(trainer)      # doctest: +SKIP
    """

    def __init__(self, script: Script, tokenizer: Any | None = None) -> None:
        self.script = script
        self.tokenizer: Any = tokenizer
        self.turns: list[ScriptedTurn] = []
        self._model: Any | None = None
        #: (input + completion) → its rollouts' contexts, each with the tokens of its first turn's prompt (the
        #: rest of a later input is completion budget spent).
        self._registry: dict[tuple[int, ...], list[tuple[ScriptContext, int]]] = {}
        self._lengths: set[int] = set()
        self._lock = threading.Lock()

    # -- attaching -------------------------------------------------------------------------------------------
    def attach(self, target: Any) -> ScriptedPolicy:
        """Script generation of `target`: a ``GRPOTrainer`` (its model and tokenizer) or a model.

        Call after the trainer is built (or on the model before building it). Returns self.
        """
        model = getattr(target, "model", None) if hasattr(target, "processing_class") else target
        if self.tokenizer is None and hasattr(target, "processing_class"):
            processing_class = target.processing_class
            self.tokenizer = getattr(processing_class, "tokenizer", processing_class)
        if model is None or not callable(getattr(model, "generate", None)):
            raise UsageError(
                f"Cannot attach a scripted policy to {type(target).__name__}: it has no model "
                "with a `generate` method. Pass a GRPOTrainer or a transformers model."
            )
        if self.tokenizer is None:
            raise UsageError(
                "ScriptedPolicy needs the model's tokenizer: pass `tokenizer=` or attach to a "
                "trainer (its processing_class is used)."
            )
        if getattr(target, "use_vllm", False) or getattr(
            target, "use_transformers_continuous_batching", False
        ):
            raise UsageError(
                "ScriptedPolicy replaces `model.generate`, which TRL does not call with vLLM or "
                "continuous batching; set use_vllm=False and "
                "use_transformers_continuous_batching=False."
            )
        self.detach()
        model.generate = self.generate  # instance attribute shadows the class method
        self._model = model
        return self

    def detach(self) -> None:
        """Restore the model's own ``generate``."""
        if self._model is not None:
            self._model.__dict__.pop("generate", None)
            self._model = None

    def __enter__(self) -> ScriptedPolicy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.detach()

    # -- generation ------------------------------------------------------------------------------------------
    def generate(
        self, input_ids: Any = None, attention_mask: Any = None, generation_config: Any = None, **kwargs: Any
    ) -> Any:
        """``model.generate`` stand-in: returns ``input_ids`` followed by each row's scripted completion.

        Rows are left-padded inputs as TRL builds them; completions are right-padded with the pad id
        after the end-of-turn token, as ``generate`` would return them.
        """
        import torch

        if input_ids is None:
            raise UsageError(
                "ScriptedPolicy.generate needs `input_ids` (TRL's transformers backend passes them)."
            )
        tokenizer = self.tokenizer
        max_new = kwargs.get("max_new_tokens") or getattr(generation_config, "max_new_tokens", None)
        pad_id = getattr(generation_config, "pad_token_id", None)
        pad_id = tokenizer.pad_token_id if pad_id is None else pad_id
        eos_ids = _eos_ids(generation_config, tokenizer)

        rows = input_ids.tolist()
        masks = attention_mask.tolist() if attention_mask is not None else [[1] * len(r) for r in rows]
        inputs = [
            tuple(t for t, m in zip(row, mask, strict=True) if m)
            for row, mask in zip(rows, masks, strict=True)
        ]
        seen: Counter[tuple[int, ...]] = Counter()
        completions: list[list[int]] = []
        with self._lock:
            for ids in inputs:
                occurrence = seen[ids]
                seen[ids] += 1
                context, prompt_length = self._state_for(ids, occurrence)
                text = self.script(context)
                if not isinstance(text, str):
                    raise UsageError(
                        f"The script returned {type(text).__name__} for turn {context.turn}; it "
                        "must return the completion text (str)."
                    )
                completion = self._encode(text, eos_ids)
                # TRL's budget: `max_completion_length` covers every turn and tool result of a rollout, and a
                # later turn is cut to what is left (as `generate`'s max_new_tokens cuts the first).
                budget = None if max_new is None else max(max_new - (len(ids) - prompt_length), 0)
                truncated = budget is not None and len(completion) > budget
                if truncated:
                    completion = completion[:budget]
                # What TRL keeps: everything up to and including the first end-of-turn token.
                kept = _through_first(completion, eos_ids)
                self._remember(ids + tuple(kept), (context, prompt_length))
                self.turns.append(ScriptedTurn(context, text, tuple(kept), truncated))
                completions.append(completion)

        width = max((len(c) for c in completions), default=0)
        out = [list(row) + c + [pad_id] * (width - len(c)) for row, c in zip(rows, completions, strict=True)]
        return torch.tensor(out, dtype=input_ids.dtype, device=input_ids.device)

    def _encode(self, text: str, eos_ids: Sequence[int]) -> list[int]:
        ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        if not ids or ids[-1] not in eos_ids:
            ids.append(eos_ids[0])
        return ids

    def _state_for(self, ids: tuple[int, ...], occurrence: int) -> tuple[ScriptContext, int]:
        # Longest remembered (input + completion) that this input extends: a later turn of that rollout.
        for length in sorted(self._lengths, reverse=True):
            if length < len(ids):
                previous = self._registry.get(ids[:length])
                if previous is not None:
                    prev, prompt_length = previous[min(occurrence, len(previous) - 1)]
                    suffix = self.tokenizer.decode(list(ids[length:]), skip_special_tokens=False)
                    results = tuple(_TOOL_RESPONSE_RE.findall(suffix))
                    turn = replace(prev, turn=prev.turn + 1, tool_results=prev.tool_results + results)
                    return turn, prompt_length
        prompt = self.tokenizer.decode(list(ids), skip_special_tokens=False)
        users = _USER_RE.findall(prompt)
        context = ScriptContext(
            prompt, users[-1] if users else prompt, _tool_names(prompt), 0, (), occurrence
        )
        return context, len(ids)

    def _remember(self, key: tuple[int, ...], state: tuple[ScriptContext, int]) -> None:
        if len(self._registry) >= _REGISTRY_LIMIT:
            self._registry.clear()
            self._lengths.clear()
        self._registry.setdefault(key, []).append(state)
        self._lengths.add(len(key))


def _eos_ids(generation_config: Any, tokenizer: Any) -> list[int]:
    configured = getattr(generation_config, "eos_token_id", None)
    ids = [configured] if isinstance(configured, int) else list(configured or [])
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.insert(0, tokenizer.eos_token_id)
    if not ids:
        raise UsageError(
            "ScriptedPolicy needs an end-of-turn token: the tokenizer and generation config "
            "define no eos_token_id."
        )
    return ids


def _through_first(ids: list[int], stops: Sequence[int]) -> list[int]:
    for i, token in enumerate(ids):
        if token in stops:
            return ids[: i + 1]
    return ids


def _tool_names(prompt: str) -> tuple[str, ...]:
    block = _TOOLS_RE.search(prompt)
    if block is None:
        return ()
    names = []
    for line in block.group(1).splitlines():
        try:
            schema = json.loads(line)
        except ValueError:
            continue
        function = schema.get("function", schema) if isinstance(schema, dict) else {}
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.append(function["name"])
    return tuple(names)
