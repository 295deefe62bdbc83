"""Where an example writes its run: ``--output-dir`` when given (kept), else a temporary directory removed
when the example ends, so running the examples leaves nothing behind."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def output_dir(given: str | None, name: str) -> Iterator[Path]:
    if given:
        yield Path(given)
        return
    with tempfile.TemporaryDirectory(prefix=f"ormix-{name}-") as tmp:
        yield Path(tmp)


def where(given: str | None, path: Path) -> str:
    """How to name the output in an example's last line."""
    return str(path) if given else "a temporary directory (removed at exit; pass --output-dir DIR to keep it)"
