"""`python -m ormix.server [--host H] [--port N] [--idle-limit S] [--insecure] local:NAME|module:Class ...`

The key (required off loopback unless `--insecure`) is read from `ORMIX_SERVE_API_KEY`.
"""

from __future__ import annotations

import argparse

from ormix.server._openreward_internals import defer_sdk_namespace

# First, before the environments import openreward: a server needs its `environments`, not its client.
defer_sdk_namespace()

from ormix.server._serving import run_forever  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m ormix.server", description="Serve ORS environments.")
    parser.add_argument("envs", nargs="+")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--idle-limit", type=float, default=None)
    parser.add_argument("--insecure", action="store_true", help="serve off loopback without a key")
    args = parser.parse_args(argv)
    run_forever(
        args.envs, host=args.host, port=args.port, idle_limit_s=args.idle_limit, insecure=args.insecure
    )


if __name__ == "__main__":
    main()
