"""The broker side of the ReplicasManager contract (``mqha.replicas_manager.hooks.BrokerHooks``). SHELL.

:class:`BrokerRuntime` carries out what the ReplicasManager decided, on the broker's event loop, and is
the one writer of the broker's :class:`~mqha.role.BrokerRole`:

* ``change_to_master`` / ``change_to_slave`` → the HA layer's §10.2 / §10.3 steps
  (``HARoleSwitch``, which refuse an epoch below the epoch file's last one; the refusal is returned,
  and the ReplicasManager keeps its old role, docs/architecture.md §7), which commit the new role at
  their flip point; role changes are serialised by one lock;
* ``apply_sync_state_set`` → the HA layer, only for a SyncStateSet epoch not older than the last;
* ``maybe_shrink_sync_state_set`` → the HA layer's periodic shrink check;
* ``set_fenced`` → the role (puts and reads refused, confirm offset rules);
* ``progress`` → what heartbeats report (docs/reference-behaviour.md §9.7).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from mqha.autoswitch_ha.service import AutoSwitchHAService
from mqha.broker.store import BrokerStore
from mqha.replicas_manager.hooks import BrokerProgress, MasterInfo
from mqha.role import BrokerRole

log = logging.getLogger(__name__)


class BrokerRuntime:
    """Implements ``BrokerHooks`` over the broker store and its HA layer; writes the ``BrokerRole``."""

    def __init__(
        self, role: BrokerRole, store: BrokerStore, ha: AutoSwitchHAService, address: str, ha_address: str
    ) -> None:
        self.role = role
        self.store = store
        self.ha = ha
        self.address = address
        self.ha_address = ha_address
        self._role_lock = asyncio.Lock()

    # -- BrokerHooks -----------------------------------------------------------------------------

    def progress(self) -> BrokerProgress:
        return BrokerProgress(
            last_epoch=self.store.epochs.last_epoch(),
            max_offset=self.store.max_offset,
            confirm_offset=self.ha.gate.confirm_offset(),
            ack_point=self.ack_point() if self.role.is_master else None,
            damaged_from=min(damaged) if (damaged := self.store.log.bad_records()) else None,
        )

    def ack_point(self) -> int | None:
        """The offset every acknowledged put reached (docs/architecture.md §3.2): with
        ``allAckInSyncStateSet`` the confirm offset (every member holds it); with ``inSyncReplicas`` = N
        the N-th highest of the master's log end and its members' counted acks (None while fewer than N
        can ack: puts are refused); None when puts do not wait for replicas."""
        gate = self.ha.gate
        policy = gate.policy
        if policy.all_ack_in_sync_state_set:
            return gate.confirm_offset()
        return gate.in_sync_point() if policy.in_sync_replicas > 1 else None

    def set_broker_controller_id(self, broker_id: int) -> None:
        role = self.role
        if role.broker_id not in (None, broker_id):
            log.warning("controller broker id changes from %s to %d", role.broker_id, broker_id)
        role.set_broker_id(broker_id)
        if self.store.history is not None:
            self.store.history.broker_id = broker_id

    async def change_to_master(
        self, epoch: int, sync_state_set_epoch: int, sync_state_set: frozenset[int]
    ) -> bool:
        role = self.role
        async with self._role_lock:
            ok = await self.ha.roles.change_to_master(
                epoch,
                frozenset(sync_state_set),
                lambda: role.to_master(epoch, sync_state_set_epoch, self.address, self.ha_address),
            )
            if ok:
                assert role.broker_id is not None
                self._record_role("MASTER", epoch, role.broker_id)
            return ok

    async def change_to_slave(self, master: MasterInfo, epoch: int) -> bool:
        role = self.role
        async with self._role_lock:
            if master.broker_id == role.broker_id:
                log.error(
                    "changeToSlave(%d) names this broker (%d) as the master: refused", epoch, master.broker_id
                )
                return False
            if not self.ha.roles.change_to_slave(
                epoch, master.ha_address, lambda: role.to_slave(master, epoch)
            ):
                return False
            self._record_role("SLAVE", epoch, master.broker_id)
            return True

    def _record_role(self, role: str, epoch: int, master_broker_id: int) -> None:
        if self.store.history is not None:
            self.store.history.role(role, epoch, master_broker_id)

    def apply_sync_state_set(self, sync_state_set: frozenset[int], sync_state_set_epoch: int) -> None:
        if not self.role.accept_sync_state_set_epoch(sync_state_set_epoch):
            log.debug(
                "SyncStateSet epoch %d is older than %d: ignored",
                sync_state_set_epoch,
                self.role.sync_state_set_epoch,
            )
            return
        self.ha.apply_sync_state_set(frozenset(sync_state_set))

    def eligible_release_done(self, master_epoch: int, sync_state_set_epoch: int, ok: bool) -> None:
        """The controller's verdict on an ELR release (``mqha.autoswitch_ha.eligible_release``)."""
        self.ha.gate.release.done(master_epoch, sync_state_set_epoch, ok)

    def maybe_shrink_sync_state_set(self) -> frozenset[int]:
        return self.ha.maybe_shrink()

    def slave_incarnations(self) -> Mapping[int, str] | None:
        """The incarnation of each live slave connection (docs/architecture.md §3.2), or None when the
        HA layer cannot tell."""
        read = getattr(self.ha, "slave_incarnations", None)
        return None if read is None else read()

    def stop_following(self, epoch: int) -> None:
        self.ha.roles.stop_following(epoch)

    def set_fenced(self, fenced: bool) -> None:
        if fenced != self.role.fenced:
            log.info("broker %s", "fenced: puts and reads refused" if fenced else "unfenced: serving")
        self.role.set_fenced(fenced)
