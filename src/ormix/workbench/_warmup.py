"""Supervised warm start: teach a model the tool-call format on reference solutions before GRPO.

A randomly initialised model (ormix's offline tiny model) never emits a parseable ``<tool_call>``, so every
rollout is unscored and GRPO has nothing to learn from. `warm_start` first plays every training task's
reference solution (`ormix.workbench._references.reference_solver`: a member's own ``reference:`` hook, else
the shipped
ones of ``local:echo``, ``local:terminals`` and ``local:seta``) through the mixture's own environments, in
real sessions, and records what the model would see in GRPO, token for token: the prompt rendered with the
chat template and that environment's tools (as TRL renders it), the scripted tool calls
(``<tool_call>{json}</tool_call>``), the real tool results framed as TRL frames them, the submit call and a
short final answer. Then it runs a plain torch loop of next-token prediction on the
assistant tokens only (prompt and tool results are masked out).

With ``near_misses`` it also plays each task's near miss (`ormix.workbench.envs.solutions.near_miss_for`: a
plausible attempt that scores less) the same way. SFT on both leaves the policy split between a right and a
wrong attempt at each task, so GRPO starts with informative groups and learns from the rewards which attempt
scores: that is what makes `mixtures/local-demo.yaml` visibly learn on a CPU (the README quotes the
trend). Without near misses the warmed policy has memorised the references, and GRPO at a demo's batch size
has little left that it can change.

This is best-effort and for demos. Measured on a 2-core CPU: about 0.8 s per SFT step with prompts of 1-2k
tokens; for the demo's 10 episodes, 200 steps bring the loss to ~0.015 and greedy first turns parse as tool
calls. It memorises the training tasks; it does not teach solving new ones.

Example:
    >>> from ormix import load_mixture
    >>> from ormix.workbench._warmup import warm_start
    >>> mix = load_mixture("mixtures/local-demo.yaml")
    >>> # Not run as a doctest: 200 steps of torch training take minutes on a CPU.
    >>> model = warm_start(mix, "path/to/tiny", steps=200).model   # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import random
import re
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ormix._cache import default_cache_dir
from ormix._errors import UsageError
from ormix.workbench._references import reference_solver, solver_row
from ormix.workbench._scripted import tool_call
from ormix.workbench.envs.solutions import near_miss_for

#: The file a warm-started model directory holds: the SFT's last loss and how the start was made.
WARM_MARKER = "ormix-warm.json"

#: What the model says after the submit call's result (short: it costs completion budget).
FINAL_ANSWER = "Done."
_TOOL_CALL_RE = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)
#: A reference solves its task when it is scored with at least this reward: the success rule of
#: `ormix eval --policy reference` (its default success_threshold).
SOLVED_REWARD = 1.0


@dataclass
class Transcript:
    """One demonstrated episode as token ids, with labels only on what the model writes.

    Attributes:
        member: mixture member; task_id: the task; reward: what the real session scored (``None`` unless
            `outcome` is ``scored``).
        near_miss: a near miss (`near_miss_for`) rather than the reference solution.
        input_ids: prompt, then each assistant turn and tool result, in order.
        labels: ``input_ids`` on assistant tokens, -100 elsewhere.
        prompt_length: tokens of the first prompt; completion tokens = the rest (GRPO's budget counts them).
        error: the first tool error of the episode (a tool that raised), else its infrastructure error.
        outcome: how the real session ended: ``scored``, ``unscored`` or ``error`` (`Episode.outcome`).
    """

    member: str
    task_id: str | None
    reward: float | None
    input_ids: list[int]
    labels: list[int]
    prompt_length: int
    near_miss: bool = False
    error: str | None = None
    outcome: str = "unscored"

    @property
    def completion_length(self) -> int:
        return len(self.input_ids) - self.prompt_length

    @property
    def solved(self) -> bool:
        """Whether the episode solved its task (`SOLVED_REWARD`), as `ormix eval` counts a success.

        Example:
            >>> Transcript("seta", "t", 0.25, [], [], 0, outcome="scored").solved
            False
        """
        return self.outcome == "scored" and self.reward is not None and self.reward >= SOLVED_REWARD


def _tool_methods(instance: Any) -> list[Any]:
    # Exactly the methods TRL renders and calls (listed on the class: getmembers on the instance would
    # evaluate properties).
    return [
        getattr(instance, name)
        for name, _ in inspect.getmembers(type(instance), predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    ]


def _training_template(tokenizer: Any) -> str | None:
    """The template TRL renders with in multi-turn training: the tokenizer's own when it preserves prefixes,
    else TRL's prefix-preserving training variant (for Qwen3: no `<think>` block only on the last turn)."""
    from trl.chat_template_utils import get_training_chat_template, is_chat_template_prefix_preserving

    return None if is_chat_template_prefix_preserving(tokenizer) else get_training_chat_template(tokenizer)


def _tool_suffix_ids(tokenizer: Any, tool_messages: list[dict[str, Any]], template: str | None) -> list[int]:
    """The tokens TRL appends after a tool-calling turn (same dummy-conversation trick as TRL's trainer)."""
    dummy = [
        {"role": "user", "content": "dummy"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"type": "function", "function": {"name": tool_messages[0]["name"], "arguments": {}}}
            ],
        },
    ]
    render = {"tokenize": True, "return_dict": False, "chat_template": template}
    prefix = tokenizer.apply_chat_template(dummy, add_generation_prompt=False, **render)
    full = tokenizer.apply_chat_template(dummy + tool_messages, add_generation_prompt=True, **render)
    eos = [i for i, t in enumerate(prefix) if t == tokenizer.eos_token_id]
    if eos:
        prefix = prefix[: eos[-1] + 1]
    if full[: len(prefix)] != prefix:
        raise UsageError(
            "the chat template does not render tool results as a suffix of the conversation; "
            "the warm start supports Qwen3-style templates (ormix's tiny model)"
        )
    return list(full[len(prefix) :])


def _assistant_ids(tokenizer: Any, text: str) -> list[int]:
    ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    return [*ids, tokenizer.eos_token_id]


def warm_tasks(mixture: Any, fraction: float) -> dict[str, set[int]]:
    """The tasks a partial warm start covers: the first ``fraction`` of each train member's tasks (>= 1).

    Example:
        >>> from ormix import MixtureSpec, OpenRewardSpec
        >>> mix = MixtureSpec({"echo": OpenRewardSpec("local:echo", num_tasks=8, local_serve="thread")})
        >>> sorted(warm_tasks(mix, 0.25)["echo"])
        [0, 1]
    """
    out = {}
    for member in mixture.train_members:
        indices = mixture.spec(member).task_indices
        out[member] = set(indices[: max(1, int(len(indices) * fraction + 0.5))])
    return out


def build_transcripts(
    mixture: Any, tokenizer: Any, *, fraction: float = 1.0, near_misses: bool = False
) -> list[Transcript]:
    """Play each training task's reference solution in a real session and record it as a `Transcript`.

    Members without reference solutions (no ``reference:`` hook, and not ``local:echo``, ``local:terminals``
    or ``local:seta``) are skipped; with ``fraction`` < 1 only the first part of each member's tasks is played
    (`warm_tasks`), so GRPO still has tasks to learn. With ``near_misses`` each task that has a near miss
    (`near_miss_for`) is also played that way, right after its reference: SFT on both leaves the policy split
    between a right and a wrong attempt, a choice GRPO can learn from the rewards.

    Raises:
        UsageError: no training member has reference solutions.
    """
    factory = mixture.environment_factory
    dict_factory = isinstance(factory, dict)
    chosen = warm_tasks(mixture, fraction)
    # Each training task once (from the members' own rows: an adaptive mixture decides its plan later), with
    # what a solver is handed for it.
    rows: dict[tuple[str, int], tuple[dict[str, Any], dict[str, Any]]] = {}
    for member in mixture.train_members:
        spec = mixture.spec(member)
        task_specs = dict(spec.task_specs)
        for row in spec.dataset_rows():
            solving = solver_row(
                row, member=member, split=spec.split, task_spec=task_specs.get(row["task_index"])
            )
            rows.setdefault((member, row["task_index"]), ({"environment": member, **row}, solving))
    # Per member: (its reference solver — its own `reference:` hook or the shipped one —, its near-miss
    # solver when asked for); either may be None.
    solvers = {
        m: (
            reference_solver(m, mixture.members[m]),
            near_miss_for(mixture.spec(m).target) if near_misses else None,
        )
        for m in mixture.train_members
    }
    instances: dict[str, Any] = {}
    template = _training_template(tokenizer)
    out: list[Transcript] = []
    try:
        for (member, _), (row, solving) in rows.items():
            solve, miss = solvers[member]
            calls = solve(solving) if solve is not None else None
            if calls is None or row["task_index"] not in chosen.get(member, set()):
                continue
            wrong = miss(solving) if miss is not None else None
            key = member if dict_factory else "_"
            if key not in instances:
                instances[key] = (factory[member] if dict_factory else factory)()
            env = instances[key]
            out.append(_play(env, member, row, calls, tokenizer, template, dict_factory))
            if wrong is not None:
                out.append(_play(env, member, row, wrong, tokenizer, template, dict_factory, near_miss=True))
    finally:
        mixture.close_sessions()
    if not out:
        raise UsageError(
            "the warm start needs reference solutions, which ship for local:echo, local:terminals and "
            "local:seta, or come from a member's own `reference: module:function` hook "
            "(ormix.workbench._references); "
            "no training member of this mixture has any: add a hook, or drop --warmup-sft (or warm_start:)"
        )
    return out


def _play(
    env: Any,
    member: str,
    row: dict[str, Any],
    calls: list[tuple[str, dict]],
    tokenizer: Any,
    template: str | None,
    dict_factory: bool,
    *,
    near_miss: bool = False,
) -> Transcript:
    # One episode in a fresh session of `env`, recorded token for token as GRPO would see it.
    reset_kwargs = {k: v for k, v in row.items() if k != "environment"} if dict_factory else dict(row)
    observation = env.reset(**reset_kwargs)
    prompt = list(row["prompt"])
    if isinstance(observation, str):
        prompt = prompt[:-1] + [{**prompt[-1], "content": prompt[-1]["content"] + observation}]
    methods = _tool_methods(env)
    by_name = {m.__name__: m for m in methods}
    ids = list(
        tokenizer.apply_chat_template(
            prompt,
            tools=methods,
            add_generation_prompt=True,
            tokenize=True,
            return_dict=False,
            chat_template=template,
        )
    )
    labels = [-100] * len(ids)
    prompt_length = len(ids)
    error = None
    for name, arguments in calls:
        wire = next((c for c in (name, f"{member}__{name}") if c in by_name), None)
        if wire is None:
            raise UsageError(
                f"member {member!r} has no tool {name!r} (tools: {sorted(by_name)}); the "
                "reference solutions do not match this environment"
            )
        turn = _assistant_ids(tokenizer, tool_call(wire, **arguments))
        ids += turn
        labels += turn
        try:
            result: Any = by_name[wire](**arguments)
        except Exception as e:  # noqa: BLE001 - TRL shows a raising tool to the model the same way
            result = {"error": str(e)}
            error = error or f"{wire} raised {type(e).__name__}: {e}"
        suffix = _tool_suffix_ids(
            tokenizer, [{"role": "tool", "name": wire, "content": str(result)}], template
        )
        ids += suffix
        labels += [-100] * len(suffix)
    final = _assistant_ids(tokenizer, FINAL_ANSWER)
    ids += final
    labels += final
    # The episode's outcome, not its last reward: a session that failed after an earlier reward is an error.
    outcome = getattr(env, "outcome", None)
    if outcome is None:
        reward = getattr(env, "reward", None)
        kind = "unscored" if reward is None else "scored"
    else:
        reward, kind = outcome.reward, outcome.kind
        if kind == "error" and error is None:
            error = f"{outcome.error_kind}: {outcome.error}"
    return Transcript(member, row.get("task_id"), reward, ids, labels, prompt_length, near_miss, error, kind)


def _check_tool_calls(
    model: Any, tokenizer: Any, transcripts: Sequence[Transcript], *, limit: int = 4, max_new_tokens: int = 96
) -> tuple[int, int]:
    """(first turns parsed as a tool call, first turns tried): greedy generation, `limit` prompts at most."""
    import torch

    picked = list(transcripts)[:limit]
    ok = 0
    model.eval()
    with torch.no_grad():
        for t in picked:
            prompt = torch.tensor([t.input_ids[: t.prompt_length]], device=model.device)
            out = model.generate(
                prompt,
                attention_mask=torch.ones_like(prompt),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id,
            )
            text = tokenizer.decode(out[0, t.prompt_length :], skip_special_tokens=False)
            match = _TOOL_CALL_RE.search(text)
            if match:
                try:
                    call = json.loads(match.group(1))
                    ok += isinstance(call, dict) and isinstance(call.get("name"), str)
                except ValueError:
                    pass
    model.train()
    return ok, len(picked)


def sft_loop(
    model: Any,
    transcripts: Sequence[Transcript],
    *,
    steps: int,
    learning_rate: float = 1e-2,
    batch_size: int = 4,
    seed: int = 0,
    on_report: Any = None,
    reports: int = 5,
) -> float:
    """Plain next-token SFT on the labelled (assistant) tokens of `transcripts`; returns the last loss.

    Logits are computed only where a label is: the vocabulary projection of the long prompts (tool schemas)
    would otherwise dominate the cost of a step on a CPU.
    """
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.0)
    # Short warmup, then linear decay to a tenth: the last steps sharpen what was learnt (sampled generation
    # in GRPO breaks the JSON of a tool call on any stray token).
    ramp = min(10, max(steps // 10, 1))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda i: min((i + 1) / ramp, 1.0) * max(0.1, 1.0 - 0.9 * i / max(steps - 1, 1))
    )
    rng = random.Random(seed)
    order: list[int] = []
    pad = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    body, head = model.get_decoder(), model.get_output_embeddings()
    model.train()
    every = max(1, steps // max(reports, 1))
    loss_value = float("nan")
    for step in range(1, steps + 1):
        if len(order) < batch_size:
            fresh = list(range(len(transcripts)))
            rng.shuffle(fresh)
            order = fresh + order
        batch = [transcripts[order.pop()] for _ in range(min(batch_size, len(transcripts)))]
        width = max(len(t.input_ids) for t in batch)
        input_ids = torch.tensor([t.input_ids + [pad] * (width - len(t.input_ids)) for t in batch])
        labels = torch.tensor([t.labels + [-100] * (width - len(t.labels)) for t in batch])
        mask = torch.tensor([[1] * len(t.input_ids) + [0] * (width - len(t.input_ids)) for t in batch])
        hidden = body(
            input_ids=input_ids.to(model.device), attention_mask=mask.to(model.device)
        ).last_hidden_state
        targets = labels[:, 1:].to(model.device)
        keep = targets != -100
        logits = head(hidden[:, :-1][keep])
        loss = torch.nn.functional.cross_entropy(logits.float(), targets[keep])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        loss_value = float(loss.detach())
        if on_report is not None and (step % every == 0 or step == steps):
            on_report(step, loss_value)
    return loss_value


@dataclass
class WarmStart:
    """A warm-started model: the model and tokenizer loaded, the directory they are saved in (``None``
    when not cached) and how the start was made (what ``ormix-warm.json`` there holds under
    ``warm_start``: the base model, steps, fraction, near misses, seed, episodes and how many scored).

    Example:
        >>> WarmStart(None, None, None, {"steps": 2}).made["steps"]
        2
    """

    model: Any
    tokenizer: Any
    path: Path | None
    made: dict[str, Any]


def _no_episode_scored(transcripts: Sequence[Transcript]) -> str | None:
    """Why the warm start would train on nothing right: no reference episode solved its task in its real
    session (one line, under a console's width: the first tool error, or the best reward, cut short)."""
    references = [t for t in transcripts if not t.near_miss]
    if any(t.solved for t in references):
        return None
    scored = [t for t in references if t.outcome == "scored"]
    if scored:
        best = max(scored, key=lambda t: t.reward or 0.0)
        return (
            f"warm start: 0 of {len(references)} reference episodes solved their task (best: {best.member} "
            f"scored {best.reward:.2g}); fix the references (`ormix eval FILE --policy reference` plays "
            "them), or drop --warmup-sft"
        )
    failed = next((t for t in references if t.error), None)
    cause = f"{failed.member}: {failed.error}" if failed is not None else "no session gave a reward"
    cause = cause if len(cause) <= 45 else cause[:42] + "..."
    return (
        f"warm start: 0 of {len(references)} reference episodes scored ({cause}); fix them or the "
        "environment (`ormix eval FILE --policy reference` plays them), or drop --warmup-sft"
    )


def warm_start(
    mixture: Any,
    model_path: str,
    *,
    steps: int,
    console: Any | None = None,
    seed: int = 0,
    learning_rate: float = 1e-2,
    batch_size: int = 4,
    use_cpu: bool = True,
    max_completion_length: int | None = None,
    fraction: float = 1.0,
    near_misses: bool = False,
    cache: bool = True,
) -> WarmStart:
    """Fine-tune the model at `model_path` for `steps` steps on reference transcripts (`WarmStart`).

    ``fraction``: warm only the first part of each member's tasks (`warm_tasks`); GRPO then has tasks left to
    learn. ``near_misses``: also demonstrate a near miss of each warmed task that has one
    (`build_transcripts`), so GRPO starts from a policy that tries both and learns from the rewards which one
    scores. ``cache``: keep the warmed model under ``~/.cache/ormix/warm-<hash>`` (the hash covers the model,
    the tasks, the reference transcripts and every setting) and reuse it the next time.

    Args:
        mixture: the `MixtureSpec` to be trained (its environments play the references).
        model_path: what `from_pretrained` loads.
        steps: optimizer steps (batches of `batch_size` transcripts, drawn with a seeded shuffle).
        learning_rate: AdamW learning rate (high, because the tiny model starts from random weights).
        max_completion_length: GRPO's completion budget; transcripts longer than it are reported (GRPO would
            cut them, so their submit call never happens there).

    Raises:
        UsageError: no training member has reference solutions, or no reference episode scored in its real
            session (a tool raised, the session never gave a reward): SFT would teach calls that score
            nothing.

    Example:
        Not run as a doctest: 100 steps of torch training take a minute or more on a CPU.

        >>> start = warm_start(mix, str(build_tiny_model()), steps=100)   # doctest: +SKIP
        >>> start.path, start.made["scored"]                              # doctest: +SKIP
    """
    from transformers import AutoTokenizer

    def say(text: str) -> None:
        if console is not None:
            console.print(text, highlight=False)

    started = time.monotonic()
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    transcripts = build_transcripts(mixture, tokenizer, fraction=fraction, near_misses=near_misses)
    refused = _no_episode_scored(transcripts)
    if refused:
        raise UsageError(refused)
    kept = demonstrated(transcripts)
    made = {
        "base": str(model_path),
        "steps": steps,
        "fraction": fraction,
        "near_misses": near_misses,
        "seed": seed,
        "learning_rate": learning_rate,
        **_episode_facts(transcripts, kept, max_completion_length),
    }
    settings = {"steps": steps, "lr": learning_rate, "batch": batch_size, "seed": seed}
    cached = default_cache_dir() / f"warm-{_cache_key(model_path, kept, settings)}"
    if cache and (cached / WARM_MARKER).exists():
        say(f"warm start: reusing {cached} ({_episodes(made)}, {steps} SFT steps)")
        _mark_how(cached / WARM_MARKER, made)
        return WarmStart(_load_model(str(cached), use_cpu), tokenizer, cached, made)
    model = _load_model(model_path, use_cpu)
    for line in _plan_lines(transcripts, made):
        say(line)
    loss_value = _sft(model, tokenizer, kept, made, batch_size=batch_size, say=say, started=started)
    if not cache:
        return WarmStart(model, tokenizer, None, made)
    _save_warm(model, tokenizer, cached, {"loss": loss_value, "steps": steps, "warm_start": made})
    return WarmStart(model, tokenizer, cached, made)


def _sft(
    model: Any,
    tokenizer: Any,
    transcripts: Sequence[Transcript],
    made: Mapping[str, Any],
    *,
    batch_size: int,
    say: Callable[[str], None],
    started: float,
) -> float:
    """`sft_loop` on the transcripts with the settings in ``made`` (steps, learning rate, seed), saying how
    it goes (seconds since ``started``) and how many greedy first turns parse as a tool call after it;
    returns the final loss."""
    steps = made["steps"]
    loss_value = sft_loop(
        model,
        transcripts,
        steps=steps,
        on_report=lambda step, loss: say(
            f"  sft step {step}/{steps}: loss {loss:.3f} ({time.monotonic() - started:.0f}s)"
        ),
        learning_rate=made["learning_rate"],
        batch_size=batch_size,
        seed=made["seed"],
    )
    ok, tried = _check_tool_calls(model, tokenizer, transcripts)
    say(
        f"warm start done in {time.monotonic() - started:.0f}s: final loss {loss_value:.3f}; greedy first "
        f"turns that parse as a tool call: {ok}/{tried}"
    )
    return loss_value


def demonstrated(transcripts: Sequence[Transcript]) -> list[Transcript]:
    """The transcripts SFT trains on: each reference that solved its task, and that task's near miss. A
    reference that did not solve (a tool raised, it scored below 1) would teach the calls that fail, and its
    task's near miss would then be the only attempt shown.

    Example:
        >>> good = Transcript("seta", "t1", 1.0, [], [], 0, outcome="scored")
        >>> miss = Transcript("seta", "t1", 0.25, [], [], 0, near_miss=True, outcome="scored")
        >>> wrong = Transcript("seta", "t2", 0.0, [], [], 0, outcome="scored")
        >>> [(t.task_id, t.near_miss) for t in demonstrated([good, miss, wrong])]
        [('t1', False), ('t1', True)]
    """
    solved = {(t.member, t.task_id) for t in transcripts if t.solved and not t.near_miss}
    return [t for t in transcripts if (t.member, t.task_id) in solved]


def _episode_facts(
    transcripts: Sequence[Transcript], kept: Sequence[Transcript], max_completion_length: int | None
) -> dict[str, Any]:
    """What a warm start played (its members, episodes with near misses apart, how many scored and solved)
    and what it demonstrates (``left_out``: the episodes `demonstrated` drops; the lengths of those kept,
    against GRPO's completion budget)."""
    misses = sum(t.near_miss for t in transcripts)
    lengths = sorted(t.completion_length for t in kept)
    over = sum(1 for n in lengths if n > max_completion_length) if max_completion_length is not None else 0
    return {
        "members": sorted({t.member for t in transcripts}),
        "episodes": len(transcripts) - misses,
        "near_miss_episodes": misses,
        "scored": sum(1 for t in transcripts if t.outcome == "scored"),
        "solved": sum(1 for t in transcripts if t.solved and not t.near_miss),
        "errors": sum(1 for t in transcripts if t.outcome == "error"),
        "left_out": len(transcripts) - len(kept),
        # Episodes GRPO cuts before their submit call (a run's last line can name the cause).
        "over_completion_budget": over,
        "longest_episode_tokens": lengths[-1] if lengths else 0,
        "max_completion_length": max_completion_length,
    }


def _episodes(made: Mapping[str, Any]) -> str:
    """``"N reference episodes"``, and the near misses if any."""
    misses = made["near_miss_episodes"]
    return f"{made['episodes']} reference episodes" + (
        f" and {misses} near miss{'es' * (misses > 1)}" if misses else ""
    )


def _reference_outcomes(transcripts: Sequence[Transcript]) -> str:
    """How the reference episodes ended in their real sessions: ``"2 solved"``, ``"1 solved, 1 scored
    0.25"``, ``"1 solved, 2 scored below 1, 1 error"``..."""
    references = [t for t in transcripts if not t.near_miss]
    parts = [f"{sum(t.solved for t in references)} solved"]
    short = [t.reward for t in references if t.outcome == "scored" and not t.solved]
    if len(short) == 1:
        parts.append(f"1 scored {short[0]:.2g}")
    elif short:
        parts.append(f"{len(short)} scored below {SOLVED_REWARD:g}")
    if unscored := sum(t.outcome == "unscored" for t in references):
        parts.append(f"{unscored} unscored")
    if errors := sum(t.outcome == "error" for t in references):
        parts.append(f"{errors} error{'s' * (errors > 1)}")
    return ", ".join(parts)


def _plan_lines(transcripts: Sequence[Transcript], made: Mapping[str, Any]) -> list[str]:
    """What a warm start about to train says: its episodes, how the references ended, their lengths, and
    those GRPO would cut."""
    lengths = sorted(t.completion_length for t in transcripts)
    lines = [
        f"warm start: {_episodes(made)} (real sessions: {_reference_outcomes(transcripts)}), completion "
        f"tokens median {lengths[len(lengths) // 2]}, max {lengths[-1]}; {made['steps']} SFT steps"
    ]
    if made["left_out"]:
        lines.append(
            f"  note: {made['left_out']} of {len(transcripts)} episodes are left out of SFT: the references "
            "that did not solve their task, and those tasks' near misses (they would teach calls that fail)"
        )
    if made["over_completion_budget"]:
        lines.append(
            f"  note: {made['over_completion_budget']} of {len(transcripts) - made['left_out']} demonstrated "
            f"episodes exceed max_completion_length={made['max_completion_length']}; GRPO cuts those before "
            "their submit call"
        )
    return lines


def _cache_key(model_path: str, transcripts: Sequence[Transcript], settings: Mapping[str, Any]) -> str:
    """The warmed model's cache name: a hash of the model, the transcripts and the SFT settings."""
    key = {
        "model": str(Path(model_path).resolve()),
        "transcripts": [[t.member, t.input_ids, t.labels] for t in transcripts],
        **settings,
        "v": 1,
    }
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]


def _mark_how(marker_path: Path, made: Mapping[str, Any]) -> None:
    """Add how a cached warm start was made to a marker an earlier ormix wrote without it (for the run's
    manifest); best effort."""
    with contextlib.suppress(OSError, ValueError):
        marker = json.loads(marker_path.read_text())
        if "warm_start" not in marker:
            marker_path.write_text(json.dumps({**marker, "warm_start": made}) + "\n")


def _load_model(path: str, use_cpu: bool) -> Any:
    """The model at ``path`` in float32, on the GPU when there is one and ``use_cpu`` is off."""
    import torch
    from transformers import AutoModelForCausalLM

    model: Any = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    if not use_cpu and torch.cuda.is_available():
        model = model.to("cuda")
    return model


def _save_warm(model: Any, tokenizer: Any, cached: Path, marker: Mapping[str, Any]) -> None:
    """Save the warmed model into the cache, replacing what is there at once (a reader never sees half)."""
    tmp = cached.with_name(cached.name + f".tmp{os.getpid()}")
    model.save_pretrained(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    (tmp / WARM_MARKER).write_text(json.dumps(marker) + "\n")
    shutil.rmtree(cached, ignore_errors=True)
    os.replace(tmp, cached)
