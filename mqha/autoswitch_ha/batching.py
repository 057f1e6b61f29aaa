"""Transfer batches: what the master reads next, never across an epoch boundary (docs/reference-behaviour.md
§11.2).

The reference cuts a batch at the epoch end too, but labels the cut batch with the *next* epoch
(docs/reference-behaviour.md §17 item 12). mqha fixes that: the plan is made from the epoch entry that
contains the batch's first offset, and the batch is both limited to that entry and labelled with it, so every
header carries the epoch that wrote its bytes.

Epoch boundaries are message boundaries (an epoch starts at its master's log end), so cutting data at
one never splits a message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mqha.epoch.history import EpochEntry, EpochHistory
from mqha.ids import MAX_OFFSET


@dataclass(frozen=True, kw_only=True)
class BatchPlan:
    """Says which bytes of the log to send next: about ``max_bytes`` from ``offset``, all of one epoch.

    The bytes belong to ``epoch``, which ends at ``epoch_end_offset`` (``MAX_OFFSET`` for the open last
    epoch).
    """

    offset: int
    max_bytes: int
    epoch: int
    epoch_start_offset: int
    epoch_end_offset: int

    @property
    def room(self) -> int:
        """Bytes left in the epoch from ``offset``: a batch longer than this would span epochs."""
        return self.epoch_end_offset - self.offset


def plan_batch(epochs: EpochHistory, offset: int, batch_size: int) -> BatchPlan | None:
    """The next batch from ``offset``; ``None`` when no epoch entry contains ``offset``.

    ``max_bytes`` is ``batch_size`` (haTransferBatchSize) cut at the end of the containing epoch.
    """
    if batch_size <= 0:
        raise ValueError(f"batch size must be positive, got {batch_size}")
    entry = epochs.find_by_offset(offset)
    if entry is None:
        return None
    return _plan(entry, offset, batch_size)


def _plan(entry: EpochEntry, offset: int, batch_size: int) -> BatchPlan:
    room = entry.end_offset - offset if entry.end_offset != MAX_OFFSET else batch_size
    return BatchPlan(
        offset=offset,
        max_bytes=min(batch_size, room),
        epoch=entry.epoch,
        epoch_start_offset=entry.start_offset,
        epoch_end_offset=entry.end_offset,
    )


def fit_to_epoch(
    epochs: EpochHistory, offset: int, batches: Sequence[bytes | memoryview]
) -> tuple[EpochEntry, list[bytes | memoryview]] | None:
    """The epoch entry containing ``offset`` and ``batches`` (back to back from ``offset``) cut at
    that entry's end: the batch that crosses it is shortened, the ones after it dropped. ``None`` when
    no entry contains ``offset``.

    Re-checked when the read comes back because a new epoch may have begun between planning and
    reading (a master re-elected in place appends an epoch without dropping its connections).
    """
    entry = epochs.find_by_offset(offset)
    if entry is None:
        return None
    room = entry.end_offset - offset
    fitted: list[bytes | memoryview] = []
    for data in batches:
        if room <= 0 or not data:
            break
        fitted.append(data if len(data) <= room else data[:room])
        room -= len(data)
    return entry, fitted


def plan_batches(epochs: EpochHistory, start: int, end: int, batch_size: int) -> list[BatchPlan]:
    """Every batch covering ``[start, end)`` when each read returns exactly ``max_bytes``.

    Stops early at an offset no epoch entry contains. Used to reason about (and test) the batching
    rule in isolation from the connection machine.
    """
    plans = []
    offset = start
    while offset < end:
        plan = plan_batch(epochs, offset, batch_size)
        if plan is None:
            break
        plan = BatchPlan(
            offset=plan.offset,
            max_bytes=min(plan.max_bytes, end - offset),
            epoch=plan.epoch,
            epoch_start_offset=plan.epoch_start_offset,
            epoch_end_offset=plan.epoch_end_offset,
        )
        plans.append(plan)
        offset += plan.max_bytes
    return plans
