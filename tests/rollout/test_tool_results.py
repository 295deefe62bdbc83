"""What an episode makes of odd answers from a real server on loopback: a text block whose `text` is not a
string, a result with only an image, a failure that is not the ORS client's, and a session the server forgot.
None of them raises anything but `ToolCallError` into TRL's loop, and each is recorded."""

from __future__ import annotations

import time

import pytest

from ormix import OpenRewardSpec
from ormix.rollout._episode import ToolCallError, close_episode, detach_session
from ormix.server import serve_in_thread
from support.envs import Blocks


@pytest.fixture(scope="module")
def spec():
    with serve_in_thread([Blocks]) as server:
        yield OpenRewardSpec(server.url, env_name="blocks", num_tasks=2, discover_task_tools=False)


@pytest.fixture
def episode(spec):
    ep = spec.environment_factory()
    yield ep
    close_episode(ep)


def test_a_result_text_that_is_not_a_string_is_an_error_outcome_not_a_type_error(episode):
    assert episode.reset(task_index=0) == "say something"
    with pytest.raises(ToolCallError, match="could not be read"):
        episode.say(text="x")
    assert episode.outcome.kind == "error" and episode.outcome.error_kind == "transport"
    assert episode.reward is None  # the reward 1.0 of an unreadable result is not a score
    call = episode.calls[-1]
    assert call.tool == "say" and call.error == "transport"
    assert "'say'" in call.detail and "`text` is null" in call.detail


def test_a_prompt_text_that_is_not_a_string_is_a_failed_open_not_a_type_error(episode):
    assert "could not start this task" in episode.reset(task_index=1)
    assert episode.outcome.kind == "error" and episode.outcome.error_kind == "session_open"
    assert "GET /prompt" in episode.outcome.error and "`text` is null" in episode.outcome.error
    assert episode.session_id is None


def test_an_image_the_model_cannot_see_is_said_and_recorded(episode):
    episode.reset(task_index=0)
    shown = episode.look(text="x")
    assert shown == "[ormix: the tool returned 1 image block, which is not shown]"
    call = episode.calls[-1]
    assert call.error is None and call.reward == 0.5 and call.detail == shown
    assert episode.outcome.kind == "scored"


def test_a_failure_that_is_not_the_clients_is_an_infrastructure_outcome(spec):
    # A task spec or arguments the client cannot send (not JSON): it raises TypeError, not an ORS error.
    ep = spec.environment_factory()
    try:
        assert "could not start this task" in ep.reset(task_spec={"index": 0, "tags": {"a", "b"}})
        assert ep.outcome.error_kind == "session_open" and "TypeError" in ep.outcome.error
        ep.reset(task_index=0)
        with pytest.raises(ToolCallError):
            ep.say(text={"a", "b"})
        assert ep.outcome.error_kind == "transport" and "TypeError" in ep.calls[-1].detail
    finally:
        close_episode(ep)


def test_detaching_a_dead_session_closes_it():
    faulty = OpenRewardSpec("local:faulty", num_tasks=1, local_serve="thread", discover_task_tools=False)
    ep = faulty.environment_factory()
    try:
        ep.reset(task_spec={})
        ep.die()
        with pytest.raises(ToolCallError):
            ep.echo(text="x")  # the server forgot the session: it is dead
        session = ep._session
        assert session is not None and session.dead
        assert detach_session(ep) is None and ep.session_id is None
        # The close runs on the client's loop: the session is marked closed at once, and forgotten by its
        # client once its deletion is answered.
        deadline = time.monotonic() + 5.0
        while session in session._owner._sessions and time.monotonic() < deadline:
            time.sleep(0.02)
        # Closed, so its client no longer holds it (nor pings it) for the rest of the run.
        assert session.closed and session not in session._owner._sessions
    finally:
        close_episode(ep)
