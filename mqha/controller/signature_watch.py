"""Whether this controller can still verify its brokers' signatures, and the clock skew they show (core).

A signature whose HMAC is right proves the sender holds the secret; if it is then refused only for its
timestamp, the two clocks disagree by more than the window. When, for ``stall_ms``, such signatures
keep coming and not one passes, this node cannot hear any broker that must sign: its own clock is a
suspect, and ``own_clock_off`` asks the other controllers' clocks to decide. If it is off the node
reports itself unhealthy, and a leader hands leadership over (docs/architecture.md §12.2); until its
clock checks out again (``clock_alarm``) it stands for no election. Signatures that fail their HMAC say
nothing about clocks and are not counted.

Pure: times are the caller's monotonic milliseconds; skews are (signed timestamp - local wall clock).
"""

from __future__ import annotations

from collections.abc import Sequence
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


def own_clock_off(peer_offsets_ms: Sequence[int], window_ms: int, peers: int) -> bool:
    """Whether a stalled node's own clock is the culprit, from its peers' clocks.

    ``peer_offsets_ms``: each answering controller's wall clock minus ours (from its ``Date`` header, so
    to within a second); ``peers``: how many other controllers there are. A stall alone cannot tell this
    node's clock from one broker's (long-lived sessions sign nothing, so a lone skewed broker may be all
    that signs for a while): the other controllers decide. Off when the median peer is more than half
    the window away; with no other controller, the stall alone decides; with peers but no answer, not
    (a partition is not a clock)."""
    if peers == 0:
        return True
    if not peer_offsets_ms:
        return False
    ordered = sorted(peer_offsets_ms)
    return abs(ordered[len(ordered) // 2]) > window_ms // 2


def clock_alarm(
    alarmed: bool,
    *,
    stalled: bool,
    verified_since_alarm: bool,
    peer_offsets_ms: Sequence[int],
    window_ms: int,
    peers: int,
) -> bool:
    """Whether this node's clock alarm is on after one check.

    It starts on a stall the peers' clocks confirm (``own_clock_off``). It ends only when the clock
    checks out again: a signature verified since it started, or peers answered and their median is
    within half the window of this clock. The end of the stall alone does not end it (senders that gave
    up on this node stop the refusals, not the skew), nor do peers that do not answer; with no other
    controller, the stall alone decides, as at the start."""
    if not alarmed:
        return stalled and own_clock_off(peer_offsets_ms, window_ms, peers)
    if verified_since_alarm:
        return False
    if peers == 0:
        return stalled
    return not peer_offsets_ms or own_clock_off(peer_offsets_ms, window_ms, peers)
