"""Mistake: `get_prompt` raises (a typo in an attribute)."""

from _base import Reverse, TextBlock


class Env(Reverse):
    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text=f"Reverse the word {self.wrod!r} and call answer.")]  # type: ignore[attr-defined]
