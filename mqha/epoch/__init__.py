"""Epoch history of a broker replica (docs/reference-behaviour.md §12, §13; docs/architecture.md §4).

Core: ``mqha.epoch.history`` (immutable :class:`EpochHistory`, ``find_consistent_point``) and
``mqha.epoch.codec`` (the epoch file's text format). Shell: ``mqha.epoch.file`` (:class:`EpochFile` with
atomic save and ``.bak`` recovery, :class:`EpochStore` for the broker).
"""

from typing import Any

from mqha.epoch.codec import decode_epoch_file, encode_epoch_file
from mqha.epoch.history import EpochEntry, EpochHistory, find_consistent_point

__all__ = [
    "EpochEntry",
    "EpochFile",
    "EpochHistory",
    "EpochStore",
    "decode_epoch_file",
    "encode_epoch_file",
    "find_consistent_point",
]

_SHELL_NAMES = frozenset({"EpochFile", "EpochStore"})


def __getattr__(name: str) -> Any:
    # The shell is imported lazily so that cores importing this package never load file IO code.
    if name in _SHELL_NAMES:
        from mqha.epoch import file

        return getattr(file, name)
    raise AttributeError(f"module 'mqha.epoch' has no attribute {name!r}")
