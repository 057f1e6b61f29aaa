"""mqha client: a producer and a consumer for mqha broker groups, with fast re-routing on failover.

Async API (aiohttp)::

    from mqha.client import Producer, Consumer

    async with Producer("127.0.0.1:9878;127.0.0.1:9888;127.0.0.1:9898", "broker-a") as producer:
        result = await producer.send("orders", b"payload", keys="order-42")
        result.status   # SendStatus.PUT_OK / FLUSH_SLAVE_TIMEOUT / ... / UNKNOWN / FAILED
        result.offset, result.epoch, result.msg_id

Blocking wrappers: :class:`SyncProducer`, :class:`SyncConsumer`. Results and statuses:
``mqha.client.results``. Recording into the history store (docs/architecture.md §5): pass ``record_to=``.
Brokers with ``authenticationEnabled=true``: pass ``user=User(username, password)`` (their
``initAuthenticationUser``); it goes as HTTP Basic credentials with every put and read.
"""

from mqha.client.consumer import Consumer
from mqha.client.producer import Producer
from mqha.client.results import (
    ClientError,
    Message,
    NoRouteError,
    ReadError,
    Route,
    SendResult,
    SendStatus,
)
from mqha.client.route import RouteResolver, parse_controllers
from mqha.client.sync import SyncConsumer, SyncProducer
from mqha.security.credentials import User

__all__ = [
    "ClientError",
    "Consumer",
    "Message",
    "NoRouteError",
    "Producer",
    "ReadError",
    "Route",
    "RouteResolver",
    "SendResult",
    "SendStatus",
    "SyncConsumer",
    "SyncProducer",
    "User",
    "parse_controllers",
]
