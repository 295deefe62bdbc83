"""Options declared once: the serve options (`ServeOptions`) reach every entry point, and a flag's choices
(`ormix._choices`) are checked by the command line from the same `Literal` the option model is typed with."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import fields
from pathlib import Path
from typing import get_args

import pytest
from typer.testing import CliRunner

from ormix._choices import Budget, EvalPolicy, ShowMode, TerminationPolicy
from ormix._errors import ServerStartError
from ormix.app import app
from ormix.server import ServeOptions, serve_in_thread
from ormix.server.__main__ import parser
from support.plain_http import blocking_request

ROOT = Path(__file__).resolve().parents[2]

EVERY_OPTION = ServeOptions(
    host="127.0.0.2",
    port=8123,
    idle_limit_s=2.5,
    keep_alive_s=0.5,
    ssl_certfile="cert.pem",
    ssl_keyfile="key.pem",
    insecure=True,
    api_key="never-on-the-command-line",
)


def test_every_serve_option_reaches_a_child_through_its_flags_but_the_key():
    # An option added to ServeOptions but not to what `serve_in_process` gives its child fails here.
    assert all(getattr(EVERY_OPTION, f.name) != f.default for f in fields(ServeOptions)), "set them all"
    argv = EVERY_OPTION.argv()
    assert "never-on-the-command-line" not in argv
    parsed = vars(parser().parse_args([*argv, "local:echo"]))
    assert parsed.pop("envs") == ["local:echo"]
    assert ServeOptions(**parsed, api_key=EVERY_OPTION.api_key) == EVERY_OPTION
    assert ServeOptions().argv() == []  # the defaults need no flag


def test_a_tls_key_without_its_certificate_is_refused_by_the_library_as_by_the_command():
    with pytest.raises(ServerStartError, match="--ssl-keyfile needs --ssl-certfile"):
        serve_in_thread(["local:echo"], ServeOptions(ssl_keyfile="key.pem"))
    result = CliRunner().invoke(app, ["serve", "local:echo", "--ssl-keyfile", "key.pem"])
    assert result.exit_code == 2 and "--ssl-keyfile needs --ssl-certfile" in result.output


def test_run_forever_announces_its_server_to_the_caller_and_prints_nothing(tmp_path):
    announced = tmp_path / "url"
    code = (
        "from ormix.server._serving import ServeOptions, run_forever\n"
        f"write = lambda server: open({str(announced)!r}, 'w').write(server.url)\n"
        "run_forever(['local:echo'], ServeOptions(), on_ready=write)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while not announced.exists() or not announced.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, "it never announced its server"
            time.sleep(0.05)
        url = announced.read_text()
        assert url.startswith("http://127.0.0.1:") and not url.endswith(":0")
        for _ in range(200):  # it announces once bound; it answers once it serves
            try:
                health = blocking_request("GET", f"{url}/health")
                break
            except Exception:
                time.sleep(0.05)
        assert health.status_code == 200
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert out == ""


@pytest.mark.parametrize(
    ("argv", "choice"),
    [
        (["ablate", "mixtures/local-demo.yaml", "--out", "x", "--budget", "same"], Budget),
        (["train", "mixtures/local-demo.yaml", "--on-sigterm", "save"], TerminationPolicy),
        (["eval", "mixtures/local-demo.yaml", "--policy", "oracle"], EvalPolicy),
        (["show", ".", "--mode", "both"], ShowMode),
    ],
)
def test_a_wrong_choice_exits_2_naming_the_choices_the_option_model_allows(argv, choice):
    result = CliRunner().invoke(app, argv, terminal_width=300)
    assert result.exit_code == 2, result.output
    allowed = ", ".join(f"'{value}'" for value in get_args(choice))
    assert f"is not one of {allowed}" in result.output, result.output
    assert "Value error" not in result.output
    assert "\nerror: Invalid value for" in result.output  # one `error:` line, as every ormix failure


def test_choices_keep_the_command_line_import_light():
    heavy = ("pydantic", "ormix.mixture", "ormix.trl", "ormix.app._eval", "ormix.app._train")
    code = f"import sys, ormix.app._cli; print(sorted(m for m in sys.modules if m.startswith({heavy!r})))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_missing_argument_is_named_not_reported_as_an_invalid_value():
    result = CliRunner().invoke(app, ["eval"])
    assert result.exit_code == 2
    assert "Missing argument 'FILE'" in result.output and "Invalid value" not in result.output
