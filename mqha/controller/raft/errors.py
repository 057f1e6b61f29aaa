"""What the replicated log raises, and how PySyncObj's failure codes map onto it (docs/raft.md §2.3).

::

    ReplicationError (MqhaError)   anything the replicated log refuses or cannot finish
    ├── NotLeaderError             not the leader; nothing was appended; ``leader_address`` may be None
    ├── ProposalTimeout            no answer in time; the record MAY still commit later
    ├── ProposalFailed             ``reason``; ``outcome_unknown`` says whether it may still commit
    │   └── ApplyError             committed, but the applier raised on it (on this node)
    └── RaftStartError             the Raft port could not be bound, or PySyncObj internals changed
"""

from __future__ import annotations

from dataclasses import dataclass

from pysyncobj import FAIL_REASON

from mqha.codes import ResponseCode
from mqha.errors import MqhaError


@dataclass(frozen=True)
class ApplyFailure:
    """What apply returns (and the proposer receives as :class:`ApplyError`) when the applier raised."""

    raft_index: int
    error: str


class StopApplying(MqhaError):
    """An applier's answer to a committed entry after which this member's state cannot be trusted.

    The member stops applying there and takes no further part in Raft (docs/raft.md §11): skipping the
    entry, or going on, would leave this member's state silently apart from its peers'.
    """


class UnreadableEntry(StopApplying):
    """The entry is not one the applier can read: undecodable bytes, an unknown record or version."""


class DivergedState(StopApplying):
    """The digest of this member's applied state differs from the leader's at the same index."""


class ReplicationError(MqhaError):
    """Anything the replicated log refuses or cannot finish."""

    code = ResponseCode.SERVICE_NOT_AVAILABLE


class NotLeaderError(ReplicationError):
    """This node is not the Raft leader. ``leader_address`` is the known leader's Raft address, or None."""

    code = ResponseCode.CONTROLLER_NOT_LEADER

    def __init__(self, leader_address: str | None) -> None:
        super().__init__(f"not the Raft leader; leader is {leader_address or 'unknown'}")
        self.leader_address = leader_address


class ProposalTimeout(ReplicationError):
    """No outcome within the timeout. The record may still commit later (make records idempotent)."""

    def __init__(self, timeout: float) -> None:
        super().__init__(f"proposal not applied within {timeout:g} s; it may still commit")
        self.timeout = timeout


class ProposalFailed(ReplicationError):
    """PySyncObj failed the proposal; ``outcome_unknown`` says whether it may still commit."""

    def __init__(self, reason: str, *, outcome_unknown: bool) -> None:
        super().__init__(f"proposal failed: {reason}" + (" (it may still commit)" if outcome_unknown else ""))
        self.reason = reason
        self.outcome_unknown = outcome_unknown


class ApplyError(ProposalFailed):
    """The record committed, but the applier raised on it here. Later records still apply."""

    code = ResponseCode.SYSTEM_ERROR

    def __init__(self, failure: ApplyFailure) -> None:
        message = f"applier raised at index {failure.raft_index}: {failure.error}"
        super().__init__(message, outcome_unknown=False)
        self.failure = failure


class RaftStartError(ReplicationError):
    """The member could not start: the Raft port could not be bound, or PySyncObj internals changed."""


_NOT_APPLIED = {
    FAIL_REASON.QUEUE_FULL: "the local command queue is full",
    FAIL_REASON.REQUEST_DENIED: "the leader denied the request",
    # the entry was appended by a leader that lost its term and was overwritten: not committed
    FAIL_REASON.DISCARDED: "overwritten by a newer leader's entry",
}
_UNKNOWN = {
    FAIL_REASON.LEADER_CHANGED: "the leader changed before the outcome was known",
    FAIL_REASON.UNKNOWN_OUTCOME: "the outcome could not be tracked",
}


def failure_for(error: int, leader_address: str | None) -> ReplicationError:
    """The exception for a PySyncObj completion callback's error code (not ``SUCCESS``)."""
    if error in (FAIL_REASON.NOT_LEADER, FAIL_REASON.MISSING_LEADER):
        return NotLeaderError(leader_address)
    if error in _NOT_APPLIED:
        return ProposalFailed(_NOT_APPLIED[error], outcome_unknown=False)
    return ProposalFailed(_UNKNOWN.get(error, f"PySyncObj failure code {error}"), outcome_unknown=True)
