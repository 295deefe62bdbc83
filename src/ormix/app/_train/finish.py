"""How a run ends on the console: the report, how it ended (and how to resume it), the members that never
scored."""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ormix.app._train.evals import compare_evals
from ormix.app._train.options import RunOptions, TrainResult
from ormix.app._train.prepare import PlannedRun


def summarise(
    history: Sequence[Mapping[str, Any]], members: Sequence[str]
) -> dict[str, dict[str, float | None]]:
    def mean(key: str) -> float | None:
        values = [h[key] for h in history if isinstance(h.get(key), (int, float)) and not math.isnan(h[key])]
        return sum(values) / len(values) if values else None

    out: dict[str, dict[str, float | None]] = {}
    for m in members:
        coverage = mean(f"ormix/{m}/coverage")
        # Coverage 0: no rollout was scored, so any logged reward is only `unscored_reward` filling in.
        reward = None if coverage == 0 else mean(f"rewards/{m}/mean")
        out[m] = {"reward": reward, "coverage": coverage}
    return out


def finish_run(mixture: Any, run: PlannedRun, opts: RunOptions, result: TrainResult, console: Any) -> None:
    """The report, then how the run ended (and how to resume it)."""
    path = run.dir.path
    if result.eval is not None and result.eval_before is not None:
        compare_evals(result, console)
    if opts.report:
        if result.interrupted and not any((path / "rollouts").glob("*.jsonl")):
            console.print("no rollout was recorded before the interrupt: no report")
        else:
            from ormix.app._report import report_command

            try:
                report_command(path, console)
            except Exception as e:  # noqa: BLE001 - a report failure must not hide a finished run
                console.print(
                    f"[yellow]warning:[/yellow] the report failed ({e}); the run directory is intact"
                )
    if result.upload:
        console.print(result.upload, highlight=False, soft_wrap=True)
    if result.stopped_by_alarm:
        console.print(f"[red]stopped by the coverage alarm:[/red] {result.stopped_by_alarm}", highlight=False)
    if not (result.interrupted or result.terminated):
        console.print(f"finished in {result.wall_s:.0f}s; run directory: [bold]{path}[/bold]")
        _never_scored_line(result, console, run)  # the last line: what a glance at the end must see
        return
    why = "terminated (SIGTERM)" if result.terminated else "interrupted"
    saved = f"; checkpoint {result.checkpoint}" if result.checkpoint else "; no checkpoint was saved"
    console.print(f"[yellow]{why}[/yellow] after {result.wall_s:.0f}s{saved}")
    if result.checkpoint is not None or run.dir.latest_checkpoint() is not None:
        target = mixture if isinstance(mixture, (str, Path)) else "FILE"
        command = opts.resume_command or (
            f"ormix train {shlex.quote(str(target))} --output-dir {shlex.quote(str(path))} --resume"
        )
        console.print(f"resume with: [bold]{command}[/bold]", highlight=False, soft_wrap=True)
    _never_scored_line(result, console, run)


def _never_scored_line(result: TrainResult, console: Any, run: PlannedRun | None = None) -> None:
    """Name the members that never scored (coverage 0 in every logged step): an error when all did (the run
    exits 1), a warning when others scored; then the likeliest cause (`never_scored_cause`)."""
    unscored = result.never_scored
    if not unscored or not result.log_history:
        return
    every = result.exit_status == 1 and not result.stopped_by_alarm
    label = "[red]error:[/red]" if every else "[yellow]warning:[/yellow]"
    what = "no member was ever scored" if every else "never scored"
    console.print(
        f"{label} {what}: {', '.join(unscored)} (coverage 0 in every logged step: no rollout ended with a "
        f"reward; {never_scored_cause(result, run)})",
        highlight=False,
        soft_wrap=True,  # one line, however narrow the terminal: it is the line that names the failure
    )


def _warm_start_of(run: PlannedRun | None) -> dict[str, Any] | None:
    """How the run's start was warm-started (the manifest's ``start.warm_start``), ``{}`` when a warm start
    ran but the manifest does not say how, ``None`` when none ran."""
    if run is None:
        return None
    manifest = run.dir.read_manifest() or {}
    made = (manifest.get("start") or {}).get("warm_start")
    if isinstance(made, dict):
        return made
    return {} if run.warmup_sft > 0 else None


def never_scored_cause(result: TrainResult, run: PlannedRun | None) -> str:
    """What to do about members that never scored, by what the run knows of why.

    A warm start ran and the completion budget cut the episodes it taught (its reference episodes longer
    than ``max_completion_length``, as the manifest's ``start.warm_start.over_completion_budget`` says, or,
    without that count, most completions cut at the budget: TRL's ``completions/clipped_ratio``): the budget
    is the cause.
    A warm start ran otherwise: the environment or its references. No warm start: a tiny model needs one.

    Example:
        >>> never_scored_cause(TrainResult(Path("r")), None)[:37]
        '`ormix check FILE` calls its tools, a'
    """
    budget = getattr(getattr(run, "args", None), "max_completion_length", None)
    made = _warm_start_of(run)
    check = "`ormix check FILE` calls its tools"
    if made is None:
        return (
            f"{check}, and a warm start on reference solutions, docs/guides/own-environment.md, gets a tiny "
            "model calling them"
        )
    over = made.get("over_completion_budget") if made.get("max_completion_length") == budget else None
    episodes = made.get("episodes", 0) + made.get("near_miss_episodes", 0) - made.get("left_out", 0)
    longest = f" to at least {made['longest_episode_tokens']}" if made.get("longest_episode_tokens") else ""
    clipped = [
        h["completions/clipped_ratio"]
        for h in result.log_history
        if isinstance(h.get("completions/clipped_ratio"), (int, float))
    ]
    cut = sum(clipped) / len(clipped) if clipped else 0.0
    if budget and isinstance(over, int) and over:
        return (
            f"the warm start ran, but {over} of its {episodes} demonstrated episodes exceed the completion "
            f"budget, max_completion_length={budget}: GRPO cuts them before their submit call; raise "
            f"train.max_completion_length{longest}"
        )
    if budget and over is None and cut >= 0.5:
        return (
            f"the warm start ran, but {cut:.0%} of GRPO's completions were cut at the completion budget, "
            f"max_completion_length={budget}: the episodes it taught are longer than that, and GRPO cuts "
            "them before their submit call; raise train.max_completion_length"
        )
    return (
        f"a warm start ran: {check}, and `ormix eval FILE --policy reference` plays its reference "
        "solutions; both should score"
    )
