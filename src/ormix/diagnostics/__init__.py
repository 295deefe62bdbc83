"""A mixture before and after a run: `check` (live environments), `inspect` (plan), `report` (records)."""
