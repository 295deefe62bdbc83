"""Looking at a mixture before and after a run: `check` (live environments), `inspect` (plan), `report` (records)."""
