"""What ormix needs of the installed TRL, checked rather than assumed."""

from __future__ import annotations

import inspect

__all__ = ["accepts_dict_factory", "grpo_config_fields"]


def accepts_dict_factory() -> bool:
    """Whether the installed `GRPOTrainer` takes a dict `environment_factory` (per-environment tools).

    `False` when TRL is not installed (then a mixture routes through one namespaced adapter).
    """
    try:
        from trl import GRPOTrainer
    except ImportError:
        return False
    parameter = inspect.signature(GRPOTrainer.__init__).parameters.get("environment_factory")
    return parameter is not None and "dict" in str(parameter.annotation)


def grpo_config_fields() -> dict[str, object]:
    """`GRPOConfig`'s settings and their defaults (`dataclasses.MISSING` → `None`).

    Example:
        >>> fields = grpo_config_fields()
        >>> fields["num_generations"], "max_step" in fields
        (8, False)
    """
    import dataclasses

    from trl import GRPOConfig

    return {
        f.name: (f.default if f.default is not dataclasses.MISSING else None)
        for f in dataclasses.fields(GRPOConfig)
        if f.init
    }
