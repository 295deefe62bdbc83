"""`python -m ormix.server [--host H] [--port N] [--idle-limit S] [--keep-alive S] [--ssl-certfile FILE
--ssl-keyfile FILE] [--insecure] local:NAME|module:Class ...`

The flags are `ServeOptions`' fields (`flag_of`); the key (required off loopback unless `--insecure`) is read
from `ORMIX_SERVE_API_KEY`. Once bound, it prints its ready line (`ready_line`) to stdout.
"""

from __future__ import annotations

import argparse
import os
import typing
from dataclasses import fields

from ormix.server._openreward_internals import defer_sdk_namespace

# First, before the environments import openreward: a server needs its `environments`, not its client. Only
# when run: a process that imports this module (for `parser`) keeps the SDK as it is.
if __name__ == "__main__":
    defer_sdk_namespace()

from ormix.server._auth import SERVE_API_KEY_ENV  # noqa: E402
from ormix.server._serving import ServeOptions, flag_of, ready_line, run_forever  # noqa: E402


def parser() -> argparse.ArgumentParser:
    """The command's flags, one per `ServeOptions` field but the key."""
    parser = argparse.ArgumentParser(prog="python -m ormix.server", description="Serve ORS environments.")
    parser.add_argument("envs", nargs="+")
    hints = typing.get_type_hints(ServeOptions)
    for option in fields(ServeOptions):
        if option.name == "api_key":
            continue
        help_ = option.metadata.get("help")
        if hints[option.name] is bool:
            parser.add_argument(flag_of(option.name), dest=option.name, action="store_true", help=help_)
            continue
        # `float | None` parses as a float: None is the default, never a value given.
        kind = next(
            t for t in typing.get_args(hints[option.name]) or (hints[option.name],) if t is not type(None)
        )
        parser.add_argument(
            flag_of(option.name),
            dest=option.name,
            type=kind,
            default=option.default,
            help=help_,
            metavar=option.name.removesuffix("_s").upper(),
        )
    return parser


def main(argv: list[str] | None = None) -> None:
    """Serve the environments named on the command line until SIGTERM/SIGINT."""
    args = vars(parser().parse_args(argv))
    envs = args.pop("envs")
    options = ServeOptions(**args, api_key=os.environ.get(SERVE_API_KEY_ENV) or None)
    run_forever(envs, options, on_ready=lambda server: print(ready_line(server), flush=True))


if __name__ == "__main__":
    main()
