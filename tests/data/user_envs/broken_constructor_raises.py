"""Mistake: the constructor raises (it reads a key the tasks do not have)."""

from _base import Reverse


class Env(Reverse):
    def __init__(self, task_spec: dict, secrets: dict | None = None) -> None:
        super().__init__(task_spec, secrets)
        self.limit = task_spec["limit"]
