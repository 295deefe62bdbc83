"""What a mixture will do, before a GPU hour is spent: members, tasks, tools, name maps, per-step composition.

Used by `ormix inspect FILE`. The plan's composition (which member each step's prompts come from) needs no
server: it follows from the config and the task counts, which come from the servers when they answer, else
from `num_tasks` / `indices`. Task counts and tool surfaces need the servers; a member whose server cannot be
asked (a catalog target without an API key, a server that is down) is shown with what is known and the reason
for what is not. Nothing here opens a training session.

Example:
    >>> from ormix.mixture import load_mixture
    >>> mix = load_mixture("mixtures/seta-endless-curriculum.yaml", defer_missing_secrets=True)
    >>> info = inspect_mixture(mix, contact_servers=False)
    >>> [m.tasks for m in info.members], info.composition[0][0]
    ([512, None], 'step 1')
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass, field
from typing import Any

from ormix._errors import EnvironmentCodeError, OrmixError, ServerStartError
from ormix.app._render import print_table
from ormix.config import AdaptiveConfig, PlatformPriorConfig
from ormix.mixture._mixture import MixtureSpec
from ormix.mixture._planner import LAG, Planner, fixed_steps, starvation_probability
from ormix.mixture._prior import platform_evidence, platform_prior_members, prior_lines
from ormix.ors._errors import ORSError
from ormix.tools import NO_DEFAULT, ToolBinding


@dataclass
class MemberSummary:
    """One member as `ormix inspect` shows it.

    ``tasks`` is the member's task count (``None`` when unknown); ``tools`` the method names the model sees
    (namespaced ``<member>__<tool>`` under namespaced routing); ``unknown`` says why something is missing.
    """

    name: str
    target: str
    role: str
    tasks: int | None
    tools: list[str] = field(default_factory=list)
    #: One line per tool, as the model's tool list describes it: ``name(param: type, opt: type = default)``
    #: followed by the tool's first description line.
    signatures: list[str] = field(default_factory=list)
    renamed: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    unknown: str | None = None
    #: The member's eval set (`ormix.mixture.EvalSet`: split, tasks, overlap with training), the one `ormix
    #: eval` and `ormix train` use (without an ``eval:`` set: its test split, else its training tasks), when
    #: its server answered; otherwise ``eval_unknown`` describes it in words, and ``eval_error`` says what is
    #: wrong with it (a split or task that does not exist) when that is why.
    eval_set: Any = None
    eval_unknown: str | None = None
    eval_error: str | None = None


@dataclass
class Inspection:
    """Everything `ormix inspect` prints, as data."""

    name: str
    routing: str
    strategy: str
    seed: int
    prompts_per_step: int | None
    rows: int | None
    members: list[MemberSummary]
    probabilities: dict[str, float]
    composition: list[tuple[str, dict[str, int]]]
    starvation: dict[str, dict[str, float]]
    notes: list[str] = field(default_factory=list)


def _reachable(mix: MixtureSpec, member: str) -> str | None:
    """Why a member's server is not asked (``None``: ask it)."""
    config = mix.config.members[member]
    if config.parsed_target.kind == "catalog" and not config.has_api_key():
        variable = config.resolved_api_key_env or "OPENREWARD_API_KEY"
        return (
            f"no API key for catalog target {config.target!r}: export {variable}=... to see tasks and tools"
        )
    return None


def eval_description(config: Any) -> str:
    """A member's eval set as its file describes it (what `ormix inspect` shows when no server is asked).

    Example:
        >>> from ormix.config import MemberConfig
        >>> eval_description(MemberConfig(target="local:seta", num_tasks=4, eval={"num_tasks": 2}))
        'eval: {num_tasks: 2} (held out of split train when it has enough tasks)'
        >>> dropped = MemberConfig(target="local:seta", eval={"split": "test", "fallback": "own_tasks"})
        >>> eval_description(dropped)
        'eval: split test, else its own tasks'
    """
    e = config.eval
    if e is None:
        return "its own tasks" if config.role == "eval" else "its training tasks (role: both)"
    split = e.split or config.split
    if e.indices is not None:
        return f"eval: indices {e.indices} of split {split}"
    if e.num_tasks is not None and split == config.split:
        return f"eval: {{num_tasks: {e.num_tasks}}} (held out of split {split} when it has enough tasks)"
    if e.num_tasks is not None:
        return f"eval: the first {e.num_tasks} tasks of split {split}"
    if split == config.split:
        return "its training tasks"
    return f"eval: split {split}" + (", else its own tasks" if e.fallback == "own_tasks" else "")


def _eval_summary(mix: MixtureSpec, member: str, summary: MemberSummary, contact: bool) -> MemberSummary:
    """``summary`` with the member's eval set, the one `ormix eval` and `ormix train` use: its ``eval:`` set,
    else (no ``eval:``) its environment's test split, else its training tasks (`default_eval_set`)."""
    from ormix.evaluation._tasks import DEFAULT_EVAL_SET, default_eval_set

    config = mix.config.members[member]
    summary.eval_unknown = eval_description(config) if config.evaluates else DEFAULT_EVAL_SET
    if summary.unknown is not None or not contact:
        return summary
    try:
        summary.eval_set = default_eval_set(mix, member)
    except (ORSError, OrmixError, OSError) as e:
        summary.eval_error = str(e)
    else:
        summary.eval_unknown = None
    return summary


def _member_summary(mix: MixtureSpec, member: str, contact: bool) -> MemberSummary:
    config = mix.config.members[member]
    known = config.num_tasks if config.indices is None else len(config.indices)
    if config.where:
        known = None  # a filter's matches are known only to the server
    summary = MemberSummary(member, config.target, config.role, known)
    why = _reachable(mix, member) if contact else "servers not contacted"
    if why is not None:
        summary.unknown = why
        return summary
    spec = mix.spec(member)
    try:
        summary.tasks = len(spec.task_indices)
        report = spec.binding
    except (EnvironmentCodeError, ServerStartError):
        raise  # the user's own environment fails: the command says so, it does not describe a mixture
    except (ORSError, OrmixError, OSError) as e:
        summary.unknown = f"the server did not answer ({type(e).__name__}: {e})"
        return summary
    prefix = f"{member}__" if mix.routing == "namespaced" else ""
    summary.tools = [prefix + b.method_name for b in report.bindings]
    summary.signatures = [tool_signature(b, prefix) for b in report.bindings]
    summary.renamed = {r.wire_name: prefix + r.method_name for r in report.renamed}
    summary.notes = [*report.notes, *(f"skipped {s.name!r}: {s.reason}" for s in report.skipped)]
    return summary


def _type_text(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return " | ".join(_type_text(a) for a in args)
    if origin is typing.Literal:
        return f"Literal[{', '.join(map(repr, args))}]"
    if origin is not None and args:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(_type_text(a) for a in args)}]"
    if annotation is type(None):
        return "None"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def tool_signature(binding: ToolBinding, prefix: str = "") -> str:
    """A bound tool as one line: the name the model calls, its parameters with types and defaults (required
    ones first, as the method takes them), and the first line of its description.

    Example:
        >>> from ormix.tools import plan_tool
        >>> b = plan_tool({"name": "ls", "description": "List a directory.\\nMore.", "input_schema": {
        ...     "properties": {"path": {"type": "string"}, "all": {"type": "boolean", "default": False}},
        ...     "required": ["path"]}})
        >>> tool_signature(b, "seta__")
        'seta__ls(path: str, all: bool = False) — List a directory.'
    """
    params = []
    for p in binding.params:
        text = f"{p.py_name}: {_type_text(p.annotation)}"
        if not p.required:
            text += f" = {p.default!r}" if p.default is not NO_DEFAULT else " (optional)"
        params.append(text)
    first = binding.description.strip().splitlines()[0] if binding.description.strip() else ""
    return f"{prefix}{binding.method_name}({', '.join(params)})" + (f" — {first}" if first else "")


def _composition(planner: Planner, mix: MixtureSpec, first_steps: int) -> list[tuple[str, dict[str, int]]]:
    """The members of the first steps' rows and of each later phase's first step, from the planner training
    builds (an adaptive plan: its steps decided before any statistics count)."""
    if planner.k is None:
        return []
    last = -(-planner.num_rows // planner.k)
    labels = {s: f"step {s}" for s in range(1, min(first_steps, last) + 1)}
    if planner.adaptive:
        labels = {s: label for s, label in labels.items() if s <= fixed_steps(planner.settings, planner.lag)}
    start = 1
    for index, phase in enumerate(mix.config.schedule or []):
        if first_steps < start <= last:
            labels[start] = f"phase {index + 1} (step {start})"
        if phase.until_step is None:
            break
        start = phase.until_step
    out = []
    for step in sorted(labels):
        if planner.adaptive and step > planner.lag:
            # Warm-up weights do not depend on statistics; the planner still wants each step observed
            # (task filters read them), so the look-ahead observes nothing.
            planner.observe(step - planner.lag, {})
        members = [m for m, _ in planner.rows(step)]
        out.append((labels[step], {m: members.count(m) for m in mix.config.train_members}))
    return out


def adaptive_explanation(mix: MixtureSpec) -> list[str]:
    """How an adaptive mixture's weights will move, in words (empty for other strategies).

    Example:
        >>> from ormix.config import MixtureConfig
        >>> from ormix.mixture import MixtureSpec
        >>> cfg = MixtureConfig(members={"a": {"target": "local:echo"}, "b": {"target": "local:echo"}},
        ...                     strategy="adaptive", prompts_per_step=2)
        >>> adaptive_explanation(MixtureSpec.from_config(cfg))[0][:44]
        'adaptive: steps 1-2 use the starting weights'
    """
    cfg = mix.config
    if cfg.strategy != "adaptive":
        return []
    a = cfg.adaptive or AdaptiveConfig()
    fixed = fixed_steps(a)
    signal = {
        "denoised": "the share of its recent GRPO groups whose rewards differ beyond what its own outcome "
        f"noise explains, averaged with its progress in reward ({a.uniform_mix:.0%} of a step stays uniform; "
        "a member rises above its uniform share only as its noise is measured)",
        "informative": "the share of its recent GRPO groups whose rewards differ "
        "(groups that teach something)",
        "progress": "its learning progress (informative share times reward gained per informative group)",
        "thompson": "a Thompson-sampling bandit on its learning progress",
    }[a.signal]
    start = "the file's weights" if cfg.weights else "uniform"
    lines = [
        f"adaptive: steps 1-{fixed} use the starting weights ({start}); from step {fixed + 1} on, "
        "each member's "
        f"weight follows {signal}, over the last {a.window} step(s) of statistics pooled over all processes",
        f"  the statistics of step t decide step t+{LAG}; every member keeps at least {a.floor:.0%} of a "
        "step; a "
        f"weight moves at most {a.max_change:.0%} per step; the composition table shows steps 1-{fixed} only",
    ]
    if a.headroom > 0:
        lines.append(
            "  weighed by each member's reward left to gain (headroom, on the range of rewards seen"
            + (f", to the power {a.headroom:g}" if a.headroom != 1 else "")
            + "): of two members that teach equally often, the one further from solved gets more"
        )
    # Members that share a rule (every one, with the default) get one line.
    by_rule: dict[str, list[str]] = {}
    unfiltered: list[str] = []
    for name in cfg.train_members:
        rule = cfg.task_filter(name)
        if rule is None:
            unfiltered.append(name)
            continue
        prior = _prior_rule(rule)
        said = (
            f"a task whose last {rule.window} group(s), and at least {rule.min_rollouts} rollout(s), were "
            f"all solved (reward >= {rule.solved:g}) or all failed (<= {rule.failed:g}) is set aside for "
            f"{rule.cooldown_steps} steps{prior}"
        )
        by_rule.setdefault(said, []).append(name)
    for said, names in by_rule.items():
        who = "every member" if len(names) == len(cfg.train_members) > 1 else ", ".join(names)
        lines.append(f"  {who}: {said}")
    if unfiltered:
        lines.append(f"  no task filter: {', '.join(unfiltered)}")
    lines.append(
        "  training logs ormix/<member>/weight and tasks_set_aside each step; `ormix report` plots them"
    )
    return lines


def _prior_rule(rule: Any) -> str:
    """The filter's prior, as a clause of its line (none: empty)."""
    prior = rule.prior
    if prior is None:
        return ""
    if not isinstance(prior, PlatformPriorConfig):
        return f"; tasks whose prior {prior.field} pass rate is >= 0.9 or <= 0.1 start set aside"
    only = [
        f"model {prior.model_name}" if prior.model_name else "",
        f">= {prior.min_model_params:,} parameters" if prior.min_model_params is not None else "",
        f"<= {prior.max_model_params:,} parameters" if prior.max_model_params is not None else "",
        f"training stage {prior.training_stage}" if prior.training_stage else "",
    ]
    which = ", ".join(o for o in only if o)
    return (
        f"; tasks whose rollouts logged on the platform{f' ({which})' if which else ''} all solved or all "
        f"failed start set aside when there are at least {max(rule.min_rollouts, rule.window)} of them "
        "(fewer count toward the filter's first decision on the task; catalog members only)"
    )


def _platform_prior_notes(mix: MixtureSpec) -> list[str]:
    """Which tasks the platform prior sets aside, and why (asks the platform; members without a key are
    said to be unasked)."""
    names = platform_prior_members(mix.config)
    unasked = [n for n in names if _reachable(mix, n) is not None]
    lines = [f"  {n}: the platform prior was not asked: {_reachable(mix, n)}" for n in unasked]
    specs = {n: mix.spec(n) for n in names if n not in unasked}
    if not specs:
        return lines
    try:
        evidence = platform_evidence(mix.config, specs)
        tasks = {n: spec.task_indices for n, spec in specs.items()}
    except (EnvironmentCodeError, ServerStartError):
        raise
    except (ORSError, OrmixError, OSError) as e:
        return [*lines, f"  the platform prior could not be asked ({type(e).__name__}: {e})"]
    return [*lines, *prior_lines(mix.config, evidence, tasks)]


def inspect_mixture(
    mix: MixtureSpec, *, first_steps: int = 4, batch: int | None = None, contact_servers: bool = True
) -> Inspection:
    """Members, task counts, tool surfaces (as the model sees them), composition of the first steps and per
    phase, and the chance that a member gets no prompt in a step (random draws vs ormix's exact quotas).

    Steps are numbered from 1, as training counts them. With ``contact_servers=False`` (or for members whose
    server cannot be asked) task counts come from the config and tools are not shown.
    """
    members = [
        _eval_summary(mix, m, _member_summary(mix, m, contact_servers), contact_servers)
        for m in mix.config.members
    ]
    notes: list[str] = []
    counts = {m.name: m.tasks for m in members if m.role != "eval"}
    missing = sorted(n for n, c in counts.items() if c is None)
    composition: list[tuple[str, dict[str, int]]] = []
    probabilities: dict[str, float] = {}
    rows: int | None = None
    needs_counts = mix.config.strategy == "temperature" or not (
        mix.config.num_samples or mix.config.num_steps
    )
    if missing and needs_counts:
        notes.append(
            f"composition not shown: the task count of {', '.join(missing)} is unknown "
            "(set num_tasks, or make "
            "the server reachable)"
        )
    else:
        # The planner training builds, on task positions instead of the server's indices: the composition
        # depends only on the task counts.
        known = {n: max(1, c or 1) for n, c in counts.items()}
        planner = Planner(mix.config, {n: list(range(c)) for n, c in known.items()})
        probabilities = planner.weights(1) if planner.k else dict(planner.base)
        composition = _composition(planner, mix, first_steps)
        rows = planner.num_rows
        last = -(-rows // planner.k) if planner.k else None
        if last is not None and first_steps > last:
            notes.append(
                f"the plan ends at step {last} ({rows} rows, {planner.k} prompts per step): "
                f"{first_steps} steps asked for, {last} shown"
            )
    starvation: dict[str, dict[str, float]] = {}
    k = batch or mix.config.prompts_per_step
    if k and probabilities:
        starvation = {
            "iid": starvation_probability(probabilities, k, mode="iid"),
            "quotas": starvation_probability(probabilities, k, mode="quotas"),
        }
    notes += adaptive_explanation(mix)
    if contact_servers:
        notes += _platform_prior_notes(mix)
    return Inspection(
        name=mix.name,
        routing=mix.routing,
        strategy=mix.strategy,
        seed=mix.seed,
        prompts_per_step=mix.prompts_per_step,
        rows=rows,
        members=members,
        probabilities=probabilities,
        composition=composition,
        starvation=starvation,
        notes=notes,
    )


def print_inspection(info: Inspection, console: Any, *, tools: bool = False) -> None:
    """`ormix inspect`'s tables: members, tool surfaces (``tools``: each tool's parameters and description),
    eval sets, the first steps' composition and the starvation risk."""
    count = "?" if info.rows is None else str(info.rows)
    console.print(
        f"[bold]{info.name}[/bold]: {len(info.members)} member(s), routing {info.routing}, "
        f"strategy {info.strategy}, seed {info.seed}, {count} rows, prompts_per_step {info.prompts_per_step}"
    )
    head = ("member", "target", "role", "tasks", "p(step 1)", "tools (as the model sees them)")
    members = [
        (
            m.name,
            m.target,
            m.role,
            "?" if m.tasks is None else str(m.tasks),
            f"{info.probabilities.get(m.name, 0):.3f}" if info.probabilities else "?",
            ", ".join(m.tools) if m.tools else "?",
        )
        for m in info.members
    ]
    print_table(console, None, [head, *members])
    if tools:
        for m in info.members:
            if m.signatures:
                console.print(f"[bold]{m.name}[/bold] tools:")
                for line in m.signatures:
                    console.print(f"  {line}", highlight=False, markup=False)
    elif any(m.signatures for m in info.members):
        console.print("  (ormix inspect --tools: each tool's parameters and description)")
    for m in info.members:
        if m.unknown:
            console.print(f"  {m.name}: not shown: {m.unknown}")
        for wire, py in m.renamed.items():
            console.print(f"  {m.name}: tool {wire!r} is exposed as {py}")
        for note in m.notes:
            console.print(f"  {m.name}: {note}")
    for note in info.notes:
        console.print(f"  {note}")
    evaluating = [m for m in info.members if m.eval_set is not None or m.eval_unknown is not None]
    if evaluating:
        evals = [("member", "split", "tasks", "chosen as", "also trained on")]
        for m in evaluating:
            e = m.eval_set
            if e is None:
                evals.append((m.name, "?", "?", str(m.eval_unknown), "?"))
                continue
            indices = ", ".join(map(str, e.task_indices[:8])) + (", ..." if len(e.task_indices) > 8 else "")
            evals.append((m.name, e.split, f"{len(e.task_indices)} ({indices})", e.source, str(e.overlap)))
        print_table(console, "eval sets", evals)
        for m in evaluating:
            for note in m.eval_set.notes if m.eval_set is not None else ():
                console.print(f"  {note}", highlight=False)
            if m.eval_error:
                console.print(f"  [red]eval set:[/red] {m.eval_error}", highlight=False)
    train_names = [m.name for m in info.members if m.role != "eval"]
    if info.composition:
        steps = [(label, *[str(counts.get(n, 0)) for n in train_names]) for label, counts in info.composition]
        print_table(console, "composition", [("step", *train_names), *steps])
    if info.starvation and info.strategy != "adaptive":  # adaptive quotas move: its floor is explained above
        risk = [("member", "P(no prompt in a step), random draws", "with ormix quotas")]
        risk += [
            (name, f"{p:.3f}", f"{info.starvation['quotas'][name]:.3f}")
            for name, p in info.starvation["iid"].items()
        ]
        print_table(console, "starvation", risk)
