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
    # The run ends normally; its scripted calls score nothing, so it exits 1 saying so (docs/cli.md: train).
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
    from ormix.ors._bridge import run_sync

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
    for failing_spec in (literal,):
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


# ── required secrets, checked when a mixture is validated (platform double) ────────────────────────────

REQUIRED = "Owner/Needs"


@pytest.fixture(scope="module")
def needs_double():
    """A catalog environment that requires OPENAI_API_KEY (and the platform key, which ormix always sends),
    in front of a real local server."""
    from ormix.server import serve_in_thread
    from support.platform_double import PlatformDouble

    with (
        serve_in_thread(["local:echo"]) as upstream,
        PlatformDouble(
            {REQUIRED: (upstream.url, "echo")},
            required_secrets={REQUIRED: ["OPENAI_API_KEY", "OPENREWARD_API_KEY"]},
        ) as platform,
    ):
        yield platform


@pytest.fixture
def needs(needs_double, monkeypatch):
    for name, value in needs_double.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("ORMIX_TEST_OPENAI", raising=False)
    needs_double.clear()
    yield needs_double
    assert needs_double.live() == set(), "a platform session was left behind"


def _needs_mixture(secrets: str = "", **load: object):
    from ormix.config import MixtureConfig
    from ormix.mixture import MixtureSpec

    text = f"""\
members:
  needs: {{target: "{REQUIRED}", num_tasks: 1, discover_task_tools: false{secrets}}}
  also: {{target: "{REQUIRED}", num_tasks: 1, split: test, discover_task_tools: false{secrets}}}
  here: {{target: "local:echo", num_tasks: 1, local_serve: thread}}
prompts_per_step: 2
"""
    return MixtureSpec.from_config(MixtureConfig.from_yaml_text(text, "needs.yaml", **load))  # type: ignore[arg-type]


def test_a_missing_required_secret_stops_the_mixture_before_any_server_naming_member_and_secret(needs):
    from ormix._errors import SpecError, exit_status

    mix = _needs_mixture()
    with pytest.raises(SpecError) as caught:
        mix.connect()
    message = str(caught.value)
    assert "\n" not in message and exit_status(caught.value) == 2
    assert "member 'also'" in message or "member 'needs'" in message
    assert "OPENAI_API_KEY" in message and "OPENREWARD_API_KEY" not in message  # the key is always sent
    # Only the platform's API was asked (once for the two members on one connection); no session was
    # opened, and the local member's server was not started.
    assert [(r.host, r.path) for r in needs.records] == [
        ("api", f"/v1/environments/{REQUIRED}/required-secrets")
    ]
    assert mix.spec("here").connection._served is None
    # The same check guards a member used without `connect()`: its first task list fails alike.
    with pytest.raises(SpecError, match="OPENAI_API_KEY"):
        _ = mix.spec("needs").task_indices
    assert not [r for r in needs.records if r.host == "sessions"]
    mix.close()


def test_a_given_required_secret_passes_and_an_unset_variable_names_the_variable(needs, monkeypatch):
    from ormix._errors import SpecError

    # Referenced but not set (a file loaded for looking at, secrets deferred): the variable is named.
    mix = _needs_mixture(', secrets: {OPENAI_API_KEY: "${ORMIX_TEST_OPENAI}"}', defer_missing_secrets=True)
    with pytest.raises(SpecError, match=r"OPENAI_API_KEY.*export ORMIX_TEST_OPENAI="):
        mix.connect()
    mix.close()
    monkeypatch.setenv("ORMIX_TEST_OPENAI", "sk-openai-PLANTED-1234")
    mix = _needs_mixture(', secrets: {OPENAI_API_KEY: "${ORMIX_TEST_OPENAI}"}')
    mix.connect()
    assert mix.spec("needs").task_indices == [0]
    mix.close()


def test_ormix_train_exits_2_with_the_member_and_the_secret_before_a_session_or_the_run_directory(
    needs, tmp_path
):
    path = tmp_path / "needs.yaml"
    path.write_text(
        f"""\
members:
  needs: {{target: "{REQUIRED}", num_tasks: 2, discover_task_tools: false}}
prompts_per_step: 2
num_samples: 2
train: {{max_steps: 1, num_generations: 2}}
"""
    )
    proc = subprocess.run(
        [sys.executable, "-m", "ormix.app", "train", str(path), "--output-dir", str(tmp_path / "run")],
        env={**os.environ, **needs.env()},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("error:")]
    assert errors == [
        "error: member 'needs' (Owner/Needs): the environment requires secret(s) OPENAI_API_KEY, which its "
        "secrets: do not give; add secrets: {OPENAI_API_KEY: '${OPENAI_API_KEY}'} and export it"
    ]
    assert [r.host for r in needs.records] == ["api"] and not (tmp_path / "run").exists()


def test_ormix_check_exits_2_naming_the_secret(needs, tmp_path):
    import io

    from rich.console import Console

    from ormix.app._check import check_command

    path = tmp_path / "needs.yaml"
    path.write_text(
        f'members:\n  needs: {{target: "{REQUIRED}", num_tasks: 1, discover_task_tools: false}}\n'
    )
    out = io.StringIO()
    assert check_command(path, Console(file=out, width=400)) == 2
    assert "requires secret(s) OPENAI_API_KEY" in " ".join(out.getvalue().split())
    assert not [r for r in needs.records if r.host == "sessions"]


def test_when_the_platform_cannot_say_what_it_requires_nothing_is_checked_and_a_warning_says_so(
    needs, monkeypatch, caplog
):
    monkeypatch.setenv("OPENREWARD_API_URL", "http://127.0.0.1:9")  # nothing listens there
    mix = _needs_mixture()
    with caplog.at_level("WARNING", logger="ormix._connection"):
        mix.connect()  # the sessions host still answers: the first session would say what is missing
    assert "could not ask the platform which secrets it requires" in caplog.text
    mix.close()


def test_a_shell_style_dollar_name_secret_is_refused_naming_the_form_that_reads_the_variable(monkeypatch):
    from ormix.config import MixtureConfig, MixtureConfigError

    monkeypatch.setenv("TOKEN", "real-token")
    for written in ("secrets: {token: $TOKEN}", "api_key: $TOKEN"):
        text = "members:\n  a:\n    target: 'local:echo'\n    " + written + "\n"
        with pytest.raises(MixtureConfigError) as raised:
            MixtureConfig.from_yaml_text(text, "mix.yaml")
        message = str(raised.value)
        assert "a secret written $NAME is sent as those characters" in message and "write ${NAME}" in message
        assert "real-token" not in message
    # The form it names reads the variable; a literal with a `$` inside stays a literal.
    text = (
        "members:\n  a:\n    target: 'local:echo'\n    secrets: {token: '${TOKEN}', pin: 'a$b', p: '$1x'}\n"
    )
    secrets = MixtureConfig.from_yaml_text(text, "mix.yaml").members["a"].secrets
    assert [secrets[k].get_secret_value() for k in ("token", "pin", "p")] == ["real-token", "a$b", "$1x"]
