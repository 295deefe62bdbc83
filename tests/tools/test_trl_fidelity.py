"""What the model sees, field by field: ormix's tool schemas vs TRL's `OpenRewardSpec` on the same server.

For every tool of the local environments (`local:echo`, `local:terminals`, `local:seta` on the SDK's real
CLIToolset, `local:faulty`), of the two catalog tool surfaces in `tests/data/tool-surfaces/`, and of an SDK
`@tool` environment whose docstrings document their parameters (`Args:`), the JSON schema
`transformers.utils.get_json_schema` makes of ormix's method must equal TRL's or be richer: every key TRL
shows is there with the same value, and every text TRL shows is in ormix's text (extra descriptions, enums,
item types, nullables and defaults are allowed). Both specs are built against one real server on loopback.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from openreward.environments import Environment, TextBlock, ToolOutput, tool
from pydantic import BaseModel, Field
from transformers.utils import get_json_schema
from transformers.utils.chat_template_utils import DocstringParsingException

from ormix import OpenRewardSpec
from ormix.server import serve_in_thread
from support.envs import SetaSurface, SweSurface


class EchoParams(BaseModel, extra="forbid"):
    text: str


class SearchParams(BaseModel, extra="forbid"):
    query: str
    limit: int = 5
    mode: str = "exact"
    scope: str = Field("notes", description="Where to search.")


class Documented(Environment):
    """SDK `@tool` environment documenting its parameters the Google way, as SDK environments do."""

    def __init__(self, task_spec: dict, secrets: dict[str, str] | None = None) -> None:
        super().__init__(task_spec, secrets or {})

    @classmethod
    def list_splits(cls) -> list[str]:
        return ["train"]

    @classmethod
    def list_tasks(cls, split: str) -> list[dict]:
        return [{"i": 0}, {"i": 1}]

    def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text="Search, then echo.")]

    @tool
    def echo(self, params: EchoParams) -> ToolOutput:
        """Echo the text back.

        Args:
            text: The string to echo back.
        """
        return ToolOutput(blocks=[TextBlock(text=params.text)], reward=0.0, finished=False)

    @tool
    def search(self, params: SearchParams) -> ToolOutput:
        """Search the notes.

        Matches are ranked by how often the query occurs.

        Args:
            query (str): What to look for,
                over several lines.
            limit: How many results at most.
            mode: How to match (choices: ["exact", "fuzzy"])
            scope: The collection to search.

        Returns:
            The matching notes, one per line.
        """
        return ToolOutput(blocks=[TextBlock(text=params.query)], reward=0.0, finished=False)

    @tool
    def submit(self, params: EchoParams) -> ToolOutput:
        """Submit the answer and end the episode.

        Args:
            params: The submission.
        """
        return ToolOutput(blocks=[TextBlock(text="done")], reward=1.0, finished=True)


ENVIRONMENTS: dict[str, Any] = {
    "echo": "local:echo",
    "terminals": "local:terminals",
    "seta": "local:seta",
    "faulty": "local:faulty",
    "setasurface": SetaSurface,
    "swesurface": SweSurface,
    "documented": Documented,
}
#: Tools whose TRL binding `get_json_schema` cannot render at all. `submit` documents the SDK's `params`
#: argument: TRL's own `Args:` block, appended after the server's, is read as that entry's text, so TRL's
#: `text` parameter ends up with no description and get_json_schema raises.
TRL_CANNOT_RENDER = {("documented", "submit")}


@pytest.fixture(scope="module")
def servers():
    """One server per environment (TRL's SDK reaches only a server's default environment), started on use."""
    started: dict[str, Any] = {}

    def url(env: str) -> str:
        if env not in started:
            started[env] = serve_in_thread([ENVIRONMENTS[env]])
        return started[env].url

    yield url
    for server in started.values():
        server.close()


def tool_methods(cls: type) -> dict[str, Any]:
    """The methods TRL's trainer shows the model as tools (its own discovery rule)."""
    return {
        name: fn
        for name, fn in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_") and name not in ("reset", "get_reward")
    }


def both_bindings(url: str, env: str, monkeypatch: pytest.MonkeyPatch) -> tuple[dict, dict]:
    from trl.experimental.openreward import OpenRewardSpec as TRLSpec

    monkeypatch.setenv("OPENREWARD_SESSION_URL", url)  # else the SDK sends sessions to `sessions.<host>`
    theirs = tool_methods(type(TRLSpec(url, env_name=env, num_tasks=1).environment_factory()))
    spec = OpenRewardSpec(url, env_name=env, num_tasks=1)
    try:
        ours = tool_methods(spec.episode_class)
    finally:
        spec.close()
    return theirs, ours


def _text(value: str) -> str:
    return " ".join(value.split())


def assert_at_least_as_rich(theirs: dict[str, Any], ours: Any, path: str) -> None:
    """Every key of TRL's schema is in ours with the same value; every text of TRL's is inside ours."""
    assert isinstance(ours, dict), (path, ours)
    for key, value in theirs.items():
        where = f"{path}.{key}"
        assert key in ours, f"{where}: TRL shows it, ormix does not: {ours}"
        mine = ours[key]
        if isinstance(value, dict):
            assert_at_least_as_rich(value, mine, where)
        elif key == "description":
            if path.endswith(".return"):
                # TRL appends its Args block after the server's text, so the server's Returns section swallows
                # it: what TRL shows as the return text is the server's text plus TRL's own argument lines
                value = value.split("\n\nArgs:\n")[0]
            assert _text(value) in _text(mine), (where, value, mine)
        elif key == "required":
            assert sorted(value) == sorted(mine), where
        else:
            assert mine == value, (where, value, mine)


@pytest.mark.parametrize("env", sorted(ENVIRONMENTS))
def test_every_tool_shows_the_model_at_least_what_trl_shows(servers, env, monkeypatch):
    theirs, ours = both_bindings(servers(env), env, monkeypatch)
    assert set(ours) == set(theirs)
    for name in sorted(theirs):
        mine = get_json_schema(ours[name])
        assert "Args :" not in mine["function"]["description"], name  # sections are read, not mangled
        if (env, name) in TRL_CANNOT_RENDER:
            with pytest.raises(DocstringParsingException):
                get_json_schema(theirs[name])
            continue
        assert_at_least_as_rich(get_json_schema(theirs[name]), mine, name)


def test_docstring_parameter_texts_reach_the_model_and_leave_the_description_clean(servers, monkeypatch):
    theirs, ours = both_bindings(servers("documented"), "documented", monkeypatch)
    echo = get_json_schema(ours["echo"])["function"]
    assert echo == get_json_schema(theirs["echo"])["function"]  # the seed's own example: exactly TRL's
    assert echo["description"] == "Echo the text back."
    assert echo["parameters"]["properties"]["text"]["description"] == "The string to echo back."

    search = get_json_schema(ours["search"])["function"]
    props = search["parameters"]["properties"]
    assert search["description"] == "Search the notes.\n\nMatches are ranked by how often the query occurs."
    assert props["query"]["description"] == "What to look for, over several lines."
    assert props["limit"]["description"] == "How many results at most. Default: 5."
    assert props["mode"]["enum"] == ["exact", "fuzzy"]  # TRL reads "(choices: ...)" as an enum; so do we
    assert props["mode"]["description"] == 'How to match. Default: "exact".'
    # The schema's own description and the docstring's text differ: the model gets both
    assert props["scope"]["description"] == 'Where to search. The collection to search. Default: "notes".'
    assert search["return"] == {"type": "string", "description": "The matching notes, one per line."}

    submit = get_json_schema(ours["submit"])["function"]
    assert submit["description"] == "Submit the answer and end the episode."
    assert submit["parameters"]["properties"]["text"]["description"] == "Text"  # `params` documents no field
