"""`ormix eval`: every eval task of every member, k samples each, through the same concurrent sessions as
training; pass@k, pass^k, mean reward, coverage and errors per member, each with an interval.

An application of the library, like `ormix.app._train` (it may import TRL, transformers and
`ormix.workbench`). This
module drives the trainer; each other step has its own module:

1. tasks (`ormix.evaluation._tasks`): each member's eval tasks: its ``eval:`` set, else its environment's
   ``test`` split, else its training tasks (said so: ``source: "train tasks"``); eval-only members
   included; ``--split`` overrides the split of all of them;
2. the model (`ormix.app._eval_model`): a hub id, a model directory, a run's final model or checkpoint;
3. the output directory (`ormix.app._eval_dir`): ``manifest.json`` (`ormix.app._eval_manifest`)
   says what this eval is (mixture, config hash, model, policy, samples, seed, generation settings, per
   member its target, split, tasks and where they came from); an existing directory holding another eval
   is refused (``--overwrite`` starts over), the same eval resumes;
4. generation (here): ormix's `ConcurrentGRPOTrainer.evaluate()` (TRL's own generation: transformers, or
   vLLM with ``--set use_vllm=true``), the tasks in chunks of ``tasks_per_chunk`` × ``samples`` rollouts;
   each chunk's rollout records (the training format, ``mode: "eval"``) are appended to ``rollouts.jsonl``
   when it ends, so an interrupted eval resumes at the next incomplete chunk (a task with fewer records
   than ``samples`` is run again); the chunks are planned over every task and seeded by their planned
   number (`chunks_left`), so a resumed eval samples as an uninterrupted one. On several processes
   (``torchrun``, ``accelerate launch``) each runs a share of every chunk (whole tasks, `chunk_share`);
   process 0 alone reads, resumes and writes the directory and tells the others what is left, so all of
   them run the same chunks;
5. results: ``summary.json`` (`ormix.evaluation._summary.summarize`), ``report.md``, ``plots/summary.png``.

``--policy reference`` is the oracle run (`ormix.app._oracle`): each task's reference solution is
played through the same trainer path, a `ormix.workbench._scripted.ScriptedPolicy` replacing generation. A
task
without a reference solution is not run and is reported as such (``no_reference``), never as a 0.

Example:
    Not run as a doctest: an eval loads a torch model and runs GRPO's generation.

    >>> from ormix.app._eval import run_eval
    >>> result = run_eval("mixtures/local-demo.yaml", k=(1, 4))                   # doctest: +SKIP
    >>> result.summary["members"]["seta"]["pass@4"]                              # doctest: +SKIP
    {'value': 0.0, 'low': 0.0, 'high': 0.43, 'n': 5}
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, get_args

from ormix._choices import EvalPolicy
from ormix._errors import OrmixError
from ormix.app._command import EXIT_FAILED, EXIT_OK, frozen_heap, run_command
from ormix.app._eval_dir import EvalDirectory
from ormix.app._eval_manifest import eval_manifest, trainer_manifest
from ormix.app._eval_model import resolve_eval_model
from ormix.app._oracle import attach_reference_policy, oracle_failures, reference_calls, reference_settings
from ormix.app._render import print_table
from ormix.app._workspace import default_eval_dir
from ormix.config._trainer_rules import pass_k_problem
from ormix.evaluation._errors import EvalError
from ormix.evaluation._tasks import EvalTasks, TaskKey, eval_tasks, interleaved_chunks, task_key

if TYPE_CHECKING:  # pragma: no cover
    from ormix.config import MixtureConfig
    from ormix.mixture import MixtureSpec

logger = logging.getLogger(__name__)
_T = TypeVar("_T")


# ── options and results ───────────────────────────────────────────────


@dataclass
class EvalOptions:
    """How to evaluate: `ormix eval`'s flags (`run_eval` takes them as keywords too).

    Attributes:
        model: hub id, local model directory, a run directory (its final ``model/``) or
            ``run_dir/checkpoint-N``; ``None`` = ormix's offline tiny model.
        k: the pass@k reported; samples per task = max(k) unless ``samples``. ``None``: the mixture file's
            ``evaluation:`` (its ``k`` and ``samples``; `EvaluationConfig`), else pass@1.
        samples: rollouts per task (at least max(k)).
        members: members to evaluate (``()``: every member).
        split: evaluate every member on this split instead.
        policy: ``model`` (generation) or ``reference`` (each task's reference solution, the oracle).
        out_dir: output directory (default: ``<run_dir>/eval[/checkpoint-N]`` for a run's model, else
            ``evals/<mixture>-<model>``).
        seed: sampling seed (and the order of rollouts within a chunk); ``None``: the mixture's ``seed`` (what
            `ormix train` trains and evaluates with).
        settings: GRPOConfig overrides (``--set``) over the file's ``train:`` section: generation settings
            such as ``temperature``, ``max_completion_length``, ``use_vllm``.
        overwrite: start over in an ``out_dir`` holding another eval.
        success_threshold: a scored sample succeeds when its ``env_reward`` reaches it (above 0; recorded
            in the manifest, it is not part of the eval's identity: a finished eval run again with another
            one is summarised again).
        tasks_per_chunk: tasks whose rollouts run at once (one ``evaluate()`` batch of
            ``tasks_per_chunk × samples`` rollouts); records are written after each chunk.
        max_chunks: stop after this many chunks (the rest resume on the next run).
        concurrent: ``False`` gives TRL's sequential environment loop (for comparison).

    Example:
        >>> EvalOptions(k=(1, 4)).samples_per_task
        4
    """

    model: str | None = None
    k: tuple[int, ...] | None = None
    samples: int | None = None
    members: tuple[str, ...] = ()
    split: str | None = None
    policy: EvalPolicy = "model"
    out_dir: Path | None = None
    seed: int | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    overwrite: bool = False
    success_threshold: float = 1.0
    tasks_per_chunk: int = 16
    max_chunks: int | None = None
    concurrent: bool = True

    @property
    def ks(self) -> tuple[int, ...]:
        """The k values reported (pass@1 when none were given)."""
        return self.k or (1,)

    @property
    def samples_per_task(self) -> int:
        """Rollouts per task: ``samples``, else the largest k."""
        return self.samples if self.samples is not None else max(self.ks)

    def for_mixture(self, config: MixtureConfig) -> EvalOptions:
        """These options with ``k`` (and ``samples``, unless given: then the file's k up to it) from the
        file's ``evaluation:`` when ``k`` is not given, and the mixture's seed when ``seed`` is not.

        Example:
            >>> from ormix.config import load_mixture_config
            >>> opts = EvalOptions().for_mixture(load_mixture_config("mixtures/local-demo.yaml"))
            >>> opts.k, opts.samples_per_task
            ((1, 4), 4)
        """
        opts = replace(self, seed=config.seed if self.seed is None else self.seed)
        file = config.evaluation
        if self.k is not None or file is None:
            return replace(opts, k=self.ks)
        if self.samples is None:
            return replace(opts, k=file.ks, samples=file.samples)
        # --samples given: the file's k that it can serve
        return replace(opts, k=tuple(k for k in file.ks if k <= self.samples) or (1,))

    def check(self) -> None:
        """Raise `EvalError` for options that cannot work."""
        ks = self.ks
        if problem := pass_k_problem(ks, self.samples):
            raise EvalError(f"-k: {problem}" + ("; raise --samples or drop it" if self.samples else ""))
        if self.policy not in get_args(EvalPolicy):
            raise EvalError(
                f"--policy is {' or '.join(map(repr, get_args(EvalPolicy)))}, not {self.policy!r}"
            )
        if self.tasks_per_chunk < 1 or (self.max_chunks is not None and self.max_chunks < 1):
            raise EvalError("tasks_per_chunk and max_chunks are at least 1")
        if not self.success_threshold > 0.0:  # NaN too
            raise EvalError(
                f"--success-threshold is the env_reward a scored rollout must reach to succeed, a number "
                f"above 0 (e.g. 1.0 or 0.5), not {self.success_threshold}"
            )


@dataclass
class EvalResult:
    """What an eval left: its directory, summary (``summary.json``), manifest, and how many tasks were
    already done there (resumed, not run again)."""

    out_dir: Path
    summary: dict[str, Any]
    manifest: dict[str, Any]
    resumed_tasks: int = 0
    #: Tasks run now; whether every task is done (``max_chunks`` can leave some for a later run).
    ran_tasks: int = 0
    complete: bool = True
    #: Seconds the chunks run now took (generation, environments, scoring), and their rollouts.
    eval_s: float = 0.0
    rollouts: int = 0


# ── running ───────────────────────────────────────────────────────────


def chunk_share(tasks: int, samples: int, processes: int) -> int:
    """Rollouts of a chunk of ``tasks`` × ``samples`` that each of ``processes`` runs: whole tasks (each
    task's samples on one process, as a GRPO group is), as evenly as whole tasks allow.

    Each process's eval batch is this share, so together they run the chunk once. When the tasks do not
    divide evenly, the data loader pads the last process's batch with the chunk's first tasks again; those
    extra rollouts are dropped (`_first_samples`).

    Example:
        >>> chunk_share(16, 4, 1), chunk_share(16, 4, 2), chunk_share(3, 2, 2)
        (64, 32, 4)
    """
    return -(-tasks // max(processes, 1)) * samples


@contextlib.contextmanager
def _eval_geometry(trainer: Any, rollouts: int, samples: int) -> Iterator[None]:
    """The trainer's eval batch set to one chunk (``rollouts`` = tasks × samples) over all its processes,
    restored afterwards."""
    args = trainer.args
    saved = (args.per_device_eval_batch_size, getattr(trainer, "num_generations_eval", None))
    args.per_device_eval_batch_size = chunk_share(rollouts // samples, samples, _world_size(trainer))
    trainer.num_generations_eval = samples
    try:
        yield
    finally:
        args.per_device_eval_batch_size, trainer.num_generations_eval = saved


def _world_size(trainer: Any) -> int:
    return int(getattr(trainer.args, "world_size", 1) or 1)


def _first_samples(
    records: Sequence[dict[str, Any]], chunk: Sequence[tuple[str, str, int]], samples: int
) -> list[dict[str, Any]]:
    """The chunk's records, at most ``samples`` a task, the first in rank order kept: a process whose batch
    was padded ran some tasks twice (`chunk_share`), and the padding comes last."""
    wanted = set(chunk)
    kept: list[dict[str, Any]] = []
    counts: Counter[Any] = Counter()
    for record in records:
        key = task_key(record)
        if key in wanted and counts[key] >= samples:
            continue
        counts[key] += 1
        kept.append(record)
    return kept


def _rank_zero_decides(decide: Callable[[], _T]) -> _T:
    """``decide()`` run on process 0 only, its result (or the `OrmixError` it raised) given to every process.

    What an eval directory holds decides which tasks run; if each process read (or, resuming, rewrote) the
    files itself, they could disagree on the chunks and wait forever on each other's collectives. One
    process (without `torch.distributed` running: this one) reads and writes; the others are told.
    """
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover - torch comes with transformers
        return decide()
    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return decide()
    box: list[Any] = [None]
    if dist.get_rank() == 0:
        try:
            box = [("ok", decide())]
        except OrmixError as e:
            box = [("error", e)]
        except Exception as e:  # noqa: BLE001 - told to the others (they would wait forever), raised here
            box = [("failed", f"{type(e).__name__}: {e}")]
            dist.broadcast_object_list(box, src=0)
            raise
    dist.broadcast_object_list(box, src=0)
    kind, value = box[0]
    if kind == "error":
        raise value
    if kind == "failed":
        raise EvalError(f"the eval failed on process 0 ({value})")
    result: _T = value
    return result


def evaluate_trainer(
    trainer: Any,
    mix: MixtureSpec,
    tasks: Mapping[str, EvalTasks],
    samples: int,
    out_dir: str | os.PathLike[str],
    console: Any | None = None,
    *,
    ks: Sequence[int] | None = None,
    manifest: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    tasks_per_chunk: int = 16,
    max_chunks: int | None = None,
    skip: Sequence[tuple[str, str | None, int]] = (),
    model: str | None = None,
    seed: int | None = None,
) -> dict[str, Any]:
    """Evaluate a built trainer's model on ``tasks``, ``samples`` rollouts each, into ``out_dir``; returns the
    summary (what ``summary.json`` holds).

    The trainer may have trained (the final eval of a run) or not; its generation settings apply, and its
    eval batch is set to one chunk for the duration. Each chunk's records are appended to
    ``<out_dir>/rollouts.jsonl`` when the chunk ends; a directory holding the same eval resumes (complete
    tasks are not run again), another eval is refused (`EvalError`) unless ``overwrite``.
    ``manifest`` defaults to `trainer_manifest` (its ``k``: ``ks``, default 1 and ``samples``; its
    ``model``: ``model``, default the trainer's ``name_or_path``, which after training names the model it
    started from: a run's final eval passes ``model=str(run_dir / "model")``; its ``seed``: ``seed``, default
    the trainer's, so a run trained with ``--seed N`` still samples its evals as ``ormix eval`` does when the
    caller passes the mixture's seed); ``skip`` names tasks not to
    run (no reference solution). Writes ``manifest.json``, ``summary.json``,
    ``report.md`` and ``plots/summary.png``.

    Example:
        Not run as a doctest: it runs GRPO's generation with a torch model.

        >>> summary = evaluate_trainer(trainer, mix, eval_tasks(mix), 4, run_dir / "eval")  # doctest: +SKIP
    """
    return _evaluate(
        trainer,
        mix,
        tasks,
        samples,
        Path(out_dir),
        console,
        ks=ks,
        manifest=manifest,
        overwrite=overwrite,
        tasks_per_chunk=tasks_per_chunk,
        max_chunks=max_chunks,
        skip=skip,
        model=model,
        seed=seed,
    ).summary


def _evaluate(
    trainer: Any,
    mix: MixtureSpec,
    tasks: Mapping[str, EvalTasks],
    samples: int,
    out: Path,
    console: Any | None,
    *,
    ks: Sequence[int] | None = None,
    manifest: Mapping[str, Any] | None,
    overwrite: bool = False,
    tasks_per_chunk: int,
    max_chunks: int | None,
    skip: Sequence[tuple[str, str | None, int]],
    model: str | None = None,
    seed: int | None = None,
) -> EvalResult:
    """`evaluate_trainer`, returning the eval's result as far as it went (its tasks run and resumed)."""

    def say(text: str) -> None:
        if console is not None:
            console.print(text, highlight=False)

    if manifest is None:
        fields: dict[str, Any] = {"k": sorted(set(ks) if ks else {1, samples})}
        if model is not None:
            fields["model"] = model
        if seed is not None:
            fields["seed"] = seed
        full = trainer_manifest(trainer, mix, tasks, samples, **fields)
    else:
        full = dict(manifest)
        if ks is not None:
            full["k"] = sorted(set(ks))
    directory = EvalDirectory(out)
    planned = {key for t in tasks.values() for key in t.keys()}

    def start() -> tuple[set[TaskKey], int]:
        directory.prepare(full, overwrite)
        directory.write_manifest(full)
        return directory.resume(planned, samples)

    # Process 0 alone prepares, writes and reads the directory; every process runs the chunks it decided.
    complete, seq = _rank_zero_decides(start)
    skipped = set(skip)
    to_run = [key for t in tasks.values() for key in t.keys() if key not in skipped]
    todo = [key for key in to_run if key not in complete]
    state = EvalResult(out, {}, full, resumed_tasks=len(complete))
    if complete:
        say(f"  resuming: {len(complete)} task(s) already done in {directory.records_path}")
    chunks = chunks_left(to_run, complete, tasks_per_chunk)
    if max_chunks is not None:
        chunks = chunks[:max_chunks]
    seed = int(full.get("seed", 0))
    _run_chunks(trainer, mix, tasks, samples, chunks, directory, seq, state, console, seed)
    left = len(todo) - state.ran_tasks
    state.complete = left == 0
    if left:
        say(f"  stopped after {len(chunks)} chunk(s): {left} task(s) left; run the same eval again to finish")
    # Every process returns process 0's summary (it alone holds the file).
    state.summary = _rank_zero_decides(
        lambda: directory.write_outputs(directory.summary_records(), full, say, complete=state.complete)
    )
    return state


def chunks_left(
    planned: Sequence[tuple[str, str, int]], complete: Collection[TaskKey], size: int
) -> list[tuple[int, list[tuple[str, str, int]]]]:
    """The chunks still to run, each with its number in the eval's plan: ``planned`` in chunks of ``size``
    (`interleaved_chunks`), less the ``complete`` tasks (a chunk left empty goes).

    The plan, not what is left, makes the chunks and numbers them (a chunk's number is its seed), so an
    eval stopped between chunks and resumed runs each chunk as an uninterrupted eval does: the same tasks
    together, the same seed, the same samples. Only a task that came short in a chunk that finished runs
    without its chunk-mates (with its chunk's seed): its samples can then differ.

    Example:
        >>> keys = [("a", "t", 0), ("a", "t", 1), ("b", "t", 0)]
        >>> chunks_left(keys, {("a", "t", 0)}, 1)
        [(1, [('b', 't', 0)]), (2, [('a', 't', 1)])]
        >>> chunks_left(keys, {("a", "t", 0)}, 2)
        [(0, [('b', 't', 0)]), (1, [('a', 't', 1)])]
    """
    done = set(complete)
    planned_chunks = enumerate(interleaved_chunks(planned, size))
    left = [(number, [key for key in chunk if key not in done]) for number, chunk in planned_chunks]
    return [(number, chunk) for number, chunk in left if chunk]


def _run_chunks(
    trainer: Any,
    mix: MixtureSpec,
    tasks: Mapping[str, EvalTasks],
    samples: int,
    chunks: Sequence[tuple[int, Sequence[tuple[str, str, int]]]],
    directory: EvalDirectory,
    seq: int,
    state: EvalResult,
    console: Any | None,
    base_seed: int,
) -> None:
    """One `trainer.evaluate()` per chunk (its number in the eval's plan, `chunks_left`, seeds it), its
    records (every process's) appended when it ends."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from transformers import set_seed

    from ormix._dataset import rows_to_dataset
    from ormix.trl._callbacks import all_ranks_records, trl_notices_filtered
    from ormix.trl._lifecycle import quiet_trainer

    rank = int(getattr(trainer.args, "process_index", 0) or 0)
    observers = {m: mix.spec(m).telemetry for m in mix.members}
    previous = {m: o.run for m, o in observers.items()}
    columns = (
        TextColumn("eval"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("tasks"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, disable=console is None) as progress:
        bar = progress.add_task("eval", total=sum(len(c) for _, c in chunks))
        try:
            with trl_notices_filtered(trainer.callback_handler.callbacks), quiet_trainer():
                for number, chunk in chunks:
                    rows = [dict(tasks[m].rows[i]) for m, _, i in chunk]
                    recorder = _chunk_recorder(rank, samples, mix.secret_values())
                    for observer in observers.values():
                        observer.run = recorder
                    set_seed(base_seed + number)
                    started = time.perf_counter()
                    with _eval_geometry(trainer, len(rows) * samples, samples):
                        trainer.evaluate(eval_dataset=rows_to_dataset(rows), metric_key_prefix="eval")
                    state.eval_s += time.perf_counter() - started
                    records = _first_samples(all_ranks_records(recorder.records), chunk, samples)
                    state.rollouts += len(records)
                    counts = Counter(task_key(record) for record in records)
                    short = [key for key in chunk if counts[key] < samples]
                    if short:
                        logger.warning(
                            "ormix eval: %d task(s) of a chunk got fewer than %d records; they run again "
                            "on resume",
                            len(short),
                            samples,
                        )
                    if rank == 0:
                        seq = directory.append(records, seq)
                    state.ran_tasks += len(chunk) - len(short)  # a short task is not done: it runs on resume
                    progress.advance(bar, len(chunk))
        finally:
            for member, observer in observers.items():
                observer.run = previous[member]
            mix.close_sessions()


def _chunk_recorder(rank: int, samples: int, secrets: Sequence[str]) -> Any:
    """A `TelemetryRun` that keeps a chunk's records (``.records``) instead of writing them: they are
    appended to ``rollouts.jsonl`` once the chunk ends, every process's together."""
    from ormix.telemetry._records import TelemetryRun

    class ChunkRecorder(TelemetryRun):
        def __init__(self) -> None:
            super().__init__(
                None, rank=rank, num_generations=samples, num_generations_eval=samples, secrets=secrets
            )
            self.records: list[dict[str, Any]] = []

        def write(self, records: Sequence[dict[str, Any]]) -> None:
            with self._lock:
                self.records.extend(records)

    return ChunkRecorder()


def _load_mixture(mixture: Any) -> MixtureSpec:
    from ormix.config import MixtureConfig
    from ormix.mixture import MixtureSpec, load_mixture

    if isinstance(mixture, MixtureSpec):
        return mixture
    if isinstance(mixture, MixtureConfig):
        return MixtureSpec.from_config(mixture)
    return load_mixture(str(mixture))


def _eval_args(
    mix: MixtureSpec, opts: EvalOptions, out_dir: Path, model: str | None, longest_solution: int
) -> tuple[Any, list[str]]:
    """The `GRPOConfig` of an eval: the file's ``train:`` section, ``--set`` over it, then what an eval needs
    (one chunk per batch, ``samples`` generations per task, no files of the trainer's own)."""
    from ormix.trl._args import build_grpo_config, check_settings

    file_settings = check_settings(dict(mix.config.train), "train.")
    given = check_settings(dict(opts.settings), "--set ")
    merged = {**file_settings, **given}
    notes: list[str] = []
    if opts.policy == "reference":
        merged, note = reference_settings(merged, given, longest_solution)
        notes.append(note)
    samples = opts.samples_per_task
    merged.update(
        num_generations_eval=samples,
        per_device_eval_batch_size=opts.tasks_per_chunk * samples,
        seed=opts.seed,
        log_completions=False,
        report_to="none",
        disable_tqdm=True,
        eval_strategy="no",
        save_strategy="no",
    )
    args, built = build_grpo_config(mix, merged, output_dir=out_dir, model=model)
    return args, notes + [n for n in built if "derived from prompts_per_step" not in n]


def run_eval(
    mixture: MixtureSpec | MixtureConfig | str | Path,
    options: EvalOptions | None = None,
    *,
    console: Any | None = None,
    **option_fields: Any,
) -> EvalResult:
    """Evaluate a model (or, ``policy="reference"``, the reference solutions) on every member's eval tasks.

    ``options`` (or its fields as keywords: ``run_eval(path, k=(1, 4))``) say how; ``console`` (a
    `rich.console.Console`) gets the plan, the progress bar and notes. Returns what the eval left; the files
    are in ``result.out_dir`` (the module docstring lists them).

    Raises:
        EvalError (an unknown member or split, no task to evaluate on, a ``--model`` that names no model, an
        output directory holding another eval), other UsageErrors (a bad mixture file or setting): bad
        input, before any model is loaded.
    """
    opts = replace(options or EvalOptions(), **option_fields)
    opts.check()

    def say(text: str) -> None:
        if console is not None:
            console.print(text, highlight=False)

    model_path, label, run_out = resolve_eval_model(opts.model)
    mix = _load_mixture(mixture)
    opts = opts.for_mixture(mix.config)
    opts.check()
    samples = opts.samples_per_task
    reference = opts.policy == "reference"
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    try:
        out_dir = (
            Path(opts.out_dir)
            if opts.out_dir is not None
            else default_eval_dir(mix.name, label, run_out, policy=opts.policy, seed=opts.seed or 0)
        )
        tasks = eval_tasks(mix, opts.members, opts.split)
        calls, missing = reference_calls(mix, tasks) if reference else ({}, {})
        _refuse_unsolvable(tasks, missing)
        longest = max((len(c) for c in calls.values()), default=0)
        with tempfile.TemporaryDirectory(prefix="ormix-eval-") as scratch:
            args, notes = _eval_args(mix, opts, Path(scratch), model_path, longest)
            manifest = _manifest(args, mix, tasks, opts, label, missing)
            directory = EvalDirectory(out_dir)
            planned = [key for t in tasks.values() for key in t.keys()]
            complete = _tasks_done(directory, manifest, args, planned, opts)
            skip = [(m, tasks[m].split, i) for m, indices in missing.items() for i in indices]
            _say_plan(say, mix.name, opts, label, tasks, missing, notes)
            say(f"output: {out_dir}")
            if len(planned) - len(complete) - len(skip) <= 0:
                say(f"  every task is done already ({len(complete)}): summarising")
                return _summarised(directory, manifest, say, resumed_tasks=len(complete))
            trainer = _build_trainer(mix, opts, args, model_path, label, tasks)
            # The reference solutions stand in for the model (the policy detaches when the eval ends).
            reference_policy = (
                attach_reference_policy(trainer, calls) if reference else contextlib.nullcontext()
            )
            with reference_policy, frozen_heap():
                result = _evaluate(
                    trainer,
                    mix,
                    tasks,
                    samples,
                    out_dir,
                    console,
                    manifest=manifest,
                    tasks_per_chunk=opts.tasks_per_chunk,
                    max_chunks=opts.max_chunks,
                    skip=skip,
                )
    finally:
        mix.close()
    return result


def _refuse_unsolvable(tasks: Mapping[str, EvalTasks], missing: Mapping[str, Sequence[int]]) -> None:
    """Refuse an oracle eval of a member none of whose tasks has a reference solution (`EvalError`, before
    anything runs): nothing of it would run, and an empty table would read as a check that passed."""
    unsolvable = [
        m
        for m, selection in tasks.items()
        if selection.indices and set(missing.get(m, ())) >= set(selection.indices)
    ]
    if not unsolvable:
        return
    names = ", ".join(repr(m) for m in unsolvable)
    one = len(unsolvable) == 1
    raise EvalError(
        f"{f'member {names} has' if one else f'members {names} have'} no reference solution for any task: "
        f'give {"it" if one else "each"} a `reference: "module:function"` in its mixture entry (a function '
        "of a task's row returning its (tool, arguments) calls), or leave "
        f"{'it' if one else 'them'} out with --members"
    )


def _manifest(
    args: Any,
    mix: MixtureSpec,
    tasks: Mapping[str, EvalTasks],
    opts: EvalOptions,
    label: str,
    missing: Mapping[str, list[int]],
) -> dict[str, Any]:
    """The eval's manifest: what it evaluates and how (another eval in the directory must match it)."""
    fields: dict[str, Any] = {
        "model": "reference" if opts.policy == "reference" else label,
        "policy": opts.policy,
        "k": sorted(set(opts.ks)),
        "success_threshold": opts.success_threshold,
    }
    if opts.policy == "reference":
        fields["no_reference"] = missing
    return eval_manifest(args, mix, tasks, opts.samples_per_task, **fields)


def _tasks_done(
    directory: EvalDirectory,
    manifest: dict[str, Any],
    args: Any,
    planned: Sequence[TaskKey],
    opts: EvalOptions,
) -> set[TaskKey]:
    """The planned tasks the output directory holds complete already (preparing it for this eval)."""

    def start() -> set[TaskKey]:
        directory.prepare(manifest, opts.overwrite)
        return directory.resume(set(planned), opts.samples_per_task)[0]

    # Under torchrun, the args start `torch.distributed` (process_index); process 0 alone reads the
    # directory and tells the others, so every process agrees on what is left.
    _ = args.process_index
    return _rank_zero_decides(start)


def _summarised(
    directory: EvalDirectory, manifest: dict[str, Any], say: Callable[[str], None], *, resumed_tasks: int
) -> EvalResult:
    """An eval whose every task is done: its outputs written again from its records (by process 0)."""

    def summarise() -> dict[str, Any]:
        directory.write_manifest(manifest)
        return directory.write_outputs(directory.summary_records(), manifest, say)

    summary = _rank_zero_decides(summarise)
    return EvalResult(directory.path, summary, manifest, resumed_tasks=resumed_tasks)


def _say_plan(
    say: Any,
    name: str,
    opts: EvalOptions,
    label: str,
    tasks: Mapping[str, EvalTasks],
    missing: Mapping[str, list[int]],
    notes: Sequence[str],
) -> None:
    """What the eval will do: the model, samples and k, each member's tasks and where they come from."""
    shown = "reference solutions" if opts.policy == "reference" else f"model {label}"
    say(
        f"[bold]ormix eval[/bold] {name}: {shown}, {opts.samples_per_task} sample(s) per task, "
        f"pass@{', pass@'.join(map(str, sorted(set(opts.ks))))}"
    )
    for member, selection in tasks.items():
        absent = f"; no reference solution for {len(missing[member])}" if missing.get(member) else ""
        say(
            f"  {member}: {len(selection.indices)} task(s) of split {selection.split!r} "
            f"({selection.source}){absent}"
        )
    for note in notes:
        say(f"  {note}")


def _build_trainer(
    mix: MixtureSpec, opts: EvalOptions, args: Any, model_path: str | None, label: str, tasks: Any
) -> Any:
    from transformers import PrinterCallback

    from ormix._dataset import rows_to_dataset
    from ormix.trl._lifecycle import quiet_trainer
    from ormix.trl._trainer import ConcurrentGRPOTrainer
    from ormix.workbench._tiny import resolve_model

    rows = [dict(row) for t in tasks.values() for row in t.rows.values()]
    path = resolve_model(model_path)
    try:
        with quiet_trainer():
            trainer = ConcurrentGRPOTrainer(
                concurrent=opts.concurrent,
                model=path,
                args=args,
                # Never trained on: TRL wants a dataset with the rows' columns (routing reads `environment`).
                train_dataset=rows_to_dataset(rows),
                environment_factory=mix.environment_factory,
                reward_funcs=mix.reward_funcs,
                callbacks=mix.callbacks,
            )
    except OSError as e:
        raise EvalError(f"--model {label}: it does not load ({e})") from None
    trainer.remove_callback(PrinterCallback)
    return trainer


def print_summary(result: EvalResult, console: Any) -> None:
    """The summary table, what was left out, and where the files are."""
    from ormix.evaluation._summary import group_scoring_line, summary_table

    summary = result.summary
    title = (
        "reference solutions (oracle)"
        if summary.get("policy") == "reference"
        else f"{summary.get('model')}: {summary.get('samples')} sample(s) per task"
    )
    print_table(console, title, summary_table(summary))
    console.print(
        f"{summary.get('confidence', 0.95):.0%} intervals over tasks ({summary.get('interval')}); success = "
        f"scored with env_reward >= {summary.get('success_threshold', 1.0):g}",
        highlight=False,
    )
    for member, entry in (summary.get("members") or {}).items():
        if entry.get("group_scoring"):
            console.print(f"  {member}: {group_scoring_line(entry['group_scoring'])}", highlight=False)
    for member, indices in (summary.get("no_reference") or {}).items():
        console.print(
            f"  {member}: no reference solution for {len(indices)} task(s) "
            f"({', '.join(map(str, indices[:8]))}{', ...' if len(indices) > 8 else ''}): not run, not "
            "counted",
            highlight=False,
        )
    if result.rollouts:
        console.print(
            f"  {result.ran_tasks} task(s), {result.rollouts} rollouts in {result.eval_s:.1f}s "
            f"({result.rollouts / max(result.eval_s, 1e-9):.1f} rollouts/s)",
            highlight=False,
        )
    if result.resumed_tasks:
        console.print(f"  {result.resumed_tasks} task(s) were done already (resumed)", highlight=False)
    if not result.complete:
        console.print("[yellow]incomplete[/yellow]: run the same command again to finish", highlight=False)
    names = ("rollouts.jsonl", "summary.json", "report.md", "manifest.json", "plots/summary.png")
    files = [name for name in names if (result.out_dir / name).is_file()]
    console.print(f"wrote {result.out_dir}/: {', '.join(files)}", highlight=False, soft_wrap=True)


def all_errors(summary: Mapping[str, Any]) -> dict[str, str]:
    """Member → why it failed, for each member whose every rollout was an infrastructure error (an
    environment that cannot be reached or cannot start a session): its dominant error kind, and how to run
    the tasks again (a rerun resumes and keeps the records it finds, errors included).

    Example:
        >>> summary = {"members": {"mine": {"samples": 4, "error_mix": {"env_error": 3, "timeout": 1}},
        ...                        "echo": {"samples": 4, "error_mix": {"timeout": 1}}}}
        >>> print(all_errors(summary)["mine"])  # doctest: +ELLIPSIS
        every rollout of member 'mine' failed in the environment (4 of 4; mostly env_error: 3): ...
        >>> list(all_errors(summary))
        ['mine']
    """
    out: dict[str, str] = {}
    for member, entry in (summary.get("members") or {}).items():
        samples, mix = int(entry.get("samples") or 0), Counter(entry.get("error_mix") or {})
        if not samples or sum(mix.values()) < samples:
            continue
        kind, count = mix.most_common(1)[0]
        out[member] = (
            f"every rollout of member {member!r} failed in the environment ({samples} of {samples}; mostly "
            f"{kind}: {count}): nothing was measured; fix it (`ormix check FILE` names the failing call), "
            "then run the same command with --overwrite to run its tasks again"
        )
    return out


def eval_command(
    mixture: str | Path,
    options: EvalOptions | None = None,
    *,
    console: Any,
    overrides: Sequence[str] = (),
    debug: bool = False,
    **option_fields: Any,
) -> int:
    """`ormix eval FILE`: returns the exit status (0 done, 1 failed: a member whose every rollout was an
    infrastructure error (`all_errors`; on a rerun that finds its tasks done too) or, with
    ``policy="reference"``, a member whose reference solutions were never scored (`oracle_failures`), 2 bad
    input, 130 interrupted).

    As `run_eval`, plus ``overrides``: the ``--set KEY=VALUE`` items, applied over ``options.settings``;
    prints the summary table and where the files went. Every failure is one ``error:`` line (``debug``, or
    ``ORMIX_DEBUG`` set, adds the traceback of an unexpected one).

    Example:
        Not run as a doctest: an eval runs a torch model.

        >>> from rich.console import Console
        >>> eval_command("mixtures/local-demo.yaml", k=(1, 4), console=Console())   # doctest: +SKIP
        0
    """
    from ormix.trl._args import parse_overrides

    started = time.monotonic()

    def body() -> int:
        opts = replace(options or EvalOptions(), **option_fields)
        opts = replace(opts, settings={**opts.settings, **parse_overrides(overrides)})
        result = run_eval(mixture, opts, console=console)
        print_summary(result, console)
        console.print(f"done in {math.ceil(time.monotonic() - started)}s", highlight=False)
        # A member whose every rollout was an infrastructure error measured nothing, and an oracle run that
        # scores nothing found a broken environment: failures, never a quiet 0 (on a rerun that finds every
        # task done too: the records are what failed).
        errored = all_errors(result.summary)
        failures = list(errored.values()) + oracle_failures(result.summary, reported=errored)
        for line in failures:
            console.print(f"[red]error:[/red] {line}", highlight=False, soft_wrap=True)
        return EXIT_FAILED if failures else EXIT_OK

    return run_command(
        body,
        console=console,
        what="eval",
        interrupted=": the chunks done are kept; run the same command to resume",
        debug=debug,
    )
