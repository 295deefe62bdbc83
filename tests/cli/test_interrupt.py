"""Ctrl-C ends every `ormix` command with status 130 and one ``interrupted`` line (click alone would print
"Aborted!" and exit 1, which a shell script reads as a failure, not an interruption)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("command", ["inspect", "check"])
def test_ctrl_c_during_a_network_wait_exits_130(tmp_path, command):
    # A server that accepts and never answers: the command blocks in its first request, where we interrupt.
    listener = socket.create_server(("127.0.0.1", 0))
    accepted = threading.Event()
    held: list[socket.socket] = []

    def accept() -> None:
        conn, _ = listener.accept()
        held.append(conn)
        accepted.set()

    threading.Thread(target=accept, daemon=True).start()
    port = listener.getsockname()[1]
    mixture = tmp_path / "silent.yaml"
    mixture.write_text(
        f'members:\n  silent:\n    target: "http://127.0.0.1:{port}"\n    env_name: silent\n'
        "    num_tasks: 2\nprompts_per_step: 1\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ormix.app", command, str(mixture)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert accepted.wait(120), "the command never connected"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        listener.close()
        for conn in held:
            conn.close()
    assert proc.returncode == 130, out[-2000:] + err[-2000:]
    assert "interrupted" in out + err
    assert "Aborted!" not in out + err


def test_ablate_checks_k_by_the_rule_eval_uses(tmp_path):
    # `ormix ablate --run -k` once parsed its own list and let k = 0 through to the evals.
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = tmp_path / "study"
    done = subprocess.run(
        [sys.executable, "-m", "ormix.app", "ablate", str(ROOT / "mixtures" / "local-demo.yaml"), "--run"]
        + ["--out", str(out), "-k", "0,4"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "-k: k takes whole numbers >= 1" in done.stdout + done.stderr
    assert not out.exists()
