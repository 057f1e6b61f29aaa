"""Retention on a real store (files, no processes): deletion, the epoch prefix, reads below the log start,
emptying a replica, the task's pass (docs/architecture.md §4.2)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from mqha.broker.commitlog import MessageDraft, OffsetTooSmall
from mqha.broker.commitlog.segment import segment_name
from mqha.broker.disk_guard import DiskGuard
from mqha.broker.record_times import RecordTimes
from mqha.broker.retention import HOUR_MS, DiskState
from mqha.broker.retention_task import RetentionTask
from mqha.broker.store import BrokerStore
from mqha.epoch.file import EpochStore
from tests.integration.ha_nodes import SEGMENT, broker_config

BODY = b"x" * 4000


def filled(root: Path, segments: int) -> BrokerStore:
    """A store with epochs 1..3 and about ``segments`` full segments of messages."""
    store = BrokerStore.open_config(broker_config(root))
    store.append_epoch(1, 0)
    per_epoch = segments * SEGMENT // len(BODY) // 3
    for epoch in (2, 3, None):
        store.log.append_batch([MessageDraft("t", BODY) for _ in range(per_epoch)])
        if epoch is not None:
            store.append_epoch(epoch, store.max_offset)
    return store


def test_deleting_the_oldest_segment_moves_the_log_start_and_the_epoch_prefix(tmp_path: Path) -> None:
    store = filled(tmp_path, 6)
    try:
        times = store.log.segment_times()
        assert [base for base, _ in times] == [i * SEGMENT for i in range(len(times))]
        second_epoch_start = store.epochs.pairs()[1][1]
        deleted = 0
        while store.min_offset <= second_epoch_start:  # until epoch 1 lies wholly below the start
            assert store.delete_segment(store.min_offset) == (deleted + 1) * SEGMENT
            deleted += 1
        assert store.epochs.pairs()[0] == (2, second_epoch_start)  # epoch 1 went, epoch 2 keeps its start
        assert EpochStore(store.epoch_store.file.path).history.pairs() == store.epochs.pairs()  # durable
        assert store.delete_segment(0) == store.min_offset  # an old base: nothing happens
        with pytest.raises(OffsetTooSmall) as caught:
            store.log.read_messages(0, 10, store.max_offset)
        assert caught.value.min_offset == store.min_offset
        messages, _ = store.log.read_messages(0, 1, store.max_offset, skip_deleted=True)
        assert messages[0].offset == store.min_offset
        assert store.log.take_lowest_read() is None  # a dump is not a consumer
        store.log.read_messages(store.min_offset + SEGMENT, 1, store.max_offset)
        assert store.log.take_lowest_read() == store.min_offset + SEGMENT
        assert store.log.take_lowest_read() is None
    finally:
        store.close()
    reopened = BrokerStore.open_config(broker_config(tmp_path))
    try:
        assert reopened.min_offset == deleted * SEGMENT
    finally:
        reopened.close()


def test_reset_empties_the_replica_durably(tmp_path: Path) -> None:
    store = filled(tmp_path, 3)
    try:
        store.set_stored_confirm_offset(store.max_offset)
        store.reset_log()
        assert (store.min_offset, store.max_offset, store.epochs.pairs()) == (0, 0, [])
        assert store.stored_confirm_offset == 0
    finally:
        store.close()
    reopened = BrokerStore.open_config(broker_config(tmp_path))
    try:
        assert (reopened.min_offset, reopened.max_offset, reopened.epochs.pairs()) == (0, 0, [])
    finally:
        reopened.close()


def test_a_pass_deletes_forcibly_above_the_ratio_and_publishes_the_disk_state(tmp_path: Path) -> None:
    store = filled(tmp_path, 14)
    usage = [0.95]
    config = broker_config(tmp_path, deleteCommitLogFilesInterval=0, fileReservedTime=1)

    async def main() -> None:
        disk = DiskGuard.from_config(config, measure=lambda _: usage[0])
        task = RetentionTask(store, config, disk, usage=lambda _: usage[0], hour=lambda _at_ms: 12)
        decision = await task.run_pass()
        assert len(decision.delete) == 10 and "forcibly" in decision.reason
        assert store.min_offset == 10 * SEGMENT and task.deleted == 10
        assert disk.current is DiskState.FULL and disk.used == 0.95
        usage[0] = 0.80
        assert (await task.run_pass()).delete == ()  # nothing expired: CLEAN deletes nothing
        assert disk.current is DiskState.CLEAN

    try:
        asyncio.run(main())
    finally:
        store.close()


def test_a_pass_goes_by_the_newest_record_and_its_own_clock(tmp_path: Path) -> None:
    """Issue 45: neither a wall clock that is ahead at start nor old file times expire fresh records; the
    monotonic clock's own 73 hours do."""
    written_from = time.time_ns() // 1_000_000
    store = filled(tmp_path, 4)
    written_to = time.time_ns() // 1_000_000
    config = broker_config(tmp_path, deleteCommitLogFilesInterval=0)  # fileReservedTime 72 h
    now, mono = [written_to + 100 * HOUR_MS], [0]
    sealed = [base for base, _ in store.log.segment_times()][:-1]
    assert len(sealed) >= 3
    newest = RecordTimes(store.settings.commit_log_dir).newest_ms(sealed[0])
    assert newest is not None and written_from <= newest <= written_to

    async def main() -> None:
        disk = DiskGuard.from_config(config, measure=lambda _: 0.1)
        task = RetentionTask(
            store,
            config,
            disk,
            usage=lambda _: 0.1,
            wall=lambda: now[0],
            mono=lambda: mono[0],
            hour=lambda _: 4,
        )
        assert (await task.run_pass()).delete == ()  # the clock starts at the newest record, not 100 h on
        assert 100 * HOUR_MS <= task.clock_lag_ms <= 100 * HOUR_MS + 60_000
        for base in sealed:  # files that look 100 h old (a copied store, a clock stepped back and forth)
            old = (now[0] - 200 * HOUR_MS) / 1000
            os.utime(os.path.join(store.settings.commit_log_dir, segment_name(base)), (old, old))
        mono[0] += 1000
        assert (await task.run_pass()).delete == ()  # their records are fresh
        now[0] += 73 * HOUR_MS
        mono[0] += 73 * HOUR_MS
        assert (await task.run_pass()).delete == tuple(sealed)

    try:
        asyncio.run(main())
    finally:
        store.close()


def test_record_times_are_cached_per_file_version_and_a_damaged_segment_has_none(tmp_path: Path) -> None:
    store = filled(tmp_path, 3)
    try:
        base = store.log.segment_times()[0][0]
        path = os.path.join(store.settings.commit_log_dir, segment_name(base))
        times = RecordTimes(store.settings.commit_log_dir)
        newest = times.newest_ms(base)
        assert newest is not None
        stat = os.stat(path)
        with open(path, "r+b") as handle:  # a header in the middle damaged: the walk stops short of the end
            handle.seek(SEGMENT // 2)
            data = handle.read(SEGMENT // 4)
            at = data.index(b"MQM1")
            handle.seek(SEGMENT // 2 + at)
            handle.write(b"XXXX")
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the same mtime: the cached answer stays
        assert times.newest_ms(base) == newest
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
        assert times.newest_ms(base) is None  # retention then goes by the mtime alone
        assert times.newest_ms(10**15) is None  # no such segment
    finally:
        store.close()
