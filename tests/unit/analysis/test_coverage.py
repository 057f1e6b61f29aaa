"""No vacuous verdicts (docs/architecture.md §5): status ok / violated / inconclusive with reasons."""

from __future__ import annotations

from mqha.analysis import coverage as cov
from mqha.analysis import invariants as inv
from tests.unit.analysis import histories as h


def _without_log(tables: h.Tables, broker_id: int) -> h.Tables:
    return {**tables, "final_logs": [r for r in tables["final_logs"] if r["brokerId"] != broker_id]}


def test_clean_history_is_ok_and_says_what_it_checked() -> None:
    verdict = inv.check_all(h.CLEAN)
    assert verdict.judged == (cov.OK, [])
    doc = verdict.to_json()
    assert doc["status"] == "ok" and doc["ok"] and doc["reasons"] == []
    b1 = doc["coverage"]["sets"]["b1"]
    assert b1["finalMasterId"] == 2 and b1["replicas"] == [1, 2, 3]
    assert b1["finalLogs"] == [{"brokerId": i, "rows": 5} for i in (1, 2, 3)]
    # 5 PUT_OK acks under allAckInSyncStateSet checked; the inSyncReplicas=1 one is counted, not checked.
    assert (b1["acks"], b1["acksChecked"], b1["acksExpired"], b1["acksUnchecked"]) == (
        {"broker": 0, "client": 6},
        5,
        0,
        0,
    )
    assert (b1["logStart"], b1["logEnd"], b1["reads"]) == (0, 500, 2)


def test_a_missing_slave_log_is_inconclusive() -> None:
    verdict = inv.check_all(_without_log(h.CLEAN, 3))
    status, reasons = verdict.judged
    assert status == cov.INCONCLUSIVE and not verdict.ok
    assert reasons == ["set b1: no final log of replica(s) 3: their logs were not compared"]


def test_a_missing_master_log_is_inconclusive_not_a_loss() -> None:
    verdict = inv.check_all(_without_log(h.CLEAN, 2))
    assert verdict.failed == ()
    status, reasons = verdict.judged
    assert status == cov.INCONCLUSIVE
    assert reasons[0] == "set b1: 5 acknowledged put(s) not checked: no final log of its final master 2"


def test_no_final_logs_and_no_acks_are_inconclusive() -> None:
    nothing = inv.check_all({**h.CLEAN, "final_logs": [], "acks": []})
    assert nothing.judged == (
        cov.INCONCLUSIVE,
        [
            "no final logs in the export: acks and reads were compared with nothing",
            "no PUT_OK acks recorded (by brokers or clients): lost_ack checked nothing",
        ],
    )
    assert inv.check_all({}).status == cov.INCONCLUSIVE


def test_acks_of_another_mode_only_are_inconclusive() -> None:
    acks = [{**a, "ackMode": "inSyncReplicas=1"} for a in h.CLEAN["acks"]]
    status, reasons = inv.check_all({**h.CLEAN, "acks": acks}).judged
    assert status == cov.INCONCLUSIVE
    assert reasons == [
        "6 PUT_OK ack(s) recorded, none under allAckInSyncStateSet with a final master log: "
        "lost_ack checked nothing"
    ]


def test_a_violation_wins_and_export_problems_are_reasons() -> None:
    verdict = inv.check_all(_without_log(h.lost_ack(), 3), problems=["broker 127.0.0.1:1: refused"])
    status, reasons = verdict.judged
    assert status == cov.VIOLATED and verdict.failed == ("lost_ack",)
    assert reasons[:2] == ["violated: lost_ack", "export: broker 127.0.0.1:1: refused"]
    assert inv.check_all(h.CLEAN, problems=["x"]).status == cov.INCONCLUSIVE


def test_broker_recorded_acks_are_counted_apart() -> None:
    t = h._variant()
    t["acks"] += [{**a, "client": "broker@127.0.0.1:10911"} for a in t["acks"]]
    doc = inv.check_all(t).to_json()["coverage"]
    assert (doc["acksChecked"], doc["acksByBroker"], doc["acksByClient"]) == (10, 5, 5)
    assert doc["sets"]["b1"]["acks"] == {"broker": 6, "client": 6}


def test_expired_acks_are_counted() -> None:
    b1 = inv.check_all(h.retained()).to_json()["coverage"]["sets"]["b1"]
    assert (b1["acksChecked"], b1["acksExpired"], b1["logStart"]) == (3, 2, 200)


def test_a_replica_without_history_is_a_gap() -> None:
    t = h._variant()
    t["roles"] = [r for r in t["roles"] if r["brokerId"] != 3]
    status, reasons = inv.check_all(t).judged
    assert status == cov.INCONCLUSIVE
    assert reasons == [
        "set b1: no history of replica(s) 3 (a gap: the acks it answered as master, its roles and epochs "
        "are missing)"
    ]
