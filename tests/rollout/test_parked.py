"""Sessions parked for a batch's resets (`EpisodeConfig.park`) on a real local server (`local:faulty`)."""

from __future__ import annotations

from ormix import OpenRewardSpec
from ormix.rollout._batch import OpenRequest, open_sessions
from ormix.server._shared import server_for


def test_discarding_parked_sessions_counts_only_the_sessions_closed():
    spec = OpenRewardSpec("local:faulty", num_tasks=1, local_serve="thread", discover_task_tools=False)
    config = spec.episode_config
    rows = [{"task_spec": {"answer": "42"}}, {"task_spec": {"fail_open": True}}]
    open_sessions([OpenRequest(config, row) for row in rows])
    assert len(server_for("local:faulty", mode="thread").active_sessions()) == 1
    assert config.discard_parked() == 1  # the failed open held no session: nothing to close, not counted
    assert server_for("local:faulty", mode="thread").active_sessions() == []
