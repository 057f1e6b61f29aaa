"""The commit log's checkpoint file format. CORE: values in, bytes out and back (no files or clocks).

The store writes it (``flushing.py``) and reads it at open (``recovery.py``); bytes that are not a
whole, matching checkpoint decode as None, and recovery then proceeds as after a crash.
"""

from __future__ import annotations

from struct import Struct
from typing import NamedTuple

from isal import isal_zlib

CHECKPOINT_MAGIC = 0x4D51434B  # "MQCK"
CHECKPOINT_VERSION = 1
_CHECKPOINT = Struct(">IHHQQI4x")  # magic, version, clean flag, segment size, flushed offset, CRC, pad
CHECKPOINT_SIZE = _CHECKPOINT.size
_CHECKPOINT_CRC_POS = 24  # the CRC covers bytes [0, 24)


class Checkpoint(NamedTuple):
    """The store's small state file: whether the last close was clean, and the flushed offset.

    ``clean``: written by ``close`` after a full flush, so every segment but the last may be trusted
    without re-reading. ``flushed_offset``: every byte below it was durable (fsynced) when the
    checkpoint was written, so crash recovery starts in its segment.
    """

    clean: bool
    segment_size: int
    flushed_offset: int


def encode_checkpoint(checkpoint: Checkpoint) -> bytes:
    fields = (
        CHECKPOINT_MAGIC,
        CHECKPOINT_VERSION,
        int(checkpoint.clean),
        checkpoint.segment_size,
        checkpoint.flushed_offset,
    )
    crc = isal_zlib.crc32(_CHECKPOINT.pack(*fields, 0)[:_CHECKPOINT_CRC_POS])
    return _CHECKPOINT.pack(*fields, crc)


def decode_checkpoint(data: bytes) -> Checkpoint | None:
    """The checkpoint in ``data``, or None when it is not one (short, torn, foreign, CRC mismatch)."""
    if len(data) < CHECKPOINT_SIZE:
        return None
    magic, version, clean, segment_size, flushed, crc = _CHECKPOINT.unpack_from(data)
    if magic != CHECKPOINT_MAGIC or version != CHECKPOINT_VERSION or clean not in (0, 1):
        return None
    if isal_zlib.crc32(data[:_CHECKPOINT_CRC_POS]) != crc:
        return None
    return Checkpoint(bool(clean), segment_size, flushed)
