"""Consumer offsets survive mqproxy and controller restarts (docs/architecture.md §13, §4.5), with real
processes: 3 controllers, one broker group of one replica, authentication on (the proxies commit
offsets with the inner credentials), two mqproxy nodes of the cluster, and the OFFICIAL Python client's
SimpleConsumer (5.1.2) in one consumer group.

1. 300 messages are sent through proxy-0; a SimpleConsumer on proxy-0 takes (and acknowledges) about
   100 of them; after a commit period the group's offsets are at the controllers.
2. A SimpleConsumer of the same group on proxy-1 (first use there) goes on from the committed offset:
   none of the first 100 comes again. It takes about 3 s (a pause after each batch) and proxy-1
   commits every 2 s, so it commits once or twice meanwhile and not what came last.
3. Both proxies are SIGKILLed at once right after that consumer ends, every controller is restarted
   (leader change, journal and snapshot), a proxy starts again, and the group consumes the rest:
   never a message of step 1 again; of step 2 only messages at or above the offsets committed before
   the kill (what was acknowledged after proxy-1's last commit, counted); every message at least once.
4. ``mqadmin consumerProgress -g`` shows every queue of the topic with no backlog left, and 300
   messages in all.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqha.cluster.local import LocalCluster
from mqha.security.credentials import parse_user
from tests.helpers.processes import ProcessGroup
from tests.helpers.proxy_harness import consume, start_producer, wait_done
from tests.helpers.rocketmq_client import client_python
from tests.integration.test_mqadmin import mqadmin

pytestmark = pytest.mark.integration

TOPIC = "OffsetsSurvive"
GROUP = "GroupSurvives"
COUNT = 300
FLUSH_S = 1.0  # flushConsumerOffsetInterval's default
SECOND_FLUSH_S = 2.0  # proxy-1's


@pytest.fixture(scope="module")
def client() -> Path:
    return client_python()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    run_dir = tmp_path_factory.mktemp("offsets-cluster")
    local = LocalCluster(run_dir, controllers=3, groups=1, replicas=1, secure=True, proxies=2)
    # proxy-1 commits every 2 s, so step 2 (about 3 s) ends with acknowledgements not committed yet.
    local.node_settings["proxy-1"] = {"flushConsumerOffsetInterval": str(int(SECOND_FLUSH_S * 1000))}
    with local:
        local.wait_ready(90)
        yield local
    assert local.running_pids() == []


def committed(cluster: LocalCluster) -> dict[int, int]:
    """The group's offsets at the controllers by queue (the open read route, any controller's leader)."""
    for address in cluster.controller_addresses:
        url = f"http://{address}/v1/consumer-offsets?consumerGroup={GROUP}&topic={TOPIC}"
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                reply = json.loads(response.read())
        except OSError:
            continue
        if reply.get("code") == 0:
            return {entry["queueId"]: entry["commitOffset"] for entry in reply["offsets"]}
    return {}


def bodies(messages: list[dict]) -> list[str]:
    return [message["body"] for message in messages]


def position(message: dict) -> tuple[int, int]:
    """(queue id, offset) from mqproxy's receipt handle ``"<broker> <queue> <offset> <token>"``."""
    _, queue_id, offset, _ = message["handle"].split(" ")
    return int(queue_id), int(offset)


def test_a_group_goes_on_from_its_committed_offsets_across_proxy_and_controller_restarts(
    client: Path, cluster: LocalCluster, tmp_path: Path
) -> None:
    first, second = cluster.proxy_addresses
    # The proxies authenticate clients (§12.12): the brokers' user is their Super user.
    user = parse_user(cluster.broker_settings["initAuthenticationUser"])
    signed = (user.username, user.password)
    with ProcessGroup() as group:
        producer = start_producer(
            group, client, first, TOPIC, count=COUNT, run_dir=tmp_path, credentials=signed
        )
        assert wait_done(producer, timeout=180)["ok"] == COUNT
    everything = {f"seq-{i}" for i in range(COUNT)}

    # 1. About 100 on proxy-0, then a commit period.
    step1 = set(
        bodies(
            consume(
                client,
                "simple",
                first,
                TOPIC,
                group=GROUP,
                expected=100,
                run_dir=tmp_path,
                credentials=signed,
            )
        )
    )
    time.sleep(2.5 * FLUSH_S)
    offsets = committed(cluster)
    assert offsets and any(offset > 0 for offset in offsets.values()), offsets

    # 2. The same group on proxy-1 starts from there: nothing of step 1 again.
    step2_run = consume(
        client,
        "simple",
        second,
        TOPIC,
        group=GROUP,
        expected=100,
        run_dir=tmp_path / "2",
        pause=0.4,
        credentials=signed,
    )
    step2 = set(bodies(step2_run))
    assert not step1 & step2, f"proxy-1 handed out {len(step1 & step2)} messages proxy-0's consumers acked"
    before_kill = committed(cluster)
    for proxy in cluster.proxies:  # at once: proxy-1 has not committed its last acknowledgements
        cluster.kill(proxy.name)

    # 3. Every controller restarted, a proxy again; the rest.
    for node in cluster.controllers:
        cluster.stop_node(node.name)
    for node in cluster.controllers:
        cluster.start_node(node.name)
    cluster.start_node(cluster.proxies[0].name, timeout=60)
    step3: list[str] = []
    for round_ in range(3):  # a round stops at `expected` distinct, redeliveries included
        missing = everything - step1 - step2 - set(step3)
        if not missing:
            break
        step3 += bodies(
            consume(
                client,
                "simple",
                first,
                TOPIC,
                group=GROUP,
                expected=len(missing),
                run_dir=tmp_path / f"3-{round_}",
                credentials=signed,
            )
        )
        time.sleep(2.5 * FLUSH_S)
    redelivered = step2 & set(step3)
    where = {message["body"]: position(message) for message in step2_run}
    below = [body for body in redelivered if where[body][1] < before_kill.get(where[body][0], 0)]
    assert not below, f"redelivered below the offsets committed before the kill: {sorted(below)[:10]}"
    print(
        f"step 1: {len(step1)} consumed; step 2 (proxy-1): {len(step2)}, 0 of step 1 again; "
        f"step 3 (after SIGKILL of both proxies and a restart of every controller): {len(set(step3))}, "
        f"{len(redelivered)} of step 2 again (acknowledged after proxy-1's last commit)"
    )
    assert not step1 & set(step3), "a message acknowledged and committed in step 1 came again"
    assert len(redelivered) < len(step2), "the group started from the beginning again"
    assert everything <= step1 | step2 | set(step3), sorted(everything - step1 - step2 - set(step3))[:10]

    # 4. mqadmin consumerProgress: the controllers' offsets against each queue of the master.
    done = mqadmin("consumerProgress", "-a", ";".join(cluster.controller_addresses), "-g", GROUP, "-t", TOPIC)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:3] == ["#Topic", "#Broker", "Name"] and lines[-1] == "Consume Diff Total: 0", (
        lines
    )
    rows = [line.split() for line in lines[1:-2]]
    assert rows and all(row[0] == TOPIC and row[3] == row[4] and row[5] == "0" for row in rows), rows
    assert sum(int(row[3]) for row in rows) == COUNT


def test_an_unsigned_offset_commit_is_refused(cluster: LocalCluster) -> None:
    """With authentication on, only a holder of the inner credentials (mqproxy, as a broker) moves
    offsets: an unsigned commit is 401 on every controller and changes nothing."""
    body = {
        "offsets": [
            {
                "consumerGroup": "Intruder",
                "topic": TOPIC,
                "brokerName": "broker-a",
                "queueId": 0,
                "commitOffset": 99,
            }
        ]
    }
    for address in cluster.controller_addresses:
        request = urllib.request.Request(
            f"http://{address}/v1/consumer-offsets/update",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            urllib.request.urlopen(request, timeout=5)
        except urllib.error.HTTPError as exc:
            assert exc.code == 401, exc.code
            assert json.loads(exc.read())["code"] == 16  # NO_PERMISSION
        else:
            raise AssertionError(f"{address} took an unsigned offset commit")
    url = f"http://{cluster.controller_addresses[0]}/v1/consumer-offsets?consumerGroup=Intruder"
    for address in cluster.controller_addresses:
        try:
            with urllib.request.urlopen(
                url.replace(cluster.controller_addresses[0], address), timeout=5
            ) as r:
                reply = json.loads(r.read())
        except urllib.error.HTTPError:
            continue  # not the leader (421)
        assert reply["code"] == 0 and reply["offsets"] == [], reply
        return
    raise AssertionError("no controller answered the read")
