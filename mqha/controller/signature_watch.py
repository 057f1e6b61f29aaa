"""Whether this controller can still verify its brokers' signatures, and the clock skew they show (core).

A signature whose HMAC is right proves the sender holds the secret; if it is then refused only for its
timestamp, the two clocks disagree by more than the window. When, for ``stall_ms``, such signatures
keep coming and not one passes, this node cannot hear any broker: its own clock is the likely culprit
(every broker is "skewed" at once). It then reports itself unhealthy, and a leader hands leadership over
(docs/architecture.md §12.2). Signatures that fail their HMAC say nothing about clocks and are not
counted: without the secret nobody can make this node look stalled; only a replay of a genuine old
request can, and only while no broker gets through.

Pure: times are the caller's monotonic milliseconds; skews are (signed timestamp - local wall clock).
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_STALL_MS = 10_000


@dataclass
class SignatureWatch:
    """Tracks verified and clock-refused signatures."""

    stall_ms: int = DEFAULT_STALL_MS
    last_skew_ms: int | None = None
    """The skew of the last signature with a right HMAC (accepted or refused for its timestamp)."""
    refused_since_ms: int | None = None
    """When the first clock refusal after the last accepted signature came (None: one was accepted since)."""
    last_refused_ms: int | None = None
    verified_total: int = 0

    def on_verified(self, skew_ms: int) -> None:
        """A signature was accepted."""
        self.last_skew_ms = skew_ms
        self.refused_since_ms = None
        self.verified_total += 1

    def on_clock_refused(self, skew_ms: int, now_ms: int) -> None:
        """A signature with a right HMAC was refused for its timestamp."""
        self.last_skew_ms = skew_ms
        self.last_refused_ms = now_ms
        if self.refused_since_ms is None:
            self.refused_since_ms = now_ms

    def stalled(self, now_ms: int) -> bool:
        """True when for ``stall_ms`` signatures were refused for their timestamps, none was accepted,
        and the refusals go on (the last within ``stall_ms``: senders that gave up end a stall)."""
        return self.stalled_for_ms(now_ms) >= self.stall_ms

    def stalled_for_ms(self, now_ms: int) -> int:
        """How long clock refusals have come with no signature accepted (0: not so, or they stopped)."""
        since, last = self.refused_since_ms, self.last_refused_ms
        if since is None or last is None or now_ms - last > self.stall_ms:
            return 0
        return max(0, now_ms - since)
