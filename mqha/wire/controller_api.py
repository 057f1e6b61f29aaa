"""Controller API bodies (docs/reference-behaviour.md §5, docs/architecture.md §3): requests, replies and
their payloads, as msgspec structs (``mqha.wire.codec``).

Field names on the wire are the spec's camelCase names; Python attributes are snake_case. Requests
are strict: the body must be a JSON object, every required field present, every value of the
declared JSON type (``true`` is not an integer, ``1.0`` is not an integer) and range
(``mqha.wire.types``), and no unknown field; a violation raises ``RequestError(2005, remark)`` whose
remark names the field. Reply payloads ignore unknown fields (forward compatibility) but still check
types; a violation there is the controller's fault and raises ``RemoteProtocolError``.

Path parameters of the HTTP API (``brokerName`` of ``/v1/groups/{brokerName}/...``) are also accepted
as body fields; the HTTP layer checks and merges the path after decoding.

Server side, a ``Reply`` carries its payload struct until the HTTP edge (``Reply.encode``); client
side, ``Reply.decode`` / ``Reply.from_json`` give the payload as the JSON object's extra fields, which
``reply.payload_as(XPayload)`` (or ``XPayload.from_json(reply.payload)``) turns into the typed value.
"""

from __future__ import annotations

import msgspec

from mqha.codes import ResponseCode
from mqha.errors import RequestError
from mqha.wire.codec import Payload, Request
from mqha.wire.types import (
    INT32_MAX,
    Address,
    BrokerId,
    BrokerName,
    CheckCode,
    ClusterName,
    Epoch,
    IdSet,
    IdsToClean,
    Incarnation,
    IncarnationMap,
    IntKeyMap,
    NameList,
    Offset,
    OptionalName,
    Perm,
    Priority,
    QueueNums,
    ReplicaCount,
    StoreId,
    TimeoutMs,
    TopicName,
)

__all__ = [
    "DEFAULT_HEARTBEAT_TIMEOUT_MS",
    "DEFAULT_TOPIC_QUEUE_NUMS",
    "INT32_MAX",
    "AlterSyncStateSetPayload",
    "AlterSyncStateSetRequest",
    "ApplyBrokerIdPayload",
    "ApplyBrokerIdRequest",
    "BrokerHeartbeatRequest",
    "BrokerMemberGroup",
    "CleanBrokerDataRequest",
    "ControllerMetadataPayload",
    "DeleteTopicRequest",
    "ElectMasterPayload",
    "ElectMasterRequest",
    "GetNextBrokerIdRequest",
    "GetReplicaInfoRequest",
    "GetSyncStateDataRequest",
    "GroupsPayload",
    "MasterView",
    "NextBrokerIdPayload",
    "NotLeaderPayload",
    "RegisterBrokerPayload",
    "RegisterBrokerRequest",
    "ReplicaIdentity",
    "ReplicaInfoPayload",
    "ReplicasInfo",
    "Reply",
    "RoleChangedMessage",
    "SyncStateDataPayload",
    "TopicBrokerData",
    "TopicListPayload",
    "TopicQueueData",
    "TopicRoutePayload",
    "TopicRouteRequest",
    "UpdateTopicPayload",
    "UpdateTopicRequest",
    "check_code_store_id",
    "decode_reply",
]

DEFAULT_HEARTBEAT_TIMEOUT_MS = 10_000
"""``DEFAULT_BROKER_CHANNEL_EXPIRED_TIME`` (docs/reference-behaviour.md §7.1)."""

_force = msgspec.structs.force_setattr

# --------------------------------------------------------------------------------------------------
# Requests (docs/architecture.md §3 table).


class GetNextBrokerIdRequest(Request, frozen=True, kw_only=True):
    """The query of getNextBrokerId: the broker set that asks for an id to try.

    docs/reference-behaviour.md §5.1 (query parameters of ``GET /v1/brokers/next-id``).
    """

    cluster_name: ClusterName
    broker_name: BrokerName


class ApplyBrokerIdRequest(Request, frozen=True, kw_only=True):
    """The body of applyBrokerId: a broker claims an id for its set (docs/reference-behaviour.md §5.2).

    ``registerCheckCode`` is ``"<brokerAddress>;<epochMillis>"``.
    """

    cluster_name: ClusterName
    broker_name: BrokerName
    applied_broker_id: BrokerId
    register_check_code: CheckCode

    @property
    def broker_address(self) -> str:
        """The part of the check code before the first ``;`` (docs/reference-behaviour.md §5.2)."""
        return self.register_check_code.split(";", 1)[0]


def check_code_store_id(register_check_code: str) -> str | None:
    """The store id an mqha broker puts third in its check code (docs/architecture.md §9.4), or None."""
    parts = register_check_code.split(";")
    return parts[2] if len(parts) == 3 else None


class RegisterBrokerRequest(Request, frozen=True, kw_only=True, omit_defaults=True):
    """The body of registerBroker (docs/reference-behaviour.md §5.3).

    ``haAddress`` is ours (the master's HA address travels through the controller).
    """

    cluster_name: ClusterName
    broker_name: BrokerName
    broker_id: BrokerId
    broker_address: Address
    ha_address: Address | None = None
    # The start report (docs/architecture.md §3.2, §8); absent from older brokers.
    incarnation: Incarnation | None = None
    clean_shutdown: bool | None = None
    lossy_recovery: bool | None = None
    confirm_offset_before_recovery: Offset | None = None
    store_id: StoreId | None = None
    """The broker's store (docs/architecture.md §9.4): refused when the id was applied by another."""


class BrokerHeartbeatRequest(Request, frozen=True, kw_only=True, omit_defaults=True):
    """The body of a broker heartbeat (docs/reference-behaviour.md §5.9).

    Absent (or null) progress fields take the docs/reference-behaviour.md §7.1 defaults.
    """

    cluster_name: ClusterName
    broker_name: BrokerName
    broker_addr: Address
    broker_id: BrokerId | None = None
    epoch: Epoch | None = None
    max_offset: Offset | None = None
    confirm_offset: Offset | None = None
    heartbeat_timeout_mills: TimeoutMs | None = None
    election_priority: Priority | None = None
    # The start report (docs/architecture.md §3.2, §8); absent from older brokers.
    incarnation: Incarnation | None = None
    clean_shutdown: bool | None = None
    lossy_recovery: bool | None = None
    confirm_offset_before_recovery: Offset | None = None
    # The broker's ack rule (docs/architecture.md §3.2): with inSyncReplicas and no allAck, a SyncStateSet
    # member need not hold every acknowledged message, and elections must know it. Absent: older brokers.
    all_ack_in_sync_state_set: bool | None = None
    in_sync_replicas: ReplicaCount | None = None
    # The highest masterEpoch the broker knows, a cleared one included: from it on it follows no older
    # master (docs/architecture.md §3.2, the fence of an election by count).
    known_master_epoch: Epoch | None = None

    def __post_init__(self) -> None:
        # The reference's own check and remark (docs/reference-behaviour.md §5.9); null optional
        # fields mean "default" (typed ``X | None`` only so that the decoder accepts the null).
        if self.broker_id is None:
            raise RequestError(ResponseCode.CONTROLLER_INVALID_REQUEST, "Heart beat with empty brokerId")
        if self.epoch is None:
            _force(self, "epoch", -1)
        if self.max_offset is None:
            _force(self, "max_offset", -1)
        if self.confirm_offset is None:
            _force(self, "confirm_offset", -1)
        if self.heartbeat_timeout_mills is None:
            _force(self, "heartbeat_timeout_mills", DEFAULT_HEARTBEAT_TIMEOUT_MS)
        if self.election_priority is None:
            _force(self, "election_priority", INT32_MAX)


class ElectMasterRequest(Request, frozen=True, kw_only=True):
    """The body of electMaster: elect a master for a broker set (docs/reference-behaviour.md §5.4).

    ``brokerId`` null (or -1) is the controller-style trigger.
    """

    broker_name: OptionalName = ""
    cluster_name: OptionalName = ""
    broker_id: BrokerId | None = None
    designate_elect: bool = False

    @property
    def requested_id(self) -> int | None:
        """The requester's id, with the reference's ``-1`` folded into ``None``."""
        return None if self.broker_id is None or self.broker_id == -1 else self.broker_id


class AlterSyncStateSetRequest(Request, frozen=True, kw_only=True, omit_defaults=True):
    """The body of alterSyncStateSet: a new set, the master's epochs (docs/reference-behaviour.md §5.5).

    Ours (docs/architecture.md §3.2): ``confirmOffset``, the master's ack point when it proposes,
    ``memberIncarnations``, per member but the master the incarnation the master saw catch up, and
    ``releaseEligible``: the master is about to acknowledge beyond every eligible replica's credit, so
    the ELR is emptied first (the set may then equal the current one)."""

    broker_name: OptionalName = ""
    master_broker_id: BrokerId
    master_epoch: Epoch
    sync_state_set: IdSet
    sync_state_set_epoch: Epoch
    confirm_offset: Offset | None = None
    member_incarnations: IncarnationMap | None = None
    release_eligible: bool = False

    def __post_init__(self) -> None:
        if self.member_incarnations is not None and not isinstance(self.member_incarnations, IntKeyMap):
            _force(self, "member_incarnations", IntKeyMap(self.member_incarnations))


class GetReplicaInfoRequest(Request, frozen=True, kw_only=True):
    """The query of getReplicaInfo: the path's broker name (docs/reference-behaviour.md §5.6)."""

    broker_name: BrokerName


class GetSyncStateDataRequest(Request, frozen=True, kw_only=True):
    """The body of getSyncStateData (docs/reference-behaviour.md §5.7).

    Broker names, or every group of ``clusterName`` (docs/architecture.md §3).
    """

    broker_names: NameList = ()
    cluster_name: ClusterName | None = None


class CleanBrokerDataRequest(Request, frozen=True, kw_only=True):
    """The body of cleanBrokerData: the ids of a set to forget (docs/reference-behaviour.md §5.10).

    Ids as a JSON array (or the reference's ``"1;2;3"`` text).
    """

    broker_name: OptionalName = ""
    cluster_name: ClusterName | None = None
    broker_controller_ids_to_clean: IdsToClean | None = None
    clean_living_broker: bool = False


DEFAULT_TOPIC_QUEUE_NUMS = 8
"""``mqadmin updateTopic``'s queue counts when -r / -w are not given (RocketMQ's)."""


class UpdateTopicRequest(Request, frozen=True, kw_only=True):
    """The body of updateTopic: a topic's queues in every broker set of a cluster (docs/architecture.md §4.5).

    RocketMQ's ``mqadmin updateTopic -c -t -r -w -p``; ``perm`` is RocketMQ's PermName bits (6 = RW).
    """

    topic_name: TopicName
    cluster_name: ClusterName
    read_queue_nums: QueueNums = DEFAULT_TOPIC_QUEUE_NUMS
    write_queue_nums: QueueNums = DEFAULT_TOPIC_QUEUE_NUMS
    perm: Perm = 6


class DeleteTopicRequest(Request, frozen=True, kw_only=True):
    """The body of deleteTopic: remove a topic from every broker set of a cluster (mqadmin deleteTopic)."""

    topic_name: TopicName
    cluster_name: ClusterName


class TopicRouteRequest(Request, frozen=True, kw_only=True):
    """The query of topicRoute: the topic whose queues and broker sets are wanted."""

    topic: TopicName


# --------------------------------------------------------------------------------------------------
# Reply payloads (docs/architecture.md §3 field names). Absent values are JSON null.


class NextBrokerIdPayload(Payload, frozen=True, kw_only=True):
    """The reply of getNextBrokerId: the id to try next (docs/reference-behaviour.md §5.1)."""

    cluster_name: str
    broker_name: str
    next_broker_id: int


class ApplyBrokerIdPayload(Payload, frozen=True, kw_only=True):
    """The reply of applyBrokerId: the set the id now belongs to (docs/reference-behaviour.md §5.2)."""

    cluster_name: str
    broker_name: str


class MasterView(Payload, frozen=True, kw_only=True):
    """The master of a broker set and its epochs, as replies and pushes carry them.

    The register and elect replies and the ``roleChanged`` push carry these fields (null when there is
    none).
    """

    master_broker_id: int | None = None
    master_address: str | None = None
    master_ha_address: str | None = None
    master_epoch: int | None = None
    sync_state_set_epoch: int | None = None
    sync_state_set: frozenset[int] | None = None


class RegisterBrokerPayload(MasterView, frozen=True, kw_only=True):
    """The reply of registerBroker: the set's master and epochs, and its SyncStateSet.

    Master fields (and the epochs) are null unless a master exists and is alive
    (docs/reference-behaviour.md §5.3); the SyncStateSet is always there.
    """

    cluster_name: str
    broker_name: str
    sync_state_set: frozenset[int] = frozenset()


class BrokerMemberGroup(Payload, frozen=True, kw_only=True):
    """Every registered id of a broker set with its address (docs/reference-behaviour.md §2.3)."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str]

    def __post_init__(self) -> None:
        # Sorted decimal keys on the wire (see ``IntKeyMap``), whatever mapping the caller passed.
        if not isinstance(self.broker_addrs, IntKeyMap):
            _force(self, "broker_addrs", IntKeyMap(self.broker_addrs))


class ElectMasterPayload(MasterView, frozen=True, kw_only=True):
    """The reply of electMaster: the new master and the set's members (docs/reference-behaviour.md §5.4).

    All null when no master was elected.
    """

    broker_member_group: BrokerMemberGroup | None = None


class AlterSyncStateSetPayload(Payload, frozen=True, kw_only=True):
    """The reply of alterSyncStateSet: the set and its new epoch (docs/reference-behaviour.md §5.5)."""

    new_sync_state_set_epoch: int
    sync_state_set: frozenset[int]
    sync_state_set_epoch: int


class ReplicaInfoPayload(Payload, frozen=True, kw_only=True):
    """The reply of getReplicaInfo: the set's master and SyncStateSet (docs/reference-behaviour.md §5.6)."""

    master_broker_id: int | None = None
    master_address: str | None = None
    master_ha_address: str | None = None
    master_epoch: int = 0
    sync_state_set: frozenset[int] = frozenset()
    sync_state_set_epoch: int = 0


class ReplicaIdentity(Payload, frozen=True, kw_only=True):
    """One replica of a ``ReplicasInfo`` (docs/reference-behaviour.md §5.7)."""

    broker_name: str
    broker_id: int
    broker_address: str
    alive: bool


class ReplicasInfo(Payload, frozen=True, kw_only=True):
    """One broker set of a ``SyncStateDataPayload`` (docs/reference-behaviour.md §5.7)."""

    master_broker_id: int | None = None
    master_address: str | None = None
    master_epoch: int = 0
    sync_state_set_epoch: int = 0
    in_sync_replicas: tuple[ReplicaIdentity, ...] = ()
    not_in_sync_replicas: tuple[ReplicaIdentity, ...] = ()


class SyncStateDataPayload(Payload, frozen=True, kw_only=True):
    """The reply of getSyncStateData: a ``ReplicasInfo`` per broker set (docs/reference-behaviour.md §5.7)."""

    replicas_info_table: dict[str, ReplicasInfo]


class NotLeaderPayload(Payload, frozen=True, kw_only=True):
    """The payload of code 2007: the leader as this node knows it.

    Null when unknown, or when this node was elected but does not serve yet.
    """

    leader_id: str | None = None
    leader_address: str | None = None


class ControllerMetadataPayload(Payload, frozen=True, kw_only=True):
    """The reply of getControllerMetadata: the leader and the peers as one node sees them.

    docs/reference-behaviour.md §5.8; any node answers it.
    """

    group: str
    leader_id: str | None = None
    leader_address: str | None = None
    is_leader: bool = False
    peers: str = ""
    self_id: str = ""
    self_address: str = ""


class GroupsPayload(Payload, frozen=True, kw_only=True):
    """The reply of ``GET /v1/groups``: the broker sets of each cluster."""

    clusters: dict[str, list[str]]


class TopicQueueData(Payload, frozen=True, kw_only=True):
    """A topic's queues in one broker set (RocketMQ's ``QueueData``)."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0


class TopicBrokerData(BrokerMemberGroup, frozen=True, kw_only=True):
    """One broker set of a route (RocketMQ's ``BrokerData``): its cluster and addresses, 0 the master."""


class TopicRoutePayload(Payload, frozen=True, kw_only=True):
    """The reply of topicRoute (RocketMQ's ``TopicRouteData``): registered broker sets only."""

    topic: str
    broker_datas: tuple[TopicBrokerData, ...] = ()
    queue_datas: tuple[TopicQueueData, ...] = ()


class TopicListPayload(Payload, frozen=True, kw_only=True):
    """The reply of topicList: every topic, its queues in the registered broker sets, and their clusters."""

    topic_list: tuple[str, ...] = ()
    topic_queues: dict[str, tuple[TopicQueueData, ...]] = msgspec.field(default_factory=dict)
    clusters: dict[str, str] = msgspec.field(default_factory=dict)
    """Broker set -> its cluster, for the sets the queues name."""
    consumer_groups: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    """Topic -> the consumer groups with committed offsets in it (§13), for the listed topics."""


class UpdateTopicPayload(Payload, frozen=True, kw_only=True):
    """The reply of updateTopic: the topic's queues and the broker sets (and masters) that hold them."""

    topic_name: str
    cluster_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    broker_names: tuple[str, ...] = ()
    master_addresses: dict[str, str | None] = msgspec.field(default_factory=dict)


class RoleChangedMessage(MasterView, frozen=True, kw_only=True):
    """The ``roleChanged`` push of a broker session (docs/reference-behaviour.md §7.4).

    It carries the elect reply's master fields, for one broker set.
    """

    type: str = "roleChanged"
    cluster_name: str | None = None
    broker_name: str | None = None


# The reply envelope lives in ``mqha.wire.reply``; re-exported here, its home for every caller.
from mqha.wire.reply import Reply, decode_reply  # noqa: E402
