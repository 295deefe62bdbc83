"""Everything before the trainer: the checks that need no server (`plan_run`: settings, plan length, warm
start, model, run directory) and the start (`start_run`: servers contacted, manifest written, model warmed
up, the model GRPO starts from recorded in the manifest as ``start`` by path and content hash:
`start_record`). A start that fails leaves nothing that would refuse the retry (`clear_failed_start`).
A study's one start for all its arms is `make_start`."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ormix._errors import TrainConfigError, UsageError
from ormix._runs import weights_sha256
from ormix.app._train.options import RunOptions
from ormix.app._workspace import Workspace, default_run_dir
from ormix.config._trainer_rules import group_scoring_problem, plan_length_problem

if TYPE_CHECKING:  # pragma: no cover
    from ormix.config import MixtureConfig
    from ormix.mixture import MixtureSpec

#: What a warm-started model directory holds beside the weights (`ormix.workbench._warmup.WARM_MARKER`).
_WARM_MARKER = "ormix-warm.json"


def load_run_config(
    path: str | Path, settings: Mapping[str, Any] | None = None, max_steps: int | None = None
) -> MixtureConfig:
    """The mixture `ormix train` runs from a file: validated (its ``train:`` section too) and sized to the
    run.

    ``settings`` are ``--set`` overrides and ``max_steps`` is ``--max-steps``; the run's ``max_steps`` sizes
    a dataset the file leaves unsized (`MixtureConfig.sized_for`). Its `config_hash()` is the run's manifest
    hash.

    Example:
        >>> load_run_config("mixtures/local-demo.yaml").name
        'local-demo'
    """
    from ormix.config import load_mixture_config
    from ormix.mixture._mixture import trainer_settings_check

    config = load_mixture_config(str(path), train_check=trainer_settings_check())
    settings = settings or {}
    steps = max_steps if max_steps is not None else settings.get("max_steps", config.train.get("max_steps"))
    return config.sized_for(steps if isinstance(steps, int) else None)


@dataclass
class PlannedRun:
    """One run, as checked before anything starts: where, with which trainer settings, from where."""

    dir: Workspace
    args: Any  # the GRPOConfig
    notes: list[str]
    model: str | None  # None: the tiny model
    warmup_sft: int
    warmup_fraction: float
    rank: int
    checkpoint: Path | None = None
    changes: list[str] = field(default_factory=list)
    warm_seed: int = 0  # the warm start's seed: the mixture's (or --set seed), never --seed


def plan_run(mix: MixtureSpec, opts: RunOptions) -> PlannedRun:
    """Every check that needs no server: trainer settings, plan length, warm start, the run directory."""
    from ormix.trl._args import build_grpo_config, check_settings
    from ormix.workbench._tiny import TINY_MODEL

    file_settings = dict(mix.config.train)
    check_settings(file_settings, "train.")  # name a bad key as the file spells it, before merging
    merged = {**file_settings, **opts.settings}
    if opts.max_steps is not None:
        merged["max_steps"] = opts.max_steps
    # --seed is GRPO's seed only: the warm start (shared by a study's seeds), the plan's rows and the eval
    # keep theirs.
    warm_seed = int(merged.get("seed", getattr(mix, "seed", 0)))
    if opts.seed is not None:
        merged["seed"] = opts.seed
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if opts.output_dir is None and (world_size > 1 or opts.resume is not None):
        why = f"{world_size} processes" if world_size > 1 else "--resume"
        # Each rank would stamp its own time: every process must write into one run directory.
        raise TrainConfigError(f"{why}: pass --output-dir (the run directory)")
    run_dir = Path(opts.output_dir) if opts.output_dir is not None else default_run_dir(mix.name)
    model = None if opts.model in (None, TINY_MODEL) else opts.model
    args, notes = build_grpo_config(mix, merged, output_dir=run_dir, model=model, world_size=world_size)
    if opts.vllm_url is not None:
        args = _async_args(mix, opts, args, world_size)
    cfg = mix.config
    problem = plan_length_problem(args.max_steps, cfg.prompts_per_step, cfg.num_samples, cfg.num_steps)
    if problem := problem or group_scoring_problem(mix, args, world_size):
        raise TrainConfigError(problem)
    warm = cfg.warm_start  # the file's warm start, unless the options say otherwise
    sft = opts.warmup_sft if opts.warmup_sft is not None else (warm.sft_steps if warm else 0)
    fraction = opts.warmup_fraction if opts.warmup_fraction is not None else (warm.fraction if warm else 1.0)
    if sft < 0 or not 0.0 < fraction <= 1.0:
        raise TrainConfigError(
            f"--warmup-sft is >= 0 and --warmup-fraction in (0, 1]; got {sft} and {fraction}"
        )
    if model is not None:
        problem = model_problem(model)
        if problem:
            raise TrainConfigError(problem)
    if sft > 0 and opts.resume is None:
        _check_references(mix)
    run = PlannedRun(
        Workspace(run_dir),
        args,
        notes,
        model,
        sft,
        fraction,
        int(os.environ.get("RANK", "0")),
        warm_seed=warm_seed,
    )
    if run.rank == 0 or opts.resume is not None:
        run.checkpoint, run.changes = run.dir.prepare(
            mix.config.manifest_dict(),
            resume=opts.resume,
            overwrite=opts.overwrite,
            allow_changed=opts.allow_changed_mixture,
        )
    return run


def _async_args(mix: MixtureSpec, opts: RunOptions, args: Any, world_size: int) -> Any:
    """The checked `GRPOConfig` as TRL's ``AsyncGRPOConfig``, after what the async path cannot do yet."""
    from ormix.trl._async_grpo import async_config, async_problems

    assert opts.vllm_url is not None
    problems = async_problems(opts.vllm_url)
    if world_size > 1:
        problems.append("--async runs one trainer process here (TRL's async worker is on rank 0 only)")
    warm = mix.config.warm_start
    if (opts.warmup_sft if opts.warmup_sft is not None else (warm.sft_steps if warm else 0)) > 0:
        problems.append("--async does not warm start (--warmup-sft / warm_start): pass --warmup-sft 0")
    if str(getattr(args.eval_strategy, "value", args.eval_strategy)) != "no":
        problems.append("--async does not evaluate during training: drop train.eval_steps")
    if problems:
        raise TrainConfigError("ormix train --async:\n- " + "\n- ".join(problems))
    return async_config(args, opts.vllm_url)


def model_problem(model: str) -> str | None:
    """What is wrong with ``--model`` (a model directory or a hub id), found in a second, not after the
    hub's retries: a path that is not there, a name that is no hub id, an id the hub does not know, or one
    neither cached nor reachable."""
    path = Path(model).expanduser()
    if path.is_dir():
        if (path / "config.json").is_file():
            return None
        return f"--model {model}: {path} has no config.json, so it is not a model directory"
    if model.startswith((".", "/", "~")) or model.count("/") > 1 or path.exists():
        return f"--model {model}: no such model directory"
    from huggingface_hub import HfApi, try_to_load_from_cache
    from huggingface_hub.errors import GatedRepoError, HFValidationError, RepositoryNotFoundError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(model)
    except HFValidationError:
        return f"--model {model}: neither a model directory nor a hub id (owner/name)"
    if isinstance(try_to_load_from_cache(model, "config.json"), str):
        return None
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return f"--model {model}: not in the local hub cache, and HF_HUB_OFFLINE is set"
    try:
        HfApi().model_info(model, timeout=10)
    except GatedRepoError:
        return f"--model {model}: a gated model; accept its terms on the hub and log in (`hf auth login`)"
    except RepositoryNotFoundError:
        return f"--model {model}: the hub has no such model (ids are case-sensitive; check the spelling)"
    except Exception as e:  # noqa: BLE001 - offline, DNS, proxy: the hub cannot be asked
        return (
            f"--model {model}: not in the local hub cache and the hub cannot be reached "
            f"({type(e).__name__}); download it first, or pass a local model directory"
        )
    return None


def _check_references(mix: MixtureSpec) -> None:
    """A warm start needs reference solutions: refuse before anything starts when no training member has
    any (a member's ``reference:`` hook, or a shipped ``local:`` environment's)."""
    from ormix.workbench._references import reference_solver

    if not any(reference_solver(m, mix.members[m]) is not None for m in mix.train_members):
        raise UsageError(
            "the warm start needs reference solutions and no training member has any: give yours a "
            "`reference: module:function` (docs/guides/own-environment.md), or drop --warmup-sft / "
            "warm_start:"
        )


def earlier_overrides(opts: RunOptions) -> RunOptions:
    """A resumed run trains with its first start's ``--set`` values (and ``--max-steps``) unless this
    command gives them again."""
    if opts.resume is None or opts.output_dir is None:
        return opts
    stored = (Workspace(opts.output_dir).read_manifest() or {}).get("overrides") or {}
    settings = {**stored.get("settings", {}), **opts.settings}
    max_steps = opts.max_steps if opts.max_steps is not None else stored.get("max_steps")
    seed = opts.seed if opts.seed is not None else stored.get("seed")
    return replace(opts, settings=settings, max_steps=max_steps, seed=seed)


def clear_failed_start(run: PlannedRun, created: bool) -> None:
    """A start that failed before any step completed leaves nothing that would refuse the retry."""
    if run.checkpoint is not None or run.rank != 0 or not run.dir.path.is_dir():
        return
    if run.dir.checkpoints() or run.dir.completed_step() is not None:
        return
    run.dir.clear()
    (run.dir.path / "progress.json").unlink(missing_ok=True)
    if created:
        with contextlib.suppress(OSError):  # not empty (something else wrote there), or already gone
            run.dir.path.rmdir()


def start_run(mix: MixtureSpec, run: PlannedRun, opts: RunOptions, console: Any) -> tuple[Any, Any]:
    """Contact the servers, write the manifest and train args, warm the model up: (model, tokenizer)."""
    from ormix.workbench._tiny import TINY_MODEL, resolve_model

    model_path = resolve_model(run.model)
    console.print(
        f"[bold]ormix train[/bold] {mix.name}: members {', '.join(mix.members)} "
        f"({mix.routing} routing), model {run.model or 'ormix:tiny'}"
    )
    console.print(f"run directory: {run.dir.path}")
    for note in run.notes:
        console.print(f"  set {note}")
    # Contacts the servers: task lists, tool surfaces, eval sets (a split or task that does not exist is
    # refused here, before any model loads); the manifest pins exactly what this run trains on.
    manifest = mix.manifest()
    for member, found in mix.eval_sets().items():
        console.print(
            f"  eval {member}: {len(found.task_indices)} task(s) of split {found.split!r}, {found.source}"
            + (f"; {found.overlap} also trained on" if found.overlap else ""),
            highlight=False,
        )
        for note in found.notes:
            console.print(f"  [yellow]note:[/yellow] {note}", highlight=False)
    if run.checkpoint is not None:
        manifest = run.dir.resumed_manifest(manifest, run.checkpoint, run.changes, opts.allow_changed_mixture)
        step = Workspace.step_of(run.checkpoint)
        if run.rank == 0:
            run.dir.cut_back(step)
        console.print(f"  resuming from {run.checkpoint} (step {step})")
    run.dir.path.mkdir(parents=True, exist_ok=True)
    overrides: dict[str, Any] = {"settings": dict(opts.settings)}
    if opts.max_steps is not None:
        overrides["max_steps"] = opts.max_steps
    if opts.seed is not None:
        overrides["seed"] = opts.seed
    manifest["overrides"] = overrides  # what `--resume` applies again
    if run.checkpoint is not None and opts.settings:
        shown = ", ".join(f"{k}={v}" for k, v in opts.settings.items())
        console.print(f"  with the run's --set {shown}", highlight=False)
    if run.rank == 0:
        run.dir.manifest_path.write_text(json.dumps(manifest, indent=2, default=str) + "\n")
        (run.dir.path / "train_args.json").write_text(run.args.to_json_string())
    args = run.args
    console.print(
        f"  {len(mix.train_dataset)} training rows, {mix.prompts_per_step or '?'} prompts/step × "
        f"{args.num_generations} generations, max_steps "
        f"{args.max_steps if args.max_steps > 0 else 'epochs'}, device "
        f"{'cpu' if args.use_cpu else 'gpu'}{', vLLM' if getattr(args, 'use_vllm', False) else ''}"
        f"{f', async ({opts.vllm_url})' if opts.vllm_url else ''}"
    )
    base = run.model or TINY_MODEL
    if run.warmup_sft == 0 or run.checkpoint is not None:
        if run.checkpoint is None and run.rank == 0:  # hashing the weights once is enough
            _record_start(run, manifest, start_record(model_path, base=base), console)
        return model_path, None
    from ormix.workbench._warmup import warm_start

    warm = mix.config.warm_start
    done = warm_start(
        mix,
        model_path,
        steps=run.warmup_sft,
        console=console,
        seed=run.warm_seed,
        use_cpu=bool(args.use_cpu),
        max_completion_length=args.max_completion_length,
        fraction=run.warmup_fraction,
        near_misses=warm.near_misses if warm is not None else False,
    )
    assert done.path is not None  # cached: the start is a directory the manifest can name
    if run.rank == 0:
        # How this run's warm start was made: a cached one's file may be of a run with another budget.
        record = {**start_record(done.path, base=base), "warm_start": done.made}
        _record_start(run, manifest, record, console)
    return done.model, done.tokenizer


def _record_start(run: PlannedRun, manifest: dict[str, Any], start: dict[str, Any], console: Any) -> None:
    """The model GRPO starts from, in the manifest (written again; rank 0 only) and on the console."""
    digest = start.get("sha256")
    console.print(
        f"  start: {start['path']} ({f'sha256 {digest[:12]}' if digest else 'no local weights to hash'})",
        highlight=False,
    )
    manifest["start"] = start
    run.dir.manifest_path.write_text(json.dumps(manifest, indent=2, default=str) + "\n")


def _hub_snapshot(model: str) -> Path | None:
    """The local directory of a hub model's cached snapshot (``None``: not cached)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(model, "config.json")
    except Exception:  # noqa: BLE001 - not a hub id, no cache: nothing to hash
        return None
    return Path(found).parent if isinstance(found, str) else None


def start_record(model_path: str | os.PathLike[str], *, base: str) -> dict[str, Any]:
    """What a run's manifest records (``start``) of the model GRPO starts from: its ``path`` (a directory,
    or a hub id), ``sha256`` of its weights (`ormix._runs.weights_sha256`; a hub id's cached snapshot;
    ``None`` when no weights are here), the ``base`` model asked for, and ``warm_start``: how a warm start
    made it (what its ``ormix-warm.json`` says), else ``None``.

    Example:
        >>> import tempfile
        >>> d = Path(tempfile.mkdtemp())
        >>> _ = (d / "model.safetensors").write_bytes(b"weights")
        >>> record = start_record(d, base="ormix:tiny")
        >>> record["sha256"][:12], record["warm_start"]
        ('80179a942440', None)
    """
    path = Path(model_path).expanduser()
    local = path if path.is_dir() else _hub_snapshot(str(model_path))
    made = None
    if path.is_dir():
        with contextlib.suppress(OSError, ValueError, AttributeError):
            made = json.loads((path / _WARM_MARKER).read_text()).get("warm_start")
    return {
        "path": str(path.resolve()) if path.is_dir() else str(model_path),
        "sha256": weights_sha256(local) if local is not None else None,
        "base": base,
        "warm_start": made,
    }


def make_start(
    path: str | Path, out: str | Path, *, model: str | None, steps: int | None, console: Any
) -> dict[str, Any]:
    """A study's one start (`ormix.app._study`): the warm start of the mixture file at ``path`` on its
    train members (``steps``, else the file's ``warm_start``; its fraction and near misses; the mixture's
    seed), from ``model`` (``None``: the tiny model), saved into ``out``; or, with no warm start, ``model``
    itself. Returns the start's record (`start_record`). An ``out`` that holds a start already is kept.

    Example:
        Not run as a doctest: the warm start trains a torch model.

        >>> make_start("studies/x/mixtures/full.yaml", "studies/x/start", model=None, steps=20,
        ...            console=Console())["sha256"]                                    # doctest: +SKIP
    """
    import shutil
    import tempfile

    from ormix.mixture import MixtureSpec
    from ormix.trl._args import build_grpo_config
    from ormix.workbench._tiny import TINY_MODEL, resolve_model

    base = model or TINY_MODEL
    model = None if model in (None, TINY_MODEL) else model
    config = load_run_config(path)
    warm = config.warm_start
    sft = steps if steps is not None else (warm.sft_steps if warm else 0)
    if sft < 0:
        raise TrainConfigError(f"--warmup-sft is >= 0; got {sft}")
    if model is not None:
        problem = model_problem(model)
        if problem:
            raise TrainConfigError(problem)
    model_path = resolve_model(model)
    if sft == 0:
        return start_record(model_path, base=base)
    target = Path(out)
    if (target / _WARM_MARKER).is_file():
        return start_record(target, base=base)
    from ormix.workbench._warmup import warm_start

    mix = MixtureSpec.from_config(config)
    try:
        _check_references(mix)
        with tempfile.TemporaryDirectory(prefix="ormix-start-") as scratch:
            args, _ = build_grpo_config(mix, dict(config.train), output_dir=scratch, model=model)
        done = warm_start(
            mix,
            model_path,
            steps=sft,
            console=console,
            seed=int(args.seed),
            use_cpu=bool(args.use_cpu),
            max_completion_length=args.max_completion_length,
            fraction=warm.fraction if warm is not None else 1.0,
            near_misses=warm.near_misses if warm is not None else False,
        )
    finally:
        mix.close()
    assert done.path is not None
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(done.path, tmp)
    shutil.rmtree(target, ignore_errors=True)
    os.replace(tmp, target)
    return start_record(target, base=base)
