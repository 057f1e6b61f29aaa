"""The pure invariant checker (docs/architecture.md §5) on hand-made histories: each violates exactly one."""

from __future__ import annotations

import pytest

from mqha.analysis import invariants as inv
from tests.unit.analysis import histories as h


def test_clean_history_passes() -> None:
    verdict = inv.check_all(h.CLEAN)
    assert verdict.ok, verdict.to_json()
    assert all(f.count == 0 for f in verdict.findings)
    assert verdict.table_counts["controller_events"] == 3 * len(h.EVENTS)


@pytest.mark.parametrize("name", sorted(h.VIOLATIONS))
def test_each_violation_is_named_alone(name: str) -> None:
    verdict = inv.check_all(h.VIOLATIONS[name]())
    assert verdict.failed == (name,)
    assert verdict.finding(name).count >= 1
    assert verdict.finding(inv.DUPLICATE).count == 0


def test_evidence_rows_show_the_violation() -> None:
    lost = inv.check_all(h.lost_ack()).finding(inv.LOST_ACK)
    assert lost.rows == (
        {
            "client": "c-1",
            "msgId": "m5",
            "brokerName": "b1",
            "brokerId": 2,
            "offset": 500,
            "epoch": 2,
            "finalMasterId": 2,
            "foundMsgId": None,
        },
    )
    div = inv.check_all(h.replica_divergence()).finding(inv.REPLICA_DIVERGENCE)
    assert [(r["offset"], [x["msgId"] for x in r["replicas"]]) for r in div.rows] == [
        (400, ["m4", "m4", "m4-other"])
    ]
    two = inv.check_all(h.two_masters_in_epoch()).finding(inv.TWO_MASTERS_IN_EPOCH)
    assert two.rows == ({"brokerName": "b1", "masterEpoch": 2, "masterIds": [2, 3]},)
    back = inv.check_all(h.epoch_not_increasing()).finding(inv.EPOCH_NOT_INCREASING)
    assert [
        (r["node"], r["raftIndex"], r["prevSyncStateSetEpoch"], r["syncStateSetEpoch"]) for r in back.rows
    ] == [("n1", 9, 4, 3)]
    start = inv.check_all(h.epoch_start_mismatch()).finding(inv.EPOCH_START_MISMATCH)
    assert start.rows == ({"brokerName": "b1", "epoch": 2, "startOffsets": [250, 300]},)
    outside = inv.check_all(h.master_outside_sss()).finding(inv.MASTER_OUTSIDE_SSS)
    assert [(r["node"], r["raftIndex"], r["syncStateSet"]) for r in outside.rows] == [
        ("n0", 9, [3]),
        ("n1", 9, [3]),
        ("n2", 9, [3]),
    ]
    read = inv.check_all(h.read_uncommitted()).finding(inv.READ_UNCOMMITTED)
    assert [(r["msgId"], r["offset"], r["foundMsgId"]) for r in read.rows] == [("mx", 300, "m3")]


def test_duplicate_is_counted_not_failed() -> None:
    verdict = inv.check_all(h.duplicate())
    assert verdict.ok
    dup = verdict.finding(inv.DUPLICATE)
    assert dup.count == 1
    assert dup.rows == ({"brokerName": "b1", "msgId": "m1", "offsets": [100, 500]},)


def test_whole_set_clean_restarts_the_epoch_sequence() -> None:
    assert inv.check_all(h.regrouped()).ok


def test_final_master_falls_back_to_the_longest_log() -> None:
    tables = h.without_controller()
    assert inv.final_masters(tables["controller_events"], tables["final_logs"]) == {"b1": 2}
    assert inv.check_all(tables).ok


def test_final_master_is_the_last_named_master() -> None:
    assert inv.final_masters(h.CLEAN["controller_events"], h.CLEAN["final_logs"]) == {"b1": 2}


def test_limit_cuts_rows_but_not_the_count() -> None:
    tables = h.lost_ack()
    tables["acks"] += [h._ack(f"z{i}", 1000 + i, 2) for i in range(30)]
    lost = inv.check_all(tables, limit=5).finding(inv.LOST_ACK)
    assert lost.count == 31
    assert [r["offset"] for r in lost.rows] == [500, 1000, 1001, 1002, 1003]


def test_big_offsets_are_exact() -> None:
    lost = inv.check_all(h.big_offsets()).finding(inv.LOST_ACK)
    assert [r["offset"] for r in lost.rows] == [h.BIG + 1]


def test_nulls_sort_first_like_spark() -> None:
    rows = [
        {"brokerName": "b", "offset": 5},
        {"brokerName": None, "offset": 1},
        {"brokerName": "a", "offset": None},
    ]
    finding = inv.finding(inv.REPLICA_DIVERGENCE, rows)
    assert [r["brokerName"] for r in finding.rows] == [None, "a", "b"]


def failures_by_group(verdict: inv.Verdict) -> dict[str, tuple[str, ...]]:
    """brokerName -> names of the invariants with evidence rows of that set."""
    out: dict[str, set[str]] = {}
    for f in verdict.findings:
        if f.is_failure:
            for row in f.rows:
                out.setdefault(row["brokerName"], set()).add(f.name)
    return {name: tuple(sorted(names)) for name, names in out.items()}


def test_combined_history_gives_each_fixture_its_own_verdict() -> None:
    verdict = inv.check_all(h.combined(), limit=1000)
    got = failures_by_group(verdict)
    for name, expected in h.EXPECTED_FAILURES.items():
        assert got.get(name, ()) == expected, name
    assert [r["brokerName"] for r in verdict.finding(inv.DUPLICATE).rows] == ["duplicate"]


def test_messages_below_the_log_start_expired_they_were_not_lost() -> None:
    """Retention cuts the front of a log: acks and reads below the final master's log start are not
    checked; a missing message above it still is."""
    tables = h.retained()
    assert inv.check_all(tables).finding(inv.LOST_ACK).count == 0
    assert inv.check_all(tables).finding(inv.READ_UNCOMMITTED).count == 0
    tables["acks"].append(h._ack("m9", 500, 2, broker_id=2))
    assert inv.check_all(tables).finding(inv.LOST_ACK).count == 1
