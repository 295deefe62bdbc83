"""Rollout upload from the trainer (`ormix.telemetry._upload`): every recorded rollout reaches the platform
double once, with its run info, secrets redacted; the counts are logged and said at the end.

The end-to-end test trains GRPO (tiny model, scripted policy) at 256 rollouts a step on a two-member mixture
of real local ORS servers, uploading to the platform double (tests/support/platform_double.py, the
OpenReward platform's stand-in), and compares what the double stored with the rollout records.
"""

from __future__ import annotations

import json
import re
import warnings
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ormix._errors import UsageError
from ormix.config import MixtureConfig, MixtureConfigError
from ormix.config._models import UploadConfig
from ormix.rollout._rewards import ScoredBatch
from ormix.telemetry._records import read_records
from ormix.telemetry._upload import UploadRun, chat_messages
from support.platform_double import PlatformDouble
from support.trl_args import cpu_grpo_config, scripted_trainer

SECRET = "tok-UPLOAD-SECRET-91c2"


@pytest.fixture
def double(monkeypatch):
    with PlatformDouble({"Owner/Echo": ("http://127.0.0.1:9", "echo")}) as platform:
        monkeypatch.setenv("OPENREWARD_API_URL", platform.api_url)
        monkeypatch.setenv("OPENREWARD_API_KEY", platform.api_key)
        yield platform


def _script(ctx):
    """Sample 0 submits the word; sample 1 submits the member's secret (which must never be uploaded)."""
    from ormix.workbench._scripted import tool_call

    if ctx.turn > 0:
        return "done"
    word = re.search(r"word '(\w+)'", ctx.user)
    return tool_call("submit", text=word.group(1) if word and ctx.sample == 0 else SECRET)


@pytest.mark.slow
def test_uploads_equal_rollouts_at_256_a_step(tiny_model, tmp_path, double, monkeypatch):
    from ormix import MixtureSpec, OpenRewardSpec
    from ormix.trl._callbacks import TelemetryCallback

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    steps, per_step = 2, 256
    mix = MixtureSpec(
        {
            "a": OpenRewardSpec("local:echo", num_tasks=16, local_serve="thread", secrets={"token": SECRET}),
            "b": OpenRewardSpec("local:echo", num_tasks=16, local_serve="thread"),
        },
        prompts_per_step=per_step // 2,
        num_steps=steps,
        telemetry={"upload": {"run_name": "upload-test", "environments": {"a": "Owner/Echo"}}},
    )
    out = tmp_path / "run"
    args = cpu_grpo_config(
        str(out),
        per_device_train_batch_size=per_step,
        max_steps=steps,
        max_completion_length=48,
        max_tool_calling_iterations=1,
    )
    trainer = scripted_trainer(mix, tiny_model, args, _script)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    mix.close()

    callback = next(c for c in mix.callbacks if isinstance(c, TelemetryCallback))
    records = read_records(out)
    stored = double.uploaded()
    assert len(records) == steps * per_step
    # 0 lost, 0 duplicated: one stored rollout per record, no event sent twice, no message without a start.
    assert len(stored) == len(records)
    assert (double.upload_duplicates, double.upload_orphans) == (0, 0)
    counts = callback.upload.uploader.snapshot()
    assert (counts.submitted, counts.sent, counts.lost) == (len(records), len(records), 0)
    assert (
        callback.upload_summary
        == f"ormix: uploaded {len(records)} of {len(records)} rollouts to OpenReward run 'upload-test'"
    )

    def key(member, step, group, task, reward):
        return (member, step, group, task, reward)

    uploaded = Counter(
        key(
            r["start"]["metadata"]["member"],
            r["start"]["step"],
            r["start"]["metadata"]["group"],
            r["update"]["rollout_info"]["task_index"],
            r["messages"][-1].get("reward"),
        )
        for r in stored.values()
    )
    recorded = Counter(
        key(r["member"], r["step"], r["group"], r["task_index"], r["env_reward"]) for r in records
    )
    assert uploaded == recorded
    some = next(iter(stored.values()))["start"]
    assert some["runName"] == "upload-test" and some["run_info"]["run_type"] == "train"
    assert some["run_info"]["model_name"] == tiny_model and some["run_info"]["framework"] == "trl"
    assert {r["start"].get("environment") for r in stored.values()} == {"Owner/Echo", None}
    # Each rollout's chat: the prompt, the model's tool call, the environment's answer.
    kinds = {tuple(m["type"] for m in r["messages"]) for r in stored.values()}
    assert all(("tool_call", "tool_result") == k[-2:] or "tool_call" in k for k in kinds)
    text = json.dumps([e for e in double.upload_events.values()])
    assert SECRET not in text and "[redacted]" in text
    # Logged with every step (this process's counts so far; a step's rollouts may still be on their way).
    sent = [h["ormix/upload/sent"] for h in trainer.state.log_history if "step_time" in h]
    assert len(sent) == steps and sent == sorted(sent) and sent[-1] <= len(records)


def _batch(member_rows: int, prompts=None, completions=None) -> ScoredBatch:
    return ScoredBatch(
        member="a",
        environments=[object()] * member_rows,
        rewards=[1.0] * member_rows,
        mine=[(i, None) for i in range(member_rows)],
        prompts=prompts,
        completions=completions,
    )


def _records(n: int, mode: str = "train") -> list[dict]:
    return [
        {"mode": mode, "step": 1, "member": "a", "task_index": i, "split": "train", "group": i // 2}
        for i in range(n)
    ]


def test_only_the_chosen_members_and_modes_are_queued():
    up = UploadRun(
        UploadConfig(members=["a"], eval=False), run_name="r", model_name="m", api_url="http://x", api_key="k"
    )
    up.observe("a", "train", _records(4), _batch(4))
    up.observe("b", "train", _records(4), _batch(4))
    up.observe("a", "eval", _records(4, "eval"), _batch(4))
    assert up.uploader.counts.submitted == 4


def test_an_upload_without_an_api_key_says_which_variable(monkeypatch):
    monkeypatch.delenv("MY_OR_KEY", raising=False)
    with pytest.raises(UsageError, match=r"\$MY_OR_KEY"):
        UploadRun(UploadConfig(api_key_env="MY_OR_KEY"), run_name="r", model_name="m")


def test_a_full_upload_queue_drops_and_the_step_goes_on():
    up = UploadRun(UploadConfig(max_queued=2), run_name="r", model_name="m", api_url="http://x", api_key="k")
    up.observe("a", "train", _records(5), _batch(5))  # never started: nothing drains
    metrics = up.metrics()
    assert (metrics["ormix/upload/dropped"], metrics["ormix/upload/queued"]) == (3.0, 2.0)
    assert "3 dropped, queue full" in up.summary()


def test_upload_settings_name_members_of_the_mixture_and_leave_the_hash_alone():
    base = {"members": {"a": {"target": "local:echo"}}}
    with_upload = {**base, "telemetry": {"upload": {"run_name": "r", "members": ["a"]}}}
    assert MixtureConfig.from_dict(with_upload).config_hash() == MixtureConfig.from_dict(base).config_hash()
    with pytest.raises(MixtureConfigError, match="'b', not a member"):
        MixtureConfig.from_dict({**base, "telemetry": {"upload": {"environments": {"b": "O/B"}}}})
    with pytest.raises(MixtureConfigError, match="NAME of an environment variable"):
        MixtureConfig.from_dict({**base, "telemetry": {"upload": {"api_key_env": "sk-123"}}})


_words = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)


@given(
    calls=st.lists(st.tuples(st.sampled_from(["echo", "submit"]), _words), max_size=4),
    text=_words,
)
def test_every_tool_call_is_answered_under_its_id_and_no_secret_survives(calls, text):
    completion = []
    for name, arg in calls:
        completion.append(
            {
                "role": "assistant",
                "content": text + SECRET,
                "tool_calls": [
                    {"type": "function", "function": {"name": name, "arguments": {"text": arg + SECRET}}}
                ],
            }
        )
        completion.append({"role": "tool", "name": name, "content": SECRET + arg})
    messages = chat_messages([{"role": "user", "content": SECRET}], completion, secrets=(SECRET,))
    assert all(SECRET not in (m.content or "") for m in messages)
    ids = [m.call_id for m in messages if m.type == "tool_call"]
    assert ids == [m.call_id for m in messages if m.type == "tool_result"]
    assert len(set(ids)) == len(calls)


def test_records_without_their_batch_are_uploaded_with_their_policy_version(double):
    """AsyncGRPOTrainer's worker hands the trainer records only: each still arrives, its reward on a last
    message, its policy version the record's."""
    up = UploadRun(UploadConfig(run_name="async"), run_name="r", model_name="m").start()
    records = [
        {**r, "env_reward": 1.0, "reward": 1.0, "policy_version": 3, "outcome": "scored"} for r in _records(3)
    ]
    up.observe_records(records)
    counts = up.close()
    stored = double.uploaded()
    assert (counts.sent, counts.lost, len(stored)) == (3, 0, 3)
    for r in stored.values():
        assert r["start"]["metadata"]["policy_version"] == 3 and r["start"]["runName"] == "async"
        assert [(m["type"], m.get("reward"), "content" in m) for m in r["messages"]] == [
            ("assistant_message", 1.0, False)
        ]


def test_the_end_of_a_run_waits_close_timeout_s_for_a_platform_that_never_answers():
    import socket
    import time

    with socket.socket() as hole:  # accepts connections (the backlog), never answers
        hole.bind(("127.0.0.1", 0))
        hole.listen(16)
        url = f"http://127.0.0.1:{hole.getsockname()[1]}"
        took = {}
        for wait in (0.0, 1.0):
            up = UploadRun(
                UploadConfig(close_timeout_s=wait), run_name="r", model_name="m", api_url=url, api_key="k"
            )
            up.start().observe("a", "train", _records(3), _batch(3))
            started = time.monotonic()
            counts = up.close()
            took[wait] = time.monotonic() - started
            assert counts.sent == 0 and counts.abandoned + counts.unconfirmed == 3
    # Bounded by the setting, not by the HTTP timeouts of a request in flight (they used to add 5 s).
    assert took[0.0] < 0.9 <= took[1.0] < 3.0, took


def test_a_resumed_run_uploads_the_step_it_resumed_from(double, tmp_path):
    # The upload begins when the trainer is built (step 0); the checkpoint loads before training begins.
    from types import SimpleNamespace

    from ormix.telemetry._records import TelemetryObserver
    from ormix.trl._callbacks import TelemetryCallback

    callback = TelemetryCallback({"a": TelemetryObserver("a")}, {"upload": {"run_name": "r"}})
    args = SimpleNamespace(
        output_dir=str(tmp_path),
        num_generations=2,
        num_generations_eval=None,
        process_index=0,
        learning_rate=1e-5,
    )
    callback.on_init_end(args, SimpleNamespace(global_step=0), SimpleNamespace())
    assert "initial_step" not in callback.upload.run_info
    resumed = SimpleNamespace(global_step=5, is_world_process_zero=True, log_history=[])
    callback.on_train_begin(args, resumed, SimpleNamespace(), model=None)
    try:
        assert callback.upload.run_info["initial_step"] == 5
    finally:
        callback.upload.close()
