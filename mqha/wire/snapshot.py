"""The controller's state snapshot as wire structs (docs/raft.md §2.7, docs/architecture.md §8).

Versioned JSON: ``{"format": "mqha-controller-state", "version": 3, "appliedIndex", "groups": [...],
"topics": [...]}``, keys sorted and id sets sorted, so equal states give equal bytes. Version 2 adds each
group's ``eligibleReplicas`` and ``ackedWatermark`` (docs/architecture.md §3.2); a version 1 snapshot reads
as an empty ELR and watermark -1. Version 3 adds ``topics`` (docs/architecture.md §4.5); an older snapshot
reads as no topic. Version 4 adds ``consumerOffsets`` (docs/architecture.md §4.5, §13; the record's
``ConsumerOffsetEntry`` shape); an older snapshot reads as none. A snapshot is written with the lowest
version that holds what it has (no offsets: 3; no topics either: 2), so a controller older than those
reads it until the first topic or offset. Version 5 adds ``aclUsers`` and ``aclPolicies``
(docs/architecture.md §12.11: users with their sealed passwords, and each subject's policy entries);
older snapshots read as none, and a state without ACLs is written as version 4 or lower.
``mqha.controller.state`` converts between these and its immutable state values; this module is only
the shape and the codec.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from mqha.errors import ProtocolError
from mqha.wire.codec import decode_json, encode, remark_for, to_builtins
from mqha.wire.records import AclEntry, ConsumerOffsetEntry
from mqha.wire.types import (
    Epoch,
    Int64,
    Offset,
    StoredAddress,
    StoredBrokerId,
    StoredCount,
    StoredIdSet,
    StoredName,
)

SNAPSHOT_FORMAT = "mqha-controller-state"
SNAPSHOT_VERSION = 5


class SnapshotFormatError(ProtocolError):
    """Snapshot bytes that are not a controller state of a version we read."""


class _Strict(msgspec.Struct, frozen=True, rename="camel", forbid_unknown_fields=True):
    """Base of the snapshot structs: strict, camelCase, every field required."""


class ReplicaSnapshot(_Strict, frozen=True):
    """One registered replica of a group."""

    broker_id: StoredBrokerId
    address: StoredAddress
    ha_address: StoredAddress | None
    register_check_code: StoredAddress


class EligibleReplicaSnapshot(_Strict, frozen=True):
    """One member of a group's ELR, with its credited offset.

    A replica that left the SyncStateSet holding everything acknowledged up to ``credited_offset``."""

    broker_id: StoredBrokerId
    credited_offset: Offset


class GroupSnapshot(_Strict, frozen=True):
    """One broker set as a snapshot holds it."""

    cluster_name: StoredName
    broker_name: StoredName
    replicas: list[ReplicaSnapshot]
    master_broker_id: StoredBrokerId | None
    master_epoch: Epoch
    sync_state_set: StoredIdSet
    sync_state_set_epoch: Epoch
    # Version 2 (absent from version 1 snapshots).
    eligible_replicas: list[EligibleReplicaSnapshot] = []
    acked_watermark: Offset = -1


class TopicQueuesSnapshot(_Strict, frozen=True):
    """A topic's queues in one broker set."""

    broker_name: StoredName
    read_queue_nums: StoredCount
    write_queue_nums: StoredCount
    perm: StoredCount


class TopicSnapshot(_Strict, frozen=True):
    """One topic and its queues in each broker set."""

    topic_name: StoredName
    queues: list[TopicQueuesSnapshot]


class AclUserSnapshot(_Strict, frozen=True):
    """One ACL user: its type and sealed password."""

    username: StoredName
    user_type: Literal["Super", "Normal"]
    sealed_password: str


class AclPolicySnapshot(_Strict, frozen=True):
    """One subject's ACL policy entries."""

    username: StoredName
    entries: list[AclEntry]


class StateSnapshot(_Strict, frozen=True):
    """The whole replicated state at ``applied_index``."""

    format: Literal["mqha-controller-state"]
    version: Int64
    applied_index: Int64
    groups: list[GroupSnapshot]
    topics: list[TopicSnapshot] = []  # version 3
    consumer_offsets: list[ConsumerOffsetEntry] = []  # version 4
    acl_users: list[AclUserSnapshot] = []  # version 5
    acl_policies: list[AclPolicySnapshot] = []  # version 5


TOPICS_VERSION = 3
"""The first version with ``topics``."""
OFFSETS_VERSION = 4
"""The first version with ``consumerOffsets``."""
ACL_VERSION = 5
"""The first version with ``aclUsers`` and ``aclPolicies``."""


def encode_snapshot(snapshot: StateSnapshot) -> bytes:
    """The snapshot's bytes, as the lowest version that holds its sections (a rolling upgrade stays
    possible until the first topic or consumer offset); a section its version lacks is left out."""
    doc = to_builtins(snapshot)
    version = snapshot.version
    if version >= ACL_VERSION and not snapshot.acl_users and not snapshot.acl_policies:
        version = ACL_VERSION - 1
    if version == OFFSETS_VERSION and not snapshot.consumer_offsets:
        version = OFFSETS_VERSION - 1
        if not snapshot.topics:
            version = TOPICS_VERSION - 1
    if version < ACL_VERSION:
        del doc["aclUsers"], doc["aclPolicies"]
    if version < OFFSETS_VERSION:
        del doc["consumerOffsets"]
    if version < TOPICS_VERSION:
        del doc["topics"]
    doc["version"] = version
    return encode(doc, sort_keys=True)


def decode_snapshot(data: bytes) -> StateSnapshot:
    """The snapshot in ``data``; raises ``SnapshotFormatError`` on anything else."""
    try:
        snapshot: StateSnapshot = decode_json(data, StateSnapshot)
    except msgspec.ValidationError as exc:
        text = str(exc)
        top = text.startswith("Expected `object`, got") and " - at " not in text
        if top or text.endswith("`$.format`") or "field `format`" in text:
            raise SnapshotFormatError("not a controller state snapshot") from None
        raise SnapshotFormatError(f"snapshot: {remark_for(StateSnapshot, exc)}") from None
    except msgspec.DecodeError as exc:
        raise SnapshotFormatError(f"snapshot is not JSON: {exc}") from None
    if not 1 <= snapshot.version <= SNAPSHOT_VERSION:
        raise SnapshotFormatError(f"unsupported snapshot version {snapshot.version}")
    return snapshot
