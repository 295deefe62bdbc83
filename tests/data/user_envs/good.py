"""No mistake: the baseline the broken ones differ from."""

from _base import Reverse as Env  # noqa: F401
