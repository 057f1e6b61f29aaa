"""The master's confirmOffset (docs/reference-behaviour.md §10.5, §14) and the put path's replica-ack rules
(docs/reference-behaviour.md §15).

Pure functions over snapshots. ``slave_acks`` everywhere maps the slave id of each *live* HA
connection to its latest acked offset (a slave without a live connection is absent; a connection that
has not acked yet is absent or ``<= 0``). The master itself is never in it.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass
from enum import Enum

ALL_IN_SYNC_STATE_SET = -1
"""Required-acks sentinel of ``allAckInSyncStateSet`` (docs/reference-behaviour.md §15 step 2)."""


class AckStatus(Enum):
    """Replica outcome of a put; values are RocketMQ ``PutMessageStatus`` names where one exists."""

    OK = "PUT_OK"
    WAIT = "WAIT"  # not decided yet: keep waiting for acks until the deadline
    IN_SYNC_REPLICAS_NOT_ENOUGH = "IN_SYNC_REPLICAS_NOT_ENOUGH"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"


@dataclass(frozen=True, kw_only=True)
class AckPolicy:
    """Decides how many replicas must hold a message before its put is acknowledged.

    Holds the store keys of docs/reference-behaviour.md §16.3 that decide it.
    """

    all_ack_in_sync_state_set: bool = False
    in_sync_replicas: int = 1
    min_in_sync_replicas: int = 1

    @property
    def required_acks(self) -> int:
        """docs/reference-behaviour.md §15 step 2: ``ALL_IN_SYNC_STATE_SET`` or the numeric
        ``inSyncReplicas``."""
        return ALL_IN_SYNC_STATE_SET if self.all_ack_in_sync_state_set else self.in_sync_replicas

    @property
    def needs_replica_wait(self) -> bool:
        """False when the master's own write is enough (required acks 0 or 1)."""
        return self.required_acks not in (0, 1)


def check_in_sync_replicas(policy: AckPolicy, in_sync_replicas_nums: int) -> AckStatus:
    """docs/reference-behaviour.md §15 step 1, before appending: refuse the put when too few replicas are in
    sync.

    ``in_sync_replicas_nums`` is ``InSyncState.in_sync_replicas_nums`` (max of both sets while a change
    is in flight).
    """
    if in_sync_replicas_nums < policy.min_in_sync_replicas:
        return AckStatus.IN_SYNC_REPLICAS_NOT_ENOUGH
    return AckStatus.OK


def replica_ack_status(
    policy: AckPolicy,
    *,
    next_offset: int,
    sync_state_set: Set[int],
    slave_acks: Mapping[int, int],
    now_ms: int | None = None,
    deadline_ms: int | None = None,
) -> AckStatus:
    """docs/reference-behaviour.md §15 step 3, after appending a message that ends at ``next_offset``.

    * required acks 0 or 1: OK at once;
    * all of the SyncStateSet (``sync_state_set`` is the effective set, the union while a change is in
      flight): OK when |S| <= 1, or when the master plus every slave of S with ack >= next_offset
      number at least |S|;
    * numeric N: OK when the master plus every slave (in S or not, learners included) with
      ack >= next_offset number at least N;
    * otherwise WAIT, or FLUSH_SLAVE_TIMEOUT once ``now_ms`` reached ``deadline_ms``.

    Slaves are counted once each by id (the reference counts connections; one id has one live
    connection, so this only differs if a stale duplicate lingers, where counting it would be unsafe).
    """
    required = policy.required_acks
    if required in (0, 1):
        return AckStatus.OK
    acked = {slave for slave, offset in slave_acks.items() if offset >= next_offset}
    if required == ALL_IN_SYNC_STATE_SET:
        if len(sync_state_set) <= 1:
            return AckStatus.OK
        done = 1 + len(acked & set(sync_state_set)) >= len(sync_state_set)
    else:
        done = 1 + len(acked) >= required
    if done:
        return AckStatus.OK
    if now_ms is not None and deadline_ms is not None and now_ms >= deadline_ms:
        return AckStatus.FLUSH_SLAVE_TIMEOUT
    return AckStatus.WAIT


def compute_confirm_offset(
    *,
    master_max_offset: int,
    sync_state_set: Set[int],
    local_id: int,
    slave_acks: Mapping[int, int],
    stored_confirm_offset: int,
) -> int:
    """``computeConfirmOffset`` (docs/reference-behaviour.md §10.5): the offset every member of the
    SyncStateSet holds.

    If a member other than the master has no live connection, the stored value stands (a missing
    member must not let it advance). Otherwise the minimum over members' acks that are > 0, starting
    from the master's max offset.
    """
    members = [m for m in sync_state_set if m != local_id]
    if any(m not in slave_acks for m in members):
        return stored_confirm_offset
    confirm = master_max_offset
    for member in members:
        ack = slave_acks[member]
        if ack > 0:
            confirm = min(confirm, ack)
    return confirm


def master_confirm_offset(
    *,
    all_ack_in_sync_state_set: bool,
    local_sync_state_set: Set[int],
    master_max_offset: int,
    stored_confirm_offset: int,
    computed_confirm_offset: int,
) -> int:
    """The confirmOffset a master reports (docs/reference-behaviour.md §14).

    With a single-member local set, or without allAckInSyncStateSet, it is the max offset: puts did
    not wait for replicas, so nothing is gained by holding consumers back. Otherwise the stored value,
    initialised (when still < 0) with ``computed_confirm_offset`` (:func:`compute_confirm_offset`).

    The shell maintains the stored value by storing :func:`compute_confirm_offset` on every ack from a
    member of the local set, on every confirmed set (setSyncStateSet) and on becoming master; this
    function is the read.
    """
    if len(local_sync_state_set) == 1 or not all_ack_in_sync_state_set:
        return master_max_offset
    if stored_confirm_offset < 0:
        return computed_confirm_offset
    return stored_confirm_offset
