"""What ormix needs of the installed TRL, checked rather than assumed."""

from __future__ import annotations

import functools
import importlib.metadata
import inspect

from ormix.cache import cached_json

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


@functools.cache
def grpo_config_fields() -> dict[str, object]:
    """`GRPOConfig`'s settings and their defaults (`dataclasses.MISSING` → `None`; a default that is not
    JSON data, by its ``str``).

    Read from a cache keyed by the installed TRL's version when there is one: importing `GRPOConfig`
    imports transformers and torch (2-3 s), which ``ormix check`` would otherwise pay only to name a
    misspelt ``train:`` key. `ImportError` without TRL.

    Example:
        >>> fields = grpo_config_fields()
        >>> fields["num_generations"], "max_step" in fields
        (8, False)
    """
    try:
        version = importlib.metadata.version("trl")
    except importlib.metadata.PackageNotFoundError:
        raise ImportError("trl is not installed") from None
    return dict(cached_json(f"grpo-config-fields-trl-{version}", _grpo_config_fields))


def _grpo_config_fields() -> dict[str, object]:
    import dataclasses

    from trl import GRPOConfig

    def plain(value: object) -> object:
        if value is dataclasses.MISSING:
            return None
        return value if isinstance(value, (str, int, float, bool, type(None), list, dict)) else str(value)

    return {f.name: plain(f.default) for f in dataclasses.fields(GRPOConfig) if f.init}
