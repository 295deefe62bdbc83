"""Launching a support script on 2 CPU ranks with torchrun, as the multi-process tests do."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import ormix


def torchrun() -> str:
    """The torchrun installed beside this interpreter (with torch), else the one on PATH."""
    beside = Path(sys.executable).with_name("torchrun")
    found = str(beside) if beside.exists() else shutil.which("torchrun")
    assert found, "torchrun (installed with torch) is missing from this environment"
    return found


def rank_env(script: Path) -> dict[str, str]:
    """The ranks' environment: one thread each, TRL quiet, the script's folder and this ormix
    importable.

    The children import the ormix this test imports (a worktree's src/ ahead of an editable install).
    """
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "TRL_EXPERIMENTAL_SILENCE": "1",
        "PYTHONPATH": os.pathsep.join(
            [str(script.parent), str(Path(ormix.__file__).parents[1]), os.environ.get("PYTHONPATH", "")]
        ),
    }
