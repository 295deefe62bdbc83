"""The `ormix` command line: train, eval, check, inspect, report, show, compare, ablate, serve.

Each command imports what it needs when it runs, so `ormix --help` stays fast. Expected failures (bad input,
an unreachable server, a refused key) end with one ``error:`` line and exit 2 (input) or 1 (runtime), never a
traceback; ``ormix --debug COMMAND ...`` (or ``--debug`` after the command) shows the traceback too.
Help shows plain metavars (``FILE``, ``N``).
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, get_args

import typer
import typer.core
from rich.console import Console

from ormix._choices import Budget, EvalPolicy, ShowMode, TerminationPolicy
from ormix.app._command import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_TERMINATED

if TYPE_CHECKING:
    from ormix.server._serving import LocalServer, ServeOptions


class _BadValue(typer.BadParameter):
    """A flag's value refused while parsing, said as every ormix failure is: one ``error:`` line (after the
    usage lines), exit 2."""

    def show(self, file: object = None) -> None:
        if self.ctx is not None:
            typer.echo(f"{self.ctx.get_usage()}\nTry '{self.ctx.command_path} --help' for help.\n", err=True)
        typer.echo(f"error: {self.format_message()}", err=True)


class _Command(typer.core.TyperCommand):
    """Plain help and messages: ``FILE`` (not ``{FILE}`` and its type), "expected an int", "'x' is not one of
    'a', 'b'"."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        for param in self.params:
            if isinstance(param, typer.core.TyperArgument):
                name = param.metavar or (param.name or "").upper()
                param.display_type_rich = lambda ctx: None  # type: ignore[method-assign]
                param._usage_display_name = lambda name=name: name  # type: ignore[method-assign,misc]

    # typer vendors click privately; its Context is the public typer.Context's base class.
    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:  # type: ignore[override]
        try:
            return super().parse_args(ctx, args)
        except typer.BadParameter as e:
            if type(e).__name__ == "MissingParameter":  # click's own message says what is missing
                raise
            for needle, plain in (
                ("valid integer", "expected an int"),
                ("valid number", "expected a number"),
            ):
                if needle in str(e.message):
                    e.message = plain
            # A choice (a `Literal`): "'x' is not one of 'a', 'b'", without typer's "Value error, ".
            e.message = str(e.message).removeprefix("Value error, ")
            raise _BadValue(e.message, ctx=e.ctx, param=e.param, param_hint=e.param_hint) from None

    def invoke(self, ctx: typer.Context) -> object:  # type: ignore[override]
        # click turns Ctrl-C into "Aborted!" and exit 1; every ormix command exits 130, as shells expect.
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            err.print("[yellow]interrupted[/yellow]")
            raise typer.Exit(EXIT_INTERRUPTED) from None


def _error(message: object, status: int = EXIT_BAD_INPUT, *, highlight: bool | None = None) -> typer.Exit:
    """Say ``error: MESSAGE`` on stderr, as every ormix failure does; returns the exit to raise."""
    err.print(f"[red]error:[/red] {message}", highlight=highlight)
    return typer.Exit(status)


def _one_of(choice: object) -> str:
    """A choice's metavar, ``a|b``, from its `Literal` (typer's own is ``<a|b>``)."""
    return "|".join(get_args(choice))


app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="Train one LLM agent on a mixture of ORS environments with TRL.",
)
_state = {"debug": False}


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="show the traceback of a failure")] = False,
) -> None:
    _state["debug"] = debug


# Without a terminal (logs, CI) rich would wrap tables at 80 columns; give them room instead.
console = Console(width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 200)


@app.command(cls=_Command)
def serve(
    envs: Annotated[
        list[str], typer.Argument(metavar="TARGET...", help="local:NAME or module:Class, one or more")
    ],
    port: Annotated[int, typer.Option(metavar="PORT", help="port to listen on (0 = any free port)")] = 8080,
    host: Annotated[
        str, typer.Option(help="address to bind; keep loopback unless you mean it")
    ] = "127.0.0.1",
    idle_limit: Annotated[float | None, typer.Option(help="reap sessions idle this many seconds")] = None,
    keep_alive: Annotated[
        float | None,
        typer.Option(metavar="SECONDS", help="close idle keep-alive connections after this long (60)"),
    ] = None,
    workers: Annotated[
        int,
        typer.Option(
            metavar="N", min=1, help="N server processes, on ports PORT..PORT+N-1 (any free ones with 0)"
        ),
    ] = 1,
    api_key: Annotated[
        str | None,
        typer.Option(
            metavar="KEY",
            envvar="ORMIX_SERVE_API_KEY",
            show_envvar=True,
            help="every request must carry it as X-API-Key (required off loopback)",
        ),
    ] = None,
    insecure: Annotated[bool, typer.Option(help="serve off loopback without a key")] = False,
    ssl_certfile: Annotated[
        Path | None, typer.Option(metavar="FILE", help="serve TLS with this cert")
    ] = None,
    ssl_keyfile: Annotated[Path | None, typer.Option(metavar="FILE", help="the certificate's key")] = None,
) -> None:
    """Serve local environments over ORS: `ormix serve local:terminals local:seta --port 8080`."""
    from ormix._errors import ServerStartError, TargetError
    from ormix.server._auth import is_loopback
    from ormix.server._registry import load_environment_class
    from ormix.server._serving import ServeOptions, ready_line, run_forever

    try:
        for env in envs:
            load_environment_class(env)
    except TargetError as e:
        raise _error(e) from None
    options = ServeOptions(
        host=host,
        port=port,
        idle_limit_s=idle_limit,
        keep_alive_s=keep_alive,
        api_key=api_key,
        insecure=insecure,
        ssl_certfile=str(ssl_certfile) if ssl_certfile else None,
        ssl_keyfile=str(ssl_keyfile) if ssl_keyfile else None,
    )
    if (problem := options.problem()) is not None:
        raise _error(problem)
    if not is_loopback(host) and api_key and not options.ssl_certfile:
        err.print("note: without TLS (--ssl-certfile/--ssl-keyfile) the key crosses the network in clear")
    if workers > 1:
        _serve_workers(envs, workers, options)
        return

    def announce(server: LocalServer) -> None:
        print(ready_line(server), flush=True)  # the port chosen, for scripts (`serve_in_process` reads it)
        err.print(f"serving {', '.join(envs)} on {server.url} (Ctrl-C to stop)")

    try:
        run_forever(envs, options, on_ready=announce)
    except ServerStartError as e:  # the port in use, a host not this machine's, TLS files that do not load
        raise _error(e, EXIT_FAILED) from None
    except KeyboardInterrupt:
        pass


def _serve_workers(envs: list[str], workers: int, options: ServeOptions) -> None:
    """`ormix serve --workers N`: N server processes, one port each (PORT..PORT+N-1, or any free ones with
    0), until Ctrl-C or SIGTERM; prints the `targets:` list a member names them by (its sessions then spread
    over them, `ormix.ors.ServerPool`)."""
    import dataclasses
    import signal
    import threading

    from ormix._errors import ServerStartError
    from ormix.server._serving import serve_in_process

    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    servers = []
    interrupted = False
    try:
        for i in range(workers):
            port = options.port + i if options.port else 0
            servers.append(serve_in_process(envs, dataclasses.replace(options, port=port)))
        urls = [s.url for s in servers]
        err.print(f"serving {', '.join(envs)} on {workers} processes (Ctrl-C to stop); a member's targets:")
        if options.host in ("0.0.0.0", "::"):
            err.print(f"(replace {options.host} with this machine's address)")
        print("targets: [" + ", ".join(urls) + "]", flush=True)
        while not stop.wait(0.5):
            pass
    except ServerStartError as e:
        raise _error(e, EXIT_FAILED) from None
    except KeyboardInterrupt:
        interrupted = True
    finally:
        signal.signal(signal.SIGTERM, previous)
        closers = [threading.Thread(target=s.close) for s in servers]  # each tears its sessions down
        for t in closers:
            t.start()
        for t in closers:
            t.join()
    # As one server process ends (and as shells report it): 130 for Ctrl-C, 143 for SIGTERM.
    if interrupted or stop.is_set():
        raise typer.Exit(EXIT_INTERRUPTED if interrupted else EXIT_TERMINATED)


@app.command(cls=_Command)
def inspect(
    path: Annotated[Path, typer.Argument(metavar="FILE", help="mixture file (mixtures/*.yaml)")],
    steps: Annotated[int, typer.Option(metavar="N", min=0, help="how many first steps to show")] = 4,
    batch: Annotated[
        int | None, typer.Option(metavar="N", min=1, help="prompts per step for the starvation estimate")
    ] = None,
    tools: Annotated[
        bool, typer.Option("--tools", help="each tool's parameters and description, as the model sees them")
    ] = False,
) -> None:
    """Members, task counts, tool surfaces and name maps, per-step composition and starvation risk."""
    from ormix._errors import MixtureError, OrmixError, exit_status
    from ormix.app._inspect import inspect_mixture, print_inspection
    from ormix.mixture import load_mixture

    try:  # a look needs no keys: what needs one says so
        mix = load_mixture(str(path), defer_missing_secrets=True)
    except MixtureError as e:
        raise _error(e) from None
    try:
        info = inspect_mixture(mix, first_steps=steps, batch=batch)
    except OrmixError as failure:  # the user's environment fails to start or raises in its own code
        raise _error(failure, exit_status(failure), highlight=False) from None
    finally:
        mix.close()
    print_inspection(info, console, tools=tools)


@app.command(cls=_Command)
def ablate(
    path: Annotated[Path, typer.Argument(metavar="FILE", help="mixture file to derive from")],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            metavar="DIR",
            help="directory for the derived mixture files; with --run, the study directory (default "
            "studies/<mixture name>)",
        ),
    ] = None,
    leave_one_out: Annotated[
        bool, typer.Option("--leave-one-out", help="one arm per train member left out (--run: the default)")
    ] = False,
    only: Annotated[
        list[str] | None,
        typer.Option("--only", metavar="MEMBER", help="one arm with only this member (repeatable)"),
    ] = None,
    budget: Annotated[
        Budget,
        typer.Option(
            "--budget",
            metavar=_one_of(Budget),
            help="same-total keeps prompts_per_step (the members left share the dropped one's prompts); "
            "same-per-member scales it by their share (each keeps its prompts per step)",
        ),
    ] = "same-total",
    run: Annotated[
        bool,
        typer.Option(
            "--run", help="train every arm, evaluate each on every member's eval tasks, write the matrix"
        ),
    ] = False,
    arm: Annotated[
        list[str] | None,
        typer.Option("--arm", metavar="NAME", help="with --run: run only this arm (repeatable), e.g. full"),
    ] = None,
    max_steps: Annotated[
        int | None, typer.Option("--max-steps", metavar="N", help="with --run: training steps per arm")
    ] = None,
    k: Annotated[
        str, typer.Option("-k", "--k", metavar="K[,K...]", help="with --run: pass@k reported, e.g. 1,4")
    ] = "1",
    model: Annotated[
        str | None,
        typer.Option(
            metavar="ID", help="with --run: the base model of every arm (default: ormix's tiny model)"
        ),
    ] = None,
    metric: Annotated[
        str,
        typer.Option(metavar="METRIC", help="with --run: the heatmap's metric (pass@1, mean_reward, ...)"),
    ] = "pass@1",
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", metavar="KEY=VALUE", help="with --run: GRPOConfig override for every arm"),
    ] = None,
    warmup_sft: Annotated[
        int | None,
        typer.Option(
            "--warmup-sft",
            metavar="N",
            help="with --run: steps of the study's one warm start on the full mixture's train members, "
            "which every arm starts from (default: the file's warm_start, 0 = none)",
        ),
    ] = None,
    seeds: Annotated[
        str | None,
        typer.Option(
            "--seeds",
            metavar="S[,S...]",
            help="with --run: train every arm once per training seed (arms/<arm>/seed-<s>/), e.g. 0,1,2; "
            "intervals then cover seeds and tasks",
        ),
    ] = None,
    allow_different_starts: Annotated[
        bool,
        typer.Option(
            "--allow-different-starts",
            help="with --run: compute effects although arms started from different models (study.md says so)",
        ),
    ] = False,
) -> None:
    """Derived mixture files (the full mixture, leave one out, only one), each with its manifest hash and
    budget rule; with --run, the whole study (each arm trained and evaluated, `study.md`, `heatmap.png`).

    Exit status with --run: 0 every arm asked for done, 1 failed, 2 bad input, 130 Ctrl-C, 143 SIGTERM.
    """
    if run:
        from ormix.app._study import StudyOptions, study_command

        options = StudyOptions(
            out_dir=out,
            leave_one_out=leave_one_out or not only,
            only=tuple(only or ()),
            arms=tuple(arm or ()),
            budget=budget,
            max_steps=max_steps,
            k=_k_list(k),
            model=model,
            metric=metric,
            warmup_sft=warmup_sft,
            seeds=_seed_list(seeds),
            allow_different_starts=allow_different_starts,
        )
        raise typer.Exit(
            study_command(path, options, console=console, overrides=set_ or [], debug=_state["debug"])
        )
    study_only = [
        flag
        for flag, given in (
            ("--arm", arm),
            ("--max-steps", max_steps is not None),
            ("--model", model),
            ("--set", set_),
            ("-k", k != "1"),
            ("--metric", metric != "pass@1"),
            ("--warmup-sft", warmup_sft is not None),
            ("--seeds", seeds is not None),
            ("--allow-different-starts", allow_different_starts),
        )
        if given
    ]
    if study_only:
        raise _error(f"{', '.join(study_only)} run(s) a study: add --run")
    if out is None:
        raise _error("--out DIR is required (where the derived files go), or add --run")
    from ormix.app._study import derive_command

    raise typer.Exit(
        derive_command(
            path,
            out,
            leave_one_out=leave_one_out,
            only=only or [],
            budget=budget,
            console=console,
            errors=err,
        )
    )


@app.command(cls=_Command)
def check(
    path: Annotated[Path, typer.Argument(metavar="FILE", help="mixture file whose environments to check")],
    tolerate_tool_errors: Annotated[
        bool,
        typer.Option("--tolerate-tool-errors", help="exit 0 even when a tool fails on every call"),
    ] = False,
) -> None:
    """Connect to every environment, open a session, call each tool with schema-valid arguments; report
    latency and errors, naming the method that failed (exit 1 when an environment is unusable, a tool raises
    or one finishes the episode without a reward; 2 for bad input; docs/cli.md, "Exit statuses")."""
    from ormix.app._check import check_command

    raise typer.Exit(check_command(path, console, tolerate_tool_errors=tolerate_tool_errors))


@app.command(cls=_Command)
def train(
    path: Annotated[Path, typer.Argument(metavar="FILE", help="mixture file, e.g. mixtures/local-demo.yaml")],
    model: Annotated[
        str | None, typer.Option(metavar="ID", help="hub id or path (default: ormix's offline tiny model)")
    ] = None,
    max_steps: Annotated[
        int | None, typer.Option("--max-steps", metavar="N", help="override train.max_steps")
    ] = None,
    output_dir: Annotated[
        Path | None,
        typer.Option("--output-dir", metavar="DIR", help="run directory (default runs/<name>-<ts>)"),
    ] = None,
    warmup_sft: Annotated[
        int | None,
        typer.Option(
            "--warmup-sft",
            metavar="N",
            help="steps of SFT on reference solutions first (cached; default: the file's warm_start, "
            "0 = none)",
        ),
    ] = None,
    warmup_fraction: Annotated[
        float | None,
        typer.Option(
            "--warmup-fraction",
            metavar="F",
            help="warm only this fraction of each member's tasks (default: the file's warm_start, else 1)",
        ),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", metavar="KEY=VALUE", help="GRPOConfig override (repeatable)"),
    ] = None,
    resume: Annotated[
        str | None,
        typer.Option(
            "--resume",
            metavar="[CHECKPOINT]",
            help="continue the run in --output-dir from its latest checkpoint (or the checkpoint "
            "directory given)",
        ),
    ] = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="start over in an --output-dir that holds a run (deletes it)")
    ] = False,
    allow_changed_mixture: Annotated[
        bool,
        typer.Option(
            "--allow-changed-mixture", help="resume although the mixture changed (recorded in the manifest)"
        ),
    ] = False,
    on_sigterm: Annotated[
        TerminationPolicy,
        typer.Option(
            "--on-sigterm",
            metavar=_one_of(TerminationPolicy),
            help="on SIGTERM: save a checkpoint when the current step ends, or stop at once",
        ),
    ] = "checkpoint",
    sigterm_grace: Annotated[
        float,
        typer.Option(
            "--sigterm-grace", metavar="SECONDS", help="longest wait for the current step after SIGTERM"
        ),
    ] = 120.0,
    save_on_interrupt: Annotated[
        bool, typer.Option("--save-on-interrupt/--no-save-on-interrupt", help="on Ctrl-C, save the last step")
    ] = True,
    sequential_envs: Annotated[
        bool,
        typer.Option(
            "--sequential-envs", help="TRL's own loop: sessions and tool calls one rollout at a time"
        ),
    ] = False,
    async_: Annotated[
        bool,
        typer.Option(
            "--async", help="TRL's AsyncGRPOTrainer: a rollout worker generates through a vLLM server"
        ),
    ] = False,
    vllm_url: Annotated[
        str | None,
        typer.Option(
            "--vllm-url",
            metavar="URL",
            help="with --async: the vLLM server (default `standin`: ormix's stand-in, the model served by "
            "transformers, for machines without vLLM)",
        ),
    ] = None,
    lookahead: Annotated[
        int | None,
        typer.Option(
            "--lookahead",
            min=0,
            metavar="N",
            help="steps whose sessions open while the step before them runs (default: the file's, else 1)",
        ),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed",
            metavar="N",
            help="training seed (GRPO's sampling and data order; default: the mixture's seed); the plan's "
            "rows, the warm start and the evals keep the mixture's",
        ),
    ] = None,
) -> None:
    """GRPO on a mixture file: per-member progress, run directory with manifest, rollouts, report and model.

    Exit status: 0 done, 1 failed or stopped by the coverage alarm, 2 bad input, 130 Ctrl-C, 143 SIGTERM.
    """
    from ormix.app._train import RunOptions, train_command

    if vllm_url is not None and not async_:
        raise _error("--vllm-url is for --async training; add --async")
    options = RunOptions(
        model=model,
        max_steps=max_steps,
        output_dir=output_dir,
        warmup_sft=warmup_sft,
        warmup_fraction=warmup_fraction,
        resume=resume,
        overwrite=overwrite,
        allow_changed_mixture=allow_changed_mixture,
        on_sigterm=on_sigterm,
        sigterm_grace_s=sigterm_grace,
        save_on_interrupt=save_on_interrupt,
        concurrent=not sequential_envs,
        vllm_url=(vllm_url or "standin") if async_ else None,
        lookahead=lookahead,
        seed=seed,
    )
    status = train_command(path, options, overrides=set_ or [], console=console, debug=_state["debug"])
    raise typer.Exit(status)


def _seed_list(text: str | None) -> tuple[int, ...]:
    """``--seeds``: distinct whole numbers, comma-separated; ``()`` when not given."""
    try:
        values = tuple(int(part) for part in (text or "").split(",") if part.strip())
    except ValueError:
        values = ()
    if text is not None and (not values or len(set(values)) != len(values)):
        raise _error(f"--seeds takes distinct integers separated by commas (e.g. 0,1,2), not {text!r}")
    return values


def _k_list(text: str) -> tuple[int, ...]:
    """``-k``'s comma list, checked by the rule every pass@k list follows (`pass_k_problem`)."""
    from ormix.config._trainer_rules import pass_k_problem

    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise _error(f"-k takes whole numbers, comma-separated (e.g. 1,4,8), not {text!r}") from None
    if problem := pass_k_problem(values):
        raise _error(f"-k: {problem}")
    return values


@app.command("eval", cls=_Command)
def eval_(
    path: Annotated[Path, typer.Argument(metavar="FILE", help="mixture file, e.g. mixtures/local-demo.yaml")],
    model: Annotated[
        str | None,
        typer.Option(
            metavar="ID|DIR|RUN_DIR[/checkpoint-N|@start]",
            help="hub id, model directory, run directory (its final model), one of its checkpoints, or "
            "RUN_DIR@start: the model its GRPO started from (default: ormix's offline tiny model)",
        ),
    ] = None,
    k: Annotated[
        str | None,
        typer.Option(
            "-k",
            "--k",
            metavar="K,...",
            help="pass@k to report, e.g. 1,4,8 (default: the file's evaluation:, else 1)",
        ),
    ] = None,
    samples: Annotated[
        int | None, typer.Option(metavar="N", help="rollouts per task (default: the largest k)")
    ] = None,
    members: Annotated[
        str | None, typer.Option(metavar="A,B", help="evaluate only these members (default: all)")
    ] = None,
    split: Annotated[
        str | None, typer.Option(metavar="S", help="evaluate every member on this split instead")
    ] = None,
    policy: Annotated[
        EvalPolicy,
        typer.Option(
            metavar=_one_of(EvalPolicy),
            help="model: the model generates; reference: play each task's reference solution (an oracle "
            "check of the environments)",
        ),
    ] = "model",
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            metavar="DIR",
            help="output directory (default: RUN_DIR/eval for a run's model, else evals/<mixture>-<model>)",
        ),
    ] = None,
    seed: Annotated[
        int | None, typer.Option(metavar="N", help="sampling seed (default: the mixture's seed)")
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set", metavar="KEY=VALUE", help="GRPOConfig override, e.g. temperature=0.7 (repeatable)"
        ),
    ] = None,
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite", help="start over in an --out that holds another eval (its eval files are deleted)"
        ),
    ] = False,
    chunk: Annotated[
        int,
        typer.Option(
            "--chunk", metavar="N", help="tasks whose rollouts run at once (records kept per chunk)"
        ),
    ] = 16,
    success_threshold: Annotated[
        float,
        typer.Option(
            "--success-threshold",
            metavar="R",
            help="a scored rollout succeeds (pass@k, pass^k) when its env_reward reaches R (> 0); recorded "
            "in the manifest, where `ormix compare` reads it; a finished eval run again with another R is "
            "summarised again",
        ),
    ] = 1.0,
) -> None:
    """Evaluate a model on every member's eval tasks: pass@k, pass^k, mean reward, coverage and errors per
    member, each with an interval; resumable (run the same command again).

    Exit status: 0 done, 1 failed, 2 bad input, 130 Ctrl-C.
    """
    from ormix.app._eval import EvalOptions, eval_command

    options = EvalOptions(
        model=model,
        k=_k_list(k) if k is not None else None,
        samples=samples,
        members=tuple(m.strip() for m in members.split(",") if m.strip()) if members else (),
        split=split,
        policy=policy,
        out_dir=out,
        seed=seed,
        overwrite=overwrite,
        tasks_per_chunk=chunk,
        success_threshold=success_threshold,
    )
    raise typer.Exit(
        eval_command(path, options, overrides=set_ or [], console=console, debug=_state["debug"])
    )


@app.command(cls=_Command)
def report(
    run_dirs: Annotated[
        list[Path],
        typer.Argument(
            metavar="RUN_DIR", help="run directory (the trainer's output_dir)", show_default=False
        ),
    ],
) -> None:
    """Per-environment tables and plots (reward, coverage, share, errors, latency, eval curves) from rollout
    records."""
    from ormix.app._report import report_command

    if len(run_dirs) > 1:
        names = " ".join(str(p) for p in run_dirs)
        raise _error(
            "ormix report reads one run directory; to compare runs, evaluate them and compare the evals: "
            f"`ormix compare {names}` (each a run directory with an eval, or an eval directory), or report "
            "one run at a time",
            highlight=False,
        )
    raise typer.Exit(report_command(run_dirs[0], console, err))


@app.command(cls=_Command)
def show(
    path: Annotated[
        Path,
        typer.Argument(
            metavar="DIR", help="run directory, or eval directory (`ormix eval`'s, or a run's eval/)"
        ),
    ],
    step: Annotated[
        int | None, typer.Option(metavar="N", help="training step (default: the latest that matches)")
    ] = None,
    member: Annotated[str | None, typer.Option(metavar="NAME", help="only this member's rollouts")] = None,
    outcome: Annotated[
        str | None,
        typer.Option(metavar="OUTCOME", help="only rollouts that ended so: scored, unscored, error"),
    ] = None,
    task: Annotated[int | None, typer.Option(metavar="INDEX", help="only this task index")] = None,
    eval_name: Annotated[
        str | None,
        typer.Option(
            "--eval", metavar="NAME", help="the run's eval directory: before, after, or its directory name"
        ),
    ] = None,
    mode: Annotated[
        ShowMode | None,
        typer.Option(
            metavar=_one_of(ShowMode),
            help="in a run directory: train (default) or eval (evals during training)",
        ),
    ] = None,
    limit: Annotated[int, typer.Option(metavar="K", help="show at most K rollouts (0: all)")] = 10,
    max_chars: Annotated[
        int, typer.Option(metavar="N", help="cut each message after N characters (0: never)")
    ] = 2000,
    secret_env: Annotated[
        list[str] | None,
        typer.Option(metavar="VAR", help="also redact this environment variable's value (repeatable)"),
    ] = None,
) -> None:
    """Rollouts as text: prompt, each turn (the model's text, tool calls with arguments, tool results), the
    reward and the outcome, secrets redacted."""
    from ormix._errors import OrmixError, exit_status
    from ormix.app._show import show_command

    try:
        code = show_command(
            path,
            console,
            step=step,
            member=member,
            outcome=outcome,
            task=task,
            eval_name=eval_name,
            mode=mode,
            limit=limit,
            max_chars=max_chars,
            secret_env=secret_env or (),
        )
    except OrmixError as failure:
        from rich.markup import escape

        raise _error(escape(str(failure)), exit_status(failure), highlight=False) from None
    raise typer.Exit(code)


class _CompareCommand(_Command):
    """``--vs`` takes every path after it (``ormix compare A1 A2 --vs B1 B2``): click options take one
    value each, so each path is given its own ``--vs`` before parsing."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:  # type: ignore[override]
        out: list[str] = []
        i = 0
        while i < len(args):
            if args[i] != "--vs":
                out.append(args[i])
                i += 1
                continue
            i += 1
            start = i
            while i < len(args) and not args[i].startswith("-"):
                out += ["--vs", args[i]]
                i += 1
            if i == start:
                raise typer.BadParameter(
                    "give the other group's eval directories after it: ormix compare A1 A2 --vs B1 B2",
                    ctx=ctx,
                    param_hint="--vs",
                )
        return super().parse_args(ctx, out)


@app.command(cls=_CompareCommand)
def compare(
    evals: Annotated[
        list[Path],
        typer.Argument(
            metavar="EVAL...",
            help="eval directories (or run directories with eval/); the first is the baseline",
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", metavar="DIR", help="where to write comparison.json/.md/.png (default evals/compare-A-B)"
        ),
    ] = None,
    metric: Annotated[
        list[str] | None,
        typer.Option(
            "--metric", metavar="NAME", help="metric to give verdicts for (repeatable; default pass@k)"
        ),
    ] = None,
    allow_partial: Annotated[
        bool, typer.Option("--allow-partial", help="pair the common tasks of evals of different task sets")
    ] = False,
    confidence: Annotated[float, typer.Option(metavar="F", help="confidence of the intervals")] = 0.95,
    vs: Annotated[
        list[Path] | None,
        typer.Option(
            "--vs",
            metavar="EVAL...",
            help="compare groups of runs (one per training seed): EVAL... are the baseline's runs, the paths "
            "after --vs the other group's; intervals then include seed-to-seed variance",
        ),
    ] = None,
) -> None:
    """Per member, the difference of each metric from the first eval, with a paired interval over the same
    tasks, and a plain verdict; writes comparison.json, comparison.md and comparison.png. With --vs: two
    groups of runs (seeds), values pooled over each group's runs, intervals over seeds and tasks."""
    from ormix._errors import UsageError
    from ormix.app._compare import compare as compare_evals
    from ormix.app._compare import compare_groups, load_eval, print_comparison

    try:
        if not 0.0 < confidence < 1.0:
            raise UsageError(f"--confidence is a fraction in (0, 1), e.g. 0.95 (got {confidence})")
        data = [load_eval(path) for path in evals]
        if vs:
            if allow_partial:
                raise UsageError(
                    "--allow-partial pairs two evals' common tasks; groups of runs (--vs) must evaluate the "
                    "same tasks: finish or rerun the evals that differ"
                )
            result = compare_groups(
                [data, [load_eval(path) for path in vs]], confidence=confidence, metrics=metric or None
            )
        else:
            result = compare_evals(
                data,
                confidence=confidence,
                allow_partial=allow_partial,
                metrics=metric or None,
            )
    except UsageError as e:
        raise _error(e, highlight=False) from None
    print_comparison(result, console, out)


def expand_resume(argv: list[str]) -> list[str]:
    """``--resume`` alone means the latest checkpoint: give it the value ``latest`` unless a checkpoint
    directory follows (the mixture file, a file, never does).

    Example:
        >>> expand_resume(["train", "m.yaml", "--output-dir", "runs/x", "--resume"])
        ['train', 'm.yaml', '--output-dir', 'runs/x', '--resume', 'latest']
    """
    out = list(argv)
    for i, arg in enumerate(out):
        if arg == "--resume":
            following = out[i + 1] if i + 1 < len(out) else None
            if following is None or following.startswith("-") or not Path(following).is_dir():
                out.insert(i + 1, "latest")
            break
    return out


def hoist_debug(argv: list[str]) -> list[str]:
    """``--debug`` anywhere before a ``--`` is the root option: ``ormix train FILE --debug`` works as
    ``ormix --debug train FILE`` does (no command takes a ``--debug`` of its own).

    Example:
        >>> hoist_debug(["train", "m.yaml", "--debug", "--max-steps", "2"])
        ['--debug', 'train', 'm.yaml', '--max-steps', '2']
        >>> hoist_debug(["train", "m.yaml", "--", "--debug"])
        ['train', 'm.yaml', '--', '--debug']
    """
    end = argv.index("--") if "--" in argv else len(argv)
    if "--debug" not in argv[:end]:
        return list(argv)
    rest = [a for a in argv[:end] if a != "--debug"]
    return ["--debug", *rest, *argv[end:]]


def main() -> None:
    """Entry point of the `ormix` console script."""
    from ormix.server._openreward_internals import defer_sdk_namespace

    # A command reads `module:Class` targets (a user's environment imports `openreward.environments`), and
    # the SDK's `__init__` would load its platform client and serializers first: 2.4 s of `ormix check`'s
    # 4.1 s on a user's environment (measured). Its top-level names still load on first use.
    defer_sdk_namespace()
    raise_open_files_limit()
    app(args=hoist_debug(expand_resume(sys.argv[1:])))


def raise_open_files_limit(want: int = 65_536) -> int | None:
    """Raise this process's soft limit of open files towards ``want`` (at most the hard limit); returns the
    soft limit now (``None`` where the platform has none, as on Windows).

    Each open session holds a socket (1,030 at 1,024 sessions, docs/benchmarks.md) and many systems start
    commands at a soft limit of 1,024 ("Too many open files") under a far higher hard one, which a process
    may raise itself to without privileges. The library leaves the limit alone: a process that embeds it
    owns its limits.

    Example:
        >>> raise_open_files_limit() is None or raise_open_files_limit() >= 1
        True
    """
    try:
        import resource
    except ImportError:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    # macOS answers an unlimited hard limit yet refuses more than kern.maxfilesperproc (10,240 by default).
    for limit in (target, min(target, 10_240)):
        if soft == resource.RLIM_INFINITY or soft >= limit:
            break
        with contextlib.suppress(ValueError, OSError):  # a container may refuse: the old limit stands
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
            break
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]
