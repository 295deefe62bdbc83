"""`ConcurrentGRPOTrainer`: TRL's `GRPOTrainer` whose batch waits for its environments about as long as one
rollout, not the sum of all of them.

TRL's trainer resets a batch's environments one after another, and in every tool round calls each
rollout's tools one after another (see `ormix.rollout._batch`). This subclass changes exactly two things, by
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

Two more, off the critical path: with ``lookahead`` (default 1) the sessions of the coming steps open while a
step generates and trains (`PlannedSampler` reads TRL's sampler order ahead; `ormix.rollout._ahead` opens them
and hands them to the step's resets; ``ormix/env/opened_ahead``, ``ormix/env/ahead_wait_s``); and a member's
straggler rule (`ormix.rollout._stragglers`) lets a tool round abandon its slowest calls
(``ormix/<member>/straggler_rate``, ``ormix/env/tail_wait_s``).

Everything else — prompts, generation, parsing, the tool-result overflow rule, masks, rewards — is TRL's own
code, so the training signal is token for token what TRL's sequential loop produces. Environments that are
not ormix's are left to TRL. Per batch it logs where the time went: ``ormix/env/open_s`` (waiting for
sessions), ``ormix/env/tools_s`` (waiting for tool rounds) and ``ormix/env/generate_s`` (the rest of the
batch's generation and scoring).

Tested with TRL 1.16; construction fails loudly when the two methods it wraps have changed shape.

Example:
    >>> from ormix.trl._trainer import ConcurrentGRPOTrainer
    >>> issubclass(ConcurrentGRPOTrainer, __import__("trl").GRPOTrainer)
    True
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import logging
import math
import time
import warnings
from collections import deque
from collections.abc import Iterator
from typing import Any

from trl import GRPOTrainer

from ormix._errors import TrainConfigError
from ormix.rollout._ahead import SessionsAhead
from ormix.rollout._batch import DEFAULT_MAX_IN_FLIGHT, OpenRequest, ToolRound, open_sessions, row_key
from ormix.rollout._episode import Episode, episode_of, set_tool_round
from ormix.rollout._lookahead import DEFAULT_LOOKAHEAD, choose_ahead, generation_batches, locate
from ormix.rollout._routing import RoutingEnvironment
from ormix.trl._callbacks import TelemetryCallback, trl_notices_filtered

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


class PlannedSampler:
    """TRL's train sampler, with the order of the current epoch (and, once asked, the next) known ahead.

    It yields exactly what the wrapped sampler yields: an epoch's order is drawn from it once (its generator
    advances as it would) and kept, so the batches of coming steps can be read before the dataloader does.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.epoch: list[int] = []
        self.epochs = 0  # epochs started
        self._queued: deque[list[int]] = deque()

    def __len__(self) -> int:
        return len(self.inner)

    def __iter__(self) -> Any:
        self.epoch = self._queued.popleft() if self._queued else list(self.inner)
        self.epochs += 1
        return iter(self.epoch)

    def next_epoch(self) -> list[int]:
        """The next epoch's order (drawn now, yielded when that epoch starts)."""
        if not self._queued:
            self._queued.append(list(self.inner))
        return self._queued[0]


class ConcurrentGRPOTrainer(GRPOTrainer):
    """`trl.GRPOTrainer` with a batch's sessions opened together and its tool rounds run together.

    Takes every argument `GRPOTrainer` takes, plus:

    Args:
        max_in_flight: rollouts whose sessions open, or whose calls run, at once (all members); each spec's
            `max_concurrent_sessions` bounds its own. More wait their turn.
        concurrent: ``False`` gives TRL's own sequential loop (the opt-out), everything else unchanged.
        lookahead: steps whose sessions open ahead, while the step before them generates and trains (0: none;
            default 1). Rows opened ahead: per member at most its `max_concurrent_sessions`, in all at most
            `max_in_flight`; the rest open at their step. Only for datasets whose rows are fixed before
            they are fetched (a static plan); an adaptive plan's rows are decided when fetched, so it
            opens its sessions at its step.

    Raises `TrainConfigError` at construction when the installed TRL's internals differ from those it was
    tested with (`TESTED_TRL`); use `trl.GRPOTrainer` (sequential) there, or pin TRL.

    Example:
        Not run as a doctest: it needs a torch model and a `GRPOConfig` (see `ormix.app._train`).

        >>> trainer = ConcurrentGRPOTrainer(                                    # doctest: +SKIP
        ...     model=..., args=..., train_dataset=mix.train_dataset, reward_funcs=mix.reward_funcs,
        ...     environment_factory=mix.environment_factory, callbacks=mix.callbacks)
    """

    def __init__(
        self,
        *args: Any,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        concurrent: bool = True,
        lookahead: int = DEFAULT_LOOKAHEAD,
        **kwargs: Any,
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
        # ormix's telemetry first: its `on_log` puts in figures only all processes together know (informative
        # groups split over processes), and the loggers `report_to` added before it must see them.
        callbacks = self.callback_handler.callbacks
        # Stable: the rest keep their order.
        callbacks.sort(key=lambda c: not isinstance(c, TelemetryCallback))
        self.max_in_flight = max(1, int(max_in_flight))
        self.concurrent = concurrent
        self._batch_started: float | None = None
        self.lookahead = max(0, int(lookahead)) if concurrent else 0
        if self.lookahead and self.accelerator.num_processes > 1:
            logger.info("ormix: sessions are not opened ahead with several processes (not yet supported)")
            self.lookahead = 0
        self._ahead = SessionsAhead(self.max_in_flight)
        self._planned: PlannedSampler | None = None
        self._planned_dataset: Any = None
        self._keys: dict[int, Any] = {}
        self._expected: tuple[int, int] | None = None
        #: Sessions opened ahead and closed unused, over the run (run end, max_steps, SIGTERM, changed plan).
        self.ahead_unused = 0

    # ── TRL's unscored-rollout dumps, counted for the call ────────────

    def train(self, *args: Any, **kwargs: Any) -> Any:
        try:
            with trl_notices_filtered(self.callback_handler.callbacks):
                return super().train(*args, **kwargs)
        finally:
            # Run end, max_steps, Ctrl-C, SIGTERM: the sessions opened for steps that will not run.
            self._ahead.close()
            self.ahead_unused = self._ahead.unused
            if self.ahead_unused:
                logger.info(
                    "ormix: %d session(s) opened ahead were not used and were closed", self.ahead_unused
                )

    def evaluate(self, *args: Any, **kwargs: Any) -> Any:
        with trl_notices_filtered(self.callback_handler.callbacks), self._step_completions_kept():
            return super().evaluate(*args, **kwargs)

    def predict(self, *args: Any, **kwargs: Any) -> Any:
        with trl_notices_filtered(self.callback_handler.callbacks), self._step_completions_kept():
            return super().predict(*args, **kwargs)

    @contextlib.contextmanager
    def _step_completions_kept(self) -> Iterator[None]:
        # TRL names its completion log after the trainer's step whenever it logs, an evaluation's entry
        # included: an evaluation would write its rows over the step's file (completions_<step>.parquet) and
        # leave them in the buffer the next training log writes. Evaluations log no completions here (their
        # records carry their text), and the buffer is the step's again afterwards.
        logged, kept = self.log_completions, copy.deepcopy(getattr(self, "_logs", None))
        self.log_completions = False
        try:
            yield
        finally:
            self.log_completions = logged
            if kept is not None:
                self._logs = kept

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

    def _open_request(self, row: dict[str, Any]) -> OpenRequest | None:
        """The session to open for a row (``None``: not an ormix environment's row)."""
        factories = getattr(self, "environment_factories", None) or {}
        multi = None not in factories
        factory = factories.get(row.get("environment") if multi else None)
        target = getattr(factory, "episode_config_for", None)
        config = target(row) if callable(target) else None
        if config is None:
            return None
        return OpenRequest(config, {k: v for k, v in row.items() if k != "environment"} if multi else row)

    def _open_requests(self, inputs: list[dict[str, Any]]) -> list[OpenRequest]:
        return [r for r in map(self._open_request, inputs) if r is not None]

    # ── sessions of coming steps, opened ahead ────────────────────────

    def _get_train_sampler(self, dataset: Any = None) -> Any:
        sampler = super()._get_train_sampler(dataset)
        data = self.train_dataset if dataset is None else dataset
        # Rows decided when fetched (an adaptive plan's `set_transform`) cannot be read ahead.
        fetched_late = getattr(data, "format", {}).get("type") == "custom" if data is not None else True
        if not self.lookahead or fetched_late or not hasattr(data, "__getitem__"):
            return sampler
        self._planned, self._planned_dataset, self._keys = PlannedSampler(sampler), data, {}
        return self._planned

    def _row_of(self, index: int) -> dict[str, Any]:
        return dict(self._planned_dataset[index])

    def _key_of(self, index: int) -> Any:
        if index not in self._keys:
            row = self._row_of(index)
            self._keys[index] = (row.get("environment"), row_key(row))
        return self._keys[index]

    @property
    def _steps_per_generation(self) -> int:
        return int(getattr(self.args, "steps_per_generation", None) or 1)

    @property
    def _repeat(self) -> int:
        # TRL's sampler yields each generation batch num_iterations × steps_per_generation times in a row
        # (one dataloader batch per micro-step); it generates on the first of them.
        return int(self.num_iterations) * self._steps_per_generation

    def _generations_left(self) -> int:
        """Batches TRL will still generate for after the current one (by ``max_steps``)."""
        accumulation = max(1, self.args.gradient_accumulation_steps)
        micro = (self.state.max_steps - self.state.global_step) * accumulation - self._step % accumulation
        return max(0, math.ceil(micro / self._repeat) - 1)

    def _schedule(self, order: list[int] | None = None) -> list[tuple[tuple[int, int], list[int]]]:
        """(position, sampler indices) of this epoch's batches, or with ``order`` of the next epoch's."""
        assert self._planned is not None
        size = self._train_batch_size * self._steps_per_generation
        epoch = self._planned.epochs + (order is not None)
        batches = generation_batches(self._planned.epoch if order is None else order, size, self._repeat)
        return [((epoch, i), batch) for i, batch in enumerate(batches)]

    def _take_ahead(self, inputs: list[dict[str, Any]], requests: list[OpenRequest]) -> list[OpenRequest]:
        """Hand this batch's sessions opened ahead to its specs, start the coming batches' opens; returns
        the requests still to open now."""
        assert self._planned is not None
        schedule = self._schedule()
        keys = [(row.get("environment"), row_key(row)) for row in inputs]
        hint = self._expected[1] if self._expected and self._expected[0] == self._planned.epochs else 0
        found = locate([[self._key_of(i) for i in batch] for _, batch in schedule], keys, start=hint)
        if found is None:
            # Not the planned batch (a plan that changed): what was opened ahead is of no use.
            dropped = self._ahead.close()
            if dropped:
                self._log_metric("ormix/env/ahead_unused", float(dropped))
            self._log_metric("ormix/env/opened_ahead", 0.0)
            self._log_metric("ormix/env/ahead_wait_s", 0.0)
            return requests
        position = schedule[found][0]
        taken = self._ahead.take(position, requests)
        # Batches before this one (a resumed run skipped them) will not come; positions are (epoch, index).
        epoch, index = position
        stale = self._ahead.discard([p for p in self._ahead.positions() if p > position])
        unused = taken.unused + stale
        self._log_metric("ormix/env/opened_ahead", float(taken.used))
        self._log_metric("ormix/env/ahead_wait_s", taken.wait_s)
        for name, count in (("unused", unused), ("reaped", taken.reaped), ("failed", taken.failed)):
            if count:
                self._log_metric(f"ormix/env/ahead_{name}", float(count))
        self._expected = (epoch, index + 1)
        self._start_ahead(schedule, found)
        return taken.remaining

    def _start_ahead(self, schedule: list[tuple[tuple[int, int], list[int]]], found: int) -> None:
        assert self._planned is not None
        coming = schedule[found + 1 :]
        left = min(self.lookahead, self._generations_left())
        if len(coming) < left:
            # The run goes on into the next epoch: its order is drawn now (and yielded unchanged later).
            coming += self._schedule(self._planned.next_epoch())
        coming = [c for c in coming[:left] if c[0] not in self._ahead.positions()]
        if not coming:
            return
        configs = [[self._open_request(self._row_of(index)) for index in batch] for _, batch in coming]
        steps = [[None if r is None else r.config.member for r in row_configs] for row_configs in configs]
        held = self._ahead.held()
        seen = {r.config.member: r.config for row_configs in configs for r in row_configs if r is not None}
        caps: dict[str, int | None] = {}
        for member, config in seen.items():
            cap = config.max_concurrent_sessions
            caps[member] = None if cap is None else max(0, cap - held.get(id(config), 0))
        budget = self.max_in_flight - sum(held.values())
        chosen = choose_ahead(steps, member_caps=caps, max_in_flight=budget)
        for (position, _), row_configs, positions in zip(coming, configs, chosen, strict=True):
            picked = [row_configs[i] for i in positions]
            self._ahead.start(position, [r for r in picked if r is not None])

    def _generate_and_score_completions(self, inputs: Any) -> Any:
        if not self.concurrent:
            return super()._generate_and_score_completions(inputs)
        requests = self._open_requests(list(inputs))
        # Every spec a session of this batch is parked with: `_take_ahead` leaves out of `requests` the rows
        # whose sessions came ahead, and those are parked too.
        configs = {id(r.config): r.config for r in requests}
        try:
            t0 = time.perf_counter()
            if self._planned is not None and getattr(self.model, "training", False):
                requests = self._take_ahead(list(inputs), requests)
            open_sessions(requests, max_in_flight=self.max_in_flight)
            open_s = time.perf_counter() - t0  # waiting for opens ahead, then opening the rest
            # Logged before TRL's call: TRL flushes this batch's logged metrics while it scores the batch.
            self._log_metric("ormix/env/open_s", open_s)
            self._batch_started = time.perf_counter()
            return super()._generate_and_score_completions(inputs)
        finally:
            unused = sum(config.discard_parked() for config in configs.values())
            if unused:
                self._log_metric("ormix/env/unused_sessions", float(unused))
                logger.warning(
                    "ormix: %d session(s) opened ahead were never taken by a reset and were closed; the step "
                    "failed before its resets, or the installed TRL resets environments differently than "
                    "ormix expects",
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
        ours = [e for e in environments if _is_ours(e)] if self.concurrent else []
        if not ours:
            return super()._tool_call_loop(
                prompts, prompt_ids, completion_ids, completions, logprobs, images, multimodal_fields
            )
        # Straggler rules cut training rollouts only: an evaluation measures every task, slow ones included.
        training = bool(getattr(self.model, "training", True))
        tool_round = ToolRound(
            completions, environments, _is_ours, max_in_flight=self.max_in_flight, cut_stragglers=training
        )
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
            self._log_metric("ormix/env/tail_wait_s", stats.tail_wait_s)
            if training:
                self._log_straggler_rates(ours, stats.cut)

    def _log_straggler_rates(self, environments: list[Any], cut: dict[str, int]) -> None:
        """``ormix/<member>/straggler_rate``: of the member's rollouts of the batch, the fraction cut (logged
        for members with a straggler rule)."""
        rollouts: dict[str, int] = {}
        for environment in environments:
            config = getattr(episode_of(environment), "_config", None)
            if config is not None and getattr(config, "stragglers", None) is not None:
                rollouts[config.member] = rollouts.get(config.member, 0) + 1
        for member, n in rollouts.items():
            self._log_metric(f"ormix/{member}/straggler_rate", cut.get(member, 0) / n)
