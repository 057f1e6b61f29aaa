"""The ``Settings`` a Telemetry stream answers (core; docs/architecture.md §13).

Every official client waits for the server's Settings (Node without a timeout, the Python
PushConsumer 10 s, Java with its route fetch), and uses fields it cannot default: a producer's
``max_body_size`` (0 refuses every body) and an *exponential* backoff (Java refuses another kind), a
consumer's ``long_polling_timeout`` (its poll and RPC deadline). The answer echoes the client's own
settings and fills these in, as the Java proxy merges them.
"""

from __future__ import annotations

from typing import Any

from mqha.proxy.v2 import definition as d

PRODUCER_MAX_ATTEMPTS = 3
"""Attempts of one send (the clients' default)."""
CONSUMER_MAX_ATTEMPTS = 17
"""Deliveries of one message: RocketMQ's ``maxReconsumeTimes`` 16 + 1."""
CONSUMER_BACKOFF_S = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
"""RocketMQ's redelivery delays (``messageDelayLevel`` from 1 s on)."""
RECEIVE_BATCH_SIZE = 32
LONG_POLLING_TIMEOUT_S = 20
"""RocketMQ proxy's ``grpcClientConsumerMaxLongPollingTimeoutMillis``."""


def settings_reply(client: Any, *, max_body_size: int) -> Any:
    """The server's answer to a client's ``Settings``."""
    out = d.Settings()
    out.CopyFrom(client)
    backoff = out.backoff_policy
    if client.HasField("publishing"):
        backoff.max_attempts = backoff.max_attempts or PRODUCER_MAX_ATTEMPTS
        if not backoff.HasField("exponential_backoff"):
            backoff.exponential_backoff.initial.FromMilliseconds(10)
            backoff.exponential_backoff.max.FromMilliseconds(1000)
            backoff.exponential_backoff.multiplier = 2.0
        out.publishing.max_body_size = max_body_size
        out.publishing.validate_message_type = True
    elif client.HasField("subscription"):
        out.subscription.fifo = False
        out.subscription.receive_batch_size = RECEIVE_BATCH_SIZE
        out.subscription.long_polling_timeout.FromSeconds(LONG_POLLING_TIMEOUT_S)
        backoff.Clear()
        backoff.max_attempts = CONSUMER_MAX_ATTEMPTS
        for seconds in CONSUMER_BACKOFF_S:
            backoff.customized_backoff.next.add().FromSeconds(seconds)
    out.metric.on = False
    return out
