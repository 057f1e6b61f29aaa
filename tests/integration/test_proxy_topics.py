"""Topics in the controllers, through mqadmin and mqproxy, with real processes (docs/architecture.md §4.5):
3 controllers with an admin token, two broker groups of one replica each, mqadmin as a subprocess,
mqproxy, and the OFFICIAL Python client (5.1.2) asking for its route.

* ``updateTopic -c -t -w 2`` (with the admin token; refused without) writes the topic into both groups;
  ``topicList`` and ``topicRoute`` show it, and the official client's route has 2 writable queues per
  group, so 4, and a send through it is stored;
* a proxy with ``autoCreateTopicEnable=false`` refuses an unknown topic with TOPIC_NOT_FOUND (40402,
  RocketMQ's ``topic[T] not exist, apply first please!``, as the client logs it; it cannot send) but
  serves the created one; after ``deleteTopic`` it refuses that one too, and ``topicRoute`` fails with
  17 TOPIC_NOT_EXIST;
* the topic survives a restart of every controller (journal and snapshot).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqha.cluster.local import LocalCluster
from tests.helpers.processes import ProcessGroup
from tests.helpers.proxy_harness import client_env, start_proxy
from tests.helpers.rocketmq_client import SCRIPTS, client_python
from tests.integration.test_mqadmin import mqadmin

pytestmark = pytest.mark.integration

TOKEN = "topic-admin-token"
TOPIC = "TopicW2"
REFRESH = "proxyGroupRefreshMillis=200\n"


@pytest.fixture(scope="module")
def client() -> Path:
    return client_python()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    run_dir = tmp_path_factory.mktemp("topic-cluster")
    settings = {"adminAuthToken": TOKEN}
    with LocalCluster(run_dir, controllers=3, groups=2, replicas=1, controller_settings=settings) as local:
        local.wait_ready(90)
        yield local
    assert local.running_pids() == []


def admin(cluster: LocalCluster, *args: str, token: bool = True) -> subprocess.CompletedProcess[str]:
    env = {"MQHA_ADMIN_TOKEN": TOKEN} if token else None
    return mqadmin(args[0], "-a", ";".join(cluster.controller_addresses), *args[1:], env=env)


def ok(cluster: LocalCluster, *args: str) -> str:
    done = admin(cluster, *args)
    assert done.returncode == 0 and done.stderr == "", (args, done.stdout, done.stderr)
    return done.stdout


def client_route(
    client: Path, access_point: str, topic: str, run_dir: Path, credentials: tuple[str, str] | None = None
) -> dict[str, Any]:
    done = subprocess.run(
        [str(client), str(SCRIPTS / "python_route.py"), access_point, topic],
        capture_output=True,
        text=True,
        timeout=60,
        env={"HOME": str(run_dir), **client_env(credentials)},
        check=False,
    )
    found = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert found, (done.stdout, done.stderr[-2000:])
    result: dict[str, Any] = json.loads(found[-1])
    return result


def client_log(run_dir: Path) -> str:
    """What the official client logged (under its ``$HOME/logs``): the codes and messages it was told."""
    return "".join(path.read_text(errors="replace") for path in sorted((run_dir / "logs").rglob("*.log*")))


def test_topics_from_mqadmin_to_the_official_clients_route(
    client: Path, cluster: LocalCluster, tmp_path: Path
) -> None:
    name = cluster.cluster_name
    refused = admin(cluster, "updateTopic", "-c", name, "-t", TOPIC, "-w", "2", token=False)
    assert refused.returncode == 1 and "[16 NO_PERMISSION]" in refused.stderr, refused.stderr

    lines = ok(cluster, "updateTopic", "-c", name, "-t", TOPIC, "-w", "2").splitlines()
    assert len(lines) == 3 and all(line.startswith("create topic to ") for line in lines[:2]), lines
    assert lines[2] == (
        f"TopicConfig [topicName={TOPIC}, readQueueNums=8, writeQueueNums=2, perm=RW-, "
        "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false, attributes={}]"
    )
    assert TOPIC in ok(cluster, "topicList").splitlines()
    assert ok(cluster, "topicList", "-c", name).splitlines()[1].split() == [name, TOPIC]
    route = json.loads(ok(cluster, "topicRoute", "-t", TOPIC))
    assert sorted(
        (q["brokerName"], q["readQueueNums"], q["writeQueueNums"]) for q in route["queueDatas"]
    ) == [(group, 8, 2) for group in cluster.groups]
    assert all("0" in broker["brokerAddrs"] for broker in route["brokerDatas"])  # the masters

    with ProcessGroup() as group:
        _, auto = start_proxy(group, cluster, tmp_path, REFRESH)
        _, strict = start_proxy(group, cluster, tmp_path, REFRESH + "autoCreateTopicEnable=false\n")
        seen = client_route(client, auto, TOPIC, tmp_path)
        assert seen.get("writable") == sorted(f"{g}.{TOPIC}.{q}" for g in cluster.groups for q in range(2)), (
            seen
        )  # 2 write queues in each group: the other 6 of the 8 are read-only
        assert "sent" in seen
        assert "writable" in client_route(client, strict, TOPIC, tmp_path)
        unknown = client_route(client, strict, "NoSuchTopic", tmp_path)
        assert "error" in unknown, unknown
        assert "40402, topic[NoSuchTopic] not exist, apply first please!" in client_log(tmp_path)
        assert "writable" in client_route(client, auto, "NoSuchTopic", tmp_path)  # auto-created

        deleted = ok(cluster, "deleteTopic", "-c", name, "-t", TOPIC)
        assert deleted == f"delete topic [{TOPIC}] from cluster [{name}] success.\n"
        gone = admin(cluster, "topicRoute", "-t", TOPIC)
        assert gone.returncode == 1 and "[17 TOPIC_NOT_EXIST]" in gone.stderr, gone.stderr
        time.sleep(0.5)  # the proxy's topic table is reused for proxyGroupRefreshMillis
        after = client_route(client, strict, TOPIC, tmp_path)
        assert "error" in after, after
        assert f"40402, topic[{TOPIC}] not exist, apply first please!" in client_log(tmp_path)


def test_a_topic_survives_a_restart_of_every_controller(cluster: LocalCluster) -> None:
    name = cluster.cluster_name
    ok(cluster, "updateTopic", "-c", name, "-t", "Durable", "-r", "4", "-w", "3", "-p", "6")
    for node in cluster.controllers:
        cluster.stop_node(node.name)
    for node in cluster.controllers:
        cluster.start_node(node.name)
    deadline = time.monotonic() + 60
    while True:
        done = admin(cluster, "topicRoute", "-t", "Durable", "-l")
        if done.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert done.returncode == 0, done.stderr
    rows = done.stdout.splitlines()
    assert rows[-1].split() == ["Total:", "2", "8", "6"], rows
