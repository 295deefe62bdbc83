"""An offline tiny Qwen3-style model for demos, tests and `--warmup` runs.

`build_tiny_model()` makes, without any network, a model directory that `AutoModelForCausalLM` and
`AutoTokenizer` load like a hub checkpoint:

- a byte-level BPE (about 2.5k tokens) trained with `tokenizers` on the corpus shipped next to this module
  (`tiny_corpus.txt`); special tokens `<|endoftext|>` (pad), `<|im_start|>`, `<|im_end|>` (eos); `<think>`,
  `</think>`, `<tool_call>`, `</tool_call>`, `<tool_response>`, `</tool_response>` are added as NON-special
  tokens, because TRL's response parser must see them after decoding (as special tokens they are dropped);
- TRL's shipped `trl/chat_templates/qwen3.jinja`, byte for byte, as the chat template: TRL recognises
  templates by exact string, so `supports_tool_calling`, `add_response_schema` and the tool-call parser work;
- a randomly initialised `Qwen3ForCausalLM` (hidden size 64, 2 layers, 4096 positions), seeded.

The directory is cached under ``$ORMIX_CACHE_DIR`` or ``$XDG_CACHE_HOME/ormix`` (default ``~/.cache/ormix``),
named after a hash of everything that determines its bytes (build recipe, seed, corpus, template, library
versions), and written atomically (temporary sibling directory + rename), so concurrent processes never see a
half-written model. Importing this module imports neither torch nor transformers.

Example:
    >>> from ormix.workbench._tiny import build_tiny_model, resolve_model
    >>> # Not run as a doctest: the first build trains a tokenizer and writes a torch model (seconds).
    >>> path = build_tiny_model()                    # doctest: +SKIP
    >>> resolve_model(None) == str(path)             # doctest: +SKIP
    True
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import pathlib
import shutil
import tempfile
from typing import Any

from ormix._cache import default_cache_dir
from ormix._errors import UsageError
from ormix._hashing import content_hash

#: What a CLI accepts (and `resolve_model` maps) to mean "the offline tiny model". The colon keeps it from
#: ever naming a hub repository or a local directory by accident.
TINY_MODEL = "ormix:tiny"

# Bump when the recipe below changes in a way the hashed inputs do not capture.
_BUILD_VERSION = 1
_MARKER = "ormix_tiny.json"
_CORPUS = pathlib.Path(__file__).with_name("tiny_corpus.txt")

_SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
_ADDED_TOKENS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
_EOS = "<|im_end|>"
_PAD = "<|endoftext|>"
_VOCAB_SIZE = 4096  # an upper bound: the corpus is exhausted at about 2.5k merges
_MODEL_CONFIG: dict[str, Any] = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": True,
    "rms_norm_eps": 1e-6,
}
_LIBRARIES = ("torch", "transformers", "tokenizers", "trl")


def _trl_chat_template_path() -> pathlib.Path:
    # find_spec on the top-level package locates it without executing it (importing trl imports torch).
    spec = importlib.util.find_spec("trl")
    if spec is None or not spec.submodule_search_locations:
        raise UsageError(
            "The tiny model needs TRL's qwen3 chat template, but `trl` is not installed. "
            "Install the training extras: pip install 'ormix[trl]'."
        )
    path = pathlib.Path(next(iter(spec.submodule_search_locations))) / "chat_templates" / "qwen3.jinja"
    if not path.is_file():
        raise UsageError(
            f"TRL is installed but has no chat template at {path}; the tiny model needs trl>=1.16 "
            "(pip install -U 'trl>=1.16')."
        )
    return path


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tiny_model_hash(seed: int = 0) -> str:
    """The content hash a tiny-model build with this `seed` gets in this installation.

    It covers the build recipe, the seed, the corpus, TRL's qwen3 template and the versions of torch,
    transformers, tokenizers and TRL (their serialisation can change between versions).

    Example:
        >>> len(tiny_model_hash()), tiny_model_hash() == tiny_model_hash(seed=0) != tiny_model_hash(seed=1)
        (64, True)
    """
    recipe = {
        "build": _BUILD_VERSION,
        "seed": seed,
        "special_tokens": _SPECIAL_TOKENS,
        "added_tokens": _ADDED_TOKENS,
        "eos": _EOS,
        "pad": _PAD,
        "vocab_size": _VOCAB_SIZE,
        "model": _MODEL_CONFIG,
        "corpus": _sha256(_CORPUS.read_bytes()),
        "chat_template": _sha256(_trl_chat_template_path().read_bytes()),
        "versions": {name: _version(name) for name in _LIBRARIES},
    }
    return content_hash(recipe)


def _read_marker(path: pathlib.Path) -> dict[str, Any] | None:
    try:
        return json.loads((path / _MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _is_complete(path: pathlib.Path, digest: str) -> bool:
    marker = _read_marker(path)
    return (
        marker is not None
        and bool(marker)
        and marker.get("hash") == digest
        and all((path / name).is_file() for name in marker.get("files", {}))
    )


def _train_tokenizer(out_dir: pathlib.Path, chat_template: str) -> Any:
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    text = _CORPUS.read_text(encoding="utf-8")
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=_VOCAB_SIZE,
        min_frequency=1,
        special_tokens=_SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # Paragraphs as training units: order is fixed, so the learned merges are reproducible.
    backend.train_from_iterator(text.split("\n\n"), trainer=trainer)
    backend.add_tokens([AddedToken(t, special=False, normalized=False) for t in _ADDED_TOKENS])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=_EOS,
        pad_token=_PAD,
        model_max_length=_MODEL_CONFIG["max_position_embeddings"],
        padding_side="left",
    )
    tokenizer.chat_template = chat_template
    tokenizer.save_pretrained(str(out_dir))
    return tokenizer


def _build_model(out_dir: pathlib.Path, tokenizer: Any, seed: int) -> None:
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    eos_id = tokenizer.convert_tokens_to_ids(_EOS)
    pad_id = tokenizer.convert_tokens_to_ids(_PAD)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        **_MODEL_CONFIG,
    )
    # fork_rng: seeding must not disturb the caller's global RNG state.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=eos_id, pad_token_id=pad_id, bos_token_id=None)
    model.save_pretrained(str(out_dir), safe_serialization=True)


def _write_build(tmp: pathlib.Path, digest: str, seed: int) -> None:
    from transformers.utils import logging as hf_logging

    chat_template = _trl_chat_template_path().read_text(encoding="utf-8")
    # A build takes a few seconds; transformers' per-shard progress bars are only noise here.
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        tokenizer = _train_tokenizer(tmp, chat_template)
        _build_model(tmp, tokenizer, seed)
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    files = {p.name: _sha256(p.read_bytes()) for p in sorted(tmp.iterdir()) if p.is_file()}
    marker = {
        "hash": digest,
        "seed": seed,
        "build": _BUILD_VERSION,
        "versions": {name: _version(name) for name in _LIBRARIES},
        "files": files,
    }
    # The marker is written last: its presence means the directory is complete.
    (tmp / _MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def build_tiny_model(path: str | os.PathLike[str] | None = None, *, seed: int = 0) -> pathlib.Path:
    """Build (once) and return the directory of the offline tiny model.

    Args:
        path: Target directory. Default: ``default_cache_dir() / "tiny-qwen3-<hash>"``. An existing
            directory is reused when it holds a complete build with the same hash, rebuilt when it holds
            another tiny build, and refused when it holds anything else.
        seed: Seed of the random weights (the tokenizer does not depend on it).

    Returns:
        The model directory, loadable with ``AutoModelForCausalLM.from_pretrained`` and
        ``AutoTokenizer.from_pretrained``.

    Raises:
        UsageError: TRL is missing, or `path` is a non-empty directory that is not a tiny-model build.

    Example:
        Not run as a doctest: it builds (or loads) a torch model, which takes seconds.

        >>> from transformers import AutoModelForCausalLM, AutoTokenizer   # doctest: +SKIP
        >>> path = build_tiny_model()                                      # doctest: +SKIP
        >>> model = AutoModelForCausalLM.from_pretrained(path)             # doctest: +SKIP
        >>> tokenizer = AutoTokenizer.from_pretrained(path)                # doctest: +SKIP
    """
    digest = tiny_model_hash(seed)
    target = pathlib.Path(path) if path is not None else default_cache_dir() / f"tiny-qwen3-{digest[:16]}"
    target = target.expanduser().absolute()
    if _is_complete(target, digest):
        return target
    if target.exists() and not target.is_dir():
        raise UsageError(f"Cannot build the tiny model at {target}: it exists and is not a directory.")
    if target.is_dir() and any(target.iterdir()) and _read_marker(target) is None:
        raise UsageError(
            f"Cannot build the tiny model at {target}: the directory is not empty and is not a tiny-model "
            "build. Pass an empty or new directory, or omit `path` to use the cache."
        )

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        _write_build(tmp, digest, seed)
        _install(tmp, target, digest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if not _is_complete(target, digest):  # pragma: no cover - only if another writer left a different build
        raise UsageError(f"The tiny model at {target} is incomplete after building; remove it and retry.")
    return target


def _install(tmp: pathlib.Path, target: pathlib.Path, digest: str) -> None:
    """Move the finished build into place atomically, tolerating a concurrent builder."""
    if target.is_dir() and not _is_complete(target, digest):
        # A stale or partial tiny build (marker checked by the caller): move it aside, then replace it.
        trash = pathlib.Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
        with contextlib.suppress(FileNotFoundError):
            os.replace(target, trash / "old")
        shutil.rmtree(trash, ignore_errors=True)
    try:
        os.rename(tmp, target)  # atomic on one filesystem; fails if another process got there first
    except OSError:
        if not _is_complete(target, digest):
            raise


def resolve_model(model: str | None) -> str:
    """Map a CLI/config model argument to something `from_pretrained` loads.

    ``None`` or :data:`TINY_MODEL` (``"ormix:tiny"``) builds (once) and returns the tiny model's directory;
    anything else (a hub id or a local path) is returned unchanged.

    Example:
        >>> resolve_model("Qwen/Qwen3-0.6B")
        'Qwen/Qwen3-0.6B'
    """
    if model is None or model == TINY_MODEL:
        return str(build_tiny_model())
    return model
