"""Mixtures: several ORS environments in one GRPO run (`MixtureSpec`), their sampling plans and ablations."""

from ormix.mixture.mixture import Member, MixtureError, MixtureSpec, load_mixture

__all__ = ["Member", "MixtureError", "MixtureSpec", "load_mixture"]
