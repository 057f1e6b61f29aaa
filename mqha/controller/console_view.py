"""What the web console shows, as JSON built from values (core: no IO, no clock, no asyncio).

The console (``mqha/controller/console/``, served by ``mqha.controller.http_api``) renders one snapshot
document pushed over server-sent events. ``build_snapshot`` makes it from what any controller node
holds: the replicated state (identical on every node once applied), this node's heartbeat table (soft
state, so a follower shows its own view of liveness) and this node's Raft facts. Field names follow
docs/architecture.md §3 (camelCase); absent values are ``null``.

The timeline of master and SyncStateSet changes ("Master & SyncStateSet changes" in the console) is
a bounded ring of ``timeline_entry`` rows kept by the shell from the records this node applied
(journal replays included, so after a restart ``ts`` is the replay time and entries compacted into a
snapshot are not shown).

``summarize_verdict`` reads the ``verdict.json`` of an ``mqha analyze`` report (``mqha.analysis.report``)
into the violations page, refusing a document of another shape with a message instead of guessing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from mqha.controller.apply import Outcome
from mqha.controller.liveness import LivenessSnapshot
from mqha.controller.records import AlterSyncStateSetRecord, CleanBrokerDataRecord, ElectMasterRecord
from mqha.controller.state import BrokerGroupState, ControllerState
from mqha.errors import MqhaError

TIMELINE_RECORDS = (ElectMasterRecord, AlterSyncStateSetRecord, CleanBrokerDataRecord)
"""Records that change a master or a SyncStateSet: the ones the console's change timeline shows."""


class WaitView(Protocol):
    """A set's wait for a complete replica (``mqha.controller.election.Waiting``)."""

    @property
    def since_ms(self) -> int: ...
    @property
    def waiting_for(self) -> tuple[int, ...]: ...
    @property
    def watermark(self) -> int: ...


@dataclass(frozen=True)
class PeerView:
    """One controller node as the serving node sees it; ``reachable`` None = this node cannot tell."""

    node_id: str
    address: str
    reachable: bool | None


@dataclass(frozen=True)
class ServingNode:
    """The serving node's Raft facts (from ``ReplicatedLog.status`` and the metadata answer)."""

    node_id: str
    address: str
    is_serving_leader: bool
    leader_id: str | None
    leader_address: str | None
    term: int | None
    commit_index: int | None
    last_applied: int | None
    healthy: bool
    peers: tuple[PeerView, ...]


def timeline_entry(outcome: Outcome, ts_ms: int) -> dict[str, Any] | None:
    """The timeline row of an applied entry, or None for records that are not about elections."""
    record = outcome.record
    if not isinstance(record, TIMELINE_RECORDS):
        return None
    group = outcome.group
    return {
        "raftIndex": outcome.raft_index,
        "ts": ts_ms,
        "type": record.TYPE,
        "brokerName": outcome.broker_name,
        "accepted": outcome.accepted,
        "codeName": outcome.code.name,
        "remark": outcome.remark,
        "unclean": bool(getattr(record, "unclean", False)),
        "ackedDataLost": _lost_json(record) if outcome.accepted else None,
        "masterBrokerId": None if group is None else group.master_broker_id,
        "masterEpoch": None if group is None else group.master_epoch,
        "syncStateSet": None if group is None else sorted(group.sync_state_set),
        "syncStateSetEpoch": None if group is None else group.sync_state_set_epoch,
    }


def _lost_json(record: object) -> dict[str, int] | None:
    lost = getattr(record, "acked_data_lost", None)
    return None if lost is None else {"fromOffset": lost.from_offset, "toOffset": lost.to_offset}


def _known(value: int | None) -> int | None:
    """Heartbeat numbers default to -1 (docs/reference-behaviour.md §7.1): show those as unknown."""
    return value if value is not None and value >= 0 else None


def _replicas(group: BrokerGroupState, liveness: LivenessSnapshot) -> list[dict[str, Any]]:
    name, master = group.broker_name, group.master_broker_id
    master_info = liveness.info(name, master) if master is not None else None
    master_offset = _known(master_info.max_offset if master_info is not None else None)
    master_epoch = _known(master_info.epoch if master_info is not None else None)
    rows = []
    for broker_id, replica in sorted(group.replicas.items()):
        info = liveness.info(name, broker_id)
        max_offset = _known(info.max_offset if info is not None else None)
        epoch = _known(info.epoch if info is not None else None)
        # Signed: a replica can run past the master (an unconfirmed tail it truncates when it connects
        # to the new master); clamping that to 0 showed a slave above its master "with no lag". The
        # console shows a negative lag as "ahead". But a SyncStateSet member in the master's epoch holds
        # a prefix of the master's log: past the master's report, its own report is only the newer one
        # (heartbeats of different moments, under load): lag 0, and by how much it passes.
        lag = newer_report = None
        if master_offset is not None and max_offset is not None and broker_id != master:
            lag = master_offset - max_offset
            if lag < 0 and broker_id in group.sync_state_set and epoch is not None and epoch == master_epoch:
                lag, newer_report = 0, -lag
        rows.append(
            {
                "brokerId": broker_id,
                "brokerAddress": replica.address,
                "haAddress": replica.ha_address,
                "isMaster": broker_id == master,
                "inSync": broker_id in group.sync_state_set,
                "alive": liveness.is_alive(name, broker_id),
                "epoch": epoch,
                "maxOffset": max_offset,
                "confirmOffset": _known(info.confirm_offset if info is not None else None),
                "lag": lag,
                "newerReportBytes": newer_report,
                # Election state and the start report (docs/architecture.md §3.2).
                "eligibleCredit": group.eligible_replicas.get(broker_id),
                "incarnation": None if info is None else info.incarnation,
                "cleanShutdown": None if info is None else info.clean_shutdown,
                "lossyRecovery": None if info is None else info.lossy_recovery,
                "confirmOffsetBeforeRecovery": (
                    None if info is None else _known(info.confirm_offset_before_recovery)
                ),
                "reportedMsAgo": None if info is None else max(0, liveness.now_ms - info.last_seen_ms),
            }
        )
    return rows


def group_view(
    group: BrokerGroupState, liveness: LivenessSnapshot, waiting: WaitView | None = None
) -> dict[str, Any]:
    """One broker set: master, epochs, SyncStateSet, ELR, acknowledged watermark, whether its election waits
    (and for whom), and per replica liveness, offsets, lag and start report."""
    return {
        "clusterName": group.cluster_name,
        "brokerName": group.broker_name,
        "masterBrokerId": group.master_broker_id,
        "masterAddress": group.master_address,
        "masterEpoch": group.master_epoch,
        "syncStateSet": sorted(group.sync_state_set),
        "syncStateSetEpoch": group.sync_state_set_epoch,
        "eligibleReplicas": sorted(group.eligible_replicas),
        "ackedWatermark": _known(group.acked_watermark),
        "electionWaiting": None
        if waiting is None
        else {
            "sinceMs": waiting.since_ms,
            "waitingFor": list(waiting.waiting_for),
            "watermark": waiting.watermark,
        },
        "replicas": _replicas(group, liveness),
    }


def _node_json(node: ServingNode) -> dict[str, Any]:
    return {
        "nodeId": node.node_id,
        "address": node.address,
        "isLeader": node.is_serving_leader,
        "leaderId": node.leader_id,
        "leaderAddress": node.leader_address,
        "term": node.term,
        "commitIndex": node.commit_index,
        "lastApplied": node.last_applied,
        "healthy": node.healthy,
    }


def _controllers(node: ServingNode) -> list[dict[str, Any]]:
    return [
        {
            "nodeId": peer.node_id,
            "address": peer.address,
            "isSelf": peer.node_id == node.node_id,
            "isLeader": peer.node_id == node.leader_id,
            "reachable": node.healthy if peer.node_id == node.node_id else peer.reachable,
        }
        for peer in node.peers
    ]


def build_snapshot(
    state: ControllerState,
    liveness: LivenessSnapshot,
    node: ServingNode,
    timeline: Sequence[Mapping[str, Any]],
    waiting: Mapping[str, WaitView] | None = None,
) -> dict[str, Any]:
    """The console's whole document; equal inputs give equal output (the shell pushes on change).
    ``waiting``: the sets whose election waits for a complete replica (the serving leader's soft state)."""
    waits = waiting or {}
    clusters: dict[str, list[str]] = {}
    for name, group in sorted(state.groups.items()):
        clusters.setdefault(group.cluster_name, []).append(name)
    return {
        "node": _node_json(node),
        "controllers": _controllers(node),
        "appliedIndex": state.applied_index,
        "clusters": clusters,
        "groups": [
            group_view(group, liveness, waits.get(name)) for name, group in sorted(state.groups.items())
        ],
        "timeline": [dict(row) for row in timeline],
    }


def sse_message(event: str, data: Mapping[str, Any]) -> bytes:
    """One server-sent event carrying a JSON document on a single ``data:`` line."""
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'), sort_keys=True)}\n\n".encode()


class VerdictFormatError(MqhaError, ValueError):
    """A ``verdict.json`` that is not the shape ``mqha.analysis.report`` writes."""


def summarize_verdict(doc: Any) -> dict[str, Any]:
    """The violations page of a report's ``verdict.json``: verdict, failed checks first, evidence rows."""
    shaped = isinstance(doc, dict) and isinstance(doc.get("ok"), bool)
    if not shaped or not isinstance(doc.get("checks"), dict):
        raise VerdictFormatError("not an mqha analyze verdict (expected 'ok' and 'checks')")
    checks = []
    for name, check in doc["checks"].items():
        if not isinstance(check, dict) or not isinstance(check.get("count"), int):
            raise VerdictFormatError(f"check {name!r} has no integer 'count'")
        rows = check.get("rows") or []
        if not isinstance(rows, list):
            raise VerdictFormatError(f"check {name!r}: 'rows' is not a list")
        checks.append(
            {
                "name": str(name),
                "failure": bool(check.get("failure", True)),
                "description": str(check.get("description", "")),
                "count": check["count"],
                "rows": rows,
            }
        )
    checks.sort(key=lambda c: (not (c["failure"] and c["count"]), c["name"]))
    status = doc.get("status")
    if status not in ("ok", "violated", "inconclusive"):  # a report of before the status existed
        status = "ok" if doc["ok"] else "violated"
    reasons = doc.get("reasons") if isinstance(doc.get("reasons"), list) else []
    coverage = doc.get("coverage") if isinstance(doc.get("coverage"), dict) else None
    return {
        "ok": doc["ok"],
        "status": status,
        "reasons": [str(r) for r in reasons],
        "coverage": coverage,
        "failed": [str(name) for name in doc.get("failed") or []],
        "source": str(doc.get("source", "")),
        "engine": str(doc.get("engine", "")),
        "tables": doc.get("tables") if isinstance(doc.get("tables"), dict) else {},
        "checks": checks,
    }
