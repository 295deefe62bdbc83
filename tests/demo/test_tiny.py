"""The offline tiny model: deterministic, cached, atomic, loadable, accepted by TRL's tool-calling code."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import threading
import time

import pytest

from ormix._errors import UsageError
from ormix.workbench import _tiny as tiny
from ormix.workbench._tiny import TINY_MODEL, build_tiny_model, resolve_model, tiny_model_hash

ADDED = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]


def _files(path: pathlib.Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())}


@pytest.fixture(scope="module")
def built(tiny_model) -> pathlib.Path:
    return pathlib.Path(tiny_model)  # the session's build, in its cache directory


def test_build_is_deterministic_across_processes_and_import_is_light(built, tmp_path):
    # A fresh process: importing ormix.workbench._tiny must not pull in torch/transformers, and its build
    # must be
    # byte-identical to this process's (the tokenizer trainer's hash maps are seeded per process).
    other = tmp_path / "other"
    code = (
        "import sys\n"
        "import ormix.workbench._scripted\n"
        "import ormix.workbench._tiny as t\n"
        "heavy = [m for m in ('torch', 'transformers', 'trl') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        f"print(t.build_tiny_model({str(other)!r}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert pathlib.Path(proc.stdout.strip().splitlines()[-1]) == other
    assert _files(other) == _files(built)
    marker = json.loads((built / "ormix_tiny.json").read_text())
    assert marker["hash"] == tiny_model_hash(0)
    assert set(marker["files"]) == {p.name for p in built.iterdir()} - {"ormix_tiny.json"}


def test_seed_changes_only_the_weights(built, tmp_path):
    seeded = build_tiny_model(tmp_path / "s1", seed=1)
    a, b = _files(built), _files(seeded)
    assert a["tokenizer.json"] == b["tokenizer.json"]
    assert a["model.safetensors"] != b["model.safetensors"]
    assert tiny_model_hash(1) != tiny_model_hash(0)


def test_default_location_is_cached_and_atomic(monkeypatch, tmp_path):
    monkeypatch.setenv("ORMIX_CACHE_DIR", str(tmp_path / "cache"))
    results: list[pathlib.Path] = []
    errors: list[BaseException] = []

    def build() -> None:
        try:
            results.append(build_tiny_model())
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    # Two concurrent builders of the same cache entry: both must end with the same complete directory.
    threads = [threading.Thread(target=build) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert results[0] == results[1] == tmp_path / "cache" / f"tiny-qwen3-{tiny_model_hash(0)[:16]}"
    # No temporary or moved-aside directories are left next to it.
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [results[0].name]

    before = _files(results[0])
    start = time.perf_counter()
    again = build_tiny_model()
    assert time.perf_counter() - start < 0.5  # a cache hit reads a marker; no training, no torch work
    assert again == results[0] and _files(again) == before
    assert resolve_model(None) == str(again) == resolve_model(TINY_MODEL)


def test_lost_race_keeps_the_winner(built, tmp_path):
    # The rename of a concurrent builder that lost: the finished directory stays, the loser's copy is dropped.
    target = tmp_path / "model"
    build_tiny_model(target)
    loser = tmp_path / "loser"
    loser.mkdir()
    (loser / "junk").write_text("x")
    tiny._install(loser, target, tiny_model_hash(0))
    assert _files(target) == _files(built)


def test_rebuilds_a_stale_build_and_refuses_foreign_directories(built, tmp_path):
    stale = tmp_path / "stale"
    build_tiny_model(stale)
    marker = json.loads((stale / "ormix_tiny.json").read_text())
    marker["hash"] = "0" * 64
    (stale / "ormix_tiny.json").write_text(json.dumps(marker))
    (stale / "model.safetensors").write_bytes(b"corrupt")
    assert build_tiny_model(stale) == stale
    assert _files(stale) == _files(built)

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="not a tiny-model build"):
        build_tiny_model(foreign)
    assert (foreign / "notes.txt").read_text() == "mine"


def test_resolve_model_passes_other_names_through():
    assert resolve_model("Qwen/Qwen3-0.6B") == "Qwen/Qwen3-0.6B"
    assert resolve_model("/some/local/dir") == "/some/local/dir"


def test_loads_with_trl_qwen3_template_and_parses_tool_calls(built):
    import torch
    import trl
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.chat_template_utils import add_response_schema, parse_response, supports_tool_calling

    tokenizer = AutoTokenizer.from_pretrained(built)
    model = AutoModelForCausalLM.from_pretrained(built)

    trl_template = (pathlib.Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text()
    assert tokenizer.chat_template == trl_template
    assert (built / "chat_template.jinja").read_text() == trl_template

    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"
    assert model.config.eos_token_id == tokenizer.eos_token_id
    assert model.config.pad_token_id == tokenizer.pad_token_id
    assert model.config.max_position_embeddings >= 4096
    assert model.config.hidden_size == 64 and model.config.num_hidden_layers == 2
    assert 2000 <= len(tokenizer) <= 4096
    for token in ADDED:  # single tokens, and NOT special: they survive skip_special_tokens decoding
        ids = tokenizer(token, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1, token
        assert tokenizer.decode(ids, skip_special_tokens=True) == token
    assert (
        tokenizer.decode(
            tokenizer("<|im_end|>", add_special_tokens=False)["input_ids"], skip_special_tokens=True
        )
        == ""
    )

    assert supports_tool_calling(tokenizer)
    add_response_schema(tokenizer)
    assert tokenizer.response_template is not None

    def count(word: str, times: int) -> str:
        """Count a word.

        Args:
            word: The word.
            times: How often.
        """
        return word * times

    messages = [{"role": "user", "content": "Count apples."}]
    prompt = tokenizer.apply_chat_template(
        messages, tools=[count], add_generation_prompt=True, tokenize=False
    )
    assert '"name": "count"' in prompt and prompt.endswith("<|im_start|>assistant\n")
    prompt_ids = tokenizer.apply_chat_template(
        messages, tools=[count], add_generation_prompt=True, tokenize=True, return_dict=True
    )["input_ids"]
    completion = (
        '<tool_call>\n{"name": "count", "arguments": {"word": "apple", "times": 3}}\n</tool_call><|im_end|>'
    )
    ids = tokenizer(completion, add_special_tokens=False)["input_ids"]
    parsed = parse_response(tokenizer, ids, prefix=list(prompt_ids), tools=[count])
    assert parsed["tool_calls"] == [
        {"type": "function", "function": {"name": "count", "arguments": {"word": "apple", "times": 3}}}
    ]

    with torch.no_grad():
        logits = model(torch.tensor([list(prompt_ids) + ids])).logits
    assert logits.shape == (1, len(prompt_ids) + len(ids), model.config.vocab_size)
    assert torch.isfinite(logits).all()
