"""Rows → `datasets.Dataset`, with columns that always build.

A mixture's rows come from several environments whose task metadata may disagree on a column's type (an
integer `difficulty` in one, a string in another). Arrow cannot hold both, so such a column — and only it — is
stored as JSON text; every other column keeps its values as they are, so reward functions keep reading
`difficulty`, `tags`, ... by their usual names.

Example:
    >>> ds = rows_to_dataset([{"task_index": 0, "difficulty": 1}, {"task_index": 1, "difficulty": "hard"}])
    >>> list(ds["difficulty"])
    ['1', '"hard"']
"""

from __future__ import annotations

import json
from typing import Any

#: Dataset columns ormix sets itself: a task-spec key never overwrites them.
RESERVED_COLUMNS = ("prompt", "task_index", "environment", "ors_split")


def rows_to_dataset(rows: list[dict[str, Any]]) -> Any:
    """Rows → `datasets.Dataset`; a metadata column whose values Arrow cannot unify is stored as JSON text.

    Example:
        >>> rows_to_dataset([{"prompt": "p", "task_index": 3}]).num_rows
        1
    """
    from datasets import Dataset

    columns: dict[str, list[Any]] = {}
    for row in rows:
        for key in row:
            columns.setdefault(key, [])
    for key in columns:
        columns[key] = [row.get(key) for row in rows]
    try:
        return Dataset.from_dict(columns)
    except Exception:  # noqa: BLE001 - pyarrow raises several types for mixed columns
        pass
    import pyarrow as pa

    for key, values in columns.items():
        if key in RESERVED_COLUMNS:
            continue
        try:
            pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            columns[key] = [None if v is None else json.dumps(v, sort_keys=True, default=str) for v in values]
    return Dataset.from_dict(columns)
