"""Skill tasks of `local:terminals` and `local:seta` (splits ``ops-train`` and ``ops-test``): the prompt names
an operation to apply to a word, and the scoring action is a function of that prompt.

These back the demo (`mixtures/local-demo.yaml`), where ormix's offline tiny model must learn something that
transfers to tasks it never trained on. Each task's workspace holds ``word.txt`` (the word, which the prompt
also shows); each member has four operations, disjoint between the members (so dropping a member in an
ablation removes what only it teaches), applied to 24 words:

- ``local:terminals`` (binary reward at ``submit``): write the word to ``out.txt`` as it is, in upper case,
  reversed, or as its number of letters (``rev word.txt > out.txt``);
- ``local:seta`` (weighted checks at ``submit_solution``: ``result.txt`` exists, weight 1; its content is
  right, weight 3): write to ``result.txt`` the word twice, without its vowels, cut to its first three
  letters, or to its last letter.

Of the 96 (operation, word) pairs of a member, 64 are ``ops-train`` and 32 ``ops-test``: every word and
every operation occurs in both splits, never the same pair (held-out tasks are new combinations). The
command that solves a task depends only on the operation the prompt names (it reads the word from
``word.txt``: the tiny model does not learn, in a demo's budget, to copy a word from the prompt into a
command), so a policy that has learnt which command each operation names solves held-out tasks too.
``OPS_REFERENCE`` holds that command per task; ``OPS_NEAR_MISS`` the command of the next operation (a
plausible attempt that scores 0.0 on terminals, 0.25 on seta).

Example:
    >>> from ormix.local.envs.tasks.ops_tasks import SETA_OPS, TERMINALS_OPS, OPS_REFERENCE
    >>> [t.instructions for t in TERMINALS_OPS if t.task_id == "ops-reverse-maple"]
    ['The file `word.txt` holds the word maple. Write it to `out.txt`, reversed.']
    >>> OPS_REFERENCE["ops-reverse-maple"]
    'rev word.txt > out.txt'
    >>> sum(t.split == "ops-test" for t in SETA_OPS), sum(t.split == "ops-train" for t in SETA_OPS)
    (32, 64)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ormix.local.envs.tasks import Exists, FileEquals, Task

__all__ = ["OPS_NEAR_MISS", "OPS_REFERENCE", "OPS_SPLITS", "OPS_WORDS", "SETA_OPS", "TERMINALS_OPS", "Op"]

#: The splits of the skill tasks (train, held out).
OPS_SPLITS = ("ops-train", "ops-test")

#: Words the operations apply to (each one token of the tiny model's tokenizer; none reads the same reversed,
#: so reversing one always changes it).
OPS_WORDS = (
    "apple",
    "river",
    "stone",
    "cloud",
    "ember",
    "maple",
    "orbit",
    "pixel",
    "quartz",
    "tundra",
    "violet",
    "willow",
    "zephyr",
    "harbor",
    "lantern",
    "meadow",
    "bravo",
    "delta",
    "kernel",
    "widget",
    "socket",
    "market",
    "paper",
    "alpha",
)


@dataclass(frozen=True)
class Op:
    """One operation: its name (in task ids), how the prompt names it, the shell command that applies it to
    the word in ``word.txt``, and what it makes of a word.

    Example:
        >>> Op("upper", "in upper case", "tr a-z A-Z < word.txt > out.txt", str.upper).apply("maple")
        'MAPLE'
    """

    name: str
    phrase: str
    command: str
    apply: Callable[[str], str]


_TERMINALS_OPS = (
    Op("copy", "as it is", "cp word.txt out.txt", lambda w: w),
    Op("upper", "in upper case", "tr a-z A-Z < word.txt > out.txt", str.upper),
    Op("reverse", "reversed", "rev word.txt > out.txt", lambda w: w[::-1]),
    Op(
        "length", "as its number of letters", "awk '{print length}' word.txt > out.txt", lambda w: str(len(w))
    ),
)
_SETA_OPS = (
    Op("twice", "twice on one line", "paste -d ' ' word.txt word.txt > result.txt", lambda w: f"{w} {w}"),
    Op("novowels", "without its vowels", "tr -d aeiou < word.txt > result.txt", lambda w: _strip_vowels(w)),
    Op("first3", "cut to its first three letters", "cut -c1-3 word.txt > result.txt", lambda w: w[:3]),
    Op("last", "cut to its last letter", "tail -c 2 word.txt > result.txt", lambda w: w[-1]),
)


def _strip_vowels(word: str) -> str:
    return "".join(c for c in word if c not in "aeiou")


def _held_out(word_index: int, op_index: int) -> bool:
    # A third of the pairs, spread so that every word and every operation is in both splits.
    return (word_index + op_index) % 3 == 0


def _tasks(ops: tuple[Op, ...], make: Callable[[Op, str, str], Task]) -> list[Task]:
    out = []
    for oi, op in enumerate(ops):
        for wi, word in enumerate(OPS_WORDS):
            out.append(make(op, word, OPS_SPLITS[1] if _held_out(wi, oi) else OPS_SPLITS[0]))
    return out


def _terminals_task(op: Op, word: str, split: str) -> Task:
    return Task(
        f"ops-{op.name}-{word}",
        "easy",
        "ops",
        f"The file `word.txt` holds the word {word}. Write it to `out.txt`, {op.phrase}.",
        files={"word.txt": word + "\n"},
        checks=[FileEquals("out.txt", path="out.txt", expected=op.apply(word))],
        split=split,
    )


def _seta_task(op: Op, word: str, split: str) -> Task:
    return Task(
        f"seta-ops-{op.name}-{word}",
        "Easy",
        "ops",
        f"The file `word.txt` holds the word {word}. Write it to `result.txt`, {op.phrase}.",
        files={"word.txt": word + "\n"},
        checks=[
            Exists("result.txt exists", weight=1.0, paths=("result.txt",)),
            FileEquals("result.txt content", weight=3.0, path="result.txt", expected=op.apply(word)),
        ],
        tags=("ops", op.name),
        split=split,
    )


#: `local:terminals`' skill tasks (96: 64 ``ops-train``, 32 ``ops-test``).
TERMINALS_OPS: list[Task] = _tasks(_TERMINALS_OPS, _terminals_task)
#: `local:seta`'s skill tasks (96: 64 ``ops-train``, 32 ``ops-test``).
SETA_OPS: list[Task] = _tasks(_SETA_OPS, _seta_task)


def _commands(ops: tuple[Op, ...], prefix: str, shift: int) -> dict[str, str]:
    # shift 0: each task's own operation; shift 1: the next operation's command on the same word.
    return {
        f"{prefix}{op.name}-{word}": ops[(oi + shift) % len(ops)].command
        for oi, op in enumerate(ops)
        for word in OPS_WORDS
    }


#: task_id -> the shell command that solves it.
OPS_REFERENCE: dict[str, str] = {
    **_commands(_TERMINALS_OPS, "ops-", 0),
    **_commands(_SETA_OPS, "seta-ops-", 0),
}
#: task_id -> a near miss: the command of another operation on the same word.
OPS_NEAR_MISS: dict[str, str] = {
    **_commands(_TERMINALS_OPS, "ops-", 1),
    **_commands(_SETA_OPS, "seta-ops-", 1),
}
