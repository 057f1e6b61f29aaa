"""One live process per broker id (docs/architecture.md §3.2): the pure decisions of
``mqha.controller.broker_claims``, every branch, and the heartbeat table's side of a closed session."""

from __future__ import annotations

import itertools

import pytest

from mqha.codes import ResponseCode as C
from mqha.controller.broker_claims import (
    Claim,
    SessionBinding,
    handle_claim,
    handle_session_heartbeat,
    handle_store_claim,
)
from mqha.controller.liveness import BrokerLiveInfo, HeartbeatTable
from mqha.wire.controller_api import BrokerHeartbeatRequest

NOW = 100_000
TIMEOUT = 1_500


def holder(
    address: str = "10.0.0.1:10911",
    incarnation: str | None = "aaaa",
    session: int | None = 7,
    last_seen_ms: int = NOW - 100,
) -> BrokerLiveInfo:
    return BrokerLiveInfo(
        "c1",
        "g1",
        1,
        address,
        timeout_ms=TIMEOUT,
        last_seen_ms=last_seen_ms,
        session=session,
        incarnation=incarnation,
    )


def claim(address: str = "10.0.0.1:10911", incarnation: str | None = "aaaa") -> Claim:
    return Claim("g1", 1, address, incarnation)


def test_no_holder_or_an_expired_one_lets_any_claim_stand() -> None:
    assert handle_claim(None, claim("10.9.9.9:1", "bbbb"), NOW) is None
    expired = holder(last_seen_ms=NOW - TIMEOUT - 1)
    assert handle_claim(expired, claim("10.9.9.9:1", "bbbb"), NOW) is None
    at_the_edge = holder(last_seen_ms=NOW - TIMEOUT)  # alive while lastUpdate + timeout >= now
    assert handle_claim(at_the_edge, claim("10.9.9.9:1", "bbbb"), NOW) is not None


@pytest.mark.parametrize("incarnation", ["aaaa", "bbbb", None])
@pytest.mark.parametrize("session", [7, None])
def test_a_live_holder_at_another_address_refuses_any_claim(
    incarnation: str | None, session: int | None
) -> None:
    # The clone of a store, or an identity that names another replica: whatever the incarnation.
    reply = handle_claim(holder(session=session), claim("10.9.9.9:1", incarnation), NOW)
    assert reply is not None and reply.code == C.CONTROLLER_BROKER_ID_INVALID
    assert "BrokerId: 1 of broker-set: g1" in reply.remark
    assert "held by another live process at 10.0.0.1:10911 (incarnation aaaa)" in reply.remark
    assert "heard 100 ms ago" in reply.remark and "10.9.9.9:1" in reply.remark


@pytest.mark.parametrize("session", [7, None])
def test_the_holder_itself_stands_on_any_session(session: int | None) -> None:
    assert handle_claim(holder(session=session), claim(), NOW) is None
    older = holder(incarnation=None, session=session)  # a broker that reports no incarnation
    assert handle_claim(older, claim(incarnation=None), NOW) is None


def test_a_restart_at_the_same_address_waits_for_the_old_session_to_close() -> None:
    reply = handle_claim(holder(session=7), claim(incarnation="bbbb"), NOW)
    assert reply is not None and reply.code == C.CONTROLLER_INVALID_REQUEST  # retried, not given up
    assert "still has an open session here" in reply.remark and f"({TIMEOUT} ms)" in reply.remark
    # Its old session is gone (an HTTP-only entry): the restart takes the id at once.
    assert handle_claim(holder(session=None), claim(incarnation="bbbb"), NOW) is None
    assert handle_claim(holder(session=None), claim(incarnation=None), NOW) is None


def test_every_combination_is_decided_by_address_then_incarnation_then_session() -> None:
    addresses, incarnations, sessions = ("h", "x"), ("aaaa", "bbbb", None), (7, None)
    for address, incarnation, session, alive in itertools.product(
        addresses, incarnations, sessions, (True, False)
    ):
        seen = NOW - 100 if alive else NOW - TIMEOUT - 1
        known = holder("h", "aaaa", session, seen)
        reply = handle_claim(known, claim(address, incarnation), NOW)
        if not alive:
            assert reply is None
        elif address != "h":
            assert reply is not None and reply.code == C.CONTROLLER_BROKER_ID_INVALID
        elif incarnation == "aaaa" or session is None:
            assert reply is None
        else:
            assert reply is not None and reply.code == C.CONTROLLER_INVALID_REQUEST


def test_a_session_is_bound_to_its_first_broker_process() -> None:
    first = SessionBinding(("g1", 1), "aaaa")
    assert handle_session_heartbeat(None, first) is None
    assert handle_session_heartbeat(first, first) is None
    for other in (
        SessionBinding(("g1", 2), "aaaa"),
        SessionBinding(("g2", 1), "aaaa"),
        SessionBinding(("g1", 1), "bbbb"),
        SessionBinding(("g1", 1), None),
    ):
        reply = handle_session_heartbeat(first, other)
        assert reply is not None and reply.code == C.CONTROLLER_INVALID_REQUEST
        assert "bound to broker g1/1 (incarnation aaaa)" in reply.remark


def beat(broker_id: int, incarnation: str = "aaaa") -> BrokerHeartbeatRequest:
    return BrokerHeartbeatRequest(
        cluster_name="c1", broker_name="g1", broker_addr="h", broker_id=broker_id, incarnation=incarnation
    )


def test_a_closed_session_hands_its_entries_to_the_session_named_for_them() -> None:
    table = HeartbeatTable()
    table.record(0, beat(1), session=8)  # the same process, now heartbeating on session 8 ...
    table.record(0, beat(2), session=8)
    # ... session 8 closes while its session 7 is still open here: the entry of 1 moves, 2 is gone
    gone = table.remove_session(8, {("g1", 1): 7})
    assert [info.broker_id for info in gone] == [2]
    kept = table.info("g1", 1)
    assert kept is not None and kept.session == 7
    assert table.remove_session(8) == []  # nothing is on it any more
    assert [info.broker_id for info in table.remove_session(7)] == [1]


STORE = "0123456789abcdef0123456789abcdef"


def test_a_register_from_another_store_than_the_one_that_applied_the_id_is_refused() -> None:
    applied = f"10.0.0.3:10911;1700000000000;{STORE}"
    assert handle_store_claim("g1", 3, applied, STORE) is None
    reply = handle_store_claim("g1", 3, applied, "f" * 32)
    assert reply is not None and reply.code == C.CONTROLLER_BROKER_ID_INVALID
    assert f"was applied by store {STORE}" in reply.remark and "names another replica" in reply.remark
    # Nothing to compare: an id applied by an older broker, or a register from one.
    assert handle_store_claim("g1", 3, "10.0.0.3:10911;1700000000000", "f" * 32) is None
    assert handle_store_claim("g1", 3, applied, None) is None
