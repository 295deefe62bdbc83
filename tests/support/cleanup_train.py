"""A real `ormix train` run for tests/test_cleanup.py and tests/test_secrets.py, launched as a subprocess.

Usage: python tests/support/cleanup_train.py MIXTURE RUN_DIR PROBE_DIR MODE

It runs `train_command` (what `ormix train` runs: exit codes, messages, cleanup) on the mixture file with the
offline tiny model and a scripted policy, so rollouts really open sessions and call tools on the local
servers (child processes, the default). MODE:

- ``normal``: train to the end.
- ``interrupt``: at the first turn that follows a tool result (sessions are open, their sandboxes exist),
  write ``PROBE_DIR/open.json`` and wait for SIGINT (the test sends it, as Ctrl-C would).
- ``reward-error``: a user reward function, first in the list (so the members' own reward functions have
  not closed anything yet), writes ``open.json`` and raises.
- ``secret``: like ``normal``, and before training proves, through each member spec's own session opener,
  that the server received the planted secrets (``local:faulty``'s ``check_secret``); writes
  ``PROBE_DIR/secret.json``.

``open.json`` holds the pids of this process's local server children and the sandbox directories that
exist at that moment; ``children.json`` (written at exit of `train_command`, before interpreter exit) holds
the server pids again, so the test can check none outlives the run.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("OPENREWARD_LOG_LEVEL", "WARNING")

USER_ERROR = "user reward exploded: the bonus table is missing"


def server_children() -> list[int]:
    """Pids of this process's children that are local ORS servers (`python -m ormix.server`)."""
    pids: list[int] = []
    for task in Path("/proc/self/task").iterdir():
        try:
            pids += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue
    out = []
    for pid in sorted(set(pids)):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"ormix.server" in cmdline:
            out.append(pid)
    return out


def snapshot(probe: Path, name: str) -> None:
    sandbox_base = Path(os.environ["ORMIX_SANDBOX_DIR"])
    data = {"servers": server_children(), "sandboxes": sorted(p.name for p in sandbox_base.iterdir())}
    tmp = probe / (name + ".tmp")
    tmp.write_text(json.dumps(data))
    tmp.rename(probe / name)  # atomic: the test never reads a half-written file


def make_script(mode: str, probe: Path):
    from ormix.workbench._scripted import tool_call

    def script(ctx):
        if ctx.turn == 0:
            for tool in ("bash", "echo"):
                if tool in ctx.tools:
                    arg = {"command": "echo hello > note.txt; ls"} if tool == "bash" else {"text": "hello"}
                    return tool_call(tool, **arg)
            return "nothing to call"
        if (probe / "open.json").exists():
            return "done"
        snapshot(probe, "open.json")
        if mode == "interrupt":
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # Ctrl-C lands here, mid-rollout
                time.sleep(0.05)
            raise SystemExit("no SIGINT arrived within 60 s")
        return "done"

    return script


def attach_callback(script):
    from transformers import TrainerCallback

    from ormix.workbench._scripted import ScriptedPolicy

    class AttachScript(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, processing_class=None, **kwargs):
            ScriptedPolicy(script, tokenizer=processing_class).attach(model)
            return control

    return AttachScript()


def prove_secrets(mix, probe: Path) -> None:
    """Open one session per member through the spec's own opener and ask the server about its secrets."""
    from ormix.ors._bridge import run_sync

    result = {}
    for name in mix.members:
        spec = mix.spec(name)
        if spec.target != "local:faulty":
            continue
        expected = spec.effective_secrets() or {}

        async def check(spec=spec, expected=expected):
            session = await spec._open_session(0, None)
            try:
                answers = {}
                for key, value in expected.items():
                    out = await session.call("check_secret", {"key": key, "value": value})
                    answers[key] = out.text == "yes"
                return answers
            finally:
                await session.close()

        result[name] = run_sync(check)
    (probe / "secret.json").write_text(json.dumps(result))


def main(mixture: str, run_dir: str, probe_dir: str, mode: str) -> int:
    from rich.console import Console

    from ormix.app._train import train_command
    from ormix.mixture import load_mixture

    probe = Path(probe_dir)
    mix = load_mixture(mixture)
    if mode == "reward-error":

        def user_bonus(completions, **kwargs):
            snapshot(probe, "open.json")
            raise ValueError(USER_ERROR)

        mix.reward_funcs.insert(0, user_bonus)  # a caller's own reward function, scored before the members'
    if mode == "secret":
        prove_secrets(mix, probe)
    console = Console(width=200, color_system=None)
    try:
        return train_command(
            mix,
            model=None,
            max_steps=None,
            output_dir=Path(run_dir),
            warmup_sft=0,
            overrides=[],
            console=console,
            callbacks=[attach_callback(make_script(mode, probe))],
        )
    finally:
        snapshot(probe, "children.json")


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
