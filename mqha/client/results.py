"""What the client returns: send statuses and results, routes, messages, errors (core: values only).

Error tree::

    ClientError                  anything the client raises
    ├── NoRouteError             no controller answered with a master for the group (yet)
    └── ReadError                a read could not be served within its deadline

Sends never raise for broker-side or network outcomes: they return a :class:`SendResult` whose
``status`` says what is known about the message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from mqha.errors import MqhaError


class SendStatus(Enum):
    """The outcome of one send, as far as the client can know it.

    ``PUT_OK``, ``FLUSH_DISK_TIMEOUT`` and ``FLUSH_SLAVE_TIMEOUT`` are the broker's own
    ``PutMessageStatus`` names for a stored message (only ``PUT_OK`` meets the broker's ack policy,
    e.g. every SyncStateSet member has it under ``allAckInSyncStateSet``). ``UNKNOWN``: a request was
    written and no answer came back (timeout, connection lost): the message may or may not be stored,
    so it is never reported as failed. ``FAILED``: the client knows nothing was stored (every attempt
    was refused before the write or rejected by the broker) and the deadline passed or the request
    is invalid.
    """

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    UNKNOWN = "UNKNOWN"
    FAILED = "FAILED"

    @property
    def stored(self) -> bool:
        """The broker said it stored the message (perhaps not yet durable or replicated)."""
        return self in (SendStatus.PUT_OK, SendStatus.FLUSH_DISK_TIMEOUT, SendStatus.FLUSH_SLAVE_TIMEOUT)


STORED_STATUSES = frozenset(s.value for s in SendStatus if s.stored)


@dataclass(frozen=True)
class SendResult:
    """One message's send outcome.

    ``offset``/``size``/``epoch``/``broker_id``/``address`` describe where the broker stored it (None
    unless ``status.stored``). ``attempts`` counts requests made; ``first_error_at`` is the
    ``time.monotonic()`` of the first failed attempt (None when the first attempt answered), and
    ``completed_at`` when the result was decided -- their difference is this send's failover gap.
    """

    msg_id: str
    status: SendStatus
    broker_name: str
    offset: int | None = None
    size: int | None = None
    epoch: int | None = None
    broker_id: int | None = None
    address: str | None = None
    attempts: int = 1
    started_at: float = 0.0
    first_error_at: float | None = None
    completed_at: float = 0.0
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Acknowledged by the broker's ack policy (``PUT_OK``)."""
        return self.status is SendStatus.PUT_OK

    @property
    def latency(self) -> float:
        return self.completed_at - self.started_at


@dataclass(frozen=True)
class Route:
    """Where a broker group's master is, as the controller leader said (spec replica-info)."""

    broker_name: str
    master_broker_id: int
    master_address: str
    master_epoch: int
    sync_state_set: tuple[int, ...] = ()
    sync_state_set_epoch: int | None = None


@dataclass(frozen=True)
class Message:
    """One message as a consumer receives it."""

    broker_name: str
    offset: int
    size: int
    msg_id: str
    topic: str
    body: bytes
    keys: str = ""
    properties: dict[str, str] = field(default_factory=dict)
    store_timestamp: int | None = None
    broker_id: int | None = None
    born_timestamp: int | None = None

    @property
    def next_offset(self) -> int:
        return self.offset + self.size

    def text(self, encoding: str = "utf-8") -> str:
        return self.body.decode(encoding)


class ClientError(MqhaError):
    """Base of the client's exceptions."""


class NoRouteError(ClientError):
    """No controller answered with a master for the group (no quorum, or no master elected yet)."""


class ReadError(ClientError):
    """A read could not be served within its deadline (no master reachable, or the broker refused)."""


def describe(exc: BaseException) -> str:
    """A short one-line name of a network error, for ``SendResult.error``."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def json_field(body: Any, name: str) -> Any:
    return body.get(name) if isinstance(body, dict) else None
