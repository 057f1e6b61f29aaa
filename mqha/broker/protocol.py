"""The broker's client API codec (docs/architecture.md §4): put/read requests in, JSON replies out. CORE.

Values in, values out: no sockets, files or clocks. ``mqha/broker/server.py`` feeds it the put body's
bytes (decoded into ``mqha.wire.broker_api``'s structs, which check shapes and JSON types) and query
strings, and sends back what it returns; the put path itself lives in ``mqha/broker/access.py``.

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
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
from msgspec import UNSET

from mqha.broker.commitlog.codec import (
    HEADER_SIZE,
    MAX_KEYS_BYTES,
    MAX_MSG_ID_BYTES,
    MessageDraft,
    StoredMessage,
)
from mqha.broker.queue_index import MAX_QUEUE_ID
from mqha.errors import RequestError
from mqha.wire.broker_api import (
    MESSAGE_CORRUPTED,
    OFFSET_DIVERGED,
    OFFSET_TOO_SMALL,
    Appended,
    BrokerCode,
    PutBody,
    PutItem,
    PutStatus,
    decode_put_body,
    illegal,
)
from mqha.wire.types import NAME_RULE, is_valid_name

__all__ = [
    "Appended",
    "BrokerCode",
    "PutOutcome",
    "PutRequest",
    "PutStatus",
    "ReadRequest",
    "code_and_http_status",
    "decode_put_request",
    "draft_of",
    "envelope",
    "illegal",
    "message_json",
    "parse_put_request",
    "parse_read_request",
    "put_reply",
    "read_corrupted_reply",
    "read_moved_reply",
    "read_reply",
]

MAX_BATCH_MESSAGES = 4096
DEFAULT_MAX_MESSAGES = 32
MAX_READ_MESSAGES = 1024
STORE_MSG_ID_BYTES = 32
"""Length of the msgIds the commit log generates (16 hex digits of prefix + a 16-digit counter)."""


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
    """A validated read: at most ``max_messages`` messages from ``offset``.

    ``epoch``: the epoch the reader's last message was written in (None: the reader does not know),
    checked against this log's epochs before anything is read.
    """

    offset: int
    max_messages: int
    epoch: int | None = None


@dataclass(frozen=True)
class QueueReadRequest:
    """A validated queue read of one (topic, queue) from a position (docs/architecture.md §4.4).

    At most ``max_messages`` messages of (``topic``, ``queue_id``) at or after the commit-log position
    ``offset``."""

    topic: str
    queue_id: int
    offset: int
    max_messages: int


_is_valid_topic = functools.lru_cache(maxsize=4096)(is_valid_name)
"""RocketMQ's topic rule (``TopicValidator``), the wire's name rule: cached, a put checks it per message."""


MAX_TIMESTAMP_MS = 2**63 - 1
"""The record's bornTimestamp field is a signed 64-bit integer (docs/architecture.md §9.1)."""


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", errors="surrogatepass")


def draft_of(item: PutItem, *, max_message_size: int, where: str = "") -> MessageDraft:
    """One decoded message (types already checked) → a :class:`MessageDraft`, or ``RequestError``;
    ``where`` prefixes remarks (batch index).

    The common shape (topic + body or bodyBase64, nothing else) takes a short path: this runs once
    per message of every batch. Anything else, including every error, takes the full checks.
    """
    topic, text, raw = item.topic, item.body, item.body_base64
    if (
        type(topic) is str
        and item.keys is UNSET
        and item.properties is UNSET
        and item.msg_id is UNSET
        and item.born_timestamp is UNSET
        and _is_valid_topic(topic)
        and (text is UNSET) != (raw is UNSET)
    ):
        body = _utf8(text) if type(text) is str else raw
        if body and HEADER_SIZE + STORE_MSG_ID_BYTES + len(topic) + len(body) <= max_message_size:  # type: ignore[arg-type]
            return MessageDraft(topic=topic, body=body)  # type: ignore[arg-type]
    return _draft_checked(item, max_message_size=max_message_size, where=where)


def _draft_checked(item: PutItem, *, max_message_size: int, where: str) -> MessageDraft:
    if isinstance(item, PutBody) and item.messages is not UNSET:
        raise illegal(f"{where}unknown field 'messages' in PutMessage")
    topic = item.topic
    if topic is UNSET:
        raise illegal(f"{where}missing required field 'topic' in PutMessage")
    assert isinstance(topic, str)
    if not is_valid_name(topic):
        raise illegal(f"{where}topic {topic[:140]!r} is not {NAME_RULE}")
    if (item.body is UNSET) == (item.body_base64 is UNSET):
        raise illegal(f"{where}exactly one of 'body' and 'bodyBase64' is required")
    body = _utf8(item.body) if isinstance(item.body, str) else item.body_base64
    assert isinstance(body, bytes)
    if not body:
        raise illegal(f"{where}message body is empty")
    keys = item.keys if isinstance(item.keys, str) else ""
    if len(_utf8(keys)) > MAX_KEYS_BYTES:
        raise illegal(f"{where}field 'keys' is longer than {MAX_KEYS_BYTES} bytes")
    properties = item.properties if isinstance(item.properties, dict) else {}
    for name, value in properties.items():
        if not name or any(sep in name or sep in value for sep in ("\x01", "\x02")):
            raise illegal(f"{where}property {name!r}: empty name or a \\x01/\\x02 separator inside")
    msg_id = item.msg_id if isinstance(item.msg_id, str) else None
    if msg_id is not None and (not msg_id or not msg_id.isascii() or len(msg_id) > MAX_MSG_ID_BYTES):
        raise illegal(f"{where}field 'msgId' must be 1..{MAX_MSG_ID_BYTES} ASCII characters")
    born = item.born_timestamp if isinstance(item.born_timestamp, int) else None
    if born is not None and not 0 <= born <= MAX_TIMESTAMP_MS:
        raise illegal(f"{where}field 'bornTimestamp' must be within [0, {MAX_TIMESTAMP_MS}]")
    # maxMessageSize bounds the stored record (commit log codec); estimate it here so an oversized
    # message is refused before anything of its batch is written.
    size = (
        HEADER_SIZE
        + len(msg_id or "x" * STORE_MSG_ID_BYTES)
        + len(topic)
        + len(_utf8(keys))
        + sum(len(k.encode()) + len(_utf8(v)) + 2 for k, v in properties.items())
        + len(body)
    )
    if size > max_message_size:
        raise illegal(
            f"{where}message of {size} bytes (body {len(body)}) exceeds maxMessageSize {max_message_size}"
        )
    return MessageDraft(
        topic=topic, body=body, msg_id=msg_id, keys=keys, properties=properties or None, born_ts=born
    )


def decode_put_request(
    data: bytes | str, *, max_message_size: int, max_batch: int = MAX_BATCH_MESSAGES
) -> PutRequest:
    """The body of a POST ``/v1/messages`` → :class:`PutRequest`, or ``RequestError``. A batch is
    validated whole before anything is written."""
    put = decode_put_body(data)
    if put.messages is UNSET:
        return PutRequest((draft_of(put, max_message_size=max_message_size),), batch=False)
    extra = [name for name in _SINGLE_FIELDS if getattr(put, name) is not UNSET]
    if extra:
        raise illegal(f"a batch holds only 'messages'; unknown field '{_camel(extra[0])}'")
    items = put.messages
    if not items:
        raise illegal("field 'messages' is empty")
    if len(items) > max_batch:
        raise illegal(f"a batch holds at most {max_batch} messages, got {len(items)}")
    drafts = tuple(
        draft_of(item, max_message_size=max_message_size, where=f"messages[{i}]: ")
        for i, item in enumerate(items)
    )
    return PutRequest(drafts, batch=True)


_SINGLE_FIELDS = tuple(f.name for f in msgspec.structs.fields(PutItem))


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def parse_put_request(
    payload: Any, *, max_message_size: int, max_batch: int = MAX_BATCH_MESSAGES
) -> PutRequest:
    """Decoded JSON of a POST ``/v1/messages`` → :class:`PutRequest` (tests and tools; the server
    decodes the body's bytes with :func:`decode_put_request`)."""
    return decode_put_request(
        msgspec.json.encode(payload), max_message_size=max_message_size, max_batch=max_batch
    )


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
        epoch=_int_param(query, "epoch", -1, -1, 2**31 - 1) if "epoch" in query else None,
    )


def parse_queue_read_request(query: Mapping[str, str]) -> QueueReadRequest:
    """Query of GET ``/v1/queues/messages`` → :class:`QueueReadRequest`, or ``RequestError``."""
    topic = query.get("topic", "")
    if not _is_valid_topic(topic):
        raise illegal(f"query parameter 'topic' must be {NAME_RULE}, got {topic[:140]!r}")
    return QueueReadRequest(
        topic=topic,
        queue_id=_int_param(query, "queueId", 0, 0, MAX_QUEUE_ID),
        offset=_int_param(query, "offset", 0, 0, 2**63 - 1),
        max_messages=_int_param(query, "maxMessages", DEFAULT_MAX_MESSAGES, 1, MAX_READ_MESSAGES),
    )


# -- replies -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PutOutcome:
    """What the put path did with the messages of one request.

    ``status`` holds for every message of the request (one append, one wait); ``appended`` is empty
    when nothing was stored.
    """

    status: PutStatus
    appended: tuple[Appended, ...] = ()
    epoch: int = -1
    remark: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)  # e.g. masterAddress on a slave


_HTTP_OF_CODE = {
    BrokerCode.SUCCESS: 200,
    BrokerCode.MESSAGE_ILLEGAL: 400,
    BrokerCode.SERVICE_NOT_AVAILABLE: 503,
    BrokerCode.SYSTEM_ERROR: 500,
}


def http_status_of(code: BrokerCode | int) -> int:
    """The HTTP status an error reply of ``code`` carries (400 for any code not listed)."""
    return _HTTP_OF_CODE.get(code, 400)  # type: ignore[call-overload]


def internal_error_reply() -> tuple[int, dict[str, Any]]:
    """The HTTP status and reply of a request that failed inside the broker (the error is logged)."""
    return 500, envelope(BrokerCode.SYSTEM_ERROR, "internal error; see the broker log")


def request_error_reply(exc: RequestError) -> tuple[int, dict[str, Any]]:
    """The HTTP status and reply of a request refused with ``RequestError``."""
    code: BrokerCode | int = (
        BrokerCode(int(exc.code)) if int(exc.code) in BrokerCode._value2member_map_ else exc.code
    )
    return http_status_of(code), envelope(code, exc.remark)


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
    out["bornTimestamp"] = message.born_ts
    return out


def read_reply(
    messages: Sequence[StoredMessage],
    next_offset: int,
    confirm_offset: int,
    max_offset: int,
    last_epoch: int | None = None,
) -> dict[str, Any]:
    """``lastEpoch``: the epoch the last message was written in (the reader sends it with its next
    read, so that a log cut back under it is noticed)."""
    extra = {} if last_epoch is None else {"lastEpoch": last_epoch}
    return envelope(
        BrokerCode.SUCCESS,
        "",
        messages=[message_json(m) for m in messages],
        nextOffset=next_offset,
        confirmOffset=confirm_offset,
        maxOffset=max_offset,
        **extra,
    )


def read_diverged_reply(
    offset: int, epoch: int, end: int, confirm_offset: int, max_offset: int
) -> dict[str, Any]:
    """A reader past the end of its epoch in this log (``OFFSET_DIVERGED``): continue from ``end``."""
    return envelope(
        BrokerCode.PULL_OFFSET_MOVED,
        f"offset {offset} lies past the end of epoch {epoch} in this log ({end}): the log was cut back "
        "after it was read there (data declared lost); continue from nextOffset",
        status=OFFSET_DIVERGED,
        messages=[],
        nextOffset=end,
        confirmOffset=confirm_offset,
        maxOffset=max_offset,
    )


def queue_read_reply(
    request: QueueReadRequest,
    messages: Sequence[StoredMessage],
    next_offset: int,
    confirm_offset: int,
    max_offset: int,
) -> dict[str, Any]:
    """A queue read's answer: the messages (read-API shape) and the position to continue the queue from."""
    return envelope(
        BrokerCode.SUCCESS,
        "",
        topic=request.topic,
        queueId=request.queue_id,
        messages=[message_json(m) for m in messages],
        nextOffset=next_offset,
        confirmOffset=confirm_offset,
        maxOffset=max_offset,
    )


def read_moved_reply(offset: int, min_offset: int, confirm_offset: int, max_offset: int) -> dict[str, Any]:
    """A read below the log start (deleted by retention; docs/architecture.md §4.2): RocketMQ's
    ``OFFSET_TOO_SMALL`` answered as ``PULL_OFFSET_MOVED`` with the log start as ``nextOffset``."""
    return envelope(
        BrokerCode.PULL_OFFSET_MOVED,
        f"offset {offset} is below the log start {min_offset} (deleted by retention); "
        "continue from nextOffset",
        status=OFFSET_TOO_SMALL,
        messages=[],
        nextOffset=min_offset,
        minOffset=min_offset,
        confirmOffset=confirm_offset,
        maxOffset=max_offset,
    )


def read_corrupted_reply(
    messages: Sequence[StoredMessage],
    corrupt_offset: int,
    why: str,
    confirm_offset: int,
    max_offset: int,
    **fields: Any,
) -> tuple[int, dict[str, Any]]:
    """A read that met a damaged record (``MESSAGE_CORRUPTED``, docs/architecture.md §4.7): the good
    messages before it (200, ``SUCCESS``), or none when the read starts at it (503,
    ``SERVICE_NOT_AVAILABLE``: retry, the replica repairs it from another). ``fields``: the queue
    read's ``topic`` and ``queueId``."""
    code = BrokerCode.SUCCESS if messages else BrokerCode.SERVICE_NOT_AVAILABLE
    remark = f"the record at offset {corrupt_offset} is damaged on this replica ({why}); " + (
        "the messages before it are served" if messages else "it is repaired from another replica; retry"
    )
    return 200 if messages else 503, envelope(
        code,
        remark,
        status=MESSAGE_CORRUPTED,
        **fields,
        messages=[message_json(m) for m in messages],
        nextOffset=corrupt_offset,
        corruptOffset=corrupt_offset,
        confirmOffset=confirm_offset,
        maxOffset=max_offset,
    )
