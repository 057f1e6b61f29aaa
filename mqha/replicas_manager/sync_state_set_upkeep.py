"""The SyncStateSet upkeep of the ReplicasPlanner (core; docs/reference-behaviour.md §9.5).

On a master only: the periodic check asks the HA layer for the set it wants, the HA layer reports
expansions and connection losses, and a set that differs from the recorded one is proposed to the
controller (AlterSyncStateSet), one proposal in flight, the newest wish next -- except a periodic
check's answer that arrived while the set changed: it predates the change, so the HA layer is asked
again rather than that answer proposed. A set takes effect only with a newer SyncStateSet epoch
(``changeSyncStateSet``).

A proposal carries (docs/architecture.md §3.2) the master's ack point (``BrokerProgress.ack_point``:
what every acknowledged put reached; none when puts do not wait for replicas), and for each member
but the master the incarnation of the HA connection the master saw catch up (the HA layer's report,
given with the check answer or the proposal; absent when the HA layer cannot tell), so the
controller admits no replica process that restarted since.

Before the master acknowledges beyond the credits of the group's eligible replicas (after it became
master, and after a shrink) the HA layer asks for their *release* (docs/architecture.md §3.2): an
alterSyncStateSet of the current set with ``releaseEligible``, whose verdict goes back to the HA layer.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from mqha.replicas_manager.actions import (
    Action,
    ApplySyncStateSet,
    CheckSyncStateSet,
    EligibleReleaseDone,
    ProposeSyncStateSet,
    ReleaseEligibleReplicas,
)
from mqha.replicas_manager.planner_states import State, _describe, _parse
from mqha.wire.controller_api import AlterSyncStateSetPayload, AlterSyncStateSetRequest, Reply

log = logging.getLogger("mqha.replicas_manager.planner")


class SyncStateSetUpkeep:
    """Keeps a master's SyncStateSet in step with the HA layer and the controller.

    Part of ``ReplicasPlanner``: check, propose, apply a newer epoch.
    """

    def _change_sync_state_set(self, sss: frozenset[int], epoch: int) -> list[Action]:
        """docs/reference-behaviour.md §9.5 changeSyncStateSet: only a newer SyncStateSet epoch takes
        effect."""
        if epoch <= self.sync_state_set_epoch:
            return []
        self.sync_state_set = frozenset(sss)
        self.sync_state_set_epoch = epoch
        return [ApplySyncStateSet(self.sync_state_set, epoch)]

    def _check_sync_state_set(self) -> list[Action]:
        if not self.is_master or self._check_in_flight:
            return []
        self._check_in_flight = True
        return [CheckSyncStateSet()]

    def on_sync_state_set_check(
        self, wanted: frozenset[int], now_ms: int, incarnations: Mapping[int, str] | None = None
    ) -> list[Action]:
        """The HA layer's set (docs/reference-behaviour.md §9.5): plus our own id; report it when it
        differs. ``incarnations``: the HA layer's live slave connections (None: it cannot tell)."""
        self._check_in_flight = False
        if not wanted:
            return []  # the HA layer is not (yet) master: it has no opinion
        return self._propose(frozenset(wanted) | {self.broker_id}, from_check=True, incarnations=incarnations)

    def on_sync_state_set_proposal(
        self, proposed: frozenset[int], now_ms: int, incarnations: Mapping[int, str] | None = None
    ) -> list[Action]:
        """``report_sync_state_set`` of the HA layer (expand or connection loss)."""
        if self.broker_id is None:
            return []
        return self._propose(frozenset(proposed) | {self.broker_id}, incarnations=incarnations)

    def _propose(
        self,
        proposed: frozenset[int],
        *,
        from_check: bool = False,
        incarnations: Mapping[int, str] | None = None,
    ) -> list[Action]:
        if incarnations is not None:
            self._slave_incarnations = dict(incarnations)
        if not self.is_master or self.state is State.SHUTDOWN:
            return []
        if proposed == self._sss_in_flight:
            return []  # the same proposal is on its way: merge
        if self._sss_in_flight is not None:
            self._sss_pending = proposed  # the newest wish goes next
            self._sss_pending_from_check = from_check
            return []
        if proposed == self.sync_state_set:
            return []
        assert self.broker_id is not None
        known = self._slave_incarnations
        members = None
        if known is not None:
            members = {b: known[b] for b in sorted(proposed - {self.broker_id}) if b in known}
        ack_point = self.progress.ack_point
        request = AlterSyncStateSetRequest(
            broker_name=self.config.broker_name,
            master_broker_id=self.broker_id,
            master_epoch=self.master_epoch,
            sync_state_set=proposed,
            sync_state_set_epoch=self.sync_state_set_epoch,
            confirm_offset=ack_point if ack_point is not None and ack_point >= 0 else None,
            member_incarnations=members,
        )
        out = self._call_once(lambda seq: ProposeSyncStateSet(seq, request))
        if out:
            self._sss_in_flight = proposed
        return out

    def on_release_eligible_request(self, master_epoch: int, now_ms: int) -> list[Action]:
        """The HA layer is about to acknowledge beyond the eligible replicas' credits as master of
        ``master_epoch``: release them first (ignored when this broker is not that master)."""
        if self.state is State.SHUTDOWN:
            return []
        if self.is_master and master_epoch == self.master_epoch:
            return self._send_release()
        return []

    def _send_release(self) -> list[Action]:
        assert self.broker_id is not None
        ack_point = self.progress.ack_point
        request = AlterSyncStateSetRequest(
            broker_name=self.config.broker_name,
            master_broker_id=self.broker_id,
            master_epoch=self.master_epoch,
            sync_state_set=self.sync_state_set,
            sync_state_set_epoch=self.sync_state_set_epoch,
            confirm_offset=ack_point if ack_point is not None and ack_point >= 0 else None,
            release_eligible=True,
        )
        return self._call_once(lambda seq: ReleaseEligibleReplicas(seq, request))

    def _on_release_eligible(self, call: ReleaseEligibleReplicas, reply: Reply | None) -> list[Action]:
        request = call.request
        payload = _parse(AlterSyncStateSetPayload, reply) if reply is not None and reply.ok else None
        if payload is None:
            log.info("releasing the eligible replicas failed: %s", _describe(reply))
            return [EligibleReleaseDone(request.master_epoch, request.sync_state_set_epoch, False)]
        out = self._change_sync_state_set(payload.sync_state_set, payload.sync_state_set_epoch)
        return [*out, EligibleReleaseDone(request.master_epoch, payload.sync_state_set_epoch, True)]

    def _on_alter_sync_state_set(self, call: ProposeSyncStateSet, reply: Reply | None) -> list[Action]:
        self._sss_in_flight = None
        out: list[Action] = []
        payload = _parse(AlterSyncStateSetPayload, reply) if reply is not None and reply.ok else None
        if payload is None:
            # Only logged: the next check or replica-info sync repairs it (docs/reference-behaviour.md §9.5).
            log.info("alterSyncStateSet %s failed: %s", sorted(call.request.sync_state_set), _describe(reply))
        else:
            out += self._change_sync_state_set(payload.sync_state_set, payload.sync_state_set_epoch)
        pending, self._sss_pending = self._sss_pending, None
        if pending is None:
            return out
        if self._sss_pending_from_check and out:
            # A check answered while the set was changing: its answer predates the change (an expansion
            # the HA layer had not seen confirmed yet), and proposing it would undo the change -- the set
            # flapped {m, s} -> {m} -> {m, s} every check period. Ask the HA layer again instead.
            return out + self._check_sync_state_set()
        return out + self._propose(pending, from_check=self._sss_pending_from_check)
