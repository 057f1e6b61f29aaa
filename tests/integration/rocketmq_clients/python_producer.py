"""Drive the OFFICIAL RocketMQ 5 Python client (rocketmq-python-client 5.1.2, unmodified) as a producer.

Runs in the client's own virtualenv (never imported by the tests: one process must not load two
generated copies of the v2 protos). usage::

    python_producer.py ACCESS_POINT TOPIC COUNT [INTERVAL_S]

One JSON line per send on stdout -- ``{"seq", "ok", "msgId", "t", "error"?}`` -- and a last line
``{"done": true, "ok": N, "failed": M}``. Message i has body ``seq-<i>``, tag ``TagA``, keys
``k<i>`` and ``order-<i>``, user property ``seq=<i>``. With ``MQHA_TEST_TLS=1`` the client's TLS option
is on (it trusts ``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH``, gRPC's own variable).
"""

import json
import os
import sys
import time

from rocketmq import ClientConfiguration, Credentials, Message, Producer


def credentials() -> Credentials:
    """The access key and secret key of $MQ_ACCESS_KEY and $MQ_SECRET_KEY (unset: none)."""
    return Credentials(os.environ.get("MQ_ACCESS_KEY", ""), os.environ.get("MQ_SECRET_KEY", ""))


def main() -> None:
    access_point, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    interval = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    tls = os.environ.get("MQHA_TEST_TLS") == "1"
    configuration = ClientConfiguration(access_point, credentials(), request_timeout=3)
    producer = Producer(configuration, (topic,), tls_enable=tls)
    producer.startup()
    ok = failed = 0
    try:
        for seq in range(count):
            message = Message()
            message.topic = topic
            message.body = f"seq-{seq}".encode()
            message.tag = "TagA"
            message.keys = f"k{seq}"
            message.keys = f"order-{seq}"
            message.add_property("seq", str(seq))
            try:
                receipt = producer.send(message)
            except Exception as exc:  # the test counts these: none may happen
                failed += 1
                error = f"{type(exc).__name__}: {exc}"[:300]
                line = {"seq": seq, "ok": False, "t": time.time(), "error": error}
            else:
                ok += 1
                line = {"seq": seq, "ok": True, "msgId": receipt.message_id, "t": time.time()}
            print(json.dumps(line), flush=True)
            if interval:
                time.sleep(interval)
    finally:
        producer.shutdown()
    print(json.dumps({"done": True, "ok": ok, "failed": failed}), flush=True)


if __name__ == "__main__":
    main()
