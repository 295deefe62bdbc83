"""Shared fixtures: real ORS servers on loopback, started on ephemeral ports and shut down after."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")
os.environ.setdefault("OPENREWARD_LOG_LEVEL", "WARNING")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from ormix.local import serve_in_thread  # noqa: E402


@pytest.fixture(scope="session")
def echo_server():
    """`local:echo` served from a thread of the test process for the whole session."""
    with serve_in_thread(["local:echo"]) as server:
        yield server
