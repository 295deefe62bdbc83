"""Sessions opened ahead: which rows of the coming steps to open now (pure logic, no I/O).

A static plan's rows are known before their step starts: TRL's sampler is deterministic, so the order of the
whole epoch is known once it starts (`generation_batches` cuts it into the batches TRL generates for). While
step t generates and trains, the sessions of steps t+1 … t+lookahead can be opening (`ormix.rollout._ahead`),
so an open slower than a step stops being on the critical path.

`locate` finds the batch being generated in that schedule (by its rows, so a resumed run that skipped
batches, or a schedule that changed, is found again or not at all); `choose_ahead` picks which rows of the
following batches to open now, within the bounds: per member at most its `max_concurrent_sessions` opened
ahead, in all at most `max_in_flight`. Rows beyond them open at their step, as without lookahead.

Example:
    >>> batches = generation_batches(list(range(8)), batch_size=2, repeat=1)
    >>> batches
    [[0, 1], [2, 3], [4, 5], [6, 7]]
    >>> locate([[("a",), ("b",)], [("c",), ("d",)]], [("c",), ("d",)], start=0)
    1
    >>> choose_ahead([["m", "m", "n"]], member_caps={"m": 1}, max_in_flight=8)
    [[0, 2]]
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

#: Steps whose sessions open ahead by default.
DEFAULT_LOOKAHEAD = 1


def generation_batches(indices: Sequence[int], batch_size: int, repeat: int = 1) -> list[list[int]]:
    """The sampler's index order cut into the batches TRL generates for.

    The dataloader yields `batch_size` indices at a time; TRL generates on every `repeat`-th of them (with
    ``num_iterations`` > 1 the same batch comes `repeat` times and is generated once). A short last batch is
    kept.

    Example:
        >>> generation_batches([3, 3, 1, 1, 3, 3, 1, 1], batch_size=2, repeat=2)
        [[3, 3], [3, 3]]
    """
    size, every = max(1, batch_size), max(1, repeat)
    chunks = [list(indices[i : i + size]) for i in range(0, len(indices), size)]
    return chunks[::every]


def locate(schedule: Sequence[Sequence[Hashable]], batch: Sequence[Hashable], start: int = 0) -> int | None:
    """The position in `schedule` (batches of row keys) of the batch now generated, searching from `start`
    first (the expected place), then from the beginning; ``None`` when it is not in the schedule.

    Example:
        >>> locate([[1], [2], [1]], [1], start=1)
        2
        >>> locate([[1], [2]], [3]) is None
        True
    """
    wanted = list(batch)
    order = list(range(max(0, start), len(schedule))) + list(range(min(max(0, start), len(schedule))))
    return next((i for i in order if list(schedule[i]) == wanted), None)


def choose_ahead(
    steps: Sequence[Sequence[str | None]],
    *,
    member_caps: Mapping[str, int | None] | None = None,
    max_in_flight: int,
) -> list[list[int]]:
    """Which rows of the coming steps to open now: for each step (its rows' members, ``None`` for a row that
    is not ormix's), the positions to open, nearest step first, in row order, within the bounds.

    Example:
        >>> choose_ahead([["a", "a"], ["a", None, "b"]], member_caps={"a": 3}, max_in_flight=4)
        [[0, 1], [0, 2]]
    """
    caps = dict(member_caps or {})
    taken: dict[str, int] = {}
    budget = max(0, max_in_flight)
    out: list[list[int]] = []
    for members in steps:
        chosen = []
        for position, member in enumerate(members):
            if member is None or budget == 0:
                continue
            cap = caps.get(member)
            if cap is not None and taken.get(member, 0) >= cap:
                continue
            chosen.append(position)
            taken[member] = taken.get(member, 0) + 1
            budget -= 1
        out.append(chosen)
    return out
