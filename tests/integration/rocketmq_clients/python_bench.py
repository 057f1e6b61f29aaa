"""Closed-loop load with the OFFICIAL RocketMQ 5 Python client (5.1.2, unmodified): CONCURRENCY threads
share one Producer, each sending SIZE-byte messages back to back for DURATION_S seconds.

usage: python_bench.py ACCESS_POINT TOPIC DURATION_S CONCURRENCY SIZE
Prints one JSON line: {"sent", "failed", "seconds", "latencies_ms": [...]} (every acknowledged send).
"""

import json
import os
import sys
import threading
import time

from rocketmq import ClientConfiguration, Credentials, Message, Producer


def credentials() -> Credentials:
    """The access key and secret key of $MQ_ACCESS_KEY and $MQ_SECRET_KEY (unset: none)."""
    return Credentials(os.environ.get("MQ_ACCESS_KEY", ""), os.environ.get("MQ_SECRET_KEY", ""))


def main() -> None:
    access_point, topic = sys.argv[1], sys.argv[2]
    duration, concurrency, size = float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    producer = Producer(ClientConfiguration(access_point, credentials(), request_timeout=3), (topic,))
    producer.startup()
    body = b"x" * size
    warm = Message()
    warm.topic, warm.body = topic, body
    producer.send(warm)  # route, settings and channel before the clock starts
    latencies: list[float] = []
    failed = [0]
    lock = threading.Lock()
    stop_at = time.monotonic() + duration

    def sender() -> None:
        mine: list[float] = []
        errors = 0
        while time.monotonic() < stop_at:
            message = Message()
            message.topic, message.body = topic, body
            started = time.perf_counter()
            try:
                producer.send(message)
            except Exception:
                errors += 1
                continue
            mine.append((time.perf_counter() - started) * 1000)
        with lock:
            latencies.extend(mine)
            failed[0] += errors

    began = time.monotonic()
    threads = [threading.Thread(target=sender) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.monotonic() - began
    producer.shutdown()
    print(
        json.dumps(
            {"sent": len(latencies), "failed": failed[0], "seconds": seconds, "latencies_ms": latencies}
        )
    )


if __name__ == "__main__":
    main()
