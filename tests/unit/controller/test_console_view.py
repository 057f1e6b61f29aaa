"""The web console's document, built from values (``mqha.controller.console_view``; no IO)."""

from __future__ import annotations

import json

import pytest

from mqha.analysis import invariants as inv
from mqha.codes import ResponseCode
from mqha.controller.apply import Outcome
from mqha.controller.console_view import (
    PeerView,
    ServingNode,
    VerdictFormatError,
    build_snapshot,
    sse_message,
    summarize_verdict,
    timeline_entry,
)
from mqha.controller.liveness import BrokerLiveInfo, LivenessSnapshot
from mqha.controller.records import ApplyBrokerIdRecord, ElectMasterRecord, NoopRecord
from mqha.controller.state import BrokerGroupState, ControllerState, ReplicaInfo

NOW = 10_000

# broker-a: master 1, SyncStateSet {1, 2}; 3 registered but lagging and not in sync.
GROUP_A = BrokerGroupState(
    "c1",
    "broker-a",
    {i: ReplicaInfo(f"127.0.0.1:1091{i}", f"127.0.0.1:2091{i}") for i in (1, 2, 3)},
    master_broker_id=1,
    master_epoch=4,
    sync_state_set=frozenset({1, 2}),
    sync_state_set_epoch=7,
)
# broker-b (other cluster): never had a master.
GROUP_B = BrokerGroupState("c2", "broker-b", {1: ReplicaInfo("127.0.0.1:10921")})
STATE = ControllerState({"broker-b": GROUP_B, "broker-a": GROUP_A}, applied_index=42)


def _beat(name: str, broker_id: int, max_offset: int, *, seen: int = NOW, epoch: int = 4) -> BrokerLiveInfo:
    return BrokerLiveInfo(
        "c1",
        name,
        broker_id,
        f"127.0.0.1:1091{broker_id}",
        epoch=epoch,
        max_offset=max_offset,
        confirm_offset=max_offset - 10,
        timeout_ms=1000,
        last_seen_ms=seen,
    )


# 1 and 2 alive; 3's last heartbeat is past its timeout; broker-b never sent one.
LIVENESS = LivenessSnapshot.of(
    NOW, [_beat("broker-a", 1, 5000), _beat("broker-a", 2, 4900), _beat("broker-a", 3, 1000, seen=NOW - 5000)]
)

LEADER = ServingNode(
    node_id="n0",
    address="127.0.0.1:9878",
    is_serving_leader=True,
    leader_id="n0",
    leader_address="127.0.0.1:9878",
    term=3,
    commit_index=42,
    last_applied=42,
    healthy=True,
    peers=(
        PeerView("n0", "127.0.0.1:9878", None),
        PeerView("n1", "127.0.0.1:9888", True),
        PeerView("n2", "127.0.0.1:9898", False),
    ),
)


def test_snapshot_shows_master_epochs_sync_state_set_liveness_and_lag() -> None:
    snap = build_snapshot(STATE, LIVENESS, LEADER, [])
    assert snap["clusters"] == {"c1": ["broker-a"], "c2": ["broker-b"]}
    assert snap["appliedIndex"] == 42
    a, b = snap["groups"]
    assert {k: v for k, v in a.items() if k != "replicas"} == {
        "clusterName": "c1",
        "brokerName": "broker-a",
        "masterBrokerId": 1,
        "masterAddress": "127.0.0.1:10911",
        "masterEpoch": 4,
        "syncStateSet": [1, 2],
        "syncStateSetEpoch": 7,
        "eligibleReplicas": [],
        "ackedWatermark": None,
        "electionWaiting": None,
    }
    assert a["replicas"] == [
        {
            "brokerId": 1,
            "brokerAddress": "127.0.0.1:10911",
            "haAddress": "127.0.0.1:20911",
            "isMaster": True,
            "inSync": True,
            "alive": True,
            "epoch": 4,
            "maxOffset": 5000,
            "confirmOffset": 4990,
            "lag": None,
            "newerReportBytes": None,
            "eligibleCredit": None,
            "incarnation": None,
            "cleanShutdown": None,
            "lossyRecovery": None,
            "confirmOffsetBeforeRecovery": None,
            "reportedMsAgo": 0,
        },
        {
            "brokerId": 2,
            "brokerAddress": "127.0.0.1:10912",
            "haAddress": "127.0.0.1:20912",
            "isMaster": False,
            "inSync": True,
            "alive": True,
            "epoch": 4,
            "maxOffset": 4900,
            "confirmOffset": 4890,
            "lag": 100,
            "newerReportBytes": None,
            "eligibleCredit": None,
            "incarnation": None,
            "cleanShutdown": None,
            "lossyRecovery": None,
            "confirmOffsetBeforeRecovery": None,
            "reportedMsAgo": 0,
        },
        {
            "brokerId": 3,
            "brokerAddress": "127.0.0.1:10913",
            "haAddress": "127.0.0.1:20913",
            "isMaster": False,
            "inSync": False,
            "alive": False,  # heard from, but past its heartbeat timeout
            "epoch": 4,
            "maxOffset": 1000,
            "confirmOffset": 990,
            "lag": 4000,
            "newerReportBytes": None,
            "eligibleCredit": None,
            "incarnation": None,
            "cleanShutdown": None,
            "lossyRecovery": None,
            "confirmOffsetBeforeRecovery": None,
            "reportedMsAgo": 5000,
        },
    ]
    # No master, no heartbeat: every absent value is null, not a made-up number.
    assert b["masterBrokerId"] is None and b["masterAddress"] is None and b["masterEpoch"] == 0
    assert b["replicas"] == [
        {
            "brokerId": 1,
            "brokerAddress": "127.0.0.1:10921",
            "haAddress": None,
            "isMaster": False,
            "inSync": False,
            "alive": False,
            "epoch": None,
            "maxOffset": None,
            "confirmOffset": None,
            "lag": None,
            "newerReportBytes": None,
            "eligibleCredit": None,
            "incarnation": None,
            "cleanShutdown": None,
            "lossyRecovery": None,
            "confirmOffsetBeforeRecovery": None,
            "reportedMsAgo": None,
        }
    ]


def test_heartbeat_defaults_of_minus_one_show_as_unknown_and_give_no_lag() -> None:
    liveness = LivenessSnapshot.of(NOW, [_beat("broker-a", 1, -1, epoch=-1), _beat("broker-a", 2, 4900)])
    replicas = build_snapshot(STATE, liveness, LEADER, [])["groups"][0]["replicas"]
    assert (replicas[0]["maxOffset"], replicas[0]["epoch"], replicas[0]["confirmOffset"]) == (
        None,
        None,
        None,
    )
    assert replicas[1]["lag"] is None  # the master's offset is unknown


def test_a_replica_past_its_master_has_a_negative_lag_not_zero() -> None:
    """Issue 30: a slave above its master showed lag 0; the lag is signed (the console says "ahead").
    Here 3 is outside the SyncStateSet, in an older epoch: it may hold a tail the master never had."""
    liveness = LivenessSnapshot.of(
        NOW, [_beat("broker-a", 1, 5000, seen=NOW - 800), _beat("broker-a", 3, 5200, epoch=3)]
    )
    replicas = build_snapshot(STATE, liveness, LEADER, [])["groups"][0]["replicas"]
    assert replicas[2]["lag"] == -200 and replicas[0]["reportedMsAgo"] == 800
    assert replicas[2]["newerReportBytes"] is None


def test_an_in_sync_replica_past_the_masters_report_only_reported_later() -> None:
    """Under load a SyncStateSet member of the master's epoch reports more than the master's older
    heartbeat said; it holds a prefix of the master's log, so it is not ahead: lag 0, and by how much its
    newer report passes the master's (issue 30's screenshots showed healthy slaves as "ahead 8,310")."""
    liveness = LivenessSnapshot.of(
        NOW, [_beat("broker-a", 1, 5000, seen=NOW - 800), _beat("broker-a", 2, 5200)]
    )
    replicas = build_snapshot(STATE, liveness, LEADER, [])["groups"][0]["replicas"]
    assert (replicas[1]["lag"], replicas[1]["newerReportBytes"]) == (0, 200)
    behind = LivenessSnapshot.of(NOW, [_beat("broker-a", 1, 5000), _beat("broker-a", 2, 4900)])
    replicas = build_snapshot(STATE, behind, LEADER, [])["groups"][0]["replicas"]
    assert (replicas[1]["lag"], replicas[1]["newerReportBytes"]) == (100, None)


def test_controllers_name_the_leader_and_reachability_as_this_node_sees_it() -> None:
    snap = build_snapshot(STATE, LIVENESS, LEADER, [])
    assert snap["node"] == {
        "nodeId": "n0",
        "address": "127.0.0.1:9878",
        "isLeader": True,
        "leaderId": "n0",
        "leaderAddress": "127.0.0.1:9878",
        "term": 3,
        "commitIndex": 42,
        "lastApplied": 42,
        "healthy": True,
    }
    assert snap["controllers"] == [
        {"nodeId": "n0", "address": "127.0.0.1:9878", "isSelf": True, "isLeader": True, "reachable": True},
        {"nodeId": "n1", "address": "127.0.0.1:9888", "isSelf": False, "isLeader": False, "reachable": True},
        {"nodeId": "n2", "address": "127.0.0.1:9898", "isSelf": False, "isLeader": False, "reachable": False},
    ]


def test_a_follower_says_so_and_names_the_leader() -> None:
    follower = ServingNode(
        "n1", "127.0.0.1:9888", False, "n0", "127.0.0.1:9878", 3, 42, 41, True, LEADER.peers
    )
    snap = build_snapshot(STATE, LIVENESS, follower, [])
    assert snap["node"]["isLeader"] is False
    assert snap["node"]["leaderAddress"] == "127.0.0.1:9878"
    assert [c["nodeId"] for c in snap["controllers"] if c["isLeader"]] == ["n0"]
    assert [c["nodeId"] for c in snap["controllers"] if c["isSelf"]] == ["n1"]


def test_equal_inputs_give_equal_documents_so_the_stream_pushes_only_changes() -> None:
    timeline = [{"raftIndex": 7, "type": "ElectMaster"}]
    first = build_snapshot(STATE, LIVENESS, LEADER, timeline)
    assert first == build_snapshot(STATE, LIVENESS, LEADER, list(timeline))
    moved = LivenessSnapshot.of(NOW, [*LIVENESS.entries.values(), _beat("broker-a", 2, 4950)])
    assert build_snapshot(STATE, moved, LEADER, timeline) != first


ELECT = ElectMasterRecord("c1", "broker-a", 2, expected_master_epoch=4, expected_sync_state_set_epoch=7)


def test_timeline_rows_come_from_election_records_with_the_group_after_apply() -> None:
    after = BrokerGroupState(
        "c1",
        "broker-a",
        GROUP_A.replicas,
        master_broker_id=2,
        master_epoch=5,
        sync_state_set=frozenset({2}),
        sync_state_set_epoch=8,
    )
    outcome = Outcome(ResponseCode.SUCCESS, "", 43, ELECT, "broker-a", after)
    assert timeline_entry(outcome, 1_700_000_000_000) == {
        "raftIndex": 43,
        "ts": 1_700_000_000_000,
        "type": "ElectMaster",
        "brokerName": "broker-a",
        "accepted": True,
        "codeName": "SUCCESS",
        "remark": "",
        "unclean": False,
        "ackedDataLost": None,
        "masterBrokerId": 2,
        "masterEpoch": 5,
        "syncStateSet": [2],
        "syncStateSetEpoch": 8,
    }
    fenced = Outcome(ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH, "Fenced", 44, ELECT, "broker-a", after)
    row = timeline_entry(fenced, 1)
    assert row is not None and (row["accepted"], row["codeName"]) == (False, "CONTROLLER_FENCED_MASTER_EPOCH")


def test_registrations_and_barriers_are_not_on_the_timeline() -> None:
    noop = Outcome(ResponseCode.SUCCESS, "", 1, NoopRecord("barrier"))
    apply_id = Outcome(
        ResponseCode.SUCCESS, "", 2, ApplyBrokerIdRecord("c1", "broker-a", 1, "a", "x"), "broker-a", GROUP_A
    )
    undecodable = Outcome(ResponseCode.SYSTEM_ERROR, "bad bytes", 3, None)
    assert [timeline_entry(o, 1) for o in (noop, apply_id, undecodable)] == [None, None, None]


def test_sse_message_is_one_event_with_the_json_on_one_data_line() -> None:
    raw = sse_message("snapshot", {"b": "two\nlines", "a": 1})
    assert raw == b'event: snapshot\ndata: {"a":1,"b":"two\\nlines"}\n\n'


def _verdict(lost: int) -> dict[str, object]:
    findings = tuple(
        inv.Finding(
            name,
            lost if name == inv.LOST_ACK else 0,
            ({"msgId": "m1"},) if name == inv.LOST_ACK and lost else (),
        )
        for name in inv.CHECKS
    )
    verdict = inv.Verdict(findings, {"acks": 10})
    return json.loads(json.dumps({"source": "runs/x", "engine": "python", **verdict.to_json()}))


def test_violations_page_lists_failed_checks_first_with_their_evidence() -> None:
    page = summarize_verdict(_verdict(lost=3))
    assert (page["ok"], page["failed"], page["source"], page["tables"]) == (
        False,
        ["lost_ack"],
        "runs/x",
        {"acks": 10},
    )
    first = page["checks"][0]
    assert (first["name"], first["count"], first["rows"], first["failure"]) == (
        "lost_ack",
        3,
        [{"msgId": "m1"}],
        True,
    )
    assert {c["name"] for c in page["checks"]} == set(inv.CHECKS)
    assert page["status"] == "violated" and page["reasons"][0] == "violated: lost_ack"
    # Nothing violated, but nothing checked either (no acks, no final logs): inconclusive, not ok.
    empty = summarize_verdict(_verdict(lost=0))
    assert (empty["ok"], empty["status"], empty["coverage"]["acksChecked"]) == (False, "inconclusive", 0)
    assert "no final logs in the export" in empty["reasons"][0]
    # A report written before the status existed: derived from ok.
    old = {k: v for k, v in _verdict(lost=0).items() if k not in ("status", "reasons", "coverage")}
    assert summarize_verdict({**old, "ok": True})["status"] == "ok"


@pytest.mark.parametrize(
    "doc",
    [
        [],
        {"ok": "yes", "checks": {}},
        {"ok": True},
        {"ok": True, "checks": {"x": {"count": "2"}}},
        {"ok": True, "checks": {"x": {"count": 1, "rows": "r"}}},
    ],
)
def test_a_document_of_another_shape_is_refused_with_a_message(doc: object) -> None:
    with pytest.raises(VerdictFormatError):
        summarize_verdict(doc)
