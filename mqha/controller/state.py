"""The controller's replicated state: immutable values, and their snapshot codec (docs/reference-behaviour.md
§1.2).

Theory of operation. ``ControllerState`` maps a broker name to a ``BrokerGroupState``; it only ever
changes through ``mqha.controller.apply.apply`` (docs/architecture.md §11 rule 3), which returns a new value.
Values are frozen and hashable; a snapshot holds the state as our own JSON (docs/raft.md §2.7).

One object per broker set, where the reference keeps two tables (replica table and sync-state table)
and says a set "exists" only if it is in both. Our deviations make that split unnecessary:
- the next broker id is ``max(registered ids) + 1`` (not a stored counter), and
- a set with registered replicas keeps its sync-state entry on a partial clean,
so a set exists exactly when it is in ``groups``, and it always has at least one registered replica.

Invariants that ``apply`` preserves (the property tests check them):
- ``sync_state_set`` is a subset of the registered ids;
- when a master is set, it is registered and in ``sync_state_set``;
- ``master_epoch`` and ``sync_state_set_epoch`` never decrease while the set exists;
- ``eligible_replicas`` (ELR) holds registered ids only, none of them in ``sync_state_set``.

ELR and ``acked_watermark`` are the state of the election rule (docs/architecture.md §3.2, KIP-966):
the replicas that left the SyncStateSet holding everything acknowledged up to a credited offset,
and the highest offset the controller knows was acknowledged.

``topics`` maps a topic to its queues in each broker set (``mqadmin updateTopic``, docs/architecture.md
§4.5). A topic's entry for a broker set that is no longer registered is kept (a set cleaned and
registered again finds its topics back); routes list registered sets only.

``consumer_offsets`` maps (consumer group, topic, broker set, queue id) to the group's committed
position there, a commit-log offset every message below which the group acknowledged (mqproxy commits
them, docs/architecture.md §13). An offset never decreases while its entry exists; deleting a topic
from a broker set removes that set's offsets of the topic.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from mqha.wire.records import AclEntry, ConsumerOffsetEntry
from mqha.wire.snapshot import (
    SNAPSHOT_FORMAT,
    SNAPSHOT_VERSION,
    AclPolicySnapshot,
    AclUserSnapshot,
    EligibleReplicaSnapshot,
    GroupSnapshot,
    ReplicaSnapshot,
    SnapshotFormatError,
    StateSnapshot,
    TopicQueuesSnapshot,
    TopicSnapshot,
    decode_snapshot,
    encode_snapshot,
)
from mqha.wire.types import FrozenMap

__all__ = [
    "SNAPSHOT_FORMAT",
    "SNAPSHOT_VERSION",
    "AclUserState",
    "BrokerGroupState",
    "ControllerState",
    "FrozenMap",
    "OffsetKey",
    "ReplicaInfo",
    "SnapshotFormatError",
    "TopicQueues",
    "TopicState",
    "decode_state",
    "encode_state",
]


@dataclass(frozen=True)
class ReplicaInfo:
    """One registered replica: its API address, HA address and the check code it applied with."""

    address: str
    ha_address: str | None = None
    register_check_code: str = ""


@dataclass(frozen=True)
class BrokerGroupState:
    """One broker set's replicated state: its replicas, master, epochs and SyncStateSet.

    docs/reference-behaviour.md §1.2; keyed by ``broker_name`` in ``ControllerState.groups``.
    """

    cluster_name: str
    broker_name: str
    replicas: Mapping[int, ReplicaInfo] = field(default_factory=FrozenMap)
    master_broker_id: int | None = None
    master_epoch: int = 0
    sync_state_set: frozenset[int] = frozenset()
    sync_state_set_epoch: int = 0
    eligible_replicas: Mapping[int, int] = field(default_factory=FrozenMap)
    """ELR: broker id -> credited offset (docs/architecture.md §3.2)."""
    acked_watermark: int = -1
    """The highest offset known acknowledged (-1: none known)."""

    def __post_init__(self) -> None:
        # Accept plain dicts/sets from callers (tests, decoders) but store immutable values.
        if not isinstance(self.replicas, FrozenMap):
            object.__setattr__(self, "replicas", FrozenMap(self.replicas))
        if not isinstance(self.eligible_replicas, FrozenMap):
            object.__setattr__(self, "eligible_replicas", FrozenMap(self.eligible_replicas))
        if not isinstance(self.sync_state_set, frozenset):
            object.__setattr__(self, "sync_state_set", frozenset(self.sync_state_set))

    @property
    def next_broker_id(self) -> int:
        """Deviation (docs/architecture.md §7): max registered id + 1, so a handed-out id is never taken."""
        return max(self.replicas, default=0) + 1

    def is_registered(self, broker_id: int) -> bool:
        return broker_id in self.replicas

    def address_of(self, broker_id: int | None) -> str | None:
        replica = self.replicas.get(broker_id) if broker_id is not None else None
        return replica.address if replica is not None else None

    def ha_address_of(self, broker_id: int | None) -> str | None:
        replica = self.replicas.get(broker_id) if broker_id is not None else None
        return replica.ha_address if replica is not None else None

    @property
    def master_address(self) -> str | None:
        return self.address_of(self.master_broker_id)

    @property
    def master_ha_address(self) -> str | None:
        return self.ha_address_of(self.master_broker_id)

    @property
    def is_first_election(self) -> bool:
        """``masterEpoch == 0`` means the set never had a master (docs/reference-behaviour.md §1.2)."""
        return self.master_epoch == 0

    def describe(self) -> str:
        """One stable line, used by scenario transcripts and error messages."""
        replicas = ",".join(
            f"{broker_id}@{info.address}" + (f"/{info.ha_address}" if info.ha_address else "")
            for broker_id, info in sorted(self.replicas.items())
        )
        sss = ",".join(str(broker_id) for broker_id in sorted(self.sync_state_set))
        master = "-" if self.master_broker_id is None else str(self.master_broker_id)
        text = (
            f"{self.broker_name}({self.cluster_name}) master={master} masterEpoch={self.master_epoch} "
            f"sss=[{sss}] sssEpoch={self.sync_state_set_epoch} replicas=[{replicas}]"
        )
        if self.eligible_replicas:
            elr = ",".join(f"{b}:{c}" for b, c in sorted(self.eligible_replicas.items()))
            text += f" elr=[{elr}]"
        if self.acked_watermark >= 0:
            text += f" ackedWatermark={self.acked_watermark}"
        return text


READ_PERM = 4
WRITE_PERM = 2
DEFAULT_PERM = READ_PERM | WRITE_PERM
"""RocketMQ's ``PermName`` bits (6 = read and write, ``RW-``)."""


@dataclass(frozen=True)
class TopicQueues:
    """A topic's queues in one broker set: read and write queue counts and RocketMQ's perm bits."""

    read_queue_nums: int
    write_queue_nums: int
    perm: int = DEFAULT_PERM

    @property
    def readable(self) -> int:
        """Queues 0..n-1 a consumer reads (0 when the perm forbids reading)."""
        return self.read_queue_nums if self.perm & READ_PERM else 0

    @property
    def writable(self) -> int:
        """Queues 0..n-1 a producer writes (0 when the perm forbids writing)."""
        return self.write_queue_nums if self.perm & WRITE_PERM else 0


@dataclass(frozen=True)
class TopicState:
    """One topic: its queues in each broker set, by broker name."""

    topic_name: str
    queues: Mapping[str, TopicQueues] = field(default_factory=FrozenMap)

    def __post_init__(self) -> None:
        if not isinstance(self.queues, FrozenMap):
            object.__setattr__(self, "queues", FrozenMap(self.queues))


@dataclass(frozen=True, repr=False)
class AclUserState:
    """An ACL user: Super or Normal, and its password sealed by the leader (never in clear here)."""

    user_type: str
    sealed_password: str

    def __repr__(self) -> str:
        return f"AclUserState(user_type={self.user_type!r}, sealed_password=***)"


OffsetKey = tuple[str, str, str, int]
"""(consumer group, topic, broker set, queue id): one consumer group's place in one queue."""


@dataclass(frozen=True)
class ControllerState:
    """Every broker set, topic and consumer offset, plus the raft index of the last entry applied."""

    groups: Mapping[str, BrokerGroupState] = field(default_factory=FrozenMap)
    applied_index: int = 0
    topics: Mapping[str, TopicState] = field(default_factory=FrozenMap)
    consumer_offsets: Mapping[OffsetKey, int] = field(default_factory=FrozenMap)
    acl_users: Mapping[str, AclUserState] = field(default_factory=FrozenMap)
    acl_policies: Mapping[str, tuple[AclEntry, ...]] = field(default_factory=FrozenMap)

    def __post_init__(self) -> None:
        if not isinstance(self.groups, FrozenMap):
            object.__setattr__(self, "groups", FrozenMap(self.groups))
        if not isinstance(self.topics, FrozenMap):
            object.__setattr__(self, "topics", FrozenMap(self.topics))
        if not isinstance(self.consumer_offsets, FrozenMap):
            object.__setattr__(self, "consumer_offsets", FrozenMap(self.consumer_offsets))
        for name in ("acl_users", "acl_policies"):
            if not isinstance(getattr(self, name), FrozenMap):
                object.__setattr__(self, name, FrozenMap(getattr(self, name)))

    @classmethod
    def empty(cls) -> ControllerState:
        return cls()

    def group(self, broker_name: str) -> BrokerGroupState | None:
        return self.groups.get(broker_name)

    def with_group(self, group: BrokerGroupState) -> ControllerState:
        return replace(self, groups=self.groups.set(group.broker_name, group))  # type: ignore[attr-defined]

    def without_group(self, broker_name: str) -> ControllerState:
        return replace(self, groups=self.groups.remove(broker_name))  # type: ignore[attr-defined]

    def groups_of_cluster(self, cluster_name: str) -> list[BrokerGroupState]:
        return [g for _, g in sorted(self.groups.items()) if g.cluster_name == cluster_name]

    def with_topic(self, topic: TopicState) -> ControllerState:
        """The state with ``topic`` set; a topic left without queues anywhere is removed."""
        if not topic.queues:
            return replace(self, topics=self.topics.remove(topic.topic_name))  # type: ignore[attr-defined]
        return replace(self, topics=self.topics.set(topic.topic_name, topic))  # type: ignore[attr-defined]

    def with_acl_user(self, username: str, user: AclUserState | None) -> ControllerState:
        """The state with ``username`` set to ``user``; None removes the user and its policy."""
        if user is None:
            users = self.acl_users.remove(username)  # type: ignore[attr-defined]
            policies = self.acl_policies.remove(username)  # type: ignore[attr-defined]
            return replace(self, acl_users=users, acl_policies=policies)
        return replace(self, acl_users=self.acl_users.set(username, user))  # type: ignore[attr-defined]

    def with_acl_policy(self, username: str, entries: tuple[AclEntry, ...]) -> ControllerState:
        """The state with ``username``'s policy set to ``entries``; none removes it."""
        if not entries:
            return replace(self, acl_policies=self.acl_policies.remove(username))  # type: ignore[attr-defined]
        return replace(self, acl_policies=self.acl_policies.set(username, entries))  # type: ignore[attr-defined]

    def raised_offsets(self, offsets: Iterable[tuple[OffsetKey, int]]) -> dict[OffsetKey, int]:
        """The entries of ``offsets`` above the stored ones (the merge rule: an offset only rises;
        of one key given twice, the larger)."""
        raised: dict[OffsetKey, int] = {}
        for key, offset in offsets:
            if offset > max(self.consumer_offsets.get(key, -1), raised.get(key, -1)):
                raised[key] = offset
        return raised

    def with_consumer_offsets(self, offsets: Mapping[OffsetKey, int]) -> ControllerState:
        """The state with ``offsets`` set (callers pass ``raised_offsets``' result)."""
        if not offsets:
            return self
        merged = dict(self.consumer_offsets)
        merged.update(offsets)
        return replace(self, consumer_offsets=FrozenMap(merged))

    def without_consumer_offsets(self, topic: str, broker_names: Iterable[str]) -> ControllerState:
        """The state without the offsets of ``topic`` in ``broker_names`` (a deleted topic's)."""
        names = set(broker_names)
        kept = {k: v for k, v in self.consumer_offsets.items() if not (k[1] == topic and k[2] in names)}
        if len(kept) == len(self.consumer_offsets):
            return self
        return replace(self, consumer_offsets=FrozenMap(kept))


# --------------------------------------------------------------------------------------------------
# Snapshot codec: the wire structs of ``mqha.wire.snapshot`` <-> state values.


def _group_snapshot(group: BrokerGroupState) -> GroupSnapshot:
    return GroupSnapshot(
        cluster_name=group.cluster_name,
        broker_name=group.broker_name,
        replicas=[
            ReplicaSnapshot(broker_id, info.address, info.ha_address, info.register_check_code)
            for broker_id, info in sorted(group.replicas.items())
        ],
        master_broker_id=group.master_broker_id,
        master_epoch=group.master_epoch,
        sync_state_set=group.sync_state_set,
        sync_state_set_epoch=group.sync_state_set_epoch,
        eligible_replicas=[
            EligibleReplicaSnapshot(broker_id, credit)
            for broker_id, credit in sorted(group.eligible_replicas.items())
        ],
        acked_watermark=group.acked_watermark,
    )


def encode_state(state: ControllerState) -> bytes:
    """Versioned JSON, keys sorted so equal states give equal bytes."""
    return encode_snapshot(
        StateSnapshot(
            format=SNAPSHOT_FORMAT,
            version=SNAPSHOT_VERSION,
            applied_index=state.applied_index,
            groups=[_group_snapshot(group) for _, group in sorted(state.groups.items())],
            topics=[
                TopicSnapshot(
                    topic_name=name,
                    queues=[
                        TopicQueuesSnapshot(broker, q.read_queue_nums, q.write_queue_nums, q.perm)
                        for broker, q in sorted(topic.queues.items())
                    ],
                )
                for name, topic in sorted(state.topics.items())
            ],
            consumer_offsets=[
                ConsumerOffsetEntry(group, topic, broker, queue_id, offset)
                for (group, topic, broker, queue_id), offset in sorted(state.consumer_offsets.items())
            ],
            acl_users=[
                AclUserSnapshot(name, user.user_type, user.sealed_password)  # type: ignore[arg-type]
                for name, user in sorted(state.acl_users.items())
            ],
            acl_policies=[
                AclPolicySnapshot(name, list(entries)) for name, entries in sorted(state.acl_policies.items())
            ],
        )
    )


def _group_state(snapshot: GroupSnapshot) -> BrokerGroupState:
    replicas: dict[int, ReplicaInfo] = {}
    for item in snapshot.replicas:
        if item.broker_id in replicas:
            raise SnapshotFormatError(f"snapshot: duplicate broker id {item.broker_id}")
        replicas[item.broker_id] = ReplicaInfo(item.address, item.ha_address, item.register_check_code)
    eligible: dict[int, int] = {}
    for entry in snapshot.eligible_replicas:
        if entry.broker_id in eligible:
            raise SnapshotFormatError(f"snapshot: duplicate eligible replica {entry.broker_id}")
        eligible[entry.broker_id] = entry.credited_offset
    return BrokerGroupState(
        cluster_name=snapshot.cluster_name,
        broker_name=snapshot.broker_name,
        replicas=replicas,
        master_broker_id=snapshot.master_broker_id,
        master_epoch=snapshot.master_epoch,
        sync_state_set=snapshot.sync_state_set,
        sync_state_set_epoch=snapshot.sync_state_set_epoch,
        eligible_replicas=eligible,
        acked_watermark=snapshot.acked_watermark,
    )


def decode_state(data: bytes) -> ControllerState:
    """Inverse of ``encode_state``; raises ``SnapshotFormatError`` on anything else."""
    snapshot = decode_snapshot(data)
    groups: dict[str, BrokerGroupState] = {}
    for item in snapshot.groups:
        group = _group_state(item)
        if group.broker_name in groups:
            raise SnapshotFormatError(f"snapshot: duplicate broker set {group.broker_name}")
        groups[group.broker_name] = group
    topics: dict[str, TopicState] = {}
    for entry in snapshot.topics:
        if entry.topic_name in topics:
            raise SnapshotFormatError(f"snapshot: duplicate topic {entry.topic_name}")
        queues = {
            q.broker_name: TopicQueues(q.read_queue_nums, q.write_queue_nums, q.perm) for q in entry.queues
        }
        if len(queues) != len(entry.queues):
            raise SnapshotFormatError(f"snapshot: duplicate broker set in topic {entry.topic_name}")
        topics[entry.topic_name] = TopicState(entry.topic_name, queues)
    offsets = {entry.key: entry.commit_offset for entry in snapshot.consumer_offsets}
    if len(offsets) != len(snapshot.consumer_offsets):
        raise SnapshotFormatError("snapshot: duplicate consumer offset")
    users = {user.username: AclUserState(user.user_type, user.sealed_password) for user in snapshot.acl_users}
    policies = {policy.username: tuple(policy.entries) for policy in snapshot.acl_policies}
    if len(users) != len(snapshot.acl_users) or len(policies) != len(snapshot.acl_policies):
        raise SnapshotFormatError("snapshot: duplicate ACL user or policy")
    return ControllerState(
        groups=groups,
        applied_index=snapshot.applied_index,
        topics=topics,
        consumer_offsets=offsets,
        acl_users=users,
        acl_policies=policies,
    )
