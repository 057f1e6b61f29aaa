"""Epoch history: which master epoch wrote which range of the commit log (docs/reference-behaviour.md §12.2,
§13).

Core module: values in, values out. No files, clocks, threads or logging; the file shell is
``mqha/epoch/file.py``.

An :class:`EpochHistory` is an immutable, ordered list of :class:`EpochEntry`. Epochs and start
offsets strictly increase; every entry ends where the next one starts and the last one is open
(``end_offset == MAX_OFFSET``) unless a caller closed it with :meth:`EpochHistory.with_last_end`
(docs/reference-behaviour.md §13 step 2 closes it at the replica's max offset before comparing histories).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from mqha.errors import FencedError, LocalProtocolError
from mqha.ids import MAX_OFFSET


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """Epoch ``epoch`` wrote the offsets ``[start_offset, end_offset)``."""

    epoch: int
    start_offset: int
    end_offset: int = MAX_OFFSET

    def contains(self, offset: int) -> bool:
        return self.start_offset <= offset < self.end_offset


@dataclass(frozen=True)
class EpochHistory:
    """Immutable epoch history, sorted by epoch; every operation returns a new value.

    Construction validates the invariants (``ValueError`` otherwise), so a history obtained from
    anywhere can be trusted: epochs and starts strictly increase, each non-last entry ends at the
    next entry's start, and the last entry ends at or after its start.
    """

    entries: tuple[EpochEntry, ...] = ()

    def __post_init__(self) -> None:
        # Accept any iterable but store a tuple so the value stays hashable and immutable.
        if not isinstance(self.entries, tuple):
            object.__setattr__(self, "entries", tuple(self.entries))
        _check_entries(self.entries)

    # -- construction -----------------------------------------------------------------------

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[int, int]]) -> EpochHistory:
        """Build from ``(epoch, start_offset)`` pairs (the file's content), ends rebuilt from neighbours.

        Raises ``ValueError`` unless epochs and starts strictly increase and are non-negative.
        """
        pairs = list(pairs)
        entries = []
        for index, (epoch, start) in enumerate(pairs):
            end = pairs[index + 1][1] if index + 1 < len(pairs) else MAX_OFFSET
            if index + 1 < len(pairs) and not (pairs[index + 1][0] > epoch and end > start):
                raise ValueError(
                    f"epoch entries must strictly increase in epoch and start offset: "
                    f"({epoch}, {start}) is followed by {tuple(pairs[index + 1])}"
                )
            entries.append(EpochEntry(epoch, start, end))
        return cls(tuple(entries))

    def pairs(self) -> list[tuple[int, int]]:
        """The ``(epoch, start_offset)`` pairs: what the epoch file stores."""
        return [(e.epoch, e.start_offset) for e in self.entries]

    # -- queries ----------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.entries)

    def __bool__(self) -> bool:
        return bool(self.entries)

    def __iter__(self) -> Iterator[EpochEntry]:
        return iter(self.entries)

    def first(self) -> EpochEntry | None:
        return self.entries[0] if self.entries else None

    def last(self) -> EpochEntry | None:
        return self.entries[-1] if self.entries else None

    def last_epoch(self) -> int:
        """The last epoch, ``-1`` when empty (what a broker reports in heartbeats, docs/reference-behaviour.md
        §1.3)."""
        return self.entries[-1].epoch if self.entries else -1

    def find_by_epoch(self, epoch: int) -> EpochEntry | None:
        index = bisect.bisect_left(self.entries, epoch, key=_epoch_of)
        if index < len(self.entries) and self.entries[index].epoch == epoch:
            return self.entries[index]
        return None

    def find_by_offset(self, offset: int) -> EpochEntry | None:
        """The entry with ``start <= offset < end`` (docs/reference-behaviour.md §12.2
        findEpochEntryByOffset)."""
        index = bisect.bisect_right(self.entries, offset, key=_start_of) - 1
        if index >= 0 and self.entries[index].contains(offset):
            return self.entries[index]
        return None

    def next_entry(self, epoch: int) -> EpochEntry | None:
        """The first entry with an epoch greater than ``epoch`` (docs/reference-behaviour.md §12.2
        nextEntry)."""
        index = bisect.bisect_right(self.entries, epoch, key=_epoch_of)
        return self.entries[index] if index < len(self.entries) else None

    # -- changes ----------------------------------------------------------------------------

    def append(self, epoch: int, start_offset: int) -> EpochHistory:
        """Record that ``epoch`` starts writing at ``start_offset`` (docs/reference-behaviour.md §12.2
        appendEntry).

        * empty history: accepted;
        * newer epoch, later start: appended, the previous last entry now ends at ``start_offset``;
        * newer epoch, same start: the previous last entry never wrote a byte, so it is **replaced**.
          Deliberate deviation (docs/architecture.md §7, docs/reference-behaviour.md §17 item 10): the
          reference rejects the new epoch silently, leaving a broker that serves epoch E+1 with E+1 missing
          from its file;
        * same epoch, same start: idempotent, returns ``self``;
        * stale epoch (lower, or equal with another start): :class:`FencedError`;
        * newer epoch whose start goes backwards: :class:`LocalProtocolError` (the caller forgot to
          truncate its log first).
        """
        if epoch < 0 or start_offset < 0:
            raise LocalProtocolError(
                f"epoch entry ({epoch}, {start_offset}): epoch and start offset must be non-negative"
            )
        last = self.last()
        if last is None:
            return EpochHistory((EpochEntry(epoch, start_offset),))
        if epoch == last.epoch and start_offset == last.start_offset:
            return self
        if epoch <= last.epoch:
            raise FencedError(
                f"stale epoch entry ({epoch}, {start_offset}): the last entry is epoch {last.epoch} "
                f"starting at offset {last.start_offset}"
            )
        if start_offset < last.start_offset:
            raise LocalProtocolError(
                f"epoch {epoch} cannot start at offset {start_offset}: the last entry, epoch {last.epoch}, "
                f"starts later at offset {last.start_offset}; truncate the log first"
            )
        if start_offset == last.start_offset:
            # Zero-length last entry: the new epoch takes its place (deviation, see docstring).
            return EpochHistory((*self.entries[:-1], EpochEntry(epoch, start_offset)))
        closed = replace(last, end_offset=start_offset)
        return EpochHistory((*self.entries[:-1], closed, EpochEntry(epoch, start_offset)))

    def with_last_end(self, end_offset: int) -> EpochHistory:
        """Close the last entry at ``end_offset`` (docs/reference-behaviour.md §12.2
        setLastEpochEntryEndOffset).

        Applied only when ``last.start_offset <= end_offset``; otherwise (or when empty) unchanged.
        """
        last = self.last()
        if last is None or end_offset < last.start_offset or end_offset == last.end_offset:
            return self
        return EpochHistory((*self.entries[:-1], replace(last, end_offset=end_offset)))

    def truncate_suffix_by_epoch(self, epoch: int) -> EpochHistory:
        """Drop entries with ``epoch >= epoch``; the new last entry is open-ended."""
        index = bisect.bisect_left(self.entries, epoch, key=_epoch_of)
        return self._keep_prefix(index)

    def truncate_suffix_by_offset(self, offset: int) -> EpochHistory:
        """Drop entries starting at or after ``offset``; the new last entry is open-ended.

        Used after cutting the commit log to ``offset`` (docs/reference-behaviour.md §13 step 5).
        """
        index = bisect.bisect_left(self.entries, offset, key=_start_of)
        return self._keep_prefix(index)

    def truncate_prefix_by_offset(self, offset: int) -> EpochHistory:
        """Drop entries ending at or before ``offset``; the last entry is never removed.

        Called with ``minPhyOffset - 1`` when expired commit-log files are deleted
        (docs/reference-behaviour.md §12.2). Starts are not moved: the surviving first entry keeps its
        original start.
        """
        keep = tuple(
            e for i, e in enumerate(self.entries) if e.end_offset > offset or i == len(self.entries) - 1
        )
        return self if len(keep) == len(self.entries) else EpochHistory(keep)

    def _keep_prefix(self, count: int) -> EpochHistory:
        # Reopening the last entry even when nothing was cut is intended: after a truncation the
        # log grows again under that epoch (the reference only reopens in its file, §12.2).
        kept = self.entries[:count]
        if kept and kept[-1].end_offset != MAX_OFFSET:
            kept = (*kept[:-1], replace(kept[-1], end_offset=MAX_OFFSET))
        if kept == self.entries:
            return self
        return EpochHistory(kept)


def find_consistent_point(local: EpochHistory, remote: EpochHistory) -> int | None:
    """The offset up to which ``local`` and ``remote`` hold the same log (docs/reference-behaviour.md §12.2,
    §13).

    Walks ``local`` from its highest epoch down; the first epoch that ``remote`` also has, with the
    same start offset, gives ``min(local end, remote end)`` of that epoch. ``None`` when no epoch
    matches (the reference's ``-1``: the handshake cannot proceed without manual repair).

    Callers close both last entries at the replicas' max offsets first (:meth:`EpochHistory.with_last_end`),
    otherwise an open last entry contributes ``MAX_OFFSET``.
    """
    for entry in reversed(local.entries):
        other = remote.find_by_epoch(entry.epoch)
        if other is not None and other.start_offset == entry.start_offset:
            return min(entry.end_offset, other.end_offset)
    return None


def reader_divergence(history: EpochHistory, epoch: int, offset: int) -> int | None:
    """Where a reader positioned at ``offset``, whose last message was written in ``epoch``, must
    rewind to, or None when its position is on this lineage (Kafka's KIP-320 for consumers).

    ``epoch``'s end here is the start of the next entry after the largest epoch <= ``epoch`` (the last
    entry never ends); with no entry that old, the first entry's start: nothing of ``epoch`` is here
    (an epoch whose bytes were all cut is replaced by the next one at the same start; retention keeps
    the entry of every byte it keeps). A position past that end was read from a log that has been cut
    back since -- data declared lost (docs/architecture.md §4): what this log holds from that end on is
    new to the reader.
    """
    if not history.entries:
        return None
    index = bisect.bisect_right(history.entries, epoch, key=_epoch_of) - 1
    if index + 1 >= len(history.entries):
        return None
    end = history.entries[index + 1].start_offset
    return end if offset > end else None


def _epoch_of(entry: EpochEntry) -> int:
    return entry.epoch


def _start_of(entry: EpochEntry) -> int:
    return entry.start_offset


def _check_entries(entries: tuple[EpochEntry, ...]) -> None:
    for index, entry in enumerate(entries):
        if not isinstance(entry, EpochEntry):
            raise ValueError(f"not an EpochEntry: {entry!r}")
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"negative epoch or start offset in {entry}")
        if entry.end_offset < entry.start_offset:
            raise ValueError(f"{entry} ends before it starts")
        if index + 1 < len(entries):
            following = entries[index + 1]
            if not (following.epoch > entry.epoch and following.start_offset > entry.start_offset):
                raise ValueError(
                    "epoch entries must strictly increase in epoch and start offset: "
                    f"{entry} then {following}"
                )
            if entry.end_offset != following.start_offset:
                raise ValueError(f"{entry} must end where the next entry starts ({following.start_offset})")
