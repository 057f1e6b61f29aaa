"""The HA layer's steps of a role change (shell; docs/reference-behaviour.md §10.2, §10.3).

Both changes refuse an epoch below the epoch file's last one. The broker hooks pass ``commit``, the
one write of the new role into the broker's ``BrokerRole``; it runs at the point of the steps where
the role flips, in the same event-loop slice as the steps around it, so a put never sees half a
change.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from mqha.autoswitch_ha.client import HAClient
from mqha.autoswitch_ha.gate import AckGate
from mqha.autoswitch_ha.keeper import SyncStateSetKeeper
from mqha.autoswitch_ha.links import SlaveLinks
from mqha.autoswitch_ha.replica import ReplicaStore
from mqha.role import BrokerRole, Role

log = logging.getLogger(__name__)


class HARoleSwitch:
    """Carries out the HA layer's part of becoming master or slave."""

    def __init__(
        self,
        store: ReplicaStore,
        role: BrokerRole,
        client: HAClient,
        *,
        links: SlaveLinks,
        keeper: SyncStateSetKeeper,
        gate: AckGate,
    ) -> None:
        self._store = store
        self._role = role
        self._client = client
        self._links = links
        self._keeper = keeper
        self._gate = gate

    def _refuses(self, what: str, epoch: int) -> bool:
        last = self._store.epochs.last_epoch()
        if epoch < last:
            log.warning("%s(%d) refused: the epoch file already holds epoch %d", what, epoch, last)
            return True
        return False

    async def change_to_master(
        self, epoch: int, sync_state_set: frozenset[int], commit: Callable[[], None]
    ) -> bool:
        """§10.2: refuse a stale epoch; stop following; record ``<epoch, maxOffset>``; serve."""
        if self._refuses("changeToMaster", epoch):
            return False
        local_id = self._role.broker_id
        if local_id is None:
            log.error("changeToMaster(%d) refused: this broker has no controller id yet", epoch)
            return False
        store = self._store
        was_master = self._role.role is Role.MASTER
        if not was_master:
            await self._client.stop()
            self._links.close_all("this broker becomes master")
        epochs = store.epochs
        # Master of this very epoch already (a restart the controller did not notice): the entry keeps its
        # start. Re-starting it at the log end would leave what this broker wrote in the epoch outside
        # every epoch entry, and its slaves would find no common point.
        if epochs.last_epoch() != epoch:
            if epochs.last_epoch() > epoch:
                truncated = epochs.truncate_suffix_by_epoch(epoch)
                if truncated.pairs() != epochs.pairs():
                    store.apply_truncation(store.max_offset, truncated)
            store.append_epoch(epoch, store.max_offset)
        self._keeper.start_master(local_id, sync_state_set, was_master=was_master)
        commit()
        self._gate.recompute_confirm_offset()
        log.info(
            "now MASTER for epoch %d at offset %d (SyncStateSet %s)",
            epoch,
            store.max_offset,
            sorted(sync_state_set),
        )
        self._gate.log_changed()
        self._gate.check_waiters()
        return True

    def stop_following(self, epoch: int) -> None:
        """The set's master was cleared at ``epoch``: a slave drops its link and follows nobody until a
        new master is named, so no older master counts it towards an acknowledgement any more (the fence
        of an election by count, docs/architecture.md §3.2). A master goes on: its slaves fence it."""
        if self._role.role is Role.SLAVE and epoch > self._client.master_epoch:
            log.info("master cleared at epoch %d: replicating from no older master", epoch)
            self._client.set_master_address(None, epoch)

    def change_to_slave(self, epoch: int, master_ha_address: str | None, commit: Callable[[], None]) -> bool:
        """§10.3: refuse a stale epoch; stop mastering; follow ``master_ha_address``."""
        if self._refuses("changeToSlave", epoch):
            return False
        was_slave = self._role.role is Role.SLAVE
        commit()
        if not was_slave:
            self._gate.release.disarm()
            self._gate.fail_waiters()
            self._links.close_all("this broker becomes a slave")
            self._keeper.stop_master()
        self._client.set_master_address(master_ha_address, epoch)
        self._client.start()
        log.info(
            "now SLAVE for epoch %d, following %s (HA %s)",
            epoch,
            self._role.master_address,
            master_ha_address,
        )
        return True
