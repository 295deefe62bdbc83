"""Mixture files: the pydantic models behind ``mixtures/*.yaml`` and their validation."""

from ormix.config.models import *  # noqa: F403
from ormix.config.models import __all__  # noqa: F401
