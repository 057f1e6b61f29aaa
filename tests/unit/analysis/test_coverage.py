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
    gap = "with no PUT_OK recorded there: acks it may have answered are in no history and were not checked"
    assert nothing.judged == (
        cov.INCONCLUSIVE,
        [
            "no final logs in the export: acks and reads were compared with nothing",
            # the controllers' watermark shows what the masters confirmed: acks no history holds
            f"set b1: master 1 (masterEpoch 1) confirmed offsets 0..300 (300 bytes) {gap}",
            f"set b1: master 2 (masterEpoch 2) confirmed offsets 300..500 (200 bytes) {gap}",
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


# Ack gaps (issue 45, finding 8): what a master confirmed, by the controllers' watermark, against the
# acks recorded in its epoch.

GAP_REASON = (
    "set b1: master 1 (masterEpoch 1) confirmed offsets 100..300 (200 bytes) with no PUT_OK recorded "
    "there: acks it may have answered are in no history and were not checked"
)


def _gaps(tables: h.Tables) -> list[dict[str, int]]:
    return inv.check_all(tables).to_json()["coverage"]["sets"]["b1"]["ackGaps"]


def test_acks_a_crashed_master_never_recorded_make_the_verdict_inconclusive_naming_the_gap() -> None:
    verdict = inv.check_all(h.ack_gap())
    assert verdict.failed == () and verdict.judged == (cov.INCONCLUSIVE, [GAP_REASON])
    assert _gaps(h.ack_gap()) == [{"masterId": 1, "masterEpoch": 1, "fromOffset": 100, "toOffset": 300}]
    assert _gaps(h.CLEAN) == [] and inv.check_all(h.CLEAN).status == cov.OK


def test_any_recorder_accounts_for_an_ack_and_a_non_put_ok_answer_does_not() -> None:
    t = h.ack_gap()
    t["acks"].append({**h._ack("m2", 200, 1), "client": "broker@127.0.0.1:10911"})  # the master's own
    assert _gaps(t) == []
    t = h.ack_gap()
    t["acks"].append(h._ack("m2", 200, 1, status="FLUSH_SLAVE_TIMEOUT"))
    assert _gaps(t) == [{"masterId": 1, "masterEpoch": 1, "fromOffset": 100, "toOffset": 300}]


def test_all_of_a_masters_acks_missing_is_a_gap_from_its_epoch_start() -> None:
    t = h._variant()
    t["acks"] = [a for a in t["acks"] if a["epoch"] != 1]
    assert _gaps(t) == [{"masterId": 1, "masterEpoch": 1, "fromOffset": 0, "toOffset": 300}]


def test_a_new_masters_confirm_of_the_tail_it_inherited_is_no_gap() -> None:
    # Broker 2 acknowledged nothing yet; its first AlterSyncStateSet confirms what it took over (to its
    # epoch's start, 300): no put of its own is missing. Beyond the start, it is a gap of epoch 2.
    t = h._variant()
    t["acks"] = [a for a in t["acks"] if a["epoch"] != 2]
    for row in t["controller_events"]:
        if row["raftIndex"] == 8:
            row["ackedWatermark"] = 300
    assert _gaps(t) == []
    for row in t["controller_events"]:
        if row["raftIndex"] == 8:
            row["ackedWatermark"] = 450
    assert _gaps(t) == [{"masterId": 2, "masterEpoch": 2, "fromOffset": 300, "toOffset": 450}]
    # Without epoch records the start is unknown: what it opened with (300) still bounds it.
    t["epochs"] = []
    assert _gaps(t) == [{"masterId": 2, "masterEpoch": 2, "fromOffset": 300, "toOffset": 450}]


def test_a_declared_loss_is_evidence_of_what_was_acknowledged() -> None:
    # The failover declared [100, 300) lost: the watermark is lowered to 100, the range still counts.
    t = h.ack_gap()
    for row in t["controller_events"]:
        if row["raftIndex"] == 7:
            row.update(ackedWatermark=100, ackedDataLostFrom=100, ackedDataLostTo=300)
    assert _gaps(t) == [{"masterId": 1, "masterEpoch": 1, "fromOffset": 100, "toOffset": 300}]


def test_a_cleared_epoch_carries_the_evidence_and_has_no_gap_of_its_own() -> None:
    # The fence: an ElectMaster without a master (masterEpoch 2) carries broker 1's ack point; then
    # broker 2 is elected in masterEpoch 3.
    t = h.ack_gap()
    events = [
        h._event(7, "ElectMaster", brokerId=None, ackedWatermark=300, **h._group(None, 2, [2], 3)),
        h._event(8, "ElectMaster", brokerId=2, ackedWatermark=300, **h._group(2, 3, [2], 4)),
    ]
    t["controller_events"] = [r for r in t["controller_events"] if r["raftIndex"] < 7]
    t["controller_events"] += h.controller_events(events)
    t["acks"] = [{**a, "epoch": 3} if a["epoch"] == 2 else a for a in t["acks"]]
    t["epochs"] = [{**e, "epoch": 3} if e["epoch"] == 2 else e for e in t["epochs"]]
    assert _gaps(t) == [{"masterId": 1, "masterEpoch": 1, "fromOffset": 100, "toOffset": 300}]


def test_without_a_watermark_there_is_no_evidence_and_no_gap() -> None:
    # Puts that do not wait for replicas (async) never move the watermark.
    t = h.ack_gap()
    for row in t["controller_events"]:
        row.pop("ackedWatermark", None)
    assert _gaps(t) == []
    assert cov.ack_gaps([cov.Term("b1", 1, 1, -1, -1)], {}, {}) == ()
