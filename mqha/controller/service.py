"""The controller service of one node (shell): one object composed of the node's jobs.

Theory of operation (docs/architecture.md §3, docs/reference-behaviour.md §3, §7; docs/architecture.md §11
rule 6). Every API method returns a ``Reply`` (``http_api`` turns it into HTTP). The jobs, one class each:

==================  ====================  ============================================================
module              class                 job
==================  ====================  ============================================================
``parts``           ``NodeParts``         what the jobs share: config, clock, peers, applier, heartbeat
                                          table, sessions, the Raft log (``mqha.controller.raft``)
``write_path``      ``WritePath``         leader-only reads and writes: leadership checks, one write
                                          per broker set at a time, proposals, Raft failures
``liveness_watch``  ``LivenessWatch``     heartbeats, closed sessions, expiry and inactive-master
                                          scans, controller-triggered elections with retries
``role_changes``    ``RoleChangeFanout``  ``roleChanged`` pushes after a successful election
``config_store``    ``ConfigStore``       the live config: checks, typed updates, persistence
``auth``            ``ControllerAuth``    who a request is (signature, admin token) and what it may call
``status_views``    ``StatusViews``       metadata, debug status, metric gauges, console documents
``membership``      ``Membership``        the store identity, the voter set: quorum view, add/remove
==================  ====================  ============================================================

``ControllerService`` wires them through their constructors and exposes the methods ``http_api``,
``sessions`` and ``__main__`` call, under the names they always had.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mqha.clock import Clock, MonotonicClock
from mqha.controller.auth import ControllerAuth
from mqha.controller.clock_guard import ClockGuard
from mqha.controller.config_store import ConfigStore
from mqha.controller.guard_metrics import GuardCollector
from mqha.controller.liveness_watch import LivenessWatch
from mqha.controller.membership import Membership
from mqha.controller.metrics import ControllerMetrics
from mqha.controller.parts import NodeParts
from mqha.controller.role_changes import RoleChangeFanout
from mqha.controller.status_views import StatusViews
from mqha.controller.write_path import WritePath
from mqha.security.http_limits import ConnectionStats


class ControllerService:
    """Composes one controller node from its jobs, and exposes their API under one name.

    Build it, ``await start()``, serve ``http_api``, ``await stop()``.
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        clock: Clock | None = None,
        on_restart_wanted: Callable[[], None] | None = None,
    ) -> None:
        """``on_restart_wanted``: called when this node must restart to take a new role (an observer
        that was added to the voter set); without it the node logs and stays as it is."""
        self.config_store = ConfigStore(config)
        self.parts = parts = NodeParts(self.config_store, clock or MonotonicClock(), session_owner=self)
        self.views = StatusViews(parts)
        self.metrics = ControllerMetrics(self.views.node_view)
        self.role_changes = RoleChangeFanout(parts)
        self.writes = WritePath(parts, self.metrics, self.role_changes.notify_role_change)
        self.liveness = LivenessWatch(parts, self.writes.elect_master)
        self.auth = ControllerAuth(self.config_store, parts.self_peer.api_address, parts.clock)
        self.clock_guard = ClockGuard(parts, self.auth)
        self.connections = ConnectionStats()  # the API site's (mqha.security.http_limits)
        self.metrics.registry.register(
            GuardCollector(self.auth, self.clock_guard, self.connections, parts.console)
        )
        self.membership = Membership(parts, on_restart_wanted or (lambda: None))

        self.node_id = parts.node_id
        self.self_peer = parts.self_peer
        self.sessions = parts.sessions
        self.console = parts.console
        # The API, by job (http_api.py; record_heartbeat .. session_ping_seconds are the SessionOwner).
        self.get_next_broker_id = self.writes.get_next_broker_id
        self.get_replica_info = self.writes.get_replica_info
        self.get_sync_state_data = self.writes.get_sync_state_data
        self.list_groups = self.writes.list_groups
        self.apply_broker_id = self.writes.apply_broker_id
        self.register_broker = self.writes.register_broker
        self.alter_sync_state_set = self.writes.alter_sync_state_set
        self.clean_broker_data = self.writes.clean_broker_data
        self.elect_master = self.writes.elect_master
        self.update_topic = self.writes.update_topic
        self.delete_topic = self.writes.delete_topic
        self.topic_list = self.writes.topic_list
        self.topic_route = self.writes.topic_route
        self.update_consumer_offset = self.writes.update_consumer_offset
        self.query_consumer_offset = self.writes.query_consumer_offset
        self.record_heartbeat = self.liveness.record_heartbeat
        self.on_session_closed = self.liveness.on_session_closed
        self.max_message_bytes = self.config_store.max_message_bytes
        self.session_ping_seconds = self.config_store.session_ping_seconds
        self.get_config = self.config_store.get_config
        self.update_config = self.config_store.update_config
        self.metadata = self.views.metadata
        self.node_status = self.views.node_status
        self.console_snapshot = self.views.console_snapshot
        self.console_analysis = self.views.console_analysis
        self.get_storage = self.membership.storage
        self.get_quorum = self.membership.quorum
        self.add_controller_peer = self.membership.add_peer
        self.remove_controller_peer = self.membership.remove_peer

    @property
    def started(self) -> bool:
        """True once the store's role is decided and the Raft member runs."""
        return self.parts.started

    async def start(self) -> None:
        await self.parts.start()
        self.membership.start_watch()
        self.liveness.start_scans()
        self.clock_guard.start()

    def begin_stop(self) -> None:
        """Stop deciding: no more scans or triggered elections (sessions closing is not a crash)."""
        self.liveness.begin_stop()
        self.console.close()

    async def stop(self) -> None:
        self.begin_stop()
        await self.clock_guard.stop()
        await self.membership.stop_watch()
        await self.liveness.wait_stopped()
        await self.parts.stop()

    def health_problem(self) -> str:
        """Why this node is not healthy ("" when it is): not started (the store's role decided and saved,
        the Raft member running), the member unhealthy or damaged, or no broker signature verifies (its
        clock)."""
        if not (self.parts.started and self.parts.log.healthy()):
            damage = self.damage()
            return f"raft member damaged: {damage}" if damage else "raft not running"
        if self.clock_guard.alarmed:
            return (
                f"no broker signature verified for {self.auth.signatures_stalled_ms()} ms: they fail on this "
                f"node's clock (the other controllers' differ by {self.clock_guard.peer_offsets_ms} ms)"
            )
        return ""

    def healthy(self) -> bool:
        return not self.health_problem()

    def damage(self) -> str | None:
        """Why this member's Raft state cannot be trusted (docs/raft.md §11), or None."""
        return self.parts.log.damage() if self.parts.started else None
