"""The trainer's side of rollout upload: each recorded rollout, with its run info, to the OpenReward platform.

Opt-in (``telemetry: {upload: {...}}``, `ormix.config.UploadConfig`). `TelemetryCallback` builds one
`UploadRun` per process when the trainer is built and hands it to the `TelemetryRun`; each member's
`TelemetryObserver` gives it the batch it has just recorded (`observe`), which costs the training step a list
of references and a lock, nothing more. On the upload thread (`ormix.ors._rollouts.RolloutUploader`) each
rollout becomes what the openreward SDK's ``client.rollout.create(run_name, environment, split, metadata,
run_info).log(...)`` sends:

- the messages: the prompt's (system, user) and the completion's (assistant text, each tool call with its
  JSON arguments, each tool result), every string with every known secret value replaced by ``[redacted]``
  as in the records (`ormix.telemetry._records`); the last message carries the environment's reward;
- ``run_info`` (the SDK's `RunInfo`): ``model_name``, ``run_type`` (``train`` or ``eval``, the rollout's
  mode), ``training_stage: rl``, ``rl_algorithm: grpo``, ``framework: trl`` and its version, ``lr``,
  ``initial_step`` (a resumed run's);
- ``rollout_info`` (`RolloutInfo`): ``task_index``, ``current_step``, ``harness: ormix``;
- ``metadata``: ``member``, ``mode``, ``policy_version`` (optimizer updates applied when the batch was
  scored: for the synchronous trainer, the policy that generated it), ``rank``, ``group``, ``outcome``,
  ``error_kind`` and the training ``reward`` (scaled, ``None`` for an error);
- ``environment``: the platform name of the member (a catalog member's own; `UploadConfig.environments`).

What could not be sent is counted (`UploadCounts`: dropped when the queue was full, failed, unconfirmed,
abandoned at the end), logged as ``ormix/upload/<count>`` with the trainer's logs, and said in one line when
training ends (`summary_line`).

Example:
    >>> msgs = chat_messages([{"role": "user", "content": "Say apple (key sk-123456)"}],
    ...     [{"role": "assistant", "content": "", "tool_calls": [
    ...         {"type": "function", "function": {"name": "echo", "arguments": {"text": "apple"}}}]},
    ...      {"role": "tool", "name": "echo", "content": "apple"}], secrets=("sk-123456",))
    >>> [(m.type, m.content) for m in msgs][:2]
    [('user_message', 'Say apple (key [redacted])'), ('tool_call', '{"text": "apple"}')]
    >>> msgs[1].call_id == msgs[2].call_id
    True
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from ormix._errors import UsageError
from ormix.config._models import UploadConfig
from ormix.ors._endpoint import Endpoint
from ormix.ors._errors import redact_text
from ormix.ors._rollouts import Message, PlatformRollout, RolloutUploader, UploadCounts

_ROLES = {"system": "system_message", "user": "user_message", "assistant": "assistant_message"}


def _text(content: Any) -> str:
    """A message's content as text: a string as is, a list of parts joined (text parts' text), else JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = []
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            else:
                parts.append(json.dumps(part, default=str, ensure_ascii=False))
        return "".join(parts)
    return "" if content is None else json.dumps(content, default=str, ensure_ascii=False)


def chat_messages(prompt: Any, completion: Any, *, secrets: Sequence[str] = ()) -> list[Message]:
    """A rollout's chat (TRL's prompt and completion message lists, or plain strings) as the SDK's normalized
    messages, secrets redacted; tool calls without an id get ``call_<n>`` and each tool result the id of the
    oldest call not yet answered (TRL answers calls in order).

    Example:
        >>> [m.type for m in chat_messages("hi", "hello")]
        ['user_message', 'assistant_message']
    """
    secrets = tuple(secrets)
    out: list[Message] = []
    pending: deque[str] = deque()
    calls = 0

    def red(text: str) -> str:
        return redact_text(text, secrets) if secrets else text

    for side, messages in (("user", prompt), ("assistant", completion)):
        if messages is None:
            continue
        if isinstance(messages, str):
            messages = [{"role": side, "content": messages}]
        for m in messages:
            if not isinstance(m, Mapping):
                continue
            role = m.get("role")
            if role == "tool":
                call_id = m.get("tool_call_id") or (pending.popleft() if pending else f"call_{calls}")
                out.append(Message("tool_result", red(_text(m.get("content"))), call_id=str(call_id)))
                continue
            text = _text(m.get("content"))
            if text or role != "assistant":
                out.append(Message(_ROLES.get(str(role), "user_message"), red(text)))
            for call in m.get("tool_calls") or ():
                fn = call.get("function", call) if isinstance(call, Mapping) else {}
                args = fn.get("arguments", {})
                args_text = (
                    args if isinstance(args, str) else json.dumps(args, default=str, ensure_ascii=False)
                )
                call_id = (
                    str(call.get("id") or f"call_{calls}") if isinstance(call, Mapping) else f"call_{calls}"
                )
                calls += 1
                pending.append(call_id)
                out.append(
                    Message(
                        "tool_call", red(args_text) or "{}", name=str(fn.get("name") or "?"), call_id=call_id
                    )
                )
    return out


def summary_line(counts: UploadCounts, run_name: str) -> str:
    """The end-of-training line about the upload.

    Example:
        >>> summary_line(UploadCounts(submitted=10, sent=9, dropped=1), "run-1")
        "ormix: uploaded 9 of 10 rollouts to OpenReward run 'run-1' (1 not sent: 1 dropped, queue full)"
    """
    line = f"ormix: uploaded {counts.sent} of {counts.submitted} rollouts to OpenReward run {run_name!r}"
    if not counts.lost:
        return line
    why = [
        f"{n} {what}"
        for n, what in (
            (counts.dropped, "dropped, queue full"),
            (counts.failed, "refused"),
            (counts.unconfirmed, "unconfirmed (no answer; not sent again)"),
            (counts.abandoned, "still queued at the end"),
        )
        if n
    ]
    return f"{line} ({counts.lost} not sent: {', '.join(why)})"


class UploadRun:
    """One process's upload: `observe` a recorded batch, `metrics` for the logs, `flush`/`close` at the end.

    Args:
        settings: the mixture's `UploadConfig`.
        run_name: the platform run (``settings.run_name`` wins).
        model_name: the model in the run info (``settings.model_name`` wins).
        environments: member -> platform environment name (``settings.environments`` wins).
        secrets: values to redact from every message.
        run_info: more `RunInfo` fields (``lr``, ``framework_version``, ``initial_step``, ...).
        rank: this process's rank (in the metadata).
        api_url, api_key: the platform API and key (default: ``OPENREWARD_API_URL`` or its default, and the
            variable ``settings.api_key_env``: a missing key is a `UsageError`).

    Example:
        >>> up = UploadRun(UploadConfig(), run_name="r", model_name="m", api_url="http://127.0.0.1:9",
        ...                api_key="k")
        >>> up.run_name, up.metrics()["ormix/upload/sent"]
        ('r', 0.0)
    """

    def __init__(
        self,
        settings: UploadConfig,
        *,
        run_name: str,
        model_name: str,
        environments: Mapping[str, str] | None = None,
        secrets: Sequence[str] = (),
        run_info: Mapping[str, Any] | None = None,
        rank: int = 0,
        api_url: str | None = None,
        api_key: str | None = None,
    ) -> None:
        self.settings = settings
        self.run_name = settings.run_name or run_name
        self.environments = {**(environments or {}), **settings.environments}
        self.secrets = tuple(sorted({s for s in secrets if s}, key=len, reverse=True))
        self.rank = rank
        key = api_key if api_key is not None else os.environ.get(settings.api_key_env)
        if not key:
            raise UsageError(
                f"telemetry.upload needs an OpenReward API key in ${settings.api_key_env} (or set "
                f"upload.api_key_env to the variable that holds it)"
            )
        self.api_url = api_url or Endpoint.for_catalog("ormix/upload").api_url
        self.run_info = {
            "model_name": settings.model_name or model_name,
            "training_stage": "rl",
            "rl_algorithm": "grpo",
            "framework": "trl",
            **{k: v for k, v in (run_info or {}).items() if v is not None},
        }
        self.uploader = RolloutUploader(
            self.api_url, key, convert=self._convert, max_queued=settings.max_queued
        )

    def start(self) -> UploadRun:
        """Start the upload thread; returns self."""
        self.uploader.start()
        return self

    def observe(self, member: str, mode: str, records: Sequence[Mapping[str, Any]], batch: Any) -> None:
        """Queue the rollouts of one recorded batch (`records`, in ``batch.mine``'s order); never blocks."""
        if not self.settings.uploads(member, mode):
            return
        prompts, completions = batch.prompts, batch.completions
        n = len(batch.environments)
        prompts = prompts if prompts is not None and len(prompts) == n else None
        completions = completions if completions is not None and len(completions) == n else None
        version = getattr(batch.trainer_state, "global_step", None)
        self.uploader.submit(
            (
                member,
                record,
                prompts[i] if prompts is not None else None,
                completions[i] if completions is not None else None,
                version,
            )
            for record, (i, _) in zip(records, batch.mine, strict=True)
        )

    def observe_records(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Queue rollouts known only by their records (`AsyncGRPOTrainer`'s worker sends records, not
        batches): their chat is what a record keeps (an evaluation's ``prompt`` and ``completion``), else a
        last message that carries the reward alone; ``policy_version`` is the record's."""
        self.uploader.submit(
            (r.get("member"), r, r.get("prompt"), r.get("completion"), r.get("policy_version"))
            for r in records
            if self.settings.uploads(str(r.get("member")), str(r.get("mode") or "train"))
        )

    def _convert(self, item: tuple[str, Mapping[str, Any], Any, Any, int | None]) -> PlatformRollout:
        # On the upload thread: the step never waits for this.
        member, record, prompt, completion, version = item
        mode = record.get("mode")
        task_index = record.get("task_index")
        messages = chat_messages(prompt, completion, secrets=self.secrets)
        if not messages:  # the reward rides on the last message: one without content carries it
            messages = [Message("assistant_message")]
        return PlatformRollout(
            self.run_name,
            messages,
            environment=self.environments.get(member),
            split=record.get("split"),
            metadata={
                "member": member,
                "mode": mode,
                "policy_version": version,
                "rank": record.get("rank", self.rank),
                "group": record.get("group"),
                "outcome": record.get("outcome"),
                "error_kind": record.get("error_kind"),
                "reward": record.get("reward"),
            },
            run_info={**self.run_info, "run_type": "eval" if mode == "eval" else "train"},
            rollout_info=(
                None
                if task_index is None
                else {"task_index": task_index, "current_step": record.get("step"), "harness": "ormix"}
            ),
            step=record.get("step"),
            reward=record.get("env_reward"),
        )

    def metrics(self) -> dict[str, float]:
        """This process's counts so far, as ``ormix/upload/<count>`` log values."""
        counts = self.uploader.snapshot().as_dict()
        keep = ("submitted", "sent", "dropped", "failed", "unconfirmed", "abandoned", "queued", "lost")
        return {f"ormix/upload/{k}": float(counts[k]) for k in keep}

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait (at most `timeout_s`, default ``settings.close_timeout_s``) for what was queued to go."""
        return self.uploader.flush(self.settings.close_timeout_s if timeout_s is None else timeout_s)

    def close(self) -> UploadCounts:
        """Flush (bounded by ``settings.close_timeout_s``) and stop; returns the final counts."""
        return self.uploader.close(self.settings.close_timeout_s)

    def summary(self) -> str:
        """`summary_line` of the counts so far."""
        return summary_line(self.uploader.snapshot(), self.run_name)
