"""Serving ORS environments on loopback (thread or child process) and the registry of `local:` names."""
