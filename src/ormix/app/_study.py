"""A per-environment ablation study (`ormix ablate FILE --run`): train every arm, evaluate each on every
member's eval tasks, write the arm × member matrix and the effect of dropping each member.

The arms are `ormix.mixture._ablation.arms`: ``full`` (the mixture as it is), ``without-<member>`` for each
train member (``leave_one_out``) and ``only-<member>`` for each ``only`` name. A member an arm does not
train on stays in it as an eval-only member, and the budget rule (``same-total`` or ``same-per-member``)
says what happens to its prompts. The study directory holds:

- ``mixtures/<arm>.yaml``: each arm's mixture, self-contained: the study's ``--max-steps`` and ``--set``
  are in its ``train:`` section, and a ``base_dir`` resolves ``module:Class`` targets from wherever it is;
  ``ormix train mixtures/<arm>.yaml`` trains exactly that arm;
- ``start/``: the study's one start, when it warm-starts (``--warmup-sft N``, or the file's
  ``warm_start``): SFT on the FULL mixture's train members (`ormix.app._train.prepare.make_start`), made once;
  every arm and every seed trains from it with no warm start of its own, so arms differ only in what GRPO
  trained on. Without a warm start every arm starts from the base model (``--model``, else the tiny one);
- ``arms/<arm>/`` (one training seed: the mixture's), or ``arms/<arm>/seed-<s>/`` per seed of ``--seeds``:
  an ordinary run directory (`ormix.app._train.train`) whose manifest records its start (path and sha256),
  with
  ``eval/`` the run's model evaluated on the FULL mixture's eval tasks (`ormix.app._eval.run_eval`):
  the same tasks, the same samples per task and the same eval seed for every arm and training seed, so
  runs pair task by task;
- ``study.json`` (the start, the arms, the budget rule, the seeds, per arm × member metrics with intervals,
  and per arm the effect of what it dropped on every member: arm − full, paired over the tasks by
  `ormix.app._compare.compare`, or with several seeds by `compare_groups`, whose intervals cover
  seeds and tasks), ``study.md`` (the start, the matrix and the effects with their verdicts),
  ``heatmap.png`` (arm × member, the chosen metric, each cell annotated with its interval).

A run is done when its final ``model/`` and ``eval/summary.json`` exist, an arm when all its seeds' runs
are; a done run is skipped, so running the same command again continues a study (an interrupted study
prints the command that finishes all of it). An interrupted run resumes: training from its latest
checkpoint (else it starts over), the eval from its last complete chunk (the runner does that).
``arms=("full",)`` (``--arm NAME``) runs only the named arms, so arms can be spread over machines; run once
more with every arm done and only the matrix is rebuilt. A study directory remembers its options
(``study.json`` → ``options``): a different budget, model, step count, ``k``, seeds, warm start or ``--set``
is refused, since its arms would not compare. Before any effect is computed, every done run's recorded
start is compared: runs that started from different models are refused (`UsageError`, naming them) unless
``allow_different_starts``, and then ``study.md`` says so at the top.

Example:
    Not run as a doctest: each arm is a GRPO training run.

    >>> from ormix.app._study import StudyOptions, run_study
    >>> options = StudyOptions(out_dir="studies/demo", max_steps=4)
    >>> result = run_study("mixtures/local-demo.yaml", options)                   # doctest: +SKIP
    >>> result.study["effects"]["without-seta"]["seta"]["pass@1"]["verdict"]      # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ormix._errors import UsageError
from ormix.app._command import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    run_command,
)
from ormix.app._render import print_table
from ormix.app._workspace import Workspace
from ormix.config._trainer_rules import max_steps_problem
from ormix.evaluation._summary import format_metric, markdown_table, metric_names
from ormix.mixture._ablation import FULL, Arm, Budget, arm_file_text, arms, select_arms

if TYPE_CHECKING:  # pragma: no cover
    from ormix.config import MixtureConfig

#: The options a study directory keeps: the arms it already holds were made with them.
_KEPT = ("budget", "max_steps", "model", "settings", "k", "samples", "seed", "warmup_sft", "seeds")


@dataclass(frozen=True)
class StudyOptions:
    """How to run a study (`ormix ablate FILE --run`'s flags).

    Attributes:
        out_dir: the study directory; default ``studies/<mixture name>`` (running again continues it).
        leave_one_out: an arm without each train member.
        only: an arm with only this member, for each name.
        arms: run only these arms (``()``: all); the others are left as they are (done or not).
        budget: ``same-total`` or ``same-per-member`` (`ormix.mixture._ablation`).
        max_steps: training steps per arm (written into each arm's ``train.max_steps``).
        k: the pass@k reported; samples per task = max(k) unless ``samples``.
        samples: samples per eval task.
        model: the base model every arm starts from (``None``: ormix's offline tiny model).
        settings: GRPOConfig overrides (``--set``) for every arm, written into its ``train:`` section (the
            eval reads its generation settings from there too).
        metric: the metric of the heatmap and of the effects' verdicts first listed (default pass@1).
        seed: the eval's seed (the same for every arm and training seed).
        warmup_sft: steps of the study's one warm start, on the full mixture's train members, that every
            arm starts from (``None``: the file's ``warm_start``; 0: none, every arm starts from ``model``).
        report: write each arm's training report (``report/`` in its run directory).
        seeds: training seeds (`ormix.app._train.RunOptions.seed`): every arm is trained once per seed, into
            ``arms/<arm>/seed-<s>/``, and its cells and effects pool the seeds (intervals over seeds and
            tasks). ``()``: one run per arm with the mixture's seed, in ``arms/<arm>/``.
        allow_different_starts: compute the effects although runs started from different models (study.md
            says so at the top); otherwise such a study is refused.

    Example:
        >>> StudyOptions(max_steps=2, k=(1, 4)).budget
        'same-total'
    """

    out_dir: str | Path | None = None
    leave_one_out: bool = True
    only: tuple[str, ...] = ()
    arms: tuple[str, ...] = ()
    budget: Budget = "same-total"
    max_steps: int | None = None
    k: tuple[int, ...] = (1,)
    samples: int | None = None
    model: str | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    metric: str = "pass@1"
    seed: int = 0
    warmup_sft: int | None = None
    report: bool = True
    seeds: tuple[int, ...] = ()
    allow_different_starts: bool = False


@dataclass
class StudyResult:
    """What a study left: its directory, the ``study.json`` content, the runs made (trained or evaluated)
    and skipped now (``<arm>``, or ``<arm>/seed-<s>`` with seeds), and the exit status (0 when every arm
    asked for is done)."""

    out_dir: Path
    study: dict[str, Any]
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    exit_status: int = 0


# ── where things are ──────────────────────────────────────────────────


def arm_dir(study_dir: Path, arm: str) -> Path:
    """An arm's run directory.

    Example:
        >>> arm_dir(Path("studies/x"), "full").as_posix()
        'studies/x/arms/full'
    """
    return study_dir / "arms" / arm


def arm_runs(study_dir: Path, arm: str, seeds: Sequence[int] = ()) -> list[tuple[int | None, Path]]:
    """An arm's runs: (training seed, run directory); one run in ``arms/<arm>`` without seeds.

    Example:
        >>> [(s, p.as_posix()) for s, p in arm_runs(Path("s"), "full", (0, 1))]
        [(0, 's/arms/full/seed-0'), (1, 's/arms/full/seed-1')]
        >>> [(s, p.as_posix()) for s, p in arm_runs(Path("s"), "full")]
        [(None, 's/arms/full')]
    """
    base = arm_dir(study_dir, arm)
    return [(s, base / f"seed-{s}") for s in seeds] if seeds else [(None, base)]


def _run_name(arm: str, seed: int | None) -> str:
    return arm if seed is None else f"{arm}/seed-{seed}"


def different_starts(starts: Mapping[str, Mapping[str, Any] | None]) -> dict[str, list[str]]:
    """Runs grouped by the sha256 of the start their manifest records (``"unrecorded"``: none), when
    there is more than one group; ``{}`` when every run started from the same weights.

    Example:
        >>> different_starts({"full": {"sha256": "a"}, "only-x": {"sha256": "a"}})
        {}
        >>> different_starts({"full": {"sha256": "a"}, "only-x": {"sha256": "b"}, "y": None})
        {'a': ['full'], 'b': ['only-x'], 'unrecorded': ['y']}
    """
    groups: dict[str, list[str]] = {}
    for run, start in starts.items():
        digest = (start or {}).get("sha256") or "unrecorded"
        groups.setdefault(str(digest), []).append(run)
    return groups if len(groups) > 1 else {}


def arm_done(run_dir: Path, config_hash: str | None = None) -> bool:
    """Whether an arm's run is done: its final model and a complete eval summary are there (and, given the
    full mixture's ``config_hash``, the eval is of the full mixture's tasks, not one of the arm's own).

    Example:
        >>> arm_done(Path("no/such/run"))
        False
    """
    summary = Workspace(run_dir).eval_path / "summary.json"
    if not (Workspace(run_dir).model_path.is_dir() and summary.is_file()):
        return False
    try:
        complete = json.loads(summary.read_text(encoding="utf-8")).get("complete", True) is not False
    except (OSError, ValueError, AttributeError):
        return False  # unreadable: evaluate the arm again
    return complete and (config_hash is None or _eval_hash(run_dir) == config_hash)


def _eval_hash(run_dir: Path) -> str | None:
    """The config hash of the mixture the eval in ``run_dir/eval`` evaluated (``None``: no readable one)."""
    try:
        manifest = json.loads((Workspace(run_dir).eval_path / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    return manifest.get("config_hash") if isinstance(manifest, dict) else None


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)  # another machine merging the same study never reads half a file


# ── the matrix (pure) ─────────────────────────────────────────────────


def matrix_table(study: Mapping[str, Any], metric: str | None = None) -> list[list[str]]:
    """The arm × member matrix of one metric as rows of cells (header first; arms not done say so).

    Example:
        >>> study = {"metric": "pass@1", "members": ["a"], "arms": [{"name": "full", "done": True}],
        ...          "matrix": {"full": {"a": {"pass@1": {"value": 0.5, "low": 0.2, "high": 0.8, "n": 4}}}}}
        >>> matrix_table(study)
        [['arm', 'a'], ['full', '0.50 [0.20, 0.80]']]
    """
    metric = metric or study["metric"]
    rows = [["arm", *study["members"]]]
    for arm in study["arms"]:
        cells = study["matrix"].get(arm["name"], {})
        if not arm.get("done"):
            rows.append([arm["name"], *["(not done)" for _ in study["members"]]])
            continue
        rows.append([arm["name"], *[format_metric(cells.get(m, {}).get(metric)) for m in study["members"]]])
    return rows


def effects_table(study: Mapping[str, Any], metric: str | None = None) -> list[list[str]]:
    """Per arm (not full), per member: the effect (arm − full) of what the arm dropped, as its verdict.

    Example:
        >>> study = {"metric": "pass@1", "members": ["a"], "effects": {"without-a": {"a": {"pass@1": {
        ...     "verdict": "a: -0.40 [-0.60, -0.20]"}}}}}
        >>> effects_table(study)
        [['arm', 'a'], ['without-a', '-0.40 [-0.60, -0.20]']]
    """
    metric = metric or study["metric"]
    rows = [["arm", *study["members"]]]
    for name, per_member in study.get("effects", {}).items():
        cells = []
        for m in study["members"]:
            verdict = per_member.get(m, {}).get(metric, {}).get("verdict")
            # The verdict names the member; the table's column already does.
            cells.append(verdict.split(": ", 1)[1] if verdict and ": " in verdict else (verdict or "-"))
        rows.append([name, *cells])
    return rows


def _worth_a_table(study: Mapping[str, Any], metric: str) -> bool:
    """pass@k for every k, mean reward and coverage; pass^1 (= pass@1) never; error_rate when not all 0."""
    if metric == "pass^1":
        return False
    if metric == "error_rate":
        cells = [c.get(metric) or {} for per_arm in study["matrix"].values() for c in per_arm.values()]
        return any(cell.get("value") for cell in cells)
    return True


def study_markdown(study: Mapping[str, Any]) -> str:
    """``study.md``: the arms and the budget rule, the matrix, the effects with verdicts, what they mean.

    Example:
        >>> study = {"mixture": "m", "metric": "pass@1", "budget": "same-total", "members": ["a"],
        ...          "arms": [{"name": "full", "done": True, "trained": ["a"], "dropped": [],
        ...                    "budget": "same-total: ..."}], "matrix": {}, "effects": {}, "k": [1],
        ...          "confidence": 0.95}
        >>> print(study_markdown(study).splitlines()[0])
        # Ablation study: m
    """
    metric = study["metric"]
    out = [f"# Ablation study: {study['mixture']}", ""]
    confidence = f"{study.get('confidence', 0.95):.0%}"
    different = study.get("different_starts") or {}
    if different:
        groups = "; ".join(f"sha256 {digest[:12]}: {', '.join(runs)}" for digest, runs in different.items())
        out += [
            "> **WARNING: the arms did not all start from the same model** (--allow-different-starts): "
            f"{groups}. Each effect below mixes what the arm trained on with how its start differed.",
            "",
        ]
    out += [_start_line(study.get("start")), ""]
    seeds = study.get("seeds") or []
    if len(seeds) > 1:
        spread = (
            f"Each arm is trained with seeds {', '.join(map(str, seeds))} (one run each, the same start and "
            f"training rows); cells and effects pool the seeds, and their intervals are {confidence} over "
            "seeds and tasks (closed-form: the mean's variance over seeds and tasks with a Satterthwaite t; "
            "the IQM's from a two-level bootstrap; seed-to-seed variation included)."
        )
    else:
        spread = (
            f"Each arm is one training run; intervals are {confidence} over tasks only: they do not include "
            "seed-to-seed variation (train several seeds with --seeds 0,1,2)."
        )
    out.append(
        f"Budget rule: **{study['budget']}**. Every arm is evaluated on the full mixture's eval tasks "
        f"(k = {', '.join(map(str, study['k']))}). {spread}"
    )
    arm_rows = [
        [a["name"], ", ".join(a["trained"]), ", ".join(a["dropped"]) or "-", str(a["budget"])]
        for a in study["arms"]
    ]
    out += ["", *markdown_table([["arm", "trains on", "eval-only", "budget"], *arm_rows])]
    out += ["", f"## {metric} per arm and member", "", *markdown_table(matrix_table(study, metric))]
    others = [m for m in study.get("metrics", []) if m != metric and _worth_a_table(study, m)]
    for other in others:
        out += ["", f"### {other}", "", *markdown_table(matrix_table(study, other))]
    if study.get("effects"):
        pairing = "paired over tasks, seeds drawn per arm" if len(seeds) > 1 else "paired over tasks"
        caveat = (
            "Its interval covers seeds and tasks."
            if len(seeds) > 1
            else "Each arm is one training run: a difference also carries that run's seed-to-seed variation, "
            "which these intervals (over tasks) do not include."
        )
        out += [
            "",
            f"## Effect of what each arm dropped ({metric}: arm − full, {pairing})",
            "",
            *markdown_table(effects_table(study, metric)),
            "",
            "An effect says how this arm's model differs from the full mixture's on the same tasks, with the "
            'interval of that difference; "no detectable change" means the interval includes 0, not that '
            f"there is no effect. {caveat}",
        ]
    missing = [a["name"] for a in study["arms"] if not a.get("done")]
    if missing:
        again = f": `{study['command']}`" if study.get("command") else ""
        out += ["", f"Not done yet: {', '.join(missing)} (run the study again{again})."]
    return "\n".join(out) + "\n"


def _start_line(start: Mapping[str, Any] | None) -> str:
    """study.md's sentence on the one model every arm starts from."""
    if not start:
        return "Every arm starts from the same model (not recorded yet: no arm has trained)."
    digest = start.get("sha256")
    where = f"`{start['path']}` (sha256 `{digest[:12]}…`)" if digest else f"`{start['path']}`"
    made = start.get("warm_start")
    if made:
        how = (
            f"a warm start of {made.get('steps')} SFT steps on the full mixture's train members "
            f"({', '.join(made.get('members') or []) or '-'}; {made.get('episodes')} reference episodes, "
            f"{made.get('scored')} scored) from {start.get('base')}"
        )
    else:
        how = f"the base model {start.get('base')}, no warm start"
    return f"Every arm starts from {where}: {how}."


# ── the study ─────────────────────────────────────────────────────────


def _study_config(path: str | Path, options: StudyOptions) -> MixtureConfig:
    """The full mixture as the study trains it: the file, with ``--max-steps`` and ``--set`` in ``train:``."""
    from ormix.config import load_mixture_config
    from ormix.mixture._mixture import trainer_settings_check
    from ormix.trl._args import check_settings

    config = load_mixture_config(path, train_check=trainer_settings_check())
    train = {**config.train, **check_settings(dict(options.settings), "--set ")}
    if options.max_steps is not None:
        if problem := max_steps_problem(options.max_steps):
            raise UsageError(f"--max-steps: {problem}")
        train["max_steps"] = options.max_steps
    if len(set(options.seeds)) != len(options.seeds):
        raise UsageError(f"--seeds names a seed twice: {','.join(map(str, options.seeds))}")
    # Checked before anything trains: an unknown metric would leave every cell and effect empty ("-").
    names = metric_names(options.k)
    if options.metric not in names:
        raise UsageError(
            f"--metric {options.metric!r} is not a metric of the study's evals (-k "
            f"{','.join(map(str, options.k))}): choose from {', '.join(names)} (pass@K for another K needs "
            "it in -k too, e.g. -k 1,4)"
        )
    return config.updated(train=train) if train != config.train else config


def _kept_options(options: StudyOptions) -> dict[str, Any]:
    raw = {name: getattr(options, name) for name in _KEPT}
    return json.loads(
        json.dumps(
            {**raw, "k": list(options.k), "settings": dict(options.settings), "seeds": list(options.seeds)},
            default=str,
        )
    )


def _check_options(study_dir: Path, kept: Mapping[str, Any]) -> None:
    path = study_dir / "study.json"
    if not path.is_file():
        return
    before = json.loads(path.read_text()).get("options", {})
    # A study made before an option was kept was made with its default.
    defaults = _kept_options(StudyOptions())
    changed = [
        f"{k}: {before.get(k, defaults[k])!r} → {kept[k]!r}"
        for k in _KEPT
        if before.get(k, defaults[k]) != kept.get(k)
    ]
    if changed:
        raise UsageError(
            f"{study_dir} holds a study made with other options, so its arms would not compare with new "
            "ones:\n  " + "\n  ".join(changed) + "\nrun it with the same options, or pick another --out"
        )


def _eval_summary(run_dir: Path) -> dict[str, Any] | None:
    path = Workspace(run_dir).eval_path / "summary.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _member_metrics(summary: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per member, the metrics with intervals (the `summarize` format) of an eval summary."""
    members = summary.get("members", summary)
    return {
        m: {k: v for k, v in values.items() if isinstance(v, Mapping) and "value" in v}
        for m, values in members.items()
        if isinstance(values, Mapping)
    }


def _effects(study_dir: Path, done: Sequence[Arm], options: StudyOptions) -> dict[str, Any]:
    """Per arm other than full: `compare.compare([full, arm])` per member and metric (with seeds:
    `compare.compare_groups`, the arm's runs against the full mixture's)."""
    if not any(a.name == FULL for a in done):
        return {}
    from ormix.app._compare import compare, compare_groups, load_eval

    def evals(arm: str) -> list[Any]:
        return [load_eval(Workspace(run).eval_path) for _, run in arm_runs(study_dir, arm, options.seeds)]

    base = evals(FULL)
    out: dict[str, Any] = {}
    for arm in done:
        if arm.name == FULL:
            continue
        if len(options.seeds) > 1:
            result = compare_groups([base, evals(arm.name)], ks=options.k, seed=options.seed)
        else:
            result = compare(base + evals(arm.name), ks=options.k, seed=options.seed)
        out[arm.name] = _per_member_differences(result)
    return out


def _per_member_differences(result: Mapping[str, Any]) -> dict[str, Any]:
    """From a two-eval (or two-group) comparison: member → metric → the difference (value, low, high, n;
    with groups also seeds and covers), the verdict, and the paired tasks."""
    (comparison,) = result["comparisons"]
    return {
        member: {
            name: {**m["difference"], "verdict": m["verdict"], "tasks": entry["tasks"]}
            for name, m in entry["metrics"].items()
        }
        for member, entry in comparison["members"].items()
    }


def _build_study(
    study_dir: Path,
    source: str,
    config: MixtureConfig,
    all_arms: Sequence[Arm],
    options: StudyOptions,
    start: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """study.json's content from whatever arms are done now.

    Raises:
        UsageError: done runs started from different models (unless ``allow_different_starts``).
    """
    entries, matrix, done, metrics = [], {}, [], []
    members: list[str] = list(config.members)
    confidence = 0.95
    starts: dict[str, Any] = {}
    for arm in all_arms:
        runs = arm_runs(study_dir, arm.name, options.seeds)
        finished = {seed: run for seed, run in runs if arm_done(run, config.config_hash())}
        entries.append(_arm_entry(study_dir, arm, runs, finished, options))
        for seed, run in finished.items():
            starts[_run_name(arm.name, seed)] = Workspace(run).start()
        if not entries[-1]["done"]:
            continue
        done.append(arm)
        summaries = [_eval_summary(run) or {} for _, run in runs]
        confidence = float(summaries[0].get("confidence", confidence))
        matrix[arm.name] = _arm_metrics(runs, summaries[0], options)
        for per_member in matrix[arm.name].values():
            metrics += [k for k in per_member if k not in metrics]
        members += [m for m in matrix[arm.name] if m not in members]
    if start is not None and starts:
        starts["the study's start"] = dict(start)  # the runs made elsewhere must start from it too
    different = different_starts(starts)
    if different and not options.allow_different_starts:
        raise UsageError(_different_starts_message(study_dir, starts, different))
    recorded = start or next((s for s in starts.values() if s), None)
    return {
        "mixture": config.name,
        "source": source,
        "options": _kept_options(options),
        "start": dict(recorded) if recorded else None,
        "different_starts": different,
        "seeds": list(options.seeds),
        "budget": options.budget,
        "metric": options.metric,
        "metrics": metrics,
        "k": list(options.k),
        "confidence": confidence,
        "members": members,
        "arms": entries,
        "matrix": matrix,
        "effects": _effects(study_dir, done, options),
    }


def _arm_entry(
    study_dir: Path,
    arm: Arm,
    runs: Sequence[tuple[int | None, Path]],
    finished: Mapping[int | None, Path],
    options: StudyOptions,
) -> dict[str, Any]:
    """An arm's entry in study.json: the arm, where its runs and mixture file are, and whether it is done."""
    entry = {
        **arm.as_dict(),
        "run_dir": str(arm_dir(study_dir, arm.name)),
        "file": str(study_dir / "mixtures" / f"{arm.name}.yaml"),
    }
    if options.seeds:
        entry["runs"] = [{"seed": seed, "run_dir": str(run), "done": seed in finished} for seed, run in runs]
    entry["done"] = len(finished) == len(runs)
    return entry


def _arm_metrics(
    runs: Sequence[tuple[int | None, Path]], summary: Mapping[str, Any], options: StudyOptions
) -> dict[str, dict[str, Any]]:
    """A done arm's metrics per member: its eval's summary, or pooled over its runs (one a seed)."""
    if len(runs) > 1:
        from ormix.app._compare import group_metrics, load_eval

        return group_metrics(
            [load_eval(Workspace(run).eval_path) for _, run in runs], ks=options.k, seed=options.seed
        )
    return _member_metrics(summary)


def _different_starts_message(
    study_dir: Path, starts: Mapping[str, Any], different: Mapping[str, list[str]]
) -> str:
    """Why runs that started from different models are refused, naming the runs of each start."""
    groups = "\n  ".join(
        f"sha256 {digest[:12]}: {', '.join(runs)}"
        + (f" (from {(starts[runs[0]] or {}).get('path')})" if starts[runs[0]] else " (no start recorded)")
        for digest, runs in different.items()
    )
    return (
        f"the runs of {study_dir} started from different models, so their differences would mix what "
        f"each arm trained on with how its start differed:\n  {groups}\nrun the study again in a fresh "
        "--out (every arm then starts from one start), or pass --allow-different-starts to compare "
        "them anyway (study.md then says so)"
    )


def _write_study(study_dir: Path, study: Mapping[str, Any], console: Any) -> list[Path]:
    _write_json(study_dir / "study.json", study)
    (study_dir / "study.md").write_text(study_markdown(study))
    written = [study_dir / "study.json", study_dir / "study.md"]
    if any(a.get("done") for a in study["arms"]):
        try:
            from ormix.app._plots import study_heatmap

            fig = study_heatmap(study)
        except ImportError:
            console.print(
                "[yellow]no heatmap:[/yellow] matplotlib is not installed (pip install 'ormix[plot]')"
            )
        else:
            import matplotlib.pyplot as plt

            fig.savefig(study_dir / "heatmap.png", dpi=110)
            plt.close(fig)
            written.append(study_dir / "heatmap.png")
    return written


def command_line(source: str, study_dir: Path, options: StudyOptions) -> str:
    """The `ormix ablate --run` command that runs (or continues) this study: its arms ``options.arms``
    (``()``: every arm, the whole study).

    Example:
        >>> options = StudyOptions(max_steps=2, k=(1, 4), settings={"save_steps": 1}, seeds=(0, 1))
        >>> command_line("mix.yaml", Path("studies/m"), options).split(" --")
        ... # doctest: +NORMALIZE_WHITESPACE
        ['ormix ablate mix.yaml', 'run', 'out studies/m', 'leave-one-out -k 1,4', 'max-steps 2',
         'seeds 0,1', 'set save_steps=1']
    """
    parts = ["ormix ablate", shlex.quote(source), "--run --out", shlex.quote(str(study_dir))]
    if options.leave_one_out:
        parts.append("--leave-one-out")
    parts += [f"--only {shlex.quote(name)}" for name in options.only]
    if options.budget != "same-total":
        parts.append(f"--budget {options.budget}")
    parts.append(f"-k {','.join(map(str, options.k))}")
    for flag, value in (
        ("--max-steps", options.max_steps),
        ("--model", options.model),
        ("--warmup-sft", options.warmup_sft),
        ("--seeds", ",".join(map(str, options.seeds)) or None),
    ):
        if value is not None:
            parts.append(f"{flag} {shlex.quote(str(value))}")
    if options.metric != "pass@1":
        parts.append(f"--metric {shlex.quote(options.metric)}")
    if options.allow_different_starts:
        parts.append("--allow-different-starts")
    for key, value in options.settings.items():
        text = json.dumps(value) if isinstance(value, (bool, type(None), list, dict)) else str(value)
        parts.append(f"--set {shlex.quote(f'{key}={text}')}")
    parts += [f"--arm {shlex.quote(arm)}" for arm in options.arms]
    return " ".join(parts)


def _eval_arm(full_file: Path, full_hash: str, run: Path, options: StudyOptions, console: Any) -> None:
    from ormix.app._eval import EvalOptions, run_eval

    other = (Workspace(run).eval_path / "manifest.json").is_file() and _eval_hash(run) != full_hash
    if other:
        # E.g. the final eval of training, on the arm's own eval sets: not the study's tasks.
        console.print(f"  {run / 'eval'} holds an eval of another mixture: replaced by the full mixture's")
    run_eval(
        full_file,
        EvalOptions(
            model=str(run),
            out_dir=Workspace(run).eval_path,
            k=options.k,
            samples=options.samples,
            seed=options.seed,
            overwrite=other,
        ),
        console=console,
    )


def _study_start(
    study_dir: Path, full_file: Path, config: MixtureConfig, options: StudyOptions, console: Any
) -> tuple[dict[str, Any], str | None]:
    """The study's one start (made now if it warm-starts and ``start/`` holds none): (its record, the
    ``--model`` every run trains from)."""
    from ormix.app._train.prepare import make_start

    target = study_dir / "start"
    steps = (
        options.warmup_sft if options.warmup_sft is not None else getattr(config.warm_start, "sft_steps", 0)
    )
    if steps and not (target / "ormix-warm.json").is_file():
        console.rule("the study's start: one warm start on the full mixture's train members")
    record = make_start(full_file, target, model=options.model, steps=options.warmup_sft, console=console)
    warm = record.get("warm_start") is not None
    digest = record.get("sha256")
    console.print(
        f"every arm starts from {record['path']}"
        + (f" (sha256 {digest[:12]})" if digest else "")
        + ("" if warm else ": no warm start"),
        highlight=False,
    )
    return record, (str(target) if warm else options.model)


def run_study(
    path: str | Path, options: StudyOptions | None = None, *, console: Any | None = None, **option_fields: Any
) -> StudyResult:
    """Run (or continue, or merge) the study of the mixture file at ``path``; see the module docstring.

    Raises:
        UsageError (MixtureConfigError, TrainConfigError, a study or warm start that cannot run...): bad
        options, a study directory made with other options, an arm named that the study does not have,
        runs that started from different models.
    """
    from rich.console import Console

    opts = replace(options or StudyOptions(), **option_fields)
    console = console or Console()
    source = str(path)
    config = _study_config(path, opts)
    all_arms = arms(config, leave_one_out=opts.leave_one_out, only=opts.only, budget=opts.budget)
    chosen = select_arms(all_arms, opts.arms)
    study_dir = Path(opts.out_dir) if opts.out_dir is not None else Path("studies") / config.name
    _check_options(study_dir, _kept_options(opts))
    _write_arm_files(study_dir, all_arms, source)
    full_hash = config.config_hash()  # what the eval manifests of this study's arms say
    study_json = study_dir / "study.json"
    start = json.loads(study_json.read_text()).get("start") if study_json.is_file() else None
    if not study_json.is_file():
        # Written now, so that a study interrupted in its first arm still refuses other options.
        _write_json(study_json, _build_study(study_dir, source, config, all_arms, opts))
    # What continues it: the same arms as asked for now, and what finishes the whole study.
    again = command_line(source, study_dir, opts)
    whole = command_line(source, study_dir, replace(opts, arms=()))
    result = StudyResult(out_dir=study_dir, study={})
    seeds = f", seeds {','.join(map(str, opts.seeds))}" if opts.seeds else ""
    console.print(
        f"[bold]ormix ablate --run[/bold] {config.name}: {len(all_arms)} arm(s) "
        f"({', '.join(a.name for a in all_arms)}), budget {opts.budget}{seeds}; study directory {study_dir}"
    )
    runner = _ArmRunner(study_dir, config, opts, console, again, start)
    try:
        runner.run(chosen, result)
    except _Stopped:
        pass
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted[/yellow]: continue the study with:\n  {again}", highlight=False)
        result.exit_status = EXIT_INTERRUPTED
    result.study = _build_study(study_dir, source, config, all_arms, opts, runner.start)
    result.study["command"] = whole
    written = _write_study(study_dir, result.study, console)
    _print_study(result.study, console)
    console.print(f"study: {', '.join(str(p) for p in written)}")
    if result.exit_status == EXIT_OK and not all(
        arm_done(run, full_hash) for a in chosen for _, run in arm_runs(study_dir, a.name, opts.seeds)
    ):
        result.exit_status = EXIT_FAILED
    rest = [a["name"] for a in result.study["arms"] if not a.get("done")]
    if result.exit_status == EXIT_OK and rest:
        console.print(f"arms not done yet: {', '.join(rest)}; run them with:\n  {whole}", highlight=False)
    return result


def _write_arm_files(study_dir: Path, all_arms: Sequence[Arm], source: str) -> None:
    """Every arm's mixture file, written (again) now: the same content on every machine but for base_dir."""
    mixtures = study_dir / "mixtures"
    mixtures.mkdir(parents=True, exist_ok=True)
    for arm in all_arms:
        text, _ = arm_file_text(arm, source)
        (mixtures / f"{arm.name}.yaml").write_text(text)


class _ArmRunner:
    """Trains and evaluates the runs of a study's arms that are not done, from the study's one start (made
    before the first run that needs it; `start` then holds its record)."""

    def __init__(
        self,
        study_dir: Path,
        config: MixtureConfig,
        options: StudyOptions,
        console: Any,
        again: str,
        start: Mapping[str, Any] | None,
    ) -> None:
        self.study_dir, self.config, self.options, self.console = study_dir, config, options, console
        self.again = again  # the command that continues the study
        self.start = start
        self.model: str | None = None
        self.made = False
        self.full_file = study_dir / "mixtures" / f"{FULL}.yaml"
        self.full_hash = config.config_hash()

    def run(self, chosen: Sequence[Arm], result: StudyResult) -> None:
        """Each chosen arm's runs in turn (skipping those done); raises `_Stopped` when a run stops."""
        console = self.console
        for index, arm in enumerate(chosen, 1):
            for seed, run in arm_runs(self.study_dir, arm.name, self.options.seeds):
                name = _run_name(arm.name, seed)
                label = f"arm {name} ({index}/{len(chosen)})"
                if arm_done(run, self.full_hash):
                    console.print(f"{label}: done already (model and eval in {run}); skipped")
                    result.skipped.append(name)
                    continue
                if not self.made:  # the start, once, before the first run that needs it
                    self.start, self.model = _study_start(
                        self.study_dir, self.full_file, self.config, self.options, console
                    )
                    self.made = True
                console.rule(f"{label}: trains on {', '.join(arm.config.train_members)}; {arm.budget}")
                self._train(name, arm, seed, run, result)
                console.print(f"{label}: evaluating on every member's eval tasks (the full mixture's)")
                _eval_arm(self.full_file, self.full_hash, run, self.options, console)
                result.ran.append(name)

    def _train(self, name: str, arm: Arm, seed: int | None, run: Path, result: StudyResult) -> None:
        """Train one run unless its model is there, from the study's start (resumed from its latest
        checkpoint, else started over); raises `_Stopped` when it stops without one."""
        from ormix.app._train import RunOptions, train

        console, directory = self.console, Workspace(run)
        if directory.model_path.is_dir():
            return
        if directory.eval_path.exists():
            # An eval of a model this training replaces: it would resume as if it were the new model's.
            shutil.rmtree(directory.eval_path)
            console.print(f"  {name}: its eval was of an earlier model; removed")
        resume, overwrite = None, False
        if directory.holds_a_run():
            if directory.latest_checkpoint() is not None:
                resume = "latest"
                console.print(f"  resuming {name} from {directory.latest_checkpoint()}")
            else:
                overwrite = True
                console.print(f"  {name} stopped before its first checkpoint: starting it over")
        options = RunOptions(
            model=self.model,
            output_dir=run,
            warmup_sft=0,  # the study's one start is the warm start: no run makes its own
            seed=seed,
            resume=resume,
            overwrite=overwrite,
            report=self.options.report,
            resume_command=self.again,
            evaluate=False,  # every arm is evaluated on the full mixture's tasks below
        )
        status = train(self.study_dir / "mixtures" / f"{arm.name}.yaml", options, console=console).exit_status
        if status in (EXIT_INTERRUPTED, EXIT_TERMINATED) or not directory.model_path.is_dir():
            self.console.print(f"[yellow]{name} stopped[/yellow]; continue the study with:\n  {self.again}")
            result.exit_status = status or EXIT_FAILED
            raise _Stopped


class _Stopped(Exception):
    """A run stopped (Ctrl-C, SIGTERM, a failure): the study writes what is done and stops."""


def _print_study(study: Mapping[str, Any], console: Any) -> None:
    metric = study["metric"]
    title = f"{study['mixture']}: {metric} per arm and member ({study['budget']})"
    print_table(console, title, matrix_table(study, metric))
    if study.get("effects"):
        title = f"effect of what each arm dropped ({metric}: arm − full)"
        print_table(console, title, effects_table(study, metric))


def study_command(
    path: str | Path,
    options: StudyOptions | None = None,
    *,
    console: Any,
    overrides: Sequence[str] = (),
    debug: bool = False,
) -> int:
    """`ormix ablate FILE --run`: the exit status (0 every arm asked for done, 1 failed, 2 bad input, 130
    interrupted, 143 terminated). ``overrides`` are the ``--set KEY=VALUE`` items.

    Example:
        Not run as a doctest: each arm is a GRPO training run.

        >>> from rich.console import Console
        >>> options = StudyOptions(max_steps=2)
        >>> study_command("mixtures/local-demo.yaml", options, console=Console())   # doctest: +SKIP
        0
    """
    from ormix.trl._args import parse_overrides

    def body() -> int:
        opts = options or StudyOptions()
        opts = replace(opts, settings={**opts.settings, **parse_overrides(overrides)})
        return run_study(path, opts, console=console).exit_status

    # A Ctrl-C outside a run (a run's own is handled by run_study) ends the command here.
    return run_command(
        body,
        console=console,
        what="study",
        interrupted=": run the same command again to continue the study",
        debug=debug,
    )


def derive_command(
    path: Path,
    out: Path,
    *,
    leave_one_out: bool,
    only: Sequence[str],
    budget: Budget,
    console: Any,
    errors: Any,
) -> int:
    """`ormix ablate` without ``--run``: write the arms' mixture files into ``out`` and print each one's hash
    (``console``), or what is wrong (``errors``); the exit status (2 for a mixture or an ablation that cannot
    work)."""
    from ormix.config import MixtureConfigError, load_mixture_config
    from ormix.mixture._ablation import write_ablations

    try:
        from ormix.mixture._mixture import trainer_settings_check

        config = load_mixture_config(path, train_check=trainer_settings_check())
        written = write_ablations(
            config,
            out,
            source=str(path),
            leave_one_out=leave_one_out,
            only=only,
            budget=budget,
        )
    except (MixtureConfigError, ValueError) as e:
        errors.print(f"[red]error:[/red] {e}")
        return EXIT_BAD_INPUT
    for file, digest in written:
        console.print(f"{file}  {digest[:16]}")
    return EXIT_OK
