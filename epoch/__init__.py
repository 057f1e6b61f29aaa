"""Epoch history of a broker replica (spec §12, §13; ARCHITECTURE §4).

Core: ``epoch.history`` (immutable :class:`EpochHistory`, ``find_consistent_point``) and
``epoch.codec`` (the epoch file's text format). Shell: ``epoch.file`` (:class:`EpochFile` with atomic
save and ``.bak`` recovery, :class:`EpochStore` for the broker).
"""

from typing import Any

from epoch.codec import decode_epoch_file, encode_epoch_file
from epoch.history import EpochEntry, EpochHistory, find_consistent_point

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
        from epoch import file

        return getattr(file, name)
    raise AttributeError(f"module 'epoch' has no attribute {name!r}")
