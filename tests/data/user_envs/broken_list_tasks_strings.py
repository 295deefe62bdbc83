"""Mistake: `list_tasks` returns the words themselves, not one dict per task."""

from _base import WORDS, Reverse


class Env(Reverse):
    @classmethod
    def list_tasks(cls, split: str) -> list[dict]:
        return list(WORDS)  # type: ignore[arg-type]
