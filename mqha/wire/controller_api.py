"""Controller API bodies (docs/reference-behaviour.md §5, docs/architecture.md §3): requests, replies and
their payloads.

Field names on the wire are the spec's camelCase names; Python attributes are snake_case. Each field
declares its JSON name and a *kind* (how to check and convert the JSON value) in its dataclass
metadata, so one generic codec serves every message and the names live next to the attributes.

Requests (``from_json``) are strict: the body must be a JSON object, every required field present,
every value of the declared JSON type (``true`` is not an integer, ``1.0`` is not an integer), and no
unknown field. A violation raises ``RequestError(CONTROLLER_INVALID_REQUEST, remark)`` whose remark
names the field. Reply payloads ignore unknown fields (forward compatibility) but still check types;
a violation there is the controller's fault and raises ``RemoteProtocolError``.

Path parameters of the HTTP API (``brokerName`` of ``/v1/groups/{brokerName}/...``) are also accepted
as body fields, so the HTTP layer can merge the path into the body before parsing.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field
from typing import Any, ClassVar, Self

from mqha.codes import ResponseCode
from mqha.errors import RemoteProtocolError, RequestError

INT32_MAX = 2**31 - 1
"""Java ``Integer.MAX_VALUE``: the election priority of a broker that sends none (lowest priority)."""

DEFAULT_HEARTBEAT_TIMEOUT_MS = 10_000
"""``DEFAULT_BROKER_CHANNEL_EXPIRED_TIME`` (docs/reference-behaviour.md §7.1)."""


class _Invalid(Exception):
    """A JSON value failed its kind; carries the message without the field name."""


# --------------------------------------------------------------------------------------------------
# Kinds: check a JSON value and convert it to the attribute's Python value, and back.


@dataclass(frozen=True)
class Kind:
    label: str
    parse: Callable[[Any], Any]
    dump: Callable[[Any], Any]


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _expect(label: str, value: Any) -> _Invalid:
    return _Invalid(f"expected {label}, got {_type_name(value)}")


def _parse_str(value: Any) -> str:
    if not isinstance(value, str):
        raise _expect("a string", value)
    return value


def _parse_int(value: Any) -> int:
    # bool is an int subclass in Python but not an integer in JSON.
    if isinstance(value, bool) or not isinstance(value, int):
        raise _expect("an integer", value)
    return value


def _parse_bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _expect("a boolean", value)
    return value


def _identity(value: Any) -> Any:
    return value


STR = Kind("a string", _parse_str, _identity)
INT = Kind("an integer", _parse_int, _identity)
BOOL = Kind("a boolean", _parse_bool, _identity)


def nullable(kind: Kind) -> Kind:
    def parse(value: Any) -> Any:
        return None if value is None else kind.parse(value)

    def dump(value: Any) -> Any:
        return None if value is None else kind.dump(value)

    return Kind(f"{kind.label} or null", parse, dump)


def _parse_int_set(value: Any) -> frozenset[int]:
    if not isinstance(value, list):
        raise _expect("an array of integers", value)
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int):
            raise _Invalid(f"expected an array of integers, found {_type_name(item)}")
    return frozenset(value)


INT_SET = Kind("an array of integers", _parse_int_set, sorted)


def _parse_str_tuple(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise _expect("an array of strings", value)
    for item in value:
        if not isinstance(item, str):
            raise _Invalid(f"expected an array of strings, found {_type_name(item)}")
    return tuple(value)


STR_TUPLE = Kind("an array of strings", _parse_str_tuple, list)


def _parse_ids_to_clean(value: Any) -> tuple[int, ...] | str:
    # Our JSON carries a list of ids; the RocketMQ ``"1;2;3"`` text is also accepted and parsed by
    # the controller, which answers 2009 on a malformed one (docs/reference-behaviour.md §5.10).
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise _expect("an array of integers or a ';'-separated string", value)
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int):
            raise _Invalid(f"expected an array of integers, found {_type_name(item)}")
    return tuple(value)


IDS_TO_CLEAN = Kind(
    "an array of integers or a string",
    _parse_ids_to_clean,
    lambda value: value if isinstance(value, str) else list(value),
)


def nested(cls: type[_Message]) -> Kind:
    def parse(value: Any) -> Any:
        return cls._decode(value)

    return Kind(f"a {cls.__name__} object", parse, lambda value: value.to_json())


def list_of(kind: Kind) -> Kind:
    def parse(value: Any) -> tuple[Any, ...]:
        if not isinstance(value, list):
            raise _expect("an array", value)
        return tuple(kind.parse(item) for item in value)

    return Kind(f"an array of {kind.label}", parse, lambda value: [kind.dump(item) for item in value])


def _parse_int_key(key: str) -> int:
    try:
        return int(key, 10)
    except ValueError:
        raise _Invalid(f"expected integer keys, got {key!r}") from None


def int_key_map(kind: Kind) -> Kind:
    """A JSON object whose keys are decimal broker ids (JSON keys are always strings)."""

    def parse(value: Any) -> Mapping[int, Any]:
        if not isinstance(value, dict):
            raise _expect("an object", value)
        return {_parse_int_key(key): kind.parse(item) for key, item in value.items()}

    def dump(value: Mapping[int, Any]) -> dict[str, Any]:
        return {str(key): kind.dump(value[key]) for key in sorted(value)}

    return Kind(f"an object of {kind.label}", parse, dump)


def str_key_map(kind: Kind) -> Kind:
    def parse(value: Any) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            raise _expect("an object", value)
        return {key: kind.parse(item) for key, item in value.items()}

    def dump(value: Mapping[str, Any]) -> dict[str, Any]:
        return {key: kind.dump(value[key]) for key in sorted(value)}

    return Kind(f"an object of {kind.label}", parse, dump)


def wire(json_name: str, kind: Kind, default: Any = MISSING) -> Any:
    """Declare a dataclass field with its JSON name and kind (and an optional default)."""
    return field(default=default, metadata={"json": json_name, "kind": kind})


# --------------------------------------------------------------------------------------------------
# The generic codec.


class _Message:
    """Base of every message: generic ``to_json`` and a field-by-field decoder."""

    _STRICT: ClassVar[bool] = True

    @classmethod
    def _error(cls, remark: str) -> Exception:
        return RequestError(ResponseCode.CONTROLLER_INVALID_REQUEST, remark)

    @classmethod
    def _decode(cls, obj: object) -> Self:
        if not isinstance(obj, dict):
            raise cls._error(f"{cls.__name__} must be a JSON object, got {_type_name(obj)}")
        by_json = {f.metadata["json"]: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        if cls._STRICT:
            for key in obj:
                if key not in by_json:
                    raise cls._error(f"unknown field '{key}' in {cls.__name__}")
        kwargs: dict[str, Any] = {}
        for json_name, spec in by_json.items():
            if json_name not in obj:
                if spec.default is MISSING and spec.default_factory is MISSING:
                    raise cls._error(f"missing required field '{json_name}' in {cls.__name__}")
                continue
            try:
                kwargs[spec.name] = spec.metadata["kind"].parse(obj[json_name])
            except _Invalid as exc:
                raise cls._error(f"field '{json_name}' of {cls.__name__}: {exc}") from None
        return cls(**kwargs)

    @classmethod
    def from_json(cls, obj: object) -> Self:
        return cls._decode(obj)

    def to_json(self) -> dict[str, Any]:
        return {name: dump(getattr(self, attr)) for name, attr, dump in _dump_plan(type(self))}


@functools.cache
def _dump_plan(cls: type[_Message]) -> tuple[tuple[str, str, Callable[[Any], Any]], ...]:
    """(json name, attribute, dump) per field of ``cls``, computed once: replies are built on the
    controller's write path, and ``dataclasses.fields`` per reply showed in the leader's profile."""
    return tuple(
        (f.metadata["json"], f.name, f.metadata["kind"].dump)
        for f in dataclasses.fields(cls)  # type: ignore[arg-type]
    )


class _Request(_Message):
    _STRICT = True


class _Payload(_Message):
    """Reply payloads: unknown fields (``code``, ``remark``, newer additions) are ignored."""

    _STRICT = False

    @classmethod
    def _error(cls, remark: str) -> Exception:
        return RemoteProtocolError(remark)


# --------------------------------------------------------------------------------------------------
# Requests (docs/architecture.md §3 table).


@dataclass(frozen=True, kw_only=True)
class GetNextBrokerIdRequest(_Request):
    """docs/reference-behaviour.md §5.1 (query parameters of ``GET /v1/brokers/next-id``)."""

    cluster_name: str = wire("clusterName", STR)
    broker_name: str = wire("brokerName", STR)


@dataclass(frozen=True, kw_only=True)
class ApplyBrokerIdRequest(_Request):
    """docs/reference-behaviour.md §5.2. ``registerCheckCode`` is ``"<brokerAddress>;<epochMillis>"``."""

    cluster_name: str = wire("clusterName", STR)
    broker_name: str = wire("brokerName", STR)
    applied_broker_id: int = wire("appliedBrokerId", INT)
    register_check_code: str = wire("registerCheckCode", STR)

    @property
    def broker_address(self) -> str:
        """The part of the check code before the first ``;`` (docs/reference-behaviour.md §5.2)."""
        return self.register_check_code.split(";", 1)[0]


@dataclass(frozen=True, kw_only=True)
class RegisterBrokerRequest(_Request):
    """docs/reference-behaviour.md §5.3; ``haAddress`` is ours (the master's HA address travels through the
    controller)."""

    cluster_name: str = wire("clusterName", STR)
    broker_name: str = wire("brokerName", STR)
    broker_id: int = wire("brokerId", INT)
    broker_address: str = wire("brokerAddress", STR)
    ha_address: str | None = wire("haAddress", nullable(STR), None)


@dataclass(frozen=True, kw_only=True)
class BrokerHeartbeatRequest(_Request):
    """docs/reference-behaviour.md §5.9. Absent progress fields take the docs/reference-behaviour.md §7.1
    defaults."""

    cluster_name: str = wire("clusterName", STR)
    broker_name: str = wire("brokerName", STR)
    broker_addr: str = wire("brokerAddr", STR)
    broker_id: int = wire("brokerId", INT)
    epoch: int = wire("epoch", INT, -1)
    max_offset: int = wire("maxOffset", INT, -1)
    confirm_offset: int = wire("confirmOffset", INT, -1)
    heartbeat_timeout_mills: int = wire("heartbeatTimeoutMills", INT, DEFAULT_HEARTBEAT_TIMEOUT_MS)
    election_priority: int = wire("electionPriority", INT, INT32_MAX)

    @classmethod
    def from_json(cls, obj: object) -> Self:
        # The reference's own check and remark (docs/reference-behaviour.md §5.9); null optional fields mean
        # "default".
        if isinstance(obj, dict):
            if obj.get("brokerId") is None:
                raise RequestError(ResponseCode.CONTROLLER_INVALID_REQUEST, "Heart beat with empty brokerId")
            obj = {key: value for key, value in obj.items() if value is not None}
        return cls._decode(obj)


@dataclass(frozen=True, kw_only=True)
class ElectMasterRequest(_Request):
    """docs/reference-behaviour.md §5.4. ``brokerId`` null (or -1) is the controller-style trigger."""

    broker_name: str = wire("brokerName", STR, "")
    cluster_name: str = wire("clusterName", STR, "")
    broker_id: int | None = wire("brokerId", nullable(INT), None)
    designate_elect: bool = wire("designateElect", BOOL, False)

    @property
    def requested_id(self) -> int | None:
        """The requester's id, with the reference's ``-1`` folded into ``None``."""
        return None if self.broker_id is None or self.broker_id == -1 else self.broker_id


@dataclass(frozen=True, kw_only=True)
class AlterSyncStateSetRequest(_Request):
    """docs/reference-behaviour.md §5.5: the new set and the epochs the master believes current."""

    broker_name: str = wire("brokerName", STR, "")
    master_broker_id: int = wire("masterBrokerId", INT)
    master_epoch: int = wire("masterEpoch", INT)
    sync_state_set: frozenset[int] = wire("syncStateSet", INT_SET)
    sync_state_set_epoch: int = wire("syncStateSetEpoch", INT)


@dataclass(frozen=True, kw_only=True)
class GetReplicaInfoRequest(_Request):
    broker_name: str = wire("brokerName", STR)


@dataclass(frozen=True, kw_only=True)
class GetSyncStateDataRequest(_Request):
    """docs/reference-behaviour.md §5.7: broker names, or every group of ``clusterName`` (docs/architecture.md
    §3)."""

    broker_names: tuple[str, ...] = wire("brokerNames", STR_TUPLE, ())
    cluster_name: str | None = wire("clusterName", nullable(STR), None)


@dataclass(frozen=True, kw_only=True)
class CleanBrokerDataRequest(_Request):
    """docs/reference-behaviour.md §5.10. Ids as a JSON array (or the reference's ``"1;2;3"`` text)."""

    broker_name: str = wire("brokerName", STR, "")
    cluster_name: str | None = wire("clusterName", nullable(STR), None)
    broker_controller_ids_to_clean: tuple[int, ...] | str | None = wire(
        "brokerControllerIdsToClean", nullable(IDS_TO_CLEAN), None
    )
    clean_living_broker: bool = wire("cleanLivingBroker", BOOL, False)


# --------------------------------------------------------------------------------------------------
# Reply payloads (docs/architecture.md §3 field names). Absent values are JSON null.


@dataclass(frozen=True, kw_only=True)
class NextBrokerIdPayload(_Payload):
    cluster_name: str = wire("clusterName", STR)
    broker_name: str = wire("brokerName", STR)
    next_broker_id: int = wire("nextBrokerId", INT)


@dataclass(frozen=True, kw_only=True)
class ApplyBrokerIdPayload(_Payload):
    cluster_name: str = wire("clusterName", STR)
    broker_name: str = wire("brokerName", STR)


@dataclass(frozen=True, kw_only=True)
class RegisterBrokerPayload(_Payload):
    """Master fields (and the epochs) are null unless a master exists and is alive
    (docs/reference-behaviour.md §5.3)."""

    cluster_name: str = wire("clusterName", STR)
    broker_name: str = wire("brokerName", STR)
    master_broker_id: int | None = wire("masterBrokerId", nullable(INT), None)
    master_address: str | None = wire("masterAddress", nullable(STR), None)
    master_ha_address: str | None = wire("masterHaAddress", nullable(STR), None)
    master_epoch: int | None = wire("masterEpoch", nullable(INT), None)
    sync_state_set_epoch: int | None = wire("syncStateSetEpoch", nullable(INT), None)
    sync_state_set: frozenset[int] = wire("syncStateSet", INT_SET, frozenset())


@dataclass(frozen=True, kw_only=True)
class BrokerMemberGroup(_Payload):
    """docs/reference-behaviour.md §2.3: every registered id of the set with its address."""

    cluster: str = wire("cluster", STR)
    broker_name: str = wire("brokerName", STR)
    broker_addrs: Mapping[int, str] = wire("brokerAddrs", int_key_map(STR))


@dataclass(frozen=True, kw_only=True)
class ElectMasterPayload(_Payload):
    master_broker_id: int | None = wire("masterBrokerId", nullable(INT), None)
    master_address: str | None = wire("masterAddress", nullable(STR), None)
    master_ha_address: str | None = wire("masterHaAddress", nullable(STR), None)
    master_epoch: int | None = wire("masterEpoch", nullable(INT), None)
    sync_state_set_epoch: int | None = wire("syncStateSetEpoch", nullable(INT), None)
    sync_state_set: frozenset[int] | None = wire("syncStateSet", nullable(INT_SET), None)
    # RUF009: ``wire`` returns a ``dataclasses.field``; ruff cannot see that.
    broker_member_group: BrokerMemberGroup | None = wire(  # noqa: RUF009
        "brokerMemberGroup", nullable(nested(BrokerMemberGroup)), None
    )


@dataclass(frozen=True, kw_only=True)
class AlterSyncStateSetPayload(_Payload):
    new_sync_state_set_epoch: int = wire("newSyncStateSetEpoch", INT)
    sync_state_set: frozenset[int] = wire("syncStateSet", INT_SET)
    sync_state_set_epoch: int = wire("syncStateSetEpoch", INT)


@dataclass(frozen=True, kw_only=True)
class ReplicaInfoPayload(_Payload):
    master_broker_id: int | None = wire("masterBrokerId", nullable(INT), None)
    master_address: str | None = wire("masterAddress", nullable(STR), None)
    master_ha_address: str | None = wire("masterHaAddress", nullable(STR), None)
    master_epoch: int = wire("masterEpoch", INT, 0)
    sync_state_set: frozenset[int] = wire("syncStateSet", INT_SET, frozenset())
    sync_state_set_epoch: int = wire("syncStateSetEpoch", INT, 0)


@dataclass(frozen=True, kw_only=True)
class ReplicaIdentity(_Payload):
    broker_name: str = wire("brokerName", STR)
    broker_id: int = wire("brokerId", INT)
    broker_address: str = wire("brokerAddress", STR)
    alive: bool = wire("alive", BOOL)


@dataclass(frozen=True, kw_only=True)
class ReplicasInfo(_Payload):
    master_broker_id: int | None = wire("masterBrokerId", nullable(INT), None)
    master_address: str | None = wire("masterAddress", nullable(STR), None)
    master_epoch: int = wire("masterEpoch", INT, 0)
    sync_state_set_epoch: int = wire("syncStateSetEpoch", INT, 0)
    in_sync_replicas: tuple[ReplicaIdentity, ...] = wire(
        "inSyncReplicas", list_of(nested(ReplicaIdentity)), ()
    )
    not_in_sync_replicas: tuple[ReplicaIdentity, ...] = wire(
        "notInSyncReplicas", list_of(nested(ReplicaIdentity)), ()
    )


@dataclass(frozen=True, kw_only=True)
class SyncStateDataPayload(_Payload):
    replicas_info_table: Mapping[str, ReplicasInfo] = wire(
        "replicasInfoTable", str_key_map(nested(ReplicasInfo))
    )


# --------------------------------------------------------------------------------------------------
# The reply envelope.


@dataclass(frozen=True)
class Reply:
    """Every controller reply: a response code, a remark and the payload's top-level fields.

    ``to_json()`` gives the HTTP body ``{"code", "codeName", "remark", **payload}`` (docs/architecture.md §3).
    """

    code: ResponseCode
    remark: str = ""
    payload: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.code == ResponseCode.SUCCESS

    def to_json(self) -> dict[str, Any]:
        return {"code": int(self.code), "codeName": self.code.name, "remark": self.remark, **self.payload}

    @classmethod
    def from_json(cls, obj: object) -> Reply:
        if not isinstance(obj, dict):
            raise RemoteProtocolError(f"reply must be a JSON object, got {_type_name(obj)}")
        code = obj.get("code")
        if isinstance(code, bool) or not isinstance(code, int):
            raise RemoteProtocolError(f"field 'code' of reply: expected an integer, got {_type_name(code)}")
        try:
            response_code = ResponseCode(code)
        except ValueError:
            raise RemoteProtocolError(f"field 'code' of reply: unknown response code {code}") from None
        remark = obj.get("remark", "")
        if remark is None:
            remark = ""
        if not isinstance(remark, str):
            raise RemoteProtocolError(f"field 'remark' of reply: expected a string, got {_type_name(remark)}")
        payload = {key: value for key, value in obj.items() if key not in ("code", "codeName", "remark")}
        return cls(response_code, remark, payload)
