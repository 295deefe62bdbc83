"""Per-environment telemetry: metrics in the trainer's logs (`metrics`, pure), the coverage alarm (`alarm`,
pure) and rollout records on disk (`records`, the only I/O)."""
