"""Mixtures: several ORS environments in one GRPO run (`MixtureSpec`), their one planner (`planner`, pure,
with the adaptive weights of `adaptive`) and ablations (`ablation`)."""

from __future__ import annotations

from ormix.mixture._mixture import Member, MixtureSpec, load_mixture

__all__ = ["Member", "MixtureSpec", "load_mixture"]
