"""The platform API's calls ormix makes (`ormix.ors._catalog`): required secrets and task difficulty, sent as
the openreward SDK sends them and read as it reads them, through the platform double
(tests/support/platform_double.py, a stand-in for the platform's API host)."""

from __future__ import annotations

import pytest

from ormix.ors import Endpoint, ServerError, run_sync
from ormix.ors._catalog import TaskDifficulty, required_secrets, task_difficulty
from ormix.ors._errors import BadTargetError
from support.platform_double import PlatformDouble

ECHO = "Owner/Echo"
ROWS = [
    {
        "task_index": 1,
        "avg_reward": 0.0,
        "min_reward": 0.0,
        "max_reward": 0.0,
        "num_rollouts": 3,
        "split": "train",
    },
    {
        "task_index": 0,
        "avg_reward": 1.0,
        "min_reward": 1.0,
        "max_reward": 1.0,
        "num_rollouts": 12,
        "split": "train",
    },
    {
        "task_index": 0,
        "avg_reward": 0.5,
        "min_reward": 0.0,
        "max_reward": 1.0,
        "num_rollouts": 4,
        "split": "train",
        "variant": "v1",
    },
    {
        "task_index": 2,
        "avg_reward": 0.5,
        "min_reward": 0.0,
        "max_reward": 1.0,
        "num_rollouts": 6,
        "split": "test",
    },
]


@pytest.fixture(scope="module")
def double():
    # Upstream URL never reached: the API host answers these calls itself.
    with PlatformDouble(
        {ECHO: ("http://127.0.0.1:9", "echo")}, required_secrets={ECHO: ["OPENAI_API_KEY"]}
    ) as p:
        p.task_difficulty[ECHO] = ROWS
        yield p


@pytest.fixture
def platform(double, monkeypatch):
    for name, value in double.env().items():
        monkeypatch.setenv(name, value)
    double.clear()
    return double


def _through_sdk(call):
    async def run():
        from openreward import AsyncOpenReward

        client = AsyncOpenReward()
        try:
            return await call(client)
        finally:
            await client.environments.aclose()

    return run_sync(run)


QUERIES = [
    ({}, None),
    ({"split": "train"}, None),
    ({"split": "train", "model_name": "Qwen/Qwen3-8B", "training_stage": "rl"}, None),
    ({"min_model_params": 1_000_000_000, "max_model_params": 9_000_000_000}, "v1"),
]


@pytest.mark.parametrize(("query", "variant"), QUERIES)
def test_task_difficulty_is_asked_and_read_as_the_sdk_does(platform, query, variant) -> None:
    sdk_rows = _through_sdk(lambda c: c.environments.get(ECHO, variant=variant).get_task_difficulty(**query))
    (sdk_request,) = platform.records
    platform.clear()
    rows = run_sync(lambda: task_difficulty(Endpoint.for_catalog(ECHO, env_name=variant), **query))
    (request,) = platform.records
    # The same route, query and key (ormix adds its User-Agent, as everywhere).
    assert (request.method, request.path, request.body) == (
        sdk_request.method,
        sdk_request.path,
        sdk_request.body,
    )
    assert request.headers["X-API-Key"] == sdk_request.headers["X-API-Key"] == platform.api_key
    assert request.status == sdk_request.status == 200
    # The same rows, read alike (sorted by split, variant, task, as the platform orders them).
    assert [(r.split, r.variant, r.task_index, r.min_reward, r.max_reward, r.num_rollouts) for r in rows] == [
        (r.split, r.variant, r.task_index, r.min_reward, r.max_reward, r.num_rollouts) for r in sdk_rows
    ]
    assert all(isinstance(r, TaskDifficulty) for r in rows) and rows


def test_required_secrets_are_asked_as_the_sdk_does(platform) -> None:
    sdk = _through_sdk(lambda c: c.environments.get(ECHO).list_required_secrets())
    ours = run_sync(lambda: required_secrets(Endpoint.for_catalog(ECHO)))
    assert ours == sdk == ["OPENAI_API_KEY"]
    sdk_request, request = platform.records
    assert request.path == sdk_request.path == f"/v1/environments/{ECHO}/required-secrets"


def test_a_wrong_key_and_a_target_off_the_catalog_are_told(platform) -> None:
    with pytest.raises(ServerError, match="401") as caught:
        run_sync(lambda: required_secrets(Endpoint.for_catalog(ECHO, api_key="sk-wrong-key-1234")))
    assert "sk-wrong-key-1234" not in str(caught.value)
    with pytest.raises(ServerError, match="404"):
        run_sync(lambda: task_difficulty(Endpoint.for_catalog("Owner/Nobody")))
    with pytest.raises(BadTargetError, match="not a catalog environment"):
        run_sync(lambda: task_difficulty(Endpoint.for_url("http://127.0.0.1:9", "echo")))


def test_a_row_ormix_cannot_read_is_a_protocol_error_naming_the_field(platform) -> None:
    from ormix.ors import ProtocolError

    platform.task_difficulty["Owner/Odd"] = [{"task_index": 0, "avg_reward": 1.0, "min_reward": None}]
    platform.deployments["Owner/Odd"] = platform.deployments[ECHO]
    try:
        with pytest.raises(ProtocolError, match="min_reward"):
            run_sync(lambda: task_difficulty(Endpoint.for_catalog("Owner/Odd")))
    finally:
        del platform.deployments["Owner/Odd"], platform.task_difficulty["Owner/Odd"]
