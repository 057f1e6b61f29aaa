"""The election rule's tables (mqha.controller.election, docs/architecture.md §3.2), walked row by row.

``TRANSITIONS`` (when to elect) and ``VERDICTS`` (what an attempt writes and answers) are checked
against the if-chains the shells and ``handle_elect_master`` held before the rule became one core,
over every combination of their inputs, and each row is reached by a worked example.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from mqha.codes import ResponseCode as C
from mqha.controller.election import (
    TRANSITIONS,
    VERDICTS,
    AfterElection,
    Asker,
    ElectionOutcome,
    ElectionResult,
    Event,
    Found,
    SetState,
    Then,
    Verdict,
    Waiting,
    after_alter_sync_state_set,
    after_election,
    asker,
    attempt_verdict,
    found,
    gone_event,
    heartbeat_event,
    joined_incarnations,
    needs_election,
    restart_keeps_master,
    scan_event,
    set_state,
)
from mqha.controller.liveness import BrokerLiveInfo, LivenessSnapshot
from mqha.controller.state import BrokerGroupState, ReplicaInfo

NOW = 100_000
GROUP = BrokerGroupState("c", "g", {b: ReplicaInfo(f"a{b}") for b in (1, 2, 3)}, 1, 4, frozenset({1, 2}), 6)
WAIT = Waiting(NOW - 500, waiting_for=(2,), watermark=100)


def hb(
    broker_id: int, offset: int = 50, *, seen: int = NOW, incarnation: str = "i", **extra: object
) -> BrokerLiveInfo:
    return BrokerLiveInfo(  # type: ignore[misc]
        "c",
        "g",
        broker_id,
        f"a{broker_id}",
        1,
        offset,
        -1,
        last_seen_ms=seen,
        incarnation=incarnation,
        **extra,
    )


# --------------------------------------------------------------------------------------------------
# TRANSITIONS: when to elect.


def test_every_state_has_an_entry_for_every_event() -> None:
    assert set(TRANSITIONS) == set(SetState)
    for state, row in TRANSITIONS.items():
        assert set(row) == set(Event), state


ELECTING = {
    # The rows of docs/architecture.md §3.2 that start an election; every other entry is NOTHING.
    (SetState.STEADY, Event.MASTER_GONE): Then.ELECT_MASTER_INACTIVE,
    (SetState.WAITING, Event.MASTER_GONE): Then.ELECT_MASTER_INACTIVE,
    (SetState.STEADY, Event.LOSSY_MASTER_BACK): Then.ELECT_LOSSY_MASTER,
    (SetState.WAITING, Event.LOSSY_MASTER_BACK): Then.ELECT_REPLICA_BACK,
    (SetState.WAITING, Event.BACK): Then.ELECT_REPLICA_BACK,
    (SetState.WAITING, Event.CAUGHT_UP): Then.ELECT_REPLICA_BACK,
    (SetState.WAITING, Event.REPORTED): Then.ELECT_REPLICA_BACK,
    (SetState.STEADY, Event.SCAN_MASTER_LOST): Then.ELECT_MASTER_NOT_ALIVE,
    (SetState.WAITING, Event.SCAN_MASTER_LOST): Then.ELECT_MASTER_NOT_ALIVE,
    (SetState.WAITING, Event.SCAN): Then.ELECT_AGAIN,
    (SetState.GONE, Event.SCAN): Then.FORGET_WAIT,
}


@pytest.mark.parametrize(("state", "event"), [(s, e) for s in SetState for e in Event], ids=str)
def test_walk_every_transition(state: SetState, event: Event) -> None:
    then = needs_election(state, event)
    assert then == ELECTING.get((state, event), Then.NOTHING)
    assert then.elects == (then not in (Then.NOTHING, Then.FORGET_WAIT))
    assert "{" not in then.reason(2, "its session closed")


# Worked examples: each event as the shells see it.
EVENT_EXAMPLES = {
    Event.MASTER_GONE: lambda: gone_event(GROUP, 1),
    Event.REPLICA_GONE: lambda: gone_event(GROUP, 2),
    Event.LOSSY_MASTER_BACK: lambda: heartbeat_event(
        hb(1, incarnation="old"), hb(1, lossy_recovery=True), NOW, is_master=True, wait=None
    ),
    Event.BACK: lambda: heartbeat_event(hb(2, seen=0), hb(2), NOW, is_master=False, wait=None),
    Event.CAUGHT_UP: lambda: heartbeat_event(hb(3, 99), hb(3, 100), NOW, is_master=False, wait=WAIT),
    Event.REPORTED: lambda: heartbeat_event(hb(2), hb(2), NOW, is_master=False, wait=WAIT),
    Event.HEARTBEAT: lambda: heartbeat_event(hb(3), hb(3), NOW, is_master=False, wait=WAIT),
    Event.SCAN_MASTER_LOST: lambda: scan_event(GROUP, LivenessSnapshot.of(NOW, [hb(2)])),
    Event.SCAN: lambda: scan_event(GROUP, LivenessSnapshot.of(NOW, [hb(1)])),
}


@pytest.mark.parametrize("event", list(Event), ids=str)
def test_every_event_has_a_worked_example(event: Event) -> None:
    assert EVENT_EXAMPLES[event]() is event


def test_every_state_has_a_worked_example() -> None:
    assert set_state(None, WAIT) is SetState.GONE
    assert set_state(GROUP, None) is SetState.STEADY
    assert set_state(GROUP, WAIT) is SetState.WAITING


def test_scan_sees_no_lost_master_without_a_master_or_anyone_alive() -> None:
    assert scan_event(replace(GROUP, master_broker_id=None), LivenessSnapshot.of(NOW, [hb(2)])) is Event.SCAN
    assert scan_event(GROUP, LivenessSnapshot.of(NOW, [])) is Event.SCAN
    assert scan_event(None, LivenessSnapshot.of(NOW, [])) is Event.SCAN


def _old_heartbeat_rule(
    group: BrokerGroupState | None,
    before: BrokerLiveInfo | None,
    info: BrokerLiveInfo,
    wait: Waiting | None,
) -> Then:
    """The if-chain of ``LivenessWatch.record_heartbeat`` / ``_on_replica_back`` before the core."""
    was_alive = before is not None and before.is_alive(NOW)
    is_master = group is not None and group.master_broker_id == info.broker_id
    new_process = info.incarnation is not None and (before is None or before.incarnation != info.incarnation)
    caught_up = (
        wait is not None
        and info.max_offset >= wait.watermark
        and (before is None or before.max_offset < wait.watermark)
    )
    awaited = wait is not None and info.broker_id in wait.waiting_for and was_alive
    if group is not None and (new_process or not was_alive or caught_up or awaited):
        if wait is not None:
            return Then.ELECT_REPLICA_BACK
        if is_master and info.lossy:
            return Then.ELECT_LOSSY_MASTER
    return Then.NOTHING


BEFORES = {
    "none": None,
    "alive-behind": hb(0, 99),
    "alive-at-mark": hb(0, 100),
    "expired": hb(0, 99, seen=0),
    "other-process": hb(0, 99, incarnation="old"),
}
WAITS = {"none": None, "for-it": Waiting(0, (1, 2), 100), "for-another": Waiting(0, (3,), 100)}


HEARTBEAT_CASES = list(itertools.product((True, False), (1, 2), BEFORES, (99, 100), (False, True), WAITS))


@pytest.mark.parametrize("case", HEARTBEAT_CASES, ids=str)
def test_heartbeats_trigger_exactly_what_the_old_shell_did(
    case: tuple[bool, int, str, int, bool, str],
) -> None:
    """Every kind of previous entry, offset, start report, role and wait: the same elections as before."""
    has_set, broker_id, before, offset, lossy, wait = case
    group = GROUP if has_set else None
    previous = BEFORES[before]
    previous = None if previous is None else replace(previous, broker_id=broker_id)
    info = hb(broker_id, offset, lossy_recovery=lossy)
    is_master = group is not None and group.master_broker_id == broker_id
    event = heartbeat_event(previous, info, NOW, is_master=is_master, wait=WAITS[wait])
    then = needs_election(set_state(group, WAITS[wait]), event)
    assert then == _old_heartbeat_rule(group, previous, info, WAITS[wait])


@pytest.mark.parametrize("broker_id", [1, 2])
@pytest.mark.parametrize("waiting", [False, True])
def test_a_gone_broker_triggers_only_for_the_current_master(broker_id: int, waiting: bool) -> None:
    then = needs_election(set_state(GROUP, WAIT if waiting else None), gone_event(GROUP, broker_id))
    assert then.elects == (broker_id == 1)
    assert not needs_election(set_state(None, None), gone_event(None, 1)).elects


@pytest.mark.parametrize(
    ("lossy", "clean", "keeps"),
    [
        (None, None, True),
        (False, True, True),
        (True, True, False),
        (False, False, False),
        (None, False, False),
    ],
)
def test_a_registering_master_keeps_its_role_only_after_a_clean_lossless_start(
    lossy: bool | None, clean: bool | None, keeps: bool
) -> None:
    assert restart_keeps_master(lossy, clean) is keeps


# --------------------------------------------------------------------------------------------------
# VERDICTS: what an attempt writes and answers.


def _old_verdict(what: Found, who: Asker, master_to_clear: bool) -> Verdict:
    """The if-chain of ``operations._decide_elect_master`` before the core."""
    if what is Found.OLD_MASTER:
        return Verdict.REELECT if who is Asker.MASTER_ITSELF else Verdict.STILL_MASTER
    if what is Found.NEW_MASTER:
        return Verdict.ELECT
    if who is Asker.CONTROLLER:
        if not master_to_clear or what is Found.FIRST_WAIT:
            return Verdict.HOLD
        return Verdict.CLEAR
    return Verdict.REFUSE


@pytest.mark.parametrize(
    ("what", "who", "clear"), list(itertools.product(Found, Asker, (False, True))), ids=str
)
def test_every_attempt_gets_the_old_verdict(what: Found, who: Asker, clear: bool) -> None:
    assert attempt_verdict(what, who, clear) is _old_verdict(what, who, clear)


ROW_EXAMPLES = [
    (Found.OLD_MASTER, Asker.MASTER_ITSELF, True),
    (Found.OLD_MASTER, Asker.CONTROLLER, True),
    (Found.NEW_MASTER, Asker.BROKER, True),
    (Found.NOBODY, Asker.CONTROLLER, False),
    (Found.FIRST_WAIT, Asker.CONTROLLER, True),
    (Found.NOBODY, Asker.CONTROLLER, True),
    (Found.NOBODY, Asker.ADMIN, True),
]


@pytest.mark.parametrize("index", range(len(VERDICTS)))
def test_walk_every_verdict_row(index: int) -> None:
    what, who, clear = ROW_EXAMPLES[index]
    matched = next(
        n
        for n, (f, a, c, _) in enumerate(VERDICTS)
        if f in (None, what) and a in (None, who) and c in (None, clear)
    )
    assert matched == index and attempt_verdict(what, who, clear) is VERDICTS[index][3]


def test_found_and_asker_read_the_result_and_the_request() -> None:
    assert found(ElectionResult(1), 1, None) is Found.OLD_MASTER
    assert found(ElectionResult(1, lost=(5, 9)), 1, None) is Found.NEW_MASTER
    assert found(ElectionResult(2), 1, None) is Found.NEW_MASTER
    waits = ElectionResult(None, waiting_for=(2,))
    assert found(waits, 1, None) is Found.FIRST_WAIT
    assert found(waits, 1, 10) is Found.NOBODY
    assert found(replace(waits, reports=True), 1, None) is Found.NOBODY
    assert found(ElectionResult(None), 1, None) is Found.NOBODY
    assert asker(None, False, 1) is Asker.CONTROLLER
    assert asker(1, True, 1) is Asker.ADMIN
    assert asker(1, False, 1) is Asker.MASTER_ITSELF
    assert asker(2, False, 1) is Asker.BROKER


# --------------------------------------------------------------------------------------------------
# After an attempt: the soft effects.


def outcome(result: ElectionResult, code: C = C.SUCCESS, **changes: object) -> ElectionOutcome:
    return replace(ElectionOutcome(result, code, NOW), **changes)  # type: ignore[arg-type]


def test_a_leader_that_lost_its_lead_changes_nothing() -> None:
    assert after_election(outcome(ElectionResult(None, waiting_for=(2,)), C.CONTROLLER_NOT_LEADER)) == (
        AfterElection(wait_changes=False)
    )


def test_a_wait_starts_once_and_keeps_its_start() -> None:
    waits = ElectionResult(None, watermark=100, waiting_for=(2,))
    first = after_election(outcome(waits, C.CONTROLLER_MASTER_NOT_AVAILABLE))
    assert first.wait == Waiting(NOW, (2,), 100) and first.wait_started and not first.push_role_change
    later = after_election(
        outcome(waits, C.CONTROLLER_MASTER_NOT_AVAILABLE, wait_before=WAIT, now_ms=NOW + 9)
    )
    assert later.wait == Waiting(WAIT.since_ms, (2,), 100) and not later.wait_started
    ended = after_election(
        outcome(ElectionResult(2), new_master=2, new_master_incarnation="i2", wait_before=WAIT)
    )
    assert ended.wait is None and ended.wait_changes
    assert ended.note_members == {2: "i2"} and ended.push_role_change


def test_a_declared_loss_is_said_only_when_it_committed() -> None:
    lossy = ElectionResult(2, watermark=100, lost=(50, 100))
    assert after_election(outcome(lossy, new_master=2)).declared_loss == (50, 100)
    assert after_election(outcome(lossy, C.SERVICE_NOT_AVAILABLE)).declared_loss is None


def test_the_fence_is_pushed_when_an_election_by_count_cleared_the_master() -> None:
    reports = ElectionResult(None, waiting_for=(2,), reports=True)
    cleared = {"epoch_before": 4, "master_after": None, "epoch_after": 5}
    assert after_election(outcome(reports, C.CONTROLLER_MASTER_NOT_AVAILABLE, **cleared)).push_fence
    held = {**cleared, "epoch_after": 4}
    assert not after_election(outcome(reports, C.CONTROLLER_MASTER_NOT_AVAILABLE, **held)).push_fence
    not_by_count = ElectionResult(None, waiting_for=(2,))
    assert not after_election(outcome(not_by_count, C.CONTROLLER_MASTER_NOT_AVAILABLE, **cleared)).push_fence


def test_members_join_as_known_vouched_or_heard_now() -> None:
    members, kept = frozenset({1, 2, 3}), frozenset({1, 2})
    known, current = {1: "k1"}, {1: "c1", 2: "c2", 3: "c3"}
    assert joined_incarnations(members, kept, known, {3: "v3"}, current) == {1: "k1", 2: "c2", 3: "v3"}
    assert joined_incarnations(members, kept, known, None, {}) == {1: "k1", 2: None, 3: None}
    alter = after_alter_sync_state_set(
        C.SUCCESS, members, kept, known=known, vouched=None, current=current, confirm_offset=7
    )
    assert alter.acking_master and alter.note_members == {1: "k1", 2: "c2", 3: "c3"}
    refused = after_alter_sync_state_set(
        C.CONTROLLER_INVALID_REPLICAS,
        members,
        kept,
        known=known,
        vouched=None,
        current=current,
        confirm_offset=7,
    )
    assert refused.note_members is None and not refused.acking_master
