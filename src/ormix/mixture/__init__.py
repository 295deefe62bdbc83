"""Mixtures: several ORS environments in one GRPO run (`MixtureSpec`), their sampling plans (`sampling`, pure)
and ablations (`ablation`).

`MixtureSpec`, `Member` and `load_mixture` are imported lazily, so the pure `ormix.mixture.sampling` can be
used (by `ormix.config`'s checks) without importing the specs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["Member", "MixtureSpec", "load_mixture"]

if TYPE_CHECKING:  # pragma: no cover
    from ormix.mixture.mixture import Member, MixtureSpec, load_mixture


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ormix.mixture import mixture

        return getattr(mixture, name)
    raise AttributeError(f"module 'ormix.mixture' has no attribute {name!r}")
