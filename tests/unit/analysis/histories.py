"""Hand-made histories for the invariant checkers (pure and Spark run the same ones).

``CLEAN`` is one broker set ``b1`` with replicas 1, 2, 3 seen by controller nodes n0..n2: broker 1
is master in epoch 1 (messages m0..m2 at 0, 100, 200, all acked), then fails over to broker 2 in
epoch 2 starting at 300; broker 1's unacked tail at 300 (``mx``, a FLUSH_SLAVE_TIMEOUT answer) is
truncated; m3, m4 are acked in epoch 2. Every replica ends with m0..m4. The controllers' watermark
(``ackedWatermark``) follows the acks: 0 when broker 1 expands its set, 300 (broker 1's last ack point)
at the failover, 500 when broker 2 expands its set.

``VIOLATIONS[name]`` is CLEAN changed so that exactly the invariant ``name`` fails.
"""

from __future__ import annotations

import copy
import zlib
from typing import Any

Tables = dict[str, list[dict[str, Any]]]

NODES = ("n0", "n1", "n2")
T0 = 1_700_000_000_000


def _event(raft_index: int, type_: str, **fields: Any) -> dict[str, Any]:
    return {"raftIndex": raft_index, "type": type_, "clusterName": "c1", "brokerName": "b1", **fields}


def _group(master: int | None, master_epoch: int, sss: list[int], sss_epoch: int) -> dict[str, Any]:
    return {
        "masterBrokerId": master,
        "masterEpoch": master_epoch,
        "syncStateSet": sss,
        "syncStateSetEpoch": sss_epoch,
        "code": 0,
        "accepted": True,
    }


EVENTS: list[dict[str, Any]] = [
    {"raftIndex": 1, "type": "Noop", "code": 0, "accepted": True},
    _event(2, "ApplyBrokerId", brokerId=1, **_group(None, 0, [], 0)),
    _event(3, "ApplyBrokerId", brokerId=2, **_group(None, 0, [], 0)),
    _event(4, "ApplyBrokerId", brokerId=3, **_group(None, 0, [], 0)),
    _event(5, "ElectMaster", brokerId=1, **_group(1, 1, [1], 1)),
    _event(6, "AlterSyncStateSet", brokerId=1, ackedWatermark=0, **_group(1, 1, [1, 2, 3], 2)),
    _event(7, "ElectMaster", brokerId=2, ackedWatermark=300, **_group(2, 2, [2], 3)),
    _event(8, "AlterSyncStateSet", brokerId=2, ackedWatermark=500, **_group(2, 2, [2, 3], 4)),
]


def controller_events(events: list[dict[str, Any]], nodes: tuple[str, ...] = NODES) -> list[dict[str, Any]]:
    return [{"node": n, "ts": T0 + e["raftIndex"] * 10 + k, **e} for k, n in enumerate(nodes) for e in events]


def _log(broker_id: int, messages: list[tuple[int, str]]) -> list[dict[str, Any]]:
    return [
        {
            "brokerName": "b1",
            "brokerId": broker_id,
            "offset": off,
            "size": 100,
            "msgId": mid,
            "crc": zlib.crc32(mid.encode()),
        }
        for off, mid in messages
    ]


FINAL = [(0, "m0"), (100, "m1"), (200, "m2"), (300, "m3"), (400, "m4")]


def _ack(msg_id: str, offset: int, epoch: int, status: str = "PUT_OK", broker_id: int = 1) -> dict[str, Any]:
    return {
        "client": "c-1",
        "msgId": msg_id,
        "brokerName": "b1",
        "brokerId": broker_id,
        "offset": offset,
        "size": 100,
        "epoch": epoch,
        "status": status,
        "ackMode": "allAckInSyncStateSet",
        "ts": T0 + 1000 + offset,
    }


def _role(broker_id: int, role: str, epoch: int, master: int, ts: int) -> dict[str, Any]:
    return {
        "node": f"broker-{broker_id}",
        "brokerName": "b1",
        "brokerId": broker_id,
        "role": role,
        "masterEpoch": epoch,
        "masterBrokerId": master,
        "ts": T0 + ts,
    }


def _epoch(broker_id: int, epoch: int, start: int, ts: int) -> dict[str, Any]:
    return {
        "node": f"broker-{broker_id}",
        "brokerName": "b1",
        "brokerId": broker_id,
        "epoch": epoch,
        "startOffset": start,
        "ts": T0 + ts,
    }


CLEAN: Tables = {
    "controller_events": controller_events(EVENTS),
    "roles": [
        _role(1, "MASTER", 1, 1, 50),
        _role(2, "SLAVE", 1, 1, 51),
        _role(3, "SLAVE", 1, 1, 52),
        _role(2, "MASTER", 2, 2, 2000),
        _role(3, "SLAVE", 2, 2, 2001),
        _role(1, "SLAVE", 2, 2, 3000),
    ],
    "epochs": [
        _epoch(1, 1, 0, 50),
        _epoch(2, 1, 0, 60),
        _epoch(3, 1, 0, 60),
        _epoch(2, 2, 300, 2000),
        _epoch(3, 2, 300, 2010),
        _epoch(1, 2, 300, 3010),
    ],
    "truncations": [
        {
            "node": "broker-1",
            "brokerName": "b1",
            "brokerId": 1,
            "fromOffset": 400,
            "toOffset": 300,
            "reason": "divergent tail",
            "ts": T0 + 3005,
        }
    ],
    "acks": [
        _ack("m0", 0, 1),
        _ack("m1", 100, 1),
        _ack("m2", 200, 1),
        _ack("mx", 300, 1, status="FLUSH_SLAVE_TIMEOUT"),
        _ack("m3", 300, 2, broker_id=2),
        _ack("m4", 400, 2, broker_id=2),
        {**_ack("ma", 900, 2, broker_id=2), "ackMode": "inSyncReplicas=1"},  # not checked for loss
    ],
    "reads": [
        {"client": "c-1", "msgId": "m0", "brokerName": "b1", "offset": 0, "brokerId": 1, "ts": T0 + 1500},
        {"client": "c-1", "msgId": "m3", "brokerName": "b1", "offset": 300, "brokerId": 2, "ts": T0 + 2500},
    ],
    "final_logs": _log(1, FINAL) + _log(2, FINAL) + _log(3, FINAL),
}


def _variant() -> Tables:
    return copy.deepcopy(CLEAN)


def lost_ack() -> Tables:
    t = _variant()
    t["acks"].append(_ack("m5", 500, 2, broker_id=2))
    return t


def replica_divergence() -> Tables:
    t = _variant()
    for row in t["final_logs"]:
        if row["brokerId"] == 3 and row["offset"] == 400:
            row["msgId"], row["crc"] = "m4-other", 1
    return t


def two_masters_in_epoch() -> Tables:
    t = _variant()
    t["roles"].append(_role(3, "MASTER", 2, 3, 2100))
    return t


def epoch_not_increasing() -> Tables:
    t = _variant()
    # Node n1 applies an entry whose syncStateSetEpoch goes back from 4 to 3.
    t["controller_events"].append(
        {"node": "n1", "ts": T0 + 95, **_event(9, "AlterSyncStateSet", brokerId=2, **_group(2, 2, [2, 3], 3))}
    )
    return t


def epoch_start_mismatch() -> Tables:
    t = _variant()
    for row in t["epochs"]:
        if row["brokerId"] == 3 and row["epoch"] == 2:
            row["startOffset"] = 250
    return t


def master_outside_sss() -> Tables:
    t = _variant()
    t["controller_events"] += controller_events(
        [_event(9, "AlterSyncStateSet", brokerId=2, **_group(2, 2, [3], 5))]
    )
    return t


def read_uncommitted() -> Tables:
    t = _variant()
    # A consumer read broker 1's tail at 300 before it was truncated away.
    t["reads"].append(
        {"client": "c-2", "msgId": "mx", "brokerName": "b1", "offset": 300, "brokerId": 1, "ts": T0}
    )
    return t


VIOLATIONS = {
    "lost_ack": lost_ack,
    "replica_divergence": replica_divergence,
    "two_masters_in_epoch": two_masters_in_epoch,
    "epoch_not_increasing": epoch_not_increasing,
    "epoch_start_mismatch": epoch_start_mismatch,
    "master_outside_sss": master_outside_sss,
    "read_uncommitted": read_uncommitted,
}


def duplicate() -> Tables:
    """Clean, plus m1 stored a second time at 500 on every replica (a retried put): counted, not failed."""
    t = _variant()
    t["final_logs"] += _log(1, [(500, "m1")]) + _log(2, [(500, "m1")]) + _log(3, [(500, "m1")])
    return t


def ack_gap() -> Tables:
    """Clean, but the acks of m1 and m2 are in no history (broker 1 crashed before its history kept
    them): the watermark says it confirmed up to 300, the acks end at 100 -- inconclusive, not a loss."""
    t = _variant()
    t["acks"] = [a for a in t["acks"] if a["msgId"] not in ("m1", "m2")]
    return t


def regrouped() -> Tables:
    """Clean, then the whole set is cleaned and registered again (epochs restart at 0): not a violation."""
    t = _variant()
    t["controller_events"] += controller_events(
        [
            _event(9, "CleanBrokerData", masterBrokerId=None, masterEpoch=None, syncStateSet=None),
            _event(10, "ApplyBrokerId", brokerId=1, **_group(None, 0, [], 0)),
            _event(11, "ElectMaster", brokerId=1, **_group(1, 1, [1], 1)),
        ]
    )
    # The final master is now broker 1 (raftIndex 11): it holds the same log.
    return t


def without_controller() -> Tables:
    """No controller history: the final master is the longest final log (broker 2 has one more message)."""
    t = _variant()
    t["controller_events"] = []
    t["final_logs"] += _log(2, [(500, "m5")])
    t["acks"].append(_ack("m5", 500, 2, broker_id=2))
    return t


def retained() -> Tables:
    """Clean, but retention deleted the first segment (offsets 0 and 100) on every replica: the acks
    and the read below the log start expired, they were not lost (docs/architecture.md §4.2)."""
    t = _variant()
    t["final_logs"] = [row for row in t["final_logs"] if row["offset"] >= 200]
    return t


BIG = 2**62 + 12345  # beyond 2^53 (float) and 2^31 (32-bit drivers)


def big_offsets() -> Tables:
    """Offsets past 2^62: must survive recorder, export and Spark whole; the ack at BIG+1 is lost."""
    t = _variant()
    t["final_logs"] += _log(1, [(BIG, "mb")]) + _log(2, [(BIG, "mb")]) + _log(3, [(BIG, "mb")])
    t["acks"].append(_ack("mb", BIG, 2, broker_id=2))
    t["acks"].append(_ack("mc", BIG + 1, 2, broker_id=2))
    return t


FIXTURES = {
    "clean": _variant,
    **VIOLATIONS,
    "duplicate": duplicate,
    "ack_gap": ack_gap,
    "regrouped": regrouped,
    "without_controller": without_controller,
    "retained": retained,
    "big_offsets": big_offsets,
}
"""Every history above, by name."""

EXPECTED_FAILURES = {name: ((name,) if name in VIOLATIONS else ()) for name in FIXTURES} | {
    "big_offsets": ("lost_ack",)
}


def combined() -> Tables:
    """All of ``FIXTURES`` in one history, each as its own broker set named after the fixture.

    Every invariant is per broker set, so one checker run over this gives each fixture's verdict as
    the evidence rows carrying its brokerName (one Spark run instead of one per fixture)."""
    out: Tables = {}
    for name, make in FIXTURES.items():
        for table, rows in make().items():
            for row in rows:
                if row.get("brokerName") is not None:
                    out.setdefault(table, []).append({**row, "brokerName": name})
    return out
