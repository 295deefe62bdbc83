"""The TRL side of ormix, and the only place that imports TRL or transformers.

`callbacks` (telemetry, session cleanup, trainer checks), `args` (a `GRPOConfig` consistent with a
mixture), `compat` (what the installed TRL offers).
"""
