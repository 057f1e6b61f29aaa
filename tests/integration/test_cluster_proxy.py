"""``mqha cluster up --proxy``: mqproxy started beside a (secure) local cluster, tracked like its other
nodes: listed by ``up`` and ``status``, recorded in ``cluster.json``, serving the OFFICIAL Python client
(it puts as the brokers' user), and stopped by ``down`` with the rest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mqha.security.credentials import parse_user
from tests.helpers.rocketmq_client import client_python
from tests.integration.test_cluster_cli import alive, mqha, processes_mentioning
from tests.integration.test_proxy_topics import client_route

pytestmark = pytest.mark.integration


def test_up_with_a_proxy_serves_the_official_client_and_down_stops_it(tmp_path: Path) -> None:
    client = client_python()
    run_dir = tmp_path / "run"
    try:
        up = mqha(
            "cluster",
            "up",
            "--dir",
            str(run_dir),
            "--controllers",
            "1",
            "--groups",
            "1",
            "--replicas",
            "1",
            "--proxy",
        )
        assert up.returncode == 0, up.stdout + up.stderr
        rows = {line.split()[0]: line.split() for line in up.stdout.splitlines()[1:4] if line.strip()}
        assert rows["proxy-0"][1] == "PROXY", up.stdout
        access = next(line for line in up.stdout.splitlines() if line.startswith("proxies: ")).split()[1]

        state = json.loads((run_dir / "cluster.json").read_text())
        proxy = next(n for n in state["nodes"] if n["kind"] == "proxy")
        assert access == f"127.0.0.1:{proxy['port']}" and alive(proxy["pid"], proxy["start_time"])
        conf = (Path(proxy["base"]) / "proxy.conf").read_text()
        assert "authenticationEnabled=true" in conf and "initAuthenticationUser=" in conf

        # mqproxy authenticates clients: its initAuthenticationUser is a Super user.
        user = parse_user(
            next(line for line in conf.splitlines() if line.startswith("initAuthenticationUser=")).split(
                "=", 1
            )[1]
        )
        credentials = (user.username, user.password)
        assert "error" in client_route(client, access, "ClusterUpTopic", tmp_path)  # unsigned: refused
        seen = client_route(client, access, "ClusterUpTopic", tmp_path, credentials)  # auto-created, one send
        assert "sent" in seen, seen

        status = mqha("cluster", "status", "--dir", str(run_dir))
        assert status.returncode == 0 and "PROXY" in status.stdout, status.stdout

        down = mqha("cluster", "down", "--dir", str(run_dir))
        assert down.returncode == 0 and "stopped 3 processes" in down.stdout, down.stdout + down.stderr
        assert not alive(proxy["pid"], proxy["start_time"])
        assert processes_mentioning(str(run_dir)) == []
    finally:
        if (run_dir / "cluster.json").exists():
            mqha("cluster", "down", "--dir", str(run_dir))
