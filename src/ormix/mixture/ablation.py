"""Derived mixture files for ablations: leave one out, only one, each stamped with its manifest hash.

No server is contacted: the hash is the config hash (`MixtureConfig.config_hash`), which identifies the
composition the derived file asks for.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ormix.config import MixtureConfig


def derive(
    config: MixtureConfig, *, leave_one_out: bool = False, only: Sequence[str] = ()
) -> list[MixtureConfig]:
    """The derived configs: one per train member left out, and/or one per `only` name.

    Example:
        >>> from ormix.config import load_mixture_config
        >>> cfg = load_mixture_config("mixtures/local-demo.yaml")
        >>> [c.name for c in derive(cfg, leave_one_out=True, only=["seta"])]  # doctest: +NORMALIZE_WHITESPACE
        ['local-demo-without-echo', 'local-demo-without-terminals', 'local-demo-without-seta',
         'local-demo-only-seta']
    """
    derived = []
    if leave_one_out:
        derived += [config.without(name) for name in config.train_members]
    derived += [config.only(name) for name in only]
    if not derived:
        raise ValueError("nothing to derive: pass --leave-one-out and/or --only NAME")
    return derived


def write_ablations(
    config: MixtureConfig,
    out_dir: Path,
    *,
    source: str,
    leave_one_out: bool = False,
    only: Sequence[str] = (),
) -> list[tuple[Path, str]]:
    """Write each derived mixture as `<out_dir>/<name>.yaml`; returns (path, manifest hash) pairs."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for derived in derive(config, leave_one_out=leave_one_out, only=only):
        # The hash its run's manifest gets: trained with the file's own `train.max_steps`.
        digest = derived.sized_for().config_hash()
        header = f"Derived from {source} by `ormix ablate`.\nmanifest hash: {digest}"
        path = out_dir / f"{derived.name}.yaml"
        path.write_text(derived.to_yaml(header=header))
        written.append((path, digest))
    return written
