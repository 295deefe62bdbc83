"""Demo and test tooling: the offline tiny model, a scripted policy, a warm start (unused by the library)."""
