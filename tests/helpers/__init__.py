"""Shared test helpers: processes and ports for integration tests (see processes.py)."""
