"""ACL 2.0 end to end (docs/architecture.md §12.11, §12.12): users and policies made with mqadmin live in
the controllers' replicated state and mqproxy enforces them on the official Python client, with
nothing restarted when they change, and they survive a SIGKILL of the controller leader.

A secure cluster (3 controllers, 1 broker) and an mqproxy with authentication and authorization on.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqha.cluster.local import LocalCluster
from tests.helpers.processes import ProcessGroup, wait_until
from tests.helpers.proxy_harness import client_env, lines, secure_cluster, start_producer, start_proxy
from tests.helpers.rocketmq_client import SCRIPTS, client_python
from tests.integration.test_mqadmin import mqadmin

pytestmark = pytest.mark.integration

APP = ("app", "app-secret-0001")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    yield from secure_cluster(tmp_path_factory.mktemp("acl-cluster"), controllers=3)


def acl_command(cluster: LocalCluster, *args: str) -> Any:
    """mqadmin ``args[0]`` with the controllers (-n), the cluster (-c), ``args[1:]`` and the admin
    token; the finished process."""
    controllers = ";".join(cluster.controller_addresses)
    token = cluster.controller_settings["adminAuthToken"]
    return mqadmin(args[0], "-n", controllers, "-c", cluster.cluster_name, *args[1:], "--token", token)


def admin(cluster: LocalCluster, *args: str) -> str:
    """:func:`acl_command`'s stdout (it must succeed)."""
    done = acl_command(cluster, *args)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def _send(client: Path, access: str, topic: str, run_dir: Path, name: str) -> dict[str, Any]:
    with ProcessGroup() as group:
        producer = start_producer(
            group, client, access, topic, count=2, run_dir=run_dir, credentials=APP, name=name
        )
        wait_until(lambda: not producer.is_running(), 120, message="the producer to end")
        done = [line for line in lines(producer) if line.get("done")]
        assert done, producer.log_tail()
        return done[-1]


def _receive(
    client: Path, access: str, topic: str, group_name: str, run_dir: Path, *, name: str
) -> tuple[int, str]:
    """(distinct messages the official SimpleConsumer got within 15 s, its output)."""
    with ProcessGroup() as group:
        consumer = group.start(
            [
                str(client),
                str(SCRIPTS / "python_consumer.py"),
                "simple",
                access,
                topic,
                group_name,
                "2",
                "15",
            ],
            log_path=run_dir / f"consumer-{name}.out",
            env={"HOME": str(run_dir), **client_env(APP)},
        )
        wait_until(lambda: not consumer.is_running(), 120, message="the consumer to end")
        done = [line for line in lines(consumer) if line.get("done")]
        return (done[-1]["distinct"] if done else 0), consumer.log_tail(1500)


def _wire(access: str, method: str, request: Any) -> Any:
    """One signed call with the generated stub: the first (or only) answer."""
    import grpc

    from mqha.proxy.v2 import service_grpc
    from mqha.security.client_signature import authorization_header, format_date_time

    stamp = format_date_time(time.time())
    metadata = [("x-mq-date-time", stamp), ("authorization", authorization_header(*APP, stamp))]
    with grpc.insecure_channel(access) as channel:
        answer = getattr(service_grpc.MessagingServiceStub(channel), method)(
            request, metadata=metadata, timeout=10
        )
        return next(iter(answer)) if method == "ReceiveMessage" else answer


def test_a_normal_user_gets_what_its_policy_allows_changes_apply_live_and_survive_a_leader_kill(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    from mqha.proxy.v2 import definition as d
    from mqha.proxy.v2 import service as s

    client = client_python()
    settings = cluster.broker_settings
    conf = (
        "authenticationEnabled=true\nauthorizationEnabled=true\nproxyAclRefreshMillis=300\n"
        f"initAuthenticationUser={settings['initAuthenticationUser']}\n"
        f"innerClientAuthenticationCredentials={settings['innerClientAuthenticationCredentials']}\n"
    )
    admin(cluster, "createUser", "-u", APP[0], "-p", APP[1], "-t", "Normal")
    admin(cluster, "createAcl", "-s", "User:app", "-r", "Topic:AclA", "-a", "Pub", "-d", "Allow")
    assert "app" in admin(cluster, "listUser") and APP[1] not in admin(cluster, "getUser", "-u", "app")
    with ProcessGroup() as group:
        _, access = start_proxy(group, cluster, tmp_path, conf)
        # Pub on AclA: sends to AclA work; AclB is refused, with the v2 FORBIDDEN status.
        assert _send(client, access, "AclA", tmp_path, "a") == {"done": True, "ok": 2, "failed": 0}
        assert _send(client, access, "AclB", tmp_path, "b")["ok"] == 0
        message = d.Message(topic=d.Resource(name="AclB"), body=b"x")
        message.system_properties.message_id = "ACLWIRE0001"
        refused = _wire(access, "SendMessage", s.SendMessageRequest(messages=[message]))
        assert refused.status.code == d.Code.FORBIDDEN, refused
        assert "User:app has no permission to Pub Topic:AclB" in refused.status.message
        # No Sub: a receive is refused.
        receive = s.ReceiveMessageRequest(
            group=d.Resource(name="AclGroup"),
            message_queue=d.MessageQueue(
                topic=d.Resource(name="AclA"), id=-1, broker=d.Broker(name="broker-a")
            ),
            filter_expression=d.FilterExpression(type=d.FilterType.TAG, expression="*"),
            batch_size=16,
        )
        receive.invisible_duration.FromMilliseconds(30_000)
        receive.long_polling_timeout.FromMilliseconds(500)
        assert _wire(access, "ReceiveMessage", receive).status.code == d.Code.FORBIDDEN
        got, output = _receive(client, access, "AclA", "AclGroup", tmp_path, name="refused")
        assert got == 0, output
        # QueryAssignment needs the same and pops nothing: it tells when the proxy has the new policy.
        assignment = s.QueryAssignmentRequest(
            topic=d.Resource(name="AclA"), group=d.Resource(name="AclGroup")
        )
        assert _wire(access, "QueryAssignment", assignment).status.code == d.Code.FORBIDDEN

        # updateAcl adds Sub on AclA and the group: the receive works, nothing restarted.
        admin(
            cluster,
            "updateAcl",
            "-s",
            "User:app",
            "-r",
            "Topic:AclA,Group:AclGroup",
            "-a",
            "Pub,Sub",
            "-d",
            "Allow",
        )
        wait_until(
            lambda: _wire(access, "QueryAssignment", assignment).status.code != d.Code.FORBIDDEN or None,
            15,
            message="the proxy to take the new policy",
        )
        got, output = _receive(client, access, "AclA", "AclGroup", tmp_path, name="allowed")
        assert got == 2, output

        # SIGKILL the controller leader: the users and policies are still there, and still enforced.
        leader = cluster.controller_leader()
        assert leader is not None
        cluster.kill(leader)
        wait_until(
            lambda: cluster.controller_leader() not in (None, leader) or None, 60, message="a new leader"
        )
        acls = admin(cluster, "getAcl", "-s", "User:app")
        assert "Topic:AclA" in acls and "Group:AclGroup" in acls and "Pub,Sub" in acls, acls
        assert "app" in admin(cluster, "listUser")
        admin(cluster, "updateAcl", "-s", "User:app", "-r", "Topic:AclB", "-a", "Pub", "-d", "Deny")
        wait_until(
            lambda: (
                _wire(access, "SendMessage", s.SendMessageRequest(messages=[message])).status.code
                == d.Code.FORBIDDEN
                or None
            ),
            15,
            message="the proxy to follow the new leader",
        )
        assert _send(client, access, "AclA", tmp_path, "after-kill") == {"done": True, "ok": 2, "failed": 0}
        cluster.start_node(leader, timeout=60)


def test_bad_acl_input_is_refused_with_its_reason_and_changes_nothing(cluster: LocalCluster) -> None:
    def refused(*args: str) -> str:
        done = acl_command(cluster, *args)
        assert done.returncode != 0, (args, done.stdout)
        return done.stderr

    before = admin(cluster, "listUser"), admin(cluster, "listAcl")
    assert "password must be printable" in refused("createUser", "-u", "tabby", "-p", "pass\tword1")
    assert "field 'password'" in refused("createUser", "-u", "shorty", "-p", "short")
    assert "The subject of User:ghost is not exist" in refused(
        "createAcl", "-s", "User:ghost", "-r", "Topic:A", "-a", "Pub", "-d", "Allow"
    )
    assert "unknown action" in refused(
        "createAcl", "-s", "User:app", "-r", "Topic:A", "-a", "Publish", "-d", "Allow"
    )
    assert "The user is not exist" in refused("deleteUser", "-u", "ghost")
    # Without the admin token: refused (401), nothing listed.
    done = mqadmin("listUser", "-n", ";".join(cluster.controller_addresses), "-c", cluster.cluster_name)
    assert done.returncode != 0 and "token" in done.stderr, done.stderr
    assert (admin(cluster, "listUser"), admin(cluster, "listAcl")) == before
