"""``AutoSwitchHAService``: the broker's replication layer (docs/reference-behaviour.md §10, §14, §15). SHELL.

It owns, per role:

* master — the :class:`~mqha.autoswitch_ha.server.HAServer` links (one per slave), the
  :class:`~mqha.autoswitch_ha.sync_state_set.InSyncState` value, the stored confirm offset it maintains,
  and the puts waiting for replica acks;
* slave — the :class:`~mqha.autoswitch_ha.client.HAClient` following the master's HA address.

Every decision is a core call: ``InSyncState.maybe_expand / maybe_shrink / on_connection_lost /
with_caught_up / with_confirmed_set`` (SyncStateSet), ``ack.compute_confirm_offset`` and
``ack.master_confirm_offset`` (confirm offset), ``ack.check_in_sync_replicas`` and
``ack.replica_ack_status`` (puts). This module feeds them the events of the connections, in the order
the ``master.py`` docstring lists, and carries out what they return:

    SlaveAck(id, o)   → record the ack; if id ∈ local set: stored confirm = compute_confirm_offset;
                        maybe_expand → report the proposal; wake the waiting puts; push the new
                        confirm offset to every link
    CaughtUp(id, t)   → with_caught_up
    link closed       → forget its ack; on_connection_lost → report the proposal; re-check waiters
    confirmed set     → with_confirmed_set; recompute the stored confirm offset; re-check waiters

Proposals go to the ``SyncStateSetReporter`` (the ReplicasManager), which asks the controller;
identical proposals are not re-sent more than once a second.

Role changes (``change_to_master`` §10.2, ``change_to_slave`` §10.3) refuse an epoch below the epoch
file's last one. Everything runs on one event loop, so a role change never interleaves with an append.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from mqha.autoswitch_ha.ack import (
    AckPolicy,
    AckStatus,
    check_in_sync_replicas,
    compute_confirm_offset,
    master_confirm_offset,
    replica_ack_status,
)
from mqha.autoswitch_ha.client import HAClient
from mqha.autoswitch_ha.events import CaughtUp, ConnectionClosed, HandshakeRequest, SlaveAck
from mqha.autoswitch_ha.master import LogView, MasterConfig
from mqha.autoswitch_ha.server import HAServer, MasterLink, cancel_and_wait
from mqha.autoswitch_ha.slave import SlaveConfig
from mqha.autoswitch_ha.sync_state_set import InSyncState
from mqha.clock import MonotonicClock
from mqha.epoch.history import EpochHistory

log = logging.getLogger(__name__)

CHECKPOINT_INTERVAL_S = 0.2
REPORT_REPEAT_MS = 1000


class Role(Enum):
    NONE = "NONE"  # not told yet (fresh start, or the ReplicasManager has not decided)
    MASTER = "MASTER"
    SLAVE = "SLAVE"


class ReplicaStore(Protocol):
    """The broker store as the HA layer uses it (``mqha.broker.store.BrokerStore``)."""

    @property
    def min_offset(self) -> int: ...

    @property
    def max_offset(self) -> int: ...

    @property
    def epochs(self) -> EpochHistory: ...

    @property
    def stored_confirm_offset(self) -> int: ...

    def set_stored_confirm_offset(self, value: int) -> None: ...

    def persist_confirm_offset(self) -> None: ...

    def read_batches(self, offset: int, batch_bytes: int, max_bytes: int) -> list[bytes | memoryview]: ...

    def apply_truncation(self, offset: int, epochs: EpochHistory) -> None: ...

    def append_epoch(self, epoch: int, start_offset: int) -> EpochHistory: ...

    async def append_replicated(self, offset: int, parts: Sequence[bytes | memoryview]) -> int: ...


class Reporter(Protocol):
    def report_sync_state_set(self, proposed: frozenset[int]) -> None: ...


@dataclass(frozen=True)
class HAConfig:
    """docs/reference-behaviour.md §16.3 keys of the HA layer, plus the listen address."""

    listen_host: str = "0.0.0.0"
    listen_port: int = 10912
    heartbeat_interval_ms: int = 5000
    housekeeping_interval_ms: int = 20000
    transfer_batch_size: int = 32768
    max_time_slave_not_catchup_ms: int = 15000
    flow_control: bool = False
    max_transfer_bytes_per_s: int = 100 * 1024 * 1024
    mapped_file_size: int = 1024 * 1024 * 1024
    slave_timeout_ms: int = 3000
    all_ack_in_sync_state_set: bool = False
    in_sync_replicas: int = 1
    min_in_sync_replicas: int = 1
    sync_from_last_file: bool = False
    async_learner: bool = False
    reconnect_delay_ms: int = 1000

    @classmethod
    def from_broker_config(cls, config: Mapping[str, Any]) -> HAConfig:
        return cls(
            listen_host=config.get("haListenHost", "0.0.0.0"),
            listen_port=config["haListenPort"],
            heartbeat_interval_ms=config["haSendHeartbeatInterval"],
            housekeeping_interval_ms=config["haHousekeepingInterval"],
            transfer_batch_size=config["haTransferBatchSize"],
            max_time_slave_not_catchup_ms=config["haMaxTimeSlaveNotCatchup"],
            flow_control=config["haFlowControlEnable"],
            max_transfer_bytes_per_s=config["maxHaTransferByteInSecond"],
            mapped_file_size=config["mappedFileSizeCommitLog"],
            slave_timeout_ms=config["slaveTimeout"],
            all_ack_in_sync_state_set=config["allAckInSyncStateSet"],
            in_sync_replicas=config["inSyncReplicas"],
            min_in_sync_replicas=config["minInSyncReplicas"],
            sync_from_last_file=config["syncFromLastFile"],
            async_learner=config["asyncLearner"],
        )

    @property
    def ack_policy(self) -> AckPolicy:
        return AckPolicy(
            all_ack_in_sync_state_set=self.all_ack_in_sync_state_set,
            in_sync_replicas=self.in_sync_replicas,
            min_in_sync_replicas=self.min_in_sync_replicas,
        )

    @property
    def master_config(self) -> MasterConfig:
        return MasterConfig(
            transfer_batch_size=self.transfer_batch_size,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            housekeeping_interval_ms=self.housekeeping_interval_ms,
            mapped_file_size=self.mapped_file_size,
        )

    @property
    def slave_config(self) -> SlaveConfig:
        return SlaveConfig(
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            housekeeping_interval_ms=self.housekeeping_interval_ms,
            sync_from_last_file=self.sync_from_last_file,
            async_learner=self.async_learner,
        )


def _expire(future: asyncio.Future[AckStatus]) -> None:
    if not future.done():
        future.set_result(AckStatus.FLUSH_SLAVE_TIMEOUT)


class AutoSwitchHAService:
    """The replication layer of one broker; implements ``MasterSide``, ``SlaveSide`` and the store's
    ``ReplicationGate``."""

    def __init__(
        self,
        store: ReplicaStore,
        config: HAConfig,
        *,
        clock: Callable[[], int] | None = None,
        reporter: Reporter | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.policy = config.ack_policy
        self._clock = clock or MonotonicClock().now_ms
        self.reporter = reporter
        self.role = Role.NONE
        self.fenced = False
        self.local_id: int | None = None
        self.is_known_broker: Callable[[int], bool] | None = None
        """Optional membership check for handshakes (the broker set's registered ids)."""
        self.master_ha_address: str | None = None
        self.master_client_address: str | None = None  # the master's client API address (for slaves' 503)
        self.in_sync: InSyncState | None = None
        self._links: set[MasterLink] = set()
        self._by_slave: dict[int, MasterLink] = {}
        self._waiters: list[tuple[int, int, asyncio.Future[AckStatus]]] = []
        self._seq = itertools.count()
        self._last_report: tuple[frozenset[int], int] | None = None
        self.bytes_sent = 0
        self.bytes_received = 0
        self.server = HAServer(
            self,
            config.listen_host,
            config.listen_port,
            config.master_config,
            self._clock,
            flow_limit_bytes_per_s=config.max_transfer_bytes_per_s if config.flow_control else None,
            on_bytes=self._count_bytes,
        )
        self.client = HAClient(
            self,
            config.slave_config,
            self._clock,
            reconnect_delay_ms=config.reconnect_delay_ms,
            on_bytes=self._count_bytes,
        )
        self._checkpointer: asyncio.Task[None] | None = None
        self._stopping = False

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        await self.server.start()
        self._checkpointer = asyncio.create_task(self._checkpoint_loop(), name="confirm-checkpoint")

    async def stop(self) -> None:
        # links closing now are no reason to shrink (docs/reference-behaviour.md §10.4 removeConnection)
        self._stopping = True
        self._fail_waiters()
        await self.client.stop()
        await self.server.stop()
        if self._checkpointer is not None:
            await cancel_and_wait(self._checkpointer)
            self._checkpointer = None
        self.store.persist_confirm_offset()

    async def _checkpoint_loop(self) -> None:
        while True:
            await asyncio.sleep(CHECKPOINT_INTERVAL_S)
            try:
                self.store.persist_confirm_offset()
            except Exception:
                log.exception("persisting the confirm offset failed; will retry")

    def _count_bytes(self, sent: int, received: int) -> None:
        self.bytes_sent += sent
        self.bytes_received += received

    # -- role changes (docs/reference-behaviour.md §10.2, §10.3)
    # ---------------------------------------------------------

    @property
    def is_master(self) -> bool:
        return self.role is Role.MASTER

    def master_address(self) -> str | None:
        return self.master_client_address

    def set_local_id(self, broker_id: int) -> None:
        self.local_id = broker_id

    async def change_to_master(self, epoch: int, sync_state_set: frozenset[int]) -> bool:
        """docs/reference-behaviour.md §10.2: refuse a stale epoch; stop following; record ``<epoch,
        maxOffset>``; serve."""
        last = self.store.epochs.last_epoch()
        if epoch < last:
            log.warning("changeToMaster(%d) refused: the epoch file already holds epoch %d", epoch, last)
            return False
        if self.local_id is None:
            log.error("changeToMaster(%d) refused: this broker has no controller id yet", epoch)
            return False
        was_master = self.role is Role.MASTER
        if not was_master:
            await self.client.stop()
            self._close_links("this broker becomes master")
        self.master_ha_address = None
        self.master_client_address = None
        epochs = self.store.epochs
        if epochs.last_epoch() >= epoch:
            # The epoch file may hold this epoch from a previous attempt: start it again here.
            truncated = epochs.truncate_suffix_by_epoch(epoch)
            if truncated.pairs() != epochs.pairs():
                self.store.apply_truncation(self.store.max_offset, truncated)
        self.store.append_epoch(epoch, self.store.max_offset)
        if was_master and self.in_sync is not None:
            self.in_sync = self.in_sync.with_confirmed_set(sync_state_set)
        else:
            self.in_sync = InSyncState.for_master(self.local_id, sync_state_set)
        self._last_report = None
        self.role = Role.MASTER
        self._recompute_confirm_offset()
        log.info(
            "now MASTER for epoch %d at offset %d (SyncStateSet %s)",
            epoch,
            self.store.max_offset,
            sorted(sync_state_set),
        )
        self.log_changed()
        self._check_waiters()
        return True

    async def change_to_slave(
        self, master_ha_address: str | None, epoch: int, master_client_address: str | None = None
    ) -> bool:
        """docs/reference-behaviour.md §10.3: refuse a stale epoch; stop mastering; follow
        ``master_ha_address``."""
        last = self.store.epochs.last_epoch()
        if epoch < last:
            log.warning("changeToSlave(%d) refused: the epoch file already holds epoch %d", epoch, last)
            return False
        if self.role is not Role.SLAVE:
            self.role = Role.SLAVE
            self._fail_waiters()
            self._close_links("this broker becomes a slave")
            self.in_sync = None
        self.master_client_address = master_client_address
        self.master_ha_address = master_ha_address
        self.client.set_master_address(master_ha_address)
        self.client.start()
        log.info(
            "now SLAVE for epoch %d, following %s (HA %s)", epoch, master_client_address, master_ha_address
        )
        return True

    def _close_links(self, reason: str) -> None:
        for link in list(self._links):
            link.close(reason)

    # -- SyncStateSet (docs/reference-behaviour.md §10.4)
    # -------------------------------------------------------------

    def apply_sync_state_set(self, sync_state_set: frozenset[int]) -> None:
        """A set confirmed by the controller (``setSyncStateSet``)."""
        if self.in_sync is None:
            return
        self.in_sync = self.in_sync.with_confirmed_set(sync_state_set)
        self._last_report = None
        self._recompute_confirm_offset()
        self._push_views()
        self._check_waiters()

    def maybe_shrink(self) -> frozenset[int]:
        """The master's periodic check: the set the HA layer wants now (empty when not master)."""
        if self.in_sync is None or self.role is not Role.MASTER:
            return frozenset()
        state, proposal = self.in_sync.maybe_shrink(self._clock(), self.config.max_time_slave_not_catchup_ms)
        self.in_sync = state
        if proposal is not None:
            log.info("SyncStateSet shrink proposed: %s -> %s", sorted(state.local_set), sorted(proposal))
            self._check_waiters()
            return proposal
        return state.local_set

    def _report(self, proposal: frozenset[int] | None, why: str) -> None:
        if proposal is None or self.reporter is None:
            return
        now = self._clock()
        last = self._last_report
        if last is not None and last[0] == proposal and now - last[1] < REPORT_REPEAT_MS:
            return
        self._last_report = (proposal, now)
        log.info("SyncStateSet change proposed (%s): %s", why, sorted(proposal))
        try:
            self.reporter.report_sync_state_set(proposal)
        except Exception:
            log.exception("reporting the SyncStateSet %s failed", sorted(proposal))

    def sync_state_set(self) -> frozenset[int]:
        return self.in_sync.sync_state_set if self.in_sync is not None else frozenset()

    # -- confirm offset (docs/reference-behaviour.md §14, §10.5)
    # ----------------------------------------------------------

    def slave_acks(self) -> dict[int, int]:
        """Slave id → acked offset, over live connections past the handshake."""
        return {sid: link.conn.ack_offset for sid, link in self._by_slave.items() if link.conn.is_open}

    def _computed_confirm_offset(self) -> int:
        assert self.in_sync is not None and self.local_id is not None
        return compute_confirm_offset(
            master_max_offset=self.store.max_offset,
            sync_state_set=self.in_sync.sync_state_set,
            local_id=self.local_id,
            slave_acks=self.slave_acks(),
            stored_confirm_offset=self.store.stored_confirm_offset,
        )

    def _recompute_confirm_offset(self) -> None:
        if self.in_sync is not None and self.role is Role.MASTER:
            self.store.set_stored_confirm_offset(self._computed_confirm_offset())

    def confirm_offset(self) -> int:
        """The effective confirmOffset: what readers may see and what heartbeats report."""
        if self.role is Role.MASTER and not self.fenced and self.in_sync is not None:
            stored = self.store.stored_confirm_offset
            return master_confirm_offset(
                all_ack_in_sync_state_set=self.policy.all_ack_in_sync_state_set,
                local_sync_state_set=self.in_sync.local_set,
                master_max_offset=self.store.max_offset,
                stored_confirm_offset=stored,
                # only read when nothing is stored yet; skip the walk over the links otherwise
                computed_confirm_offset=self._computed_confirm_offset() if stored < 0 else stored,
            )
        return self.store.stored_confirm_offset

    # -- the put path's gate (docs/reference-behaviour.md §15)
    # ----------------------------------------------------------

    def check_in_sync_replicas(self) -> AckStatus:
        nums = self.in_sync.in_sync_replicas_nums if self.in_sync is not None else 0
        return check_in_sync_replicas(self.policy, nums)

    def log_changed(self) -> None:
        """The master's log grew (or its epochs changed): links may stream more."""
        self._push_views()

    def _push_views(self) -> None:
        if not self._links:
            return
        view = self.log_view()
        for link in self._links:
            link.update_log(view)

    def _ack_status(self, next_offset: int) -> AckStatus:
        return replica_ack_status(
            self.policy,
            next_offset=next_offset,
            sync_state_set=self.sync_state_set(),
            slave_acks=self.slave_acks(),
        )

    async def wait_for_replicas(self, next_offset: int) -> AckStatus:
        """Wait until the policy's replicas hold everything below ``next_offset``, or ``slaveTimeout``."""
        if not self.policy.needs_replica_wait:
            return AckStatus.OK
        if self.role is not Role.MASTER:
            return AckStatus.FLUSH_SLAVE_TIMEOUT
        if self._ack_status(next_offset) is AckStatus.OK:
            return AckStatus.OK
        loop = asyncio.get_running_loop()
        future: asyncio.Future[AckStatus] = loop.create_future()
        bisect.insort(self._waiters, (next_offset, next(self._seq), future))
        # A timer on the future itself (cheaper than wait_for, which runs once per put).
        timer = loop.call_later(self.config.slave_timeout_ms / 1000, _expire, future)
        try:
            return await future
        finally:
            timer.cancel()

    def _check_waiters(self) -> None:
        """Wake the puts whose replicas caught up. Satisfaction is monotonic in the offset, so walk
        from the lowest and stop at the first that must keep waiting."""
        waiters = self._waiters
        if not waiters:
            return
        if self.role is not Role.MASTER:
            self._fail_waiters()
            return
        sss = self.sync_state_set()
        acks = self.slave_acks()
        done = 0
        for next_offset, _, future in waiters:
            if future.done():
                done += 1
                continue
            status = replica_ack_status(
                self.policy, next_offset=next_offset, sync_state_set=sss, slave_acks=acks
            )
            if status is not AckStatus.OK:
                break
            future.set_result(AckStatus.OK)
            done += 1
        del waiters[:done]

    def _fail_waiters(self) -> None:
        for _, _, future in self._waiters:
            if not future.done():
                future.set_result(AckStatus.FLUSH_SLAVE_TIMEOUT)
        self._waiters.clear()

    # -- MasterSide (server.py) ------------------------------------------------------------------

    def log_view(self) -> LogView:
        return LogView(
            min_offset=self.store.min_offset,
            max_offset=self.store.max_offset,
            confirm_offset=self.confirm_offset(),
            epochs=self.store.epochs,
        )

    def read_batches(self, offset: int, batch_bytes: int, max_bytes: int) -> list[bytes | memoryview]:
        return self.store.read_batches(offset, batch_bytes, max_bytes)

    def accept_slave(self, link: MasterLink, request: HandshakeRequest) -> str | None:
        if self.role is not Role.MASTER:
            return f"this broker is not the master (role {self.role.value})"
        if request.slave_id == self.local_id:
            return f"broker id {request.slave_id} is the master's own id"
        if self.is_known_broker is not None and not self.is_known_broker(request.slave_id):
            return f"unknown broker id {request.slave_id}: not registered in this broker set"
        old = self._by_slave.get(request.slave_id)
        if old is not None and old is not link:
            # A reconnect whose old socket is not dead yet (half-open): the newest connection wins.
            old.close(f"slave {request.slave_id} reconnected from {link.peer}")
        self._links.add(link)
        self._by_slave[request.slave_id] = link
        return None

    def on_caught_up(self, link: MasterLink, event: CaughtUp) -> None:
        if self.in_sync is not None and self._by_slave.get(event.slave_id) is link:
            self.in_sync = self.in_sync.with_caught_up(event.slave_id, event.at_ms)

    def on_slave_ack(self, link: MasterLink, event: SlaveAck) -> None:
        if self.in_sync is None or self._by_slave.get(event.slave_id) is not link:
            return
        before = self.confirm_offset()
        if event.slave_id in self.in_sync.local_set:
            self._recompute_confirm_offset()
        else:  # only a slave outside the local set can join it (the core returns None otherwise)
            last = self.store.epochs.last()
            state, proposal = self.in_sync.maybe_expand(
                event.slave_id,
                event.offset,
                confirm_offset=before,
                last_epoch_start_offset=last.start_offset if last is not None else 0,
                async_learner=event.async_learner,
            )
            self.in_sync = state
            self._report(proposal, f"slave {event.slave_id} caught up at {event.offset}")
        self._check_waiters()
        if self.confirm_offset() != before:
            self._push_views()  # slaves learn the new confirm offset (with the next frame)

    def link_closed(self, link: MasterLink, event: ConnectionClosed) -> None:
        self._links.discard(link)
        slave_id = link.slave_id
        if slave_id is None or self._by_slave.get(slave_id) is not link:
            return
        del self._by_slave[slave_id]
        if self.in_sync is not None and self.role is Role.MASTER and not self._stopping:
            state, proposal = self.in_sync.on_connection_lost(slave_id)
            self.in_sync = state
            self._report(proposal, f"connection to slave {slave_id} lost")
        self._check_waiters()

    # -- SlaveSide (client.py) -------------------------------------------------------------------

    def local_broker_id(self) -> int | None:
        return self.local_id

    def replica_snapshot(self) -> tuple[EpochHistory, int, int]:
        return self.store.epochs, self.store.max_offset, self.store.min_offset

    async def apply_truncation(self, offset: int, epochs: EpochHistory) -> None:
        self.store.apply_truncation(offset, epochs)

    def append_epoch(self, epoch: int, start_offset: int, epochs: EpochHistory) -> None:
        saved = self.store.append_epoch(epoch, start_offset)
        if saved.pairs() != epochs.pairs():
            raise RuntimeError(
                f"epoch file holds {saved.pairs()} but the connection expects {epochs.pairs()}"
            )

    async def append_data(self, offset: int, parts: Sequence[bytes | memoryview]) -> int:
        return await self.store.append_replicated(offset, parts)

    def set_confirm_offset(self, offset: int) -> None:
        self.store.set_stored_confirm_offset(offset)

    # -- status (docs/reference-behaviour.md §10.7)
    # ---------------------------------------------------------------------

    def runtime_info(self) -> dict[str, Any]:
        """HARuntimeInfo as ``GET /v1/ha/status`` returns it."""
        max_offset = self.store.max_offset
        if self.role is Role.MASTER:
            local = self.in_sync.local_set if self.in_sync is not None else frozenset()
            connections = []
            for link in sorted(self._links, key=lambda item: item.slave_id or 0):
                ack = link.conn.ack_offset
                connections.append(
                    {
                        "addr": link.peer,
                        "slaveBrokerId": link.slave_id,
                        "slaveAckOffset": ack,
                        "diff": max_offset - ack if ack >= 0 else max_offset,
                        "inSync": link.slave_id in local,
                        "transferredByteInSecond": link.sent.per_second,
                        "transferFromWhere": link.conn.transfer_from,
                        "state": link.conn.state.value,
                        "asyncLearner": link.conn.async_learner,
                    }
                )
            return {
                "master": True,
                "masterCommitLogMaxOffset": max_offset,
                "inSyncSlaveNums": max(0, len(local) - 1),
                "haConnectionInfo": connections,
                "haClientRuntimeInfo": None,
            }
        client = self.client
        conn = client.conn
        return {
            "master": False,
            "masterCommitLogMaxOffset": None,
            "inSyncSlaveNums": 0,
            "haConnectionInfo": [],
            "haClientRuntimeInfo": {
                "masterAddr": self.master_ha_address,
                "transferredByteInSecond": client.received.per_second,
                "maxOffset": max_offset,
                "lastReadTimestamp": client.last_read_wall_ms,
                "lastWriteTimestamp": client.last_write_wall_ms,
                "masterFlushOffset": conn.master_max_offset if conn is not None else -1,
                "isActivated": client.is_connected,
                "state": conn.state.value if conn is not None else None,
            },
        }

    def ack_lags(self) -> dict[int, int]:
        """Slave id → bytes the slave has not acked (metrics)."""
        top = self.store.max_offset
        return {sid: max(0, top - max(ack, 0)) for sid, ack in self.slave_acks().items()}
