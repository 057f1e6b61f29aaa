"""Consumer completeness, per-producer order, unavailability outside faults, kinds not injected."""

from __future__ import annotations

from mqha.chaos.client_checks import (
    Window,
    WriteLog,
    lost_writes,
    not_injected,
    not_served,
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


def put(
    at: float, started: float | None = None, first_error: float | None = None, ok: bool = True
) -> SendResult:
    status = SendStatus.PUT_OK if ok else SendStatus.FAILED
    start = at - 0.01 if started is None else started
    return SendResult("m", status, "a", started_at=start, first_error_at=first_error, completed_at=at)


DOWN = [(("a", "b"), 10.0, 15.0)]  # every controller down from 10 s until whole again at 15 s


def test_puts_turned_away_in_a_long_stretch_while_the_controllers_are_down_are_not_served() -> None:
    steady = [put(t / 10) for t in range(90, 100)]  # acks every 0.1 s up to 9.9 s
    # Refused from 11.5 s (the heartbeat timeout after the controllers went), served again at 14 s.
    refused = [*steady, put(11.4), put(14.0, started=11.45, first_error=11.5), put(14.1)]
    assert not_served(refused, DOWN) == [Window("a", 11.4, 14.0)]
    failed = [*steady, put(11.4), put(13.0, ok=False), put(14.0)]  # ended without PUT_OK inside it
    assert not_served(failed, DOWN) == [Window("a", 11.4, 14.0)]
    # The same stretch with every put only waiting for its answer: a stall of the machine.
    slow = [*steady, put(11.4), put(14.0, started=11.41), put(14.0, started=11.42)]
    assert not_served(slow, DOWN) == []
    # A refusal in a short stretch, or a stretch outside the window, or a group another fault had.
    assert not_served([*steady, put(11.4), put(12.2, started=11.45, first_error=11.5)], DOWN) == []
    assert not_served([put(1.0), put(5.0, first_error=2.0), put(5.1)], DOWN) == []
    assert not_served(refused, DOWN, [(("a",), 8.0, 9.0)]) == []  # with its 2 s margin it covers 11 s
    assert not_served(refused, DOWN, [(("b",), 8.0, 9.0)]) == [Window("a", 11.4, 14.0)]
    # A stretch that began just before the controllers went down counts; one that was there a second
    # before (a previous fault's effect, past its margin) is not theirs.
    assert not_served([put(9.5), put(12.0, started=9.6, first_error=11.0)], DOWN) == [Window("a", 9.5, 12.0)]
    assert not_served([put(8.5), put(12.0, started=8.6, first_error=11.0)], DOWN) == []


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
