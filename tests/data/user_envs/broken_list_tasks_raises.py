"""Mistake: `list_tasks` raises (a typo in a key)."""

from _base import WORDS, Reverse


class Env(Reverse):
    @classmethod
    def list_tasks(cls, split: str) -> list[dict]:
        return [{"word": w["text"]} for w in WORDS]  # type: ignore[index]
