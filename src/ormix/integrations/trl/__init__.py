"""The TRL side of ormix: trainer callbacks and checks of the trainer's configuration."""

from ormix.integrations.trl.callbacks import *  # noqa: F403
