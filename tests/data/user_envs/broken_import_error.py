"""Mistake: the module fails to import (a name used before it is defined)."""

from _base import Reverse

LIMIT = UNDEFINED_LIMIT  # noqa: F821


class Env(Reverse):
    pass
