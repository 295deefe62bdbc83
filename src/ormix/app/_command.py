"""How every `ormix` command ends: one exit-status table and one failure wrapper.

A command's body returns its exit status; `run_command` turns what it raises into one line and a status:
an `OrmixError` prints ``error: ...`` and exits 2 (bad input, `ormix._errors.UsageError`) or 1 (a failure
while running); Ctrl-C exits 130 with the command's own hint (what was kept, how to resume); anything else
prints ``<command> failed: Type: message`` and exits 1, with the traceback when ``debug`` is on or
``ORMIX_DEBUG`` is set. `ormix train`, `ormix eval` and `ormix ablate --run` all end through it, so the
statuses the docs list are the statuses every command gives.

Example:
    >>> from rich.console import Console
    >>> from ormix._errors import TargetError
    >>> console = Console(width=100, color_system=None)
    >>> def body() -> int:
    ...     raise TargetError("unknown target 'local:nope'")
    >>> run_command(body, console=console, what="train")
    error: unknown target 'local:nope'
    2
    >>> run_command(lambda: EXIT_OK, console=console, what="train")
    0
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Callable, Iterator
from typing import Any

from ormix._errors import OrmixError, exit_status

#: Done.
EXIT_OK = 0
#: A failure while running (a server down, a run stopped by the coverage alarm, nothing scored).
EXIT_FAILED = 1
#: Bad input: a wrong file, flag or target; nothing was started.
EXIT_BAD_INPUT = 2
#: Ctrl-C (SIGINT), and SIGTERM: 128 + the signal number, as shells report them.
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


def run_command(
    body: Callable[[], int],
    *,
    console: Any,
    what: str,
    interrupted: str = "",
    debug: bool = False,
) -> int:
    """``body()``'s exit status, or the status of what it raised, said in one line on ``console``.

    ``what`` names the command in an unexpected failure's line (``"eval"`` -> ``eval failed: ...``);
    ``interrupted`` follows ``interrupted`` on Ctrl-C (e.g. ``": run the same command to resume"``).

    Example:
        >>> from rich.console import Console
        >>> def body() -> int:
        ...     raise KeyboardInterrupt
        >>> run_command(body, console=Console(color_system=None), what="eval", interrupted=": chunks kept")
        interrupted: chunks kept
        130
    """
    try:
        return body()
    except OrmixError as e:
        console.print(f"[red]error:[/red] {e}", highlight=False)
        return exit_status(e)
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted[/yellow]{interrupted}", highlight=False)
        return EXIT_INTERRUPTED
    except Exception as e:  # noqa: BLE001 - a command reports, with the traceback if asked, and exits 1
        if debug or os.environ.get("ORMIX_DEBUG"):
            console.print_exception(max_frames=8)
        console.print(f"[red]{what} failed:[/red] {type(e).__name__}: {e}", highlight=False)
        return EXIT_FAILED


@contextlib.contextmanager
def frozen_heap() -> Iterator[int]:
    """Keep the objects alive now out of Python's cyclic garbage collections for the block; yields how many.

    Entered once the model and trainer are built: their objects (the model's, TRL's, torch's: about 450,000
    with the tiny model) live as long as the run, yet every full collection walks them all, on whichever
    thread's allocation triggers it, most often the ORS loop thread, which holds every session's I/O while
    it runs. Measured (`benchmarks/scale_step.py`, R = 256, the tiny model on the 2-core machine, two runs
    each): the collector's CPU 305 and 287 ms a step before, 90 and 99 with the heap frozen; the full
    collections on the loop thread 229 and 144 ms a step, then 17 and 28. What the block drops still goes
    by reference counting; only cycles among the frozen objects wait for the block's end.

    Example:
        >>> with frozen_heap() as frozen:
        ...     frozen > 0
        True
    """
    gc.collect()
    gc.freeze()
    try:
        yield gc.get_freeze_count()
    finally:
        gc.unfreeze()
