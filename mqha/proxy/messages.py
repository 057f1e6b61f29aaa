"""v2 messages <-> mqha's put and read bodies (core; docs/architecture.md §13).

What a v2 ``Message`` carries beyond mqha's record fields (topic, keys, properties, msgId, body,
bornTimestamp) rides as *system properties* in the record's properties, under RocketMQ's own names
where it has one: ``TAGS`` (the tag), ``BORN_HOST`` and ``QUEUE_ID`` (the queue the proxy chose). The
record format is unchanged, so every replica and every older reader reads the records as before; a
record without ``QUEUE_ID`` (written by mqha's own client) belongs to queue 0. Keys join with a space,
RocketMQ's ``KEY_SEPARATOR``, so a key cannot contain one. A user property may not take a system
property's name. The body digest handed to consumers is MD5 in upper-case hex, the one checksum all
official clients compute alike.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mqha.errors import MqhaError
from mqha.proxy.v2 import definition as d
from mqha.wire.types import NAME_RULE, is_valid_name

TAGS = "TAGS"
BORN_HOST = "BORN_HOST"
QUEUE_ID = "QUEUE_ID"
KEY_SEPARATOR = " "
SYSTEM_PROPERTIES = frozenset({TAGS, BORN_HOST, QUEUE_ID, "KEYS", "UNIQ_KEY"})
"""Names a user property may not take: the proxy's own, and RocketMQ's keys and message id."""

MAX_MSG_ID_BYTES = 255
"""The record's msgId field (docs/architecture.md §9.1)."""
_SUPPORTED_TYPES = frozenset({d.MessageType.MESSAGE_TYPE_UNSPECIFIED, d.MessageType.NORMAL})


class MessageRefused(MqhaError):
    """A message the proxy will not store: ``code`` (a v2 ``Code``) and a reason for the client."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(text)
        self.code = code


def _check_text(value: str, what: str, code: int) -> None:
    if "\x01" in value or "\x02" in value:  # the record's property separators (§9.1)
        raise MessageRefused(code, f"{what} {value[:60]!r} holds a \\x01 or \\x02 control character")


@dataclass(frozen=True)
class PutFields:
    """One message as mqha's put body takes it (``POST /v1/messages``, §8.4)."""

    topic: str
    body: bytes
    msg_id: str
    keys: str
    properties: dict[str, str]
    born_timestamp: int | None


def put_fields(message: Any, queue_id: int, max_body_size: int) -> PutFields:
    """One v2 ``Message`` → the fields of one put, stored in ``queue_id``; raises
    :class:`MessageRefused` for what mqha cannot store faithfully."""
    topic = message.topic.name
    if not is_valid_name(topic):
        raise MessageRefused(d.Code.ILLEGAL_TOPIC, f"topic {topic[:140]!r} is not {NAME_RULE}")
    system = message.system_properties
    msg_id = system.message_id
    if not msg_id or not msg_id.isascii() or len(msg_id) > MAX_MSG_ID_BYTES:
        raise MessageRefused(d.Code.ILLEGAL_MESSAGE_ID, f"message id must be 1..{MAX_MSG_ID_BYTES} ASCII")
    if system.message_type not in _SUPPORTED_TYPES:
        kind = d.MessageType.Name(system.message_type)
        raise MessageRefused(d.Code.UNSUPPORTED, f"mqproxy stores NORMAL messages only, not {kind}")
    if system.HasField("message_group") or system.HasField("delivery_timestamp"):
        raise MessageRefused(d.Code.UNSUPPORTED, "mqproxy has no FIFO message groups or delayed delivery")
    body = bytes(message.body)
    if not body:
        raise MessageRefused(d.Code.MESSAGE_BODY_EMPTY, "message body is empty")
    if len(body) > max_body_size:
        raise MessageRefused(
            d.Code.MESSAGE_BODY_TOO_LARGE, f"body of {len(body)} bytes exceeds maxMessageSize {max_body_size}"
        )
    for key in system.keys:
        if not key or KEY_SEPARATOR in key:
            raise MessageRefused(d.Code.ILLEGAL_MESSAGE_KEY, f"key {key[:60]!r} is empty or holds a space")
        _check_text(key, "key", d.Code.ILLEGAL_MESSAGE_KEY)
    properties: dict[str, str] = {}
    for name, value in message.user_properties.items():
        if not name or name in SYSTEM_PROPERTIES:
            raise MessageRefused(
                d.Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property name {name!r} is empty or reserved"
            )
        _check_text(name, "property name", d.Code.ILLEGAL_MESSAGE_PROPERTY_KEY)
        _check_text(value, "property value", d.Code.ILLEGAL_MESSAGE_PROPERTY_KEY)
        properties[name] = value
    if system.HasField("tag"):
        if not system.tag or "|" in system.tag:
            raise MessageRefused(d.Code.ILLEGAL_MESSAGE_TAG, f"tag {system.tag[:60]!r} is empty or holds '|'")
        _check_text(system.tag, "tag", d.Code.ILLEGAL_MESSAGE_TAG)
        properties[TAGS] = system.tag
    if system.born_host:
        _check_text(system.born_host, "born host", d.Code.BAD_REQUEST)
        properties[BORN_HOST] = system.born_host
    properties[QUEUE_ID] = str(queue_id)
    born = max(0, system.born_timestamp.ToMilliseconds()) if system.HasField("born_timestamp") else None
    return PutFields(topic, body, msg_id, KEY_SEPARATOR.join(system.keys), properties, born)


def body_digest(body: bytes) -> str:
    """MD5 of the body in upper-case hex (what the Java proxy sends; every client checks it alike)."""
    return hashlib.md5(body).hexdigest().upper()


@dataclass(frozen=True)
class StoredView:
    """A message as mqha's read API returns it (``GET /v1/messages``, §8.4), fields by name."""

    offset: int
    msg_id: str
    topic: str
    body: bytes
    keys: str
    properties: Mapping[str, str]
    store_timestamp: int
    born_timestamp: int | None

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> StoredView:
        text = item.get("body")
        body = text.encode("utf-8") if isinstance(text, str) else base64.b64decode(item["bodyBase64"])
        return cls(
            offset=int(item["offset"]),
            msg_id=str(item["msgId"]),
            topic=str(item["topic"]),
            body=body,
            keys=str(item.get("keys") or ""),
            properties=dict(item.get("properties") or {}),
            store_timestamp=int(item.get("storeTimestamp") or 0),
            born_timestamp=item.get("bornTimestamp"),
        )

    @property
    def queue_id(self) -> int:
        """The queue the proxy stored it in; 0 for a record without one (mqha's own client)."""
        try:
            return int(self.properties.get(QUEUE_ID, "0"))
        except ValueError:
            return 0


def v2_message(stored: StoredView, *, queue_offset: int, store_host: str = "") -> Any:
    """A stored message as a v2 ``Message`` for a consumer (the caller adds receipt handle, attempt)."""
    message = d.Message()
    message.topic.name = stored.topic
    props = stored.properties
    for name, value in props.items():
        if name not in SYSTEM_PROPERTIES:
            message.user_properties[name] = value
    system = message.system_properties
    system.message_id = stored.msg_id
    if TAGS in props:
        system.tag = props[TAGS]
    if stored.keys:
        system.keys.extend(stored.keys.split(KEY_SEPARATOR))
    system.body_digest.type = d.DigestType.MD5
    system.body_digest.checksum = body_digest(stored.body)
    system.body_encoding = d.Encoding.IDENTITY
    system.message_type = d.MessageType.NORMAL
    system.born_timestamp.FromMilliseconds(
        stored.born_timestamp if stored.born_timestamp is not None else stored.store_timestamp
    )
    system.born_host = props.get(BORN_HOST, "")
    system.store_timestamp.FromMilliseconds(stored.store_timestamp)
    if store_host:
        system.store_host = store_host
    system.queue_id = stored.queue_id
    system.queue_offset = queue_offset
    message.body = stored.body
    return message
