"""Mixture files: the one pydantic model of a mixture (every option declared once), loading and validation.

Example:
    >>> from ormix.config import MixtureConfig
    >>> config = MixtureConfig.model_validate({"members": {"echo": {"target": "local:echo"}}})
    >>> list(config.members)
    ['echo']
"""

from ormix.config._models import (
    AdaptiveConfig,
    EvalConfig,
    EvaluationConfig,
    MemberConfig,
    MixtureConfig,
    MixtureConfigError,
    PhaseConfig,
    PlatformPriorConfig,
    PriorConfig,
    Secret,
    SpecConfig,
    StragglerConfig,
    TaskFilterConfig,
    TelemetryConfig,
    UploadConfig,
    WarmStartConfig,
    load_mixture_config,
)

__all__ = [
    "AdaptiveConfig",
    "EvalConfig",
    "EvaluationConfig",
    "MemberConfig",
    "MixtureConfig",
    "MixtureConfigError",
    "PhaseConfig",
    "PlatformPriorConfig",
    "PriorConfig",
    "Secret",
    "SpecConfig",
    "StragglerConfig",
    "TaskFilterConfig",
    "TelemetryConfig",
    "UploadConfig",
    "WarmStartConfig",
    "load_mixture_config",
]
