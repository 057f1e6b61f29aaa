"""The broker's retention task: a pass of ``mqha.broker.retention`` every ``cleanResourceInterval``. SHELL.

Each pass (docs/architecture.md §4.2), on the broker's event loop with every file operation in a worker
thread:

1. measure the commit log's file system (``os.statvfs`` of ``storePathCommitLog``: used = 1 −
   f_bavail / f_blocks) and list the segments (base offset, modification time); read the clocks into
   the :class:`~mqha.broker.retention.RetentionClock` (a forward step of the wall clock is not taken);
2. compute the :class:`~mqha.broker.retention.DiskState` from the usage and the previous state (the FULL
   hysteresis) and publish it on the broker's ``DiskGuard`` (``observe``: the put path
   reads them);
3. find the lowest offset being read: the HA master's slave transfer positions and the lowest offset a
   consumer read since the last pass (``CommitLog.take_lowest_read``);
4. run the pure ``retention_pass`` (again with the newest record's store time of the segments it
   calls expired by their mtime alone, ``Pass.unread``) and delete what it names, oldest first, one
   segment at a time, ``deleteCommitLogFilesInterval`` apart (``BrokerStore.delete_segment``: the
   commit log's locks keep a deletion from racing an append, a read or a flush; the epoch file's prefix
   follows durably);
5. after a deletion, tell the HA layer (its links' view of the log start) and measure again.

A pass that fails is logged and the next one runs as usual: retention never stops the broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from mqha.broker.config import parse_delete_when
from mqha.broker.disk_guard import DiskGuard, used_ratio
from mqha.broker.record_times import RecordTimes
from mqha.broker.retention import DiskState, Pass, RetentionClock, RetentionSettings, Segment, retention_pass
from mqha.broker.store import BrokerStore
from mqha.clock import MonotonicClock, wall_ms

log = logging.getLogger(__name__)


_MONOTONIC = MonotonicClock()
STEP_LOGGED_MS = 1000  # a lag growing by more than this between two passes is logged as a clock step


def _local_hour(at_ms: int) -> int:
    return time.localtime(at_ms / 1000).tm_hour  # deleteWhen is in the broker's local time, as in RocketMQ


def _lowest(*offsets: int | None) -> int | None:
    known = [offset for offset in offsets if offset is not None]
    return min(known) if known else None


class RetentionTask:
    """Runs retention passes over one broker's store and publishes its disk state."""

    def __init__(
        self,
        store: BrokerStore,
        config: Mapping[str, Any],
        disk: DiskGuard,
        *,
        readers: Callable[[], int | None] = lambda: None,
        on_deleted: Callable[[], None] | None = None,
        wall: Callable[[], int] = wall_ms,
        mono: Callable[[], int] = _MONOTONIC.now_ms,
        hour: Callable[[int], int] = _local_hour,
        usage: Callable[[str], float] = used_ratio,
    ) -> None:
        hours = parse_delete_when(config["deleteWhen"])
        assert hours is not None  # the config loader rejected a malformed deleteWhen
        self.settings = RetentionSettings.from_config(config, hours)
        self.interval_s = config["cleanResourceInterval"] / 1000
        self.delete_interval_s = config["deleteCommitLogFilesInterval"] / 1000
        self.store = store
        self.disk = disk
        self._readers = readers
        self._on_deleted = on_deleted
        self._wall = wall
        self._mono = mono
        self._hour = hour
        self._clock: RetentionClock | None = None
        self._record_times = RecordTimes(store.settings.commit_log_dir)
        self._usage = usage
        self._due: Mapping[int, int] = {}
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.deleted = 0  # segments deleted since start (status, metrics, tests)
        self.last_pass = Pass(())
        self.clock_lag_ms = 0  # how far retention's clock is behind the wall clock (status, metrics)

    @property
    def state(self) -> DiskState:
        return self.disk.current

    def start(self) -> None:
        if self._task is None:
            self._stop.clear()
            self._task = asyncio.create_task(self._run(), name="retention")

    async def stop(self) -> None:
        """Let a pass in progress finish its current deletion (never cut one off in its thread)."""
        task, self._task = self._task, None
        if task is not None:
            self._stop.set()
            await task

    async def _run(self) -> None:
        # A crash between a segment's deletion and the epoch file's update left old entries: drop them.
        await asyncio.to_thread(self.store.truncate_epoch_prefix)
        while not self._stop.is_set():
            try:
                await self.run_pass()
            except Exception:
                log.exception("retention pass failed; the next one runs in %.1f s", self.interval_s)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.interval_s)

    async def run_pass(self) -> Pass:
        """One pass (the module docstring's steps); returns its decision."""
        store = self.store
        used, times = await asyncio.to_thread(self._measure)
        self._publish(used)
        clock = await self._read_clock(times)
        segments = [Segment(base, mtime) for base, mtime in times]
        reading_from = _lowest(self._readers(), store.log.take_lowest_read())
        decision = self._decide(segments, clock, reading_from)
        if decision.unread:  # expired by their mtimes: their records' own times must say so too
            read = await asyncio.to_thread(self._read_record_times, decision.unread)
            segments = [replace(s, newest_record_ms=read.get(s.base_offset)) for s in segments]
            decision = self._decide(segments, clock, reading_from)
        self._due = decision.due_since
        self.last_pass = decision
        for index, base in enumerate(decision.delete):
            if index and await self._stopped_within(self.delete_interval_s):
                break
            start = await asyncio.to_thread(store.delete_segment, base)
            self.deleted += 1
            if self._on_deleted is not None:
                self._on_deleted()
            log.info(
                "retention (%s): deleted the segment at %d; the log now starts at %d",
                decision.reason,
                base,
                start,
            )
        if decision.delete:
            self._publish(await asyncio.to_thread(self._usage, store.settings.commit_log_dir))
        return decision

    def _read_record_times(self, bases: tuple[int, ...]) -> dict[int, int | None]:
        return {base: self._record_times.newest_ms(base) for base in bases}

    def _decide(self, segments: list[Segment], clock: RetentionClock, reading_from: int | None) -> Pass:
        return retention_pass(
            segments,
            now_ms=clock.now_ms,
            mono_ms=clock.mono_ms,
            hour=self._hour(clock.now_ms),
            state=self.state,
            reading_from=reading_from,
            due_since=self._due,
            settings=self.settings,
        )

    async def _read_clock(self, times: list[tuple[int, int]]) -> RetentionClock:
        """Start or advance retention's clock; log a forward step of the wall clock it does not take."""
        wall, mono = self._wall(), self._mono()
        if self._clock is None:
            newest = await asyncio.to_thread(self._log_newest_record_ms, times)
            self._clock = RetentionClock.start(wall, mono, newest)
            if wall - self._clock.now_ms > STEP_LOGGED_MS:
                log.info(
                    "retention's clock starts at the log's newest record, %.0f s behind the wall clock "
                    "(the time since it was written does not count: it may be a clock step)",
                    (wall - self._clock.now_ms) / 1000,
                )
        else:
            self._clock = self._clock.advance(wall, mono)
            if wall - self._clock.now_ms - self.clock_lag_ms > STEP_LOGGED_MS:
                log.warning(
                    "the wall clock stepped %.1f s forward (by the monotonic clock); retention keeps its own "
                    "time, now %.0f s behind the wall clock, and deletes nothing for the step",
                    (wall - self._clock.now_ms - self.clock_lag_ms) / 1000,
                    (wall - self._clock.now_ms) / 1000,
                )
        self.clock_lag_ms = wall - self._clock.now_ms
        return self._clock

    def _log_newest_record_ms(self, times: list[tuple[int, int]]) -> int | None:
        """The store time of the log's newest record (the active segment's, else the one before)."""
        end = self.store.log.max_offset
        for base, _ in reversed(times[-2:]):
            found = self._record_times.newest_ms(base, end=end)
            if found is not None:
                return found
        return None

    def _measure(self) -> tuple[float, list[tuple[int, int]]]:
        return self._usage(self.store.settings.commit_log_dir), self.store.log.segment_times()

    def _publish(self, used: float) -> None:
        before = self.disk.current
        state = self.disk.observe(used)
        if state is not before:
            level = logging.WARNING if state in (DiskState.CLEAN_FORCIBLY, DiskState.FULL) else logging.INFO
            log.log(level, "commit log disk %.1f %% used: %s (was %s)", used * 100, state.value, before.value)

    async def _stopped_within(self, seconds: float) -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)
        return self._stop.is_set()
