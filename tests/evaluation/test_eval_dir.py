"""An eval's bookkeeping without a model: the chunk order (pure), what makes two evals the same eval (pure),
and an eval directory resuming after a crash (real files in a temporary directory)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ormix.app._eval_dir import EvalDirectory
from ormix.app._eval_manifest import IDENTITY_KEYS, identity_changes
from ormix.evaluation._errors import EvalError
from ormix.evaluation._tasks import interleaved_chunks, task_key

keys = st.lists(
    st.tuples(st.sampled_from("abc"), st.just("test"), st.integers(0, 30)), unique=True, max_size=40
)


@given(keys, st.integers(1, 8))
def test_chunks_hold_every_task_once_in_each_members_order_with_members_interleaved(tasks, size):
    chunks = interleaved_chunks(tasks, size)
    flat = [key for chunk in chunks for key in chunk]
    assert sorted(flat) == sorted(tasks)
    assert all(len(chunk) == size for chunk in chunks[:-1]) and all(chunks)
    for member in "abc":
        assert [k for k in flat if k[0] == member] == [k for k in tasks if k[0] == member]
    # Round robin: while every member has tasks left, no member runs twice before the others ran once.
    members = {k[0] for k in tasks}
    shortest = min((sum(1 for k in tasks if k[0] == m) for m in members), default=0)
    head = flat[: shortest * len(members)]
    for start in range(0, len(head), max(len(members), 1)):
        assert {k[0] for k in head[start : start + len(members)]} == members


manifests = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["a", "b"]),
        "samples": st.integers(1, 3),
        "seed": st.integers(0, 1),
        "generation": st.fixed_dictionaries({"temperature": st.sampled_from([0.5, 1.0])}),
        "members": st.dictionaries(st.sampled_from("xy"), st.lists(st.integers(0, 3), max_size=3)),
        "k": st.lists(st.integers(1, 4), max_size=2),
    }
)


@given(manifests, manifests)
def test_two_manifests_are_the_same_eval_exactly_when_their_identity_keys_agree(old, new):
    changes = identity_changes(old, new)
    same = all(old.get(k) == new.get(k) for k in IDENTITY_KEYS)
    assert (changes == []) == same
    assert identity_changes(old, {**old, "k": [9], "success_threshold": 0.5}) == []  # reported, not measured


def test_a_crashed_eval_keeps_its_complete_tasks_and_drops_the_rest(tmp_path):
    out = EvalDirectory(tmp_path / "eval")
    out.prepare({"samples": 2}, overwrite=False)
    records = [{"member": "a", "split": "test", "task_index": i} for i in (0, 0, 1, 2, 2)]
    assert out.append(records, seq=0) == 5
    with out.records_path.open("a") as fh:
        fh.write('{"member": "a", "spl')  # the process died mid-line
    planned = {("a", "test", i) for i in (0, 1)}  # task 2 is no longer planned
    complete, kept = out.resume(planned, samples=2)
    assert (complete, kept) == ({("a", "test", 0)}, 2)
    assert [(task_key(r), r["seq"]) for r in out.records()] == [(("a", "test", 0), 0), (("a", "test", 0), 1)]


def test_another_eval_is_refused_and_overwrite_removes_only_the_evals_files(tmp_path):
    out = EvalDirectory(tmp_path)
    out.write_manifest({"model": "a", "samples": 4})
    out.append([{"member": "a", "task_index": 0}], seq=0)
    (tmp_path / "notes.txt").write_text("mine")
    out.prepare({"model": "a", "samples": 4, "k": [1, 4]}, overwrite=False)  # the same eval: kept
    with pytest.raises(EvalError, match=r'model: "a" → "b".*--overwrite'):
        out.prepare({"model": "b", "samples": 4}, overwrite=False)
    out.prepare({"model": "b", "samples": 4}, overwrite=True)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
    out.manifest_path.write_text("{not json")
    with pytest.raises(EvalError, match="not valid JSON"):
        out.prepare({}, overwrite=False)
