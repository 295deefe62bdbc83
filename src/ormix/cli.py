"""The `ormix` command line: serve, inspect, ablate (and train, report, check as they land).

Each command imports what it needs when it runs, so `ormix --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Train one LLM agent on a mixture of ORS environments with TRL.")
console = Console()
err = Console(stderr=True)


@app.command()
def serve(
    envs: Annotated[list[str], typer.Argument(help="local:NAME or module:Class, one or more")],
    port: Annotated[int, typer.Option(help="port to listen on (0 = any free port)")] = 8080,
    host: Annotated[str, typer.Option(help="address to bind; keep loopback unless you mean it")] = "127.0.0.1",
    idle_limit: Annotated[float | None, typer.Option(help="reap sessions idle this many seconds")] = None,
) -> None:
    """Serve local environments (e.g. `ormix serve local:terminals local:seta --port 8080`)."""
    from .local.registry import UnknownEnvironmentError, load_environment_class
    from .local.serving import run_forever

    try:
        for env in envs:
            load_environment_class(env)
    except UnknownEnvironmentError as e:
        err.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    err.print(f"serving {', '.join(envs)} on http://{host}:{port} (Ctrl-C to stop)")
    try:
        run_forever(envs, host=host, port=port, idle_limit_s=idle_limit)
    except KeyboardInterrupt:
        pass


def _load(path: Path):
    from .config import MixtureFileError
    from .mixture import MixtureError, load_mixture

    try:
        return load_mixture(str(path))
    except (MixtureFileError, MixtureError) as e:
        err.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None


def main() -> None:
    """Entry point of the `ormix` console script."""
    app()


if __name__ == "__main__":
    main()
