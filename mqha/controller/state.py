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
- ``master_epoch`` and ``sync_state_set_epoch`` never decrease while the set exists.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from mqha.errors import ProtocolError

K = TypeVar("K")
V = TypeVar("V")

SNAPSHOT_FORMAT = "mqha-controller-state"
SNAPSHOT_VERSION = 1


class SnapshotFormatError(ProtocolError):
    """Snapshot bytes that are not a controller state of a version we read."""


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
        return f"FrozenMap({self._data!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenMap, (self._data,))

    def set(self, key: K, value: V) -> FrozenMap[K, V]:
        data = dict(self._data)
        data[key] = value
        return FrozenMap(data)

    def remove(self, *keys: K) -> FrozenMap[K, V]:
        return FrozenMap({k: v for k, v in self._data.items() if k not in keys})


@dataclass(frozen=True)
class ReplicaInfo:
    """One registered replica: its API address, HA address and the check code it applied with."""

    address: str
    ha_address: str | None = None
    register_check_code: str = ""


@dataclass(frozen=True)
class BrokerGroupState:
    """One broker set (docs/reference-behaviour.md §1.2), keyed by ``broker_name`` in
    ``ControllerState.groups``."""

    cluster_name: str
    broker_name: str
    replicas: Mapping[int, ReplicaInfo] = field(default_factory=FrozenMap)
    master_broker_id: int | None = None
    master_epoch: int = 0
    sync_state_set: frozenset[int] = frozenset()
    sync_state_set_epoch: int = 0

    def __post_init__(self) -> None:
        # Accept plain dicts/sets from callers (tests, decoders) but store immutable values.
        if not isinstance(self.replicas, FrozenMap):
            object.__setattr__(self, "replicas", FrozenMap(self.replicas))
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
        return (
            f"{self.broker_name}({self.cluster_name}) master={master} masterEpoch={self.master_epoch} "
            f"sss=[{sss}] sssEpoch={self.sync_state_set_epoch} replicas=[{replicas}]"
        )


@dataclass(frozen=True)
class ControllerState:
    """Every broker set, plus the raft index of the last entry applied (for snapshots)."""

    groups: Mapping[str, BrokerGroupState] = field(default_factory=FrozenMap)
    applied_index: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.groups, FrozenMap):
            object.__setattr__(self, "groups", FrozenMap(self.groups))

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


# --------------------------------------------------------------------------------------------------
# Snapshot codec: versioned JSON, keys sorted so equal states give equal bytes.


def _group_to_json(group: BrokerGroupState) -> dict[str, Any]:
    return {
        "clusterName": group.cluster_name,
        "brokerName": group.broker_name,
        "replicas": [
            {
                "brokerId": broker_id,
                "address": info.address,
                "haAddress": info.ha_address,
                "registerCheckCode": info.register_check_code,
            }
            for broker_id, info in sorted(group.replicas.items())
        ],
        "masterBrokerId": group.master_broker_id,
        "masterEpoch": group.master_epoch,
        "syncStateSet": sorted(group.sync_state_set),
        "syncStateSetEpoch": group.sync_state_set_epoch,
    }


def encode_state(state: ControllerState) -> bytes:
    doc = {
        "format": SNAPSHOT_FORMAT,
        "version": SNAPSHOT_VERSION,
        "appliedIndex": state.applied_index,
        "groups": [_group_to_json(group) for _, group in sorted(state.groups.items())],
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("utf-8")


def _get(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], nullable: bool = False) -> Any:
    if key not in obj:
        raise SnapshotFormatError(f"snapshot: missing field '{key}'")
    value = obj[key]
    if value is None and nullable:
        return None
    if isinstance(value, bool) and kind is not bool:
        raise SnapshotFormatError(f"snapshot: field '{key}' has the wrong type")
    if not isinstance(value, kind):
        raise SnapshotFormatError(f"snapshot: field '{key}' has the wrong type")
    return value


def _int_list(obj: Mapping[str, Any], key: str) -> list[int]:
    values = _get(obj, key, list)
    if any(isinstance(v, bool) or not isinstance(v, int) for v in values):
        raise SnapshotFormatError(f"snapshot: field '{key}' must hold integers")
    return values


def _group_from_json(obj: Any) -> BrokerGroupState:
    if not isinstance(obj, dict):
        raise SnapshotFormatError("snapshot: a group must be an object")
    replicas: dict[int, ReplicaInfo] = {}
    for item in _get(obj, "replicas", list):
        if not isinstance(item, dict):
            raise SnapshotFormatError("snapshot: a replica must be an object")
        broker_id = _get(item, "brokerId", int)
        if broker_id in replicas:
            raise SnapshotFormatError(f"snapshot: duplicate broker id {broker_id}")
        replicas[broker_id] = ReplicaInfo(
            address=_get(item, "address", str),
            ha_address=_get(item, "haAddress", str, nullable=True),
            register_check_code=_get(item, "registerCheckCode", str),
        )
    return BrokerGroupState(
        cluster_name=_get(obj, "clusterName", str),
        broker_name=_get(obj, "brokerName", str),
        replicas=replicas,
        master_broker_id=_get(obj, "masterBrokerId", int, nullable=True),
        master_epoch=_get(obj, "masterEpoch", int),
        sync_state_set=frozenset(_int_list(obj, "syncStateSet")),
        sync_state_set_epoch=_get(obj, "syncStateSetEpoch", int),
    )


def decode_state(data: bytes) -> ControllerState:
    """Inverse of ``encode_state``; raises ``SnapshotFormatError`` on anything else."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise SnapshotFormatError(f"snapshot is not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != SNAPSHOT_FORMAT:
        raise SnapshotFormatError("not a controller state snapshot")
    version = _get(doc, "version", int)
    if version != SNAPSHOT_VERSION:
        raise SnapshotFormatError(f"unsupported snapshot version {version}")
    groups: dict[str, BrokerGroupState] = {}
    for item in _get(doc, "groups", list):
        group = _group_from_json(item)
        if group.broker_name in groups:
            raise SnapshotFormatError(f"snapshot: duplicate broker set {group.broker_name}")
        groups[group.broker_name] = group
    return ControllerState(groups=groups, applied_index=_get(doc, "appliedIndex", int))
