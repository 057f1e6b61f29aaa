"""RocketMQ 5's official Java (rocketmq-client-java 5.0.8) and Go (golang/v5 5.1.2) clients, unmodified,
through mqproxy into a real cluster (3 controllers, one group of 3 replicas): one short round trip
each, 100 sends then a SimpleConsumer (and for Java a PushConsumer) that gets every acknowledged one.

The Go client always dials TLS (it skips verifying the certificate and has no option to dial plain
gRPC), as RocketMQ's proxy serves TLS by default; so it talks to a second mqproxy with ``tlsEnable``.

The drivers are ours (``interop/java-client``, ``interop/go-client``), built from Maven Central and the
Go module proxy by ``scripts/setup.sh`` (or on first use). The failover variants and the reference
RocketMQ cluster run with ``scripts/interop.sh``.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqha.cluster.local import LocalCluster
from tests.helpers.processes import ProcessGroup
from tests.helpers.proxy_harness import start_proxy
from tests.helpers.rocketmq_client import go_client, java_client
from tests.helpers.tls_certs import TestCA

pytestmark = pytest.mark.integration

COUNT = 100


@pytest.fixture(scope="module")
def proxies(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """Two mqproxies in front of one cluster: plain gRPC, and gRPC over TLS."""
    run_dir = tmp_path_factory.mktemp("java-go-cluster")
    tls = TestCA(tmp_path_factory.mktemp("ca")).node("mqproxy")
    served = {key: value for key, value in tls.settings().items() if not key.startswith("tls.client.")}
    tls_settings = "".join(f"{key}={value}\n" for key, value in served.items())
    with LocalCluster(run_dir, controllers=3, groups=1, replicas=3) as cluster:
        cluster.wait_ready(90)
        with ProcessGroup() as group:
            plain = start_proxy(group, cluster, tmp_path_factory.mktemp("proxy"))[1]
            secure = start_proxy(group, cluster, tmp_path_factory.mktemp("proxy-tls"), tls_settings)[1]
            yield plain, secure
    assert cluster.running_pids() == []


def _run(command: list[str], home: Path, timeout: float) -> list[dict[str, Any]]:
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, cwd=home, env=env, check=False
    )
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert events and events[-1].get("done"), f"no result (exit {done.returncode}): {done.stderr[-2000:]}"
    return events


def _round_trip(client: list[str], proxy: str, topic: str, tmp_path: Path, consumers: list[str]) -> None:
    sent = _run([*client, "produce", proxy, topic, str(COUNT), "4", "1024"], tmp_path, 180)
    acked = {event["seq"] for event in sent if event.get("ok") is True}
    assert sent[-1] == {"done": True, "ok": COUNT, "failed": 0}, [e for e in sent if e.get("ok") is False][:3]
    assert acked == set(range(COUNT))
    for kind in consumers:
        got = _run([*client, kind, proxy, topic, f"{topic}-{kind}", str(COUNT), "90"], tmp_path, 180)
        assert {event["seq"] for event in got if "seq" in event} >= acked, kind


def test_the_official_java_client_produces_and_consumes(proxies: tuple[str, str], tmp_path: Path) -> None:
    _round_trip(java_client(), proxies[0], "JavaRoundTrip", tmp_path, ["simple", "push"])


def test_the_official_go_client_produces_and_consumes_over_tls(
    proxies: tuple[str, str], tmp_path: Path
) -> None:
    _round_trip(go_client(), proxies[1], "GoRoundTrip", tmp_path, ["simple"])
