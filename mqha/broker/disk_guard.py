"""The commit log file system's full-disk state, as the put path, the status and the metrics read it.
SHELL (one ``statvfs``); the state machine is ``mqha.broker.retention.disk_state`` (core).

docs/architecture.md §4.2: above ``diskSpaceWarningLevelRatio`` % used the disk is *full* and puts are
refused with ``SERVICE_NOT_AVAILABLE`` (503) until usage is back under ``diskSpaceCleanForciblyRatio``
%. Usage is ``1 - f_bavail / f_blocks`` of the file system holding ``storePathCommitLog`` (blocks kept
for root count as used, as RocketMQ's ``getDiskPartitionSpaceUsedPercent``). It is measured when
someone asks and the last measurement is older than ``cleanResourceInterval`` ms (a ``statvfs`` costs
about a microsecond), at once after a write failed with ``ENOSPC``, and whenever the retention task
hands in its own measurement (:meth:`DiskGuard.observe`).
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from mqha.broker.config import parse_delete_when
from mqha.broker.retention import DiskState, RetentionSettings, disk_state
from mqha.clock import MonotonicClock

log = logging.getLogger(__name__)

NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_CLOCK = MonotonicClock()


def used_ratio(path: str) -> float:
    """How full the file system holding ``path`` is, 0..1."""
    stat = os.statvfs(path)
    return 1.0 - stat.f_bavail / stat.f_blocks if stat.f_blocks else 0.0


def is_no_space(exc: BaseException) -> bool:
    """``exc`` says the file system is out of space (or of quota)."""
    return isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS


def full_disk_remark(used: float, settings: RetentionSettings, *, no_space: bool = False) -> str:
    """The remark of a put refused for a full disk (pure); ``no_space``: a write met ENOSPC."""
    until = (
        f"; puts are refused until it is back under diskSpaceCleanForciblyRatio {settings.clean_forcibly:.0%}"
    )
    if no_space and used <= settings.warning:  # a new segment needs more than is left
        return (
            f"disk full: no space left on device for a new commit log segment; the file system is "
            f"{used:.1%} used (diskSpaceWarningLevelRatio {settings.warning:.0%})"
        )
    why = "no space left on device for the commit log; " if no_space else ""
    return (
        f"disk full: {why}the commit log's file system is {used:.1%} used, above "
        f"diskSpaceWarningLevelRatio {settings.warning:.0%}{until}"
    )


class DiskGuard:
    """Holds the full-disk state of the commit log's file system, measured at most every interval."""

    def __init__(
        self,
        path: str,
        settings: RetentionSettings,
        interval_ms: int,
        *,
        now_ms: Callable[[], int] = _CLOCK.now_ms,
        measure: Callable[[str], float] = used_ratio,
    ) -> None:
        self.path = path
        self.settings = settings
        self.interval_ms = interval_ms
        self._now_ms = now_ms
        self._measure = measure
        self._measured_at: int | None = None
        self._used = 0.0
        self._state = DiskState.OK
        self._no_space = False  # the last write failed with ENOSPC and nothing measured has cleared it

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **kwargs: Any) -> DiskGuard:
        hours = parse_delete_when(config["deleteWhen"]) or frozenset()
        return cls(
            config["storePathCommitLog"],
            RetentionSettings.from_config(config, hours),
            config["cleanResourceInterval"],
            **kwargs,
        )

    @property
    def used(self) -> float:
        """The last measured usage, 0..1 (measuring first if that is stale)."""
        self._maybe_measure()
        return self._used

    @property
    def current(self) -> DiskState:
        """The state as last measured (never measures)."""
        return self._state

    def state(self) -> DiskState:
        """The current state (measuring first if the last measurement is stale)."""
        self._maybe_measure()
        return self._state

    def is_full(self) -> bool:
        return self.state() is DiskState.FULL

    def refusal(self) -> str | None:
        """The remark a put is refused with while the disk is full; None while it is not."""
        if not self.is_full():
            return None
        return full_disk_remark(self._used, self.settings, no_space=self._no_space)

    def observe(self, used: float) -> DiskState:
        """Take a measurement made elsewhere (the retention task's): usage ``used`` (0..1), now."""
        previous = self._state
        self._used = used
        self._measured_at = self._now_ms()
        self._state = disk_state(used, previous is DiskState.FULL, self.settings)
        if self._state is not DiskState.FULL:
            self._no_space = False
        if (previous is DiskState.FULL) != (self._state is DiskState.FULL):
            if self._state is DiskState.FULL:
                log.warning("%s", full_disk_remark(used, self.settings, no_space=self._no_space))
            else:
                log.warning(
                    "disk no longer full: %s is %.1f%% used; puts are accepted", self.path, used * 100
                )
        return self._state

    def no_space(self) -> str:
        """A write failed with ENOSPC: measure now; returns the remark for the refused put. The put is
        refused whatever the ratio says (a new segment may need more than is left under the warning
        ratio); later puts are refused while the measured state is FULL, and otherwise try again."""
        self._no_space = True
        self.refresh()
        return full_disk_remark(self._used, self.settings, no_space=True)

    def refresh(self) -> DiskState:
        """Measure now."""
        try:
            used = self._measure(self.path)
        except OSError as exc:  # keep the last state; the next ask tries again
            log.warning("cannot measure the disk usage of %s: %s", self.path, exc)
            self._measured_at = self._now_ms()
            return self._state
        return self.observe(used)

    def _maybe_measure(self) -> None:
        if self._measured_at is None or self._now_ms() - self._measured_at >= self.interval_ms:
            self.refresh()
