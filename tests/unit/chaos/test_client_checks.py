"""Consumer completeness, per-producer order, unavailability outside faults, kinds not injected."""

from __future__ import annotations

from mqha.chaos.client_checks import (
    Window,
    WriteLog,
    lost_writes,
    not_injected,
    out_of_order,
    unavailable_outside_faults,
    unread_acks,
)
from mqha.client.results import SendResult, SendStatus


def ack(msg_id: str, offset: int | None, at: float = 0.0, group: str = "a", ok: bool = True) -> SendResult:
    status = SendStatus.PUT_OK if ok else SendStatus.FAILED
    return SendResult(msg_id, status, group, offset=offset, size=10, completed_at=at)


def test_an_ack_in_the_final_log_that_no_consumer_read_is_unread() -> None:
    sends = [ack("m1", 0), ack("m2", 10), ack("m3", 20), ack("m4", None, ok=False)]
    logs = {"a": {0: "m1", 10: "m2", 20: "other"}}  # m3 is lost: the no-loss check's business
    assert [s.msg_id for s in unread_acks(sends, logs, {"a": {"m1"}})] == ["m2"]
    assert unread_acks(sends, logs, {"a": {"m1", "m2"}}) == []


def test_offsets_of_one_producer_must_grow_in_send_order() -> None:
    logs = {"a": {0: "m1", 10: "m2", 30: "m2b", 40: "m3"}}
    in_order = [ack("m1", 0), ack("x", None, ok=False), ack("m2", 10)]
    assert out_of_order([in_order], logs) == 0
    disorder = {"a": {30: "m1", 10: "m2", 20: "m3"}}
    assert out_of_order([[ack("m1", 30), ack("m2", 10), ack("m3", 20)]], disorder) == 1
    assert out_of_order([[ack("m1", 30)], [ack("m2", 10)]], disorder) == 0  # two producers: no order
    # m1 was lost (a declared loss cut the log back): m2, stored below where m1 was, is not disorder
    assert out_of_order([[ack("m1", 40), ack("m2", 10)]], {"a": {10: "m2"}}) == 0


def test_only_gaps_without_a_fault_of_the_group_are_reported() -> None:
    sends = [ack("1", 0, at=0.0), ack("2", 1, at=0.5), ack("3", 2, at=3.0), ack("4", 3, at=10.0)]
    sends += [ack("b", 0, at=9.0, group="b")]
    faults = [(("a",), 1.0, 1.0)]  # with its 2 s margin it covers 0.5 -> 3.0, not 3.0 -> 10.0
    assert unavailable_outside_faults(sends, faults) == [Window("a", 3.0, 10.0)]
    assert unavailable_outside_faults(sends, [(("a",), 2.0, 9.0)]) == []
    assert unavailable_outside_faults(sends, [(("b",), 2.0, 9.0)]) == [
        Window("a", 0.5, 3.0),
        Window("a", 3.0, 10.0),
    ]


def test_kinds_never_injected_say_why() -> None:
    why = not_injected(("kill", "delay", "raft-loss"), ("kill", "delay"), ("kill",))
    assert why == {
        "delay": "every step of it was skipped (no target found)",
        "raft-loss": "the duration ended before its turn (run longer)",
    }


def test_an_acknowledged_controller_write_missing_at_the_end_is_lost() -> None:
    log = WriteLog(acked=["chaos-probe-1", "chaos-probe-2", "chaos-probe-10"], unknown=["chaos-probe-3"])
    assert lost_writes(log, {"chaos-probe-1"}) == ["chaos-probe-2", "chaos-probe-10"]  # in write order
    assert lost_writes(log, {"chaos-probe-1", "chaos-probe-2", "chaos-probe-10"}) == []  # unknown: either way
