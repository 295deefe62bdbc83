"""What ``ormix train`` prints while it trains: the step lines `ormix.trl._lifecycle.ProgressLine` emits, and
ormix's alarms as lines between them (the library only emits; the app prints)."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from typing import Any


def console_lines(console: Any) -> Callable[[str], None]:
    """A `ProgressLine`'s ``show``: each line (rich markup) printed on ``console``, unwrapped.

    Example:
        >>> import io
        >>> from rich.console import Console
        >>> out = io.StringIO()
        >>> console_lines(Console(file=out, color_system=None))("[bold]step 1/2[/bold] │ loss 0.1000")
        >>> print(out.getvalue().strip())
        step 1/2 │ loss 0.1000
    """
    return lambda line: console.print(line, highlight=False, soft_wrap=True)


@contextlib.contextmanager
def alarms_on_console(console: Any) -> Iterator[None]:
    """Within the block, ormix's alarms (`OrmixAlarmWarning`: the coverage alarm in red, the no-learning
    alarm and the note on unscored rollouts in yellow) are lines of ``console`` between the step lines
    instead of Python warnings on stderr, where they would name the transformers line that ran the callback.
    Other warnings show as before.

    Example:
        >>> import io, warnings
        >>> from rich.console import Console
        >>> from ormix.telemetry._alarm import CoverageAlarmWarning
        >>> out = io.StringIO()
        >>> with alarms_on_console(Console(file=out, color_system=None)):
        ...     warnings.warn("ormix: environment 'seta' is failing", CoverageAlarmWarning)
        >>> print(out.getvalue().strip())
        ormix: environment 'seta' is failing
    """
    from ormix.telemetry._alarm import CoverageAlarmWarning, OrmixAlarmWarning

    shown = warnings.showwarning

    def show(message: Any, category: type[Warning], *where: Any, **more: Any) -> None:
        if issubclass(category, CoverageAlarmWarning):
            console.print(f"  [red]{message}[/red]", highlight=False, soft_wrap=True)
        elif issubclass(category, OrmixAlarmWarning):
            console.print(f"  [yellow]{message}[/yellow]", highlight=False, soft_wrap=True)
        else:
            shown(message, category, *where, **more)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield
