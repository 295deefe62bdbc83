"""`AsyncMixtureTrainer`: TRL's `AsyncGRPOTrainer` on an ormix mixture, with every ormix signal.

TRL 1.16's async trainer (``trl.experimental.async_grpo``) spawns a CUDA-free rollout worker that draws
dataset rows, drives each episode against a vLLM server's ``/v1/completions`` and scores it there, while the
trainer trains on what the worker queued. Its reward functions are called without the environments, so ormix's
reward functions (which read the episodes) cannot score there, and nothing the worker computes reaches the
trainer's callbacks. This module moves ormix's scoring into the worker and ships what it learns back:

- `OrmixRolloutLoop` (the worker's loop, TRL's ``_AsyncRolloutLoop`` subclassed at its documented extension
  point, ``_provides_rollout_reward``): when a rollout ends it scores the member's episode as the sync reward
  function does (`ormix.rollout._outcome.training_reward`), builds its rollout record
  (`ormix.telemetry._records.rollout_record`) and closes the session; when the group is scored it stamps the
  records with the policy version the group was sampled with (``policy_version``, TRL's
  ``RolloutGroup.model_version``), feeds an adaptive mixture's planner (`ormix.mixture._lagged.LaggedPlan`)
  and sends the records to the trainer.
- The channel: TRL's own worker→trainer metrics queue (``metrics_queue``: bounded, dropped-on-full in the
  worker so the trainer can never stall generation, drained by the trainer at every log). The records ride
  on it under ``RECORDS_KEY``; `AsyncMixtureTrainer.log` takes them out before TRL reduces the rest. Per
  sample floats (``RolloutSample.metrics``) were the other channel TRL offers, but they are averaged per
  micro-batch and cannot carry a record; a queue of ormix's own would add a second drain for no gain.
  Records the queue dropped are counted (``ormix/records_dropped``).
- `AsyncMixtureTrainer.log`: the records of the window get ``step`` (the trainer step whose log entry they
  are in) and ``staleness`` (trainer policy version minus ``policy_version``); they are written once to
  ``rollouts/rank-0.jsonl`` through ormix's `TelemetryCallback` (which also counts failure causes for the
  coverage alarm), and every ``ormix/<member>/<metric>`` of that entry is computed from exactly those
  records (`ormix.telemetry._metrics.member_values`), so the log and the records agree by construction.
  Records that arrive with the end-of-training entry (rollouts generated ahead, never trained on) are
  counted (``ormix_records_untrained``), not written.
- Adaptive mixing: the planner runs in the worker (it decides rows as the worker reads them), with the lag
  `ormix.mixture._lagged.async_lag` gives for the worker's bounds; ``ormix/<member>/weight`` is logged from
  there.
- The episodes get coroutine tools (`ormix.rollout._coroutine_tools`): TRL awaits them on the worker's loop
  instead of holding a pool thread per call.

Two parts of TRL's async path need what this machine may lack. ``AsyncRolloutWorker`` refuses to start
without the ``vllm`` package although the worker only speaks HTTP (aiohttp): `OrmixRolloutWorker` is the same
worker without that import check. The trainer's packed "tree" attention calls a FlashAttention-3 kernel, CUDA
only: without CUDA, `AsyncMixtureTrainer` registers `sdpa_tree_attention` under TRL's attention name, the same
varlen causal attention (each segment's queries attend to its gathered key path, bottom-right aligned as
FlashAttention does) computed with torch's SDPA. Weight sync is TRL's ``weight_transfer`` protocol: give
`ormix.workbench._vllm_standin.StandInWeightTransfer` for the stand-in server, or nothing for TRL's NCCL
client
against a real vLLM.

Example:
    >>> from ormix.trl._async_grpo import RECORDS_KEY
    >>> RECORDS_KEY
    'ormix/records'
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import AutoTokenizer, GenerationConfig
from trl.experimental.async_grpo import AsyncGRPOTrainer
from trl.experimental.async_grpo.async_rollout_worker import AsyncRolloutWorker, _AsyncRolloutLoop

from ormix._errors import TrainConfigError
from ormix.mixture._adaptive_run import ROW_COLUMN, AdaptiveRun
from ormix.mixture._lagged import LaggedPlan, async_lag
from ormix.mixture._planner import Planner
from ormix.ors._bridge import portal
from ormix.rollout._coroutine_tools import AsyncEpisodeFactory
from ormix.rollout._group_scorer import GroupEntry, GroupScorer
from ormix.rollout._group_scoring import combine_rewards
from ormix.rollout._outcome import training_reward
from ormix.rollout._rewards import episode_of
from ormix.telemetry._metrics import member_values, metric_key
from ormix.telemetry._records import group_fields, rollout_record

#: The key of a metrics-queue item that carries rollout records (a list of them), not a metric.
RECORDS_KEY = "ormix/records"
#: TRL's default size of the worker's scoring queue (groups waiting to be scored).
SCORE_QUEUE_MAXSIZE = 16


# ── what the worker needs of the mixture (pickled into it) ─────────────────────────────────────────────


@dataclass
class WorkerMixture:
    """The mixture as the rollout worker sees it: each member's reward settings, keyed by its episodes'
    token, the group size, secrets to redact, and an adaptive mixture's `LaggedPlan`.

    Example:
        >>> WorkerMixture({"t": ("echo", 1.0, None)}, num_generations=2).member_of("t")
        ('echo', 1.0, None)
    """

    members: dict[str, tuple[str, float, float | None]]
    num_generations: int
    secrets: list[str] = field(default_factory=list)
    lagged: LaggedPlan | None = None
    #: Token → the member's `GroupScorer`, for the members that score groups.
    scorers: dict[str, GroupScorer] = field(default_factory=dict)

    def member_of(self, token: str | None) -> tuple[str, float, float | None] | None:
        """(member, scale, unscored_reward) of an episode token (None: not a member's episode)."""
        return self.members.get(token) if token is not None else None


class _AsyncAdaptiveRun(AdaptiveRun):
    """`AdaptiveRun` whose rows carry their position (`ROW_COLUMN`) and that pickles (its lock is rebuilt):
    the worker reads the rows, so the planner travels into it with the dataset."""

    def transform(self, batch: Mapping[str, Sequence[Any]]) -> dict[str, list[Any]]:
        out = super().transform(batch)
        out[ROW_COLUMN] = [int(i) for i in batch[ROW_COLUMN]]
        return out

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        import threading

        self.__dict__.update(state)
        self._lock = threading.Lock()


# ── the worker ─────────────────────────────────────────────────────────────────────────────────────────


def _episode_in(tool_dict: Mapping[str, Callable[..., Any]]) -> Any:
    for method in tool_dict.values():
        owner = getattr(method, "__self__", None)
        if owner is not None:
            return episode_of(owner)
    return None


async def _on_portal(async_fn: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.wrap_future(portal().start_task_soon(async_fn, *args))


class OrmixRolloutLoop(_AsyncRolloutLoop):
    """TRL's rollout loop with ormix's scoring, records and planner (see the module docstring).

    Takes TRL's loop arguments plus ``ormix`` (a `WorkerMixture`).
    """

    _provides_rollout_reward = True

    def __init__(self, *, ormix: WorkerMixture, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ormix = ormix
        # The rollout reward's column (TRL names one per reward source; this one is ormix's members).
        self.reward_func_names.append("ormix")
        self._records: dict[int, list[dict[str, Any]]] = {}
        self._dropped = 0
        #: Group → its rollouts waiting for the environment to score the group: (completion, `GroupEntry`,
        #: pointwise reward, record, the member's episode token).
        self._waiting: dict[int, list[tuple[Any, GroupEntry, float | None, dict[str, Any], str]]] = {}

    def run(self) -> None:
        try:
            super().run()
        finally:
            # Sessions of groups that were never completed or scored (the worker stopped) are closed.
            waiting = [entry for group in self._waiting.values() for _, entry, *_ in group]
            self._waiting.clear()
            for entry in waiting:
                with contextlib.suppress(Exception):
                    portal().start_task_soon(entry.aclose).result(timeout=30)
            # The trainer has stopped reading: samples and metrics still buffered for it are dropped rather
            # than flushed, or this process would wait at exit for a reader that is gone (TRL then kills it
            # after 15 s).
            self.rollout_buffer.cancel_join_thread()
            self._metrics_queue.cancel_join_thread()

    async def _generate_one(
        self,
        prompt: Any,
        tool_dict: dict[str, Callable[..., Any]],
        tools: list[Callable[..., Any]],
        group_id: int = 0,
    ) -> Any:
        started = time.monotonic()
        result = await super()._generate_one(prompt, tool_dict, tools, group_id)
        duration = time.monotonic() - started
        episode = _episode_in(tool_dict)
        member = self.ormix.member_of(getattr(episode, "token", None))
        if member is None:
            return result
        name, scale, unscored = member
        reward = training_reward(episode.outcome, scale=scale, unscored_reward=unscored)
        record = rollout_record(
            episode,
            member=name,
            training_reward=reward,
            step=None,
            rank=0,
            mode="train",
            group=group_id * self.num_generations,
            secrets=self.ormix.secrets,
        )
        record["tool_call_count"] = int(result[3])
        record["duration_s"] = round(duration, 4)  # generation and tool calls (the reset came before)
        self._records.setdefault(group_id, []).append(record)
        scorer = self.ormix.scorers.get(episode.token)
        if scorer is not None and scorer.rule.active:
            # Its group is scored on one of the group's sessions once the group is complete: the session
            # leaves the episode (which goes back to TRL's pool and may be reset first) and waits with it.
            entry = GroupEntry.detach(episode)
            self._waiting.setdefault(group_id, []).append((result[0], entry, reward, record, episode.token))
        else:
            # The session is done once its record is taken: free the server's sandbox now, without a thread.
            await _on_portal(episode._aclose)
        return (*result[:5], reward)

    async def _score_by_environment(self, group: Any) -> None:
        """Score the group on its environment (a member with ``group_scoring``), combine each group score
        into the group's rollout rewards and records, and close the group's sessions."""
        waiting = self._waiting.pop(group.group_id, [])
        if not waiting:
            return
        # TRL's group lists are in the order rollouts were collected: a rollout is found by its completion.
        position = {id(c): k for k, c in enumerate(group.completions)}
        entries = [entry for _, entry, *_ in waiting]
        token = waiting[0][4]  # a group is one row's: one member's
        scorer = self.ormix.scorers[token]
        scale = self.ormix.members[token][1]
        try:
            await _on_portal(scorer.ascore, entries, [completion for completion, *_ in waiting])
            for completion, entry, reward, record, _ in waiting:
                group_reward = entry.group_reward if entry.group_status == "scored" else None
                combined = combine_rewards(
                    reward, None if group_reward is None else group_reward * scale, scorer.rule
                )
                record["reward"] = combined
                record.update(group_fields(entry, self.ormix.secrets))
                k = position.get(id(completion))
                if k is not None:
                    group.rollout_rewards[k] = combined
        finally:
            for entry in entries:
                await _on_portal(entry.aclose)

    async def _score_group(self, group: Any) -> Any:
        await self._score_by_environment(group)
        samples = await super()._score_group(group)
        records = self._records.pop(group.group_id, [])
        extra: dict[str, Any] = {}
        for record in records:
            record["policy_version"] = int(group.model_version)
        lagged = self.ormix.lagged
        rows = group.reward_kwargs.get(ROW_COLUMN)
        if lagged is not None and records and rows:
            row = int(rows[0])
            step = lagged.step_of(row)
            if not lagged.has(row):  # has() covers an observed step, by a set lookup
                first = records[0]
                lagged.add(row, first["member"], int(first["task_index"]), [r["reward"] for r in records])
            for record in records:
                record["plan_step"] = step
            weights = lagged.planner.weights(step)
            extra["ormix/plan_held_steps"] = float(len(lagged.planner.held))
            for member, weight in weights.items():
                extra[metric_key(member, "weight")] = float(weight)
                extra[metric_key(member, "tasks_set_aside")] = float(
                    lagged.planner.tasks_set_aside(member, step)
                )
        if records or extra:
            payload: dict[str, Any] = dict(extra)
            if records:
                payload[RECORDS_KEY] = records
            if self._dropped:
                payload["ormix/records_dropped"] = float(self._dropped)
            try:
                self._metrics_queue.put_nowait(payload)
                self._dropped = 0
            except queue.Full:
                self._dropped += len(records)  # never block generation; said with the next push
        return samples


class OrmixRolloutWorker(AsyncRolloutWorker):
    """TRL's `AsyncRolloutWorker` running `OrmixRolloutLoop`, without TRL's check that the ``vllm`` package is
    installed (the worker itself only speaks HTTP to the server, through aiohttp)."""

    _loop_cls = OrmixRolloutLoop

    def __init__(self, *, queue_maxsize: int = 0, child_ready_timeout: int = 300, **loop_kwargs: Any) -> None:
        # AsyncRolloutWorker.__init__ minus its vllm import check (TRL 1.16; kept in step by the tests).
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        self._mp_ctx = ctx
        self.rollout_buffer = ctx.Queue(maxsize=queue_maxsize)
        self._model_version_value = ctx.Value("i", 0)
        self._stop_event_mp = ctx.Event()
        self._child_ready_event = ctx.Event()
        self._heartbeat_value = ctx.Value("d", 0.0)
        self._failed_event = ctx.Event()
        self._exception_info_queue = ctx.Queue(maxsize=1)
        self.metrics_queue = ctx.Queue(maxsize=4096)
        loop_kwargs["queue_maxsize"] = queue_maxsize
        loop_kwargs.setdefault("dataset_start_index", 0)
        self._loop_kwargs = loop_kwargs
        self._child_ready_timeout = child_ready_timeout
        self._process = None


# ── tree attention without CUDA ────────────────────────────────────────────────────────────────────────


def sdpa_tree_attention(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: Any,
    *,
    tree_kv_index: torch.Tensor,
    tree_cu_seqlens_q: torch.Tensor,
    tree_cu_seqlens_k: torch.Tensor,
    tree_max_seqlen_q: int,
    tree_max_seqlen_k: int,
    scaling: float | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """TRL's packed tree attention (``trl.experimental.async_grpo.packing.tree_attention``) with torch's SDPA
    instead of the FlashAttention-3 varlen kernel: segment *i*'s queries attend causally, bottom-right
    aligned, to the keys gathered by ``tree_kv_index[cu_k[i]:cu_k[i+1]]``.

    Example:
        >>> q = torch.randn(1, 2, 3, 4); idx = torch.tensor([0, 1, 2])
        >>> cu = torch.tensor([0, 3])
        >>> out, _ = sdpa_tree_attention(None, q, q, q, None, tree_kv_index=idx, tree_cu_seqlens_q=cu,
        ...                              tree_cu_seqlens_k=cu, tree_max_seqlen_q=3, tree_max_seqlen_k=3)
        >>> ref = torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
        >>> bool(torch.allclose(out, ref.transpose(1, 2), atol=1e-6))
        True
    """
    if softcap:
        raise TrainConfigError("sdpa_tree_attention does not implement softcap; train this model with CUDA")
    q = query.transpose(1, 2)[0]
    k = key.transpose(1, 2)[0].index_select(0, tree_kv_index)
    v = value.transpose(1, 2)[0].index_select(0, tree_kv_index)
    groups = q.shape[1] // k.shape[1]
    cu_q, cu_k = tree_cu_seqlens_q.tolist(), tree_cu_seqlens_k.tolist()
    parts = []
    for i in range(len(cu_q) - 1):
        qi = q[cu_q[i] : cu_q[i + 1]].transpose(0, 1)
        ki = k[cu_k[i] : cu_k[i + 1]].transpose(0, 1).repeat_interleave(groups, dim=0)
        vi = v[cu_k[i] : cu_k[i + 1]].transpose(0, 1).repeat_interleave(groups, dim=0)
        lq, lk = qi.shape[1], ki.shape[1]
        mask = torch.ones(lq, lk, dtype=torch.bool, device=q.device).tril(diagonal=lk - lq)
        if sliding_window:
            mask &= ~torch.ones_like(mask).tril(diagonal=lk - lq - sliding_window)
        out = torch.nn.functional.scaled_dot_product_attention(qi, ki, vi, attn_mask=mask, scale=scaling)
        parts.append(out.transpose(0, 1))
    return torch.cat(parts, dim=0).unsqueeze(0), None


def use_sdpa_tree_attention() -> None:
    """Register `sdpa_tree_attention` under TRL's tree-attention name (replacing the FlashAttention-3 one)."""
    from transformers import AttentionInterface
    from trl.experimental.async_grpo.packing import TREE_ATTENTION

    AttentionInterface.register(TREE_ATTENTION, sdpa_tree_attention)


# ── the trainer ────────────────────────────────────────────────────────────────────────────────────────


@contextlib.contextmanager
def _without_cuda_peak_flops() -> Iterator[None]:
    """Without CUDA, TRL's trainer construction asks CUDA for the device name (to look up peak FLOPs for
    its MFU metrics) and fails; for the call, the lookup answers ``None`` (unknown device: TRL then logs
    no MFU, as it does for any device it does not know)."""
    from trl.experimental.async_grpo import async_grpo_trainer

    if torch.cuda.is_available():
        yield
        return
    original = async_grpo_trainer.get_peak_flops_per_device
    async_grpo_trainer.get_peak_flops_per_device = lambda accelerator, dtype: None
    try:
        yield
    finally:
        async_grpo_trainer.get_peak_flops_per_device = original


def _eos_ids(model: str, tokenizer: Any) -> list[int]:
    try:
        eos = GenerationConfig.from_pretrained(model).eos_token_id
    except OSError:
        eos = None
    ids = [eos] if isinstance(eos, int) else list(eos or [])
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.insert(0, tokenizer.eos_token_id)
    return ids


def _episode_factory(mixture: Any, coroutine_tools: bool) -> Any:
    """The mixture's environment factory, its episodes' tools made coroutines when ``coroutine_tools``."""
    factory = mixture.environment_factory
    if not coroutine_tools:
        return factory
    if isinstance(factory, dict):
        return {n: AsyncEpisodeFactory(f) for n, f in factory.items()}
    return AsyncEpisodeFactory(factory)


def _rollout_worker(
    model: str,
    tokenizer: Any,
    dataset: Any,
    factory: Any,
    args: Any,
    score_queue_maxsize: int,
    ormix: WorkerMixture,
) -> OrmixRolloutWorker:
    """The rollout worker TRL's trainer would build from ``args``, ormix's, on the mixture's rows."""
    return OrmixRolloutWorker(
        model_name=model,
        dataset=dataset,
        reward_funcs=[],
        processing_class=tokenizer,
        eos_token_ids=_eos_ids(model, tokenizer),
        environment_factory=factory,
        num_generations=args.num_generations,
        max_inflight_tasks=args.max_inflight_tasks,
        queue_maxsize=args.queue_maxsize,
        score_queue_maxsize=score_queue_maxsize,
        vllm_server_url=args.vllm_server_base_url,
        max_tokens=args.max_completion_length,
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        min_p=args.min_p,
        repetition_penalty=args.repetition_penalty,
        request_timeout=args.request_timeout,
        chat_template_kwargs=args.chat_template_kwargs,
        max_tool_calling_iterations=args.max_tool_calling_iterations,
        log_completions=args.log_completions,
        num_completions_to_print=args.num_completions_to_print,
        fork_threshold_tokens=args.fork_threshold_tokens,
        ormix=ormix,
    )


class AsyncMixtureTrainer(AsyncGRPOTrainer):
    """`trl.experimental.async_grpo.AsyncGRPOTrainer` on an ormix mixture (see the module docstring).

    Args:
        model: the model path (TRL's async trainer takes a path; the worker names it to the server).
        mixture: a `MixtureSpec` (`ormix.load_mixture`).
        args: an ``AsyncGRPOConfig`` (``vllm_server_base_url`` is the server).
        weight_transfer: TRL's ``weight_transfer`` (``None``: TRL's NCCL client, which needs vLLM).
        coroutine_tools: give the episodes coroutine tool methods (``False``: TRL's thread pool runs them).
        score_queue_maxsize: the worker's scoring queue (groups); enters the adaptive lag.
        callbacks: more trainer callbacks (ormix's own are added).

    Example:
        Not run as a doctest: it needs a served model (`ormix.workbench._vllm_standin`) and a training run.

        >>> trainer = AsyncMixtureTrainer("path/to/model", mix, args,                # doctest: +SKIP
        ...                               weight_transfer=StandInWeightTransfer(standin))
        >>> trainer.train()                                                          # doctest: +SKIP
    """

    def __init__(
        self,
        model: str,
        mixture: Any,
        args: Any,
        *,
        weight_transfer: Any = None,
        processing_class: Any = None,
        callbacks: list[Any] | None = None,
        coroutine_tools: bool = True,
        score_queue_maxsize: int = SCORE_QUEUE_MAXSIZE,
        **kwargs: Any,
    ) -> None:
        from ormix.trl._callbacks import AdaptiveCallback, TelemetryCallback

        model = str(model)
        tokenizer = processing_class or AutoTokenizer.from_pretrained(model)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        # The worker reads the dataset rows itself (TRL's column removal never runs): said so to ormix's
        # check.
        args.remove_unused_columns = False
        samples_per_step = (
            args.per_device_train_batch_size * args.gradient_accumulation_steps * args.world_size
        )
        if args.max_inflight_tasks < 0:  # as TRL sets it (it does so after building its own worker)
            args.max_inflight_tasks = max(args.max_staleness, 1) * samples_per_step
        train_dataset, lagged = self._planned_dataset(mixture, args, score_queue_maxsize)
        members = {f.token: (f.member, float(f.scale), f.unscored_reward) for f in mixture.reward_funcs}
        scorers = {f.token: f.group_scorer for f in mixture.reward_funcs if f.group_scorer is not None}
        self.worker_mixture = WorkerMixture(
            members, int(args.num_generations), mixture.secret_values(), lagged, scorers
        )
        worker = _rollout_worker(
            model,
            tokenizer,
            train_dataset,
            _episode_factory(mixture, coroutine_tools),
            args,
            score_queue_maxsize,
            self.worker_mixture,
        )
        ours = [c for c in mixture.callbacks if not isinstance(c, AdaptiveCallback)]
        self._telemetry = next((c for c in ours if isinstance(c, TelemetryCallback)), None)
        self.ormix_members = sorted({name for name, _, _ in members.values()})
        with _without_cuda_peak_flops():
            super().__init__(
                model=model,
                args=args,
                train_dataset=train_dataset,
                processing_class=tokenizer,
                callbacks=[*ours, *(callbacks or [])],
                rollout_worker=worker,  # type: ignore[arg-type]  # TRL's own worker class, subclassed
                weight_transfer=weight_transfer,
                **kwargs,
            )
        if not torch.cuda.is_available():
            use_sdpa_tree_attention()
        self.ormix_records_seen = 0
        self.ormix_records_untrained = 0

    def _planned_dataset(
        self, mixture: Any, args: Any, score_queue_maxsize: int
    ) -> tuple[Any, LaggedPlan | None]:
        """The rows the worker reads, and with adaptive weights the plan that lags by the rollouts in
        flight (`ormix_lag`, from the worker's queues)."""
        self.ormix_lag: int | None = None
        if not mixture.adaptive:
            return mixture.train_dataset, None
        self.ormix_lag = async_lag(
            max_inflight_tasks=args.max_inflight_tasks,
            score_queue_maxsize=score_queue_maxsize,
            prompts_per_step=mixture.planner.k,
        )
        # A fresh copy of the mixture's planner that decides with the lag (no statistics observed yet).
        planner: Planner = mixture.planner.fresh(lag=self.ormix_lag, hold_unobserved=True)
        rows = {
            n: {r["task_index"]: r for r in mixture.spec(n).dataset_rows()} for n in mixture.train_members
        }
        run = _AsyncAdaptiveRun(planner, rows)
        return run.dataset(mixture.num_rows), LaggedPlan(planner)

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        worker = getattr(self, "rollout_worker", None)
        if self.accelerator.is_main_process and worker is not None:
            records: list[dict[str, Any]] = []
            while True:
                try:
                    item = worker.metrics_queue.get_nowait()
                except queue.Empty:
                    break
                records.extend(item.pop(RECORDS_KEY, None) or [])
                for key, value in item.items():
                    self._metrics["train"][key].append(value)
            if records and "train_runtime" in logs:
                # The end-of-training entry: these rollouts were generated ahead and never trained on (the
                # last step's entry is already written), so they are no step's records.
                self.ormix_records_untrained += len(records)
            elif records:
                self._take_records(records)
            # TRL's `log` drains the queue too: a payload arriving now would put its records list among the
            # floats it reduces. Everything due was drained above; the next call takes what comes after.
            self.rollout_worker = None  # type: ignore[assignment]  # restored below
            try:
                super().log(logs, start_time)
            finally:
                self.rollout_worker = worker
            return
        super().log(logs, start_time)

    def _take_records(self, records: list[dict[str, Any]]) -> None:
        step = int(self.state.global_step)
        for record in records:
            record["step"] = step
            record["staleness"] = int(self.model_version) - int(record.get("policy_version", 0))
            record["received"] = round(time.time(), 3)
        run = getattr(self._telemetry, "run", None)
        if run is not None:
            for member in self.ormix_members:
                run.note(member, [r for r in records if r["member"] == member])
            run.write(records)
            if run.upload is not None:  # the worker sends records only: uploaded without their chat
                run.upload.observe_records(records)
        sink = self._metrics["train"]
        for member in self.ormix_members:
            for metric, values in member_values(records, member, len(records)).items():
                sink[metric_key(member, metric)].extend(values)
        # Where the window's rollout time went, summed over its rollouts (the sync trainer logs the same
        # three per batch): opening sessions, waiting for tools, the rest of the rollout (generating).
        open_s = sum((r.get("open_ms") or 0.0) for r in records) / 1000
        tools_s = sum(c.get("latency_ms") or 0.0 for r in records for c in r.get("calls") or []) / 1000
        duration_s = sum(r.get("duration_s") or 0.0 for r in records)
        sink["ormix/env/open_s"].append(open_s)
        sink["ormix/env/tools_s"].append(tools_s)
        sink["ormix/env/generate_s"].append(max(0.0, duration_s - tools_s))
        sink["ormix/staleness"].extend(float(r["staleness"]) for r in records)
        sink["ormix/policy_version"].extend(float(r["policy_version"]) for r in records)
        self.ormix_records_seen += len(records)


# ── the file-driven path (`ormix train FILE --async`) ─────────────────────────────────────────────────

#: `--vllm-url standin`: ormix's vLLM stand-in (`ormix.workbench._vllm_standin`), started for the run.
STANDIN = "standin"

# The GRPOConfig settings an AsyncGRPOConfig takes over as they are (both are TrainingArguments).
_SHARED = (
    "output_dir",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "num_generations",
    "max_steps",
    "max_completion_length",
    "learning_rate",
    "logging_steps",
    "report_to",
    "use_cpu",
    "bf16",
    "save_strategy",
    "save_steps",
    "seed",
    "temperature",
    "top_p",
    "max_tool_calling_iterations",
    "disable_tqdm",
    "log_completions",
)


def async_problems(vllm_url: str) -> list[str]:
    """What stops ``ormix train --async --vllm-url URL`` before anything starts (empty: nothing).

    Example:
        >>> async_problems("standin")
        []
        >>> async_problems("localhost:8000")[0][:41]
        '--vllm-url localhost:8000 is not an http('
    """
    import importlib.util

    if vllm_url == STANDIN:
        return []
    problems = []
    if not vllm_url.startswith(("http://", "https://")):
        problems.append(f"--vllm-url {vllm_url} is not an http(s):// URL (or `standin`)")
    if importlib.util.find_spec("vllm") is None:
        problems.append(
            "a vLLM server receives the trainer's weights over NCCL through the vllm package, which is not "
            "installed here: pip install vllm (the server must run with VLLM_SERVER_DEV_MODE=1 and "
            '--weight-transfer-config \'{"backend":"nccl"}\'), or use --vllm-url standin on a machine '
            "without vLLM"
        )
    return problems


def async_config(args: Any, vllm_url: str) -> Any:
    """The ``AsyncGRPOConfig`` of a run whose checked ``GRPOConfig`` is ``args``: the shared settings, a
    fixed number of samples per optimizer step (``token_budget=0``, so a step is
    ``per_device_train_batch_size × gradient_accumulation_steps`` samples and the mixture's per-step
    composition holds), float32 weights on CPU, and the server's URL (for `STANDIN`, set once it runs)."""
    from trl.experimental.async_grpo import AsyncGRPOConfig

    settings = {name: getattr(args, name) for name in _SHARED if hasattr(args, name)}
    settings["report_to"] = settings.get("report_to") or "none"
    if settings.get("save_strategy") is not None:
        settings["save_strategy"] = str(
            getattr(settings["save_strategy"], "value", settings["save_strategy"])
        )
    settings.update(
        token_budget=0,
        remove_unused_columns=False,
        vllm_server_base_url=vllm_url if vllm_url != STANDIN else "http://127.0.0.1:0",
    )
    if args.use_cpu:
        settings.update(dtype="float32", bf16=False)
    return AsyncGRPOConfig(**settings)
