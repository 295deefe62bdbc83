"""The app's one way to print a rich table: the header row first, then the rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def print_table(console: Any, title: str | None, rows: Sequence[Sequence[str]], **column: Any) -> None:
    """``rows`` (the header row first) as a table, printed; ``column``: each column's options."""
    from rich.table import Table

    table = Table(title=title)
    for name in rows[0]:
        table.add_column(name, **column)
    for row in rows[1:]:
        table.add_row(*row)
    console.print(table)
