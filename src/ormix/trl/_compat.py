"""What ormix needs of the installed TRL, checked rather than assumed.

Read once per TRL and transformers version and cached (`ormix._cache`): importing TRL's trainer imports
transformers and torch (3-6 s), which ``ormix check`` and ``ormix inspect`` would otherwise pay only to name
a misspelt ``train:`` key or to say how a mixture's tools are routed.
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
from typing import Any

from ormix._cache import cached_json


def accepts_dict_factory() -> bool:
    """Whether the installed `GRPOTrainer` takes a dict `environment_factory` (per-environment tools).

    `False` when TRL is not installed (then a mixture routes through one namespaced adapter).

    Example:
        >>> accepts_dict_factory()
        True
    """
    try:
        return bool(_trl_facts()["accepts_dict_factory"])
    except ImportError:
        return False


def grpo_config_fields() -> dict[str, object]:
    """`GRPOConfig`'s settings and their defaults (`dataclasses.MISSING` → `None`; a default that is not
    JSON data, by its ``str``). `ImportError` without TRL.

    Example:
        >>> fields = grpo_config_fields()
        >>> fields["num_generations"], "max_step" in fields
        (8, False)
    """
    return dict(_trl_facts()["grpo_config_fields"])


#: Bumped when what `_read_trl_facts` returns changes shape.
_FACTS_FORMAT = 1


@functools.cache
def _trl_facts() -> dict[str, Any]:
    try:
        # GRPOConfig inherits most of its settings from transformers' TrainingArguments: both versions key it.
        versions = [importlib.metadata.version(p) for p in ("trl", "transformers")]
    except importlib.metadata.PackageNotFoundError:
        raise ImportError("trl is not installed") from None
    name = f"trl-facts-v{_FACTS_FORMAT}-trl{versions[0]}-transformers{versions[1]}"
    facts = cached_json(name, _read_trl_facts, valid=_facts_shape)
    return dict(facts)


def _facts_shape(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("grpo_config_fields"), dict)
        and isinstance(value.get("accepts_dict_factory"), bool)
    )


def _read_trl_facts() -> dict[str, Any]:
    import dataclasses

    from trl import GRPOConfig, GRPOTrainer

    def plain(value: object) -> object:
        if value is dataclasses.MISSING:
            return None
        return value if isinstance(value, (str, int, float, bool, type(None), list, dict)) else str(value)

    parameter = inspect.signature(GRPOTrainer.__init__).parameters.get("environment_factory")
    return {
        "grpo_config_fields": {f.name: plain(f.default) for f in dataclasses.fields(GRPOConfig) if f.init},
        "accepts_dict_factory": parameter is not None and "dict" in str(parameter.annotation),
    }
