"""Time enters cores as an argument; this is the one place that reads the real clock."""

import time
from typing import Protocol


class Clock(Protocol):
    """The time source a core is given: monotonic milliseconds."""

    def now_ms(self) -> int:
        """Milliseconds from an arbitrary origin, never going backwards."""
        ...


class MonotonicClock:
    """Reads the process's monotonic clock in milliseconds (the real ``Clock``)."""

    def now_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


def wall_ms() -> int:
    """Wall-clock milliseconds, for history timestamps only (never for timeouts)."""
    return time.time_ns() // 1_000_000
