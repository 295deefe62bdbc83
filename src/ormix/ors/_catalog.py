"""What the OpenReward platform's API host knows of a catalog environment: the secrets it requires, and the
per-task difficulty of the rollouts logged on it.

Both are the openreward SDK's calls (`openreward/api/environments/client.py`), sent as it sends them:

- `required_secrets`: ``GET {api}/v1/environments/{owner}/{name}/required-secrets`` → ``{"secrets": [...]}``
  (the SDK's ``AsyncEnvironment.list_required_secrets``);
- `task_difficulty`: ``GET {api}/v1/environments/{owner}/{name}/task-difficulty`` with the query parameters
  ``variant``, ``split``, ``model_name``, ``min_model_params``, ``max_model_params``, ``training_stage``
  (those given) → ``{"tasks": [{task_index, avg_reward, min_reward, max_reward, num_rollouts,
  response_chars, split, variant}, ...]}`` (the SDK's ``get_task_difficulty``).

Each goes to the endpoint's API host (``OPENREWARD_API_URL``) with ``X-API-Key``; a URL target has no such
host (`BadTargetError`). Retries, a 429's pause and typed errors are `ormix.ors._transport`'s.

Example:
    >>> difficulty_query(split="train", training_stage="rl")
    '?split=train&training_stage=rl'
    >>> row = TaskDifficulty.from_json({"task_index": 3, "avg_reward": 1.0, "min_reward": 1.0,
    ...                                 "max_reward": 1.0, "num_rollouts": 12})
    >>> row.task_index, row.num_rollouts, row.split
    (3, 12, None)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import quote, urlencode

from ormix.ors._endpoint import Endpoint
from ormix.ors._errors import BadTargetError, ProtocolError
from ormix.ors._http import HTTPClient
from ormix.ors._transport import Transport, json_of

#: The SDK's ``TrainingStage`` values.
TRAINING_STAGES = ("pretrained", "sft", "rl")
TrainingStage = Literal["pretrained", "sft", "rl"]


@dataclasses.dataclass(frozen=True)
class TaskDifficulty:
    """One ``(split, variant, task_index)`` group of logged rollouts: the reward's mean, min and max over its
    ``num_rollouts`` rollouts (the SDK's ``TaskDifficulty``; ``response_chars`` kept as the mapping sent).

    Example:
        >>> TaskDifficulty(0, 0.5, 0.0, 1.0, 4).max_reward
        1.0
    """

    task_index: int
    avg_reward: float
    min_reward: float
    max_reward: float
    num_rollouts: int
    split: str | None = None
    variant: str | None = None
    response_chars: Mapping[str, float] | None = None

    @classmethod
    def from_json(cls, row: Any) -> TaskDifficulty:
        """One row of the platform's answer; `ValueError` naming the field that is missing or not a number.

        Example:
            >>> TaskDifficulty.from_json({"task_index": 1, "avg_reward": 0.0, "min_reward": 0.0,
            ...                           "max_reward": 0.0, "num_rollouts": 2, "split": "train"}).split
            'train'
        """
        if not isinstance(row, Mapping):
            raise ValueError(f"a task row is an object, not {type(row).__name__}")

        def number(key: str) -> float:
            value = row.get(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{key} is {value!r}, not a finite number")
            return float(value)

        def count(key: str) -> int:
            value = row.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{key} is {value!r}, not a count")
            return value

        chars = row.get("response_chars")
        return cls(
            task_index=count("task_index"),
            avg_reward=number("avg_reward"),
            min_reward=number("min_reward"),
            max_reward=number("max_reward"),
            num_rollouts=count("num_rollouts"),
            split=row.get("split") if isinstance(row.get("split"), str) else None,
            variant=row.get("variant") if isinstance(row.get("variant"), str) else None,
            response_chars=dict(chars) if isinstance(chars, Mapping) else None,
        )


def difficulty_query(
    *,
    variant: str | None = None,
    split: str | None = None,
    model_name: str | None = None,
    min_model_params: int | None = None,
    max_model_params: int | None = None,
    training_stage: str | None = None,
) -> str:
    """The query string of a task-difficulty request: the parameters given, in the SDK's order.

    Example:
        >>> difficulty_query(variant="v1", min_model_params=7_000_000_000)
        '?variant=v1&min_model_params=7000000000'
        >>> difficulty_query()
        ''
    """
    params = {
        "variant": variant,
        "split": split,
        "model_name": model_name,
        "min_model_params": None if min_model_params is None else str(int(min_model_params)),
        "max_model_params": None if max_model_params is None else str(int(max_model_params)),
        "training_stage": training_stage,
    }
    given = {k: v for k, v in params.items() if v is not None}
    return "?" + urlencode(given) if given else ""


def _api_path(endpoint: Endpoint, route: str) -> str:
    if not endpoint.is_platform or endpoint.deployment is None:
        raise BadTargetError(
            f"{endpoint.target} is not a catalog environment: only the OpenReward platform answers {route}"
        )
    owner, _, name = endpoint.deployment.partition("/")
    if not owner or not name:
        raise BadTargetError(
            f"{endpoint.deployment!r} has no owner: the platform keys {route} by owner/name; write it so"
        )
    return f"/v1/environments/{quote(owner, safe='')}/{quote(name, safe='')}/{route}"


async def _get(endpoint: Endpoint, path: str, http: HTTPClient | None, retries: int) -> Any:
    # The API host, not the sessions host: a transport whose "session URL" is the API URL.
    api = dataclasses.replace(endpoint, session_url=endpoint.api_url)
    headers = {"User-Agent": api.headers()["User-Agent"]}
    if endpoint.api_key:
        headers["X-API-Key"] = endpoint.api_key
    if http is None:
        async with HTTPClient() as own:
            return await _get(endpoint, path, own, retries)
    tr = Transport(api, http, retries)
    resp = await tr.request("GET", path, headers=headers, ride_out_starting=False)
    try:
        return json_of(resp, f"GET {path.partition('?')[0]}", endpoint.target, env=endpoint.deployment)
    except ProtocolError as e:
        raise e.redact(tr.sensitive) from e.__cause__


async def required_secrets(
    endpoint: Endpoint, *, http: HTTPClient | None = None, retries: int = 3
) -> list[str]:
    """The names of the secrets the catalog environment at `endpoint` requires (the SDK's
    ``list_required_secrets``). Raises `ServerError` for an answer other than 200 (401: the key), and
    `ProtocolError` when the answer is not ``{"secrets": [names]}``."""
    path = _api_path(endpoint, "required-secrets")
    body = await _get(endpoint, path, http, retries)
    names = body.get("secrets") if isinstance(body, dict) else None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ProtocolError(
            f"GET {path} to {endpoint.api_url} answered {type(body).__name__} without a list of secret "
            'names ("secrets"); is OPENREWARD_API_URL the platform API?',
            env=endpoint.deployment,
        )
    return list(dict.fromkeys(names))


async def task_difficulty(
    endpoint: Endpoint, *, http: HTTPClient | None = None, retries: int = 3, **query: Any
) -> list[TaskDifficulty]:
    """Per-task reward statistics of the rollouts logged on the catalog environment at `endpoint` (the SDK's
    ``get_task_difficulty``; the endpoint's ``env_name`` is the variant). Rows are sorted by (split,
    variant, task index), so equal answers give equal lists. Errors as `required_secrets`'.
    `query`: the other parameters of `difficulty_query` (split, model_name, min/max_model_params,
    training_stage)."""
    path = _api_path(endpoint, "task-difficulty") + difficulty_query(variant=endpoint.env_name, **query)
    body = await _get(endpoint, path, http, retries)
    tasks = body.get("tasks") if isinstance(body, dict) else None
    if not isinstance(tasks, list):
        raise ProtocolError(
            f"GET {path.partition('?')[0]} to {endpoint.api_url} answered without a list of tasks "
            '("tasks"); is OPENREWARD_API_URL the platform API?',
            env=endpoint.deployment,
        )
    rows = []
    for i, row in enumerate(tasks):
        try:
            rows.append(TaskDifficulty.from_json(row))
        except ValueError as e:
            raise ProtocolError(
                f"GET {path.partition('?')[0]} to {endpoint.api_url}: task row {i} cannot be read ({e})",
                env=endpoint.deployment,
            ) from None
    return sorted(rows, key=lambda r: (r.split or "", r.variant or "", r.task_index))
