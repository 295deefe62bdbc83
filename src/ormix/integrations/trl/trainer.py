"""`ConcurrentGRPOTrainer`: TRL's `GRPOTrainer` whose batch waits for its environments about as long as one
rollout, not the sum of all of them.

TRL's trainer resets a batch's environments one after another, and in every tool round calls each
rollout's tools one after another (see `ormix.rollout.batch`). This subclass changes exactly two things, by
wrapping two of TRL's methods without copying any of their code:

- `_generate_and_score_completions(inputs)`: before TRL resets anything, the sessions of every row of the
  batch are opened at once (ormix's episodes then take theirs at `reset`); afterwards, any session nobody
  took is closed and counted.
- `_tool_call_loop(...)`: while TRL runs its tool loop, a `ToolRound` is installed on the batch's ormix
  environments, so each round's calls run together (each rollout's calls in order) and TRL's one-by-one
  calls are answered from them.

For logging only, three more: an evaluation's log entry gets each member's ``eval/<member>/pass@k`` (and
pass^k, mean reward, coverage) from ormix's telemetry callback before any logger sees it; before TRL
writes a step's completions (``log_completions``: a parquet file per step), empty dicts in them become
``None`` (`_parquet_safe`): a step whose only tool calls take no arguments (``submit()``) would otherwise
stop training, as pyarrow cannot write a struct without fields; and within `train`, `evaluate` and
`predict`, TRL's "All reward functions returned None" dumps are counted by the telemetry callback, not
printed (`trl_notices_filtered`: the filter is on TRL's logger for the call only).

Everything else — prompts, generation, parsing, the tool-result overflow rule, masks, rewards — is TRL's own
code, so the training signal is token for token what TRL's sequential loop produces. Environments that are
not ormix's are left to TRL. Per batch it logs where the time went: ``ormix/env/open_s`` (waiting for
sessions), ``ormix/env/tools_s`` (waiting for tool rounds) and ``ormix/env/generate_s`` (the rest of the
batch's generation and scoring).

Tested with TRL 1.16; construction fails loudly when the two methods it wraps have changed shape.

Example:
    >>> from ormix.integrations.trl.trainer import ConcurrentGRPOTrainer
    >>> issubclass(ConcurrentGRPOTrainer, __import__("trl").GRPOTrainer)
    True
"""

from __future__ import annotations

import inspect
import logging
import time
import warnings
from typing import Any

from trl import GRPOTrainer

from ormix.errors import TrainConfigError
from ormix.integrations.trl.callbacks import trl_notices_filtered
from ormix.rollout.batch import DEFAULT_MAX_IN_FLIGHT, OpenRequest, ToolRound, open_sessions
from ormix.rollout.episode import Episode, set_tool_round
from ormix.rollout.routing import RoutingEnvironment

__all__ = ["TESTED_TRL", "ConcurrentGRPOTrainer", "check_trl_internals"]

logger = logging.getLogger(__name__)

#: The TRL versions this trainer is tested with (major.minor).
TESTED_TRL = ("1.16",)

# The shapes of the two TRL methods wrapped (parameter names after `self`).
_EXPECTED = {
    "_generate_and_score_completions": ["inputs"],
    "_tool_call_loop": [
        "prompts",
        "prompt_ids",
        "completion_ids",
        "completions",
        "logprobs",
        "images",
        "multimodal_fields",
    ],
}


def check_trl_internals(base: type = GRPOTrainer) -> list[str]:
    """What differs between the installed TRL and what `ConcurrentGRPOTrainer` wraps (empty: nothing).

    Example:
        >>> check_trl_internals()
        []
    """
    problems = []
    for name, params in _EXPECTED.items():
        method = getattr(base, name, None)
        if method is None:
            problems.append(f"GRPOTrainer.{name} does not exist")
            continue
        got = list(inspect.signature(method).parameters)[1:]
        if got != params:
            problems.append(
                f"GRPOTrainer.{name} takes ({', '.join(got)}), ormix expects ({', '.join(params)})"
            )
    return problems


def _is_ours(environment: Any) -> bool:
    return isinstance(environment, (Episode, RoutingEnvironment))


def _parquet_safe(value: Any) -> Any:
    """A copy of logged messages with every empty dict replaced by ``None`` (pyarrow writes no empty struct).

    Example:
        >>> _parquet_safe([{"tool_calls": [{"function": {"name": "submit", "arguments": {}}}]}])
        [{'tool_calls': [{'function': {'name': 'submit', 'arguments': None}}]}]
    """
    if isinstance(value, dict):
        return {k: _parquet_safe(v) for k, v in value.items()} if value else None
    if isinstance(value, list):
        return [_parquet_safe(v) for v in value]
    return value


class ConcurrentGRPOTrainer(GRPOTrainer):
    """`trl.GRPOTrainer` with a batch's sessions opened together and its tool rounds run together.

    Takes every argument `GRPOTrainer` takes, plus:

    Args:
        max_in_flight: rollouts whose sessions open, or whose calls run, at once (all members); each spec's
            `max_concurrent_sessions` bounds its own. More wait their turn.
        concurrent: ``False`` gives TRL's own sequential loop (the opt-out), everything else unchanged.

    Raises `TrainConfigError` at construction when the installed TRL's internals differ from those it was
    tested with (`TESTED_TRL`); use `trl.GRPOTrainer` (sequential) there, or pin TRL.

    Example:
        Not run as a doctest: it needs a torch model and a `GRPOConfig` (see `ormix.train`).

        >>> trainer = ConcurrentGRPOTrainer(                                    # doctest: +SKIP
        ...     model=..., args=..., train_dataset=mix.train_dataset, reward_funcs=mix.reward_funcs,
        ...     environment_factory=mix.environment_factory, callbacks=mix.callbacks)
    """

    def __init__(
        self, *args: Any, max_in_flight: int = DEFAULT_MAX_IN_FLIGHT, concurrent: bool = True, **kwargs: Any
    ) -> None:
        problems = check_trl_internals(GRPOTrainer) if concurrent else []
        if problems:
            import trl

            raise TrainConfigError(
                f"ormix's concurrent environments do not support the installed TRL {trl.__version__} (tested "
                "with "
                f"{', '.join(TESTED_TRL)}): " + "; ".join(problems) + ". Use trl.GRPOTrainer (sequential "
                "environments), pass concurrent=False, or install a tested TRL."
            )
        super().__init__(*args, **kwargs)
        import trl

        if concurrent and not trl.__version__.startswith(TESTED_TRL):
            warnings.warn(
                f"ormix's ConcurrentGRPOTrainer is tested with TRL {', '.join(TESTED_TRL)}, not "
                f"{trl.__version__}; its internals still look the same, so it runs",
                stacklevel=2,
            )
        self.max_in_flight = max(1, int(max_in_flight))
        self.concurrent = concurrent
        self._batch_started: float | None = None

    # ── TRL's unscored-rollout dumps, counted for the call ────────────

    def train(self, *args: Any, **kwargs: Any) -> Any:
        with trl_notices_filtered(self.callback_handler.callbacks):
            return super().train(*args, **kwargs)

    def evaluate(self, *args: Any, **kwargs: Any) -> Any:
        with trl_notices_filtered(self.callback_handler.callbacks):
            return super().evaluate(*args, **kwargs)

    def predict(self, *args: Any, **kwargs: Any) -> Any:
        with trl_notices_filtered(self.callback_handler.callbacks):
            return super().predict(*args, **kwargs)

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if not getattr(self.model, "training", True):
            # An evaluation's entry: its per-member pass@k (ormix's telemetry callback, from the evaluation's
            # records) goes in before any logger or callback sees the entry.
            for callback in self.callback_handler.callbacks:
                add = getattr(callback, "add_eval_metrics", None)
                if callable(add):
                    add(logs)
        completions = getattr(self, "_logs", {}).get("completion")
        if completions is not None:
            safe = [_parquet_safe(c) for c in completions]
            completions.clear()
            completions.extend(safe)
        super().log(logs, start_time)

    # ── sessions of a batch, opened together ──────────────────────────

    def _open_requests(self, inputs: list[dict[str, Any]]) -> list[OpenRequest]:
        factories = getattr(self, "environment_factories", None) or {}
        multi = None not in factories
        requests = []
        for row in inputs:
            factory = factories.get(row.get("environment") if multi else None)
            target = getattr(factory, "episode_config_for", None)
            config = target(row) if callable(target) else None
            if config is not None:
                reset_row = {k: v for k, v in row.items() if k != "environment"} if multi else row
                requests.append(OpenRequest(config, reset_row))
        return requests

    def _generate_and_score_completions(self, inputs: Any) -> Any:
        if not self.concurrent:
            return super()._generate_and_score_completions(inputs)
        requests = self._open_requests(list(inputs))
        open_s = open_sessions(requests, max_in_flight=self.max_in_flight)
        # Logged before TRL's call: TRL flushes this batch's logged metrics while it scores the batch.
        self._log_metric("ormix/env/open_s", open_s)
        self._batch_started = time.perf_counter()
        try:
            return super()._generate_and_score_completions(inputs)
        finally:
            unused = sum(
                config.discard_parked() for config in {id(r.config): r.config for r in requests}.values()
            )
            if unused:
                self._log_metric("ormix/env/unused_sessions", float(unused))
                logger.warning(
                    "ormix: %d session(s) opened ahead were never taken by a reset and were closed; the "
                    "installed TRL resets environments differently than ormix expects",
                    unused,
                )

    # ── tool rounds, run together ─────────────────────────────────────

    def _tool_call_loop(
        self,
        prompts: Any,
        prompt_ids: Any,
        completion_ids: Any,
        completions: Any,
        logprobs: Any,
        images: Any,
        multimodal_fields: Any,
    ) -> Any:
        environments = list(getattr(self, "environments", None) or [])
        if not self.concurrent or not any(_is_ours(e) for e in environments):
            return super()._tool_call_loop(
                prompts, prompt_ids, completion_ids, completions, logprobs, images, multimodal_fields
            )
        tool_round = ToolRound(completions, environments, _is_ours, max_in_flight=self.max_in_flight)
        ours = [e for e in environments if _is_ours(e)]
        for environment in ours:
            set_tool_round(environment, tool_round)
        try:
            return super()._tool_call_loop(
                prompts, prompt_ids, completion_ids, completions, logprobs, images, multimodal_fields
            )
        finally:
            for environment in ours:
                set_tool_round(environment, None)
            stats = tool_round.stats
            self._log_metric("ormix/env/tools_s", stats.wait_s)
            started = getattr(self, "_batch_started", None)
            if started is not None:
                # Everything since the sessions were open that was not waiting for tools: generation.
                self._log_metric(
                    "ormix/env/generate_s", max(0.0, time.perf_counter() - started - stats.wait_s)
                )
            if stats.fallbacks:
                self._log_metric("ormix/env/calls_not_run_ahead", float(stats.fallbacks))
