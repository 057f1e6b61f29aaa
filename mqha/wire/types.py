"""Named, constrained wire types (docs/architecture.md §8): one place for every range and size rule.

Each alias is an ``Annotated`` type that msgspec checks while decoding, so a value outside its range
is refused by the decoder with a remark naming the field and the rule (``mqha.wire.codec``; a
``Meta(extra={"rule": ...})`` text is what the remark says). Java ``long`` is the reference's type for
ids, epochs and offsets, hence the int64 bounds. Names follow RocketMQ's topic rule and addresses
parse as ``host:port``, checked on every request before anything is proposed to Raft
(docs/architecture.md §8).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Annotated, Any, TypeVar

from msgspec import Meta

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
"""Java ``Integer.MAX_VALUE``: the election priority of a broker that sends none (lowest priority)."""
MAX_BROKER_ID = INT64_MAX - 1
"""The largest broker id a request may carry: the next id of a set (its largest id + 1) always fits a
Java ``long``, so ``next-id`` can always answer. A set holding this id is full (its next id, 2^63-1,
is refused by apply-id)."""

_END = r"(?![\s\S])"
"""The end of the text (``$`` also matches before a final newline; ``\\Z`` is not a JSON Schema regex)."""
NAME_RULE = "1..127 characters of [%|a-zA-Z0-9_-]"
NAME_PATTERN = rf"^[%|a-zA-Z0-9_-]+{_END}"
"""RocketMQ's topic characters (``TopicValidator``), for topics and for cluster and broker names."""
MAX_NAME_LENGTH = 127
"""Topics, cluster and broker-set names: RocketMQ's topic bound, which its names live under too."""
MAX_STORED_NAME_LENGTH = 255
"""Names in log records and snapshots: the bound before the character rule (journals still replay)."""
MAX_ADDRESS_LENGTH = 1024
"""``host:port`` addresses and the ``address;millis`` register check code."""
MAX_ID_SET = 4096
"""Broker ids in one SyncStateSet or clean request; a broker set is far smaller."""
MAX_NAME_LIST = 65536
"""Broker names in one GetSyncStateData request."""

_PORT = r"(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})"
_HOST = r"(?:[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+(?:%[A-Za-z0-9._-]+)?\])"
ADDRESS_RULE = "host:port (a host name, IPv4 or [IPv6] address; port 1..65535)"
ADDRESS_PATTERN = rf"^{_HOST}:{_PORT}{_END}"
CHECK_CODE_RULE = f"address;millis[;storeId] with address {ADDRESS_RULE}, storeId 32 lowercase hex digits"
CHECK_CODE_PATTERN = rf"^{_HOST}:{_PORT};[0-9]{{1,19}}(?:;[0-9a-f]{{32}})?{_END}"

Int64 = Annotated[int, Meta(ge=INT64_MIN, le=INT64_MAX)]
BrokerId = Annotated[int, Meta(ge=-1, le=MAX_BROKER_ID)]
"""A broker id in a request; -1 is the reference's "none" (ElectMaster), 0 and below are refused by
the core; at most ``MAX_BROKER_ID``."""
Epoch = Annotated[int, Meta(ge=-1, le=INT64_MAX)]
"""A master or SyncStateSet epoch; -1 is "none yet" (a heartbeat before the first election)."""
Offset = Annotated[int, Meta(ge=-1, le=INT64_MAX)]
"""A commit-log offset; -1 is "unknown"."""
TimeoutMs = Annotated[int, Meta(ge=0, le=INT64_MAX)]
Priority = Annotated[int, Meta(ge=INT64_MIN, le=INT64_MAX)]
_NAME = Meta(pattern=NAME_PATTERN, min_length=1, max_length=MAX_NAME_LENGTH, extra={"rule": NAME_RULE})
ClusterName = Annotated[str, _NAME]
BrokerName = Annotated[str, _NAME]
TopicName = Annotated[str, _NAME]
MAX_QUEUE_NUMS = 1024
"""Read or write queues of a topic in one broker set (RocketMQ has no bound; 1024 keeps routes small)."""
QueueNums = Annotated[int, Meta(ge=0, le=MAX_QUEUE_NUMS)]
ConsumerGroupName = Annotated[str, _NAME]
"""A consumer group (RocketMQ's group names follow the topic rule)."""
QueueId = Annotated[int, Meta(ge=0, lt=MAX_QUEUE_NUMS)]
"""A queue of a topic in one broker set: 0..MAX_QUEUE_NUMS-1."""
QueueOffset = Annotated[int, Meta(ge=0, le=INT64_MAX)]
"""A position in a queue: a commit-log offset (docs/architecture.md §4.4), never negative."""
PERM_RULE = "RocketMQ's PermName bits: 4 read, 2 write, 1 inherit (0..7)"
Perm = Annotated[int, Meta(ge=0, le=7, extra={"rule": PERM_RULE})]
OptionalName = Annotated[
    str,
    Meta(
        pattern=NAME_PATTERN.replace("]+", "]*"),
        max_length=MAX_NAME_LENGTH,
        extra={"rule": f"empty or {NAME_RULE}"},
    ),
]
"""A name whose empty value means "not given" (the body's ``brokerName`` when the path names it)."""
Address = Annotated[
    str, Meta(pattern=ADDRESS_PATTERN, max_length=MAX_ADDRESS_LENGTH, extra={"rule": ADDRESS_RULE})
]
RAFT_ID_RULE = f"<{ADDRESS_RULE}>/<32 lowercase hex digits: the storageId>"
RAFT_ID_PATTERN = rf"^{_HOST}:{_PORT}/[0-9a-f]{{32}}{_END}"
RaftId = Annotated[
    str, Meta(pattern=RAFT_ID_PATTERN, max_length=MAX_ADDRESS_LENGTH, extra={"rule": RAFT_ID_RULE})
]
"""A controller's Raft identity: its Raft address and its store's id (docs/raft.md §10)."""
CheckCode = Annotated[
    str, Meta(pattern=CHECK_CODE_PATTERN, max_length=MAX_ADDRESS_LENGTH, extra={"rule": CHECK_CODE_RULE})
]
"""``registerCheckCode``: ``<brokerAddress>;<epochMillis>`` (docs/reference-behaviour.md §5.2), mqha's
brokers add ``;<storeId>`` (docs/architecture.md §9.4)."""
StoreId = Annotated[str, Meta(pattern=rf"^[0-9a-f]{{32}}{_END}", extra={"rule": "32 lowercase hex digits"})]
"""A broker store's id (docs/architecture.md §9.4)."""
IdSet = Annotated[frozenset[BrokerId], Meta(max_length=MAX_ID_SET)]
ReplicaCount = Annotated[int, Meta(ge=1, le=MAX_ID_SET)]
"""``inSyncReplicas``: how many replicas (the master included) an acknowledgement needs."""
INCARNATION_RULE = "1..64 characters of [0-9a-zA-Z_-] (mqbroker sends 32 lowercase hex digits)"
Incarnation = Annotated[
    str,
    Meta(pattern=rf"^[0-9a-zA-Z_-]+{_END}", min_length=1, max_length=64, extra={"rule": INCARNATION_RULE}),
]
"""A broker process's incarnation (docs/architecture.md §3.2): new at every start."""
IncarnationMap = Annotated[dict[BrokerId, Incarnation], Meta(max_length=MAX_ID_SET)]
NameList = Annotated[tuple[BrokerName, ...], Meta(max_length=MAX_NAME_LIST)]
IdsToClean = Annotated[
    Annotated[tuple[int, ...], Meta(max_length=MAX_ID_SET)] | str,
    Meta(
        extra={"label": "an array of integers or a ';'-separated string"},
        extra_json_schema={"examples": [[1, 2], "1;2;3"]},
    ),
]
"""Our JSON carries a list of ids; the RocketMQ ``"1;2;3"`` text is also accepted and parsed by the
controller, which answers 2009 on a malformed one (docs/reference-behaviour.md §5.10)."""

# Log records and snapshots: the bounds before the name, address and id rules above, so that a journal
# written earlier still replays; new entries come only from requests, which carry the strict types.
StoredBrokerId = Annotated[int, Meta(ge=-1, le=INT64_MAX)]
StoredName = Annotated[str, Meta(max_length=MAX_STORED_NAME_LENGTH)]
StoredAddress = Annotated[str, Meta(max_length=MAX_ADDRESS_LENGTH)]
StoredIdSet = Annotated[frozenset[StoredBrokerId], Meta(max_length=MAX_ID_SET)]
StoredNameList = Annotated[tuple[StoredName, ...], Meta(max_length=MAX_NAME_LIST)]
StoredCount = Annotated[int, Meta(ge=0, le=INT64_MAX)]


_NAME_RE = re.compile(NAME_PATTERN)
_ADDRESS_RE = re.compile(ADDRESS_PATTERN)


def is_valid_name(text: str) -> bool:
    """Whether ``text`` follows the name rule (``NAME_RULE``), e.g. a config value or a topic."""
    return 0 < len(text) <= MAX_NAME_LENGTH and _NAME_RE.match(text) is not None  # _END: whole text


def is_valid_address(text: str) -> bool:
    """Whether ``text`` is a ``host:port`` address (``ADDRESS_RULE``)."""
    return len(text) <= MAX_ADDRESS_LENGTH and _ADDRESS_RE.match(text) is not None


K = TypeVar("K")
V = TypeVar("V")


class FrozenMap(Mapping[K, V]):
    """An immutable, hashable, picklable mapping; updates return a new map."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[K, V] | Iterable[tuple[K, V]] = ()) -> None:
        self._data: dict[K, V] = dict(data)

    def __getitem__(self, key: K) -> V:
        return self._data[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __hash__(self) -> int:
        return hash(frozenset(self._data.items()))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._data == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._data!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._data,))

    def set(self, key: K, value: V) -> FrozenMap[K, V]:
        data = dict(self._data)
        data[key] = value
        return type(self)(data)

    def remove(self, *keys: K) -> FrozenMap[K, V]:
        return type(self)({k: v for k, v in self._data.items() if k not in keys})


class IntKeyMap(FrozenMap[int, V]):
    """A ``FrozenMap`` keyed by broker id whose JSON form has decimal string keys.

    msgspec's deterministic encoder only sorts string-keyed dicts, so a wire field typed
    ``dict[int, V]`` holds one of these and ``mqha.wire.codec``'s encode hook writes it out.
    """

    __slots__ = ()

    def to_json(self) -> dict[str, V]:
        return {str(key): self._data[key] for key in sorted(self._data)}
