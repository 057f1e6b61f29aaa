"""The election's inputs gathered from the replicated state and a frozen liveness view (pure).

``election_watermark`` is ``W`` of docs/architecture.md §3.2; ``ElectionPolicy`` binds the rule to the
two config keys and builds one ``ElectionInputs`` per decision.
"""

from __future__ import annotations

from dataclasses import dataclass

from mqha.controller.election.whom import ElectionInputs, ElectionResult, elect
from mqha.controller.liveness import LivenessView
from mqha.controller.state import BrokerGroupState


def election_watermark(group: BrokerGroupState, liveness: LivenessView) -> int:
    """``W`` of docs/architecture.md §3.2 (pure): the replicated watermark, the current master's last
    confirm offset in this masterEpoch, and the confirm offsets before recovery of the broker processes
    first heard in this masterEpoch (alive or not)."""
    name = group.broker_name
    marks = [group.acked_watermark]
    reported = liveness.master_confirm(name)
    if reported is not None and reported[0] == group.master_epoch:
        marks.append(reported[1])
    # A recovery report is knowledge of what was acknowledged, whether its reporter is still alive:
    # every process of the set first heard in this masterEpoch (later ones were folded into the
    # replicated watermark by the election that moved the epoch on, or declared lost).
    for first_seen, confirmed in liveness.recovery_confirms(name):
        if first_seen == group.master_epoch:
            marks.append(confirmed)
    return max(marks)


@dataclass(frozen=True)
class ElectionPolicy:
    """Binds the election rule to ``enableElectUncleanMaster`` and ``uncleanRecoveryTimeoutMills``."""

    enable_elect_unclean_master: bool = False
    unclean_recovery_timeout_ms: int = 300_000

    def inputs(
        self,
        group: BrokerGroupState,
        liveness: LivenessView,
        prefer: int | None = None,
        waited_ms: int | None = None,
    ) -> ElectionInputs:
        """One decision's ``ElectionInputs``: the set's state and what this node's liveness view says."""
        name = group.broker_name
        rule = liveness.ack_rule(name)
        ids = {*group.replicas, *group.sync_state_set, *group.eligible_replicas}
        ids |= {b for b in (group.master_broker_id, prefer) if b is not None}
        reports = {b: info for b in ids if (info := liveness.info(name, b)) is not None}
        joined = {b: known for b in ids if (known := liveness.member_incarnation(name, b)) is not None}
        return ElectionInputs(
            sync_state_set=group.sync_state_set,
            replicas=frozenset(group.replicas),
            alive=frozenset(b for b in ids if liveness.is_alive(name, b)),
            reports=reports,
            old_master=group.master_broker_id,
            prefer=prefer,
            unclean=self.enable_elect_unclean_master,
            eligible=group.eligible_replicas,
            watermark=election_watermark(group, liveness),
            waited_ms=waited_ms,
            wait_timeout_ms=self.unclean_recovery_timeout_ms,
            joined_as=joined,
            # inSyncReplicas = 1 acknowledges on the master alone: no replica can hold more, nothing to fence.
            acks_needed=rule.in_sync_replicas
            if rule is not None and rule.by_count and rule.in_sync_replicas >= 2
            else None,
            fresh_since_ms=liveness.now_ms - (waited_ms or 0),
            # An election by count first clears the master (masterEpoch + 1): the fence its members
            # report from behind.
            fence_epoch=group.master_epoch if group.master_broker_id is None else None,
        )

    def elect(
        self,
        group: BrokerGroupState,
        liveness: LivenessView,
        prefer: int | None = None,
        waited_ms: int | None = None,
    ) -> ElectionResult:
        return elect(self.inputs(group, liveness, prefer, waited_ms))
