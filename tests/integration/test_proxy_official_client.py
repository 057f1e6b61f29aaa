"""RocketMQ 5's official clients, unmodified, through mqproxy into a real cluster: 3 controllers, one
group of 3 replicas (``allAckInSyncStateSet``), mqproxy. The Python client (rocketmq-python-client
5.1.2) runs from its own venv, the Node.js client (rocketmq-client-nodejs 1.0.8) from the committed
lock file, both as subprocesses.

* a few hundred Python sends, each stored once with everything the client set (keys, tag, user
  properties, born timestamp and host, the client's message id, the queue the proxy chose); then a
  SimpleConsumer and a PushConsumer (own groups) each get every message with every field;
* the Node producer and SimpleConsumer do the same round trip;
* the master SIGKILLed in the middle of a send stream: no send raises, the largest gap between
  acknowledgements is measured, and a consumer gets every acknowledged message;
* two proxies, the one in use SIGKILLed under load: no send raises;
* over the wire with the generated stub: routes name the proxy, unimplemented RPCs say so, POP
  invisibility, redelivery and receipt handles.

One cluster and one proxy for the module; every process is stopped by pid when it ends.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from mqha.cluster.local import LocalCluster
from mqha.cluster.nodes import http_json
from tests.helpers.processes import ProcessGroup, free_port, wait_until
from tests.helpers.proxy_harness import (
    GROUP,
    QUEUES,
    connections_to,
    consume,
    lines,
    read_topic,
    start_producer,
    start_proxy,
    wait_done,
)
from tests.helpers.rocketmq_client import SCRIPTS, client_python, node_client

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def client() -> Path:
    return client_python()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    run_dir = tmp_path_factory.mktemp("proxy-cluster")
    with LocalCluster(run_dir, controllers=3, groups=1, replicas=3) as local:
        yield local
    assert local.running_pids() == []


@pytest.fixture(scope="module")
def proxy(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A running mqproxy in front of the cluster; its access point ``127.0.0.1:port``."""
    cluster.wait_ready(90)
    with ProcessGroup() as group:
        yield start_proxy(group, cluster, tmp_path_factory.mktemp("proxy"))[1]


def test_a_few_hundred_sends_are_stored_once_with_every_field(
    client: Path, cluster: LocalCluster, proxy: str, tmp_path: Path
) -> None:
    count = 300
    started_s = int(time.time())
    with ProcessGroup() as group:
        producer = start_producer(group, client, proxy, "ProxyFidelity", count=count, run_dir=tmp_path)
        summary = wait_done(producer, timeout=180)
        sends = [line for line in lines(producer) if "seq" in line]
    assert summary == {"done": True, "ok": count, "failed": 0}, producer.log_tail()
    ids = {line["seq"]: line["msgId"] for line in sends}
    assert len(ids) == count and len(set(ids.values())) == count

    stored = read_topic(cluster, "ProxyFidelity", count)
    by_id = Counter(m.msg_id for m in stored)
    assert set(by_id) == set(ids.values()) and max(by_id.values()) == 1  # each stored exactly once
    queues = Counter()
    for message in stored:
        seq = int(message.text().removeprefix("seq-"))
        assert message.msg_id == ids[seq]
        assert sorted(message.keys.split(" ")) == sorted([f"k{seq}", f"order-{seq}"])
        props = message.properties
        assert props["seq"] == str(seq) and props["TAGS"] == "TagA" and props["BORN_HOST"]
        queues[int(props["QUEUE_ID"])] += 1
        # The Python client sets whole seconds.
        assert message.born_timestamp is not None and message.born_timestamp % 1000 == 0
        assert started_s * 1000 <= message.born_timestamp <= (message.store_timestamp or 0)
    assert set(queues) == set(range(QUEUES)) and max(queues.values()) - min(queues.values()) <= 1

    # Both official consumers, in groups of their own, get every message once with every field.
    for mode in ("simple", "push"):
        got = consume(
            client, mode, proxy, "ProxyFidelity", group=f"Fidelity-{mode}", expected=count, run_dir=tmp_path
        )
        by_body = Counter(line["body"] for line in got)
        assert set(by_body) == {f"seq-{i}" for i in range(count)}
        print(f"\n{mode} consumer: {len(got)} received, {len(got) - len(by_body)} duplicates")
        for line in got:
            seq = int(line["body"].removeprefix("seq-"))
            assert line["msgId"] == ids[seq] and line["tag"] == "TagA"
            assert line["keys"] == sorted([f"k{seq}", f"order-{seq}"]) and line["props"] == {"seq": str(seq)}


def test_the_official_node_client_produces_too(cluster: LocalCluster, proxy: str, tmp_path: Path) -> None:
    """rocketmq-client-nodejs 1.0.8 produces and a Node SimpleConsumer consumes (Node needs the
    Telemetry Settings, one address per endpoint and the MD5 body digest)."""
    count = 100
    modules = node_client()
    with ProcessGroup() as group:
        producer = group.start(
            ["node", str(SCRIPTS / "node_producer.js"), proxy, "ProxyNode", str(count)],
            log_path=tmp_path / "node-producer.out",
            env={"NODE_PATH": str(modules), "HOME": str(tmp_path)},
        )
        summary = wait_done(producer, timeout=180)
        sends = [line for line in lines(producer) if "seq" in line]
    assert summary == {"done": True, "ok": count, "failed": 0}, producer.log_tail()
    ids = {line["seq"]: line["msgId"] for line in sends}
    stored = read_topic(cluster, "ProxyNode", count)
    assert sorted(m.msg_id for m in stored) == sorted(ids.values())
    for message in stored:
        seq = int(message.text().removeprefix("seq-"))
        assert message.msg_id == ids[seq] and message.keys == f"k{seq}"
        assert message.properties["seq"] == str(seq) and message.properties["TAGS"] == "TagN"

    # The Node SimpleConsumer gets them all back, digest checked by the client (MD5).
    with ProcessGroup() as group:
        consumer = group.start(
            ["node", str(SCRIPTS / "node_consumer.js"), proxy, "ProxyNode", "NodeGroup", str(count), "120"],
            log_path=tmp_path / "node-consumer.out",
            env={"NODE_PATH": str(modules), "HOME": str(tmp_path)},
        )
        summary = wait_done(consumer, timeout=180)
        got = [line for line in lines(consumer) if "body" in line]
    assert summary["distinct"] == count, consumer.log_tail()
    assert {line["msgId"] for line in got} == set(ids.values())
    assert all(line["tag"] == "TagN" for line in got)
    print(f"\nnode consumer: {len(got)} received, {len(got) - count} duplicates")


def test_master_killed_mid_stream_no_send_raises(
    client: Path, cluster: LocalCluster, proxy: str, tmp_path: Path
) -> None:
    count, interval = 600, 0.005
    master = cluster.master(GROUP, timeout=30)
    assert master is not None
    with ProcessGroup() as group:
        producer = start_producer(
            group, client, proxy, "ProxyFailover", count=count, run_dir=tmp_path, interval=interval
        )
        deadline = time.monotonic() + 60
        while sum(1 for line in lines(producer) if line.get("ok")) < 150:
            assert producer.is_running() and time.monotonic() < deadline, producer.log_tail()
            time.sleep(0.02)
        killed_at = time.time()
        cluster.kill(master)
        summary = wait_done(producer, timeout=240)
        sends = [line for line in lines(producer) if "seq" in line]
    failures = [line for line in sends if not line["ok"]]
    assert summary["failed"] == 0 and not failures, failures[:5]
    acks = sorted(line["t"] for line in sends)
    gaps = [b - a for a, b in itertools.pairwise(acks)]
    after_kill = [t for t in acks if t > killed_at]
    first_after = after_kill[0] - killed_at if after_kill else None
    print(
        f"\nproxy failover: {len(acks)} acks, largest gap between acks {max(gaps):.3f} s, "
        f"first ack after the kill {first_after:.3f} s"
    )
    assert max(gaps) < 2.0  # the client's 3 s deadline minus the proxy's margin bounds a held send

    # Every acknowledged message is in the new master's log; a retry across the crash may store twice.
    stored = read_topic(cluster, "ProxyFailover", count)
    seqs = Counter(int(m.text().removeprefix("seq-")) for m in stored)
    assert set(seqs) >= {line["seq"] for line in sends}
    print(f"proxy failover: {sum(seqs.values()) - len(seqs)} duplicates stored")
    # A consumer group reads every acknowledged message through the proxy from the new master.
    got = consume(
        client,
        "simple",
        proxy,
        "ProxyFailover",
        group="Failover-simple",
        expected=len(seqs),
        run_dir=tmp_path,
    )
    assert {int(line["body"].removeprefix("seq-")) for line in got} >= {line["seq"] for line in sends}
    print(f"proxy failover: the consumer got {len(got)} messages, {len(got) - len(seqs)} duplicates")

    cluster.start_node(master, timeout=60)  # leave the group whole for whatever runs next
    cluster.wait_ready(90, groups=[GROUP])
    assert os.path.exists(master.log)


def test_a_proxy_killed_under_load_the_client_continues_through_the_other(
    client: Path, cluster: LocalCluster, tmp_path: Path
) -> None:
    """Two proxies in one access point (the Python client takes several addresses; its channel moves
    to the next when one refuses): SIGKILL the one in use mid-stream, no send raises."""
    count, interval = 400, 0.005
    cluster.wait_ready(90)
    with ProcessGroup() as group:
        proxies = [start_proxy(group, cluster, tmp_path) for _ in range(2)]
        access_point = ";".join(address for _, address in proxies)
        producer = start_producer(
            group, client, access_point, "ProxyKill", count=count, run_dir=tmp_path, interval=interval
        )
        deadline = time.monotonic() + 60
        while sum(1 for line in lines(producer) if line.get("ok")) < 100:
            assert producer.is_running() and time.monotonic() < deadline, producer.log_tail()
            time.sleep(0.02)
        in_use = [p for p, address in proxies if connections_to(int(address.rsplit(":", 1)[1]))]
        assert len(in_use) == 1, "the client's channel talks to one proxy at a time"
        killed_at = time.time()
        in_use[0].kill()
        summary = wait_done(producer, timeout=240)
        sends = [line for line in lines(producer) if "seq" in line]
    failures = [line for line in sends if not line["ok"]]
    assert summary["failed"] == 0 and not failures, failures[:5]
    acks = sorted(line["t"] for line in sends)
    gaps = [b - a for a, b in itertools.pairwise(acks)]
    after_kill = [t for t in acks if t > killed_at]
    print(
        f"\nproxy killed: {len(acks)} acks, largest gap between acks {max(gaps):.3f} s, "
        f"first ack after the kill {after_kill[0] - killed_at:.3f} s"
    )
    assert max(gaps) < 2.0
    stored = read_topic(cluster, "ProxyKill", count)
    seqs = Counter(int(m.text().removeprefix("seq-")) for m in stored)
    assert set(seqs) >= {line["seq"] for line in sends}
    print(f"proxy killed: {sum(seqs.values()) - len(seqs)} duplicates stored")


def test_route_names_the_proxy_and_unimplemented_rpcs_say_so(proxy: str) -> None:
    """Over the wire with the generated stub (the only copy of the protos in this process)."""
    import grpc

    from mqha.proxy.v2 import definition as d
    from mqha.proxy.v2 import service as s
    from mqha.proxy.v2 import service_grpc

    host, port = proxy.rsplit(":", 1)
    with grpc.insecure_channel(proxy) as channel:
        stub = service_grpc.MessagingServiceStub(channel)
        access = d.Endpoints(scheme=d.AddressScheme.IPv4, addresses=[d.Address(host=host, port=int(port))])
        route = stub.QueryRoute(
            s.QueryRouteRequest(topic=d.Resource(name="AnyTopic"), endpoints=access), timeout=10
        )
        assert route.status.code == d.Code.OK
        assert {(q.broker.name, q.broker.id) for q in route.message_queues} == {(GROUP, 0)}
        assert all(q.broker.endpoints == access for q in route.message_queues)
        assert sorted(q.id for q in route.message_queues) == list(range(QUEUES))
        with pytest.raises(grpc.RpcError) as refused:
            stub.PullMessage(s.PullMessageRequest(), timeout=10).next()
        assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert "mqproxy does not implement PullMessage" in (refused.value.details() or "")
        with pytest.raises(grpc.RpcError) as refused:
            stub.UpdateOffset(s.UpdateOffsetRequest(), timeout=10)
        assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED


def receive_request(topic: Any, group: Any, invisible_ms: int, long_poll_ms: int) -> Any:
    """A ReceiveMessage of up to 16 messages of ``topic`` for consumer ``group``, any tag, any queue."""
    from mqha.proxy.v2 import definition as d
    from mqha.proxy.v2 import service as s

    request = s.ReceiveMessageRequest(
        group=group,
        message_queue=d.MessageQueue(topic=topic, id=-1, broker=d.Broker(name=GROUP)),
        filter_expression=d.FilterExpression(type=d.FilterType.TAG, expression="*"),
        batch_size=16,
        auto_renew=False,
    )
    request.invisible_duration.FromMilliseconds(invisible_ms)
    request.long_polling_timeout.FromMilliseconds(long_poll_ms)
    return request


def test_pop_invisibility_redelivery_and_stale_handles(proxy: str) -> None:
    """Over the wire with the generated stub: an unacknowledged message comes back after its invisible
    time with attempt 2; the first hand-out's handle is then stale; ChangeInvisibleDuration gives a new
    handle that acknowledges it; an acknowledged message never comes back."""
    import grpc

    from mqha.proxy.v2 import definition as d
    from mqha.proxy.v2 import service as s
    from mqha.proxy.v2 import service_grpc

    topic, group = d.Resource(name="PopSemantics"), d.Resource(name="PopSemanticsGroup")
    with grpc.insecure_channel(proxy) as channel:
        stub = service_grpc.MessagingServiceStub(channel)
        message = d.Message(topic=topic, body=b"pop-me")
        message.system_properties.message_id = "POPSEMANTICS0001"
        sent = stub.SendMessage(s.SendMessageRequest(messages=[message]), timeout=10)
        assert sent.status.code == d.Code.OK, sent

        def receive(invisible_ms: int, long_poll_ms: int = 500) -> list[Any]:
            request = receive_request(topic, group, invisible_ms, long_poll_ms)
            replies = list(stub.ReceiveMessage(request, timeout=10))
            assert replies[0].HasField("status") and replies[-1].HasField("delivery_timestamp")
            return [r.message for r in replies if r.HasField("message")]

        def ack(handle: str) -> int:
            entry = s.AckMessageEntry(message_id="POPSEMANTICS0001", receipt_handle=handle)
            return stub.AckMessage(
                s.AckMessageRequest(group=group, topic=topic, entries=[entry]), timeout=10
            ).status.code

        handed_out = time.monotonic()
        first = receive(2000, long_poll_ms=5000)
        assert [m.body for m in first] == [b"pop-me"] and first[0].system_properties.delivery_attempt == 1
        assert first[0].system_properties.body_digest.checksum == hashlib.md5(b"pop-me").hexdigest().upper()
        assert receive(1000) == []  # invisible for 2 s
        time.sleep(max(0.0, handed_out + 2.2 - time.monotonic()))
        again = receive(60_000, long_poll_ms=5000)  # the pop may have come late: wait for its return
        assert [m.body for m in again] == [b"pop-me"] and again[0].system_properties.delivery_attempt == 2
        assert ack(first[0].system_properties.receipt_handle) == d.Code.INVALID_RECEIPT_HANDLE
        change = s.ChangeInvisibleDurationRequest(
            group=group, topic=topic, receipt_handle=again[0].system_properties.receipt_handle, message_id="x"
        )
        change.invisible_duration.FromMilliseconds(60_000)
        changed = stub.ChangeInvisibleDuration(change, timeout=10)
        assert (
            changed.status.code == d.Code.OK
            and changed.receipt_handle != again[0].system_properties.receipt_handle
        )
        assert ack(again[0].system_properties.receipt_handle) == d.Code.INVALID_RECEIPT_HANDLE
        assert ack(changed.receipt_handle) == d.Code.OK
        assert receive(1000) == []

        # A receive long-polling an empty queue gets a message sent meanwhile, well before its 10 s.
        waited: list[Any] = []
        started = time.monotonic()
        poller = threading.Thread(target=lambda: waited.extend(receive(60_000, long_poll_ms=10_000)))
        poller.start()
        time.sleep(0.5)
        later = d.Message(topic=topic, body=b"pop-later")
        later.system_properties.message_id = "POPSEMANTICS0002"
        assert stub.SendMessage(s.SendMessageRequest(messages=[later]), timeout=10).status.code == d.Code.OK
        poller.join(timeout=15)
        assert [m.body for m in waited] == [b"pop-later"] and time.monotonic() - started < 8


def test_concurrent_sends_and_one_too_large_for_the_broker(cluster: LocalCluster, proxy: str) -> None:
    """Sends arriving together leave as one batch put (mqha.proxy.batching); a message the broker
    refuses (a body of maxMessageSize makes a record over it) fails alone, the others are stored."""
    import grpc

    from mqha.proxy.v2 import definition as d
    from mqha.proxy.v2 import service as s
    from mqha.proxy.v2 import service_grpc

    def send(body: bytes, msg_id: str) -> tuple[str, int]:
        message = d.Message(topic=d.Resource(name="ProxyBatch"), body=body)
        message.system_properties.message_id = msg_id
        with grpc.insecure_channel(
            proxy, options=[("grpc.max_send_message_length", 8 * 1024 * 1024)]
        ) as channel:
            stub = service_grpc.MessagingServiceStub(channel)
            answer = stub.SendMessage(s.SendMessageRequest(messages=[message]), timeout=20)
        return msg_id, answer.entries[0].status.code

    bodies = [(f"small-{i}".encode(), f"BATCHSMALL{i:04d}") for i in range(24)]
    bodies.insert(12, (b"x" * (4 * 1024 * 1024), "BATCHHUGE0001"))
    with ThreadPoolExecutor(max_workers=len(bodies)) as pool:
        codes = dict(pool.map(lambda item: send(*item), bodies))
    assert codes.pop("BATCHHUGE0001") == d.Code.BAD_REQUEST
    assert set(codes.values()) == {d.Code.OK}
    stored = read_topic(cluster, "ProxyBatch", len(codes))
    assert sorted(m.msg_id for m in stored) == sorted(codes)


def _put_counts(cluster: LocalCluster) -> tuple[int, int]:
    """The master's put requests and the messages in them so far (its ``/metrics``)."""
    master = cluster.master(GROUP, timeout=30)
    assert master is not None
    status, text = http_json("GET", master.url + "/metrics", timeout=3.0)
    assert status == 200 and isinstance(text, str)
    totals = {"mqha_broker_put_requests_total": 0.0, "mqha_broker_put_messages_total": 0.0}
    for line in text.splitlines():
        name, _, value = line.partition("{")
        if name in totals:
            totals[name] += float(value.rsplit(" ", 1)[1])
    return int(totals["mqha_broker_put_requests_total"]), int(totals["mqha_broker_put_messages_total"])


@pytest.mark.slow  # a timing property: CI's run beside another worker split rounds (21 puts for 12)
def test_sixteen_senders_in_a_closed_loop_share_one_put_per_round(cluster: LocalCluster, proxy: str) -> None:
    """Senders that each send again once answered (the official clients' threads) leave as one put
    per round once the proxy has seen them together (mqha.proxy.batching holds an idle group's sends
    for the number it expects): a put costs the group a whole replication round. Before, the first
    send of every round found the group idle and went alone: two puts a round."""
    import grpc

    from mqha.proxy.v2 import definition as d
    from mqha.proxy.v2 import service as s
    from mqha.proxy.v2 import service_grpc

    senders, rounds = 16, 12
    barrier = threading.Barrier(senders)
    codes: list[int] = []
    with grpc.insecure_channel(proxy) as channel:
        stub = service_grpc.MessagingServiceStub(channel)

        def sender(number: int) -> None:
            for round_ in range(rounds):
                barrier.wait(timeout=30)
                message = d.Message(topic=d.Resource(name="ProxyGroupCommit"), body=b"x" * 1024)
                message.system_properties.message_id = f"GROUPCOMMIT{number:02d}{round_:03d}"
                answer = stub.SendMessage(s.SendMessageRequest(messages=[message]), timeout=20)
                codes.append(answer.status.code)

        requests_before, messages_before = _put_counts(cluster)
        with ThreadPoolExecutor(max_workers=senders) as pool:
            list(pool.map(sender, range(senders)))
        requests_after, messages_after = _put_counts(cluster)
    assert codes == [d.Code.OK] * senders * rounds
    assert messages_after - messages_before == senders * rounds
    # One put for the first send, one for the other 15, then one a round; a round split by a pause
    # of the loaded machine costs one more.
    puts = requests_after - requests_before
    assert puts <= rounds * 3 // 2, f"{puts} puts for {rounds} rounds of {senders}"


def test_the_prometheus_exporter_counts_rpcs_and_messages(cluster: LocalCluster, tmp_path: Path) -> None:
    """``metricsExporterType=PROM``: a second proxy serves ``/metrics`` on ``metricsPromExporterPort``;
    its RPCs are timed by method and the v2 code of the answer, sent and received messages counted."""
    import urllib.request

    import grpc

    from mqha.proxy.v2 import definition as d
    from mqha.proxy.v2 import service as s
    from mqha.proxy.v2 import service_grpc

    port = free_port()
    with ProcessGroup() as group:
        _, access = start_proxy(
            group, cluster, tmp_path, f"metricsExporterType=PROM\nmetricsPromExporterPort={port}\n"
        )
        topic, consumers = d.Resource(name="ProxyMetrics"), d.Resource(name="ProxyMetricsGroup")
        with grpc.insecure_channel(access) as channel:
            stub = service_grpc.MessagingServiceStub(channel)
            for number in range(3):
                message = d.Message(topic=topic, body=b"counted")
                message.system_properties.message_id = f"PROXYMETRICS{number:04d}"
                assert (
                    stub.SendMessage(s.SendMessageRequest(messages=[message]), timeout=10).status.code
                    == d.Code.OK
                )
            empty = d.Message(topic=topic, body=b"")
            empty.system_properties.message_id = "PROXYMETRICSEMPTY"
            refused = stub.SendMessage(s.SendMessageRequest(messages=[empty]), timeout=10)
            assert refused.status.code == d.Code.MESSAGE_BODY_EMPTY
            request = receive_request(topic, consumers, invisible_ms=30_000, long_poll_ms=500)
            received = [r for r in stub.ReceiveMessage(request, timeout=10) if r.HasField("message")]
            assert len(received) == 3
            with pytest.raises(grpc.RpcError):
                stub.UpdateOffset(s.UpdateOffsetRequest(), timeout=10)
        unimplemented = 'mqha_proxy_rpc_latency_seconds_count{code="UNIMPLEMENTED",method="UpdateOffset"} '

        def scrape() -> str | None:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
                text = response.read().decode()
            return text if unimplemented in text else None

        # An aborted call's status reaches the client before the proxy times the call (grpc.aio's abort
        # sends it, then raises through the interceptor): its row may come a moment after the error.
        text = wait_until(scrape, 10, message="UpdateOffset's UNIMPLEMENTED timed")

    def value(name: str) -> float:
        line = next(line for line in text.splitlines() if line.startswith(name + " "))
        return float(line.rsplit(" ", 1)[1])

    assert value('mqha_proxy_messages_in_total{code="OK"}') == 3
    assert value('mqha_proxy_messages_in_total{code="MESSAGE_BODY_EMPTY"}') == 1
    assert value("mqha_proxy_messages_out_total") == 3
    assert value('mqha_proxy_rpc_latency_seconds_count{code="OK",method="SendMessage"}') == 3
    assert value('mqha_proxy_rpc_latency_seconds_count{code="MESSAGE_BODY_EMPTY",method="SendMessage"}') == 1
    assert value('mqha_proxy_rpc_latency_seconds_count{code="OK",method="ReceiveMessage"}') == 1
    assert value('mqha_proxy_rpc_latency_seconds_count{code="UNIMPLEMENTED",method="UpdateOffset"}') == 1
