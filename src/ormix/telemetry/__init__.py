"""Per-environment telemetry: metrics in the trainer's logs, rollout records on disk, a coverage alarm."""

from ormix.telemetry.metrics import *  # noqa: F403
