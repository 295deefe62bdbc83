"""The warm start counts a reference as solved only when its real session reaches `ormix eval`'s success
rule (scored, reward >= 1); a wrong reference that scores 0 or partial credit is no demonstration."""

from __future__ import annotations

import asyncio

import pytest
import yaml

from ormix import load_mixture
from ormix.workbench._warmup import (
    _episode_facts,
    _no_episode_scored,
    _plan_lines,
    build_transcripts,
    demonstrated,
)
from ormix.workbench.envs.sandbox import bwrap_status

_BWRAP_WHY = asyncio.run(bwrap_status())
pytestmark = pytest.mark.skipif(
    _BWRAP_WHY is not None, reason=f"needs a working bubblewrap (apt-get install -y bubblewrap): {_BWRAP_WHY}"
)

WRONG_REFERENCE = """
def wrong(row):
    # plausible but wrong: submits without doing the work (seta grades 0 or partial credit)
    return [("submit_solution", {})]
"""


def test_wrong_references_are_not_solved(tiny_model, tmp_path, monkeypatch):
    from transformers import AutoTokenizer

    (tmp_path / "badref.py").write_text(WRONG_REFERENCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    member = {"target": "local:seta", "num_tasks": 2, "local_serve": "thread"}
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)

    def transcripts(members):
        path = tmp_path / "mix.yaml"
        path.write_text(yaml.safe_dump({"name": "warm", "members": members}))
        return build_transcripts(load_mixture(path), tokenizer)

    wrong = transcripts({"bad": {**member, "reference": "badref:wrong"}})
    assert [t.outcome for t in wrong] == ["scored"] * 2 and not any(t.solved for t in wrong)
    refused = _no_episode_scored(wrong)
    assert refused is not None and refused.startswith("warm start: 0 of 2 reference episodes solved"), refused

    both = transcripts({"bad": {**member, "reference": "badref:wrong"}, "good": member})
    assert [t.solved for t in both if t.member == "good"] == [True, True]
    assert _no_episode_scored(both) is None
    kept = demonstrated(both)
    assert [t.member for t in kept] == ["good", "good"]  # SFT never demonstrates the wrong references
    made = {"steps": 1, **_episode_facts(both, kept, None)}
    assert made["solved"] == 2 and made["errors"] == 0 and made["left_out"] == 2
    lines = _plan_lines(both, made)
    assert "4 reference episodes (real sessions: 2 solved, 2 scored below 1)" in lines[0]
    assert lines[1].startswith(
        "  note: 2 of 4 episodes are left out of SFT: the references that did not solve"
    )


def test_the_warm_start_demonstrates_only_the_references_that_solved(tiny_model, tmp_path, monkeypatch):
    from ormix.workbench._warmup import warm_start

    (tmp_path / "badref.py").write_text(WRONG_REFERENCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("ORMIX_CACHE_DIR", str(tmp_path / "cache"))
    member = {"target": "local:seta", "num_tasks": 2, "local_serve": "thread"}

    def warm(members):
        path = tmp_path / "mix.yaml"
        path.write_text(yaml.safe_dump({"name": "warm", "members": members}))
        mixture = load_mixture(path)
        try:
            return warm_start(mixture, str(tiny_model), steps=1)
        finally:
            mixture.close()

    mixed = warm({"bad": {**member, "reference": "badref:wrong"}, "good": member})
    assert mixed.made["episodes"] == 4 and mixed.made["left_out"] == 2
    # What SFT trained on is the good member's episodes alone: a warm start of the good member alone is the
    # same one (its cache key hashes the demonstrated transcripts), found in the cache.
    alone = warm({"good": member})
    assert alone.path == mixed.path and alone.made["left_out"] == 0
