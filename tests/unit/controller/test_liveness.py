"""docs/reference-behaviour.md §7.1 heartbeat table, with the "latest report wins" deviation
(docs/architecture.md §7)."""

from __future__ import annotations

from mqha.controller.liveness import AckRule, BrokerLiveInfo, HeartbeatTable, LivenessSnapshot
from mqha.wire.controller_api import BrokerHeartbeatRequest


def beat(broker_id: int, name: str = "g1", **fields: int) -> BrokerHeartbeatRequest:
    return BrokerHeartbeatRequest(
        cluster_name="c1", broker_name=name, broker_addr=f"a{broker_id}", broker_id=broker_id, **fields
    )


def test_7_1_defaults_of_absent_fields() -> None:
    table = HeartbeatTable()
    info = table.record(1000, beat(1))
    assert info == BrokerLiveInfo("c1", "g1", 1, "a1", -1, -1, -1, 2**31 - 1, 10_000, 1000, reported_ms=1000)
    assert table.info("g1", 1) == info
    assert len(table) == 1


def test_7_1_alive_until_last_seen_plus_timeout_inclusive() -> None:
    table = HeartbeatTable()
    table.record(1000, beat(1, heartbeat_timeout_mills=500))
    assert table.is_alive(1500, "g1", 1)
    assert not table.is_alive(1501, "g1", 1)
    assert not table.is_alive(1000, "g1", 2)
    assert table.expired(1500) == []
    assert [i.broker_id for i in table.expired(1501)] == [1]
    assert table.info("g1", 1) is not None  # expired() does not remove


def test_7_1_scan_removes_expired_entries_only() -> None:
    table = HeartbeatTable()
    table.record(0, beat(1, heartbeat_timeout_mills=100))
    table.record(0, beat(2, heartbeat_timeout_mills=1000))
    assert [i.broker_id for i in table.pop_expired(500)] == [1]
    assert [i.broker_id for i in table.entries()] == [2]


def test_deviation_latest_report_wins_even_if_progress_went_back() -> None:
    # The reference keeps (epoch 3, offset 900); after a truncation the broker reports less.
    table = HeartbeatTable()
    table.record(0, beat(1, epoch=3, max_offset=900, election_priority=1))
    table.record(10, beat(1, epoch=2, max_offset=100, confirm_offset=50, election_priority=5))
    info = table.info("g1", 1)
    assert info is not None
    assert (info.epoch, info.max_offset, info.confirm_offset, info.election_priority, info.last_seen_ms) == (
        2,
        100,
        50,
        5,
        10,
    )


def test_deviation_address_of_a_new_process_is_taken() -> None:
    table = HeartbeatTable()
    table.record(0, beat(1))
    table.record(
        1, BrokerHeartbeatRequest(cluster_name="c1", broker_name="g1", broker_addr="new", broker_id=1)
    )
    info = table.info("g1", 1)
    assert info is not None
    assert info.broker_addr == "new"


def test_remove_by_session_spares_a_newer_process() -> None:
    table = HeartbeatTable()
    table.record(0, beat(1), session="old")
    table.record(5, beat(1), session="new")
    assert table.remove("g1", 1, session="old") is None
    assert table.remove_session("old") == []
    assert table.is_alive(5, "g1", 1)
    assert [i.broker_id for i in table.remove_session("new")] == [1]
    assert table.remove("g1", 1) is None


def test_remove_without_session_and_remove_group() -> None:
    table = HeartbeatTable()
    table.record(0, beat(1))
    table.record(0, beat(2))
    table.record(0, beat(1, name="g2"))
    removed = table.remove("g1", 1)
    assert removed is not None
    assert removed.broker_id == 1
    table.remove_group("g1")
    assert [(i.broker_name, i.broker_id) for i in table.entries()] == [("g2", 1)]


def test_touch_refreshes_only_known_brokers() -> None:
    table = HeartbeatTable()
    table.record(0, beat(1, epoch=4, heartbeat_timeout_mills=100))
    assert table.touch(90, "g1", 1)
    assert not table.touch(90, "g1", 2)
    assert table.is_alive(190, "g1", 1)
    info = table.info("g1", 1)
    assert info is not None
    assert info.epoch == 4


def test_view_is_a_frozen_snapshot_at_now() -> None:
    table = HeartbeatTable()
    table.record(0, beat(1, heartbeat_timeout_mills=100))
    view = table.view(50)
    table.remove("g1", 1)
    assert view.is_alive("g1", 1)
    assert view.info("g1", 2) is None
    assert not table.view(50).is_alive("g1", 1)
    assert not LivenessSnapshot(10_000, view.entries).is_alive("g1", 1)


# -- issue 25: start reports and the soft facts of the election rule (docs/architecture.md §3.2) --------


def _hb(incarnation: str | None, **extra: object) -> BrokerHeartbeatRequest:
    return BrokerHeartbeatRequest(
        cluster_name="c",
        broker_name="g",
        broker_addr="h:1",
        broker_id=2,
        incarnation=incarnation,
        **extra,  # type: ignore[arg-type]
    )


def test_an_incarnation_keeps_the_epoch_it_was_first_seen_in_across_a_new_session() -> None:
    table = HeartbeatTable()
    first = table.record(0, _hb("a" * 32, lossy_recovery=True, confirm_offset_before_recovery=90), "s1", 4)
    assert (first.first_seen_master_epoch, first.lossy, first.confirm_offset_before_recovery) == (4, True, 90)
    assert table.record(10, _hb("a" * 32), "s1", 5).first_seen_master_epoch == 4
    table.remove_session("s1")  # the session flaps: the entry goes, the incarnation is remembered
    assert table.record(20, _hb("a" * 32), "s2", 6).first_seen_master_epoch == 4
    assert table.record(30, _hb("b" * 32), "s2", 6).first_seen_master_epoch == 6  # a new process


def test_a_master_confirm_counts_only_for_a_master_that_reports_ack_points() -> None:
    table = HeartbeatTable()
    table.note_master_confirm("g", 3, 100)
    assert table.master_confirm("g") is None  # its confirm offset is only its log end
    table.mark_acking_master("g", 3)
    table.note_master_confirm("g", 3, 100)
    table.note_master_confirm("g", 3, 90)
    assert table.view(0).master_confirm("g") == (3, 100)  # the highest of the epoch
    table.remove_group("g")
    assert table.master_confirm("g") is None


def test_members_are_remembered_with_the_process_they_joined_with() -> None:
    table = HeartbeatTable()
    table.note_members("g", {1: "a", 2: "b"})
    assert table.view(0).member_incarnation("g", 2) == "b"
    table.note_members("g", {1: "a", 3: None})  # 2 left; 3 joined with an unknown process
    assert (table.member_incarnation("g", 2), table.member_incarnation("g", 3)) == (None, None)
    assert table.member_incarnation("g", 1) == "a"


def test_the_ack_rule_is_the_masters_and_outlives_its_entry() -> None:
    table = HeartbeatTable()
    table.record(1000, beat(2, name="g1", in_sync_replicas=3, all_ack_in_sync_state_set=True))  # type: ignore[arg-type]
    assert table.view(1000).ack_rule("g1") == AckRule(True, 3)  # a replica's, until the master reports
    table.record(1001, beat(1, all_ack_in_sync_state_set=False, in_sync_replicas=2), from_master=True)  # type: ignore[arg-type]
    table.record(1002, beat(3, all_ack_in_sync_state_set=True, in_sync_replicas=3))  # type: ignore[arg-type]
    table.remove("g1", 1)
    assert table.view(1003).ack_rule("g1") == AckRule(False, 2)
    assert table.view(1003).ack_rule("g1").by_count  # type: ignore[union-attr]
    assert table.view(1003).ack_rule("other") is None
    table.touch(5000, "g1", 2)
    assert table.info("g1", 2).reported_ms == 1000  # type: ignore[union-attr]  # a ping is no report
