"""What a controller node shows about itself (shell): metadata, status, gauges and the web console's data.

Any node answers these. ``console_snapshot`` builds the console's document from this node's applied
state, heartbeat table and Raft status (a follower shows its own replicated view and says it is not the
leader); the node's ``ConsoleFeed`` keeps the election timeline from applied records and wakes the event
streams on applied records, leadership changes and closed sessions.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mqha.codes import ResponseCode
from mqha.controller.console_view import PeerView, ServingNode, build_snapshot, summarize_verdict
from mqha.controller.metrics import GroupGauge, NodeView
from mqha.controller.parts import NodePart
from mqha.controller.raft import ReplicationError
from mqha.controller.state import encode_state
from mqha.history.schema import VERDICT_FILE
from mqha.wire.controller_api import ControllerMetadataPayload, Reply

Code = ResponseCode


def peers_text(peers: Sequence[tuple[str, str]]) -> str:
    """docs/reference-behaviour.md §5.8: ``id:address;`` repeated."""
    return "".join(f"{node_id}:{address};" for node_id, address in peers)


class StatusViews(NodePart):
    """Builds this node's views of itself: metadata, debug status, metric gauges, console documents."""

    def metadata(self) -> Reply:
        """docs/reference-behaviour.md §5.8, any node."""
        node_id, address = self.leader()
        payload = ControllerMetadataPayload(
            group=self.config["controllerDLegerGroup"],
            leader_id=node_id,
            leader_address=address,
            is_leader=self.log.is_serving_leader(),
            peers=peers_text([(v.node_id, v.address) for v in self._voters()]),
            self_id=self.node_id,
            self_address=self.self_peer.api_address,
        )
        return Reply(Code.SUCCESS, "", payload)

    # ----------------------------------------------------------------------------- introspection

    def node_view(self) -> NodeView:
        raft: dict[str, Any] = {}
        with contextlib.suppress(ReplicationError):
            raft = self.log.status()
        state = self.applier.state
        now = self.clock.now_ms()
        waiting = self.waits.waiting() if self.log.is_serving_leader() else {}
        return NodeView(
            is_leader=self.log.is_serving_leader(),
            raft_term=raft.get("term") or 0,
            commit_index=raft.get("commit_index") or 0,
            last_applied=raft.get("last_applied") or 0,
            live_brokers=sum(1 for info in self.heartbeats.entries() if info.is_alive(now)),
            sessions=len(self.sessions),
            voter=not self.log.is_observer,
            voters=len(self.log.voter_ids()),
            damaged=raft.get("damage") is not None,
            groups=[
                GroupGauge(
                    name,
                    len(group.sync_state_set),
                    group.master_epoch,
                    group.master_broker_id is not None,
                    election_waiting=name in waiting,
                )
                for name, group in sorted(state.groups.items())
            ],
        )

    def node_status(self) -> Reply:
        """Debug view of this node (any node): Raft status, the applied state, the heartbeat table."""
        raft: dict[str, Any] = {}
        with contextlib.suppress(ReplicationError):
            raft = self.log.status()
        now = self.clock.now_ms()
        payload = {
            "nodeId": self.node_id,
            "isLeader": self.log.is_serving_leader(),
            "raft": raft,
            "state": json.loads(encode_state(self.applier.state)),
            "heartbeats": [
                {
                    "brokerName": info.broker_name,
                    "brokerId": info.broker_id,
                    "brokerAddr": info.broker_addr,
                    "alive": info.is_alive(now),
                    "epoch": info.epoch,
                    "maxOffset": info.max_offset,
                    "confirmOffset": info.confirm_offset,
                    "session": info.session is not None,
                    "incarnation": info.incarnation,
                    "cleanShutdown": info.clean_shutdown,
                    "lossyRecovery": info.lossy_recovery,
                    "confirmOffsetBeforeRecovery": info.confirm_offset_before_recovery,
                }
                for info in self.heartbeats.entries()
            ],
            "sessions": len(self.sessions),
        }
        return Reply(Code.SUCCESS, "", payload)

    # ----------------------------------------------------------------------------- web console

    def _serving_node(self) -> ServingNode:
        raft: dict[str, Any] = {}
        with contextlib.suppress(ReplicationError):
            raft = self.log.status()
        leader_id, leader_address = self.leader()
        return ServingNode(
            node_id=self.node_id,
            address=self.self_peer.api_address,
            is_serving_leader=self.log.is_serving_leader(),
            leader_id=leader_id,
            leader_address=leader_address,
            term=raft.get("term"),
            commit_index=raft.get("commit_index"),
            last_applied=raft.get("last_applied"),
            healthy=self.log.healthy(),
            peers=self._voters(raft),
        )

    def _voters(self, raft: Mapping[str, Any] | None = None) -> tuple[PeerView, ...]:
        """The voter set as controller nodes (docs/raft.md §10): a voter named in
        ``controllerDLegerPeers`` by its id there, one added online by its API address; before the
        Raft member runs, the configured peers."""
        partners = (raft or {}).get("partners") or {}
        if not self.parts.started:
            return tuple(PeerView(p.node_id, p.api_address, None) for p in self.peers)
        views = [
            PeerView(*self.parts.named(raft_id), partners.get(raft_id, {}).get("connected"))
            for raft_id in self.log.voter_ids()
        ]
        order = {p.node_id: i for i, p in enumerate(self.peers)}  # the configured order first
        return tuple(sorted(views, key=lambda v: (order.get(v.node_id, len(order)), v.address)))

    def console_snapshot(self) -> dict[str, Any]:
        """The console's document (any node): replicated state, this node's liveness and Raft view."""
        view = self.heartbeats.view(self.clock.now_ms())
        waiting = self.waits.waiting() if self.log.is_serving_leader() else {}
        return build_snapshot(
            self.applier.state, view, self._serving_node(), self.console.timeline(), waiting
        )

    def console_analysis(self) -> Reply:
        """The violations page (any node): the verdict of the ``consoleAnalysisReportDir`` report."""
        report_dir = self.config["consoleAnalysisReportDir"]
        payload: dict[str, Any] = {"configured": bool(report_dir), "reportDir": report_dir or None}
        payload["report"] = payload["error"] = None
        if report_dir:
            path = Path(report_dir) / VERDICT_FILE
            try:
                payload["report"] = summarize_verdict(json.loads(path.read_text(encoding="utf-8")))
            except FileNotFoundError:
                payload["error"] = f"no {VERDICT_FILE} in {report_dir} (run mqha analyze --report-dir there)"
            except (OSError, ValueError) as exc:  # unreadable, not JSON, or not a verdict
                payload["error"] = f"cannot use {path}: {exc}"
        return Reply(Code.SUCCESS, "", payload)
