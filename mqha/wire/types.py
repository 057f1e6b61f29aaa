"""Named, constrained wire types (docs/architecture.md §8): one place for every range and size rule.

Each alias is an ``Annotated`` type that msgspec checks while decoding, so a value outside its range
is refused by the decoder with a remark naming the field and the rule (``mqha.wire.codec``). Java
``long`` is the reference's type for ids, epochs and offsets, hence the int64 bounds. The name rules
(character sets) of the security issue belong here too, next to the length bounds.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Annotated, Any, TypeVar

from msgspec import Meta

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
"""Java ``Integer.MAX_VALUE``: the election priority of a broker that sends none (lowest priority)."""

MAX_NAME_LENGTH = 255
"""Cluster, broker-set and controller names (RocketMQ bounds topics at 127; names are ours at 255)."""
MAX_ADDRESS_LENGTH = 1024
"""``host:port`` addresses and the ``address;millis`` register check code."""
MAX_ID_SET = 4096
"""Broker ids in one SyncStateSet or clean request; a broker set is far smaller."""
MAX_NAME_LIST = 65536
"""Broker names in one GetSyncStateData request."""

Int64 = Annotated[int, Meta(ge=INT64_MIN, le=INT64_MAX)]
BrokerId = Annotated[int, Meta(ge=-1, le=INT64_MAX)]
"""A broker id; -1 is the reference's "none" (ElectMaster), 0 and below are refused by the core."""
Epoch = Annotated[int, Meta(ge=-1, le=INT64_MAX)]
"""A master or SyncStateSet epoch; -1 is "none yet" (a heartbeat before the first election)."""
Offset = Annotated[int, Meta(ge=-1, le=INT64_MAX)]
"""A commit-log offset; -1 is "unknown"."""
TimeoutMs = Annotated[int, Meta(ge=0, le=INT64_MAX)]
Priority = Annotated[int, Meta(ge=INT64_MIN, le=INT64_MAX)]
ClusterName = Annotated[str, Meta(max_length=MAX_NAME_LENGTH)]
BrokerName = Annotated[str, Meta(max_length=MAX_NAME_LENGTH)]
Address = Annotated[str, Meta(max_length=MAX_ADDRESS_LENGTH)]
IdSet = Annotated[frozenset[BrokerId], Meta(max_length=MAX_ID_SET)]
NameList = Annotated[tuple[BrokerName, ...], Meta(max_length=MAX_NAME_LIST)]

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
