"""`ormix show RUN_DIR`: rollouts as readable text — the prompt, each turn (the model's text, its tool calls
with their arguments, each tool's result), the reward and the outcome — with secrets redacted.

Two sources are joined. The rollout records (`ormix.telemetry._records`: a run's ``rollouts/rank-*.jsonl``,
an eval directory's ``rollouts.jsonl``) say who (member, task, split, step, group), how it ended (outcome,
error and its reason, reward) and what each tool call did (latency, reward, error); they hold no text. The
text is in TRL's completion log, ``completions/completions_<step>.parquet`` (``log_completions``, on under
`ormix train`), one row per rollout of the step's generation batch in global batch order. A record's
``group`` is the global position of its GRPO group's first rollout, so the k-th record of a group is row
``group + k``; a row is used only when it agrees with its record (the member's reward column holds the
record's reward, every other member's is empty, and the record's tool calls appear in the row's calls, in
order), so a file that holds other rows (TRL writes an in-training evaluation's completions over its step's
file) never lends a rollout the wrong text. A record may also carry its own ``prompt`` and ``completion``
(message lists): then those are shown.

Reading (`load_rollouts`), selecting (`select_rollouts`) and rendering (`render_rollout`) are separate;
rendering is pure. Every string shown passes through `redact` first: the values of the secrets the run names
(each member's ``secrets`` and ``api_key_env`` variables, and ``OPENREWARD_API_KEY``, as set in the
environment `ormix show` runs in) and well-known token shapes (``sk-...``, ``ghp_...``, ``hf_...``,
``Bearer ...``) become ``[redacted]``; tool arguments are redacted before they are formatted, so quoting
never reveals a secret.

Example:
    >>> record = {"step": 1, "mode": "train", "member": "echo", "task_index": 0, "split": "train", "group": 0,
    ...           "outcome": "scored", "reward": 1.0, "env_reward": 1.0, "finished": True,
    ...           "calls": [{"tool": "submit", "latency_ms": 3.0, "error": None, "reward": 1.0,
    ...                      "finished": True, "output_chars": 9, "detail": None}]}
    >>> completion = [{"role": "assistant", "content": "",
    ...                "tool_calls": [{"function": {"name": "submit", "arguments": {"text": "apple"}}}]},
    ...               {"role": "tool", "name": "submit", "content": "correct"}]
    >>> rollout = ShownRollout(record, prompt=[{"role": "user", "content": "Say 'apple'."}],
    ...                        completion=completion)
    >>> print(render_rollout(rollout))  # doctest: +NORMALIZE_WHITESPACE
    ── step 1 · echo · task 0 (train) · group 0 ──
    [user]
        Say 'apple'.
    [assistant]
        → submit(text="apple")
    [tool submit] 3 ms · reward 1.0 · finished
        correct
    outcome: scored · reward 1.0
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ormix._choices import ShowMode
from ormix._errors import UsageError
from ormix._runs import RunDirectory, checkpoint_step, read_jsonl
from ormix.ors._errors import redact_text
from ormix.telemetry._records import read_records

#: The outcomes a record can have (``--outcome``).
OUTCOMES = ("scored", "unscored", "error")

REDACTED = "[redacted]"

# Token shapes that are secrets whoever holds them (OpenAI/Anthropic, GitHub, Hugging Face, AWS, Slack keys,
# bearer tokens): redacted even when no variable of this environment names them.
_TOKEN_RE = re.compile(
    r"\b(?:sk-[A-Za-z0-9_\-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|hf_[A-Za-z0-9]{20,}|AKIA[0-9A-Z]{16}"
    r"|xox[abprs]-[A-Za-z0-9\-]{10,})|(?<=Bearer )[A-Za-z0-9._~+/\-]{16,}=*"
)


@dataclass(frozen=True)
class ShownRollout:
    """One rollout to show: its record, and its text when found (``prompt`` and ``completion`` are chat
    message lists as TRL logs them); ``no_text`` says why there is none.

    Example:
        >>> ShownRollout({"member": "echo"}, no_text="not logged").completion is None
        True
    """

    record: Mapping[str, Any]
    prompt: Sequence[Mapping[str, Any]] | None = None
    completion: Sequence[Mapping[str, Any]] | None = None
    advantage: float | None = None
    no_text: str | None = None


# ──────────────────────────────────────────────────────────────────────────────────────────────────────────
# Redaction and pure formatting


def redact(value: Any, secrets: Iterable[str] = ()) -> Any:
    """``value`` with every string in it (nested in lists and dicts too) redacted: each of ``secrets``
    (`ormix.ors._errors.redact_text`: values of 4 characters or more, longest first) and well-known token
    shapes become ``[redacted]``.

    Example:
        >>> redact({"args": ["key abcd1234", "Bearer 0123456789abcdefXYZ"]}, ["abcd1234"])
        {'args': ['key [redacted]', 'Bearer [redacted]']}
    """
    secrets = tuple(secrets)
    if isinstance(value, str):
        return _TOKEN_RE.sub(REDACTED, redact_text(value, secrets))
    if isinstance(value, Mapping):
        return {redact(k, secrets): redact(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v, secrets) for v in value]
    return value


def known_secrets(
    manifests: Iterable[Mapping[str, Any] | None],
    environ: Mapping[str, str] | None = None,
    extra_env: Iterable[str] = (),
) -> tuple[str, ...]:
    """The secret values to redact: ``OPENREWARD_API_KEY``, and the variables the manifests name (their
    ``secret_env``, each member's ``secret_names`` and ``api_key_env``) plus ``extra_env``, as set in
    ``environ`` (default ``os.environ``); longest first.

    Example:
        >>> manifest = {"members": {"a": {"secret_names": ["TOKEN"]}}, "config": {"members": {"a": {}}}}
        >>> known_secrets([manifest], {"TOKEN": "tok-1234", "OTHER": "x"})
        ('tok-1234',)
    """
    env = os.environ if environ is None else environ
    names = {"OPENREWARD_API_KEY", *extra_env}
    for manifest in manifests:
        if not manifest:
            continue
        for entry in (manifest.get("members") or {}).values():
            if isinstance(entry, Mapping):
                names.update(str(n) for n in entry.get("secret_names") or ())
        sources = manifest.get("secret_env")
        for variables in sources.values() if isinstance(sources, Mapping) else ():
            names.update(str(n) for n in variables or ())
        config = manifest.get("config")
        for entry in ((config.get("members") if isinstance(config, Mapping) else None) or {}).values():
            if isinstance(entry, Mapping):
                # Older runs recorded only the secrets' keys: right when a key is its variable's name.
                names.update(str(n) for n in entry.get("secrets") or ())
                if entry.get("api_key_env"):
                    names.add(str(entry["api_key_env"]))
    values = {env[n] for n in names if env.get(n)}
    return tuple(sorted(values, key=len, reverse=True))


def format_call(name: str, arguments: Any) -> str:
    """A tool call as ``name(key=value, ...)``, each value as JSON; arguments logged as a JSON string are
    read first. Keys whose value is ``None`` are left out: TRL's completion log stores every call's
    arguments under the union of all calls' keys, filling the ones a call lacks with ``None``.

    Example:
        >>> format_call("edit", {"path": "a.txt", "lines": [1, 2], "force": None})
        'edit(path="a.txt", lines=[1, 2])'
        >>> format_call("submit", '{"text": "x"}'), format_call("noop", None)
        ('submit(text="x")', 'noop()')
    """
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return f"{name}({arguments})"
    if isinstance(arguments, Mapping):
        parts = [f"{k}={_json(v)}" for k, v in arguments.items() if v is not None]
        return f"{name}({', '.join(parts)})"
    return f"{name}()" if arguments is None else f"{name}({_json(arguments)})"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _number(value: Any) -> str:
    text = f"{float(value):.4g}"
    return text + ".0" if text.lstrip("-").isdigit() else text


def _missing(value: Any) -> bool:
    """No number: ``None`` or NaN (what TRL logs for a reward function's ``None``)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def outcome_line(record: Mapping[str, Any]) -> str:
    """How a rollout ended, in words: the outcome, its reason (an error's kind and message; for an unscored
    rollout whether the episode finished) and the reward that counted.

    Example:
        >>> outcome_line({"outcome": "scored", "reward": 0.5, "env_reward": 1.0})
        'outcome: scored · reward 0.5 (environment reward 1.0)'
        >>> outcome_line({"outcome": "unscored", "reward": None, "finished": False})
        'outcome: unscored (the episode did not finish: no call ended it) · no reward (left out of GRPO)'
        >>> outcome_line({"outcome": "error", "error_kind": "timeout", "error": "call took 300 s"})
        'outcome: error (timeout: call took 300 s) · no reward (left out of GRPO)'
    """
    outcome = str(record.get("outcome"))
    if outcome == "error":
        kind, message = record.get("error_kind") or "error", record.get("error")
        text = f"outcome: error ({kind}: {message})" if message else f"outcome: error ({kind})"
    elif outcome == "unscored":
        why = (
            "the episode finished without a reward"
            if record.get("finished")
            else "the episode did not finish: no call ended it"
        )
        text = f"outcome: unscored ({why})"
    else:
        text = f"outcome: {outcome}"
    reward, env_reward = record.get("reward"), record.get("env_reward")
    if reward is None or _missing(reward):
        return text + " · no reward (left out of GRPO)"
    text += f" · reward {_number(reward)}"
    if outcome == "unscored":
        text += " (unscored_reward)"
    elif env_reward is not None and not _missing(env_reward) and float(env_reward) != float(reward):
        text += f" (environment reward {_number(env_reward)})"
    return text


def _heading(record: Mapping[str, Any]) -> str:
    parts = []
    if record.get("step") is not None:
        parts.append(f"step {record['step']}")
    if record.get("mode") == "eval" and record.get("step") is not None:
        parts.append("eval")
    parts.append(str(record.get("member")))
    split = f" ({record['split']})" if record.get("split") else ""
    parts.append(f"task {record.get('task_index')}{split}")
    if record.get("group") is not None:
        parts.append(f"group {record['group']}")
    if record.get("server"):
        parts.append(f"server {record['server']}")
    return "── " + " · ".join(parts) + " ──"


def _clip(text: str, max_chars: int) -> str:
    if max_chars <= 0 or len(text) <= max_chars:
        return text
    return text[:max_chars] + f"… ({len(text) - max_chars} more characters)"


def _indented(text: str, max_chars: int) -> list[str]:
    return ["    " + line for line in _clip(text, max_chars).splitlines() or [""]]


def _call_result(call: Mapping[str, Any]) -> str:
    parts = []
    if call.get("latency_ms") is not None:
        parts.append(f"{float(call['latency_ms']):.0f} ms")
    if call.get("error") is not None:
        parts.append(f"error {call['error']}")
    if not _missing(call.get("reward")):
        parts.append(f"reward {_number(call['reward'])}")
    if call.get("finished"):
        parts.append("finished")
    if call.get("truncated"):
        parts.append("output truncated")
    return " · ".join(parts)


def render_rollout(rollout: ShownRollout, secrets: Iterable[str] = (), *, max_chars: int = 2000) -> str:
    """One rollout as text: a heading (step, member, task, group), the prompt's messages, each turn (the
    model's text, ``→ tool(args)`` for each call, ``[tool name]`` and the result for each tool message,
    annotated from the record with latency, reward, error), then the outcome and reward. Without text (no
    completion found), the record's calls are listed instead and the reason is said. Every string is
    redacted first (`redact`); a message longer than ``max_chars`` is cut (0: never).

    Example:
        >>> record = {"member": "echo", "task_index": 3, "outcome": "unscored", "reward": None,
        ...           "calls": [{"tool": "echo", "latency_ms": 2.0, "error": None}]}
        >>> print(render_rollout(ShownRollout(record, no_text="eval directories keep no text")))
        ── echo · task 3 ──
        (no text: eval directories keep no text)
        calls: echo (2 ms)
        outcome: unscored (the episode did not finish: no call ended it) · no reward (left out of GRPO)
    """
    secrets = tuple(secrets)
    record = redact(dict(rollout.record), secrets)
    lines = [_heading(record)]
    calls = [c for c in record.get("calls") or () if isinstance(c, Mapping)]
    if rollout.completion is None:
        lines.append(f"(no text: {rollout.no_text or 'not found'})")
        if calls:
            lines.append("calls: " + ", ".join(f"{c.get('tool')} ({_call_result(c)})" for c in calls))
            lines += [f"    {c['tool']}: {c['detail']}" for c in calls if c.get("detail")]
    else:
        pending = list(calls)  # the record's calls, matched to tool messages in order
        for message in [
            *redact(list(rollout.prompt or ()), secrets),
            *redact(list(rollout.completion), secrets),
        ]:
            role = str(message.get("role"))
            content = message.get("content")
            if role == "tool":
                name = message.get("name") or "?"
                result = ""
                if pending and pending[0].get("tool") == name:
                    call = pending.pop(0)
                    result = _call_result(call)
                    if call.get("detail"):
                        result += f" · {call['detail']}"
                lines.append(f"[tool {name}]" + (f" {result}" if result else ""))
                lines += _indented(str(content or ""), max_chars)
                continue
            lines.append(f"[{role}]")
            if content:
                lines += _indented(str(content), max_chars)
            for tool_call in message.get("tool_calls") or ():
                function = tool_call.get("function") or {} if isinstance(tool_call, Mapping) else {}
                lines.append(
                    "    → "
                    + _clip(format_call(str(function.get("name")), function.get("arguments")), max_chars)
                )
    line = outcome_line(record)
    if rollout.advantage is not None and not _missing(rollout.advantage):
        line += f" · advantage {rollout.advantage:+.3f}"
    lines.append(line)
    return "\n".join(lines)


# ──────────────────────────────────────────────────────────────────────────────────────────────────────────
# Selecting


def select_rollouts(
    rollouts: Sequence[ShownRollout],
    *,
    where: str = "the directory",
    step: int | None = None,
    member: str | None = None,
    outcome: str | None = None,
    task: int | None = None,
    completed: int | None = None,
) -> tuple[list[ShownRollout], int | None]:
    """The rollouts matching every filter, and the step they are from: ``step``, else the latest step among
    the matching rollouts up to ``completed`` (the run's last completed step; a later one only when none
    is), ``None`` for an eval directory, whose records have no step. A step, member or task the rollouts do
    not hold, or an outcome that is not one, is a `UsageError` naming what there is.

    Example:
        >>> rs = [ShownRollout({"step": s, "member": m, "outcome": "scored", "task_index": 0})
        ...       for s in (1, 2) for m in ("echo", "seta")]
        >>> chosen, step = select_rollouts(rs, member="seta")
        >>> step, [(r.record["step"], r.record["member"]) for r in chosen]
        (2, [(2, 'seta')])
        >>> select_rollouts(rs, completed=1)[1]  # step 2 was cut short
        1
        >>> select_rollouts(rs, member="ecoh")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ormix._errors.UsageError: no member 'ecoh' in ... (members: echo, seta); did you mean 'echo'?
    """
    from ormix.config._problems import suggest

    records = [r.record for r in rollouts]
    if outcome is not None and outcome not in OUTCOMES:
        raise UsageError(f"--outcome {outcome!r} is not an outcome: use one of {', '.join(OUTCOMES)}")
    members = list(dict.fromkeys(str(r.get("member")) for r in records))
    if member is not None and member not in members:
        raise UsageError(
            f"no member {member!r} in {where} (members: {', '.join(members)}){suggest(member, members)}"
        )
    steps = sorted({int(r["step"]) for r in records if r.get("step") is not None})
    if step is not None and step not in steps:
        held = f"its steps: {_ranges(steps)}" if steps else "its rollouts have no step: leave out --step"
        raise UsageError(f"step {step} is not in {where} ({held})")
    chosen = [
        r
        for r in rollouts
        if (member is None or r.record.get("member") == member)
        and (outcome is None or r.record.get("outcome") == outcome)
        and (step is None or r.record.get("step") == step)
    ]
    if task is not None:
        tasks = sorted(
            {int(r.record["task_index"]) for r in chosen if r.record.get("task_index") is not None}
        )
        if task not in tasks:
            raise UsageError(
                f"no rollout of task {task} in {where} for these filters (tasks: {_ranges(tasks) or 'none'})"
            )
        chosen = [r for r in chosen if r.record.get("task_index") == task]
    if step is None:
        present = [int(r.record["step"]) for r in chosen if r.record.get("step") is not None]
        if present:
            # A step after the last completed one was cut short: its rollouts are partial, its text unlogged.
            done = [s for s in present if completed is None or s <= completed]
            step = max(done or present)
            chosen = [r for r in chosen if r.record.get("step") == step]
    return chosen, step


def _ranges(values: Sequence[int]) -> str:
    """``1-3, 5`` for ``[1, 2, 3, 5]``."""
    out: list[str] = []
    for v in sorted(set(values)):
        if out and out[-1].split("-")[-1] == str(v - 1):
            out[-1] = out[-1].split("-")[0] + f"-{v}"
        else:
            out.append(str(v))
    return ", ".join(out)


# ──────────────────────────────────────────────────────────────────────────────────────────────────────────
# Reading a directory


@dataclass(frozen=True)
class _Source:
    """A directory's rollouts: an eval directory's, or a run's (then ``run_dir`` is set)."""

    path: Path
    records: list[dict[str, Any]]
    run_dir: Path | None
    manifests: list[dict[str, Any] | None]


def _read_manifest(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _eval_dirs(run_dir: Path) -> list[str]:
    """A run's eval directories, as paths under it: ``eval-before``, ``eval``, ... and the evals of its
    checkpoints, ``eval/checkpoint-N`` (where `ormix eval --model RUN/checkpoint-N` writes)."""
    found = [p for p in run_dir.iterdir() if p.is_dir()]
    if (run_dir / "eval").is_dir():
        found += [p for p in (run_dir / "eval").iterdir() if p.is_dir() and checkpoint_step(p) is not None]
    names = [p.relative_to(run_dir).as_posix() for p in found if (p / "rollouts.jsonl").is_file()]
    return sorted(names)


def _eval_dir(path: Path, eval_name: str) -> Path:
    """The eval directory of run ``path`` that ``--eval`` names: ``after`` (``eval``), ``before``
    (``eval-before``), ``checkpoint-N`` (``eval/checkpoint-N``) or a directory's name."""
    names = _eval_dirs(path)
    wanted = {"after": "eval", "before": "eval-before"}.get(eval_name, eval_name)
    chosen = next((n for n in (wanted, f"eval-{wanted}", f"eval/{wanted}") if n in names), None)
    if chosen is None:
        from ormix.config._problems import suggest

        listed = ", ".join(names) if names else "none"
        raise UsageError(
            f"no eval {eval_name!r} in {path} (its eval directories: {listed}){suggest(wanted, names)}"
        )
    return path / chosen


def _source(path: Path, eval_name: str | None) -> _Source:
    if not path.is_dir():
        raise UsageError(f"{path} is not a directory: pass a run directory or an eval directory")
    if eval_name is not None:
        path = _eval_dir(path, eval_name)
    if eval_name is not None or (path / "rollouts.jsonl").is_file():
        # An eval directory (`ormix eval`'s, or a run's eval/ or eval/checkpoint-N): its manifest, then its
        # run's.
        run = path.parent.parent if checkpoint_step(path) is not None and path.parent.name == "eval" else None
        manifests = [_read_manifest(path), _read_manifest(path.parent)]
        if run is not None:
            manifests.append(_read_manifest(run))
        return _Source(path, read_jsonl(path / "rollouts.jsonl"), None, manifests)
    records = read_records(path)
    if not records:
        evals = _eval_dirs(path)
        hint = f"; its evals: --eval {' / --eval '.join(evals)}" if evals else ""
        raise UsageError(
            f"{path} holds no rollout records (a run's rollouts/rank-*.jsonl or an eval's rollouts.jsonl): "
            f"pass a run directory trained with ormix's callbacks, or an eval directory{hint}"
        )
    return _Source(path, records, path, [_read_manifest(path)])


def _completion_rows(path: Path) -> list[dict[str, Any]] | None:
    """The rows of one of TRL's completion-log files (``None``: it cannot be read)."""
    import pyarrow.parquet as pq  # a dependency of `datasets`; imported here: `import ormix` stays light

    try:
        return list(pq.read_table(path).to_pylist())
    except Exception:  # noqa: BLE001 - pyarrow raises many types for a torn or foreign file
        return None


def _tool_names(completion: Sequence[Mapping[str, Any]]) -> list[str]:
    names = []
    for message in completion:
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping):
                names.append(str(function.get("name")))
    return names


def _is_subsequence(needle: Sequence[str], haystack: Sequence[str]) -> bool:
    it = iter(haystack)
    return all(any(n == h for h in it) for n in needle)


def _agrees(record: Mapping[str, Any], row: Mapping[str, Any], members: Iterable[str]) -> bool:
    """Whether a completion-log row is this record's rollout (see the module docstring)."""
    member = str(record.get("member"))
    if member not in row or not isinstance(row.get("completion"), list):
        return False
    logged, reward = row.get(member), record.get("reward")
    if logged is None or reward is None or _missing(logged) or _missing(reward):
        if _missing(logged) != _missing(reward):
            return False
    elif abs(float(logged) - float(reward)) > 1e-6:
        return False
    if any(not _missing(row.get(other)) for other in members if other != member and other in row):
        return False
    tools = [str(c.get("tool")) for c in record.get("calls") or () if isinstance(c, Mapping)]
    return _is_subsequence(tools, _tool_names(row["completion"]))


def _eval_times(source: _Source) -> list[float]:
    """When each evaluation rollout of the run that may have written over a step's completion log was
    scored: its evaluations during training and those of its eval directories (``eval-before/``, ``eval/``,
    ...) whose records carry no text of their own. A trainer whose evaluation records carry their text logs
    no evaluation completions and keeps the step's (`ormix.trl.ConcurrentGRPOTrainer`)."""
    assert source.run_dir is not None
    records = [r for r in source.records if r.get("mode") == "eval"]
    for name in _eval_dirs(source.run_dir):
        records += read_jsonl(source.run_dir / name / "rollouts.jsonl")
    return sorted(
        float(r["time"])
        for r in records
        if isinstance(r.get("time"), (int, float)) and r.get("completion") is None
    )


def _step_text(
    run_dir: Path,
    step: int,
    records: Sequence[Mapping[str, Any]],
    eval_times: Sequence[float],
    completed: int | None = None,
) -> tuple[list[dict[str, Any]] | None, str]:
    """The completion-log rows of a training step's records, one per record in order, or ``None`` and why.

    TRL names the file after the trainer's step whenever it logs, an evaluation included, so an evaluation
    that ran after the step (during training, or `ormix train`'s eval after training on the same trainer)
    writes its own rows over the step's: a file written after an evaluation rollout that followed the step's
    rollouts is not the step's. A file is used only when every row agrees with its record.
    """
    name = f"completions/completions_{step:05d}.parquet"
    path = run_dir / name
    if not path.is_file():
        if completed is not None and step > completed:
            return None, f"no {name}: step {step} did not complete (TRL logs a step's completions at its end)"
        return None, f"no {name} (TRL logs completions at logging steps, with log_completions on)"
    scored = max((float(r["time"]) for r in records if isinstance(r.get("time"), (int, float))), default=None)
    if scored is not None and any(scored < t < path.stat().st_mtime for t in eval_times):
        return (
            None,
            f"an evaluation after step {step} wrote its completions over {name} (TRL names both alike)",
        )
    table = _completion_rows(path)
    members = {str(r.get("member")) for r in records}
    position: Counter[Any] = Counter()
    rows = []
    for record in records:
        group = record.get("group")
        # The k-th record of a group is row group + k: ranks' records come in rank order, as TRL gathers
        # the rows, so a group split over ranks keeps its order too.
        index = None if group is None else int(group) + position[group]
        position[group] += 1
        if (
            table is None
            or index is None
            or index >= len(table)
            or not _agrees(record, table[index], members)
        ):
            return None, f"{name} holds other rollouts than step {step}'s records"
        rows.append(table[index])
    if table is not None and len(table) != len(rows):
        return None, f"{name} holds {len(table)} rollouts, step {step}'s records {len(rows)}"
    return rows, ""


def _with_text(source: _Source, rollouts: list[ShownRollout]) -> list[ShownRollout]:
    """The rollouts with their text joined from TRL's completion log (a run directory's training steps)."""
    if source.run_dir is None:
        why = "eval directories keep no completion text, only the records"
        return [r if r.completion is not None else replace(r, no_text=why) for r in rollouts]
    by_step: dict[Any, list[int]] = {}
    for i, rollout in enumerate(rollouts):
        by_step.setdefault(rollout.record.get("step"), []).append(i)
    eval_times = _eval_times(source)
    completed = RunDirectory(source.run_dir).completed_step()
    out = list(rollouts)
    for step, indices in by_step.items():
        if all(rollouts[i].completion is not None for i in indices):
            continue
        records = [rollouts[i].record for i in indices]
        if records[0].get("mode") == "eval":
            rows, why = None, "an evaluation during training: TRL keeps no text of it apart from the step's"
        elif step is None:
            rows, why = None, "the record has no step to find its text by"
        else:
            rows, why = _step_text(source.run_dir, int(step), records, eval_times, completed)
        for k, i in enumerate(indices):
            if out[i].completion is not None:
                continue
            if rows is None:
                out[i] = replace(out[i], no_text=why)
                continue
            row = rows[k]
            advantage = row.get("advantage")
            out[i] = replace(
                out[i],
                prompt=list(row.get("prompt") or ()),
                completion=list(row["completion"]),
                advantage=None if advantage is None or _missing(advantage) else float(advantage),
            )
    return out


def _messages(value: Any) -> list[Mapping[str, Any]] | None:
    """A record's own text as chat messages (a plain string is one user message); ``None`` for none."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if isinstance(value, list):
        return [m if isinstance(m, Mapping) else {"role": "?", "content": str(m)} for m in value]
    return None


def load_rollouts(
    path: str | os.PathLike[str], *, eval_name: str | None = None, mode: ShowMode | None = None
) -> tuple[list[ShownRollout], list[dict[str, Any] | None]]:
    """Every rollout of a run directory (its training rollouts; ``mode="eval"``: its evaluations during
    training) or of an eval directory (``eval_name``: the run's eval directory of that name: ``before``,
    ``after`` or a directory name), each with its text where it was found; and the manifests that name the
    secrets to redact. A directory without rollouts, or an eval it does not hold, is a `UsageError`.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as empty:
        ...     load_rollouts(empty)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ormix._errors.UsageError: ... holds no rollout records ...
    """
    source, rollouts = _load(Path(path), eval_name, mode)
    return _with_text(source, rollouts), source.manifests


def _load(path: Path, eval_name: str | None, mode: ShowMode | None) -> tuple[_Source, list[ShownRollout]]:
    """A directory's rollouts of ``mode`` (see `load_rollouts`), with only the text their records carry."""
    source = _source(path, eval_name)
    records = source.records
    if source.run_dir is not None:
        wanted = mode or "train"
        records = [r for r in records if (r.get("mode") or "train") == wanted]
        if not records:
            modes = sorted({str(r.get("mode") or "train") for r in source.records})
            raise UsageError(f"{source.path} holds no {wanted} rollouts (it holds: {', '.join(modes)})")
    else:
        if not records:
            raise UsageError(f"{source.path / 'rollouts.jsonl'} holds no rollout records yet")
        # An eval's records carry the step of the trainer that ran it: one eval, not steps to choose from.
        records = [{k: v for k, v in r.items() if k != "step"} for r in records]
    rollouts = [
        ShownRollout(r, prompt=_messages(r.get("prompt")), completion=_messages(r.get("completion")))
        for r in records
    ]
    return source, rollouts


def _with_text_of(
    source: _Source, rollouts: Sequence[ShownRollout], shown: Sequence[ShownRollout]
) -> list[ShownRollout]:
    """``shown`` (some of ``rollouts``) with their text: only their steps' completion logs are read, each
    with every rollout of its step (a record finds its row by its place among its group's records)."""
    steps = {r.record.get("step") for r in shown}
    of_steps = [r for r in rollouts if r.record.get("step") in steps]
    texted = {id(r): t for r, t in zip(of_steps, _with_text(source, of_steps), strict=True)}
    return [texted[id(r)] for r in shown]


# ──────────────────────────────────────────────────────────────────────────────────────────────────────────
# The command


def show_command(
    path: Path,
    console: Any,
    *,
    step: int | None = None,
    member: str | None = None,
    outcome: str | None = None,
    task: int | None = None,
    eval_name: str | None = None,
    mode: ShowMode | None = None,
    limit: int = 10,
    max_chars: int = 2000,
    secret_env: Sequence[str] = (),
) -> int:
    """`ormix show`: print the selected rollouts (`select_rollouts`) as text (`render_rollout`), at most
    ``limit`` (0: all); returns 0. Raises `UsageError` (exit 2) for what the directory does not hold.

    Example:
        >>> import io, tempfile
        >>> from rich.console import Console
        >>> from ormix.app._eval_dir import EvalDirectory
        >>> with tempfile.TemporaryDirectory() as d:
        ...     _ = EvalDirectory(d).append([{"mode": "eval", "member": "echo", "task_index": 0,
        ...                                   "outcome": "scored", "reward": 1.0, "calls": []}], seq=0)
        ...     console = Console(file=io.StringIO(), width=120)
        ...     show_command(Path(d), console), "outcome: scored · reward 1" in console.file.getvalue()
        (0, True)
    """
    path = Path(path)
    source, rollouts = _load(path, eval_name, mode)
    # Named after the directory read (``--eval after`` reads eval/), not the word given.
    where = str(source.path)
    # An eval directory's records have no step; a run's last completed step is in its progress.json.
    completed = None if source.run_dir is None else RunDirectory(source.run_dir).completed_step()
    chosen, chosen_step = select_rollouts(
        rollouts, where=where, step=step, member=member, outcome=outcome, task=task, completed=completed
    )
    secrets = known_secrets(source.manifests, extra_env=secret_env)
    # Text only for what is shown: a long run's completion logs are read a step at a time, not all at once.
    shown = _with_text_of(source, rollouts, chosen if limit <= 0 else chosen[:limit])
    # Plain text as written: no markup (`[tool x]` is not a style), no colours guessed, no line breaks added.
    plain = {"markup": False, "highlight": False, "soft_wrap": True}
    for rollout in shown:
        console.print(render_rollout(rollout, secrets, max_chars=max_chars), **plain)
        console.print()
    console.print(_footer(rollouts, chosen, shown, chosen_step, step, completed), **plain)
    return 0


def _footer(
    everything: Sequence[ShownRollout],
    chosen: Sequence[ShownRollout],
    shown: Sequence[ShownRollout],
    chosen_step: int | None,
    asked_step: int | None,
    completed: int | None = None,
) -> str:
    counts = Counter(str(r.record.get("outcome")) for r in chosen)
    mix = ", ".join(f"{counts[o]} {o}" for o in OUTCOMES if counts[o])
    text = f"{len(shown)} of {len(chosen)} rollout(s) shown" + (f" ({mix})" if mix else "")
    if chosen_step is not None:
        steps = sorted({int(r.record["step"]) for r in everything if r.record.get("step") is not None})
        text += f" · step {chosen_step}"
        if completed is not None and chosen_step > completed:
            text += " (not completed)"
        if asked_step is None and len(steps) > 1:
            # "completed" only for a step that did: a run that completed none shows its latest, cut short.
            done = completed is not None and chosen_step <= completed < steps[-1]
            latest = "latest completed" if done else "latest"
            text += f" (the {latest} that matches; steps {_ranges(steps)}: --step N for another)"
    if len(shown) < len(chosen):
        text += " · --limit 0 shows all"
    if not chosen:
        text = "no rollout matches these filters"
    return text
