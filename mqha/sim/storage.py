"""A broker's disk and the store on it: a commit log that can lose its un-fsynced tail.

The log holds fixed-size messages (``MESSAGE_SIZE`` bytes: the message's id), so every offset the HA
machines hand out is a message boundary. ``flushed`` is how far the log is fsynced: a power loss cuts
the log back to it, a process crash loses nothing (the page cache survives), a disk wipe loses all.
The epoch file, the identity files and the confirm-offset checkpoint are written atomically and
durably, as the broker writes them.

``SimStore`` is the production ``ReplicaStore`` protocol (``mqha.autoswitch_ha.replica``) over a disk,
so the real ``AckGate`` and ``HARoleSwitch`` run on it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from mqha.epoch.history import EpochHistory
from mqha.replicas_manager.actions import BrokerIdentity, TempBrokerIdentity

MESSAGE_SIZE = 8
_ID = struct.Struct(">Q")


def encode_message(msg_id: int) -> bytes:
    return _ID.pack(msg_id)


def message_at(log: bytearray, offset: int) -> int | None:
    """The id of the message at ``offset``, None past the end."""
    if offset + MESSAGE_SIZE > len(log):
        return None
    return _ID.unpack_from(log, offset)[0]


@dataclass
class Disk:
    """What survives a process: the log (fsynced up to ``flushed``) and the small durable files."""

    store_id: str
    log: bytearray = field(default_factory=bytearray)
    flushed: int = 0
    epochs: EpochHistory = field(default_factory=EpochHistory)
    confirm_checkpoint: int = -1
    identity: BrokerIdentity | None = None
    temp_identity: TempBrokerIdentity | None = None
    clean_shutdown: bool = True
    full: bool = False  # a full disk refuses appends

    def power_loss(self) -> None:
        del self.log[self.flushed :]
        self.clean_shutdown = False

    def flush(self) -> None:
        self.flushed = len(self.log)

    def truncated_to(self, offset: int) -> None:
        del self.log[offset:]
        self.flushed = min(self.flushed, offset)


class SimStore:
    """The store of one broker process over its disk (the ``ReplicaStore`` protocol)."""

    def __init__(self, disk: Disk) -> None:
        self.disk = disk
        self._confirm = min(disk.confirm_checkpoint, len(disk.log))
        self.changed = 0  # bumped on every truncation or reset: the invariant checker re-reads the log

    @property
    def min_offset(self) -> int:
        return 0

    @property
    def max_offset(self) -> int:
        return len(self.disk.log)

    @property
    def epochs(self) -> EpochHistory:
        return self.disk.epochs

    @property
    def stored_confirm_offset(self) -> int:
        return self._confirm

    def set_stored_confirm_offset(self, value: int) -> None:
        self._confirm = value

    def save_confirm_offset(self, value: int, *, durable: bool = False) -> None:
        self._confirm = value
        self.disk.confirm_checkpoint = value

    def checkpoint(self) -> None:
        """The periodic confirm-offset checkpoint (``ConfirmCheckpoint``)."""
        self.disk.confirm_checkpoint = self._confirm

    def read_batches(self, offset: int, batch_bytes: int, max_bytes: int) -> list[bytes | memoryview]:
        end = min(len(self.disk.log), offset + max_bytes)
        return [bytes(self.disk.log[o : min(end, o + batch_bytes)]) for o in range(offset, end, batch_bytes)]

    def apply_truncation(self, offset: int, epochs: EpochHistory) -> None:
        if offset % MESSAGE_SIZE:
            raise ValueError(f"offset {offset} is not a message boundary")
        self.disk.epochs = epochs
        self.disk.truncated_to(offset)
        self._confirm = min(self._confirm, offset)
        self.changed += 1

    def reset_log(self, reason: str = "") -> None:
        self.disk.epochs = EpochHistory()
        self.disk.truncated_to(0)
        self._confirm = -1
        self.changed += 1

    def append_epoch(self, epoch: int, start_offset: int) -> EpochHistory:
        self.disk.epochs = self.disk.epochs.append(epoch, start_offset)
        return self.disk.epochs

    def append(self, data: bytes, *, fsync: bool) -> int:
        self.disk.log += data
        if fsync:
            self.disk.flush()
        return len(self.disk.log)
