"""OpenRewardSpec against real local ORS servers: TRL parity, schema fidelity, hostile servers, lifecycle."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from transformers.utils import get_json_schema

from ormix import OpenRewardSpec
from ormix._connection import matches_where
from ormix._spec import SpecError
from ormix.rollout._episode import close_episode
from ormix.server import serve_in_thread
from ormix.server._shared import server_for
from support.envs import HOSTILE_TOOLS, Hostile, SetaSurface, SweSurface, surface_tools
from support.tools import tool_text

THREAD = {"local_serve": "thread"}


@pytest.fixture(scope="module")
def surfaces():
    with serve_in_thread([SetaSurface, SweSurface, Hostile]) as server:
        yield server


@pytest.fixture(autouse=True)
def _session_url_restored():
    """`_trl_spec` points the SDK at a test server through the environment; no later test may inherit it."""
    before = os.environ.get("OPENREWARD_SESSION_URL")
    yield
    if before is None:
        os.environ.pop("OPENREWARD_SESSION_URL", None)
    else:
        os.environ["OPENREWARD_SESSION_URL"] = before


@pytest.fixture(scope="module")
def single_servers():
    """One server per surface: the SDK behind TRL's spec reaches only a server's default environment."""
    servers = {cls.__name__.lower(): serve_in_thread([cls]) for cls in (SetaSurface, SweSurface)}
    yield servers
    for server in servers.values():
        server.close()


def _trl_spec(url, **kwargs):
    """TRL's spec on a self-hosted URL (the SDK would otherwise send sessions to `sessions.<host>`)."""
    from trl.experimental.openreward import OpenRewardSpec as TRLSpec

    os.environ["OPENREWARD_SESSION_URL"] = url
    return TRLSpec(url, **kwargs)


def _tool_methods(instance) -> dict:
    import inspect

    return {
        n: f
        for n, f in inspect.getmembers(type(instance), inspect.isfunction)
        if not n.startswith("_") and n not in ("reset", "get_reward")
    }


def assert_richer(theirs: dict, ours: dict, path: str = "") -> None:
    """Every key TRL's schema carries is in ours with the same value (descriptions may be extended)."""
    for key, value in theirs.items():
        assert key in ours, f"{path}.{key} missing from ours: {ours}"
        if key == "description" and isinstance(value, str):
            assert value in ours[key] or ours[key].startswith(value.split(".")[0]), (path, value, ours[key])
        elif isinstance(value, dict):
            assert_richer(value, ours[key], f"{path}.{key}")
        elif key == "required":
            assert set(value) == set(ours[key]), path
        else:
            assert ours[key] == value, (f"{path}.{key}", value, ours[key])


# ── parity with TRL's OpenRewardSpec ──────────────────────────────────────────


@pytest.mark.parametrize("selection", [{"num_tasks": 5}, {"indices": [7, 1, 3]}, {}])
def test_dataset_rows_equal_trl(echo_server, selection):
    ours = OpenRewardSpec(echo_server.url, env_name="echo", **selection).train_dataset
    theirs = _trl_spec(echo_server.url, env_name="echo", **selection).train_dataset
    assert set(ours.column_names) == set(theirs.column_names)
    assert ours.to_list() == [{k: row[k] for k in ours.column_names} for row in theirs.to_list()]


@pytest.mark.parametrize("env", ["echo", "setasurface", "swesurface"])
def test_tool_schemas_equal_or_richer_than_trl(echo_server, single_servers, env):
    url = echo_server.url if env == "echo" else single_servers[env].url
    trl_env = _trl_spec(url, env_name=env, num_tasks=2).environment_factory()
    ours = OpenRewardSpec(url, env_name=env, num_tasks=2).environment_factory()
    theirs_methods, our_methods = _tool_methods(trl_env), _tool_methods(ours)
    assert set(theirs_methods) == set(our_methods)
    richer = 0
    for name, fn in theirs_methods.items():
        theirs, mine = get_json_schema(fn), get_json_schema(our_methods[name])
        assert_richer(theirs, mine, name)
        richer += theirs != mine
    if env == "setasurface":
        assert richer > 0  # enums, array items and nullables that TRL's binder drops


def test_same_episode_same_results_as_trl(echo_server):
    trl_env = _trl_spec(echo_server.url, env_name="echo", num_tasks=4).environment_factory()
    ours = OpenRewardSpec(echo_server.url, env_name="echo", num_tasks=4).environment_factory()
    results = []
    for adapter in (trl_env, ours):
        prompt = adapter.reset(task_index=2)
        outputs = [adapter.echo(text="wrong"), adapter.echo(text="stone"), adapter.submit(text="stone")]
        results.append(
            (prompt, outputs, adapter.rewards, adapter.reward, adapter.finished, adapter.last_output)
        )
        adapter._close()
    assert results[0] == results[1]
    assert results[1][2] == [0.0, 1.0, 1.0] and results[1][4] is True


# ── schema fidelity on the real surfaces ──────────────────────────────────────


@pytest.mark.parametrize("env,surface", [("setasurface", "seta"), ("swesurface", "swe-rebench-v2")])
def test_real_surfaces_survive_field_by_field(surfaces, env, surface):
    spec = OpenRewardSpec(surfaces.url, env_name=env, num_tasks=1)
    expected = {t["name"]: t for t in surface_tools(surface)}
    served = {t.name: t for t in spec.tool_specs}
    assert {n: (t.description, t.input_schema) for n, t in served.items()} == {
        n: (t["description"], t["input_schema"]) for n, t in expected.items()
    }
    cls = spec.episode_class
    for name, tool in expected.items():
        schema = get_json_schema(getattr(cls, name))["function"]["parameters"]
        props = tool["input_schema"].get("properties", {})
        assert set(schema.get("properties", {})) == set(props), name
        assert set(schema.get("required", [])) == set(tool["input_schema"].get("required", [])), name
        for pname, pdef in props.items():
            got = schema["properties"][pname]
            if "enum" in pdef:
                assert got["enum"] == pdef["enum"], (name, pname)
            if pdef.get("type") == "array" and "items" in pdef and "type" in pdef["items"]:
                assert got["items"]["type"] == pdef["items"]["type"], (name, pname)
            if "default" in pdef and pdef["default"] is not None:
                assert f"Default: {json.dumps(pdef['default'])}" in got.get("description", ""), (
                    name,
                    pname,
                    got,
                )


# ── hostile servers ───────────────────────────────────────────────────────────


def test_hostile_tool_surface_binds_safely_and_calls_real_names(surfaces, caplog, tmp_path):
    Hostile.CALLS.clear()
    marker = Path("/tmp/ormix-pwned")
    marker.unlink(missing_ok=True)
    with caplog.at_level(logging.WARNING):
        spec = OpenRewardSpec(surfaces.url, env_name="hostile", indices=[0, 1])
        cls = spec.episode_class
    report = spec.binding
    wire_names = {t["name"] for t in HOSTILE_TOOLS} | {"probe"}
    methods = {b.wire_name: b.method_name for b in report.bindings}
    assert set(methods) == wire_names
    for method in report.method_names:
        assert method.isidentifier() and not method.startswith("_") and len(method) <= 64
        get_json_schema(getattr(cls, method))  # the model-facing schema builds for every tool
    assert "reset" not in report.method_names and cls.reset.__qualname__.startswith("Episode.")
    assert any("probe" in r.message for r in caplog.records), "differing probe schemas must be reported"

    ep = spec.environment_factory()
    ep.reset(task_index=0)
    py_class = methods["class"]
    out = getattr(ep, py_class)(
        **{report.binding(py_class).params[0].py_name: "a", report.binding(py_class).params[1].py_name: 3}
    )
    assert Hostile.CALLS[-1] == ("class", {"from": "a", "self": 3})
    assert '"tool": "class"' in out
    out = getattr(ep, methods["fs.read"])(path="/x")
    assert ep.calls[-1].error is None, (out, ep.calls[-1])
    assert Hostile.CALLS[-1] == ("fs.read", {"path": "/x"})
    close_episode(ep)
    assert not marker.exists()


# ── selection, metadata, errors ───────────────────────────────────────────────


def test_reserved_columns_are_never_overwritten_and_where_filters(surfaces):
    spec = OpenRewardSpec(surfaces.url, env_name="swesurface", where={"difficulty": ["Easy"]}, num_tasks=2)
    ds = spec.train_dataset
    assert ds["task_index"] == [0, 2]
    assert ds["prompt"] == [[{"role": "user", "content": ""}]] * 2
    assert ds["difficulty"] == ["Easy", "Easy"] and ds["n"] == [0, 2]
    with pytest.raises(SpecError, match="no task"):
        _ = OpenRewardSpec(surfaces.url, env_name="swesurface", where={"difficulty": "Medium"}).train_dataset


def test_matches_where_handles_lists_and_scalars():
    assert matches_where({"tags": ["git", "io"]}, {"tags": ["io"]})
    assert not matches_where({"tags": ["git"]}, {"tags": "io"})
    assert not matches_where({}, {"difficulty": "Easy"})


def test_bad_arguments_fail_before_any_server_is_contacted():
    with pytest.raises(SpecError, match="num_tasks or indices"):
        OpenRewardSpec("local:echo", num_tasks=2, indices=[1])
    with pytest.raises(SpecError, match="local:"):
        OpenRewardSpec("not a target")


def test_catalog_targets_forward_api_key_as_secret(monkeypatch):
    monkeypatch.setenv("OPENREWARD_API_KEY", "sk-planted-123")
    assert OpenRewardSpec("Eigent/SETA").effective_secrets() == {"api_key": "sk-planted-123"}
    assert OpenRewardSpec("Eigent/SETA", secrets={"x": "y"}).effective_secrets() == {"x": "y"}
    assert OpenRewardSpec("http://127.0.0.1:9", env_name="e").effective_secrets() is None
    assert "sk-planted" not in repr(OpenRewardSpec("Eigent/SETA", api_key="sk-planted-123"))


# ── outcomes and session lifecycle ────────────────────────────────────────────


def test_local_target_is_served_and_sessions_close_after_scoring():
    spec = OpenRewardSpec("local:echo", num_tasks=3, unscored_reward=0.0, **THREAD)
    server = server_for("local:echo", mode="thread")
    envs = [spec.environment_factory() for _ in range(3)]
    for i, ep in enumerate(envs):
        ep.reset(**spec.train_dataset[i])
    envs[0].echo(text="apple")
    envs[1].echo(text="nope")
    opened = {ep.session_id for ep in envs}
    assert opened <= set(server.active_sessions())
    rewards = spec.reward_funcs(environments=envs)
    assert rewards == [1.0, 0.0, 0.0]  # third: unscored -> unscored_reward
    assert [ep.outcome.kind for ep in envs] == ["scored", "scored", "unscored"]
    assert not opened & set(server.active_sessions())

    # close_after_scoring=False: the sessions outlive the reward (a caller reads them first), until closed.
    kept = OpenRewardSpec("local:echo", num_tasks=2, close_after_scoring=False, **THREAD)
    eps = [kept.environment_factory() for _ in range(2)]
    for i, ep in enumerate(eps):
        ep.reset(**kept.train_dataset[i])
    assert kept.reward_funcs(environments=eps) == [None, None]
    alive = {ep.session_id for ep in eps}
    assert alive <= set(server.active_sessions())
    for ep in eps:
        close_episode(ep)
    assert not alive & set(server.active_sessions())


def test_session_open_failure_is_an_error_outcome_never_a_zero():
    spec = OpenRewardSpec(
        "http://127.0.0.1:9",
        env_name="echo",
        unscored_reward=0.0,
        discover_task_tools=False,
        call_timeout_s=5,
    )
    spec.__dict__["tool_specs"] = []  # no server to list tools from: an episode class with none
    ep = spec.environment_factory()
    text = ep.reset(task_index=0)
    assert "could not start" in text
    assert ep.outcome.kind == "error" and ep.outcome.error_kind == "session_open"
    assert spec.reward_funcs(environments=[ep]) == [None]


def test_import_ormix_does_not_import_torch_or_trl():
    import subprocess
    import sys

    code = (
        "import sys, ormix, ormix.ors, ormix.mixture._planner, ormix.config; "
        "print(sorted(m for m in ('torch','transformers','trl') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={**os.environ}
    ).stdout.strip()
    assert out == "[]"


def test_an_episode_after_submit_rejects_further_calls(echo_server):
    spec = OpenRewardSpec(echo_server.url, env_name="echo", num_tasks=4)
    ep = spec.environment_factory()
    ep.reset(task_index=1)
    outputs = [ep.echo(text="nope"), ep.echo(text="river"), ep.submit(text="river")]
    after = tool_text(ep.echo, text="again")  # the episode is over: rejected
    assert len(outputs) == 3 and ep.finished and ep.outcome.kind == "scored"
    assert ep.calls[-1].error == "rejected:episode_finished"
    assert "episode" in after.lower() or "finished" in after.lower()
    close_episode(ep)
    spec.close()
    # `transport: sdk` is gone: ormix's client sends what the SDK sends (tests/ors/test_platform.py).
    with pytest.raises(SpecError, match="transport"):
        OpenRewardSpec(echo_server.url, env_name="echo", transport="sdk")


def test_task_tools_are_probed_on_a_task_the_filter_keeps(surfaces):
    """Hostile's task 1 has an integer `probe` tool, task 0 a string one: a filter keeping odd tasks binds
    task 1's tool."""
    spec = OpenRewardSpec(surfaces.url, env_name="hostile", where={"difficulty": "Hard"}, num_tasks=2)
    probe = next(t for t in spec.tool_specs if t.name == "probe")  # tools first: selection happens on the way
    assert probe.input_schema["properties"]["a"]["type"] == "integer"
    assert spec.task_indices == [1, 3]


def test_tool_named_like_episode_state_is_renamed(surfaces):
    """A tool called `metadata` (or `reward`, `calls`...) would be hidden by the episode's own attribute."""
    from ormix.rollout._episode import make_episode_class

    spec = OpenRewardSpec(surfaces.url, env_name="hostile", num_tasks=1)
    cls = make_episode_class(
        "State",
        spec.episode_config,
        [{"name": "metadata", "description": "d", "input_schema": {"type": "object"}}],
    )
    assert "metadata" not in cls.binding.method_names
    assert cls.binding.bindings[0].wire_name == "metadata"


def test_num_tasks_beyond_the_split_is_said_and_a_wrong_env_name_lists_the_servers(echo_server, caplog):
    from ormix.ors._errors import ServerError

    with caplog.at_level(logging.WARNING, logger="ormix._connection"):
        assert len(OpenRewardSpec(echo_server.url, env_name="echo", num_tasks=50).task_indices) == 16
        assert len(OpenRewardSpec(echo_server.url, env_name="echo", num_tasks=3).task_indices) == 3
    said = [r.getMessage() for r in caplog.records if "num_tasks" in r.getMessage()]
    assert said == ["ormix echo: num_tasks is 50 but only 16 task(s) are in split 'train': using those 16"]
    with pytest.raises(ServerError, match=r"has no environment 'ech'; it serves 'echo': fix env_name"):
        _ = OpenRewardSpec(echo_server.url, env_name="ech").task_indices


def test_options_are_the_config_models_fields_declared_once():
    # The constructor takes SpecConfig's fields as they are (no second list of options or defaults): every
    # field is an attribute with the model's default, and a misspelt option is refused by name.
    from ormix.config import SpecConfig

    spec = OpenRewardSpec("local:echo", num_tasks=2, local_serve="thread")
    defaults = SpecConfig(target="local:echo")
    for field in SpecConfig.model_fields:
        if field not in ("target", "num_tasks", "local_serve"):
            assert getattr(spec, field) == getattr(defaults, field), field
    with pytest.raises(SpecError, match="nmu_tasks"):
        OpenRewardSpec("local:echo", nmu_tasks=2)
    with pytest.raises(AttributeError):
        _ = spec.no_such_option


def test_a_derived_spec_keeps_its_secrets_as_given(monkeypatch):
    # Eval sets and held-out selections are derived specs: their sessions must send what training sends.
    monkeypatch.setenv("ORMIX_TEST_DERIVE", "from-env")
    from ormix.config import MixtureConfig

    literal = OpenRewardSpec(
        "local:echo",
        num_tasks=2,
        local_serve="thread",
        secrets={"a": "p@ss${HOME}x", "b": "x$${y", "c": "${NOPE}"},
    )
    derived = literal.derive(
        name="held_out", num_tasks=None, indices=[0]
    )  # "${NOPE}": a literal, never looked up
    assert derived.secret_values() == literal.secret_values() == ["p@ss${HOME}x", "x$${y", "${NOPE}"]
    member = MixtureConfig.from_yaml_text(
        "members:\n  e: {target: 'local:echo', secrets: {k: 'pre-${ORMIX_TEST_DERIVE}'}}\n"
    ).members["e"]
    from_file = OpenRewardSpec.from_config(member)
    monkeypatch.setenv("ORMIX_TEST_DERIVE", "changed-since-load")
    assert (
        from_file.derive(indices=[1], num_tasks=None).secret_values()
        == from_file.secret_values()
        == ["pre-from-env"]
    )
    assert literal.derive(secrets={"d": "${HOME}"}).secret_values() == ["${HOME}"]  # given in Python: literal
