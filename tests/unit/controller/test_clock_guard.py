"""ClockGuard: alarms once per stall that the peers' clocks confirm, hands leadership over at most once
per stall period, and only as the serving leader."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import pytest

from mqha.controller.clock_guard import ClockGuard
from mqha.controller.signature_watch import SignatureWatch


@dataclass
class FakeClock:
    now: int = 0

    def now_ms(self) -> int:
        return self.now


@dataclass
class FakeLog:
    leading: bool = True
    transfers: int = 0
    abstaining: str | None = None

    def abstain(self, reason: str | None) -> None:
        self.abstaining = reason

    def is_serving_leader(self) -> bool:
        return self.leading

    def transfer_leadership(self) -> None:
        self.transfers += 1


@dataclass
class FakeParts:
    clock: FakeClock = field(default_factory=FakeClock)
    log: FakeLog = field(default_factory=FakeLog)
    peers: tuple[str, ...] = ("n0", "n1", "n2")


@dataclass
class FakeAuth:
    clock: FakeClock
    enabled: bool = True
    watch: SignatureWatch = field(default_factory=lambda: SignatureWatch(stall_ms=1000))

    def signatures_stalled(self) -> bool:
        return self.watch.stalled(self.clock.now)

    def signatures_stalled_ms(self) -> int:
        return self.watch.stalled_for_ms(self.clock.now)


def _guard(
    leading: bool = True, peer_offsets: tuple[int, ...] = (3_600_000, 3_601_000)
) -> tuple[ClockGuard, Any, Any]:
    parts = FakeParts(log=FakeLog(leading))
    auth = FakeAuth(parts.clock)
    guard = ClockGuard(parts, auth)  # type: ignore[arg-type]
    guard.peer_offsets_ms = list(peer_offsets)
    return guard, parts, auth


def _refuse_until(auth: FakeAuth, parts: FakeParts, guard: ClockGuard, until: int) -> None:
    while parts.clock.now < until:
        parts.clock.now += 100
        auth.watch.on_clock_refused(-3_600_000, parts.clock.now)
        guard.check(auth.signatures_stalled())


def test_a_stalled_leader_alarms_once_and_hands_over_once_per_stall_period(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard, parts, auth = _guard()
    with caplog.at_level(logging.ERROR):
        _refuse_until(auth, parts, guard, 3050)
    assert guard.alarmed and parts.log.transfers == guard.handovers == 3  # at 1.1 s, 2.1 s, 3.1 s... bounded
    assert parts.log.abstaining is not None
    assert sum("ALARM" in r.message for r in caplog.records) == 1
    auth.watch.on_verified(0)
    guard.check(auth.signatures_stalled())
    assert not guard.alarmed and any("alarm is over" in r.message for r in caplog.records)
    assert parts.log.abstaining is None


def test_the_alarm_and_the_abstention_outlast_the_stall_until_the_clock_checks_out() -> None:
    """Brokers that gave up on this node end the refusals, not its skew: it must not stand again until
    a signature verifies or its peers' clocks agree with it."""
    guard, parts, auth = _guard(leading=False)
    _refuse_until(auth, parts, guard, 3000)
    parts.clock.now += 10_000  # no refusal for a long while: the watch says "not stalled"
    assert not auth.signatures_stalled()
    guard.check(False)
    assert guard.alarmed and parts.log.abstaining is not None
    guard.peer_offsets_ms = []  # peers that do not answer prove nothing
    guard.check(False)
    assert guard.alarmed and parts.log.abstaining is not None
    guard.peer_offsets_ms = [200, -300]  # the clock was put right
    guard.check(False)
    assert not guard.alarmed and parts.log.abstaining is None


def test_a_lone_controller_never_abstains() -> None:
    parts = FakeParts(peers=("n0",))
    auth = FakeAuth(parts.clock)
    guard = ClockGuard(parts, auth)  # type: ignore[arg-type]
    _refuse_until(auth, parts, guard, 3000)
    assert guard.alarmed and parts.log.abstaining is None


def test_a_stalled_follower_alarms_but_has_nothing_to_hand_over() -> None:
    guard, parts, auth = _guard(leading=False)
    _refuse_until(auth, parts, guard, 3000)
    assert guard.alarmed and parts.log.transfers == 0


@pytest.mark.parametrize("peer_offsets", [(0, 1000), (), (500,)])
def test_a_stall_the_peers_clocks_do_not_confirm_is_no_alarm(peer_offsets: tuple[int, ...]) -> None:
    """One skewed broker signing while the others' sessions sign nothing looks like a stall; the peers
    agreeing with this clock (or not answering) say it is not this node's clock."""
    guard, parts, auth = _guard(peer_offsets=peer_offsets)
    _refuse_until(auth, parts, guard, 3000)
    assert not guard.alarmed and parts.log.transfers == 0 and parts.log.abstaining is None
