"""``AutoSwitchHAService``: the broker's replication layer, assembled (docs/reference-behaviour.md §10,
§14, §15). SHELL.

Its parts, each with one job:

* :class:`~mqha.autoswitch_ha.links.SlaveLinks` — the master's live slave links and their acks;
* :class:`~mqha.autoswitch_ha.keeper.SyncStateSetKeeper` — the master's ``InSyncState`` and the
  proposals it reports to the ReplicasManager;
* :class:`~mqha.autoswitch_ha.gate.AckGate` — the put path's questions (in-sync replicas, confirm
  offset, waiting for acks);
* :class:`~mqha.autoswitch_ha.roles.HARoleSwitch` — the §10.2 / §10.3 steps of a role change;
* :class:`~mqha.autoswitch_ha.server.HAServer` (master links) and
  :class:`~mqha.autoswitch_ha.client.HAClient` (the slave's connection, which writes to the store
  itself).

* :class:`~mqha.autoswitch_ha.checkpoint.ConfirmCheckpoint` — saves the confirm offset periodically;
* :class:`~mqha.autoswitch_ha.status.HAStatus` (``status``) — ``GET /v1/ha/status`` and the metrics'
  ack lags; :class:`~mqha.autoswitch_ha.status.ByteCounter` (``traffic``) — the bytes moved.

This class builds them, starts and stops them, and routes the master links' events (and the
controller's SyncStateSet decisions) to them in the order the ``master.py`` docstring lists:

    SlaveAck(id, o)   → if id ∈ local set: stored confirm = compute_confirm_offset; else maybe_expand →
                        report the proposal; wake the waiting puts; push the new confirm offset
    CaughtUp(id, t)   → with_caught_up
    link closed       → forget its ack; on_connection_lost → report the proposal; re-check waiters

Everything runs on one event loop, so a role change never interleaves with an append.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from mqha.autoswitch_ha.checkpoint import ConfirmCheckpoint
from mqha.autoswitch_ha.client import HAClient
from mqha.autoswitch_ha.config import HAConfig
from mqha.autoswitch_ha.eligible_release import EligibleRelease, ReleaseRequester
from mqha.autoswitch_ha.events import CaughtUp, ConnectionClosed, HandshakeRequest, SlaveAck
from mqha.autoswitch_ha.gate import AckGate
from mqha.autoswitch_ha.keeper import Reporter, SyncStateSetKeeper
from mqha.autoswitch_ha.links import SlaveLinks
from mqha.autoswitch_ha.replica import ReplicaStore
from mqha.autoswitch_ha.roles import HARoleSwitch
from mqha.autoswitch_ha.server import HAServer, LinkSettings, MasterLink
from mqha.autoswitch_ha.status import ByteCounter, HAStatus
from mqha.clock import MonotonicClock
from mqha.role import BrokerRole

log = logging.getLogger(__name__)


class AutoSwitchHAService:
    """Routes the HA links' and the controller's events to the HA parts; implements ``MasterSide``."""

    def __init__(
        self,
        store: ReplicaStore,
        role: BrokerRole,
        config: HAConfig,
        *,
        reporter: Reporter | None = None,
        is_known_broker: Callable[[int], bool] | None = None,
        clock: Callable[[], int] | None = None,
        incarnation: str | None = None,
    ) -> None:
        """``incarnation``: this broker process's (``mqha.broker.start_report.new_incarnation``); the HA
        client announces it on every connection to a master (None: the reference's handshake alone,
        and a master never counts this replica's acks)."""
        self.store = store
        self.incarnation = incarnation
        self.role = role
        self.config = config
        self.clock = clock or MonotonicClock().now_ms
        self._is_known_broker = is_known_broker
        """Optional membership check for handshakes (the broker set's registered ids)."""
        self.links = SlaveLinks()
        self.keeper = SyncStateSetKeeper(self.clock, config.max_time_slave_not_catchup_ms, reporter)
        self.traffic = ByteCounter()
        self.client = HAClient(
            store,
            role,
            config.slave_config,
            self.clock,
            reconnect_delay_ms=config.reconnect_delay_ms,
            on_bytes=self.traffic.count,
            ssl=config.client_ssl,
            credentials=config.credentials,
            auth_timeout_ms=config.auth_timeout_ms,
            incarnation=incarnation,
        )
        self.gate = AckGate(
            store,
            role,
            self.keeper,
            self.links,
            policy=config.ack_policy,
            slave_timeout_ms=config.slave_timeout_ms,
            read_refusal=self.client.read_refusal,
            release=EligibleRelease(reporter if isinstance(reporter, ReleaseRequester) else None),
        )
        self.server = HAServer(
            self,
            config.listen_host,
            config.listen_port,
            LinkSettings(
                config=config.master_config,
                clock=self.clock,
                read_log=store.read_batches,
                log_view=self.gate.log_view,
                flow_limit_bytes_per_s=config.max_transfer_bytes_per_s if config.flow_control else None,
                on_bytes=self.traffic.count,
                credentials=config.credentials,
                auth_timeout_ms=config.auth_timeout_ms,
            ),
            ssl=config.server_ssl,
            max_pending=config.max_pending_connections,
        )
        self.roles = HARoleSwitch(
            store, role, self.client, links=self.links, keeper=self.keeper, gate=self.gate
        )
        self.checkpoint = ConfirmCheckpoint(store, self.gate)
        self.status = HAStatus(role, store, self.links, self.keeper, self.client, traffic=self.traffic)
        self._stopping = False

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        await self.server.start()
        self.checkpoint.start()

    async def stop(self) -> None:
        # links closing now are no reason to shrink (docs/reference-behaviour.md §10.4 removeConnection)
        self._stopping = True
        self.gate.fail_waiters()
        await self.client.stop()
        await self.server.stop()
        await self.checkpoint.stop()

    # -- SyncStateSet (docs/reference-behaviour.md §10.4) ----------------------------------------------

    def apply_sync_state_set(self, sync_state_set: frozenset[int]) -> None:
        """A set confirmed by the controller (``setSyncStateSet``). One that lost members made them
        eligible replicas: acks past their credit wait for their release (``eligible_release``)."""
        before = self.keeper.local_set()
        if not self.keeper.confirmed(sync_state_set):
            return
        if before - frozenset(sync_state_set):
            self.gate.release.arm(self.role.master_epoch, self.role.sync_state_set_epoch)
        self.gate.recompute_confirm_offset()
        self.gate.log_changed()
        self.gate.check_waiters()

    def slave_incarnations(self) -> Mapping[int, str]:
        """Slave id → the incarnation the master vouches for: a SyncStateSet member's bound one (the
        incarnation it saw catch up), else that of the slave's live HA connection (unknown ones left
        out). The ReplicasManager sends it with every proposal as ``memberIncarnations``: a member that
        came back as another process is named as the process the master saw, so the controller can
        tell it is not that one any more."""
        return {**self.links.incarnations(), **self.keeper.bound()}

    def maybe_shrink(self) -> frozenset[int]:
        """The master's periodic check: the set the HA layer wants now (empty when not master)."""
        if self.keeper.in_sync is None or not self.role.is_master:
            return frozenset()
        wanted, shrinking = self.keeper.shrink()
        if shrinking:
            self.gate.check_waiters()
        return wanted

    # -- MasterSide (server.py) ------------------------------------------------------------------

    def accept_slave(self, link: MasterLink, request: HandshakeRequest) -> str | None:
        role, slave_id = self.role, request.slave_id
        if not role.is_master:
            return f"this broker is not the master (role {role.role.value})"
        if slave_id == role.broker_id:
            return f"broker id {slave_id} is the master's own id"
        # SyncStateSet members are registered by definition; others are checked against the controller.
        known = self._is_known_broker
        if known is not None and slave_id not in self.keeper.sync_state_set() and not known(slave_id):
            return f"unknown broker id {slave_id}: not registered in this broker set"
        if request.incarnation is None:
            log.warning(
                "slave %d sent no INCARNATION frame: it may replicate, but its acks never count and it "
                "never joins the SyncStateSet (docs/architecture.md §8.5)",
                slave_id,
            )
        self.links.register(link, slave_id)
        return None

    def on_caught_up(self, link: MasterLink, event: CaughtUp) -> None:
        if self.links.is_current(link, event.slave_id):
            self.keeper.caught_up(event.slave_id, event.at_ms, event.incarnation)

    def on_slave_ack(self, link: MasterLink, event: SlaveAck) -> None:
        if self.keeper.in_sync is None or not self.links.is_current(link, event.slave_id):
            return
        gate = self.gate
        before = gate.take_slave_ack(event)
        gate.check_waiters()
        if gate.confirm_offset() != before:
            gate.log_changed()  # slaves learn the new confirm offset (with the next frame)

    def link_closed(self, link: MasterLink, event: ConnectionClosed) -> None:
        slave_id = self.links.remove(link)
        if slave_id is None:
            return
        if self.keeper.in_sync is not None and self.role.is_master and not self._stopping:
            self.keeper.connection_lost(slave_id)
        self.gate.check_waiters()
