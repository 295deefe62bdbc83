"""Shared fixtures: real ORS servers on loopback, started on ephemeral ports and shut down after.

The suite runs under pytest-xdist (`make test`: several worker processes). Whatever a test writes goes under
pytest's temporary directories, never the repository or the home directory: the tiny model and the warm-start
cache live in one cache directory for the whole run (`ORMIX_CACHE_DIR`, shared by the workers and inherited by
every subprocess a test starts), built once under a file lock.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from filelock import FileLock

os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")
os.environ.setdefault("OPENREWARD_LOG_LEVEL", "WARNING")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# TRL warns on every import of trl.experimental; the suite compares against its OpenRewardSpec on purpose.
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
# One torch thread per process (workers and the trainers they start): the tiny model's matrices are too small
# to gain from threads, and with several workers per core OpenMP's spinning threads starve each other (a warm
# start measured 162 s with the default threads, 70 s with one, on the same loaded 2-core machine).
os.environ.setdefault("OMP_NUM_THREADS", "1")
# A shell that starts the suite in the background (`make test &`, `nohup`) ignores SIGINT in it, and an
# ignored signal stays ignored in every process started below: the Ctrl-C tests' trainers would never see
# theirs. A handled signal is reset to the default in a child, so handling it here gives them a real Ctrl-C.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

from ormix.server import serve_in_thread  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _cache_dir(tmp_path_factory) -> Iterator[Path]:
    """Point ormix's cache (tiny model, warm starts) at this run's directory, not `~/.cache/ormix`.

    Under xdist the directory above a worker's temporary one is the run's, shared by its workers.
    """
    base = tmp_path_factory.getbasetemp()
    cache = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "ormix-cache"
    cache.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:  # subprocesses the tests start inherit it
        patch.setenv("ORMIX_CACHE_DIR", str(cache))
        yield cache


@pytest.fixture(scope="session")
def echo_server():
    """`local:echo` served from a thread of the test process for the whole session."""
    with serve_in_thread(["local:echo"]) as server:
        yield server


@pytest.fixture(scope="session")
def tiny_model(_cache_dir) -> str:
    """The offline tiny Qwen3 (random weights, local tokenizer, TRL's qwen3 template), built once per run.

    It is the cached default build, so `ormix train` (model `ormix:tiny`) in a test or a subprocess finds it.
    """
    from ormix.workbench._tiny import build_tiny_model

    with FileLock(str(_cache_dir / "tiny.lock")):  # one worker builds; the others wait and read it
        return str(build_tiny_model())


@pytest.fixture(scope="session", autouse=True)
def _close_shared_servers():
    """Stop the servers `local:` targets started, while the interpreter is still whole (not at exit)."""
    yield
    from ormix.server._shared import close_all

    close_all()


# The heaviest files, slowest first (from `--durations` of a whole run). pytest-xdist's `--dist loadfile`
# hands files to idle workers in collection order, so starting with the longest ones keeps one of them from
# running alone at the end while the other workers idle. Files not named here follow in collection order.
HEAVY_FILES = (
    "demo/test_skills_demo.py",
    "test_long_runs.py",
    "integrations/test_multiprocess_eval.py",
    "diagnostics/test_check_exit_codes.py",
    "evaluation/test_study_start.py",
    "test_train.py",
    "diagnostics/test_user_envs.py",
    "evaluation/test_runner.py",
    "integrations/test_concurrent.py",
    "telemetry/test_upload.py",
    "demo/test_demo_learns.py",
    "test_cleanup.py",
    "test_platform_train.py",
    "test_examples.py",
    "integrations/test_trl_mixture.py",
    "ors/test_faults.py",
    "test_readme.py",
    "evaluation/test_study.py",
    "test_secrets.py",
    "integrations/test_multiprocess_adaptive.py",
    "integrations/test_multiprocess.py",
    "integrations/test_lookahead.py",
    "cli/test_flags_reach_the_run.py",
    "integrations/test_group_scoring_trl.py",
    "test_reliability.py",
)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` (what `make test` passes): one worker more than the cores this process may use, unless
    ``PYTEST_XDIST_AUTO_NUM_WORKERS`` says how many (pytest-xdist's own hook reads it).

    Many tests wait on a subprocess (a trainer, a server child starting, a tool call) while a core idles; a
    spare worker fills those waits. Measured on the 2-core machine, same checkout, one run each (2026-12-04):
    2 workers 390 s wall (168% CPU), 3 workers 360 s (188%), 4 workers 369 s (191%).
    """
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return len(os.sched_getaffinity(0)) + 1


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests = Path(__file__).resolve().parent
    rank = {str(tests / name): i for i, name in enumerate(HEAVY_FILES)}
    items.sort(key=lambda item: rank.get(str(item.path), len(HEAVY_FILES)))  # stable: the rest keep order
