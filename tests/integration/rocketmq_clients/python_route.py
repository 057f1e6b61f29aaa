"""Show the route the OFFICIAL RocketMQ 5 Python client (5.1.2, unmodified) gets for a topic, then send once.

Runs in the client's own virtualenv (never imported by the tests). usage::

    python_route.py ACCESS_POINT TOPIC

One JSON line: ``{"writable": ["<broker>.<topic>.<queue id>", ...], "sent": {...}}`` with the queues the
client's producer selector takes (writable, master) and the receipt of one send; or ``{"error": ...}``
when the producer cannot start or send (an unknown topic).
"""

import contextlib
import json
import os
import sys

from rocketmq import ClientConfiguration, Credentials, Message, Producer
from rocketmq.v5.client.balancer.queue_selector import QueueSelector


def credentials() -> Credentials:
    """The access key and secret key of $MQ_ACCESS_KEY and $MQ_SECRET_KEY (unset: none)."""
    return Credentials(os.environ.get("MQ_ACCESS_KEY", ""), os.environ.get("MQ_SECRET_KEY", ""))


def main() -> None:
    access_point, topic = sys.argv[1], sys.argv[2]
    producer = Producer(ClientConfiguration(access_point, credentials(), request_timeout=3), (topic,))
    try:
        producer.startup()
        route = producer._retrieve_topic_route_data(topic)  # the client's own route of the topic
        writable = sorted(str(q) for q in QueueSelector.producer_queue_selector(route).all_queues())
        message = Message()
        message.topic = topic
        message.body = b"route"
        receipt = producer.send(message)
        sent = {"msgId": receipt.message_id, "queue": str(receipt.message_queue)}
        print(json.dumps({"writable": writable, "sent": sent}), flush=True)
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"[:500]}), flush=True)
    finally:
        with contextlib.suppress(Exception):
            producer.shutdown()


if __name__ == "__main__":
    main()
