"""The broker side of the ReplicasManager contract (``mqha.replicas_manager.hooks.BrokerHooks``). SHELL.

:class:`BrokerRuntime` carries out what the ReplicasManager decided, on the broker's event loop:

* ``change_to_master`` / ``change_to_slave`` → the HA service's §10.2 / §10.3 steps (which refuse an
  epoch below the epoch file's last one; the refusal is returned, and the ReplicasManager keeps its
  old role, docs/architecture.md §7); role changes are serialised by one lock;
* ``apply_sync_state_set`` → the HA service, only for a SyncStateSet epoch not older than the last;
* ``maybe_shrink_sync_state_set`` → the HA service's periodic shrink check;
* ``set_fenced`` → the store (puts and reads refused) and the HA service (confirm offset rules);
* ``progress`` → what heartbeats report (docs/reference-behaviour.md §9.7).

It also keeps the role facts the status endpoints show (role broker id: 0 on the master,
docs/reference-behaviour.md §9.8).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from mqha.autoswitch_ha.service import AutoSwitchHAService, Role
from mqha.broker.store import BrokerStore
from mqha.ids import MASTER_ROLE_ID
from mqha.replicas_manager.hooks import BrokerProgress, MasterInfo

log = logging.getLogger(__name__)


class BrokerRuntime:
    """Implements ``BrokerHooks`` over the broker store and its HA service."""

    def __init__(self, config: Mapping[str, Any], store: BrokerStore, ha: AutoSwitchHAService) -> None:
        self.config = config
        self.store = store
        self.ha = ha
        self.cluster_name: str = config["brokerClusterName"]
        self.broker_name: str = config["brokerName"]
        self.address = f"{config['brokerIP1']}:{config['listenPort']}"
        self.ha_address = f"{config['brokerIP1']}:{config['haListenPort']}"
        self.broker_controller_id: int | None = None
        self.master: MasterInfo | None = None
        self.master_epoch = 0
        self.sync_state_set_epoch = 0
        self._role_lock = asyncio.Lock()

    # -- BrokerHooks -----------------------------------------------------------------------------

    def progress(self) -> BrokerProgress:
        return BrokerProgress(
            last_epoch=self.store.epochs.last_epoch(),
            max_offset=self.store.max_offset,
            confirm_offset=self.ha.confirm_offset(),
        )

    def set_broker_controller_id(self, broker_id: int) -> None:
        if self.broker_controller_id not in (None, broker_id):
            log.warning("controller broker id changes from %s to %d", self.broker_controller_id, broker_id)
        self.broker_controller_id = broker_id
        self.ha.set_local_id(broker_id)
        if self.store.history is not None:
            self.store.history.broker_id = broker_id

    async def change_to_master(
        self, epoch: int, sync_state_set_epoch: int, sync_state_set: frozenset[int]
    ) -> bool:
        async with self._role_lock:
            if not await self.ha.change_to_master(epoch, frozenset(sync_state_set)):
                return False
            assert self.broker_controller_id is not None  # the HA layer refuses without it
            self.master = MasterInfo(self.broker_controller_id, self.address, self.ha_address)
            self.master_epoch = epoch
            self.sync_state_set_epoch = max(self.sync_state_set_epoch, sync_state_set_epoch)
            self._record_role("MASTER", epoch, self.broker_controller_id)
            return True

    async def change_to_slave(self, master: MasterInfo, epoch: int) -> bool:
        async with self._role_lock:
            if master.broker_id == self.broker_controller_id:
                log.error(
                    "changeToSlave(%d) names this broker (%d) as the master: refused", epoch, master.broker_id
                )
                return False
            if not await self.ha.change_to_slave(master.ha_address, epoch, master.address):
                return False
            self.master = master
            self.master_epoch = epoch
            self._record_role("SLAVE", epoch, master.broker_id)
            return True

    def _record_role(self, role: str, epoch: int, master_broker_id: int) -> None:
        if self.store.history is not None:
            self.store.history.role(role, epoch, master_broker_id)

    def apply_sync_state_set(self, sync_state_set: frozenset[int], sync_state_set_epoch: int) -> None:
        if sync_state_set_epoch < self.sync_state_set_epoch:
            log.debug(
                "SyncStateSet epoch %d is older than %d: ignored",
                sync_state_set_epoch,
                self.sync_state_set_epoch,
            )
            return
        self.sync_state_set_epoch = sync_state_set_epoch
        self.ha.apply_sync_state_set(frozenset(sync_state_set))

    def maybe_shrink_sync_state_set(self) -> frozenset[int]:
        return self.ha.maybe_shrink()

    def set_fenced(self, fenced: bool) -> None:
        if fenced != self.store.fenced:
            log.info("broker %s", "fenced: puts and reads refused" if fenced else "unfenced: serving")
        self.store.fenced = fenced
        self.ha.fenced = fenced

    # -- facts for the status endpoints ----------------------------------------------------------

    @property
    def is_master(self) -> bool:
        return self.ha.role is Role.MASTER

    @property
    def role_broker_id(self) -> int:
        """``brokerId`` as the reference reports it: 0 on the master, else the controller id (-1 unknown)."""
        if self.is_master:
            return MASTER_ROLE_ID
        return self.broker_controller_id if self.broker_controller_id is not None else -1

    @property
    def broker_role(self) -> str:
        """RocketMQ ``brokerRole`` name."""
        return {Role.MASTER: "SYNC_MASTER", Role.SLAVE: "SLAVE"}.get(self.ha.role, "NONE")
