"""The role changes of the ReplicasPlanner (core; docs/reference-behaviour.md §9.6, docs/architecture.md §7).

A target is considered only when its master epoch is above the local one; one hook call is in flight
at a time (a newer target waits, an older one is dropped); the local role, master and epoch change
only when the hook accepts -- a refusal leaves them as they were.
"""

from __future__ import annotations

import logging

from mqha.replicas_manager.actions import (
    Action,
    BecomeMaster,
    BecomeSlave,
    RoleChange,
    RoleNotification,
    StopFollowing,
)
from mqha.replicas_manager.hooks import MasterInfo
from mqha.replicas_manager.planner_states import MasterFacts, State

log = logging.getLogger("mqha.replicas_manager.planner")


class RoleFlow:
    """Turns news of the master into one role change at a time (part of ``ReplicasPlanner``).

    It applies the epoch rule, keeps one hook call in flight and lets the newest target wait.
    """

    def on_role_notification(self, note: RoleNotification, now_ms: int) -> list[Action]:
        """docs/reference-behaviour.md §9.6 changeBrokerRole: a master named and a newer master epoch."""
        if self.state is State.SHUTDOWN or note.broker_name not in (None, self.config.broker_name):
            return []
        if note.master_epoch is None:
            return []
        if note.master_broker_id is None:
            return self._on_master_cleared(note.master_epoch, now_ms)
        out = self._on_master_info(note)
        return out + self._drive_start(now_ms)

    def _on_master_cleared(self, epoch: int, now_ms: int) -> list[Action]:
        """The controllers cleared the set's master at ``epoch`` (an election by count fences first): a
        slave replicates from no older master from now on and reports at once that it stopped, with its
        final offsets (docs/architecture.md §3.2)."""
        if self.broker_id is None or epoch <= max(self.master_epoch, self.fenced_epoch):
            return []
        self.fenced_epoch = epoch
        self._heartbeat_soon(now_ms)
        return [] if self.is_master else [StopFollowing(epoch)]

    def _on_master_info(self, facts: MasterFacts) -> list[Action]:
        master_id, address, epoch = facts.master_broker_id, facts.master_address, facts.master_epoch
        if master_id is None or not address or epoch is None:
            return []
        target: RoleChange
        if master_id == self.broker_id:
            target = BecomeMaster(
                epoch, facts.sync_state_set_epoch or 0, frozenset(facts.sync_state_set or ())
            )
        else:
            target = BecomeSlave(MasterInfo(master_id, address, facts.master_ha_address), epoch)
        return self._request_role(target)

    def _request_role(self, target: RoleChange) -> list[Action]:
        """Epoch rule of docs/reference-behaviour.md §9.6; at most one role change in flight, the newest one
        waits."""
        if self.broker_id is None or target.epoch <= self.master_epoch:
            return []
        in_flight = self._role_in_flight
        if in_flight is not None:
            if target.epoch > in_flight.epoch and (
                self._role_pending is None or target.epoch > self._role_pending.epoch
            ):
                self._role_pending = target
            return []
        self._role_in_flight = target
        return [target]

    def on_role_change_result(self, action: RoleChange, accepted: bool, now_ms: int) -> list[Action]:
        if action != self._role_in_flight:
            return []
        self._role_in_flight = None
        out: list[Action] = []
        if self.state is State.SHUTDOWN:
            return out
        if not accepted:
            log.warning("the broker refused %r; role and masterEpoch %d unchanged", action, self.master_epoch)
        elif action.epoch > self.master_epoch:
            self.master_epoch = action.epoch
            match action:
                case BecomeMaster():
                    self.master_broker_id = self.broker_id
                    self.master_address = self.config.broker_address
                    self.master_ha_address = self.config.ha_address
                    # The hook received the set itself: record it without an ApplySyncStateSet.
                    if action.sync_state_set_epoch > self.sync_state_set_epoch:
                        self.sync_state_set = action.sync_state_set
                        self.sync_state_set_epoch = action.sync_state_set_epoch
                    self._sss_check_due = now_ms + self.config.check_sync_state_set_period_ms
                    # "run the SSS check once" (docs/reference-behaviour.md §9.6)
                    out += self._check_sync_state_set()
                case BecomeSlave():
                    self.master_broker_id = action.master.broker_id
                    self.master_address = action.master.address
                    self.master_ha_address = action.master.ha_address
                    # SSS maintenance stops on a slave (docs/reference-behaviour.md §9.5)
                    self._sss_check_due = None
                    self._sss_pending = None
            log.info(
                "role %s at masterEpoch %d (master %s)", self.role, self.master_epoch, self.master_address
            )
        pending, self._role_pending = self._role_pending, None
        if pending is not None:
            out += self._request_role(pending)
        return out + self._drive_start(now_ms)
