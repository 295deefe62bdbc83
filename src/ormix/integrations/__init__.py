"""Integrations with trainers. `ormix.integrations.trl` is the only place that imports TRL or transformers."""
