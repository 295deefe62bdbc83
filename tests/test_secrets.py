"""Secrets never leave the process except toward the environment: a real `ormix train` run with planted
secrets (a mixture file's ``${VAR}`` secrets, ``api_key_env``, ``OPENREWARD_API_KEY``), then a search of
everything the run wrote and printed, and of the reprs and error messages a user may see.

The planted values all contain ``PLANTED``, so even a truncated or partial leak is caught.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
DRIVER = ROOT / "support" / "cleanup_train.py"
MARK = "PLANTED"
SECRETS = {
    "ORMIX_TEST_SECRET": f"sk-{MARK}-secret-{uuid.uuid4().hex[:12]}",
    "ORMIX_TEST_TOKEN": f"tok-{MARK}-token-{uuid.uuid4().hex[:12]}",
    "ORMIX_TEST_API_KEY": f"sk-{MARK}-apikey-{uuid.uuid4().hex[:12]}",
    "OPENREWARD_API_KEY": f"sk-{MARK}-platform-{uuid.uuid4().hex[:12]}",
}

# Faulty task 0 is plain, task 2 fails at open: both the working and the failing path see the secrets.
MIXTURE = """\
name: secrets
members:
  faulty:
    target: "local:faulty"
    indices: [0, 2]
    api_key_env: ORMIX_TEST_API_KEY
    secrets:
      api_key: "${ORMIX_TEST_SECRET}"
      token: "prefix-${ORMIX_TEST_TOKEN}"
prompts_per_step: 2
num_samples: 2
seed: 0
train:
  max_steps: 1
  num_generations: 2
  max_completion_length: 192
  max_tool_calling_iterations: 2
"""


def _assert_clean(where: str, text: str) -> None:
    assert MARK not in text, (
        f"a planted secret leaked into {where}: ...{text[max(0, text.find(MARK) - 80) :][:200]}..."
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    base = tmp_path_factory.mktemp("secrets")
    mixture = base / "secrets.yaml"
    mixture.write_text(MIXTURE)
    (base / "sandboxes").mkdir()
    (base / "probe").mkdir()
    env = {**os.environ, **SECRETS, "ORMIX_SANDBOX_DIR": str(base / "sandboxes")}
    proc = subprocess.run(
        [sys.executable, str(DRIVER), str(mixture), str(base / "run"), str(base / "probe"), "secret"],
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
    )
    return base, proc


@pytest.mark.slow
def test_secrets_reach_the_server_and_nothing_the_run_wrote_or_printed(run):
    base, proc = run
    # The run ends normally; its scripted calls score nothing, so it exits 1 saying so (README: train).
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "no member was ever scored" in proc.stdout
    # The secrets did reach the environment, through the spec's own session opener.
    assert json.loads((base / "probe" / "secret.json").read_text()) == {
        "faulty": {"api_key": True, "token": True}
    }

    run_dir = base / "run"
    files = sorted(p for p in run_dir.rglob("*") if p.is_file())
    names = {p.relative_to(run_dir).as_posix() for p in files}
    # Non-vacuous: the run wrote what a run writes, secret names included.
    assert {"manifest.json", "train_args.json", "log_history.jsonl", "report/summary.json"} <= names
    assert any(n.startswith("rollouts/") for n in names) and any(n.endswith(".parquet") for n in names)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["members"]["faulty"]["secret_names"] == ["api_key", "token"]
    records = [
        json.loads(line) for p in files if p.parent.name == "rollouts" for line in p.read_text().splitlines()
    ]
    assert len(records) == 4 and {r["outcome"] for r in records} >= {"error"}  # task 2 failed at open

    import pyarrow.parquet as pq

    for path in files:
        if path.suffix == ".parquet":
            table = pq.read_table(path)
            assert table.num_rows > 0
            text = json.dumps(table.to_pylist(), default=str)
        else:
            text = path.read_bytes().decode("utf-8", errors="replace")
        _assert_clean(str(path.relative_to(run_dir)), text)
    _assert_clean("stdout", proc.stdout)
    _assert_clean("stderr", proc.stderr)
    for name in os.listdir(base / "sandboxes"):
        pytest.fail(f"sandbox {name} left behind")


def test_reprs_and_errors_never_show_a_secret(tmp_path, monkeypatch):
    from ormix import OpenRewardSpec
    from ormix.config import MixtureConfig, MixtureConfigError
    from ormix.mixture import MixtureSpec
    from ormix.ors.bridge import run_sync

    for key, value in SECRETS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("ORMIX_LOCAL_SERVE", "thread")
    monkeypatch.setenv("ORMIX_SANDBOX_DIR", str(tmp_path))
    config = MixtureConfig.from_yaml_text(MIXTURE, "secrets.yaml")
    mix = MixtureSpec.from_config(config)
    spec = mix.spec("faulty")
    literal = OpenRewardSpec(
        "local:faulty",
        secrets={"api_key": SECRETS["ORMIX_TEST_SECRET"]},
        api_key=SECRETS["ORMIX_TEST_API_KEY"],
        indices=[2],
    )
    shown = [
        repr(config),
        str(config),
        repr(config.members),
        repr(mix),
        repr(spec),
        repr(literal),
        json.dumps(config.manifest_dict(), default=str),
        json.dumps(mix.manifest(), default=str),
        repr(spec.episode_config),
        repr(spec.config),
        repr(mix.config),
        repr(run_sync(spec.connection.client)),
    ]

    # A session that opens, and its episode; then one that fails to open (task 2), with the secrets sent.
    episode = spec.environment_factory()
    episode.reset(task_index=0)
    shown += [repr(episode), repr(episode._session), episode.echo(text="hi")]
    sdk = OpenRewardSpec(
        "local:faulty",
        secrets={"api_key": SECRETS["ORMIX_TEST_SECRET"]},
        api_key=SECRETS["ORMIX_TEST_API_KEY"],
        indices=[0],
        transport="sdk",
    )
    for failing_spec in (literal, sdk):  # ormix's client, then the openreward SDK's
        failing = failing_spec.environment_factory()
        shown.append(failing.reset(task_index=2))
        shown += [
            repr(failing),
            str(failing.outcome),
            str(failing.outcome.error),
            repr(failing_spec.connection),
            repr(failing_spec.config),
        ]
        assert failing.outcome.error_kind == "session_open", failing.outcome  # the failure really happened
    mix.close_sessions()
    literal.close()
    sdk.close()

    # Mixture files with the secret in the wrong place: the error names the place, never the value.
    bad_files = [
        MIXTURE.replace("api_key_env: ORMIX_TEST_API_KEY", f"api_key_env: {SECRETS['ORMIX_TEST_API_KEY']}"),
        MIXTURE.replace('"${ORMIX_TEST_SECRET}"', f"{{nested: {SECRETS['ORMIX_TEST_SECRET']}}}"),
        MIXTURE.replace('"${ORMIX_TEST_SECRET}"', f'"${{{SECRETS["ORMIX_TEST_SECRET"]}}}"'),
        MIXTURE.replace('"${ORMIX_TEST_SECRET}"', f'"{SECRETS["ORMIX_TEST_SECRET"]}"') + "bogus_key: 1\n",
    ]
    for text in bad_files:
        with pytest.raises(MixtureConfigError) as info:
            MixtureConfig.from_yaml_text(text, "bad.yaml")
        shown.append(str(info.value))
    for i, text in enumerate(shown):
        _assert_clean(f"shown[{i}]", text)
