"""The demo's skill tasks (`ormix.workbench.envs.tasks.ops_tasks`) in `local:terminals` and `local:seta`.

Shape of the splits (64 train, 32 held out per member; held-out tasks are words never trained on, each with
every operation), and,
over real HTTP into bubblewrap sandboxes, every operation's reference and near miss on a held-out task: the
reference earns 1.0, the near miss (the member's wrong operation) 0.0 on terminals and 0.25 on seta (only
`result.txt exists` passes).
"""

from __future__ import annotations

import asyncio
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ormix.ors import ORSClient
from ormix.server import serve_in_thread
from ormix.workbench.envs.sandbox import bwrap_status
from ormix.workbench.envs.seta import Seta
from ormix.workbench.envs.solutions import near_miss_for, reference_for
from ormix.workbench.envs.tasks.ops_tasks import (
    _SETA_OPS,
    _TERMINALS_OPS,
    OPS_MISS_WORDS,
    OPS_NEAR_MISS,
    OPS_REFERENCE,
    OPS_WORDS,
    SETA_MISS,
    SETA_OPS,
    TERMINALS_MISS,
    TERMINALS_OPS,
)
from ormix.workbench.envs.terminals import Terminals

_BWRAP_WHY = asyncio.run(bwrap_status())
needs_bwrap = pytest.mark.skipif(
    _BWRAP_WHY is not None, reason=f"needs a working bubblewrap (apt-get install -y bubblewrap): {_BWRAP_WHY}"
)
MEMBERS = {"terminals": (Terminals, TERMINALS_OPS, _TERMINALS_OPS), "seta": (Seta, SETA_OPS, _SETA_OPS)}


def pair(task_id: str) -> tuple[str, str]:
    """(operation, word) of a skill task id."""
    op, word = re.fullmatch(r"(?:seta-)?ops-(\w+)-(\w+)", task_id).groups()  # type: ignore[union-attr]
    return op, word


@pytest.mark.parametrize("member", sorted(MEMBERS))
def test_splits_hold_64_train_and_32_held_out_tasks_on_new_words_with_every_operation(member):
    env, tasks, ops = MEMBERS[member]
    assert env.list_splits() == ["train", "test", "ops-test", "ops-train"]
    train, test = env.list_tasks("ops-train"), env.list_tasks("ops-test")
    assert (len(train), len(test)) == (64, 32)
    # The original catalogue is untouched.
    assert len(env.list_tasks("train")) in (25, 28) and len(env.list_tasks("test")) in (5, 6)
    train_pairs = {pair(t["task_id"]) for t in train}
    test_pairs = {pair(t["task_id"]) for t in test}
    train_words, test_words = {w for _, w in train_pairs}, {w for _, w in test_pairs}
    # Held-out tasks are words never trained on; every word, in either split, comes with all four operations
    # (so a training word says nothing about which command scores).
    assert not train_words & test_words and train_words | test_words == set(OPS_WORDS)
    assert (len(train_words), len(test_words)) == (16, 8)
    for pairs, words in ((train_pairs, train_words), (test_pairs, test_words)):
        assert pairs == {(op.name, w) for op in ops for w in words}
    with pytest.raises(ValueError, match="unknown split 'ops-validation'"):
        env.list_tasks("ops-validation")


@given(st.sampled_from(sorted(MEMBERS)), st.sampled_from(OPS_WORDS), st.integers(0, 3))
def test_the_near_miss_is_the_members_wrong_operation_and_yields_another_result(member, word, op_index):
    _, tasks, ops = MEMBERS[member]
    op = ops[op_index]
    task_id = f"{'seta-' if member == 'seta' else ''}ops-{op.name}-{word}"
    task = next(t for t in tasks if t.task_id == task_id)
    assert word in task.instructions and op.phrase in task.instructions
    assert task.files == {"word.txt": word + "\n"}
    # The reference applies the task's operation; the near miss (every other word's tasks), the member's one
    # wrong operation (none of its four), which writes something else.
    target = f"local:{member}"
    assert OPS_REFERENCE[task_id] == op.command
    assert reference_for(target)({"task_id": task_id})[0] == ("bash", {"command": op.command})
    if word not in OPS_MISS_WORDS:
        assert task_id not in OPS_NEAR_MISS and near_miss_for(target)({"task_id": task_id}) is None
        return
    miss = TERMINALS_MISS if member == "terminals" else SETA_MISS
    assert OPS_NEAR_MISS[task_id] == miss.command != op.command
    assert miss.command not in {o.command for o in ops}
    assert all(miss.apply(word) != o.apply(word) for o in ops)
    assert near_miss_for(target)({"task_id": task_id})[0] == ("bash", {"command": miss.command})


@needs_bwrap
@pytest.mark.parametrize("member", sorted(MEMBERS))
def test_each_operations_reference_scores_1_and_its_near_miss_less_in_real_sessions(member):
    env, _, ops = MEMBERS[member]
    submit = "submit" if member == "terminals" else "submit_solution"
    held_out = env.list_tasks("ops-test")
    # One held-out task per operation (the first of each).
    picked = {pair(t["task_id"])[0]: i for i, t in reversed(list(enumerate(held_out)))}
    assert set(picked) == {op.name for op in ops}

    async def play(c: ORSClient, index: int, command: str) -> float | None:
        async with c.session(split="ops-test", index=index) as s:
            r = await s.call("bash", {"command": command})
            assert r.metadata["exit_code"] == 0, r.text
            final = await s.call(submit, {})
            assert final.finished, final.text
            return final.reward

    async def main():
        async with ORSClient(srv.url, env_name=member, ping_interval_s=None, timeout_s=60) as c:
            jobs = []
            for index in picked.values():
                task_id = held_out[index]["task_id"]
                jobs += [play(c, index, OPS_REFERENCE[task_id]), play(c, index, OPS_NEAR_MISS[task_id])]
            return await asyncio.gather(*jobs)

    with serve_in_thread([f"local:{member}"]) as srv:
        results = asyncio.run(main())
    references, misses = results[0::2], results[1::2]
    assert references == [1.0] * 4, results
    assert misses == [0.0 if member == "terminals" else 0.25] * 4, results
