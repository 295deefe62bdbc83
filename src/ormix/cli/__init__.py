"""The `ormix` command line."""

from ormix.cli.app import app, main

__all__ = ["app", "main"]
