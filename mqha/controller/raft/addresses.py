"""Where a Raft member lives: its Raft address from its API address (and back), and its files."""

from __future__ import annotations

import os

JOURNAL_FILE_NAME = "raft.journal"
DUMP_FILE_NAME = "raft.dump"


def raft_address_of(api_address: str, port_offset: int = 1) -> str:
    """The Raft transport address of a controller whose API listens on ``api_address`` (docs/architecture.md
    §3)."""
    host, port = split_address(api_address)
    return f"{host}:{port + port_offset}"


def api_address_of(raft_address: str, port_offset: int = 1) -> str:
    """Inverse of :func:`raft_address_of`: maps ``leader_address()`` back to an API address."""
    host, port = split_address(raft_address)
    return f"{host}:{port - port_offset}"


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` as (host, port); ``ValueError`` naming the expected form otherwise."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected host:port, got {address!r}")
    return host, int(port)


def store_paths(store_dir: str) -> tuple[str, str]:
    """(journal file, dump file) inside a store directory; PySyncObj adds ``.meta`` and ``.tmp`` files."""
    return os.path.join(store_dir, JOURNAL_FILE_NAME), os.path.join(store_dir, DUMP_FILE_NAME)
