"""Per-member metrics of a batch, from its rollout records (pure: no I/O, nothing of TRL).

Metrics per member (`METRICS`), logged as ``ormix/<member>/<metric>``: `reward` (raw environment reward,
scored rollouts only), `coverage`, `unscored_rate`, `error_rate`, `finished_rate`, `tool_calls`,
`tool_errors`, `wrong_env_calls` (per rollout), `share` (1/0 for every rollout of the batch),
`informative_groups` (1/0 per GRPO group of the member), `session_open_ms` (per rollout),
`backend_starting_ms` (per rollout: of the open, the time spent waiting for a platform backend that was still
starting; not an error), `tool_ms` (per call that reached the server). A member that scores groups
(``group_scoring:``) also logs `group_reward` (the environment's group score, per rollout whose group was
scored), `combined_reward` (the reward GRPO saw for those rollouts: the combination), `group_scored` (1/0 per
candidate rollout: its group was scored) and `group_score_failed` (1/0 per group asked: the scoring failed or
is unsupported, so the pointwise rewards stood). A member on several servers also logs,
per server, ``server/<host:port>/share``, ``.../coverage`` and ``.../error_rate`` (one value per rollout of
the member, and per rollout on that server; `server_label`). Values are ONE PER ROLLOUT (or per call / group),
so TRL's pooling of a batch (sum and count over all processes, then the mean) gives the exact batch-wide
value; over a logging window of several batches TRL logs the mean of those batch values (not pooled: each
batch weighs the same). A GRPO group split over processes is judged here on each process's part; the telemetry
callback judges it whole (`pooled_informative`). A member absent from a batch logs only `share` (0s), so TRL
shows no value for the rest instead of a misleading 0.

Example:
    >>> recs = [{"member": "a", "outcome": "scored", "env_reward": 1.0, "reward": 1.0, "finished": True,
    ...          "open_ms": 3.0, "group": 0, "calls": [{"tool": "submit", "latency_ms": 2.0, "error": None}]},
    ...         {"member": "a", "outcome": "error", "env_reward": None, "reward": None, "finished": False,
    ...          "open_ms": 1.0, "group": 0, "calls": []}]
    >>> summary = summarize(member_values(recs, "a", batch_size=4))
    >>> summary["coverage"], summary["share"]
    (0.5, 0.5)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from ormix.rollout._outcome import ERROR_KINDS

#: Metric names logged under `ormix/<member>/`, in the order a report lists them.
METRICS: tuple[str, ...] = (
    "reward",
    "coverage",
    "unscored_rate",
    "error_rate",
    "finished_rate",
    "tool_calls",
    "tool_errors",
    "wrong_env_calls",
    "share",
    "informative_groups",
    "session_open_ms",
    "backend_starting_ms",
    "tool_ms",
    "group_reward",
    "combined_reward",
    "group_scored",
    "group_score_failed",
)

#: A rollout record's ``group_status`` values whose group the environment was asked to score.
_GROUP_ASKED = ("scored", "failed", "unsupported")

# Call errors that never reached the server: their latency (0) says nothing about the environment.
_UNSENT_CALL_ERRORS = ("wrong_env", "session_open")


def metric_key(member: str, metric: str) -> str:
    """The trainer-log key of one member metric.

    Example:
        >>> metric_key("seta", "coverage")
        'ormix/seta/coverage'
    """
    return f"ormix/{member}/{metric}"


def group_ids(
    n: int, *, rank: int = 0, num_generations: int | None = None, keys: Sequence[Any] | None = None
) -> list[int]:
    """GRPO group of each rollout of a local batch, as the global position of the group's first rollout.

    TRL repeats each prompt `num_generations` times consecutively in the global batch and gives process k
    the contiguous slice `[k*n, (k+1)*n)`, so the group of local rollout i is `(k*n + i) // G` (the same
    grouping TRL uses for advantages). Without `num_generations`, consecutive runs of equal `keys` form
    the groups.

    Example:
        >>> group_ids(4, rank=1, num_generations=2)
        [4, 4, 6, 6]
        >>> group_ids(4, keys=["a", "a", "b", "a"])
        [0, 0, 2, 3]
    """
    if num_generations and num_generations > 0:
        return [((rank * n + i) // num_generations) * num_generations for i in range(n)]
    out: list[int] = []
    start = 0
    for i in range(n):
        if i > 0 and (keys is None or keys[i] != keys[i - 1]):
            start = i
        out.append(rank * n + start)
    return out


def present_rewards(rewards: Sequence[float | None]) -> list[float]:
    """The rewards that count (``None`` and NaN left out): errors and unscored rollouts have none.

    Example:
        >>> present_rewards([1.0, None, float("nan"), 0.0])
        [1.0, 0.0]
    """
    return [float(r) for r in rewards if r is not None and not math.isnan(float(r))]


def is_informative(values: Sequence[float | None]) -> bool:
    """Whether a GRPO group's rewards differ (std > 0), ignoring `None` (errors, unscored).

    Example:
        >>> is_informative([1.0, 0.0, None]), is_informative([1.0, 1.0]), is_informative([0.5, None])
        (True, False, False)
    """
    present = present_rewards(values)
    if len(present) < 2:
        return False
    mean = sum(present) / len(present)
    return any(abs(v - mean) > 1e-9 * max(1.0, abs(mean)) for v in present)


def member_values(
    records: Sequence[Mapping[str, Any]], member: str, batch_size: int
) -> dict[str, list[float]]:
    """The values one member logs for one batch: one per rollout, call or group, as `log_metric` pools them.

    `records` are rollout records of ONE batch (any members; others are ignored); `batch_size` is the
    number of rollouts in that batch (all members). Metrics with no value are left out (TRL then logs
    nothing for them), except `share`, which is always there.

    Example:
        >>> member_values([], "a", batch_size=2)
        {'share': [0.0, 0.0]}
    """
    mine = [r for r in records if r.get("member") == member]
    out: dict[str, list[float]] = {"share": [1.0] * len(mine) + [0.0] * max(batch_size - len(mine), 0)}
    if not mine:
        return out
    out["reward"] = [
        float(r["env_reward"]) for r in mine if r["outcome"] == "scored" and r.get("env_reward") is not None
    ]
    # A rollout the environment scored by group only (no pointwise reward) has a reward all the same.
    out["coverage"] = [float(r["outcome"] == "scored" or _group_scored(r)) for r in mine]
    out["unscored_rate"] = [float(r["outcome"] == "unscored" and not _group_scored(r)) for r in mine]
    out["error_rate"] = [float(r["outcome"] == "error") for r in mine]
    out["finished_rate"] = [float(bool(r.get("finished"))) for r in mine]
    out["tool_calls"] = [float(len(r.get("calls") or [])) for r in mine]
    out["tool_errors"] = [float(sum(c.get("error") is not None for c in r.get("calls") or [])) for r in mine]
    out["wrong_env_calls"] = [
        float(sum(c.get("error") == "wrong_env" for c in r.get("calls") or [])) for r in mine
    ]
    groups: dict[Any, list[float | None]] = {}
    for r in mine:
        groups.setdefault(r.get("group"), []).append(r.get("reward"))
    out["informative_groups"] = [float(is_informative(v)) for v in groups.values()]
    out["session_open_ms"] = [float(r["open_ms"]) for r in mine if r.get("open_ms") is not None]
    out["backend_starting_ms"] = [float(r["starting_ms"]) for r in mine if r.get("starting_ms") is not None]
    out["tool_ms"] = [
        float(c["latency_ms"])
        for r in mine
        for c in r.get("calls") or []
        if c.get("error") not in _UNSENT_CALL_ERRORS
    ]
    asked = [r for r in mine if r.get("group_status") in _GROUP_ASKED]
    if asked:
        scored = [r for r in asked if r["group_status"] == "scored"]
        out["group_reward"] = [float(r["group_reward"]) for r in scored if r.get("group_reward") is not None]
        out["combined_reward"] = [float(r["reward"]) for r in scored if r.get("reward") is not None]
        out["group_scored"] = [float(r["group_status"] == "scored") for r in asked]
        status_of: dict[Any, str] = {}
        for r in asked:
            status_of.setdefault(r.get("group"), r["group_status"])
        out["group_score_failed"] = [float(status != "scored") for status in status_of.values()]
    servers = sorted({r["server"] for r in mine if r.get("server")})
    for server in servers:
        on = [r for r in mine if r.get("server") == server]
        label = f"server/{server_label(server)}"
        out[f"{label}/share"] = [float(r.get("server") == server) for r in mine]
        # The member's rule (`coverage` above): a rollout its group scored has a reward too.
        out[f"{label}/coverage"] = [float(r["outcome"] == "scored" or _group_scored(r)) for r in on]
        out[f"{label}/error_rate"] = [float(r["outcome"] == "error") for r in on]
    return {k: v for k, v in out.items() if v}


def pooled_informative(parts: Iterable[Iterable[Sequence[Any]]], member: str) -> float | None:
    """`informative_groups` of one member over a logging window, from every process's training rollouts as
    ``(member, step, group, reward)``: each GRPO group is judged on its rewards from all processes (a group
    whose rollouts were split over processes is one group, as on one process), then each step's fraction of
    informative groups is averaged over the window's steps, as TRL averages its per-batch figures. ``None``
    when the member had no group.

    Example:
        >>> rank0 = [("a", 1, 0, 1.0), ("a", 1, 0, 1.0)]
        >>> rank1 = [("a", 1, 0, 0.0), ("a", 1, 0, 0.0), ("a", 1, 2, 1.0), ("a", 1, 2, None)]
        >>> pooled_informative([rank0, rank1], "a"), pooled_informative([rank0, rank1], "b")
        (0.5, None)
    """
    steps: dict[Any, dict[Any, list[float | None]]] = {}
    for part in parts:
        for name, step, group, reward in part:
            if name == member:
                steps.setdefault(step, {}).setdefault(group, []).append(reward)
    if not steps:
        return None
    fractions = [sum(map(is_informative, groups.values())) / len(groups) for groups in steps.values()]
    return sum(fractions) / len(fractions)


def _group_scored(record: Mapping[str, Any]) -> bool:
    return record.get("group_status") == "scored" and record.get("reward") is not None


def server_label(url: str) -> str:
    """The short name of a server in metric keys: its ``host:port``.

    Example:
        >>> server_label("http://10.0.0.7:8081"), server_label("https://env.example")
        ('10.0.0.7:8081', 'env.example')
    """
    return urlsplit(url).netloc or url


def summarize(values: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """Mean of each metric's values (what TRL logs for one batch).

    Example:
        >>> summarize({"coverage": [1.0, 0.0, 1.0], "tool_ms": []})
        {'coverage': 0.6666666666666666}
    """
    return {k: sum(v) / len(v) for k, v in values.items() if len(v)}


def batch_metrics(records: Sequence[Mapping[str, Any]], members: Iterable[str]) -> dict[str, float]:
    """Recompute the `ormix/<member>/<metric>` log entries of one batch from its records (all ranks merged).

    Example:
        >>> records = [{"member": "a", "outcome": "unscored", "calls": [], "reward": None}]
        >>> batch_metrics(records, ["a", "b"])["ormix/b/share"]
        0.0
    """
    out: dict[str, float] = {}
    for member in members:
        for metric, value in summarize(member_values(records, member, len(records))).items():
            out[metric_key(member, metric)] = value
    return out


_NOT_ROLLOUT_ERRORS = frozenset({"unscored", "calls"})


def call_failures(counts: Mapping[str, int]) -> tuple[int, int, dict[str, int]] | None:
    """(failed calls, calls, failed calls per kind) of the unscored rollouts counted in ``counts``; ``None``
    when none of their calls failed.

    Example:
        >>> call_failures({"unscored": 2, "calls": 4, "call:tool_failed": 4})
        (4, 4, {'tool_failed': 4})
        >>> call_failures({"unscored": 2, "calls": 4}) is None
        True
    """
    kinds = {k.removeprefix("call:"): v for k, v in counts.items() if k.startswith("call:") and v > 0}
    if not kinds:
        return None
    return sum(kinds.values()), int(counts.get("calls", 0)), kinds


def dominant_cause(counts: Mapping[str, int]) -> tuple[str, int, int] | None:
    """(cause, its count, all failures) of the most frequent failure cause: an error kind, else a group
    scoring that failed (``group:failed``, ``group:unsupported``: unscored rollouts whose group score would
    have been their reward), else `unscored`.

    Infrastructure error kinds win over the rest (they are what an alarm must point at).

    Example:
        >>> dominant_cause({"session_open": 3, "transport": 1, "unscored": 5})
        ('session_open', 3, 4)
        >>> dominant_cause({"unscored": 2})
        ('unscored', 2, 2)
        >>> dominant_cause({"unscored": 4, "group:failed": 4})
        ('group:failed', 4, 4)
    """
    # `calls` and `call:<kind>` count the tool calls of unscored rollouts (`call_failures`), not rollouts.
    errors = {
        k: v
        for k, v in counts.items()
        if k not in _NOT_ROLLOUT_ERRORS and not k.startswith(("call:", "group:")) and v > 0
    }
    group = {k: v for k, v in counts.items() if k.startswith("group:") and v > 0}
    pool = errors or group or {k: v for k, v in counts.items() if k == "unscored" and v > 0}
    if not pool:
        return None
    order = {k: i for i, k in enumerate(ERROR_KINDS)}
    cause = max(pool, key=lambda k: (pool[k], -order.get(k, len(order))))
    return cause, pool[cause], sum(pool.values())
