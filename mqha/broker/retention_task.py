"""The broker's retention task: a pass of ``mqha.broker.retention`` every ``cleanResourceInterval``. SHELL.

Each pass (docs/architecture.md §4.2), on the broker's event loop with every file operation in a worker
thread:

1. measure the commit log's file system (``os.statvfs`` of ``storePathCommitLog``: used = 1 −
   f_bavail / f_blocks) and list the segments (base offset, modification time);
2. compute the :class:`~mqha.broker.retention.DiskState` from the usage and the previous state (the FULL
   hysteresis) and publish it on the broker's ``DiskGuard`` (``observe``: the put path
   reads them);
3. find the lowest offset being read: the HA master's slave transfer positions and the lowest offset a
   consumer read since the last pass (``CommitLog.take_lowest_read``);
4. run the pure ``retention_pass`` and delete what it names, oldest first, one segment at a time,
   ``deleteCommitLogFilesInterval`` apart (``BrokerStore.delete_segment``: the commit log's locks
   keep a deletion from racing an append, a read or a flush; the epoch file's prefix follows durably);
5. after a deletion, tell the HA layer (its links' view of the log start) and measure again.

A pass that fails is logged and the next one runs as usual: retention never stops the broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from mqha.broker.config import parse_delete_when
from mqha.broker.disk_guard import DiskGuard, used_ratio
from mqha.broker.retention import DiskState, Pass, RetentionSettings, Segment, retention_pass
from mqha.broker.store import BrokerStore
from mqha.clock import wall_ms

log = logging.getLogger(__name__)


def _local_hour() -> int:
    return time.localtime().tm_hour  # deleteWhen is in the broker's local time, as in RocketMQ


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
        hour: Callable[[], int] = _local_hour,
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
        self._hour = hour
        self._usage = usage
        self._due: Mapping[int, int] = {}
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.deleted = 0  # segments deleted since start (status, metrics, tests)
        self.last_pass = Pass(())

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
        decision = retention_pass(
            [Segment(base, mtime) for base, mtime in times],
            now_ms=self._wall(),
            hour=self._hour(),
            state=self.state,
            reading_from=_lowest(self._readers(), store.log.take_lowest_read()),
            due_since=self._due,
            settings=self.settings,
        )
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
