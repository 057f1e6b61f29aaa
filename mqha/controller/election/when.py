"""When to elect: what this node saw of a broker set -> whether the serving leader elects, as one table.

The shells (``liveness_watch``) reduce what they saw to an ``Event`` and the set to a ``SetState``;
``TRANSITIONS`` says what follows (docs/architecture.md §3.2). Like h11's state-transition table, every
(state, event) pair has one entry, and the unit tests walk every entry.
"""

from __future__ import annotations

from enum import Enum

from mqha.controller.election.after import Waiting
from mqha.controller.liveness import BrokerLiveInfo, LivenessView
from mqha.controller.state import BrokerGroupState


class SetState(Enum):
    """A broker set as this node sees it."""

    GONE = "the set is not in the replicated state"
    STEADY = "the set does not wait for a complete replica"
    WAITING = "the set's last election attempt waits for a complete replica (soft, this node)"


class Event(Enum):
    """What this node saw of one broker (or the periodic scan saw of the set)."""

    MASTER_GONE = "the master's session closed or its heartbeat expired"
    REPLICA_GONE = "another replica's session closed or its heartbeat expired"
    LOSSY_MASTER_BACK = "the master heartbeats as a new process, or back from expiry, after a lossy recovery"
    BACK = "a replica heartbeats as a new process (incarnation), or back from expiry"
    CAUGHT_UP = "a replica's maxOffset first reaches the watermark the set waits to see held"
    REPORTED = "a heartbeat of a member whose fresh report the set waits for (acknowledgements by count)"
    HEARTBEAT = "any other heartbeat"
    SCAN_MASTER_LOST = "the inactive-master scan: the master is not alive while another replica is"
    SCAN = "the inactive-master scan: the master is alive, or nobody is"


class Then(Enum):
    """What follows an event: an election with this reason, nothing, or forgetting the set's wait."""

    NOTHING = "nothing"
    ELECT_MASTER_INACTIVE = "master {broker_id} inactive: {why}"
    ELECT_LOSSY_MASTER = "master {broker_id} restarted after a lossy recovery"
    ELECT_REPLICA_BACK = "broker {broker_id} is back while the set waits for a complete replica"
    ELECT_MASTER_NOT_ALIVE = "inactive-master scan: master not alive"
    ELECT_AGAIN = "the set waits for a replica holding every acknowledged message"
    FORGET_WAIT = "forget the set's wait: the set is gone"

    @property
    def elects(self) -> bool:
        return self not in (Then.NOTHING, Then.FORGET_WAIT)

    def reason(self, broker_id: int | None = None, why: str = "") -> str:
        """The election's reason as the shells log it."""
        return self.value.format(broker_id=broker_id, why=why)


_E, _T = Event, Then
TRANSITIONS: dict[SetState, dict[Event, Then]] = {
    SetState.GONE: {
        _E.MASTER_GONE: _T.NOTHING,
        _E.REPLICA_GONE: _T.NOTHING,
        _E.LOSSY_MASTER_BACK: _T.NOTHING,
        _E.BACK: _T.NOTHING,
        _E.CAUGHT_UP: _T.NOTHING,
        _E.REPORTED: _T.NOTHING,
        _E.HEARTBEAT: _T.NOTHING,
        _E.SCAN_MASTER_LOST: _T.NOTHING,
        _E.SCAN: _T.FORGET_WAIT,  # a set cleaned while it waited
    },
    SetState.STEADY: {
        _E.MASTER_GONE: _T.ELECT_MASTER_INACTIVE,
        _E.REPLICA_GONE: _T.NOTHING,
        # A master back from a crash that lost acknowledged data must not stay master.
        _E.LOSSY_MASTER_BACK: _T.ELECT_LOSSY_MASTER,
        _E.BACK: _T.NOTHING,
        _E.CAUGHT_UP: _T.NOTHING,  # only a waiting set has a watermark to reach
        _E.REPORTED: _T.NOTHING,  # only a waiting set awaits reports
        _E.HEARTBEAT: _T.NOTHING,
        _E.SCAN_MASTER_LOST: _T.ELECT_MASTER_NOT_ALIVE,
        _E.SCAN: _T.NOTHING,
    },
    SetState.WAITING: {
        _E.MASTER_GONE: _T.ELECT_MASTER_INACTIVE,
        _E.REPLICA_GONE: _T.NOTHING,
        # Whoever comes back (a lossy master too) may be the complete replica the set waits for.
        _E.LOSSY_MASTER_BACK: _T.ELECT_REPLICA_BACK,
        _E.BACK: _T.ELECT_REPLICA_BACK,
        _E.CAUGHT_UP: _T.ELECT_REPLICA_BACK,
        _E.REPORTED: _T.ELECT_REPLICA_BACK,
        _E.HEARTBEAT: _T.NOTHING,
        _E.SCAN_MASTER_LOST: _T.ELECT_MASTER_NOT_ALIVE,
        # The wait may have timed out (uncleanRecoveryTimeoutMills).
        _E.SCAN: _T.ELECT_AGAIN,
    },
}
"""What follows each event in each state of the set (docs/architecture.md §3.2)."""


def needs_election(state: SetState, event: Event) -> Then:
    """Whether (and why) the serving leader elects the set's master after ``event``."""
    return TRANSITIONS[state][event]


def set_state(group: BrokerGroupState | None, wait: Waiting | None) -> SetState:
    if group is None:
        return SetState.GONE
    return SetState.STEADY if wait is None else SetState.WAITING


def heartbeat_event(
    before: BrokerLiveInfo | None,
    after: BrokerLiveInfo,
    now_ms: int,
    *,
    is_master: bool,
    wait: Waiting | None,
) -> Event:
    """Classify a heartbeat just recorded: ``before`` is the entry it replaced (None: there was none)."""
    was_alive = before is not None and before.is_alive(now_ms)
    new_process = after.incarnation is not None and (
        before is None or before.incarnation != after.incarnation
    )
    if new_process or not was_alive:
        return Event.LOSSY_MASTER_BACK if is_master and after.lossy else Event.BACK
    if wait is None:
        return Event.HEARTBEAT
    if after.max_offset >= wait.watermark and (before is None or before.max_offset < wait.watermark):
        return Event.CAUGHT_UP
    if after.broker_id in wait.waiting_for:
        return Event.REPORTED
    return Event.HEARTBEAT


def is_new_process(before: BrokerLiveInfo | None, after: BrokerLiveInfo) -> bool:
    """A heartbeat of a broker process (incarnation) this node had not heard from under this id."""
    return after.incarnation is not None and (before is None or before.incarnation != after.incarnation)


def gone_event(group: BrokerGroupState | None, broker_id: int) -> Event:
    """A broker's session closed or its heartbeat expired."""
    is_master = group is not None and group.master_broker_id == broker_id
    return Event.MASTER_GONE if is_master else Event.REPLICA_GONE


def scan_event(group: BrokerGroupState | None, liveness: LivenessView) -> Event:
    """docs/reference-behaviour.md §3.4: is the set's master not alive while at least one replica is?"""
    if group is None or group.master_broker_id is None:
        return Event.SCAN
    name = group.broker_name
    if liveness.is_alive(name, group.master_broker_id):
        return Event.SCAN
    if any(liveness.is_alive(name, broker_id) for broker_id in group.replicas):
        return Event.SCAN_MASTER_LOST
    return Event.SCAN


def restart_keeps_master(lossy_recovery: bool | None, clean_shutdown: bool | None) -> bool:
    """Whether a registering master may be told it is still master. A master back from a crash never
    resumes on its own say-so; its election decides and gives it a new masterEpoch (docs/architecture.md
    §3.2): it may have lost acknowledged data, or a tail its slaves hold, where it would write other
    messages under the same epoch. An older broker that does not say resumes as before."""
    return not (lossy_recovery or clean_shutdown is False)
