"""Rollout upload on the wire (`ormix.ors._rollouts`), against the platform double's rollout routes
(tests/support/platform_double.py, grown from the openreward SDK's `RolloutAPI` source).

What is held: every submitted rollout arrives once (0 lost, 0 duplicated, no message before its start); what
ormix sends has the shape the SDK sends for the same rollout; a refused upload is sent again with the same
event ids, one that may have arrived is never sent again (counted `unconfirmed`); a full queue drops and
counts, never blocks.
"""

from __future__ import annotations

import time

import pytest

from ormix.ors._rollouts import Message, PlatformRollout, RolloutUploader, rollout_events
from support.platform_double import PlatformDouble

ENV = "Owner/Echo"


@pytest.fixture(scope="module")
def double():
    # Only the API host is used: the deployment's upstream is never reached.
    with PlatformDouble({ENV: ("http://127.0.0.1:9", "echo")}) as platform:
        yield platform


@pytest.fixture
def platform(double):
    double.clear()
    return double


def _rollout(i: int, *, environment: str | None = ENV) -> PlatformRollout:
    return PlatformRollout(
        "run-test",
        [
            Message("system_message", "be brief"),
            Message("user_message", f"task {i}"),
            Message("tool_call", '{"text": "apple"}', name="echo", call_id="call_0"),
            Message("tool_result", "apple", call_id="call_0"),
            Message("assistant_message", "done"),
        ],
        environment=environment,
        split="train",
        task_spec={"split": "train", "index": i},
        metadata={"member": "echo"},
        run_info={"model_name": "tiny", "run_type": "train"},
        rollout_info={"task_index": i, "current_step": 1},
        step=1,
        reward=float(i % 2),
    )


def _uploader(platform: PlatformDouble, **kwargs) -> RolloutUploader:
    kwargs.setdefault("retry_delay", lambda n: 0.0)
    return RolloutUploader(platform.api_url, platform.api_key, **kwargs).start()


def test_every_rollout_arrives_once_with_its_messages_in_order(platform):
    up = _uploader(platform)
    rollouts = [_rollout(i) for i in range(256)]
    assert up.submit(rollouts) == 256
    counts = up.close(timeout_s=60)
    stored = platform.uploaded()
    assert (counts.sent, counts.lost, len(stored)) == (256, 0, 256)
    assert (platform.upload_duplicates, platform.upload_orphans) == (0, 0)
    for r in rollouts:
        got = stored[r.event_id]
        assert [m["type"] for m in got["messages"]] == [m.type for m in r.messages]
        assert [m["index"] for m in got["messages"]] == list(range(5))
        assert got["messages"][-1]["reward"] == r.reward and got["messages"][-1]["isFinished"] is True
        assert got["update"]["rollout_info"] == r.rollout_info
        assert got["start"]["environment_id"] == "env-owner-echo"  # looked up as the SDK does
    posts = [rec for rec in platform.records if rec.path == "/v1/rollouts"]
    assert all(rec.body["events"] <= 128 for rec in posts)
    assert all(rec.headers.get("x-api-key") == platform.api_key for rec in posts)
    lookups = [rec for rec in platform.records if rec.path == f"/v1/environments/{ENV}"]
    assert len(lookups) == 1


def test_what_ormix_sends_has_the_sdks_shape(platform, monkeypatch):
    """The same rollout through the SDK's `RolloutAPI` and through ormix: the same events, keys and values
    (ids and timestamps aside)."""
    from openreward import OpenReward
    from openreward.api.rollouts.serializers.base import (
        AssistantMessage,
        SystemMessage,
        ToolCall,
        ToolResult,
        UserMessage,
    )
    from openreward.models import RolloutInfo, RunInfo

    monkeypatch.setenv("OPENREWARD_API_URL", platform.api_url)
    monkeypatch.setenv("OPENREWARD_DISABLE_UPDATE_CHECK", "1")
    client = OpenReward(api_key=platform.api_key)
    sdk = client.rollout.create(
        run_name="run-test",
        environment=ENV,
        split="train",
        metadata={"member": "echo"},
        task_spec={"split": "train", "index": 3},
        run_info=RunInfo(model_name="tiny", run_type="train"),
    )
    sdk.log(SystemMessage("be brief"))
    sdk.log(UserMessage("task 3"))
    sdk.log(ToolCall(name="echo", content='{"text": "apple"}', call_id="call_0"))
    sdk.log(ToolResult(content="apple", call_id="call_0"))
    sdk.log(
        AssistantMessage("done"),
        reward=1.0,
        is_finished=True,
        rollout_info=RolloutInfo(task_index=3, current_step=1),
    )
    client.rollout.close()
    mine = _rollout(3)
    up = _uploader(platform)
    up.submit([mine])
    assert up.close(timeout_s=30).sent == 1
    stored = platform.uploaded()
    theirs, ours = stored[sdk.event_id], stored[mine.event_id]

    def shape(event):
        return {k: v for k, v in event.items() if k not in ("eventId", "timestamp", "rolloutEventId")}

    ours_start = shape(ours["start"])
    assert ours_start.pop("step") == 1  # the SDK's event has the field; its RolloutAPI never sets it
    assert ours_start == shape(theirs["start"])
    assert shape(ours["update"]) == shape(theirs["update"])
    assert [shape(m) for m in ours["messages"]] == [shape(m) for m in theirs["messages"]]


@pytest.mark.parametrize("fault", ["429", "503", "500"])
def test_a_refused_upload_is_sent_again_with_the_same_ids(platform, fault):
    platform.upload_fault(fault, count=2)
    up = _uploader(platform)
    rollouts = [_rollout(i) for i in range(10)]
    up.submit(rollouts)
    counts = up.close(timeout_s=30)
    assert (counts.sent, counts.lost, counts.resends) == (10, 0, 2)
    assert set(platform.uploaded()) == {r.event_id for r in rollouts}
    assert platform.upload_duplicates == 0


def test_an_upload_that_may_have_arrived_is_not_sent_blindly(platform):
    """Stored, then the connection is cut before the answer: ormix cannot know, so it does not resend."""
    platform.upload_fault("stored-cut")
    up = _uploader(platform)
    up.submit([_rollout(0)])
    counts = up.close(timeout_s=30)
    assert (counts.sent, counts.unconfirmed, counts.resends) == (0, 1, 0)
    assert platform.upload_duplicates == 0
    # The start arrived (the platform stored it); its messages were not sent after an unconfirmed start.
    assert [len(r["messages"]) for r in platform.uploaded().values()] == [0]


def test_a_5xx_after_storing_is_resent_as_the_sdk_does_and_the_ids_make_it_a_copy(platform):
    """The SDK resends a batch answered 5xx; the same event ids let the platform tell the copy (the
    double counts it and stores the rollout once)."""
    platform.upload_fault("stored-500")
    up = _uploader(platform)
    r = _rollout(0)
    up.submit([r])
    counts = up.close(timeout_s=30)
    assert (counts.sent, counts.lost, counts.resends) == (1, 0, 1)
    assert platform.upload_duplicates == 1  # the start event, sent twice under one id
    assert list(platform.uploaded()) == [r.event_id]


def test_a_refused_start_sends_no_messages_and_counts_failed(platform):
    up = RolloutUploader(platform.api_url, "sk-wrong-key", retry_delay=lambda n: 0.0).start()
    up.submit([_rollout(0), _rollout(1)])
    counts = up.close(timeout_s=30)
    assert (counts.sent, counts.failed, counts.resends) == (0, 2, 0)  # a 401 is not retried
    assert platform.uploaded() == {}
    assert [rec.status for rec in platform.records if rec.path == "/v1/rollouts"] == [401]


def test_a_full_queue_drops_and_counts_without_blocking(platform):
    up = RolloutUploader(platform.api_url, platform.api_key, max_queued=3)  # not started: nothing drains
    t0 = time.perf_counter()
    assert up.submit(_rollout(i) for i in range(5)) == 3
    assert time.perf_counter() - t0 < 0.5
    assert (up.counts.submitted, up.counts.dropped, up.counts.queued) == (5, 2, 3)
    up.start()
    counts = up.close(timeout_s=30)
    assert (counts.sent, counts.dropped, counts.lost) == (3, 2, 2)
    assert up.submit([_rollout(9)]) == 0 and up.counts.dropped == 3  # closed: dropped, counted


def test_a_platform_that_never_answers_in_time_leaves_the_rest_abandoned(platform):
    up = RolloutUploader("http://127.0.0.1:9", platform.api_key, retry_delay=lambda n: 0.05, max_retries=40)
    up.start().submit([_rollout(0)])
    counts = up.close(timeout_s=0.2)  # port 9 refuses: retried (unsent), still going at close
    assert (counts.sent, counts.abandoned) == (0, 1)


def test_rollout_events_carry_the_reward_on_the_last_message_only():
    start, rest = rollout_events(_rollout(1), timestamp_ms=1)
    messages = [e for e in rest if e["eventType"] == "message"]
    assert [m.get("reward") for m in messages] == [None, None, None, None, 1.0]
    assert [m["isFinished"] for m in messages] == [False] * 4 + [True]
    assert start["task_spec"] == {"split": "train", "index": 1} and "environment_id" not in start


def test_a_rollout_json_cannot_hold_fails_alone_and_the_uploads_go_on(platform):
    # A value strict JSON refuses (NaN; an object in the metadata) fails its rollout; the thread and the
    # other rollouts, in the same batch and after it, carry on.
    up = _uploader(platform)
    bad = [_rollout(0), _rollout(1)]
    bad[0].reward = float("nan")
    bad[1].metadata = {"member": "echo", "when": object()}
    good = [_rollout(i) for i in range(2, 6)]
    assert up.submit([bad[0], good[0], bad[1], good[1]]) == 4
    assert up.flush(30)
    assert up.submit(good[2:]) == 2
    counts = up.close(timeout_s=30)
    assert (counts.sent, counts.failed, counts.abandoned) == (4, 2, 0)
    assert sorted(platform.uploaded()) == sorted(r.event_id for r in good)
