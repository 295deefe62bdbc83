"""A local server others can reach is not open to everyone: the key, checked on every request, and the
refusal to serve off loopback without one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from ormix import OpenRewardSpec
from ormix._errors import ServerStartError
from ormix.app._cli import app
from ormix.ors import ORSClient, ServerError, run_sync
from ormix.ors._http import HTTPClient
from ormix.rollout._episode import close_episode
from ormix.server import ServeOptions, serve_in_thread
from ormix.server._auth import exposure_problem, is_loopback
from support.plain_http import blocking_request

KEY = "test-serve-key-5f1c"


@given(st.ip_addresses())
def test_only_loopback_addresses_may_serve_without_a_key(address):
    host = str(address)
    assert is_loopback(host) == address.is_loopback
    assert (exposure_problem(host, None, insecure=False) is None) == address.is_loopback
    assert exposure_problem(host, KEY, insecure=False) is None
    assert exposure_problem(host, None, insecure=True) is None


def test_the_cli_refuses_to_serve_off_loopback_without_a_key(monkeypatch):
    monkeypatch.delenv("ORMIX_SERVE_API_KEY", raising=False)
    result = CliRunner().invoke(app, ["serve", "local:echo", "--host", "0.0.0.0", "--port", "0"])
    assert result.exit_code == 2
    assert "ORMIX_SERVE_API_KEY" in result.output and "--insecure" in result.output
    with pytest.raises(ServerStartError, match="reachable from other machines"):
        serve_in_thread(["local:echo"], ServeOptions(host="0.0.0.0"))


@pytest.fixture(scope="module")
def keyed():
    # Off loopback, with a key: the case the done-when names (requests go to it over 127.0.0.1).
    with serve_in_thread(["local:faulty"], ServeOptions(host="0.0.0.0", api_key=KEY)) as server:
        yield server, server.url.replace("0.0.0.0", "127.0.0.1")


def test_requests_without_the_key_get_401_and_run_nothing(keyed):
    server, url = keyed
    create = {"env_name": "faulty", "task_spec": {"answer": "42"}}
    for headers in ({}, {"X-API-Key": "wrong"}):
        assert blocking_request("GET", f"{url}/health", headers=headers).status_code == 401
        opened = blocking_request(
            "POST", f"{url}/create", json=create, headers={**headers, "X-Session-ID": "s1"}
        )
        assert opened.status_code == 401 and "X-API-Key" in opened.text
    assert server.active_sessions() == []  # no session opened

    async def keyless_call_runs_nothing():
        key = uuid.uuid4().hex
        async with ORSClient(url, env_name="faulty", api_key=KEY) as client, HTTPClient() as http:
            async with client.session(task_spec={"answer": "42"}) as session:
                call = {"name": "count", "input": {"key": key}}
                for headers in ({}, {"X-API-Key": "wrong"}):
                    headers = {**headers, "X-Session-ID": session.id}
                    answer = await http.request("POST", f"{url}/faulty/call", json=call, headers=headers)
                    assert answer.status_code == 401
                return (await session.call("read_count", {"key": key})).text

    assert run_sync(keyless_call_runs_nothing) == "0"  # the tool call without the key never ran
    assert server.active_sessions() == []


def test_a_member_with_the_key_trains_on_it_unchanged(keyed):
    _, url = keyed
    spec = OpenRewardSpec(url, env_name="faulty", api_key=KEY, discover_task_tools=False)
    ep = spec.environment_factory()
    ep.reset(task_spec={"answer": "42"})
    ep.submit(answer="42")
    assert ep.reward == 1.0
    close_episode(ep)
    keyless = OpenRewardSpec(url, env_name="faulty", discover_task_tools=False)
    with pytest.raises(ServerError, match="answered 401: missing or wrong API key"):
        keyless.environment_factory()  # binding its tools asks the server first


def test_serve_workers_prints_the_targets_of_n_keyed_servers(tmp_path):
    env = {**os.environ, "ORMIX_SERVE_API_KEY": KEY}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ormix.app", "serve", "local:echo", "--port", "0", "--workers", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("targets: [")
        urls = line.strip()[len("targets: [") : -1].split(", ")
        assert len(set(urls)) == 2
        for url in urls:
            assert blocking_request("GET", f"{url}/health").status_code == 401
            assert blocking_request("GET", f"{url}/health", headers={"X-API-Key": KEY}).status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)  # the workers tear their sessions down and stop
        assert proc.wait(timeout=60) == 143  # as one server process ends on SIGTERM (128 + 15)
