"""Skill tasks of `local:terminals` and `local:seta` (splits ``ops-train`` and ``ops-test``): the prompt names
an operation to apply to a word, and the scoring action is a function of that prompt.

These back the demo (`mixtures/local-skills.yaml`, what `make demo` runs), where ormix's offline tiny model
learns something that transfers to tasks it never trained on. Each task's workspace holds ``word.txt`` (the
word, which the prompt also shows); each member has four operations, disjoint between the members (so
dropping a member in an ablation removes what only it teaches), applied to 24 words:

- ``local:terminals`` (binary reward at ``submit``): write the word to ``out.txt`` as it is, in upper case,
  reversed, or as its number of letters (``rev word.txt > out.txt``);
- ``local:seta`` (weighted checks at ``submit_solution``: ``result.txt`` exists, weight 1; its content is
  right, weight 3): write to ``result.txt`` the word twice, without its vowels, cut to its first three
  letters, or to its last letter.

Of the 96 (operation, word) pairs of a member, 64 are ``ops-train`` (16 words, each with all four
operations) and 32 ``ops-test`` (the 8 other words, each with all four operations): held-out tasks are words
the model never saw, with operations it did. The command that solves a task depends only on the operation
the prompt names (it reads the word from ``word.txt``: the tiny model does not learn, in a demo's budget, to
copy a word from the prompt into a command), so a policy that has learnt which command each operation names
solves held-out tasks too.

``OPS_REFERENCE`` holds that command per task; ``OPS_NEAR_MISS`` the member's one wrong operation
(`TERMINALS_MISS`: the number of bytes, newline included, one more than the letters; `SETA_MISS`: the word
without its first letter) for the tasks of every other word (`OPS_MISS_WORDS`), a plausible attempt that
scores 0.0 on terminals, 0.25 on seta. A warm start on both leaves the policy choosing between the command
the prompt names and the member's wrong one; what GRPO learns from the rewards (drop the wrong one) holds for
every task of that member, held out or not, and for no other member.

Example:
    >>> from ormix.workbench.envs.tasks.ops_tasks import SETA_OPS, TERMINALS_OPS, OPS_REFERENCE
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

from ormix.workbench.envs.echo import WORDS
from ormix.workbench.envs.tasks import Exists, FileEquals, Task

#: The splits of the skill tasks (train, held out).
OPS_SPLITS = ("ops-train", "ops-test")

#: Words the operations apply to (each one token of the tiny model's tokenizer; none reads the same reversed,
#: so reversing one always changes it).
OPS_WORDS = (*WORDS, "bravo", "delta", "kernel", "widget", "socket", "market", "paper", "alpha")


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
    Op("last", "cut to its last letter", "grep -o .$ word.txt > result.txt", lambda w: w[-1]),
)


#: terminals' wrong operation (every task's near miss): bytes, not letters (the newline counts).
TERMINALS_MISS = Op(
    "bytes", "as its number of bytes", "wc -c < word.txt > out.txt", lambda w: str(len(w) + 1)
)
#: seta's wrong operation (every task's near miss): the word without its first letter.
SETA_MISS = Op("tail", "without its first letter", "cut -c2- word.txt > result.txt", lambda w: w[1:])


def _strip_vowels(word: str) -> str:
    return "".join(c for c in word if c not in "aeiou")


def _held_out(word_index: int, op_index: int) -> bool:
    # Every third word is held out, with all four operations. Each training word comes with every operation,
    # so the word says nothing about which command scores and the warm start ties the command to the
    # operation the prompt names; a held-out word was never seen, so it pulls toward no command. (Held-out
    # (operation, word) pairs of seen words did: the tiny model tied each word to the operations it trained
    # with, and on a held-out pair picked one of those, the wrong ones by construction.)
    del op_index
    return word_index % 3 == 2


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


def _commands(
    ops: tuple[Op, ...], prefix: str, miss: Op | None = None, words: tuple[str, ...] = OPS_WORDS
) -> dict[str, str]:
    # Each task's own operation's command, or (miss) the member's wrong operation's.
    return {f"{prefix}{op.name}-{word}": (miss or op).command for op in ops for word in words}


#: The words whose tasks have a near miss (every other one): a warm start on references and near misses then
#: plays the wrong operation in a third of its episodes, each right one in a sixth. (On every task, the wrong
#: operation was half of what the tiny model saw: it became the policy's answer to nearly every prompt, and
#: GRPO never sampled the right command of some operations, so had nothing to learn from there.)
OPS_MISS_WORDS = OPS_WORDS[::2]


#: task_id -> the shell command that solves it.
OPS_REFERENCE: dict[str, str] = {
    **_commands(_TERMINALS_OPS, "ops-"),
    **_commands(_SETA_OPS, "seta-ops-"),
}
#: task_id -> a near miss: the member's wrong operation (`TERMINALS_MISS`, `SETA_MISS`) on the same word
#: (tasks of `OPS_MISS_WORDS` only).
OPS_NEAR_MISS: dict[str, str] = {
    **_commands(_TERMINALS_OPS, "ops-", TERMINALS_MISS, OPS_MISS_WORDS),
    **_commands(_SETA_OPS, "seta-ops-", SETA_MISS, OPS_MISS_WORDS),
}
