"""The broker's client API codec (docs/architecture.md §4): put/read requests in, JSON replies out. CORE.

Values in, values out: no sockets, files or clocks. ``mqha/broker/server.py`` feeds it decoded JSON and
query strings and sends back what it returns; the put path itself lives in ``mqha/broker/store.py``.

Requests
    * put, one message: ``{"topic": str, "body": str | "bodyBase64": str, "keys"?: str,
      "properties"?: {str: str}, "msgId"?: str}``; a batch: ``{"messages": [<message>, ...]}``.
      Strict: unknown fields, wrong JSON types, an empty or oversized batch, a topic outside
      RocketMQ's ``[%|a-zA-Z0-9_-]{1,127}``, or a message larger than ``maxMessageSize`` raise
      :class:`~mqha.errors.RequestError` with ``MESSAGE_ILLEGAL`` and a remark naming the field
      (for a batch: its index). A batch is validated whole before anything is written.
    * read: query ``offset`` (default 0) and ``maxMessages`` (default 32, at most 1024).

Replies: every body carries ``{"code", "codeName", "remark"}`` as the controller's do. The put status
(RocketMQ ``PutMessageStatus``) maps to a response code and an HTTP status:

    ==============================  ====  ===============================  ====
    status                          code  codeName                         HTTP
    ==============================  ====  ===============================  ====
    PUT_OK                             0  SUCCESS                          200
    FLUSH_DISK_TIMEOUT                10  FLUSH_DISK_TIMEOUT               200  (stored, not yet durable)
    FLUSH_SLAVE_TIMEOUT               12  FLUSH_SLAVE_TIMEOUT              200  (stored, not replicated)
    SERVICE_NOT_AVAILABLE             14  SERVICE_NOT_AVAILABLE            503  (slave/fenced; nothing stored)
    IN_SYNC_REPLICAS_NOT_ENOUGH        1  SYSTEM_ERROR                     503  (nothing stored)
    MESSAGE_ILLEGAL                   13  MESSAGE_ILLEGAL                  400  (413 for a body too large)
    UNKNOWN_ERROR                      1  SYSTEM_ERROR                     500
    ==============================  ====  ===============================  ====

A stored-but-not-guaranteed message answers 200 with its status (as a RocketMQ producer gets a
``SendResult`` with ``FLUSH_SLAVE_TIMEOUT``, not an exception); a client must read ``status``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import Any

from mqha.broker.commitlog.codec import (
    HEADER_SIZE,
    MAX_KEYS_BYTES,
    MAX_MSG_ID_BYTES,
    MessageDraft,
    StoredMessage,
)
from mqha.errors import RequestError

TOPIC_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]{1,127}$")
"""RocketMQ's topic rule (``TopicValidator``): at most 127 characters of this set."""

MAX_BATCH_MESSAGES = 4096
DEFAULT_MAX_MESSAGES = 32
MAX_READ_MESSAGES = 1024
STORE_MSG_ID_BYTES = 32
"""Length of the msgIds the commit log generates (16 hex digits of prefix + a 16-digit counter)."""


class BrokerCode(IntEnum):
    """Response codes the broker API answers with; RocketMQ ``ResponseCode`` numbers and names."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14


class PutStatus(Enum):
    """RocketMQ ``PutMessageStatus`` names (the subset mqha produces)."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    IN_SYNC_REPLICAS_NOT_ENOUGH = "IN_SYNC_REPLICAS_NOT_ENOUGH"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"

    @property
    def stored(self) -> bool:
        """Whether the messages are in the master's log (possibly not durable or not replicated)."""
        return self in _STORED


_STORED = frozenset({PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT, PutStatus.FLUSH_SLAVE_TIMEOUT})

_CODE_OF_STATUS: dict[PutStatus, tuple[BrokerCode, int]] = {
    PutStatus.PUT_OK: (BrokerCode.SUCCESS, 200),
    PutStatus.FLUSH_DISK_TIMEOUT: (BrokerCode.FLUSH_DISK_TIMEOUT, 200),
    PutStatus.FLUSH_SLAVE_TIMEOUT: (BrokerCode.FLUSH_SLAVE_TIMEOUT, 200),
    PutStatus.SERVICE_NOT_AVAILABLE: (BrokerCode.SERVICE_NOT_AVAILABLE, 503),
    PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH: (BrokerCode.SYSTEM_ERROR, 503),
    PutStatus.MESSAGE_ILLEGAL: (BrokerCode.MESSAGE_ILLEGAL, 400),
    PutStatus.UNKNOWN_ERROR: (BrokerCode.SYSTEM_ERROR, 500),
}

_DEFAULT_REMARK = {
    PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH: "in-sync replicas not enough",
    PutStatus.FLUSH_SLAVE_TIMEOUT: "wait for replica acks timed out; the message is on the master only",
    PutStatus.FLUSH_DISK_TIMEOUT: "wait for the disk flush timed out",
}


def code_and_http_status(status: PutStatus) -> tuple[BrokerCode, int]:
    return _CODE_OF_STATUS[status]


def illegal(remark: str) -> RequestError:
    """A malformed request: ``MESSAGE_ILLEGAL`` with ``remark``."""
    return RequestError(BrokerCode.MESSAGE_ILLEGAL, remark)  # type: ignore[arg-type]


# -- requests ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PutRequest:
    """Validated drafts, in order; ``batch`` says which reply shape the client expects."""

    drafts: tuple[MessageDraft, ...]
    batch: bool

    @property
    def body_bytes(self) -> int:
        return sum(len(d.body) for d in self.drafts)


@dataclass(frozen=True)
class ReadRequest:
    offset: int
    max_messages: int


_MESSAGE_FIELDS = frozenset({"topic", "body", "bodyBase64", "keys", "properties", "msgId"})


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _string(obj: Mapping[str, Any], name: str, where: str, *, required: bool = False) -> str | None:
    if name not in obj:
        if required:
            raise illegal(f"{where}missing field '{name}'")
        return None
    value = obj[name]
    if not isinstance(value, str):
        raise illegal(f"{where}field '{name}' must be a string, got {_type_name(value)}")
    return value


@functools.lru_cache(maxsize=4096)
def _is_valid_topic(topic: str) -> bool:
    return TOPIC_PATTERN.match(topic) is not None


def parse_message(obj: Any, *, max_message_size: int, where: str = "") -> MessageDraft:
    """One message object → a :class:`MessageDraft`; ``where`` prefixes remarks (batch index).

    The common shape (topic + body or bodyBase64, nothing else) takes a short path: this runs once
    per message of every batch. Anything else, including every error, takes the full checks, which
    name the offending field.
    """
    if type(obj) is dict and len(obj) == 2:
        topic = obj.get("topic")
        if type(topic) is str and _is_valid_topic(topic):
            text = obj.get("body")
            body: bytes | None = None
            if type(text) is str:
                body = text.encode("utf-8", errors="surrogatepass")
            else:
                encoded = obj.get("bodyBase64")
                if type(encoded) is str:
                    with contextlib.suppress(binascii.Error, ValueError):
                        body = binascii.a2b_base64(encoded, strict_mode=True)
            if body and HEADER_SIZE + STORE_MSG_ID_BYTES + len(topic) + len(body) <= max_message_size:
                return MessageDraft(topic=topic, body=body)
    return _parse_message_checked(obj, max_message_size=max_message_size, where=where)


def _parse_message_checked(obj: Any, *, max_message_size: int, where: str) -> MessageDraft:
    if not isinstance(obj, dict):
        raise illegal(f"{where}a message must be a JSON object, got {_type_name(obj)}")
    unknown = sorted(set(obj) - _MESSAGE_FIELDS)
    if unknown:
        raise illegal(f"{where}unknown field '{unknown[0]}'")
    topic = _string(obj, "topic", where, required=True)
    assert topic is not None
    if not TOPIC_PATTERN.match(topic):
        raise illegal(f"{where}topic {topic[:140]!r} is not 1..127 characters of [%|a-zA-Z0-9_-]")
    text = _string(obj, "body", where)
    encoded = _string(obj, "bodyBase64", where)
    if (text is None) == (encoded is None):
        raise illegal(f"{where}exactly one of 'body' and 'bodyBase64' is required")
    if text is not None:
        body = text.encode("utf-8", errors="surrogatepass")
    else:
        try:
            body = base64.b64decode(encoded or "", validate=True)
        except (binascii.Error, ValueError):
            raise illegal(f"{where}field 'bodyBase64' is not valid base64") from None
    if not body:
        raise illegal(f"{where}message body is empty")
    keys = _string(obj, "keys", where) or ""
    if len(keys.encode("utf-8", errors="surrogatepass")) > MAX_KEYS_BYTES:
        raise illegal(f"{where}field 'keys' is longer than {MAX_KEYS_BYTES} bytes")
    properties = obj.get("properties")
    if properties is not None:
        if not isinstance(properties, dict):
            raise illegal(f"{where}field 'properties' must be an object, got {_type_name(properties)}")
        for name, value in properties.items():
            if not isinstance(value, str):
                raise illegal(f"{where}property '{name}' must be a string, got {_type_name(value)}")
            if not name or any(sep in name or sep in value for sep in ("\x01", "\x02")):
                raise illegal(f"{where}property {name!r}: empty name or a \\x01/\\x02 separator inside")
    msg_id = _string(obj, "msgId", where)
    if msg_id is not None and (not msg_id or not msg_id.isascii() or len(msg_id) > MAX_MSG_ID_BYTES):
        raise illegal(f"{where}field 'msgId' must be 1..{MAX_MSG_ID_BYTES} ASCII characters")
    # maxMessageSize bounds the stored record (commit log codec); estimate it here so an oversized
    # message is refused before anything of its batch is written.
    size = (
        HEADER_SIZE
        + len(msg_id or "x" * STORE_MSG_ID_BYTES)
        + len(topic)
        + len(keys.encode("utf-8", errors="surrogatepass"))
        + sum(
            len(k.encode()) + len(v.encode("utf-8", errors="surrogatepass")) + 2
            for k, v in (properties or {}).items()
        )
        + len(body)
    )
    if size > max_message_size:
        raise illegal(
            f"{where}message of {size} bytes (body {len(body)}) exceeds maxMessageSize {max_message_size}"
        )
    return MessageDraft(topic=topic, body=body, msg_id=msg_id, keys=keys, properties=properties or None)


def parse_put_request(
    payload: Any, *, max_message_size: int, max_batch: int = MAX_BATCH_MESSAGES
) -> PutRequest:
    """Decoded JSON of a POST ``/v1/messages`` → :class:`PutRequest`, or ``RequestError``."""
    if not isinstance(payload, dict):
        raise illegal(f"the request body must be a JSON object, got {_type_name(payload)}")
    if "messages" not in payload:
        return PutRequest((parse_message(payload, max_message_size=max_message_size),), batch=False)
    extra = sorted(set(payload) - {"messages"})
    if extra:
        raise illegal(f"a batch holds only 'messages'; unknown field '{extra[0]}'")
    items = payload["messages"]
    if not isinstance(items, list):
        raise illegal(f"field 'messages' must be an array, got {_type_name(items)}")
    if not items:
        raise illegal("field 'messages' is empty")
    if len(items) > max_batch:
        raise illegal(f"a batch holds at most {max_batch} messages, got {len(items)}")
    drafts = tuple(
        parse_message(item, max_message_size=max_message_size, where=f"messages[{i}]: ")
        for i, item in enumerate(items)
    )
    return PutRequest(drafts, batch=True)


def _int_param(query: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw, 10)
    except ValueError:
        raise illegal(f"query parameter '{name}' must be an integer, got {raw[:40]!r}") from None
    if not low <= value <= high:
        raise illegal(f"query parameter '{name}' must be within [{low}, {high}], got {value}")
    return value


def parse_read_request(query: Mapping[str, str]) -> ReadRequest:
    """Query of GET ``/v1/messages`` → :class:`ReadRequest`, or ``RequestError``."""
    return ReadRequest(
        offset=_int_param(query, "offset", 0, 0, 2**63 - 1),
        max_messages=_int_param(query, "maxMessages", DEFAULT_MAX_MESSAGES, 1, MAX_READ_MESSAGES),
    )


# -- replies -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Appended:
    """Where one message of a put landed."""

    offset: int
    size: int
    msg_id: str


@dataclass(frozen=True)
class PutOutcome:
    """What the put path did: ``status`` for every message of the request (one append, one wait),
    ``appended`` empty when nothing was stored."""

    status: PutStatus
    appended: tuple[Appended, ...] = ()
    epoch: int = -1
    remark: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)  # e.g. masterAddress on a slave


def envelope(code: BrokerCode | int, remark: str = "", **payload: Any) -> dict[str, Any]:
    """``{code, codeName, remark}`` plus ``payload`` (the shape of every reply)."""
    try:
        name = BrokerCode(int(code)).name
    except ValueError:
        name = getattr(code, "name", str(int(code)))
    return {"code": int(code), "codeName": name, "remark": remark, **payload}


def put_reply(request: PutRequest, outcome: PutOutcome) -> tuple[int, dict[str, Any]]:
    """HTTP status and JSON body answering ``request``."""
    code, http_status = code_and_http_status(outcome.status)
    remark = outcome.remark or _DEFAULT_REMARK.get(outcome.status, "")
    if not outcome.status.stored:
        return http_status, envelope(code, remark, status=outcome.status.value, **outcome.extra)
    results = [
        {
            "status": outcome.status.value,
            "offset": item.offset,
            "size": item.size,
            "epoch": outcome.epoch,
            "msgId": item.msg_id,
        }
        for item in outcome.appended
    ]
    if request.batch:
        return http_status, envelope(
            code, remark, status=outcome.status.value, results=results, **outcome.extra
        )
    return http_status, envelope(code, remark, **results[0], **outcome.extra)


def message_json(message: StoredMessage) -> dict[str, Any]:
    """One stored message as a read returns it; a body that is not UTF-8 comes as ``bodyBase64``."""
    out: dict[str, Any] = {
        "offset": message.offset,
        "size": message.size,
        "msgId": message.msg_id,
        "topic": message.topic,
    }
    try:
        out["body"] = message.body.decode("utf-8")
    except UnicodeDecodeError:
        out["body"] = None
        out["bodyBase64"] = base64.b64encode(message.body).decode("ascii")
    if message.keys:
        out["keys"] = message.keys
    if message.properties:
        out["properties"] = message.properties
    out["storeTimestamp"] = message.store_ts
    return out


def read_reply(
    messages: Sequence[StoredMessage], next_offset: int, confirm_offset: int, max_offset: int
) -> dict[str, Any]:
    return envelope(
        BrokerCode.SUCCESS,
        "",
        messages=[message_json(m) for m in messages],
        nextOffset=next_offset,
        confirmOffset=confirm_offset,
        maxOffset=max_offset,
    )
