"""Mistake: `list_tasks` written as an instance method (the SDK calls it on the class)."""

from _base import WORDS, Reverse


class Env(Reverse):
    def list_tasks(self, split: str) -> list[dict]:  # type: ignore[override]
        return [{"word": w} for w in WORDS]
