"""Broker API bodies (docs/architecture.md §4) as msgspec structs: the put request and the codes.

Only the shape and the JSON types are checked here (one pass, straight from the body's bytes); the
broker's own rules (topic characters, exactly one of ``body``/``bodyBase64``, sizes, property
separators) are ``mqha.broker.protocol``'s. Violations raise ``RequestError(MESSAGE_ILLEGAL)`` whose
remark names the field, e.g. ``field 'topic' of PutMessage: expected a string, got integer``, and for a
batch also the message's index (``messages[2]: ...``).
"""

from __future__ import annotations

import re
from enum import Enum, IntEnum

import msgspec
from msgspec import UNSET, UnsetType

from mqha.errors import RequestError
from mqha.wire.codec import decode_json, remark_for

__all__ = [
    "PUT_PATH",
    "PUT_STREAM_PATH",
    "Appended",
    "BrokerCode",
    "PutBody",
    "PutItem",
    "PutStatus",
    "decode_put_body",
    "decode_stream_reply",
    "encode_stream_reply",
    "illegal",
]


class BrokerCode(IntEnum):
    """Response codes the broker API answers with; RocketMQ ``ResponseCode`` numbers and names."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    PULL_OFFSET_MOVED = 21  # a read below the log start (GetMessageStatus OFFSET_TOO_SMALL)


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


def illegal(remark: str) -> RequestError:
    """A malformed request: ``MESSAGE_ILLEGAL`` with ``remark``."""
    return RequestError(BrokerCode.MESSAGE_ILLEGAL, remark)  # type: ignore[arg-type]


class Appended(msgspec.Struct, frozen=True):
    """Where one message of a put landed (the ``offset``/``size``/``msgId`` of its put result)."""

    offset: int
    size: int
    msg_id: str


class PutItem(msgspec.Struct, frozen=True, rename="camel", forbid_unknown_fields=True):
    """One message of a put, as the client sent it.

    Fields are UNSET when absent, so that null is a type error and the broker can tell "absent" from
    "empty".
    """

    topic: str | UnsetType = UNSET
    body: str | UnsetType = UNSET
    body_base64: bytes | UnsetType = UNSET
    keys: str | UnsetType = UNSET
    properties: dict[str, str] | UnsetType = UNSET
    msg_id: str | UnsetType = UNSET
    born_timestamp: int | UnsetType = UNSET  # ms; absent: the store timestamp (mqproxy sends the client's)


class PutBody(PutItem, frozen=True):
    """The body of ``POST /v1/messages``: one message, or a batch in ``messages`` (and nothing else)."""

    messages: list[PutItem] | UnsetType = UNSET


_BATCH_PATH = re.compile(r"`\$\.messages\[(\d+)\]((?:[.\[][^`]*)?)`")
_NAME = "PutMessage"


def _remark(exc: msgspec.ValidationError) -> str:
    text = str(exc)
    found = _BATCH_PATH.search(text)
    if found is None:
        return remark_for(PutBody, exc, name=_NAME)
    # "... - at `$.messages[2].body`" -> "messages[2]: " + the remark of a single message.
    inner = msgspec.ValidationError(text[: found.start()] + f"`${found.group(2)}`" + text[found.end() :])
    return f"messages[{found.group(1)}]: " + remark_for(PutItem, inner, name=_NAME)


def decode_put_body(data: bytes | str) -> PutBody:
    """The put body in ``data`` (JSON text), checked for shape and JSON types only."""
    try:
        body: PutBody = decode_json(data, PutBody)
    except msgspec.ValidationError as exc:
        raise illegal(_remark(exc)) from None
    except msgspec.DecodeError as exc:
        raise illegal(f"request body is not JSON: {exc}") from None
    return body


OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
"""A read's ``status`` below the log start (RocketMQ's ``GetMessageStatus``): no messages, code
``PULL_OFFSET_MOVED``, ``nextOffset`` = the log start (docs/architecture.md §4.2)."""
OFFSET_DIVERGED = "OFFSET_DIVERGED"
"""A read's ``status`` when the reader's position lies past the end of its last message's epoch in
this log (the log was cut back since it read there: a declared loss): no messages, code
``PULL_OFFSET_MOVED``, ``nextOffset`` = where that epoch ends here (docs/architecture.md §4)."""

MESSAGE_CORRUPTED = "MESSAGE_CORRUPTED"
"""A read's ``status`` when it met a damaged record (a flipped bit found by its CRC,
docs/architecture.md §4.7): the good messages before it (code ``SUCCESS``), or none when the read
starts at it (code ``SERVICE_NOT_AVAILABLE``, 503: retry; the replica repairs it from another);
``nextOffset`` = ``corruptOffset``, the damaged record's offset."""

# -- the put stream (docs/architecture.md §4.6) ---------------------------------------------------

PUT_PATH = "/v1/messages"
"""Where a put is POSTed."""
PUT_STREAM_PATH = "/v1/messages/stream"
"""The WebSocket that carries puts as frames: each binary frame a ``POST /v1/messages`` body, each
answered by one reply frame (:func:`encode_stream_reply`), in order."""


def encode_stream_reply(status: int, reply: bytes) -> bytes:
    """A put stream's reply frame: the 2-byte big-endian HTTP status the POST would have had, then its
    JSON reply."""
    return status.to_bytes(2, "big") + reply


def decode_stream_reply(frame: bytes) -> tuple[int, bytes]:
    """The status and the JSON reply of a reply frame; ``ValueError`` for a frame without a status."""
    if len(frame) < 2:
        raise ValueError(f"a put stream reply of {len(frame)} bytes has no status")
    return int.from_bytes(frame[:2], "big"), frame[2:]
