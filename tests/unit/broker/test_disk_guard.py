"""The full-disk guard (mqha/broker/disk_guard.py) fed values: a fake clock and fake measurements."""

from __future__ import annotations

import errno

from mqha.broker.disk_guard import DiskGuard, full_disk_remark, is_no_space
from mqha.broker.retention import DiskState, RetentionSettings

SETTINGS = RetentionSettings(
    reserved_ms=72 * 3_600_000,
    delete_hours=frozenset({4}),
    max_used=0.75,
    clean_forcibly=0.85,
    warning=0.90,
    forcibly_enabled=True,
    destroy_after_ms=120_000,
)


class Fake:
    """A clock and a file system whose usage the test sets."""

    def __init__(self) -> None:
        self.now = 0
        self.used = 0.5
        self.measured = 0

    def now_ms(self) -> int:
        return self.now

    def measure(self, path: str) -> float:
        self.measured += 1
        if self.used < 0:
            raise OSError(errno.ENOENT, "gone", path)
        return self.used


def guard(fake: Fake, interval_ms: int = 10_000) -> DiskGuard:
    return DiskGuard("/store/commitlog", SETTINGS, interval_ms, now_ms=fake.now_ms, measure=fake.measure)


def test_measured_at_most_every_interval() -> None:
    fake = Fake()
    g = guard(fake)
    assert g.state() is DiskState.OK and fake.measured == 1
    fake.used = 0.95
    fake.now = 9_999
    assert g.state() is DiskState.OK and g.refusal() is None and fake.measured == 1
    fake.now = 10_000
    assert g.state() is DiskState.FULL and fake.measured == 2
    assert g.used == 0.95


def test_full_until_back_under_the_forcible_ratio_and_the_remark() -> None:
    fake = Fake()
    g = guard(fake, interval_ms=1)
    fake.used = 0.91
    fake.now += 1
    remark = g.refusal()
    assert remark == full_disk_remark(0.91, SETTINGS)
    assert "disk full" in remark and "91.0%" in remark and "diskSpaceWarningLevelRatio 90%" in remark
    assert "diskSpaceCleanForciblyRatio 85%" in remark and "no space left" not in remark
    steps = ((0.88, True), (0.86, True), (0.84, False), (0.88, False), (0.90, False), (0.905, True))
    for used, full in steps:
        fake.used = used
        fake.now += 1
        assert g.is_full() is full, used


def test_enospc_refuses_that_put_and_measures_at_once() -> None:
    fake = Fake()
    g = guard(fake)
    assert g.state() is DiskState.OK
    fake.used = 0.97
    remark = g.no_space()  # well within the interval: measured anyway
    assert fake.measured == 2 and "no space left on device" in remark and "97.0%" in remark
    assert g.is_full() and "no space left" in (g.refusal() or "")
    # A segment larger than what is left under the ratio: ENOSPC at 50 % refuses that put only.
    fake.used = 0.5
    fake.now = 20_000
    assert not g.is_full()
    remark = g.no_space()
    assert "no space left on device for a new commit log segment" in remark and "50.0% used" in remark
    assert "above" not in remark and not g.is_full()


def test_a_measurement_that_fails_keeps_the_last_state() -> None:
    fake = Fake()
    g = guard(fake, interval_ms=1)
    fake.used = 0.95
    assert g.is_full()
    fake.used = -1  # statvfs fails
    fake.now = 5
    assert g.is_full() and g.used == 0.95


def test_observe_takes_the_retention_tasks_measurement() -> None:
    fake = Fake()
    g = guard(fake)
    assert g.observe(0.92) is DiskState.FULL
    assert g.is_full() and fake.measured == 0
    assert g.observe(0.80) is DiskState.CLEAN


def test_is_no_space() -> None:
    assert is_no_space(OSError(errno.ENOSPC, "full"))
    assert is_no_space(OSError(errno.EDQUOT, "quota"))
    assert not is_no_space(OSError(errno.EIO, "io"))
    assert not is_no_space(ValueError("x"))
