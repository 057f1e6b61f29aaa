"""Drive the OFFICIAL RocketMQ 5 Python client (5.1.2, unmodified) as a SimpleConsumer or PushConsumer.

Runs in the client's own virtualenv. usage::

    python_consumer.py simple|push ACCESS_POINT TOPIC GROUP EXPECTED TIMEOUT_S [PAUSE_S]

One JSON line per message consumed -- ``{"body", "msgId", "attempt", "tag", "keys", "props", "handle"}``
-- and a last line ``{"done": true, "received": N}``; stops once EXPECTED distinct bodies came, or at
TIMEOUT_S. PAUSE_S: the SimpleConsumer waits that long after each batch (a slower consumer).
"""

import json
import os
import sys
import threading
import time

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    MessageListener,
    PushConsumer,
    SimpleConsumer,
)

seen: set[bytes] = set()
lock = threading.Lock()
received = [0]


def credentials() -> Credentials:
    """The access key and secret key of $MQ_ACCESS_KEY and $MQ_SECRET_KEY (unset: none)."""
    return Credentials(os.environ.get("MQ_ACCESS_KEY", ""), os.environ.get("MQ_SECRET_KEY", ""))


def record(message) -> None:
    with lock:
        received[0] += 1
        seen.add(message.body)
        line = {
            "body": message.body.decode(),
            "msgId": message.message_id,
            "attempt": message.delivery_attempt,
            "tag": message.tag,
            "keys": sorted(message.keys),
            "props": dict(message.properties),
            "handle": message.receipt_handle,
        }
        print(json.dumps(line), flush=True)


def simple(config, topic: str, group: str, expected: int, deadline: float, *, pause: float = 0.0) -> None:
    consumer = SimpleConsumer(config, group, {topic: FilterExpression("*")}, await_duration=3)
    consumer.startup()
    try:
        while len(seen) < expected and time.monotonic() < deadline:
            for message in consumer.receive(16, 15):
                record(message)
                consumer.ack(message)
            time.sleep(pause)
    finally:
        consumer.shutdown()


class Listener(MessageListener):
    def consume(self, message):
        record(message)
        return ConsumeResult.SUCCESS


def push(config, topic: str, group: str, expected: int, deadline: float, *, pause: float = 0.0) -> None:
    consumer = PushConsumer(
        config, group, Listener(), {topic: FilterExpression("*")}, consumption_thread_count=4
    )
    consumer.startup()
    try:
        while len(seen) < expected and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1)  # let the last acks go out
    finally:
        consumer.shutdown()


def main() -> None:
    mode, access_point, topic, group = sys.argv[1:5]
    expected, timeout = int(sys.argv[5]), float(sys.argv[6])
    pause = float(sys.argv[7]) if len(sys.argv) > 7 else 0.0
    config = ClientConfiguration(access_point, credentials(), request_timeout=3)
    {"simple": simple, "push": push}[mode](
        config, topic, group, expected, time.monotonic() + timeout, pause=pause
    )
    print(json.dumps({"done": True, "received": received[0], "distinct": len(seen)}), flush=True)


if __name__ == "__main__":
    main()
