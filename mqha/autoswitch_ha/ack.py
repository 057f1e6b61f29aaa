"""The master's confirmOffset (docs/reference-behaviour.md §10.5, §14) and the put path's replica-ack rules
(docs/reference-behaviour.md §15).

Pure functions over snapshots. ``slave_acks`` everywhere maps the slave id of each *live* HA
connection to its latest acked offset (a slave without a live connection is absent; a connection that
has not acked yet is absent or ``<= 0``). The master itself is never in it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
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


def in_sync_refusal(policy: AckPolicy, in_sync_replicas_nums: int) -> str | None:
    """Before appending: why the put is refused for too few in-sync replicas, or None.

    * docs/reference-behaviour.md §15 step 1: fewer than ``minInSyncReplicas``;
    * mqha (docs/architecture.md §7): numeric ``inSyncReplicas`` = N (not ``allAckInSyncStateSet``) with
      fewer than N SyncStateSet members. Only members ack (:func:`replica_ack_status`), so such a put
      could never be acknowledged: it is refused before anything is written, as the reference's
      pre-check does when its needed acks exceed the in-sync count.

    ``in_sync_replicas_nums`` is ``InSyncState.in_sync_replicas_nums`` (max of both sets while a change
    is in flight; the effective set, their union, has exactly that many members since a proposal only
    adds to or only removes from the confirmed set).
    """
    if in_sync_replicas_nums < policy.min_in_sync_replicas:
        return (
            f"in-sync replicas not enough: minInSyncReplicas={policy.min_in_sync_replicas}, "
            f"the SyncStateSet has {in_sync_replicas_nums}"
        )
    required = policy.required_acks
    if required != ALL_IN_SYNC_STATE_SET and in_sync_replicas_nums < required:
        return (
            f"in-sync replicas not enough: inSyncReplicas={required} needs {required} SyncStateSet "
            f"members (learners and replicas outside the set never ack), the set has {in_sync_replicas_nums}"
        )
    return None


def check_in_sync_replicas(policy: AckPolicy, in_sync_replicas_nums: int) -> AckStatus:
    """:func:`in_sync_refusal` as a status: IN_SYNC_REPLICAS_NOT_ENOUGH or OK."""
    if in_sync_refusal(policy, in_sync_replicas_nums) is not None:
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
    * numeric N: OK when the master plus every slave *of S* with ack >= next_offset number at least N.
      The reference counts any connection, learners and replicas outside S included
      (docs/reference-behaviour.md §17.18); mqha counts members only, since only a member can be
      elected and an ack must mean the message survives the master (docs/architecture.md §7);
    * otherwise WAIT, or FLUSH_SLAVE_TIMEOUT once ``now_ms`` reached ``deadline_ms``.

    ``slave_acks`` holds only connections whose acks may count (the shell leaves out learners and
    connections of an unknown or superseded incarnation, :func:`countable_acks`). Slaves are counted
    once each by id (the reference counts connections; one id has one live
    connection, so this only differs if a stale duplicate lingers, where counting it would be unsafe).
    """
    required = policy.required_acks
    if required in (0, 1):
        return AckStatus.OK
    members = set(sync_state_set)
    acked = {slave for slave, offset in slave_acks.items() if offset >= next_offset and slave in members}
    if required == ALL_IN_SYNC_STATE_SET:
        if len(members) <= 1:
            return AckStatus.OK
        done = 1 + len(acked) >= len(members)
    else:
        done = 1 + len(acked) >= required
    if done:
        return AckStatus.OK
    if now_ms is not None and deadline_ms is not None and now_ms >= deadline_ms:
        return AckStatus.FLUSH_SLAVE_TIMEOUT
    return AckStatus.WAIT


def countable_acks(
    slave_acks: Mapping[int, int],
    incarnations: Mapping[int, str],
    learners: Set[int],
    bound: Mapping[int, str],
) -> dict[int, int]:
    """The acks that may count for puts and the confirm offset (docs/architecture.md §4, KIP-903).

    ``slave_acks``: slave id → acked offset of each live connection; ``incarnations``: the incarnation
    each connection announced (absent: unknown, a slave that sent no INCARNATION frame);
    ``learners``: connections with ``asyncLearner``; ``bound``: the incarnation the master bound to
    each SyncStateSet member when it saw that incarnation catch up (``InSyncState.bound``).

    An ack counts only from a non-learner connection of a known incarnation that is the member's bound
    one (or any, for an id with no binding yet): a restarted replica, whose new process may hold less
    than the old one acknowledged, never acks as its former self.
    """
    counted = {}
    for slave, offset in slave_acks.items():
        incarnation = incarnations.get(slave)
        if incarnation is None or slave in learners:
            continue
        if bound.get(slave, incarnation) != incarnation:
            continue
        counted[slave] = offset
    return counted


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

    If a member other than the master has no live connection, or one that has not reported yet, the
    stored value stands (a missing member must not let it advance). Otherwise the minimum over members'
    acks that are > 0, starting from the master's max offset.
    """
    members = [m for m in sync_state_set if m != local_id]
    # A member whose connection has not reported yet (-1: it reconnected, its handshake is under way)
    # counts as missing: skipping it, as the reference does, let the confirm offset pass what that
    # member holds, and it may be elected next (mqha.sim seed 418).
    if any(slave_acks.get(m, -1) < 0 for m in members):
        return stored_confirm_offset
    confirm = master_max_offset
    for member in members:
        ack = slave_acks[member]
        if ack > 0:
            confirm = min(confirm, ack)
    return confirm


def in_sync_ack_point(master_max_offset: int, member_acks: Iterable[int], needed: int) -> int | None:
    """What an ``inSyncReplicas`` = ``needed`` put waits for: the ``needed``-th highest of the master's
    log end and its SyncStateSet members' counted acks (None while fewer than ``needed`` can ack)."""
    reached = sorted([master_max_offset, *member_acks], reverse=True)
    return reached[needed - 1] if len(reached) >= needed else None


def master_confirm_offset(
    *,
    all_ack_in_sync_state_set: bool,
    local_sync_state_set: Set[int],
    master_max_offset: int,
    stored_confirm_offset: int,
    computed_confirm_offset: int,
    in_sync_replicas: int = 1,
    in_sync_point: int | None = None,
) -> int:
    """The confirmOffset a master reports (docs/reference-behaviour.md §14): what readers may see.

    With a single-member local set, or without allAckInSyncStateSet and ``inSyncReplicas`` <= 1, it is
    the max offset: puts did not wait for replicas, so nothing is gained by holding consumers back.
    With ``inSyncReplicas`` = N >= 2 (no allAck) it is ``in_sync_point`` (:func:`in_sync_ack_point`):
    what N replicas hold, as far as an acknowledgement reaches -- while fewer than N can ack, the stored
    value. Deliberate deviation (docs/architecture.md §7): the reference serves the max offset there
    too, so a consumer can read a message only the master holds, which a failover then truncates (the
    issue-27 soak: 711 such reads under ``inSyncReplicas=2``). Otherwise the stored value, initialised
    (when still < 0) with ``computed_confirm_offset`` (:func:`compute_confirm_offset`).

    The shell maintains the stored value by storing :func:`compute_confirm_offset` on every ack from a
    member of the local set, on every confirmed set (setSyncStateSet) and on becoming master; this
    function is the read.
    """
    if not all_ack_in_sync_state_set and in_sync_replicas >= 2:
        return in_sync_point if in_sync_point is not None else stored_confirm_offset
    if len(local_sync_state_set) == 1 or not all_ack_in_sync_state_set:
        return master_max_offset
    if stored_confirm_offset < 0:
        return computed_confirm_offset
    return stored_confirm_offset
