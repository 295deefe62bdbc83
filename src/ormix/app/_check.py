"""`ormix check FILE`: is every environment of a mixture usable, before a training run finds out?

For every member: connect and count the split's tasks, list the tools, open one session (prompt
included, so a failing `setup()` shows), list the session's tools, call each tool once with arguments
generated from its JSON schema (`example_arguments`, read with the tool binder's schema walker, so `$ref`,
`allOf`, unions and nullables mean what they mean to the model), and close. Tools that look like they end the
episode (`submit`, `answer`, `finish`, ...) are called last; when a call finishes the episode or the
session disappears, the next tool gets a fresh session, so every tool is tried on a live one.

Every member with an eval set also has it checked (`MixtureSpec.eval_set`): the eval split exists on the
environment, its eval indices exist in it, and how many of its eval tasks it also trains on; an eval split or
index that does not exist is bad input (exit 2), named with the member.

A member is *unusable* when it cannot connect, has no task, cannot list tools or open a session, or when
every tool call fails for an infrastructure reason; a tool that raises or rejects the generated arguments
is reported but does not make the member unusable. One unusable member never stops the others from
being checked. A failure names the environment's method it came from: ``list_tasks`` (it raised, or its tasks
are not dicts), the constructor (``/create``), ``get_prompt`` (``/prompt``), or the tool.

A tool that finishes the episode when no call of that episode gave a reward is an error too: every rollout
ending that way is unscored, so GRPO learns nothing from it (the exit statuses: docs/cli.md).

Example:
    >>> example_arguments({"type": "object", "required": ["path", "mode"],
    ...                    "properties": {"path": {"type": "string"}, "mode": {"enum": ["r", "w"]},
    ...                                   "depth": {"type": "integer", "default": 2}}})
    {'path': 'test', 'mode': 'r'}
"""

from __future__ import annotations

import contextlib
import copy
import math
import re
import signal
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ormix._targets import parse_target
from ormix.app._command import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_TERMINATED
from ormix.app._render import print_table
from ormix.tools._schema import Node, SchemaWalker
from ormix.tools._specs import normalize_spec

# ──────────────────────────────────────────────────────────────────────────────────────────────────────────
# Arguments to call a tool with

# Nesting levels an example value is built to; deeper parts (and recursive ones) are None
_EXAMPLE_DEPTH = 12

#: The deadline of a tool call of a member without ``call_timeout_s``, and the least time to open a session.
DEFAULT_CALL_TIMEOUT_S = 30.0

_FORMATS = {
    "date-time": "2024-01-01T00:00:00Z",
    "date": "2024-01-01",
    "time": "00:00:00",
    "email": "test@example.com",
    "uri": "https://example.com",
    "url": "https://example.com",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "ipv4": "127.0.0.1",
    "hostname": "localhost",
}


def example_arguments(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """Arguments for a tool whose input is ``schema``: every required field, with a type-appropriate value.

    Optional fields are left out (the tool's defaults apply). Values: the field's ``default``, else ``const``,
    the first ``enum`` value, the first of ``examples``, else a small value of its type within its bounds.

    Example:
        >>> example_arguments({"type": "object", "properties": {"n": {"type": "integer", "minimum": 5}},
        ...                    "required": ["n"]})
        {'n': 5}
        >>> example_arguments(None)
        {}
    """
    if not isinstance(schema, Mapping):
        return {}
    value = example_value(schema)
    return value if isinstance(value, dict) else {}


def example_value(schema: Any, *, root: Mapping[str, Any] | None = None) -> Any:
    """One value that satisfies ``schema`` (JSON Schema as pydantic and the ORS SDK write it).

    ``root`` is the schema ``$ref`` pointers resolve in (default: ``schema`` itself).

    Example:
        >>> example_value({"anyOf": [{"type": "null"}, {"type": "array", "items": {"type": "number"},
        ...                                             "minItems": 2}]})
        [1.0, 1.0]
        >>> example_value({"$ref": "#/$defs/N"}, root={"$defs": {"N": {"type": "integer", "maximum": 0}}})
        0
    """
    walker = SchemaWalker(schema if root is None else root, max_depth=_EXAMPLE_DEPTH)
    return _example(walker, walker.node(schema))


def _example(walker: SchemaWalker, node: Node) -> Any:
    schema = node.schema
    if node.kind in ("deep", "never", "cycle", "unknown"):
        return None
    if "default" in schema:
        return copy.deepcopy(schema["default"])
    if node.values is not None:
        return copy.deepcopy(node.values[0])
    if isinstance(schema.get("examples"), list) and schema["examples"]:
        return copy.deepcopy(schema["examples"][0])
    kind = node.kind
    if kind == "union":
        return _example(walker, node.members[0])
    if kind in ("string", "any"):
        return _string(schema)
    if kind in ("integer", "number"):
        return _number(schema, integer=kind == "integer")
    if kind == "boolean":
        return False
    if kind == "array":
        values = [_example(walker, p) for p in walker.prefix_items(node)]
        rest = walker.rest_items(node)
        missing = max(int(schema.get("minItems") or 0) - len(values), 0)
        return values + [_example(walker, rest) if rest is not None else "test" for _ in range(missing)]
    if kind == "object":
        fields = dict(walker.fields(node))
        return {
            name: _example(walker, fields[name]) if name in fields else "test"
            for name in walker.required(node)
        }
    return None  # null


def _string(schema: Mapping[str, Any]) -> str:
    value = _FORMATS.get(str(schema.get("format")), "test")
    lo = int(schema.get("minLength") or 0)
    hi = schema.get("maxLength")
    value = value.ljust(lo, "t")
    return value[:hi] if isinstance(hi, int) else value


def _number(schema: Mapping[str, Any], *, integer: bool) -> int | float:
    lo = schema.get("minimum")
    hi = schema.get("maximum")
    step = 1 if integer else 1e-3
    xlo, xhi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if isinstance(xlo, (int, float)) and not isinstance(xlo, bool):
        lo = xlo + step if lo is None else max(lo, xlo + step)
    if isinstance(xhi, (int, float)) and not isinstance(xhi, bool):
        hi = xhi - step if hi is None else min(hi, xhi - step)
    value: float = 1
    if lo is not None:
        value = max(value, lo)
    if hi is not None:
        value = min(value, hi)
    multiple = schema.get("multipleOf")
    if isinstance(multiple, (int, float)) and multiple > 0:
        value = -(-value // multiple) * multiple
    return int(math.ceil(value)) if integer else float(value)


# ──────────────────────────────────────────────────────────────────────────────────────────────────────────
# Which tools to call last


_FINAL_WORDS = frozenset(
    (
        "submit answer finish finalize final done complete solution grade terminate end stop exit quit die "
        "kill close"
    ).split()
)
_FINAL_PHRASES = (
    "end the episode",
    "ends the episode",
    "end this episode",
    "finishes the episode",
    "terminates the episode",
    "final answer",
)


def looks_final(name: str, description: str = "") -> bool:
    """Whether a tool probably ends the episode (or the session), so it should be called after the others.

    Example:
        >>> looks_final("submit_solution"), looks_final("SubmitAnswer"), looks_final("read_file")
        (True, True, False)
    """
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()
    if any(w in _FINAL_WORDS for w in re.split(r"[^a-z0-9]+", words) if w):
        return True
    text = (description or "").lower()
    return any(phrase in text for phrase in _FINAL_PHRASES)


def order_tools(specs: Sequence[Any]) -> list[Any]:
    """Tools in server order, with the ones that look like they end the episode moved last.

    Example:
        >>> [t["name"] for t in order_tools([{"name": "submit"}, {"name": "bash"}, {"name": "ls"}])]
        ['bash', 'ls', 'submit']
    """

    def final(spec: Any) -> bool:
        norm = normalize_spec(spec)
        return looks_final(norm["name"], norm["description"])

    return sorted(specs, key=final)


# ──────────────────────────────────────────────────────────────────────────────────────────────────────────
# Checking members (I/O)


@dataclass
class ToolCheck:
    """One tool call of a check: latency, and whether and how it failed."""

    tool: str
    arguments: list[str] = field(default_factory=list)
    latency_ms: float | None = None
    error: str | None = None
    infra: bool = False
    reward: float | None = None
    finished: bool = False
    note: str | None = None
    #: The call finished the episode and no call of that episode gave a reward: every rollout ending this way
    #: comes back unscored (GRPO has nothing to learn from it).
    unscored_finish: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class MemberCheck:
    """What checking one member found. `usable` is the verdict `check_command` exits on."""

    member: str
    target: str
    num_tasks: int | None = None  # the split's size
    selected: int | None = None  # the tasks this member trains on (num_tasks / indices / where)
    tools: list[str] = field(default_factory=list)
    start_ms: float | None = None
    connect_ms: float | None = None
    open_ms: float | None = None
    #: Of the opens, the time spent waiting for a platform backend that was still starting (a cold start).
    starting_ms: float | None = None
    calls: list[ToolCheck] = field(default_factory=list)
    failed_stage: str | None = None
    error: str | None = None
    #: The member's eval tasks (`ormix.mixture.EvalSet`): the set `ormix eval` and `ormix train` use.
    eval_set: Any = None
    #: Why `ormix eval` and `ormix train` will not evaluate the member (no task to evaluate on).
    eval_note: str | None = None
    #: Why its eval set cannot be used (a split or index that does not exist, or the server's error).
    eval_problem: str | None = None
    #: Whether `eval_problem` is the file's fault (exit 2) rather than the server's.
    eval_bad_input: bool = False
    #: Whether the member failed in the user's own environment code or config (exit 2).
    bad_input: bool = False

    @property
    def never_scores(self) -> bool:
        """Tool calls were made and answered, and none gave a reward or finished the episode."""
        answered = [c for c in self.calls if c.ok]
        return bool(answered) and not any(c.reward is not None or c.finished for c in answered)

    @property
    def usable(self) -> bool:
        if self.failed_stage is not None:
            return False
        return not (self.calls and all(c.infra for c in self.calls))

    @property
    def unscored_finishes(self) -> list[str]:
        """Tools that finished the episode without a reward (a finding: those rollouts are never scored)."""
        return [c.tool for c in self.calls if c.unscored_finish]

    @property
    def failing_tools(self) -> list[str]:
        """Tools that raised inside the environment (a finding: every rollout calling them fails)."""
        return [c.tool for c in self.calls if c.error and c.error.startswith("tool_failed")]

    @property
    def timed_out_tools(self) -> list[str]:
        """Tools that gave no answer within the member's ``call_timeout_s`` (a finding, like a raising tool:
        every rollout calling them fails)."""
        return [c.tool for c in self.calls if c.error and c.error.startswith("deadline")]

    @property
    def cause(self) -> str | None:
        """Why the member is unusable (None when usable)."""
        if self.failed_stage is not None:
            return f"{self.failed_stage}: {self.error}"
        if not self.usable:
            return "every tool call failed: " + "; ".join(f"{c.tool}: {c.error}" for c in self.calls[:3])
        return None


class _MemberProbe:
    """One member's check in progress: its stage (the environment method a failure is blamed on: its
    constructor runs on /create, get_prompt on /prompt), the sessions it opened (closed at the end) and what
    it found (`result`)."""

    def __init__(self, member: str, spec: Any, timeout_s: float | None = None) -> None:
        self.spec = spec
        self.secret_values = spec.secret_values()
        self.result = MemberCheck(member, spec.target)
        # Each call gets the deadline training gives it, so a tool check passes is one training can wait for.
        self.timeout_s = timeout_s or spec.config.call_timeout_s or DEFAULT_CALL_TIMEOUT_S
        # Opening waits out a platform backend that is still starting, up to the member's own open deadline.
        self.open_s = max(DEFAULT_CALL_TIMEOUT_S, spec.config.resolved_open_timeout_s or 0.0)
        self.index = spec.indices[0] if spec.indices else 0
        self.stage = "connect"
        self.rewarded = False  # whether a call of the current episode gave a reward
        self.sessions: list[Any] = []
        self.client: Any = None

    async def run(self) -> None:
        """Connect (starting a local server), list the tasks, open a session and call each tool once."""
        from ormix.ors import _errors as errors

        spec, result = self.spec, self.result
        t0 = time.perf_counter()
        self.client = await spec.connection.client()  # starts the server of a local:/module: target
        result.start_ms = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        result.num_tasks = await self.client.num_tasks(spec.split)
        result.connect_ms = (time.perf_counter() - t0) * 1000
        self.stage = "list_tasks"
        result.selected = len(await spec.select_tasks())
        await _check_task_specs(self.client, spec, self.index, result)
        if result.num_tasks <= 0:
            self.stage = "tasks"
            raise errors.ORSError(f"split {spec.split!r} has no tasks; choose another split")
        if spec.indices and not 0 <= self.index < result.num_tasks:
            self.stage = "tasks"
            raise errors.ORSError(
                f"task index {self.index} is out of range (split {spec.split!r} has {result.num_tasks} tasks)"
            )
        self.stage = "tools"
        tool_specs = list(await self.client.tools())
        self.stage = "open session"
        session = await self.open_session()
        result.open_ms = session.timings.open_ms
        self.stage = "session tools"
        names = {t.name for t in tool_specs}
        tool_specs += [t for t in await session.tools(timeout_s=self.timeout_s) if t.name not in names]
        result.tools = [t.name for t in tool_specs]
        self.stage = "tool calls"
        previous: ToolCheck | None = None
        for tool in order_tools(tool_specs):
            check, session = await self.call_tool(tool, session, previous)
            result.calls.append(check)
            previous = check

    async def open_session(self) -> Any:
        """A fresh episode of the checked task (its prompt read), blaming the constructor or get_prompt."""
        before = self.stage
        self.stage = "constructor"
        session = await self.client.open_session(
            split=self.spec.split,
            index=self.index,
            secrets=self.spec.effective_secrets(),
            timeout_s=self.open_s,
        )
        self.sessions.append(session)
        self.stage = "get_prompt"
        await session.prompt_text(timeout_s=self.open_s)
        self.stage = before
        self.rewarded = False  # a fresh episode
        self.result.starting_ms = (self.result.starting_ms or 0.0) + session.timings.starting_ms
        return session

    async def call_tool(self, tool: Any, session: Any, previous: ToolCheck | None) -> tuple[ToolCheck, Any]:
        """Call ``tool`` once with example arguments; returns what it did and the session the next tool
        uses (None: it needs a fresh episode)."""
        from ormix.ors import _errors as errors
        from ormix.ors._errors import redact_text as redact

        args = example_arguments(tool.input_schema)
        check = ToolCheck(tool.name, sorted(args))
        for attempt in (0, 1):
            if session is None or session.closed or session.dead:
                session = await self.open_session()
            t1 = time.perf_counter()
            try:
                out = await session.call(tool.name, args, timeout_s=self.timeout_s)
            except errors.SessionDeadError as e:
                if attempt == 0:
                    # The previous call may have ended the session; retry once on a fresh one.
                    session = None
                    if previous is not None:
                        previous.note = "the session was gone after this call"
                    continue
                check.error, check.infra = f"session_died: {e}", True
            except errors.ToolRejected as e:
                check.error = f"rejected:{e.reason}: {e}"
            except errors.ToolFailed as e:
                check.error = f"tool_failed: {e}"
            except (errors.DeadlineExceeded, TimeoutError):
                # The session's own advice (a larger timeout_s) is not something `ormix check` takes.
                check.error = (
                    f"deadline: tool {tool.name!r} gave no answer within {self.timeout_s:g} s (the member's "
                    f"call_timeout_s); if it is that slow, raise call_timeout_s of member "
                    f"{self.result.member!r} in the mixture file"
                )
                check.infra = True
            except errors.ORSError as e:
                check.error, check.infra = f"{type(e).__name__}: {e}", True
            else:
                check.reward = None if out.reward is None else float(out.reward)
                check.finished = bool(out.finished)
                self.rewarded = self.rewarded or check.reward is not None
                # An episode is scored when any of its calls gave a reward; ending one that none did leaves
                # every such rollout unscored.
                check.unscored_finish = check.finished and not self.rewarded
                if check.finished:
                    session = None  # the next tool gets a fresh episode
            check.latency_ms = (time.perf_counter() - t1) * 1000
            break
        if check.error:
            check.error = redact(check.error, self.secret_values)
        return check, session

    async def close(self) -> None:
        """Close every session opened, even while the check is being cancelled (best effort)."""
        import anyio

        with anyio.CancelScope(shield=True):
            for session in self.sessions:
                try:
                    await session.close()
                except Exception:  # noqa: BLE001 - best effort
                    pass


async def _check_member(member: str, spec: Any, *, timeout_s: float | None) -> MemberCheck:
    import anyio

    from ormix._errors import UsageError
    from ormix.ors import _errors as errors
    from ormix.ors._errors import redact_text as redact

    probe = _MemberProbe(member, spec, timeout_s)
    result, secret_values = probe.result, probe.secret_values
    deadline_s = probe.timeout_s * 4 + probe.open_s
    try:
        with anyio.fail_after(deadline_s):
            await probe.run()
    except TimeoutError:
        result.failed_stage, result.error = probe.stage, f"no answer within {deadline_s:g} s"
    except errors.ORSError as e:
        named_stage, message, result.bad_input = _blame(e, probe.stage, spec, member, probe.index)
        result.failed_stage, result.error = named_stage, redact(message, secret_values)
    except UsageError as e:  # a member's own config or code (e.g. its reference hook, a list_tasks raising)
        result.failed_stage, result.error, result.bad_input = probe.stage, redact(str(e), secret_values), True
    except Exception as e:  # noqa: BLE001 - a check reports any failure of one member and goes on
        result.failed_stage, result.error = probe.stage, redact(f"{type(e).__name__}: {e}", secret_values)
    finally:
        await probe.close()
    return result


async def _check_task_specs(client: Any, spec: Any, index: int, result: MemberCheck) -> None:
    """Refuse a split whose task specs are not dicts (e.g. a ``list_tasks`` returning strings): ormix would
    read each as an empty task and every session would then fail in the constructor, blamed on it."""
    from ormix._errors import EnvironmentCodeError
    from ormix.ors._errors import ORSError

    try:
        raw = list(await client.task_range(spec.split, index, index + 1))
    except ORSError:
        return  # a server that serves only /task: ormix's own reading checks that answer is a dict
    if raw and not isinstance(raw[0], dict):
        result.selected = None  # not tasks ormix can use, whatever their count
        shown = repr(raw[0])
        # The user's own list_tasks (a module: target) is named by its class, and is input (exit 2), as when
        # it raises; another server's answer is a failure while running.
        own = parse_target(spec.target).kind == "module"
        method = f"{spec.target.partition(':')[2]}.list_tasks" if own else "the environment's list_tasks"
        message = (
            f"{method} returned {type(raw[0]).__name__} items ({shown[:40]}"
            f"{'...' if len(shown) > 40 else ''}), not one dict per task: return each task as a dict "
            f"(its task_spec, e.g. {{'word': 'river'}}); the constructor gets that dict"
        )
        if own:
            raise EnvironmentCodeError(message)
        raise ORSError(message)


def _blame(e: Exception, stage: str, spec: Any, member: str, index: int) -> tuple[str, str, bool]:
    """``(stage, message, bad_input)`` of a member's failure, naming the environment method that failed:
    ``list_tasks`` (the task listing: the user's own code is input, exit 2), the constructor or
    ``get_prompt`` (a session could not start: exit 1)."""
    from ormix.ors import _errors as errors

    module, _, cls = spec.target.partition(":")
    own = parse_target(spec.target).kind == "module"
    if isinstance(e, errors.ServerError) and stage in ("connect", "list_tasks"):
        found = spec.connection.own_code_error(e, spec.split, member)
        if found is not e:
            return "list_tasks", str(found), True
        return stage, str(e), False
    status = getattr(e, "status_code", None)
    detail = getattr(e, "detail", None) or str(e)
    task = f"task {spec.split}[{index}]"
    if stage in ("constructor", "get_prompt") and status == 500:
        prompt = stage == "get_prompt"
        if own:
            method = f"{cls}.get_prompt (or its setup())" if prompt else f"{cls}.__init__"
            call = f"{cls}({cls}.list_tasks({spec.split!r})[{index}], {{}})" + (
                ".get_prompt()" if prompt else ""
            )
            hint = f'`python -c "from {module} import {cls}; {call}"`'
            return stage, f"{method} raised {detail} for {task}; {hint} shows its traceback", False
        method = "get_prompt (or setup())" if prompt else "constructor"
        return stage, f"the environment's {method} raised {detail} for {task}", False
    return stage, str(e), False


def check_mixture(mixture: Any, *, timeout_s: float | None = None) -> list[MemberCheck]:
    """Check every member of a `MixtureSpec` (all at once); a failing member never stops the rest.

    Each tool call's deadline is ``timeout_s``, else the member's ``call_timeout_s`` (as in training), else
    `DEFAULT_CALL_TIMEOUT_S`.

    Example:
        >>> from ormix import MixtureSpec, OpenRewardSpec
        >>> mix = MixtureSpec({"echo": OpenRewardSpec("local:echo", num_tasks=2, local_serve="thread")})
        >>> [(c.member, c.usable, c.selected, c.tools) for c in check_mixture(mix)]
        [('echo', True, 2, ['echo', 'submit'])]
    """
    from ormix._errors import MixtureError
    from ormix.evaluation._errors import EvalError
    from ormix.evaluation._tasks import default_eval_set
    from ormix.ors._bridge import run_sync
    from ormix.ors._errors import ORSError

    async def check_all() -> dict[str, MemberCheck]:
        # Every member at once: each local server spends seconds starting, and they start side by side.
        import anyio

        found: dict[str, MemberCheck] = {}

        async def one(member: str) -> None:
            found[member] = await _check_member(member, mixture.spec(member), timeout_s=timeout_s)

        async with anyio.create_task_group() as tg:
            for member in mixture.members:
                tg.start_soon(one, member)
        return found

    checked = run_sync(check_all)
    results = []
    for member in mixture.members:
        result = checked[member]
        if result.failed_stage is None:
            # The set `ormix eval` and `ormix train` will use, also when the file names none (test split,
            # else the training tasks): what is checked is what runs.
            try:
                result.eval_set = default_eval_set(mixture, member)
            except EvalError as e:  # no task to evaluate on: a note, not a failure
                result.eval_note = f"{member}: not evaluated by ormix eval / ormix train: {e}"
            except MixtureError as e:
                result.eval_problem, result.eval_bad_input = str(e), True
            except (ORSError, OSError) as e:
                result.eval_problem = f"member {member!r}: its eval set could not be read: {e}"
        results.append(result)
    for member in mixture.members:
        try:
            mixture.spec(member).close()
        except Exception:  # noqa: BLE001 - closing clients is best effort
            pass
    return results


@contextlib.contextmanager
def _sigterm_stops() -> Iterator[None]:
    """SIGTERM raises ``KeyboardInterrupt("SIGTERM")`` in the main thread while checking, so sessions close
    as on Ctrl-C and the command exits 143 (off the main thread, the default handler stays)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt("SIGTERM")

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def check_command(path: Path, console: Any, *, tolerate_tool_errors: bool = False) -> int:
    """`ormix check FILE`: print a table per member, per tool and per eval set, and return the exit status
    (docs/cli.md): 2 when the file cannot be loaded, names an eval split or task that does not
    exist, or a `module:Class` environment's own ``list_tasks`` fails; 1 when a member is unusable (its
    constructor or ``get_prompt`` raises, it cannot be reached), one of its tools raises or gives no
    answer within the member's ``call_timeout_s`` (unless ``tolerate_tool_errors``) or a tool finishes the
    episode without a reward; 130 on Ctrl-C, 143 on SIGTERM; else 0.

    Example:
        >>> import io, tempfile
        >>> from rich.console import Console
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = Path(tmp) / "echo.yaml"
        ...     text = "{members: {echo: {target: 'local:echo', num_tasks: 2, local_serve: thread}}}"
        ...     _ = path.write_text(text)
        ...     out = io.StringIO()
        ...     check_command(path, Console(file=out))
        0
        >>> out.getvalue().splitlines()[-1]        # after a table per member and per tool call
        'all 1 environment(s) usable'
    """
    from ormix._errors import MixtureError
    from ormix.mixture import load_mixture

    try:
        mixture = load_mixture(str(path))
    except (MixtureError, OSError) as e:
        console.print(f"[red]error:[/red] cannot load {path}: {e}")
        return EXIT_BAD_INPUT
    from ormix._connection import BackendWatch

    try:
        with _sigterm_stops():
            console.print(f"checking {len(mixture.members)} environment(s) of {path} ...")
            with BackendWatch(lambda line: console.print(f"  [yellow]{line}[/yellow]", highlight=False)):
                results = check_mixture(mixture)
    except KeyboardInterrupt as e:
        # Ctrl-C (or SIGTERM, raised as an interrupt so sessions still close): the statuses train uses.
        terminated = str(e) == "SIGTERM"
        console.print(
            f"[yellow]{'terminated' if terminated else 'interrupted'}[/yellow]: nothing was checked"
        )
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED

    _print_members(results, console)
    _print_tool_calls(results, console)
    _print_eval_sets(results, console)
    return _verdict(results, console, tolerate_tool_errors)


def _print_members(results: Sequence[MemberCheck], console: Any) -> None:
    """One row per member (tasks, tools, timings, calls that worked, status); a note per starting backend."""
    rows = [("member", "target", "tasks", "tools", "start ms", "connect ms", "open ms", "calls ok", "status")]
    for r in results:
        ok = sum(c.ok for c in r.calls)
        status = "[green]ok[/green]" if r.usable else f"[red]UNUSABLE[/red] {r.cause}"
        if r.usable and r.failing_tools:
            status = f"[red]tool(s) raising[/red] {', '.join(r.failing_tools)}"
        elif r.usable and r.timed_out_tools:
            status = f"[red]tool(s) not answering[/red] {', '.join(r.timed_out_tools)}"
        elif r.usable and r.unscored_finishes:
            status = f"[red]finishes unscored[/red] {', '.join(r.unscored_finishes)}"
        elif r.usable and ok < len(r.calls):
            status = f"[yellow]ok, {len(r.calls) - ok} tool error(s)[/yellow]"
        selected = "-" if r.selected is None else str(r.selected)
        rows.append(
            (
                r.member,
                r.target,
                selected if r.num_tasks is None else f"{selected} of {r.num_tasks}",
                str(len(r.tools)),
                _ms(r.start_ms),
                _ms(r.connect_ms),
                _ms(r.open_ms),
                f"{ok}/{len(r.calls)}",
                status,
            )
        )
    print_table(console, "environments", rows)
    for r in results:
        if r.starting_ms:
            console.print(
                f"[yellow]note:[/yellow] {r.member}: backend starting, {r.starting_ms / 1000:.0f} s "
                f"(waited out before its session opened; not an error)",
                highlight=False,
            )


def _print_tool_calls(results: Sequence[MemberCheck], console: Any) -> None:
    """One row per tool call made with schema-generated arguments, and what it gave."""
    rows = [("member", "tool", "arguments", "latency ms", "result")]
    for r in results:
        for c in r.calls:
            if c.ok:
                outcome = (
                    "ok"
                    + (f", reward {c.reward:g}" if c.reward is not None else "")
                    + (", finished" if c.finished else "")
                    + (" [red]without a reward[/red]" if c.unscored_finish else "")
                )
            else:
                outcome = f"[red]{c.error}[/red]" if c.infra else f"[yellow]{c.error}[/yellow]"
            if c.note:
                outcome += f" ({c.note})"
            rows.append((r.member, c.tool, ", ".join(c.arguments) or "-", _ms(c.latency_ms), outcome))
    if len(rows) > 1:
        print_table(console, "tool calls (schema-generated arguments)", rows)


def _print_eval_sets(results: Sequence[MemberCheck], console: Any) -> None:
    """Each member's eval set (split, tasks, how it was chosen, overlap with training) and its notes."""
    rows = [("member", "split", "tasks", "chosen as", "also trained on")]
    rows += [
        (r.member, e.split, str(len(e.task_indices)), e.source, str(e.overlap))
        for r in results
        if (e := r.eval_set) is not None
    ]
    if len(rows) > 1:
        print_table(console, "eval sets", rows)
    for r in results:
        notes = [
            *(r.eval_set.notes if r.eval_set is not None else ()),
            *([r.eval_note] if r.eval_note else []),
        ]
        for note in notes:
            console.print(f"[yellow]note:[/yellow] {note}", highlight=False)


def _verdict(results: Sequence[MemberCheck], console: Any, tolerate_tool_errors: bool) -> int:
    """What is wrong, one line each, and the exit status."""
    bad_evals = [r for r in results if r.eval_problem]
    for r in bad_evals:
        console.print(f"[red]error:[/red] {r.eval_problem}", highlight=False)
    bad = [r for r in results if not r.usable]
    for r in bad:
        console.print(f"[red]error:[/red] environment {r.member!r} ({r.target}) is unusable: {r.cause}")
    raising = [r for r in results if r.usable and r.failing_tools]
    for r in raising:
        first = next(c for c in r.calls if c.error and c.error.startswith("tool_failed"))
        said = (first.error or "").removeprefix("tool_failed: ").split(". The session stays open")[0]
        console.print(
            f"[red]error:[/red] environment {r.member!r}: {said}; every rollout calling "
            f"{', '.join(r.failing_tools)} fails (fix the environment, or pass --tolerate-tool-errors)",
            highlight=False,
        )
    slow = [r for r in results if r.usable and r.timed_out_tools]
    for r in slow:
        first = next(c for c in r.calls if c.error and c.error.startswith("deadline"))
        console.print(
            f"[red]error:[/red] environment {r.member!r}: {(first.error or '').removeprefix('deadline: ')}; "
            f"every rollout calling {', '.join(r.timed_out_tools)} fails (or pass --tolerate-tool-errors)",
            highlight=False,
        )
    unscored = [r for r in results if r.usable and r.unscored_finishes]
    for r in unscored:
        named = ", ".join(repr(t) for t in r.unscored_finishes)
        console.print(
            f"[red]error:[/red] environment {r.member!r}: tool {named} finished the episode without a "
            "reward, so every rollout that ends with it comes back unscored and GRPO learns nothing from "
            "it; return ToolOutput(..., reward=..., finished=True) (a reward of 0.0 for a wrong answer)",
            highlight=False,
        )
    for r in results:
        if r.usable and r.never_scores:
            console.print(
                f"[yellow]warning:[/yellow] environment {r.member!r}: no tool call gave a reward or finished "
                "the episode, so every rollout may come back unscored; a scoring tool returns "
                "ToolOutput(..., reward=..., finished=True)",
                highlight=False,
            )
    if any(r.eval_bad_input for r in bad_evals) or any(r.bad_input for r in bad):
        return EXIT_BAD_INPUT
    # A tool that raises, never answers or ends episodes unscored was found by running the environment: 1,
    # whoever wrote it, as `ormix train` ends on it (its rollouts fail or come back unscored).
    if bad or bad_evals or unscored or ((raising or slow) and not tolerate_tool_errors):
        return EXIT_FAILED
    console.print(f"all {len(results)} environment(s) usable")
    return EXIT_OK
