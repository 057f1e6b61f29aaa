"""Text format of the epoch file (docs/reference-behaviour.md §12.1), byte-compatible with the reference's
``CheckpointFile``.

Core module: strings in, values out. Layout, one ``\\n``-terminated line each::

    <number of entries>
    <CRC32 of the entry block, masked with 0x7FFFFFFF; 0 = "don't check">
    <epoch>-<startOffset>            (one per entry; end offsets are not stored)

The entry block is every entry line followed by its ``\\n``. An empty history encodes as
``"0\\n0\\n"`` (the CRC of an empty block is 0).

Decoding is strict so that a torn write is always detected: the text must end with a line
separator, the count must match, and the CRC (when non-zero) must match. Any proper prefix of a
valid file therefore fails to decode.
"""

from __future__ import annotations

import re
import zlib

from mqha.epoch.history import EpochHistory
from mqha.errors import CorruptFileError
from mqha.ids import MAX_OFFSET

CRC_MASK = 0x7FFFFFFF
LINE_SEPARATOR = "\n"
MAX_EPOCH = 2**31 - 1
"""Epochs are Java ``int`` in the reference; anything larger is not a file we wrote."""

# Bounded digit counts keep int() away from its 4300-digit limit on garbage input.
_NUMBER = re.compile(r"[0-9]{1,19}")
_ENTRY = re.compile(r"([0-9]{1,10})-([0-9]{1,19})")


def entry_block_crc(block: str) -> int:
    """Masked CRC32 of the entry block, as stored on the file's second line."""
    return zlib.crc32(block.encode("utf-8")) & CRC_MASK


def encode_epoch_file(history: EpochHistory) -> str:
    block = "".join(f"{epoch}-{start}{LINE_SEPARATOR}" for epoch, start in history.pairs())
    return f"{len(history)}{LINE_SEPARATOR}{entry_block_crc(block)}{LINE_SEPARATOR}{block}"


def decode_epoch_file(text: str, path: str) -> EpochHistory:
    """Parse an epoch file's text; ``path`` only names the file in errors.

    Raises :class:`CorruptFileError` (naming ``path`` and the reason) for an empty or unterminated
    text, a missing or non-numeric header, a line count other than the header's, a CRC mismatch,
    a malformed entry line, or entries that do not strictly increase.
    """
    if not text:
        raise CorruptFileError(path, "epoch file is empty")
    if not text.endswith(LINE_SEPARATOR):
        raise CorruptFileError(path, "epoch file does not end with a line separator (torn write?)")
    lines = text[: -len(LINE_SEPARATOR)].split(LINE_SEPARATOR)
    if len(lines) < 2:
        raise CorruptFileError(path, "epoch file has no CRC line")
    count = _header_number(lines[0], "entry count", path)
    stored_crc = _header_number(lines[1], "CRC", path)
    entry_lines = lines[2:]
    if len(entry_lines) != count:
        raise CorruptFileError(path, f"header says {count} entries but the file has {len(entry_lines)}")
    if stored_crc != 0:  # 0 means "don't check" (docs/reference-behaviour.md §12.1)
        actual_crc = entry_block_crc("".join(line + LINE_SEPARATOR for line in entry_lines))
        if actual_crc != stored_crc:
            raise CorruptFileError(path, f"CRC mismatch: header says {stored_crc}, entries give {actual_crc}")
    pairs = [_entry(number, line, path) for number, line in enumerate(entry_lines, start=3)]
    try:
        return EpochHistory.from_pairs(pairs)
    except ValueError as exc:
        raise CorruptFileError(path, str(exc)) from exc


def _header_number(line: str, what: str, path: str) -> int:
    if not _NUMBER.fullmatch(line):
        raise CorruptFileError(path, f"{what} line is not a number: {line[:40]!r}")
    return int(line)


def _entry(line_number: int, line: str, path: str) -> tuple[int, int]:
    match = _ENTRY.fullmatch(line)
    if match is None:
        raise CorruptFileError(path, f"line {line_number} is not '<epoch>-<startOffset>': {line[:40]!r}")
    epoch, start = int(match.group(1)), int(match.group(2))
    if epoch > MAX_EPOCH or start >= MAX_OFFSET:
        raise CorruptFileError(path, f"line {line_number}: epoch or start offset out of range: {line!r}")
    return epoch, start


def same_generation(damaged: str, backup: EpochHistory) -> str:
    """How the text of a damaged epoch file proves it held ``backup``'s entries, or ``""`` when it does
    not: it starts with ``backup``'s count and CRC lines (the damage lies in the entries, or the file is
    torn), or it is as long as ``backup``'s text and ends with its entry lines (the damage lies in the
    header). A save writes both files with the same content (docs/architecture.md §9.2), so a backup of
    the same generation is the history the damaged file held; one of another generation would mislabel
    this replica's bytes."""
    good = encode_epoch_file(backup)
    header_end = good.index(LINE_SEPARATOR, good.index(LINE_SEPARATOR) + 1) + 1
    if damaged.startswith(good[:header_end]):
        return "its count and CRC lines match the backup's"
    if len(damaged) == len(good) and damaged.endswith(good[header_end:]):
        return "its entry lines match the backup's"
    return ""
