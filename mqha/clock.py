"""Time enters cores as an argument; this is the one place that reads the real clock."""

import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Milliseconds from an arbitrary origin, never going backwards."""
        ...


class MonotonicClock:
    def now_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


def wall_ms() -> int:
    """Wall-clock milliseconds, for history timestamps only (never for timeouts)."""
    return time.time_ns() // 1_000_000
