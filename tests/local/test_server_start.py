"""A local server child starts without the SDK's client (`defer_sdk_namespace`), and an environment that
uses the SDK's top-level names still gets them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ormix._errors import ServerStartError
from ormix.ors import ORSClient, run_sync
from ormix.server import ServeOptions, serve_in_process, serve_in_thread

USER_ENVS = Path(__file__).resolve().parents[1] / "data" / "user_envs"
# The rollout serializers: the bulk of `openreward/__init__`, which a server never uses.
SERIALIZERS = "openreward.api.rollouts.rollout"


def test_a_deferred_sdk_serves_without_its_client_and_loads_it_on_first_use():
    code = textwrap.dedent(
        f"""
        import sys, threading
        from ormix.server._openreward_internals import defer_sdk_namespace
        assert defer_sdk_namespace() is True
        assert defer_sdk_namespace() is False
        import openreward.environments, openreward.toolsets.cli
        print({SERIALIZERS!r} in sys.modules)
        # A load that fails (a dependency of the SDK's __init__ made unimportable) raises, and the next
        # lookup loads again, in the same module.
        saved, sys.modules["structlog"] = sys.modules["structlog"], None
        try:
            openreward.OpenReward
        except ImportError:
            print("failed")
        sys.modules["structlog"] = saved
        # Eight threads at once (sync tools run in threads): every one gets the name.
        got = []
        get = lambda: got.append(openreward.ToolSpec.__name__)
        threads = [threading.Thread(target=get) for _ in range(8)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        print(got == ["ToolSpec"] * 8)
        from openreward import AsyncOpenReward
        import openreward
        print({SERIALIZERS!r} in sys.modules, AsyncOpenReward is openreward.client.AsyncOpenReward)
        print("Session" in openreward.__all__, openreward.environments.__name__)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [
        "False",
        "failed",
        "True",
        "True",
        "True",
        "True",
        "openreward.environments",
    ]


# A user's environment (one of tests/data/user_envs', unchanged) whose module imports the SDK by its top-level
# names: the real `openreward/__init__` runs then, in the child.
USER_ENV = """
import sys

import openreward

assert "openreward.api.rollouts.rollout" not in sys.modules  # the child deferred the SDK's client
from openreward import ToolSpec
from _base import Reverse

SDK_NAMES = (openreward.OpenReward.__name__, ToolSpec.__name__)


class Named(Reverse):
    pass
"""


def test_a_served_environment_that_imports_the_sdks_top_level_names_gets_them(tmp_path):
    (tmp_path / "named_env.py").write_text(USER_ENV)
    path = os.pathsep.join([str(tmp_path), str(USER_ENVS), os.environ.get("PYTHONPATH", "")])
    with serve_in_process(["named_env:Named"], env={"PYTHONPATH": path}) as server:

        async def tasks():
            async with ORSClient(server.url, env_name="named") as client:
                return await client.tasks("train")

        assert run_sync(tasks) == [{"word": "river"}, {"word": "stone"}]


def test_the_ormix_command_defers_the_sdk_and_a_user_environment_still_gets_its_names(tmp_path):
    # `ormix inspect` imports the user's module in its own process (the target is checked at load): the
    # module's assertion fails there unless the command deferred the SDK's client as a server child does.
    (tmp_path / "named_env.py").write_text(USER_ENV)
    (tmp_path / "named.yaml").write_text(
        "members:\n  named:\n    target: named_env:Named\n    num_tasks: 2\n"
    )
    src = Path(__file__).resolve().parents[2] / "src"
    path = os.pathsep.join([str(tmp_path), str(USER_ENVS), str(src), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-m", "ormix.app", "inspect", "named.yaml"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": path, "COLUMNS": "200"},
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "named" in done.stdout and "answer" in done.stdout


def test_what_keeps_a_server_from_starting_is_one_error_before_anything_is_announced(tmp_path):
    with serve_in_thread(["local:echo"]) as first:
        with pytest.raises(ServerStartError, match=rf"cannot listen on 127.0.0.1:{first.port}: .*--port"):
            serve_in_thread(["local:echo"], ServeOptions(port=first.port))
    with pytest.raises(ServerStartError, match="--ssl-certfile .*missing.pem: no such file"):
        serve_in_thread(["local:echo"], ServeOptions(ssl_certfile=str(tmp_path / "missing.pem")))
    (tmp_path / "bad.pem").write_text("not a certificate\n")
    with pytest.raises(ServerStartError, match="the certificate and its key do not load"):
        serve_in_thread(["local:echo"], ServeOptions(ssl_certfile=str(tmp_path / "bad.pem")))


def test_an_ipv6_loopback_server_is_reached_at_its_bracketed_url():
    if not socket.has_ipv6:
        pytest.skip("this Python was built without IPv6")
    with serve_in_thread(["local:echo"], ServeOptions(host="::1")) as server:
        assert server.url.startswith("http://[::1]:")

        async def tasks():
            async with ORSClient(server.url, env_name="echo") as client:
                return await client.tasks("train")

        assert len(run_sync(tasks)) == 16
