"""Log records of the controller as wire structs, and their codec (docs/architecture.md §8, §11 rules 4, 7).

What each record means and which compare-and-set it carries is ``mqha.controller.records``' table; this
module is only their shape and encoding. Encoding (our own, readable without PySyncObj): UTF-8 JSON
object with ``"record"`` (type name, the msgspec tag), ``"version"`` (schema version of that type) and
the fields in camelCase, keys sorted, no spaces, id sets as sorted arrays (non-ASCII text as UTF-8,
where earlier journals hold ``\\u`` escapes: both decode alike). A decoder reads every version up to
the one it knows and rejects newer ones (``RecordFormatError``).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

import msgspec

from mqha.errors import ProtocolError
from mqha.wire.codec import decode_json, encode, remark_for
from mqha.wire.types import (
    MAX_NAME_LIST,
    MAX_STORED_NAME_LENGTH,
    Epoch,
    Offset,
    StoredAddress,
    StoredBrokerId,
    StoredCount,
    StoredIdSet,
    StoredName,
    StoredNameList,
)

__all__ = [
    "RECORD_TYPES",
    "AckedDataLost",
    "AclEntry",
    "AlterSyncStateSetRecord",
    "ApplyBrokerIdRecord",
    "CleanBrokerDataRecord",
    "ConsumerOffsetEntry",
    "DeleteAclUserRecord",
    "DeleteTopicRecord",
    "ElectMasterRecord",
    "NoopRecord",
    "PutAclPolicyRecord",
    "PutAclUserRecord",
    "Record",
    "RecordFormatError",
    "UpdateBrokerAddressRecord",
    "UpdateConsumerOffsetRecord",
    "UpdateTopicRecord",
    "decode_record",
    "encode_record",
    "record_from_json",
]


class RecordFormatError(ProtocolError):
    """Bytes that are not a record of a type and version we read."""


class _Record(msgspec.Struct, frozen=True, rename="camel", tag_field="record", forbid_unknown_fields=True):
    """Base of the records: tagged by ``"record"``, strict, camelCase."""

    TYPE: ClassVar[str]
    VERSION: ClassVar[int] = 1


def _ids(value: Any) -> frozenset[int]:
    return value if isinstance(value, frozenset) else frozenset(value)


class NoopRecord(_Record, frozen=True, tag="Noop"):
    """A new leader's barrier (docs/reference-behaviour.md §3.3).

    Committing it means every earlier entry is applied.
    """

    TYPE: ClassVar[str] = "Noop"

    tag: str = ""
    """Free text the proposer uses to recognise its own barrier (e.g. node id and term)."""
    version: int = 1


class ApplyBrokerIdRecord(_Record, frozen=True, tag="ApplyBrokerId"):
    """Register ``broker_id`` in a set, creating the set when it is unknown.

    docs/reference-behaviour.md §4 event 2.
    """

    TYPE: ClassVar[str] = "ApplyBrokerId"

    cluster_name: StoredName
    broker_name: StoredName
    broker_id: StoredBrokerId
    broker_address: StoredAddress
    register_check_code: StoredAddress
    version: int = 1


class UpdateBrokerAddressRecord(_Record, frozen=True, tag="UpdateBrokerAddress"):
    """Replace the addresses of a registered id, keeping its check code.

    docs/reference-behaviour.md §4 event 6.
    """

    TYPE: ClassVar[str] = "UpdateBrokerAddress"

    cluster_name: StoredName
    broker_name: StoredName
    broker_id: StoredBrokerId
    broker_address: StoredAddress
    ha_address: StoredAddress | None = None
    """``None`` keeps the stored HA address."""
    version: int = 1


class AckedDataLost(msgspec.Struct, frozen=True, rename="camel", forbid_unknown_fields=True):
    """Names acknowledged offsets ``[fromOffset, toOffset)`` an election declared lost.

    Gone from every replica (docs/architecture.md §3.2)."""

    from_offset: Offset
    to_offset: Offset


class ElectMasterRecord(_Record, frozen=True, tag="ElectMaster"):
    """Set the master (and SyncStateSet = {master}), or clear it (docs/reference-behaviour.md §4 event 3).

    Version 2 adds ``ackedWatermark`` and ``ackedDataLost`` (docs/architecture.md §3.2, §9.6); a version 1
    record reads as watermark -1 (nothing known) and no loss.
    """

    TYPE: ClassVar[str] = "ElectMaster"
    VERSION: ClassVar[int] = 2

    cluster_name: StoredName
    broker_name: StoredName
    new_master_broker_id: StoredBrokerId | None
    """``None``: no candidate; the master is cleared and the SyncStateSet kept."""
    expected_master_epoch: Epoch
    expected_sync_state_set_epoch: Epoch
    unclean: bool = False
    """Informational: the new master was taken from outside the SyncStateSet."""
    acked_watermark: Offset = -1
    """The decision's watermark W: the highest offset it knew acknowledged (-1: none known)."""
    acked_data_lost: AckedDataLost | None = None
    """Set when the new master lacks acknowledged data no live replica holds: the range is declared lost."""
    version: int = 2


class AlterSyncStateSetRecord(_Record, frozen=True, tag="AlterSyncStateSet"):
    """Replace the SyncStateSet on behalf of its master (docs/reference-behaviour.md §4 event 1).

    Version 2 adds ``confirmOffset``, the master's confirm offset when it proposed (the credit of the
    members it removes, docs/architecture.md §3.2); version 1 reads as None (not reported).
    Version 3 adds ``releaseEligible``, which empties the ELR (the master acknowledges past its credits
    next); versions 1 and 2 read as false.
    """

    TYPE: ClassVar[str] = "AlterSyncStateSet"
    VERSION: ClassVar[int] = 3

    broker_name: StoredName
    master_broker_id: StoredBrokerId
    new_sync_state_set: StoredIdSet
    expected_master_epoch: Epoch
    expected_sync_state_set_epoch: Epoch
    confirm_offset: Offset | None = None
    release_eligible: bool = False
    version: int = 3

    def __post_init__(self) -> None:
        if not isinstance(self.new_sync_state_set, frozenset):
            msgspec.structs.force_setattr(self, "new_sync_state_set", _ids(self.new_sync_state_set))


class CleanBrokerDataRecord(_Record, frozen=True, tag="CleanBrokerData"):
    """Remove some ids of a set, or (``broker_ids`` None) the whole set.

    docs/reference-behaviour.md §4 event 5.
    """

    TYPE: ClassVar[str] = "CleanBrokerData"

    cluster_name: StoredName | None
    broker_name: StoredName
    broker_ids: StoredIdSet | None
    expected_master_epoch: Epoch
    expected_sync_state_set_epoch: Epoch
    version: int = 1

    def __post_init__(self) -> None:
        if self.broker_ids is not None and not isinstance(self.broker_ids, frozenset):
            msgspec.structs.force_setattr(self, "broker_ids", _ids(self.broker_ids))


class UpdateTopicRecord(_Record, frozen=True, tag="UpdateTopic"):
    """Create a topic, or set its queues, in the named broker sets (``mqadmin updateTopic``).

    docs/architecture.md §4.5. The sets are named by the decision (a cluster's sets when it was taken), so
    apply needs no look-up; the other sets' entries stay as they are.
    """

    TYPE: ClassVar[str] = "UpdateTopic"

    topic_name: StoredName
    broker_names: StoredNameList
    read_queue_nums: StoredCount
    write_queue_nums: StoredCount
    perm: StoredCount
    version: int = 1


class DeleteTopicRecord(_Record, frozen=True, tag="DeleteTopic"):
    """Remove a topic's queues from the named broker sets; a topic left without any is gone.

    docs/architecture.md §4.5 (``mqadmin deleteTopic``).
    """

    TYPE: ClassVar[str] = "DeleteTopic"

    topic_name: StoredName
    broker_names: StoredNameList
    version: int = 1


class ConsumerOffsetEntry(msgspec.Struct, frozen=True, rename="camel", forbid_unknown_fields=True):
    """One consumer group's committed position in one queue, as records and snapshots hold it.

    Every message of the queue below ``commit_offset`` (a commit-log offset, docs/architecture.md §4.4)
    is acknowledged by the group."""

    consumer_group: StoredName
    topic: StoredName
    broker_name: StoredName
    queue_id: StoredCount
    commit_offset: StoredCount

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.consumer_group, self.topic, self.broker_name, self.queue_id)


class UpdateConsumerOffsetRecord(_Record, frozen=True, tag="UpdateConsumerOffset"):
    """Raise consumer groups' committed positions (RocketMQ's UPDATE_CONSUMER_OFFSET, many at once).

    docs/architecture.md §4.5, §13. No compare-and-set: apply keeps the larger of the stored and the
    recorded offset per (consumer group, topic, broker set, queue), so an offset never moves back and a
    replayed or reordered record changes nothing.
    """

    TYPE: ClassVar[str] = "UpdateConsumerOffset"

    offsets: Annotated[tuple[ConsumerOffsetEntry, ...], msgspec.Meta(max_length=MAX_NAME_LIST)]
    version: int = 1


AclText = Annotated[str, msgspec.Meta(max_length=MAX_STORED_NAME_LENGTH + 8)]
"""A resource key, an action, a decision or a source IP range of an ACL entry (checked by the decision
in ``mqha.security.acl`` before it is recorded; stored as given)."""
AclTexts = Annotated[tuple[AclText, ...], msgspec.Meta(max_length=MAX_NAME_LIST)]


class AclEntry(msgspec.Struct, frozen=True, rename="camel", forbid_unknown_fields=True):
    """One entry of a subject's ACL policy as records and snapshots hold it.

    RocketMQ's ``PolicyEntryInfo`` fields (docs/architecture.md §12.11)."""

    resource: AclText
    actions: AclTexts
    decision: AclText
    source_ips: AclTexts = ()


class PutAclUserRecord(_Record, frozen=True, tag="PutAclUser"):
    """Create an ACL user or replace its type and password (``mqadmin createUser`` / ``updateUser``).

    docs/architecture.md §12.11. No compare-and-set: the operator's latest word wins. The password is
    sealed by the leader before it is recorded (``mqha.security.sealed``): the log and the snapshots
    never hold it in clear.
    """

    TYPE: ClassVar[str] = "PutAclUser"

    username: StoredName
    user_type: Literal["Super", "Normal"]
    sealed_password: Annotated[str, msgspec.Meta(max_length=4096)]
    version: int = 1


class DeleteAclUserRecord(_Record, frozen=True, tag="DeleteAclUser"):
    """Remove an ACL user and its policy (``mqadmin deleteUser``); idempotent."""

    TYPE: ClassVar[str] = "DeleteAclUser"

    username: StoredName
    version: int = 1


class PutAclPolicyRecord(_Record, frozen=True, tag="PutAclPolicy"):
    """Set a subject's whole policy; no entries removes it.

    ``createAcl`` / ``updateAcl`` / ``deleteAcl`` are merged by the decision. Last write wins; the
    write path takes one subject at a time."""

    TYPE: ClassVar[str] = "PutAclPolicy"

    username: StoredName
    entries: Annotated[tuple[AclEntry, ...], msgspec.Meta(max_length=MAX_NAME_LIST)]
    version: int = 1


Record = (
    NoopRecord
    | ApplyBrokerIdRecord
    | UpdateBrokerAddressRecord
    | ElectMasterRecord
    | AlterSyncStateSetRecord
    | CleanBrokerDataRecord
    | UpdateTopicRecord
    | DeleteTopicRecord
    | UpdateConsumerOffsetRecord
    | PutAclUserRecord
    | DeleteAclUserRecord
    | PutAclPolicyRecord
)

RECORD_TYPES: tuple[type[Any], ...] = (
    NoopRecord,
    ApplyBrokerIdRecord,
    UpdateBrokerAddressRecord,
    ElectMasterRecord,
    AlterSyncStateSetRecord,
    CleanBrokerDataRecord,
    UpdateTopicRecord,
    DeleteTopicRecord,
    UpdateConsumerOffsetRecord,
    PutAclUserRecord,
    DeleteAclUserRecord,
    PutAclPolicyRecord,
)
_BY_TAG: dict[str, type[Any]] = {cls.TYPE: cls for cls in RECORD_TYPES}
_TAG = re.compile(r'"record"\s*:\s*"([A-Za-z]+)"')


def encode_record(record: Record) -> bytes:
    """The log bytes of a record."""
    return encode(record, sort_keys=True)


def _error(data: bytes, exc: msgspec.ValidationError) -> RecordFormatError:
    text = str(exc)
    if text.endswith("`$.record`") or "missing required field `record`" in text:
        return RecordFormatError(f"unknown record type: {text}")
    found = _TAG.search(data.decode("utf-8", "replace"))
    cls = _BY_TAG.get(found.group(1)) if found else None
    if cls is None:
        return RecordFormatError(remark_for(NoopRecord, exc).replace("NoopRecord", "record", 1))
    if text.endswith("`$.version`"):
        return RecordFormatError(f"{cls.TYPE}: bad version ({text})")
    remark = remark_for(cls, exc)
    # "field 'x' of ElectMasterRecord: ..." -> "ElectMaster: field 'x': ..." (the log's own wording)
    remark = remark.replace(f" of {cls.__name__}:", ":").replace(f" in {cls.__name__}", "")
    remark = remark.replace("missing required field", "missing field")
    return RecordFormatError(f"{cls.TYPE}: {remark}")


def decode_record(data: bytes) -> Record:
    """Inverse of ``encode_record``; raises ``RecordFormatError`` on anything else."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise RecordFormatError(f"expected bytes, got {type(data).__name__}")
    data = bytes(data)
    try:
        record: Record = decode_json(data, Record)
    except msgspec.ValidationError as exc:
        if "Expected `object`" in str(exc):
            raise RecordFormatError("record must be a JSON object") from None
        raise _error(data, exc) from None
    except msgspec.DecodeError as exc:
        raise RecordFormatError(f"record is not JSON: {exc}") from None
    if not 1 <= record.version <= type(record).VERSION:
        if record.version < 1:
            raise RecordFormatError(f"{record.TYPE}: bad version {record.version!r}")
        raise RecordFormatError(f"{record.TYPE}: version {record.version} is newer than {record.VERSION}")
    return record


def record_from_json(doc: Any) -> Record:
    """A record from its decoded JSON object; raises ``RecordFormatError``."""
    try:
        data = encode(doc)
    except TypeError as exc:
        raise RecordFormatError(f"record is not JSON: {exc}") from None
    return decode_record(data)
