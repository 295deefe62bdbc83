"""Options declared once: the serve options (`ServeOptions`) reach every entry point, `ormix serve` among
them, and a flag's choices (`ormix._choices`) are checked by the command line from the same `Literal` the
option model is typed with. And what every `ormix` command does as it starts: raise a low open-files limit."""

from __future__ import annotations

import resource
import signal
import socket
import subprocess
import sys
import time
from dataclasses import fields
from pathlib import Path
from typing import get_args

import pytest
import typer
from typer.testing import CliRunner

from ormix._choices import Budget, EvalPolicy, ShowMode, TerminationPolicy
from ormix._errors import ServerStartError
from ormix.app import app
from ormix.server import ServeOptions, serve_in_thread
from ormix.server.__main__ import parser
from ormix.server._serving import flag_of
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


def test_ormix_serve_has_a_flag_for_every_serve_option():
    serve = typer.main.get_command(app).commands["serve"]  # type: ignore[attr-defined]
    flags = {opt for param in serve.params for opt in param.opts}
    assert {flag_of(f.name) for f in fields(ServeOptions)} <= flags


@pytest.mark.parametrize("flag", ["--keep-alive", "--idle-limit"])
def test_a_clock_that_is_not_above_0_is_refused_by_ormix_serve(flag):
    for value in ("0", "-1", "nan"):
        result = CliRunner().invoke(app, ["serve", "local:echo", flag, value])
        assert result.exit_code == 2 and f"{flag} takes a number of seconds above 0" in result.output


def test_ormix_serve_keep_alive_closes_an_idle_connection_after_it(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "ormix.app", "serve", "local:echo", "--port", "0", "--keep-alive", "0.5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        assert ready.startswith("ORMIX_SERVER_READY port="), ready
        port = int(ready.split()[1].removeprefix("port="))
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            received = b""
            started = time.monotonic()
            # The server answers, then holds the idle connection 0.5 s (the default is 60 s: the bound below,
            # or the socket's timeout of 30 s, fails the test first).
            while chunk := sock.recv(4096):
                received += chunk
            idle_closed_after = time.monotonic() - started
        assert received.startswith(b"HTTP/1.1 200")
        assert idle_closed_after < 10
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_ormix_command_raises_a_low_open_files_limit_to_the_hard_one():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 256:
        pytest.skip(f"this machine's hard limit of open files is {hard}: nothing to raise to")
    code = (
        "import resource, sys\n"
        "from ormix.app._cli import main\n"
        "sys.argv = ['ormix', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('LIMIT', resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        # The child starts as a shell with `ulimit -Sn 256` would start it.
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard)),
    )
    limit = int(done.stdout.split("LIMIT")[-1])
    assert limit == (65_536 if hard == resource.RLIM_INFINITY else min(65_536, hard)) > 256


def test_ormix_serve_on_a_port_in_use_is_one_error_line_and_exit_1():
    with serve_in_thread(["local:echo"]) as busy:
        result = CliRunner().invoke(app, ["serve", "local:echo", "--port", str(busy.port)])
    assert result.exit_code == 1, result.output
    assert (
        f"error: cannot listen on 127.0.0.1:{busy.port}" in result.output and "Traceback" not in result.output
    )


@pytest.mark.parametrize(("sent", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ormix_serve_with_workers_exits_as_one_server_does_on_a_signal(sent, status):
    proc = subprocess.Popen(
        [sys.executable, "-m", "ormix.app", "serve", "local:echo", "--workers", "2", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("targets: [http://127.0.0.1:")
        proc.send_signal(sent)
        assert proc.wait(timeout=60) == status
    finally:
        proc.kill()
        proc.wait(timeout=30)
