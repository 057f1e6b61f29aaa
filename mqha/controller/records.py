"""Log records of the controller: self-describing deltas with a schema version (docs/architecture.md §11 rules
4, 7).

A record says what changes and what it was decided against; ``mqha.controller.apply`` checks that
(compare-and-set) and alone bumps the epochs. Which expectation each record carries:

| record                      | CAS at apply time                                              |
|-----------------------------|----------------------------------------------------------------|
| ApplyBrokerIdRecord         | the id is free, or held with the same register check code      |
| UpdateBrokerAddressRecord   | the set and the id are still registered                        |
| ElectMasterRecord           | masterEpoch and syncStateSetEpoch equal the expected ones      |
| AlterSyncStateSetRecord     | master id, masterEpoch, syncStateSetEpoch equal the expected   |
| CleanBrokerDataRecord       | masterEpoch and syncStateSetEpoch equal the expected ones      |
| NoopRecord                  | nothing (a new leader's barrier)                               |

The first two never touch an epoch, so they do not carry any: fencing them on epochs would only
reject a registration that raced with an unrelated election.

Encoding (our own, readable without PySyncObj): UTF-8 JSON object with ``"record"`` (type name),
``"version"`` (schema version of that type) and the fields in camelCase, keys sorted, no spaces
(orjson; non-ASCII text as UTF-8, where earlier journals hold ``\\u`` escapes: both decode alike).
A decoder reads every version up to the one it knows and rejects newer ones (``RecordFormatError``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import orjson

from mqha.errors import ProtocolError


class RecordFormatError(ProtocolError):
    """Bytes that are not a record of a type and version we read."""


@dataclass(frozen=True)
class NoopRecord:
    """A new leader's barrier (docs/reference-behaviour.md §3.3): committing it means every earlier entry is
    applied."""

    TYPE: ClassVar[str] = "Noop"
    VERSION: ClassVar[int] = 1

    tag: str = ""
    """Free text the proposer uses to recognise its own barrier (e.g. node id and term)."""


@dataclass(frozen=True)
class ApplyBrokerIdRecord:
    """Register ``broker_id`` in a set, creating the set when it is unknown (docs/reference-behaviour.md §4
    event 2)."""

    TYPE: ClassVar[str] = "ApplyBrokerId"
    VERSION: ClassVar[int] = 1

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_address: str
    register_check_code: str


@dataclass(frozen=True)
class UpdateBrokerAddressRecord:
    """Replace the addresses of a registered id, keeping its check code (docs/reference-behaviour.md §4 event
    6)."""

    TYPE: ClassVar[str] = "UpdateBrokerAddress"
    VERSION: ClassVar[int] = 1

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_address: str
    ha_address: str | None = None
    """``None`` keeps the stored HA address."""


@dataclass(frozen=True)
class ElectMasterRecord:
    """Set the master (and SyncStateSet = {master}), or clear it (docs/reference-behaviour.md §4 event 3)."""

    TYPE: ClassVar[str] = "ElectMaster"
    VERSION: ClassVar[int] = 1

    cluster_name: str
    broker_name: str
    new_master_broker_id: int | None
    """``None``: no candidate; the master is cleared and the SyncStateSet kept."""
    expected_master_epoch: int
    expected_sync_state_set_epoch: int
    unclean: bool = False
    """Informational: the new master was taken from outside the SyncStateSet."""


@dataclass(frozen=True)
class AlterSyncStateSetRecord:
    """Replace the SyncStateSet on behalf of its master (docs/reference-behaviour.md §4 event 1)."""

    TYPE: ClassVar[str] = "AlterSyncStateSet"
    VERSION: ClassVar[int] = 1

    broker_name: str
    master_broker_id: int
    new_sync_state_set: frozenset[int]
    expected_master_epoch: int
    expected_sync_state_set_epoch: int

    def __post_init__(self) -> None:
        if not isinstance(self.new_sync_state_set, frozenset):
            object.__setattr__(self, "new_sync_state_set", frozenset(self.new_sync_state_set))


@dataclass(frozen=True)
class CleanBrokerDataRecord:
    """Remove some ids of a set, or (``broker_ids`` None) the whole set (docs/reference-behaviour.md §4 event
    5)."""

    TYPE: ClassVar[str] = "CleanBrokerData"
    VERSION: ClassVar[int] = 1

    cluster_name: str | None
    broker_name: str
    broker_ids: frozenset[int] | None
    expected_master_epoch: int
    expected_sync_state_set_epoch: int

    def __post_init__(self) -> None:
        if self.broker_ids is not None and not isinstance(self.broker_ids, frozenset):
            object.__setattr__(self, "broker_ids", frozenset(self.broker_ids))


Record = (
    NoopRecord
    | ApplyBrokerIdRecord
    | UpdateBrokerAddressRecord
    | ElectMasterRecord
    | AlterSyncStateSetRecord
    | CleanBrokerDataRecord
)

RECORD_TYPES: tuple[type[Any], ...] = (
    NoopRecord,
    ApplyBrokerIdRecord,
    UpdateBrokerAddressRecord,
    ElectMasterRecord,
    AlterSyncStateSetRecord,
    CleanBrokerDataRecord,
)


# --------------------------------------------------------------------------------------------------
# Codec. Field table per type: (attribute, json name, kind). Kinds: str, int, bool, ?str, ?int,
# ids (sorted int array <-> frozenset), ?ids.

_FIELDS: dict[type[Any], tuple[tuple[str, str, str], ...]] = {
    NoopRecord: (("tag", "tag", "str"),),
    ApplyBrokerIdRecord: (
        ("cluster_name", "clusterName", "str"),
        ("broker_name", "brokerName", "str"),
        ("broker_id", "brokerId", "int"),
        ("broker_address", "brokerAddress", "str"),
        ("register_check_code", "registerCheckCode", "str"),
    ),
    UpdateBrokerAddressRecord: (
        ("cluster_name", "clusterName", "str"),
        ("broker_name", "brokerName", "str"),
        ("broker_id", "brokerId", "int"),
        ("broker_address", "brokerAddress", "str"),
        ("ha_address", "haAddress", "?str"),
    ),
    ElectMasterRecord: (
        ("cluster_name", "clusterName", "str"),
        ("broker_name", "brokerName", "str"),
        ("new_master_broker_id", "newMasterBrokerId", "?int"),
        ("expected_master_epoch", "expectedMasterEpoch", "int"),
        ("expected_sync_state_set_epoch", "expectedSyncStateSetEpoch", "int"),
        ("unclean", "unclean", "bool"),
    ),
    AlterSyncStateSetRecord: (
        ("broker_name", "brokerName", "str"),
        ("master_broker_id", "masterBrokerId", "int"),
        ("new_sync_state_set", "newSyncStateSet", "ids"),
        ("expected_master_epoch", "expectedMasterEpoch", "int"),
        ("expected_sync_state_set_epoch", "expectedSyncStateSetEpoch", "int"),
    ),
    CleanBrokerDataRecord: (
        ("cluster_name", "clusterName", "?str"),
        ("broker_name", "brokerName", "str"),
        ("broker_ids", "brokerIds", "?ids"),
        ("expected_master_epoch", "expectedMasterEpoch", "int"),
        ("expected_sync_state_set_epoch", "expectedSyncStateSetEpoch", "int"),
    ),
}

_BY_NAME: dict[str, type[Any]] = {cls.TYPE: cls for cls in RECORD_TYPES}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_ids(value: Any) -> frozenset[int]:
    if not isinstance(value, list) or not all(_is_int(v) for v in value):
        raise RecordFormatError("expected an array of integers")
    return frozenset(value)


def _check(predicate: Callable[[Any], bool], label: str) -> Callable[[Any], Any]:
    def parse(value: Any) -> Any:
        if not predicate(value):
            raise RecordFormatError(f"expected {label}")
        return value

    return parse


_PARSERS: dict[str, Callable[[Any], Any]] = {
    "str": _check(lambda v: isinstance(v, str), "a string"),
    "int": _check(_is_int, "an integer"),
    "bool": _check(lambda v: isinstance(v, bool), "a boolean"),
    "ids": _check_ids,
}


def _parse(kind: str, value: Any) -> Any:
    if kind.startswith("?"):
        return None if value is None else _PARSERS[kind[1:]](value)
    return _PARSERS[kind](value)


def _dump(kind: str, value: Any) -> Any:
    if value is None:
        return None
    if kind.endswith("ids"):
        return sorted(value)
    return value


def encode_record(record: Record) -> bytes:
    """The log bytes of a record."""
    fields = _FIELDS[type(record)]
    doc: dict[str, Any] = {"record": record.TYPE, "version": record.VERSION}
    for attr, name, kind in fields:
        doc[name] = _dump(kind, getattr(record, attr))
    return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)


def record_from_json(doc: Mapping[str, Any]) -> Record:
    """A record from its decoded JSON object; raises ``RecordFormatError``."""
    type_name = doc.get("record")
    cls = _BY_NAME.get(type_name) if isinstance(type_name, str) else None
    if cls is None:
        raise RecordFormatError(f"unknown record type {type_name!r}")
    version = doc.get("version")
    if not _is_int(version) or version < 1:
        raise RecordFormatError(f"{cls.TYPE}: bad version {version!r}")
    if version > cls.VERSION:
        raise RecordFormatError(f"{cls.TYPE}: version {version} is newer than {cls.VERSION}")
    fields = _FIELDS[cls]
    known = {"record", "version"} | {name for _, name, _ in fields}
    for key in doc:
        if key not in known:
            raise RecordFormatError(f"{cls.TYPE}: unknown field {key!r}")
    kwargs: dict[str, Any] = {}
    for attr, name, kind in fields:
        if name not in doc:
            raise RecordFormatError(f"{cls.TYPE}: missing field {name!r}")
        try:
            kwargs[attr] = _parse(kind, doc[name])
        except RecordFormatError as exc:
            raise RecordFormatError(f"{cls.TYPE}: field {name!r}: {exc}") from None
    record: Record = cls(**kwargs)
    return record


def decode_record(data: bytes) -> Record:
    """Inverse of ``encode_record``; raises ``RecordFormatError`` on anything else."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise RecordFormatError(f"expected bytes, got {type(data).__name__}")
    try:
        doc = orjson.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, orjson.JSONDecodeError) as exc:
        raise RecordFormatError(f"record is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise RecordFormatError("record must be a JSON object")
    return record_from_json(doc)
