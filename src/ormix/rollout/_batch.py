"""A batch's environment work in flight at once: sessions opened together, tool rounds run together.

TRL's `GRPOTrainer` resets the environments of a batch one after another and, in every tool round, calls each
rollout's tools one after another; only generation is batched. With session opens of seconds (sandboxes) and
tool calls of seconds to minutes, a step then waits about R·open + rounds·R·call for its environments. The
two pieces here let a trainer wait about one open and one call per round instead, without changing what any
rollout sees:

- `open_sessions`: given the batch's rows (before TRL resets anything), open all their sessions
  concurrently and park each one with its spec (`EpisodeConfig.park`); `Episode.reset(**row)` then takes the
  one parked for its row instead of opening its own. Parked sessions nobody took are closed and counted.
- `ToolRound`: installed on a batch's environments for the duration of TRL's tool loop. At the first tool
  call TRL makes in a round, it finds every rollout of the batch whose newest assistant message asks for
  tools, and runs all of them at once, each rollout's calls in their order, through the very same tool
  methods (same argument binding, routing, error handling). The calls TRL then makes, rollout after rollout,
  are answered with those results, in the order TRL would have made them. A call that was not run ahead
  (a mismatch, which would mean TRL changed) runs normally, and is counted.

Bounds: each spec's `max_concurrent_sessions` (opens and calls of that member in flight) and the runner's
`max_in_flight` (all members) apply; work beyond them waits its turn (backpressure, never failure).
"""

from __future__ import annotations

import concurrent.futures
import inspect
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import anyio

from ormix.config import StragglerConfig
from ormix.ors._bridge import run_sync
from ormix.rollout._stragglers import cut_at, tail_wait
from ormix.tools._binding import RESERVED_METHOD_NAMES

logger = logging.getLogger(__name__)

#: Rollouts whose sessions open, or whose tool calls run, at the same time by default (all members).
DEFAULT_MAX_IN_FLIGHT = 256

#: Dataset column naming the split of a row's task when it is not the spec's own (eval rows).
SPLIT_COLUMN = "ors_split"


def row_task(row: Mapping[str, Any]) -> tuple[Any, dict[str, Any] | None, str | None]:
    """The task a row opens a session for: task index, task spec, and the split when it is not the spec's own
    (eval rows of another split say so in `SPLIT_COLUMN`).

    Example:
        >>> row_task({"task_index": 3, "prompt": [], "environment": "seta", "ors_split": "test"})
        (3, None, 'test')
    """
    spec, split = row.get("task_spec"), row.get(SPLIT_COLUMN)
    return (
        row.get("task_index"),
        spec if isinstance(spec, dict) else None,
        split if isinstance(split, str) else None,
    )


def row_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """`row_task` as a key (the spec as canonical JSON). GRPO repeats each prompt `num_generations` times, so
    several rows share a key; each takes its own session.

    Example:
        >>> row_key({"task_spec": {"b": 1, "a": 2}})
        (None, '{"a": 2, "b": 1}', None)
    """
    index, spec, split = row_task(row)
    return index, None if spec is None else json.dumps(spec, sort_keys=True, default=str), split


@dataclass
class OpenRequest:
    """One session to open ahead: the spec's `EpisodeConfig` (its `open_ahead` coroutine) and the row."""

    config: Any
    row: Mapping[str, Any]


async def _open_all(requests: Sequence[OpenRequest], max_in_flight: int) -> None:
    limiter = anyio.CapacityLimiter(max(1, max_in_flight))

    async def one(request: OpenRequest) -> None:
        async with limiter:
            await request.config.open_ahead(request.row)

    async with anyio.create_task_group() as tg:
        for request in requests:
            tg.start_soon(one, request)


def open_sessions(requests: Sequence[OpenRequest], *, max_in_flight: int = DEFAULT_MAX_IN_FLIGHT) -> float:
    """Open the sessions of `requests` concurrently and park them with their specs; returns the wall time (s).

    A failed open is parked too (as the failure): the episode that takes it records it exactly as if it had
    opened the session itself.
    """
    if not requests:
        return 0.0
    t0 = time.perf_counter()
    run_sync(_open_all, list(requests), max_in_flight)
    return time.perf_counter() - t0


@dataclass
class RoundStats:
    """What the tool rounds of one batch did: rounds run ahead, calls answered from them, calls that ran
    normally (not found ahead), the wall time spent waiting for the environments, of it the time spent
    waiting on each round's last 5% of rollouts (`tail_wait_s`), and the rollouts cut as stragglers per
    member (`cut`)."""

    rounds: int = 0
    answered: int = 0
    fallbacks: int = 0
    wait_s: float = 0.0
    tail_wait_s: float = 0.0
    cut: dict[str, int] = field(default_factory=dict)


_executing = threading.local()


def _tool_methods(environment: Any) -> set[str]:
    # The tools TRL sees: public functions of the class, minus `reset` and `get_reward` (and `close`).
    return {
        name
        for name, _ in inspect.getmembers(type(environment), predicate=inspect.isfunction)
        if not name.startswith("_") and name not in RESERVED_METHOD_NAMES
    }


def _callable_with(arguments: Any) -> TypeGuard[Mapping[str, Any]]:
    """Whether TRL's ``tool(**function["arguments"])`` gets to call the tool with `arguments`: anything else
    (missing, ``None``, a list, a string, a number) fails in TRL before the call, so it must not run ahead.

    Example:
        >>> _callable_with({"text": "a"}), _callable_with({}), _callable_with([]), _callable_with(None)
        (True, True, False, False)
    """
    return isinstance(arguments, Mapping) and all(isinstance(k, str) for k in arguments)


@dataclass
class _Outcome:
    key: tuple[Any, ...]
    value: Any = None
    error: BaseException | None = None


@dataclass
class ToolRound:
    """Runs every rollout's tool calls of a round at once; answers TRL's one-after-another calls from them.

    Args:
        completions: TRL's per-rollout message lists (the tool loop appends to them in place).
        environments: the batch's environments, in rollout order.
        is_ours: which environments take part (ormix's episodes); others are left to TRL.
        max_in_flight: rollouts run at once.
        cut_stragglers: apply the members' straggler rules (`EpisodeConfig.stragglers`); ``False`` waits for
            every call (an evaluation).

    Installed by setting it on the environments (`ormix.rollout._episode.set_tool_round`); their tool methods
    then ask `intercept` before doing anything.
    """

    completions: Sequence[list[dict[str, Any]]]
    environments: Sequence[Any]
    is_ours: Callable[[Any], bool]
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    cut_stragglers: bool = True
    stats: RoundStats = field(default_factory=RoundStats)
    _results: dict[int, deque[_Outcome]] = field(default_factory=dict)
    _dispatched: dict[int, Any] = field(default_factory=dict)
    _messages_of: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def intercept(self, environment: Any, call: tuple[str, str, Any], run: Callable[[], Any]) -> Any:
        """The result of `call` (kind, wire name, arguments) on `environment`: run now (inside a round's
        worker), or the result of the same call run ahead, or (not found ahead) run now."""
        kind, name, arguments = call
        # How a call is recognised between the round's run and TRL's call: arguments as canonical JSON
        key = (kind, name, json.dumps(arguments, sort_keys=True, default=repr))
        recording = getattr(_executing, "round", None)
        if recording is self:
            outcome = _Outcome(key)
            try:
                outcome.value = run()
            except BaseException as e:  # noqa: BLE001 - handed to TRL's thread, raised there
                outcome.error = e
            with self._lock:
                self._results.setdefault(id(environment), deque()).append(outcome)
            if outcome.error is not None:
                raise outcome.error
            return outcome.value
        if self._asks_anew(environment):
            self._run_pending()
        taken = self._take(environment, key)
        if taken is not None:
            self.stats.answered += 1
            if taken.error is not None:
                raise taken.error
            return taken.value
        self.stats.fallbacks += 1
        logger.warning(
            "ormix: a tool call was not run ahead with its round (%s); running it now. If this repeats, the "
            "installed TRL's tool loop differs from the one ormix was tested with.",
            key[:2],
        )
        return run()

    def _take(self, environment: Any, key: tuple[Any, ...]) -> _Outcome | None:
        """The result run ahead for the call `key` of `environment`, if any. Results queued before it are
        of calls TRL did not make: dropped, or every later call of the rollout would miss its own and run
        a second time."""
        queue = self._results.get(id(environment))
        at = next((i for i, outcome in enumerate(queue or ()) if outcome.key == key), None)
        if queue is None or at is None:
            return None
        if at:
            logger.warning(
                "ormix: %d tool call(s) run ahead were not made by TRL (%s); their results are dropped. If "
                "this repeats, the installed TRL's tool loop differs from the one ormix was tested with.",
                at,
                [queue[i].key[:2] for i in range(at)],
            )
            for _ in range(at):
                queue.popleft()
        return queue.popleft()

    def _new_message(self, messages: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
        """The rollout's newest message if it is an assistant message that asks for tools and was not run
        yet. A message TRL rolled back (its result would overflow the completion) was run already."""
        last = messages[-1] if messages else None
        if not last or last.get("role") != "assistant" or not last.get("tool_calls"):
            return None
        return None if id(last) in self._dispatched else last

    def _asks_anew(self, environment: Any) -> bool:
        """Whether the rollout of `environment` has a message not run yet (its queue, if any, is stale)."""
        if not self._messages_of:
            self._messages_of.update(
                (id(e), m) for m, e in zip(self.completions, self.environments, strict=False)
            )
        messages = self._messages_of.get(id(environment))
        return messages is not None and self._new_message(messages) is not None

    def _pending(self) -> list[tuple[Any, list[dict[str, Any]]]]:
        """(environment, tool calls) of every rollout whose newest message asks for tools and was not run."""
        out = []
        for messages, environment in zip(self.completions, self.environments, strict=False):
            last = self._new_message(messages)
            if last is None or not self.is_ours(environment):
                continue
            self._dispatched[id(last)] = last  # kept alive, so its id is never reused
            out.append((environment, list(last["tool_calls"])))
        return out

    def _run_pending(self) -> None:
        pending = self._pending()
        if not pending:
            return
        for environment, _ in pending:
            # A rollout's new message means TRL is done with its previous one: what is left of that is stale.
            self._results.pop(id(environment), None)
        t0 = time.perf_counter()
        workers = min(len(pending), max(1, self.max_in_flight))
        pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="ormix-round")
        try:
            futures = {pool.submit(self._run_rollout, *item): item[0] for item in pending}
            latencies = self._wait(futures, t0)
        except BaseException:
            # Ctrl-C or SIGTERM's grace bound: leaving the pool the usual way would wait for every call in
            # flight (minutes of tools) and run the calls queued after them. Cutting the round cancels its
            # calls and fails their later ones at once; the caller's cleanup closes the sessions.
            from ormix.rollout._episode import cut_straggler

            for environment, _ in pending:
                cut_straggler(environment, "interrupted")
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        self.stats.rounds += 1
        self.stats.wait_s += time.perf_counter() - t0
        self.stats.tail_wait_s += tail_wait(latencies)

    def _wait(self, futures: dict[concurrent.futures.Future, Any], t0: float) -> list[float]:
        """Wait for the round's rollouts, cutting those its members' straggler rules give up on; returns
        each rollout's time in the round (a cut one: until it was cut)."""
        from ormix.rollout._episode import close_episodes, cut_straggler, episode_of

        groups: dict[str, list[concurrent.futures.Future]] = {}
        policies: dict[str, StragglerConfig] = {}
        skip = set()
        for future, environment in futures.items():
            episode = episode_of(environment)
            if getattr(episode, "_cut", False):
                skip.add(future)  # cut in an earlier round: its calls fail at once, not a latency
                continue
            config = getattr(episode, "_config", None)
            policy = getattr(config, "stragglers", None)
            member = getattr(config, "member", "?")
            groups.setdefault(member, []).append(future)
            if self.cut_stragglers and isinstance(policy, StragglerConfig):
                policies[member] = policy
        latency: dict[concurrent.futures.Future, float] = {}
        cut: list[Any] = []
        waiting = set(futures)
        while waiting:
            now = time.perf_counter() - t0
            soonest = None
            for member, policy in policies.items():
                running = [f for f in groups[member] if f in waiting and f not in latency]
                if not running:
                    continue
                done = [latency[f] for f in groups[member] if f in latency and futures[f] not in cut]
                at = cut_at(policy, done, len(groups[member]))
                if at is None:
                    continue
                if at <= now:
                    why = f"cut as a straggler after {now:.1f} s (rule of member {member!r})"
                    for future in running:
                        latency[future] = now
                        episode = cut_straggler(futures[future], why)
                        if episode is not None:
                            cut.append(episode)
                    self.stats.cut[member] = self.stats.cut.get(member, 0) + len(running)
                    continue
                soonest = at if soonest is None else min(soonest, at)
            timeout = None if soonest is None else max(0.0, soonest - now)
            finished, _ = concurrent.futures.wait(
                waiting, timeout=timeout, return_when=concurrent.futures.FIRST_COMPLETED
            )
            for future in finished:
                waiting.discard(future)
                latency.setdefault(future, time.perf_counter() - t0)
        if cut:
            close_episodes(cut)
        return [t for f, t in latency.items() if f not in skip]

    def _run_rollout(self, environment: Any, tool_calls: Iterable[dict[str, Any]]) -> None:
        # The calls TRL will make, made the way TRL makes them: the same method, the same arguments.
        methods = _tool_methods(environment)
        _executing.round = self
        try:
            for call in tool_calls:
                if call.get("type") != "function":
                    continue
                function = call.get("function") or {}
                name, arguments = function.get("name"), function.get("arguments")
                if name not in methods or not _callable_with(arguments):
                    continue
                try:
                    getattr(environment, name)(**arguments)
                except Exception:  # noqa: BLE001, S110 - recorded by intercept (or raised again by TRL's call)
                    pass
        finally:
            _executing.round = None
