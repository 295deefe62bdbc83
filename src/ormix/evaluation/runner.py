"""`ormix eval`: every eval task of every member, k samples each, through the same concurrent sessions as
training; pass@k, pass^k, mean reward, coverage and errors per member, each with an interval.

An application of the library, like `ormix.train` (it may import TRL, transformers and `ormix.demo`):

1. tasks: each member's eval tasks (`eval_tasks`): its ``eval:`` set, else its environment's ``test`` split,
   else its training tasks (said so: ``source: "train tasks"``); eval-only members included; ``--split``
   overrides the split of all of them;
2. the output directory: ``manifest.json`` says what this eval is (mixture, config hash, model, policy,
   samples, seed, generation settings, per member its target, split, tasks and where they came from); an
   existing directory holding another eval is refused (``--overwrite`` starts over), the same eval resumes;
3. generation: ormix's `ConcurrentGRPOTrainer.evaluate()` (TRL's own generation: transformers, or vLLM with
   ``--set use_vllm=true``), the tasks in chunks of ``tasks_per_chunk`` × ``samples`` rollouts; each
   chunk's rollout records (the training format, ``mode: "eval"``) are appended to ``rollouts.jsonl`` when
   it ends, so an interrupted eval resumes at the next incomplete chunk (a task with fewer records than
   ``samples`` is run again);
4. results: ``summary.json`` (`ormix.evaluation.summary.summarize`), ``report.md``, ``plots/summary.png``.

``--policy reference`` is the oracle run: each task's reference solution (`ormix.references`: the member's
own ``reference:`` hook, else the shipped one) is played through the same trainer path, a
`ormix.demo.scripted.ScriptedPolicy` replacing generation. A task without a reference solution is not run
and is reported as such (``no_reference``), never as a 0.

Example:
    Not run as a doctest: an eval loads a torch model and runs GRPO's generation.

    >>> from ormix.evaluation.runner import run_eval
    >>> result = run_eval("mixtures/local-demo.yaml", k=(1, 4))                   # doctest: +SKIP
    >>> result.summary["members"]["seta"]["pass@4"]                              # doctest: +SKIP
    {'value': 0.0, 'low': 0.0, 'high': 0.43, 'n': 5}
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ormix.errors import OrmixError, OrmixRuntimeError, UsageError, exit_status
from ormix.rollout.batch import SPLIT_COLUMN

if TYPE_CHECKING:  # pragma: no cover
    from ormix.config import MixtureConfig
    from ormix.mixture import MixtureSpec

__all__ = [
    "EVAL_FILES",
    "EvalError",
    "EvalManifestError",
    "EvalOptions",
    "EvalResult",
    "EvalTasks",
    "MissingSplitError",
    "ModelNotFoundError",
    "NoEvalTasksError",
    "UnknownMemberError",
    "eval_command",
    "eval_tasks",
    "evaluate_trainer",
    "resolve_eval_model",
    "run_eval",
]

logger = logging.getLogger(__name__)

#: What an eval directory holds (``--overwrite`` removes exactly these).
EVAL_FILES = ("manifest.json", "rollouts.jsonl", "summary.json", "report.md", "plots")
#: Version of the eval manifest's layout.
MANIFEST_VERSION = 1
#: Manifest keys that say what an eval measured: a directory whose manifest differs in one of them holds
#: another eval (k and the success threshold only change what is reported, so they may change on resume).
IDENTITY_KEYS = ("mixture", "config_hash", "model", "policy", "samples", "seed", "generation", "members")
#: The completion budget and tool rounds the reference policy gets at least (budgets must not cut a
#: reference solution: the oracle checks the environment, not the budget).
REFERENCE_MIN_COMPLETION = 2048
REFERENCE_MIN_ROUNDS = 10
#: What the reference policy answers after its last call.
FINAL_ANSWER = "Done."
#: Generation settings an eval's manifest records (GRPOConfig fields).
GENERATION_SETTINGS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "max_completion_length",
    "max_tool_calling_iterations",
    "use_vllm",
    "vllm_mode",
    "generation_kwargs",
    "chat_template_kwargs",
)


# ── errors ────────────────────────────────────────────────────────────


class EvalError(UsageError):
    """An eval that cannot run as asked (exit 2); the message says what to change."""


class UnknownMemberError(EvalError):
    """``--members`` names a member the mixture does not have."""


class MissingSplitError(EvalError):
    """A member's environment has no split of the name asked for (``--split``, or its ``eval:`` set)."""


class NoEvalTasksError(EvalError):
    """A member (or the whole selection) has no task to evaluate on."""


class ModelNotFoundError(EvalError):
    """``--model`` names no model: no such directory, a directory without one, or a run without its final
    model."""


class EvalManifestError(EvalError):
    """The output directory holds another eval (or unreadable files): ``--overwrite`` or another ``--out``."""


# ── options and results ───────────────────────────────────────────────


@dataclass
class EvalOptions:
    """How to evaluate: `ormix eval`'s flags (`run_eval` takes them as keywords too).

    Attributes:
        model: hub id, local model directory, a run directory (its final ``model/``) or
            ``run_dir/checkpoint-N``; ``None`` = ormix's offline tiny model.
        k: the pass@k reported; samples per task = max(k) unless ``samples``.
        samples: rollouts per task (at least max(k)).
        members: members to evaluate (``()``: every member).
        split: evaluate every member on this split instead.
        policy: ``model`` (generation) or ``reference`` (each task's reference solution, the oracle).
        out_dir: output directory (default: ``<run_dir>/eval[/checkpoint-N]`` for a run's model, else
            ``evals/<mixture>-<model>``).
        seed: sampling seed (and the order of rollouts within a chunk).
        settings: GRPOConfig overrides (``--set``) over the file's ``train:`` section: generation settings
            such as ``temperature``, ``max_completion_length``, ``use_vllm``.
        overwrite: start over in an ``out_dir`` holding another eval.
        success_threshold: a scored sample succeeds when its ``env_reward`` reaches it.
        tasks_per_chunk: tasks whose rollouts run at once (one ``evaluate()`` batch of
            ``tasks_per_chunk × samples`` rollouts); records are written after each chunk.
        max_chunks: stop after this many chunks (the rest resume on the next run).
        concurrent: ``False`` gives TRL's sequential environment loop (for comparison).

    Example:
        >>> EvalOptions(k=(1, 4)).samples_per_task
        4
    """

    model: str | None = None
    k: tuple[int, ...] = (1,)
    samples: int | None = None
    members: tuple[str, ...] = ()
    split: str | None = None
    policy: Literal["model", "reference"] = "model"
    out_dir: Path | None = None
    seed: int = 0
    settings: dict[str, Any] = field(default_factory=dict)
    overwrite: bool = False
    success_threshold: float = 1.0
    tasks_per_chunk: int = 16
    max_chunks: int | None = None
    concurrent: bool = True

    @property
    def samples_per_task(self) -> int:
        """Rollouts per task: ``samples``, else the largest k."""
        return self.samples if self.samples is not None else max(self.k)

    def check(self) -> None:
        """Raise `EvalError` for options that cannot work."""
        if not self.k or any(not isinstance(k, int) or k < 1 for k in self.k):
            raise EvalError(f"-k takes whole numbers >= 1 (e.g. -k 1,4,8), not {list(self.k)}")
        if self.samples is not None and self.samples < max(self.k):
            raise EvalError(
                f"--samples {self.samples} is fewer than the largest k ({max(self.k)}): pass@{max(self.k)} "
                f"needs {max(self.k)} samples per task; raise --samples or drop it"
            )
        if self.policy not in ("model", "reference"):
            raise EvalError(f"--policy is 'model' or 'reference', not {self.policy!r}")
        if self.tasks_per_chunk < 1 or (self.max_chunks is not None and self.max_chunks < 1):
            raise EvalError("tasks_per_chunk and max_chunks are at least 1")


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


# ── which tasks ───────────────────────────────────────────────────────


@dataclass(frozen=True)
class EvalTasks:
    """One member's eval tasks and why they are these.

    Attributes:
        member, target, split: the member, its target, the split of its eval tasks.
        indices: the task indices, in order.
        source: where the tasks come from: ``eval set`` (its ``eval:``), ``eval member`` (``role: eval``
            without ``eval:``), ``test split``, ``train tasks`` (nothing held out: the training tasks), or
            ``split S (--split)``.
        rows: task index → the dataset row a trainer gets (``environment``, ``task_index``, metadata, the
            split column when it is not the member's own).
        task_specs: task index → the task as the server lists it.

    Example:
        >>> t = EvalTasks("echo", "local:echo", "test", (0, 1), "test split")
        >>> t.as_dict()
        {'target': 'local:echo', 'split': 'test', 'tasks': [0, 1], 'source': 'test split'}
    """

    member: str
    target: str
    split: str
    indices: tuple[int, ...]
    source: str
    rows: Mapping[int, Mapping[str, Any]] = field(default_factory=dict, repr=False, compare=False)
    task_specs: Mapping[int, Mapping[str, Any]] = field(default_factory=dict, repr=False, compare=False)

    def as_dict(self) -> dict[str, Any]:
        """The manifest's entry for this member."""
        return {
            "target": self.target,
            "split": self.split,
            "tasks": list(self.indices),
            "source": self.source,
        }


def _split_names(spec: Any) -> list[str]:
    from ormix.ors.bridge import run_sync

    async def names() -> list[str]:
        client = await spec.connection.client()
        return [s.name for s in await client.splits()]

    return run_sync(names)


def _test_split(names: Sequence[str]) -> str | None:
    return "test" if "test" in names else None


def eval_tasks(
    config: MixtureConfig | MixtureSpec,
    members: Sequence[str] = (),
    split: str | None = None,
) -> dict[str, EvalTasks]:
    """Which tasks each member is evaluated on, and why (contacts the servers: splits and task lists).

    Per member: its ``eval:`` set (or, for ``role: eval``, its own selection), else its environment's
    ``test`` split, else its training tasks. ``split`` evaluates every member on that split instead (an
    ``eval:`` set's ``num_tasks``/``indices`` still apply). ``members`` picks members (default: all).

    Raises:
        UnknownMemberError, MissingSplitError, NoEvalTasksError.

    Example:
        >>> from ormix.config import MixtureConfig
        >>> cfg = MixtureConfig(members={"echo": {"target": "local:echo", "num_tasks": 2,
        ...                                       "local_serve": "thread"}})
        >>> tasks = eval_tasks(cfg)
        >>> tasks["echo"].source, tasks["echo"].split, tasks["echo"].indices
        ('test split', 'test', (0, 1, 2, 3))
    """
    from ormix.mixture import MixtureSpec

    mix = config if isinstance(config, MixtureSpec) else MixtureSpec.from_config(config)
    chosen = list(members) or list(mix.members)
    unknown = [m for m in chosen if m not in mix.members]
    if unknown:
        raise UnknownMemberError(
            f"unknown member(s) {', '.join(map(repr, unknown))}: this mixture's members are "
            f"{', '.join(mix.members)}"
        )
    out: dict[str, EvalTasks] = {}
    for member in chosen:
        member_config = mix.members[member]
        spec = mix.spec(member)
        evaluation = member_config.eval
        names: list[str] | None = None

        def splits(spec: Any = spec) -> list[str]:
            nonlocal names
            if names is None:
                names = _split_names(spec)
            return names

        if split is not None:
            selection = spec.derive(
                split=split,
                indices=evaluation.indices if evaluation else None,
                num_tasks=evaluation.num_tasks if evaluation else None,
            )
            source = f"split {split} (--split)"
        elif member_config.evaluates:
            selection = mix.eval_spec(member)
            source = "eval set" if evaluation is not None else "eval member"
        elif (test := _test_split(splits())) is not None:
            selection = spec.derive(split=test, indices=None, num_tasks=None)
            source = "test split"
        else:
            selection = spec
            source = "train tasks"
        if selection.split != spec.split or split is not None:
            available = splits()
            if selection.split not in available:
                why = "--split" if split is not None else "its eval set"
                raise MissingSplitError(
                    f"member {member!r} ({spec.target}): {why} asks for split {selection.split!r}, which its "
                    f"environment does not have (splits: {', '.join(available) or 'none'}); name one of those"
                )
        task_specs = dict(selection.task_specs)
        if not task_specs:
            raise NoEvalTasksError(
                f"member {member!r} has no task in split {selection.split!r} to evaluate on: check its "
                "eval: set (num_tasks, indices, where) or pick another --split"
            )
        extra = {SPLIT_COLUMN: selection.split} if selection.split != spec.split else {}
        rows = {
            row["task_index"]: {"environment": member, **row, **extra} for row in selection.dataset_rows()
        }
        out[member] = EvalTasks(
            member,
            spec.target,
            selection.split,
            tuple(task_specs),
            source,
            rows=rows,
            task_specs=task_specs,
        )
    if not out:
        raise NoEvalTasksError("no member to evaluate: --members picked none")
    return out


# ── the model ─────────────────────────────────────────────────────────


_CHECKPOINT_RE = re.compile(r"checkpoint-(\d+)$")


def _is_model_dir(path: Path) -> bool:
    return (path / "config.json").is_file()


def _holds_run(path: Path) -> bool:
    return (path / "manifest.json").is_file() and (path / "train_args.json").is_file()


def resolve_eval_model(model: str | None) -> tuple[str | None, str, Path | None]:
    """``--model`` as (what to load — ``None`` for the tiny model —, its label for the manifest, the
    default output directory when it belongs to a run directory).

    A run directory means its final ``model/``; ``run_dir/checkpoint-N`` that checkpoint. A string that is
    not a directory is a hub id (``owner/name``) unless it looks like a path.

    Example:
        >>> resolve_eval_model(None)
        (None, 'ormix:tiny', None)
        >>> resolve_eval_model("Qwen/Qwen3-0.6B")
        ('Qwen/Qwen3-0.6B', 'Qwen/Qwen3-0.6B', None)
        >>> resolve_eval_model("./no/such/dir")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ormix.evaluation.runner.ModelNotFoundError: --model ./no/such/dir: no such directory, ...
    """
    from ormix.demo.tiny import TINY_MODEL

    if model is None or model == TINY_MODEL:
        return None, TINY_MODEL, None
    path = Path(model).expanduser()
    if path.is_dir():
        resolved = path.resolve()
        if _holds_run(resolved):
            final = resolved / "model"
            if not _is_model_dir(final):
                checkpoints = sorted(
                    (p.name for p in resolved.iterdir() if _CHECKPOINT_RE.search(p.name)),
                    key=lambda n: int(n.rsplit("-", 1)[1]),
                )
                hint = (
                    f"pass one of its checkpoints ({', '.join(checkpoints)}) as --model {model}/checkpoint-N"
                    if checkpoints
                    else "it saved no checkpoint either (train.save_steps)"
                )
                raise ModelNotFoundError(
                    f"--model {model}: the run directory has no final model (model/): the run did not "
                    f"finish; {hint}"
                )
            return str(final), str(resolved), resolved / "eval"
        if _is_model_dir(resolved):
            parent = resolved.parent
            if _holds_run(parent) and _CHECKPOINT_RE.search(resolved.name):
                return str(resolved), str(resolved), parent / "eval" / resolved.name
            if _holds_run(parent) and resolved.name == "model":
                return str(resolved), str(parent), parent / "eval"
            return str(resolved), str(resolved), None
        raise ModelNotFoundError(
            f"--model {model}: the directory holds no model (no config.json) and is no run directory "
            "(no manifest.json): give a model directory, a run directory or run_dir/checkpoint-N"
        )
    looks_local = model.startswith((".", "/", "~")) or model.count("/") != 1 or os.sep + os.sep in model
    if looks_local:
        raise ModelNotFoundError(
            f"--model {model}: no such directory, and it is no hub id (owner/name); check the path"
        )
    return model, model, None


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "model"


def _default_out(mixture: str, label: str, run_out: Path | None, opts: EvalOptions) -> Path:
    if opts.policy == "reference":
        base = Path("evals") / f"{mixture}-reference"
    elif run_out is not None:
        base = run_out
    else:
        name = "tiny" if label == "ormix:tiny" else Path(label).name if Path(label).is_dir() else label
        base = Path("evals") / f"{mixture}-{_slug(name)}"
    return base if opts.seed == 0 or run_out is not None else base.with_name(f"{base.name}-seed{opts.seed}")


# ── the output directory ──────────────────────────────────────────────


def _task_key(record: Mapping[str, Any]) -> tuple[str, str | None, int] | None:
    member, index = record.get("member"), record.get("task_index")
    if not isinstance(member, str) or not isinstance(index, int):
        return None
    split = record.get("split")
    return member, split if isinstance(split, str) else None, index


def _identity_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    changes = []
    for key in IDENTITY_KEYS:
        if old.get(key) != new.get(key):
            if key == "members":
                changes.append("members or their tasks")
            elif key in ("generation",):
                a, b = old.get(key) or {}, new.get(key) or {}
                changes += [
                    f"{k}: {a.get(k)!r} → {b.get(k)!r}"
                    for k in sorted(set(a) | set(b))
                    if a.get(k) != b.get(k)
                ]
            else:
                changes.append(f"{key}: {old.get(key)!r} → {new.get(key)!r}")
    return changes


def _prepare_out(out_dir: Path, manifest: Mapping[str, Any], overwrite: bool) -> None:
    """Refuse a directory holding another eval (unless ``overwrite``: its eval files go); keep the same."""
    path = out_dir / "manifest.json"
    if overwrite:
        for name in EVAL_FILES:
            target = out_dir / name
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
        return
    if not path.is_file():
        if (out_dir / "rollouts.jsonl").is_file():
            raise EvalManifestError(
                f"{out_dir} holds rollouts.jsonl but no manifest.json, so what it measured is unknown: pass "
                "--overwrite to start over there, or --out another directory"
            )
        return
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise EvalManifestError(f"{path} is not valid JSON ({e}): pass --overwrite to start over") from None
    changes = _identity_changes(old if isinstance(old, dict) else {}, manifest)
    if changes:
        raise EvalManifestError(
            f"{out_dir} holds another eval ({'; '.join(changes)}): pass --overwrite to start over there, "
            "or --out another directory"
        )


def _resume(path: Path, tasks: Mapping[str, EvalTasks], samples: int) -> tuple[set[tuple[Any, ...]], int]:
    """The planned tasks already complete in ``rollouts.jsonl`` (``samples`` records each); the records of
    incomplete or unplanned tasks are dropped from the file (they run again). Returns (complete, records
    kept)."""
    from ormix.runs import read_jsonl

    records = read_jsonl(path)
    if not records:
        return set(), 0
    planned = {(t.member, t.split, i) for t in tasks.values() for i in t.indices}
    counts: dict[tuple[Any, ...], int] = {}
    for record in records:
        key = _task_key(record)
        if key is not None:
            counts[key] = counts.get(key, 0) + 1
    complete = {key for key, n in counts.items() if n >= samples and key in planned}
    kept = [r for r in records if _task_key(r) in complete]
    if len(kept) != len(records):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("".join(json.dumps(r, default=str) + "\n" for r in kept), encoding="utf-8")
        os.replace(tmp, path)
    return complete, len(kept)


def _append(path: Path, records: Sequence[dict[str, Any]], seq: int) -> int:
    lines = []
    for record in records:
        record["seq"] = seq
        seq += 1
        lines.append(json.dumps(record, default=str, allow_nan=False) + "\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("".join(lines))
        fh.flush()
        os.fsync(fh.fileno())
    return seq


# ── the reference policy ──────────────────────────────────────────────


def _env_tools(environment: Any) -> frozenset[str]:
    import inspect

    from ormix.tools.binding import RESERVED_METHOD_NAMES

    return frozenset(
        name
        for name, _ in inspect.getmembers(type(environment), predicate=inspect.isfunction)
        if not name.startswith("_") and name not in RESERVED_METHOD_NAMES
    )


class ReferenceScript:
    """The script a `ScriptedPolicy` plays for ``--policy reference``: each rollout's task's reference calls,
    one a turn, then a short final answer.

    A rollout's task is found from the trainer's environments of the batch: the one whose `reset`
    observation is the prompt's last user message (and whose tools are the prompt's), the ``k``-th of those
    for the ``k``-th identical prompt.

    Args:
        trainer: the trainer whose ``environments`` hold the batch.
        calls: ``(member, split, task_index)`` → the reference calls (submit included).
    """

    def __init__(self, trainer: Any, calls: Mapping[tuple[str, str | None, int], list[tuple[str, dict]]]):
        self.trainer = trainer
        self.calls = dict(calls)

    def task_of(self, ctx: Any) -> tuple[str, str | None, int]:
        """The ``(member, split, task_index)`` of the rollout a script context belongs to."""
        environments = list(getattr(self.trainer, "environments", None) or [])
        user = ctx.user.strip()
        tools = frozenset(ctx.tools)
        found = []
        for environment in environments:
            observation = (getattr(environment, "observation", "") or "").strip()
            if observation and observation in user and (not tools or _env_tools(environment) == tools):
                found.append(environment)
        if not found:
            raise OrmixRuntimeError(
                "the reference policy could not tell which task a rollout plays (no environment of the batch "
                "was reset with its prompt); the installed TRL renders prompts differently than ormix expects"
            )
        chosen = found[ctx.sample % len(found)]
        return chosen.member, chosen.split, chosen.task_index

    def __call__(self, ctx: Any) -> str:
        from ormix.demo.scripted import tool_call

        member, split, index = self.task_of(ctx)
        calls = self.calls.get((member, split, index))
        if calls is None:
            raise OrmixRuntimeError(
                f"the reference policy has no solution for task {index} of {member!r} (split {split!r})"
            )
        if ctx.turn >= len(calls):
            return FINAL_ANSWER
        name, arguments = calls[ctx.turn]
        if name not in ctx.tools and f"{member}__{name}" in ctx.tools:
            name = f"{member}__{name}"  # namespaced routing
        return tool_call(name, **arguments)


def reference_calls(
    mix: MixtureSpec, tasks: Mapping[str, EvalTasks]
) -> tuple[dict[tuple[str, str | None, int], list[tuple[str, dict]]], dict[str, list[int]]]:
    """Each task's reference calls, and per member the tasks that have none (not run: reported).

    Raises `ormix.references.ReferenceSolverError` when a member's hook cannot be imported.
    """
    from ormix.references import reference_solver, solver_row

    calls: dict[tuple[str, str | None, int], list[tuple[str, dict]]] = {}
    missing: dict[str, list[int]] = {}
    for member, selection in tasks.items():
        solve = reference_solver(member, mix.members[member])
        for index in selection.indices:
            row = solver_row(
                selection.rows.get(index, {"task_index": index}),
                member=member,
                split=selection.split,
                task_spec=selection.task_specs.get(index),
            )
            found = solve(row) if solve is not None else None
            if found:
                calls[(member, selection.split, index)] = found
            else:
                missing.setdefault(member, []).append(index)
    return calls, missing


# ── running ───────────────────────────────────────────────────────────


def _chunks(keys: Sequence[tuple[str, str, int]], size: int) -> list[list[tuple[str, str, int]]]:
    """Tasks in chunks of ``size``, members interleaved (every chunk mixes them, as training batches do)."""
    by_member: dict[str, list[tuple[str, str, int]]] = {}
    for key in keys:
        by_member.setdefault(key[0], []).append(key)
    order: list[tuple[str, str, int]] = []
    queues = list(by_member.values())
    while any(queues):
        for queue in queues:
            if queue:
                order.append(queue.pop(0))
    return [order[i : i + size] for i in range(0, len(order), size)]


def _secrets(mix: MixtureSpec) -> list[str]:
    values = {v for name in mix.members for v in mix.spec(name).secret_values()}
    if os.environ.get("OPENREWARD_API_KEY"):
        values.add(os.environ["OPENREWARD_API_KEY"])
    return sorted(values)


def _gathered(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every process's records of a chunk (rank order), on every process; this process's alone without
    `torch.distributed`."""
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover - torch comes with transformers
        return records
    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return records
    parts: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(parts, records)
    return [r for part in parts for r in (part or [])]


def _generation(args: Any) -> dict[str, Any]:
    return {k: getattr(args, k, None) for k in GENERATION_SETTINGS}


def trainer_manifest(
    trainer: Any, mix: MixtureSpec, tasks: Mapping[str, EvalTasks], samples: int, **fields: Any
) -> dict[str, Any]:
    """The manifest of an eval by this trainer (its model, generation settings, seed) over these tasks.

    ``fields`` (``model``, ``policy``, ``k``, ``no_reference`` ...) override what is read from the trainer.
    """
    model = getattr(getattr(trainer, "model", None), "name_or_path", None)
    fields.setdefault("model", str(model) if model is not None else None)
    return eval_manifest(trainer.args, mix, tasks, samples, **fields)


def eval_manifest(
    args: Any, mix: MixtureSpec, tasks: Mapping[str, EvalTasks], samples: int, **fields: Any
) -> dict[str, Any]:
    """What an eval is: mixture and config hash, model, policy, samples, seed, the generation settings of
    ``args`` (a `GRPOConfig`), per member its target, split, tasks and their source; plus ``fields``
    (``model``, ``policy``, ``k``, ``success_threshold``; ``no_reference``: member → task indices)."""
    members = {m: t.as_dict() for m, t in tasks.items()}
    for member, indices in (fields.pop("no_reference", None) or {}).items():
        members[member]["no_reference"] = list(indices)
    manifest: dict[str, Any] = {
        "version": MANIFEST_VERSION,
        "mixture": mix.name,
        "config_hash": mix.config.config_hash(),
        "model": None,
        "policy": "model",
        "samples": samples,
        "seed": int(getattr(args, "seed", 0)),
        "k": sorted({1, samples}),
        "success_threshold": 1.0,
        "generation": _generation(args),
        "members": members,
        "versions": _versions(),
    }
    manifest.update(fields)
    return manifest


def _versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for dist in ("ormix", "trl", "transformers", "torch", "vllm"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[dist] = metadata.version(dist)
    return out


@contextlib.contextmanager
def _eval_geometry(trainer: Any, rollouts: int, samples: int) -> Iterator[None]:
    """The trainer's eval batch set to one chunk (``rollouts`` = tasks × samples), restored afterwards."""
    args = trainer.args
    saved = (args.per_device_eval_batch_size, getattr(trainer, "num_generations_eval", None))
    args.per_device_eval_batch_size = rollouts
    trainer.num_generations_eval = samples
    try:
        yield
    finally:
        args.per_device_eval_batch_size, trainer.num_generations_eval = saved


def _telemetry_callback(trainer: Any) -> Any:
    from ormix.integrations.trl.callbacks import TelemetryCallback

    return next((c for c in trainer.callback_handler.callbacks if isinstance(c, TelemetryCallback)), None)


def _write_outputs(
    out_dir: Path, records: list[dict[str, Any]], manifest: Mapping[str, Any], say: Any
) -> dict[str, Any]:
    """summary.json, report.md and plots/summary.png from the records; returns the summary."""
    from ormix.evaluation.summary import summarize, summary_markdown

    ks = manifest.get("k") or [1]
    summary = summarize(
        records,
        ks,
        success_threshold=float(manifest.get("success_threshold", 1.0)),
        seed=int(manifest.get("seed", 0)),
    )
    summary["policy"] = manifest.get("policy")
    summary["model"] = manifest.get("model")
    summary["samples"] = manifest.get("samples")
    missing = {
        m: entry["no_reference"]
        for m, entry in manifest.get("members", {}).items()
        if entry.get("no_reference")
    }
    if manifest.get("policy") == "reference":
        summary["no_reference"] = missing
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    title = f"Eval of {manifest.get('mixture')}: {manifest.get('model')}"
    if manifest.get("policy") == "reference":
        title = f"Reference solutions of {manifest.get('mixture')} (oracle run)"
    lines = [summary_markdown(summary, title), "", "## Tasks", ""]
    for member, entry in manifest.get("members", {}).items():
        lines.append(
            f"- {member} ({entry.get('target')}): {len(entry.get('tasks', []))} tasks of split "
            f"{entry.get('split')!r} ({entry.get('source')}), {manifest.get('samples')} samples each"
        )
        if entry.get("no_reference"):
            lines.append(f"  - no reference solution for {len(entry['no_reference'])} of them (not run)")
    (out_dir / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    try:
        from ormix.evaluation.plots import summary_figure

        if summary["members"]:
            figure = summary_figure(summary, title)
            (out_dir / "plots").mkdir(exist_ok=True)
            figure.savefig(out_dir / "plots" / "summary.png", dpi=100, bbox_inches="tight")
            import matplotlib.pyplot as plt

            plt.close(figure)
    except ImportError as e:  # pragma: no cover - matplotlib is a dependency
        say(f"  no plot: {e}")
    return summary


@dataclass
class _Progress:
    resumed: int = 0
    ran: int = 0
    left: int = 0
    eval_s: float = 0.0
    rollouts: int = 0


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
) -> dict[str, Any]:
    """Evaluate a built trainer's model on ``tasks``, ``samples`` rollouts each, into ``out_dir``; returns the
    summary (what ``summary.json`` holds).

    The trainer may have trained (the final eval of a run) or not; its generation settings apply, and its
    eval batch is set to one chunk for the duration. Each chunk's records are appended to
    ``<out_dir>/rollouts.jsonl`` when the chunk ends; a directory holding the same eval resumes (complete
    tasks are not run again), another eval is refused (`EvalManifestError`) unless ``overwrite``.
    ``manifest`` defaults to `trainer_manifest` (its ``k``: ``ks``, default 1 and ``samples``; its
    ``model``: ``model``, default the trainer's ``name_or_path``, which after training names the model it
    started from: a run's final eval passes ``model=str(run_dir / "model")``); ``skip`` names tasks not to
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
    )[0]


def _evaluate(
    trainer: Any,
    mix: MixtureSpec,
    tasks: Mapping[str, EvalTasks],
    samples: int,
    out: Path,
    console: Any | None,
    *,
    ks: Sequence[int] | None,
    manifest: Mapping[str, Any] | None,
    overwrite: bool,
    tasks_per_chunk: int,
    max_chunks: int | None,
    skip: Sequence[tuple[str, str | None, int]],
    model: str | None = None,
) -> tuple[dict[str, Any], _Progress]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from transformers import set_seed

    from ormix.dataset import rows_to_dataset
    from ormix.integrations.trl.lifecycle import quiet_trainer
    from ormix.runs import read_jsonl
    from ormix.telemetry.records import TelemetryRun

    def say(text: str) -> None:
        if console is not None:
            console.print(text, highlight=False)

    if manifest is None:
        fields: dict[str, Any] = {"k": sorted(set(ks) if ks else {1, samples})}
        if model is not None:
            fields["model"] = model
        full = trainer_manifest(trainer, mix, tasks, samples, **fields)
    else:
        full = dict(manifest)
        if ks is not None:
            full["k"] = sorted(set(ks))
    _prepare_out(out, full, overwrite)
    out.mkdir(parents=True, exist_ok=True)
    rank = int(getattr(trainer.args, "process_index", 0) or 0)
    records_path = out / "rollouts.jsonl"
    if rank == 0:
        (out / "manifest.json").write_text(json.dumps(full, indent=2, default=str) + "\n", encoding="utf-8")
    complete, seq = _resume(records_path, tasks, samples) if rank == 0 else (set(), 0)
    skipped = set(skip)
    todo = [
        key
        for t in tasks.values()
        for key in ((t.member, t.split, i) for i in t.indices)
        if key not in complete and key not in skipped
    ]
    state = _Progress(resumed=len(complete))
    if complete:
        say(f"  resuming: {len(complete)} task(s) already done in {records_path}")
    chunks = _chunks(todo, tasks_per_chunk)
    if max_chunks is not None:
        chunks = chunks[:max_chunks]
    base_seed = int(full.get("seed", 0))
    secrets = _secrets(mix)

    class Recorder(TelemetryRun):
        """A chunk's records, kept until the chunk ends (then appended to ``rollouts.jsonl``)."""

        def __init__(self) -> None:
            super().__init__(
                None, rank=rank, num_generations=samples, num_generations_eval=samples, secrets=secrets
            )
            self.records: list[dict[str, Any]] = []

        def write(self, records: Sequence[dict[str, Any]]) -> None:
            with self._lock:
                self.records.extend(records)

    observers = {m: mix.spec(m).telemetry for m in mix.members}
    previous = {m: o.run for m, o in observers.items()}
    telemetry = _telemetry_callback(trainer)
    filtered = telemetry.unscored_notices_filtered() if telemetry is not None else contextlib.nullcontext()
    columns = (
        TextColumn("eval"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("tasks"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, disable=console is None) as progress:
        bar = progress.add_task("eval", total=len(todo))
        try:
            with filtered, quiet_trainer():
                for number, chunk in enumerate(chunks):
                    rows = [dict(tasks[m].rows[i]) for m, _, i in chunk]
                    recorder = Recorder()
                    for observer in observers.values():
                        observer.run = recorder
                    set_seed(base_seed + number)
                    started = time.perf_counter()
                    with _eval_geometry(trainer, len(rows) * samples, samples):
                        trainer.evaluate(eval_dataset=rows_to_dataset(rows), metric_key_prefix="eval")
                    state.eval_s += time.perf_counter() - started
                    records = _gathered(recorder.records)
                    state.rollouts += len(records)
                    counts: dict[Any, int] = {}
                    for record in records:
                        counts[_task_key(record)] = counts.get(_task_key(record), 0) + 1
                    short = [key for key in chunk if counts.get(key, 0) < samples]
                    if short:
                        logger.warning(
                            "ormix eval: %d task(s) of a chunk got fewer than %d records; they run again "
                            "on resume",
                            len(short),
                            samples,
                        )
                    if rank == 0:
                        seq = _append(records_path, records, seq)
                    state.ran += len(chunk)
                    progress.advance(bar, len(chunk))
        finally:
            for member, observer in observers.items():
                observer.run = previous[member]
            mix.close_sessions()
    state.left = len(todo) - state.ran
    if state.left:
        say(
            f"  stopped after {len(chunks)} chunk(s): {state.left} task(s) left; run the same eval again "
            "to finish"
        )
    summary = _write_outputs(out, read_jsonl(records_path), full, say) if rank == 0 else {}
    return summary, state


def _load_mixture(mixture: Any) -> MixtureSpec:
    from ormix.config import MixtureConfig
    from ormix.mixture import MixtureSpec

    if isinstance(mixture, MixtureSpec):
        return mixture
    if isinstance(mixture, MixtureConfig):
        return MixtureSpec.from_config(mixture)
    from ormix.config import load_mixture_config
    from ormix.mixture.mixture import trainer_settings_check

    return MixtureSpec.from_config(load_mixture_config(str(mixture), train_check=trainer_settings_check()))


def _eval_args(
    mix: MixtureSpec, opts: EvalOptions, out_dir: Path, model: str | None, longest_solution: int
) -> tuple[Any, list[str]]:
    """The `GRPOConfig` of an eval: the file's ``train:`` section, ``--set`` over it, then what an eval needs
    (one chunk per batch, ``samples`` generations per task, no files of the trainer's own)."""
    from ormix.integrations.trl.args import build_grpo_config, check_settings

    file_settings = check_settings(dict(mix.config.train), "train.")
    given = check_settings(dict(opts.settings), "--set ")
    merged = {**file_settings, **given}
    notes: list[str] = []
    if opts.policy == "reference":
        # The oracle checks the environment, not the budget: the solutions must fit.
        if "max_completion_length" not in given:
            budget = max(int(merged.get("max_completion_length") or 0), REFERENCE_MIN_COMPLETION)
            merged["max_completion_length"] = budget
        if "max_tool_calling_iterations" not in given:
            rounds = max(int(merged.get("max_tool_calling_iterations") or 0), REFERENCE_MIN_ROUNDS)
            merged["max_tool_calling_iterations"] = max(rounds, longest_solution + 1)
        merged["use_vllm"] = False
        notes.append(
            f"reference policy: max_completion_length={merged['max_completion_length']}, "
            f"max_tool_calling_iterations={merged['max_tool_calling_iterations']} (room for every solution; "
            "--set changes them)"
        )
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
        EvalError (UnknownMemberError, MissingSplitError, NoEvalTasksError, ModelNotFoundError,
        EvalManifestError), other UsageErrors (a bad mixture file or setting): bad input, before any model
        is loaded.
    """
    opts = replace(options or EvalOptions(), **option_fields)
    opts.check()
    samples = opts.samples_per_task

    def say(text: str) -> None:
        if console is not None:
            console.print(text, highlight=False)

    model_path, label, run_out = resolve_eval_model(opts.model)
    mix = _load_mixture(mixture)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    try:
        out_dir = (
            Path(opts.out_dir) if opts.out_dir is not None else _default_out(mix.name, label, run_out, opts)
        )
        tasks = eval_tasks(mix, opts.members, opts.split)
        calls: dict[tuple[str, str | None, int], list[tuple[str, dict]]] = {}
        missing: dict[str, list[int]] = {}
        if opts.policy == "reference":
            calls, missing = reference_calls(mix, tasks)
        longest = max((len(c) for c in calls.values()), default=0)
        with tempfile.TemporaryDirectory(prefix="ormix-eval-") as scratch:
            args, notes = _eval_args(mix, opts, Path(scratch), model_path, longest)
            fields: dict[str, Any] = {
                "model": "reference" if opts.policy == "reference" else label,
                "policy": opts.policy,
                "k": sorted(set(opts.k)),
                "success_threshold": opts.success_threshold,
            }
            if opts.policy == "reference":
                fields["no_reference"] = missing
            manifest = eval_manifest(args, mix, tasks, samples, **fields)
            _prepare_out(out_dir, manifest, opts.overwrite)
            complete, _ = _resume(out_dir / "rollouts.jsonl", tasks, samples)
            planned = sum(len(t.indices) for t in tasks.values())
            skip = [(m, tasks[m].split, i) for m, indices in missing.items() for i in indices]
            shown = "reference solutions" if opts.policy == "reference" else f"model {label}"
            say(
                f"[bold]ormix eval[/bold] {mix.name}: {shown}, {samples} sample(s) per task, "
                f"pass@{', pass@'.join(map(str, sorted(set(opts.k))))}"
            )
            for member, selection in tasks.items():
                absent = f"; no reference solution for {len(missing[member])}" if missing.get(member) else ""
                say(
                    f"  {member}: {len(selection.indices)} task(s) of split {selection.split!r} "
                    f"({selection.source}){absent}"
                )
            for note in notes:
                say(f"  {note}")
            say(f"output: {out_dir}")
            left = planned - len(complete) - len(skip)
            if left <= 0:
                out_dir.mkdir(parents=True, exist_ok=True)
                (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str) + "\n")
                from ormix.runs import read_jsonl

                say(f"  every task is done already ({len(complete)}): summarising")
                summary = _write_outputs(out_dir, read_jsonl(out_dir / "rollouts.jsonl"), manifest, say)
                return EvalResult(out_dir, summary, manifest, resumed_tasks=len(complete))
            trainer = _build_trainer(mix, opts, args, model_path, label, tasks)
            policy = None
            if opts.policy == "reference":
                from ormix.demo.scripted import ScriptedPolicy

                policy = ScriptedPolicy(ReferenceScript(trainer, calls)).attach(trainer)
            try:
                summary, state = _evaluate(
                    trainer,
                    mix,
                    tasks,
                    samples,
                    out_dir,
                    console,
                    ks=None,
                    manifest=manifest,
                    overwrite=False,
                    tasks_per_chunk=opts.tasks_per_chunk,
                    max_chunks=opts.max_chunks,
                    skip=skip,
                )
            finally:
                if policy is not None:
                    policy.detach()
    finally:
        mix.close()
    return EvalResult(
        out_dir,
        summary,
        manifest,
        resumed_tasks=state.resumed,
        ran_tasks=state.ran,
        complete=state.left == 0,
        eval_s=state.eval_s,
        rollouts=state.rollouts,
    )


def _build_trainer(
    mix: MixtureSpec, opts: EvalOptions, args: Any, model_path: str | None, label: str, tasks: Any
) -> Any:
    from transformers import PrinterCallback

    from ormix.dataset import rows_to_dataset
    from ormix.demo.tiny import resolve_model
    from ormix.integrations.trl.lifecycle import quiet_trainer
    from ormix.integrations.trl.trainer import ConcurrentGRPOTrainer

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
        raise ModelNotFoundError(f"--model {label}: it does not load ({e})") from None
    trainer.remove_callback(PrinterCallback)
    return trainer


def print_summary(result: EvalResult, console: Any) -> None:
    """The summary table, what was left out, and where the files are."""
    from rich.table import Table

    from ormix.evaluation.summary import summary_table

    summary = result.summary
    rows = summary_table(summary)
    title = (
        "reference solutions (oracle)"
        if summary.get("policy") == "reference"
        else f"{summary.get('model')}: {summary.get('samples')} sample(s) per task"
    )
    table = Table(*rows[0], title=title)
    for row in rows[1:]:
        table.add_row(*row)
    console.print(table)
    console.print(
        f"{summary.get('confidence', 0.95):.0%} intervals over tasks ({summary.get('interval')}); success = "
        f"scored with env_reward >= {summary.get('success_threshold', 1.0):g}",
        highlight=False,
    )
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
    files = [name for name in ("rollouts.jsonl", "summary.json", "report.md", "manifest.json")]
    if (result.out_dir / "plots" / "summary.png").is_file():
        files.append("plots/summary.png")
    console.print(f"wrote {result.out_dir}/: {', '.join(files)}", highlight=False, soft_wrap=True)


def eval_command(
    mixture: str | Path,
    options: EvalOptions | None = None,
    *,
    console: Any,
    overrides: Sequence[str] = (),
    debug: bool = False,
    **option_fields: Any,
) -> int:
    """`ormix eval FILE`: returns the exit status (0 done, 1 failed, 2 bad input, 130 interrupted).

    As `run_eval`, plus ``overrides``: the ``--set KEY=VALUE`` items, applied over ``options.settings``;
    prints the summary table and where the files went. Every failure is one ``error:`` line (``debug``, or
    ``ORMIX_DEBUG`` set, adds the traceback of an unexpected one).

    Example:
        Not run as a doctest: an eval runs a torch model.

        >>> from rich.console import Console
        >>> eval_command("mixtures/local-demo.yaml", k=(1, 4), console=Console())   # doctest: +SKIP
        0
    """
    from ormix.integrations.trl.args import parse_overrides

    started = time.monotonic()
    try:
        opts = replace(options or EvalOptions(), **option_fields)
        opts = replace(opts, settings={**opts.settings, **parse_overrides(overrides)})
        result = run_eval(mixture, opts, console=console)
    except OrmixError as e:
        console.print(f"[red]error:[/red] {e}", highlight=False)
        return exit_status(e)
    except KeyboardInterrupt:
        console.print(
            "[yellow]interrupted[/yellow]: the chunks done are kept; run the same command to resume"
        )
        return 130
    except Exception as e:  # noqa: BLE001 - the CLI reports, with the traceback, and exits non-zero
        if debug or os.environ.get("ORMIX_DEBUG"):
            console.print_exception(max_frames=8)
        console.print(f"[red]eval failed:[/red] {type(e).__name__}: {e}", highlight=False)
        return 1
    print_summary(result, console)
    console.print(f"done in {math.ceil(time.monotonic() - started)}s", highlight=False)
    return 0
