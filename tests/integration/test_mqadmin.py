"""``mqadmin`` as a subprocess against 3 real ``mqcontroller`` processes (docs/reference-behaviour.md §19,
docs/architecture.md §6).

Output is compared line by line with the formats of docs/reference-behaviour.md §19 (the expected text is
written out here, not produced by ``mqha.admin_cli.commands``). Every command also gets its error paths:
unknown broker set, controller down, bad option; and, with ``adminAuthToken`` set, mutating commands without
the token are refused and change nothing while reads still work. Broker-facing commands (getBrokerEpoch,
haStatus) against real brokers are in ``test_mqadmin_brokers.py``.

Broker sets (all of cluster c1, heartbeats with a long timeout so every replica stays alive):
b1 = 3 replicas, master 1, SyncStateSet {1, 2} (read-only here); b2 = 2 replicas, master 1,
SyncStateSet {1, 2} (electMaster); b3 = replicas 1 and 2, only 1 alive (cleanBrokerMetadata).
The last test stops the leader, so it must stay last.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.processes import ProcessGroup, free_port, wait_until
from tests.integration.controller_cluster import (
    ControllerCluster,
    HeartbeatSender,
    Node,
    heartbeat,
    register_broker,
)

pytestmark = pytest.mark.integration

TOKEN = "s3cret-admin"
TOKEN_ENV = "MQHA_ADMIN_TOKEN"


def mqadmin_command() -> list[str]:
    script = Path(sys.executable).with_name("mqadmin")
    return [str(script)] if script.exists() else [sys.executable, "-m", "mqha.admin_cli"]


def mqadmin(
    *args: str, env: dict[str, str] | None = None, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    """Run ``mqadmin args``; the caller's MQHA_ADMIN_TOKEN never leaks in unless ``env`` sets it."""
    full_env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    full_env.update(env or {})
    return subprocess.run(
        [*mqadmin_command(), *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        check=False,
    )


def ok(*args: str, **kwargs: Any) -> list[str]:
    """stdout lines of a successful run (``split('\\n')``, so the leading/trailing blanks count)."""
    done = mqadmin(*args, **kwargs)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    assert done.stderr == "", done.stderr
    return done.stdout.split("\n")


def fails(*args: str, exit_code: int = 1, code: int | None = None, mentions: str = "", **kwargs: Any) -> str:
    """stderr of a failed run, checked for the exit status, ``[<code> <name>]`` and a phrase."""
    done = mqadmin(*args, **kwargs)
    assert done.returncode == exit_code, (args, done.returncode, done.stdout, done.stderr)
    assert done.stdout == "", done.stdout
    if code is not None:
        assert f"command failed: [{code} " in done.stderr, done.stderr
    assert mentions in done.stderr, done.stderr
    return done.stderr


@dataclass
class Setup:
    cluster: ControllerCluster
    beats: HeartbeatSender

    @property
    def all(self) -> str:
        return ";".join(n.address for n in self.cluster.nodes)

    def leader(self) -> Node:
        return self.cluster.leader(timeout=10)

    def follower(self) -> Node:
        return self.cluster.followers(self.leader())[0]

    def state(self) -> dict[str, Any]:
        return self.cluster.wait_same_state(self.cluster.alive())


def _alter(leader: Node, name: str, master_epoch: int, sss_epoch: int, members: list[int]) -> None:
    body = {
        "masterBrokerId": 1,
        "masterEpoch": master_epoch,
        "syncStateSet": members,
        "syncStateSetEpoch": sss_epoch,
    }
    status, reply = leader.post(f"/v1/groups/{name}/sync-state-set", body)
    assert status == 200, reply


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    with ProcessGroup() as group:
        cluster = ControllerCluster(
            group, tmp_path_factory.mktemp("mqadmin"), settings={"adminAuthToken": TOKEN}
        )
        cluster.start()
        leader = cluster.leader(timeout=10)
        members = {"b1": 3, "b2": 2, "b3": 2}
        for name, count in members.items():
            assert [register_broker(leader, name) for _ in range(count)] == list(range(1, count + 1))
        with HeartbeatSender(cluster, interval=0.5) as beats:
            for name, count in members.items():
                for broker_id in range(1, count + 1):
                    if (name, broker_id) != ("b3", 2):  # b3's replica 2 is down: it can be cleaned
                        beats.set(heartbeat(name, broker_id, timeout_ms=600_000))
            beats.send_once()
            for name in members:
                status, reply = leader.post(f"/v1/groups/{name}/elect", {"clusterName": "c1", "brokerId": 1})
                assert status == 200, reply
            _alter(leader, "b1", 1, 1, [1, 2])
            _alter(leader, "b2", 1, 1, [1, 2])
            cluster.wait_same_state(cluster.nodes)
            yield Setup(cluster, beats)


def replica(name: str, broker_id: int, alive: bool = True) -> str:
    return (
        f"ReplicaIdentity{{brokerName='{name}', brokerId={broker_id}, "
        f"brokerAddress='127.0.0.1:{10900 + broker_id}', alive={'true' if alive else 'false'}}}"
    )


def b1_lines() -> list[str]:
    return [
        "",
        "#brokerName\tb1",
        "#MasterBrokerId\t1",
        "#MasterAddr\t127.0.0.1:10901",
        "#MasterEpoch\t1",
        "#SyncStateSetEpoch\t2",
        "#SyncStateSetNums\t2",
        "",
        f"InSyncReplica:\t{replica('b1', 1)}",
        "",
        f"InSyncReplica:\t{replica('b1', 2)}",
        "",
        f"NotInSyncReplica:\t{replica('b1', 3)}",
    ]


# ------------------------------------------------------------------------------ getControllerMetaData


def test_get_controller_metadata_from_a_follower(env: Setup) -> None:
    leader, follower = env.leader(), env.follower()
    peers = [f"#Peer:\t{n.node_id}:{n.address}" for n in env.cluster.nodes]
    assert ok("getControllerMetaData", "-a", follower.address) == [
        "",
        "#ControllerGroup\ttest-group",
        f"#ControllerLeaderId\t{leader.node_id}",
        f"#ControllerLeaderAddress\t{leader.address}",
        *peers,
        "",
    ]
    doc = json.loads(ok("getControllerMetaData", "-a", follower.address, "--json")[0])
    assert doc["controllerLeaderAddress"] == leader.address and doc["isLeader"] is False
    assert doc["peers"] == [f"{n.node_id}:{n.address}" for n in env.cluster.nodes]


def test_get_controller_metadata_errors(env: Setup) -> None:
    dead = f"127.0.0.1:{free_port()}"
    fails("getControllerMetaData", "-a", dead, exit_code=3, code=10001, mentions="can be reached")
    # The first reachable address of a list answers.
    assert (
        ok("getControllerMetaData", "-a", f"{dead};{env.leader().address}")[1]
        == "#ControllerGroup\ttest-group"
    )
    fails("getControllerMetaData", exit_code=2, mentions="the following arguments are required: -a")
    fails("getControllerMetaData", "-a", env.all, "--bogus", exit_code=2, mentions="unrecognized arguments")
    fails("getControllerMetaData", "-a", "nohostport", exit_code=2, mentions="expected host:port")


# ------------------------------------------------------------------------------------ getSyncStateSet


def test_get_sync_state_set_through_any_controller(env: Setup) -> None:
    dead = f"127.0.0.1:{free_port()}"
    # A follower alone, or a list whose first node is down, still reaches the leader.
    assert ok("getSyncStateSet", "-a", env.follower().address, "-b", "b1") == [*b1_lines(), ""]
    assert ok("getSyncStateSet", "-a", f"{dead};{env.follower().address}", "-b", "b1") == [*b1_lines(), ""]
    by_cluster = ok("getSyncStateSet", "-a", env.all, "-c", "c1")
    names = [line for line in by_cluster if line.startswith("#brokerName")]
    assert names == ["#brokerName\tb1", "#brokerName\tb2", "#brokerName\tb3"]
    assert by_cluster[: len(b1_lines())] == b1_lines()
    doc = json.loads(ok("getSyncStateSet", "-a", env.all, "-b", "b1", "--json")[0])
    info = doc["replicasInfoTable"]["b1"]
    assert (info["masterBrokerId"], info["syncStateSetEpoch"]) == (1, 2)
    assert [r["brokerId"] for r in info["inSyncReplicas"]] == [1, 2]


def test_get_sync_state_set_interval(env: Setup) -> None:
    lines = ok("getSyncStateSet", "-a", env.all, "-b", "b1", "-i", "0.1", "--rounds", "2")
    assert lines == [*b1_lines(), *b1_lines(), ""]
    # -i without a value repeats (every 3 s) until SIGTERM, which ends it with status 0.
    with subprocess.Popen(
        [*mqadmin_command(), "getSyncStateSet", "-a", env.all, "-b", "b1", "-i"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        first = [proc.stdout.readline().rstrip("\n") for _ in range(len(b1_lines()))]
        assert first == b1_lines()
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=10) == 0


def test_get_sync_state_set_errors(env: Setup) -> None:
    fails("getSyncStateSet", "-a", env.all, "-b", "nope", code=2008, mentions="'nope' is not known")
    fails("getSyncStateSet", "-a", env.all, "-c", "nope", code=2008, mentions="cluster 'nope'")
    dead = f"127.0.0.1:{free_port()};127.0.0.1:{free_port()}"
    fails("getSyncStateSet", "-a", dead, "-b", "b1", exit_code=3, code=10001)
    fails("getSyncStateSet", "-a", env.all, exit_code=2, mentions="one of -b brokerName or -c clusterName")
    fails("getSyncStateSet", "-a", env.all, "-b", "b1", "-i", "x", exit_code=2, mentions="-i/--interval")
    fails("getSyncStateSet", "-a", env.all, "-b", "b1", "-z", exit_code=2, mentions="unrecognized")
    # With -i a failed round is reported and the loop goes on.
    done = mqadmin("getSyncStateSet", "-a", env.all, "-b", "nope", "-i", "0.1", "--rounds", "2")
    assert done.returncode == 1 and done.stderr.count("[2008 ") == 2, done
    done = mqadmin("getSyncStateSet", "-a", env.all, "-b", "nope", "--json")
    assert done.returncode == 1
    assert json.loads(done.stderr) == {
        "command": "getSyncStateSet",
        "code": 2008,
        "codeName": "CONTROLLER_BROKER_METADATA_NOT_EXIST",
        "remark": "broker set 'nope' is not known to the controller",
        "address": env.leader().address,
    }


# ------------------------------------------------------------------------------------ electMaster


def test_elect_master_prints_epochs_and_members(env: Setup) -> None:
    before = env.state()
    refused = fails(
        "electMaster", "-a", env.all, "-b", "2", "-bn", "b2", "-c", "c1", code=16, mentions="--token"
    )
    assert "Authorization: Bearer" in refused
    assert env.state() == before  # nothing changed
    elect_b2 = ("electMaster", "-b", "2", "-bn", "b2", "-c", "c1")
    fails(*elect_b2, "-a", env.all, "--token", "wrong", code=16, mentions="wrong admin token")
    lines = ok(*elect_b2, "-a", env.follower().address, "--token", TOKEN)
    assert lines == [
        "",
        "#ClusterName\tc1",
        "#BrokerName\tb2",
        "#BrokerMasterAddr\t127.0.0.1:10902",
        "#MasterEpoch\t2",
        "#SyncStateSetEpoch\t3",
        "\t#Broker\t1\t127.0.0.1:10901",
        "\t#Broker\t2\t127.0.0.1:10902",
        "",
    ]
    assert ok("getSyncStateSet", "-a", env.all, "-b", "b2")[2:5] == [
        "#MasterBrokerId\t2",
        "#MasterAddr\t127.0.0.1:10902",
        "#MasterEpoch\t2",
    ]
    # Electing the current master again: 2011, the command fails.
    fails(*elect_b2, "-a", env.all, "--token", TOKEN, code=2011, mentions="still alive")
    # The token from the environment works as well; --json gives the reply fields.
    done = mqadmin(
        "electMaster", "-a", env.all, "-b", "1", "-bn", "b2", "-c", "c1", "--json", env={TOKEN_ENV: TOKEN}
    )
    assert done.returncode == 1, done  # broker 1 left the SyncStateSet: 2012, so the token was accepted
    assert json.loads(done.stderr)["code"] == 2012


def test_elect_master_errors(env: Setup) -> None:
    auth = ("--token", TOKEN)
    fails("electMaster", "-a", env.all, "-b", "1", "-bn", "nope", "-c", "c1", *auth, code=2010)
    fails("electMaster", "-a", env.all, "-b", "9", "-bn", "b1", "-c", "c1", *auth, code=2012)
    # -c names the set's cluster: another name is refused and nothing changes (docs/architecture.md §7).
    before = env.state()
    wrong_cluster = ("electMaster", "-a", env.all, "-b", "2", "-bn", "b1", "-c", "c9", *auth)
    fails(*wrong_cluster, code=2010, mentions="cluster c1")
    assert env.state() == before
    dead = f"127.0.0.1:{free_port()}"
    fails("electMaster", "-a", dead, "-b", "1", "-bn", "b1", "-c", "c1", *auth, exit_code=3, code=10001)
    fails("electMaster", "-a", env.all, "-b", "one", "-bn", "b1", "-c", "c1", exit_code=2, mentions="integer")
    fails("electMaster", "-a", env.all, "-b", "1", "-c", "c1", exit_code=2, mentions="-bn/--brokerName")


# ---------------------------------------------------------------------------- cleanBrokerMetadata


def test_clean_broker_metadata(env: Setup) -> None:
    base = ("cleanBrokerMetadata", "-a", env.all, "-bn", "b3")
    before = env.state()
    fails(*base, "-b", "2", "-c", "c1", code=16, mentions="--token")
    assert env.state() == before
    fails(
        *base, "-b", "1", "-c", "c1", "--token", TOKEN, code=2009, mentions="Broker [b3,  1] is still alive"
    )
    fails(*base, "-b", "x;2", "-c", "c1", "--token", TOKEN, code=2009, mentions='For input string: "x"')
    assert ok(*base, "-b", "2", "-c", "c1", "--token", TOKEN) == [
        "clear broker b3 metadata from controller success! ",
        "",
    ]
    lines = ok("getSyncStateSet", "-a", env.all, "-b", "b3")
    assert [line for line in lines if "Replica:" in line] == [f"InSyncReplica:\t{replica('b3', 1)}"]


def test_clean_broker_metadata_errors(env: Setup) -> None:
    auth = ("--token", TOKEN)
    fails(
        "cleanBrokerMetadata",
        "-a",
        env.all,
        "-bn",
        "nope",
        "-c",
        "c1",
        *auth,
        code=2009,
        mentions="Broker nope is not existed,clean broker data failure.",
    )
    fails(
        "cleanBrokerMetadata",
        "-a",
        env.all,
        "-bn",
        "b1",
        "-b",
        "2",
        *auth,
        exit_code=2,
        mentions="cleanLivingBroker option is false, clusterName option can not be empty.",
    )
    before = env.state()
    wrong_cluster = ("cleanBrokerMetadata", "-a", env.all, "-bn", "b1", "-b", "3", "-c", "c9", *auth)
    fails(*wrong_cluster, code=2009, mentions="registered in cluster c1, not in c9")
    assert env.state() == before  # b1's replica 3 is alive in c1: a wrong -c must not clean anything
    dead = f"127.0.0.1:{free_port()}"
    fails("cleanBrokerMetadata", "-a", dead, "-bn", "b1", "-c", "c1", *auth, exit_code=3, code=10001)
    fails(
        "cleanBrokerMetadata", "-a", env.all, "-bn", "b1", "-l", "yes", exit_code=2, mentions="unrecognized"
    )


# ------------------------------------------------------------------------------- controller config


def _config_lines(lines: Sequence[str], key: str) -> list[str]:
    return [line for line in lines if line.startswith(key + " ")]


def test_get_controller_config_of_each_address(env: Setup) -> None:
    first, second = env.cluster.nodes[0], env.cluster.nodes[1]
    lines = ok("getControllerConfig", "-a", f"{first.address};{second.address}")
    headers = [line for line in lines if line.startswith("====")]
    assert headers == [
        f"============{first.address}============",
        f"============{second.address}============",
    ]
    assert lines[0] == headers[0]
    assert _config_lines(lines, "controllerDLegerSelfId") == [
        "controllerDLegerSelfId" + " " * 28 + "=  n0",
        "controllerDLegerSelfId" + " " * 28 + "=  n1",
    ]
    assert _config_lines(lines, "adminAuthToken") == ["adminAuthToken" + " " * 36 + "=  ******"] * 2
    assert lines[-1] == ""
    doc = json.loads(ok("getControllerConfig", "-a", first.address, "--json")[0])
    assert doc["configs"][first.address]["controllerDLegerGroup"] == "test-group"
    dead = f"127.0.0.1:{free_port()}"
    fails("getControllerConfig", "-a", dead, exit_code=3, code=10001)
    # The reachable ones are still printed; the command fails for the other.
    done = mqadmin("getControllerConfig", "-a", f"{first.address};{dead}")
    assert done.returncode == 3 and done.stdout.startswith(f"============{first.address}============\n")
    assert f"[10001 CONNECT_FAILED] cannot connect: Connection refused (from {dead})" in done.stderr
    fails("getControllerConfig", exit_code=2, mentions="-a/--controllerAddress")


def test_update_controller_config_on_every_address(env: Setup) -> None:
    key = "electMasterMaxRetryCount"
    before = ok("getControllerConfig", "-a", env.all)
    fails("updateControllerConfig", "-a", env.all, "-k", key, "-v", "5", code=16, mentions="--token")
    fails(
        "updateControllerConfig",
        "-a",
        env.all,
        "-k",
        key,
        "-v",
        "5",
        "--token",
        "nope",
        code=16,
        mentions="wrong admin token",
    )
    assert ok("getControllerConfig", "-a", env.all) == before  # refused: unchanged, reads still work
    assert ok("updateControllerConfig", "-a", env.all, "-k", key, "-v", "5", env={TOKEN_ENV: TOKEN}) == [
        f"update controller config success![{', '.join(n.address for n in env.cluster.nodes)}]",
        f"{key} : 5",
        "",
    ]
    assert _config_lines(ok("getControllerConfig", "-a", env.all), key) == [f"{key:<50}=  5"] * 3
    fails(
        "updateControllerConfig",
        "-a",
        env.all,
        "-k",
        "configStorePath",
        "-v",
        "/tmp/x",
        "--token",
        TOKEN,
        code=16,
        mentions="Can not update config in black list.",
    )
    fails(
        "updateControllerConfig",
        "-a",
        env.all,
        "-k",
        "noSuchKey",
        "-v",
        "1",
        "--token",
        TOKEN,
        code=2005,
        mentions="noSuchKey",
    )
    dead = f"127.0.0.1:{free_port()}"
    fails(
        "updateControllerConfig", "-a", dead, "-k", key, "-v", "3", "--token", TOKEN, exit_code=3, code=10001
    )
    fails("updateControllerConfig", "-a", env.all, "-k", key, exit_code=2, mentions="-v/--value")


def test_update_controller_config_changes_elections_at_once(env: Setup) -> None:
    """issue 30: ``updateControllerConfig enableElectUncleanMaster true`` changes what the next election
    may do, with no restart: b5's replica 2 is alive but outside the SyncStateSet {1}, so a designated
    election of it fails (2012) until the key is true on the controllers, then succeeds."""
    leader = env.leader()
    assert [register_broker(leader, "b5") for _ in range(2)] == [1, 2]
    for broker_id in (1, 2):
        env.beats.set(heartbeat("b5", broker_id, timeout_ms=600_000))
    env.beats.send_once()
    status, reply = leader.post("/v1/groups/b5/elect", {"clusterName": "c1", "brokerId": 1})
    assert status == 200, reply
    elect_2 = ("electMaster", "-a", env.all, "-b", "2", "-bn", "b5", "-c", "c1", "--token", TOKEN)
    fails(*elect_2, code=2012)
    key = ("-k", "enableElectUncleanMaster")
    try:
        ok("updateControllerConfig", "-a", env.all, *key, "-v", "true", "--token", TOKEN)
        lines = ok(*elect_2)
        assert lines[3:5] == ["#BrokerMasterAddr\t127.0.0.1:10902", "#MasterEpoch\t2"], lines
    finally:
        ok("updateControllerConfig", "-a", env.all, *key, "-v", "false", "--token", TOKEN)


# --------------------------------------------------------------------------------- command line


def test_help_for_each_command_and_unknown_commands() -> None:
    for name in (
        "getControllerMetaData",
        "getSyncStateSet",
        "getBrokerEpoch",
        "haStatus",
        "electMaster",
        "cleanBrokerMetadata",
        "getControllerConfig",
        "updateControllerConfig",
    ):
        done = mqadmin(name, "-h")
        assert done.returncode == 0 and done.stdout.startswith(f"usage: mqadmin {name} "), done
        assert "--json" in done.stdout and "--token" in done.stdout
    done = mqadmin("getSyncStateSt", "-a", "x:1")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(
        "mqadmin: unknown command 'getSyncStateSt'. Did you mean 'getSyncStateSet'?"
    )
    assert "  updateControllerConfig  " in done.stderr
    listing = mqadmin("-h")
    assert listing.returncode == 0 and "getBrokerEpoch" in listing.stdout
    assert mqadmin().returncode == 2


# ------------------------------------------------------------------------------ hung controller


def test_a_hung_controller_is_skipped(env: Setup) -> None:
    leader, follower = env.leader(), env.follower()
    assert follower.proc is not None
    follower.proc.pause()  # SIGSTOP: connections are accepted, nothing answers
    try:
        started = time.monotonic()
        lines = ok("getControllerMetaData", "-a", f"{follower.address};{leader.address}")
        assert lines[3] == f"#ControllerLeaderAddress\t{leader.address}"
        assert ok("getSyncStateSet", "-a", f"{follower.address};{leader.address}", "-b", "b1") == [
            *b1_lines(),
            "",
        ]
        assert time.monotonic() - started < 10  # about 2 s per hung node, not the 10 s request timeout
        fails("getControllerMetaData", "-a", follower.address, "--timeout", "0.5", exit_code=3, code=10002)
    finally:
        follower.proc.resume()


# ------------------------------------------------------------------------- leader failover (last)


def test_leader_discovery_after_the_leader_stops(env: Setup) -> None:
    old = env.leader()
    assert old.proc is not None
    old.proc.stop()
    survivors = [n for n in env.cluster.nodes if n is not old]
    # Listing the stopped leader first: discovery moves on and waits out the election.
    lines = ok("getSyncStateSet", "-a", ";".join([old.address, *(n.address for n in survivors)]), "-b", "b1")
    assert lines[1:5] == b1_lines()[1:5]
    new = wait_until(lambda: env.cluster.leader(timeout=5), 10, message="new leader")
    assert new is not old
    meta = ok("getControllerMetaData", "-a", old.address + ";" + survivors[0].address)
    assert meta[3] == f"#ControllerLeaderAddress\t{new.address}"
