"""Shared fixtures: real ORS servers on loopback, started on ephemeral ports and shut down after."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")
os.environ.setdefault("OPENREWARD_LOG_LEVEL", "WARNING")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# TRL warns on every import of trl.experimental; the suite compares against its OpenRewardSpec on purpose.
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from ormix.local import serve_in_thread  # noqa: E402


@pytest.fixture(scope="session")
def echo_server():
    """`local:echo` served from a thread of the test process for the whole session."""
    with serve_in_thread(["local:echo"]) as server:
        yield server


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """The offline tiny Qwen3 (random weights, local tokenizer, TRL's qwen3 template), built once per session."""
    from ormix.demo.tiny import build_tiny_model

    return str(build_tiny_model(tmp_path_factory.mktemp("tiny") / "model"))


@pytest.fixture(scope="session", autouse=True)
def _close_shared_servers():
    """Stop the servers `local:` targets started, while the interpreter is still whole (not at exit)."""
    yield
    from ormix.local.server.shared import close_all

    close_all()
