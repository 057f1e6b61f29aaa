"""``mqha cluster up|status|down`` as a user runs them: separate commands, processes that outlive
``up``, and ``down`` leaving no process of the run directory behind."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from mqha.cluster.processes import proc_start_time

pytestmark = pytest.mark.integration


def mqha(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("mqha")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "mqha"]
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=timeout, check=False)


def alive(pid: int, start_time: int | None) -> bool:
    current = proc_start_time(pid)
    if current is None or current != start_time:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X")


def processes_mentioning(text: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,args", "-ww"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if text in line and "ps -eo" not in line]


def test_up_status_down_leaves_no_process(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    try:
        up = mqha(
            "cluster", "up", "--dir", str(run_dir), "--controllers", "1", "--groups", "2", "--replicas", "2"
        )
        assert up.returncode == 0, up.stdout + up.stderr
        table = up.stdout.splitlines()
        assert table[0].split()[:3] == ["NODE", "ROLE", "CTRL_ID"]  # the controller's id, as SYNC_STATE_SET
        roles = {line.split()[0]: line.split()[1] for line in table[1:6]}
        assert roles["n0"] == "LEADER"
        for group in ("broker-a", "broker-b"):  # one master and one slave per group
            assert sorted(roles[f"{group}-{i}"] for i in range(2)) == ["MASTER", "SLAVE"]

        state = json.loads((run_dir / "cluster.json").read_text())
        nodes = state["nodes"]
        assert len(nodes) == 5 and all(alive(n["pid"], n["start_time"]) for n in nodes)
        for node in nodes:  # configs and logs in the run directory
            assert (Path(node["base"]) / f"{node['kind']}.conf").exists()
            log = (Path(node["base"]) / f"{node['kind']}.log").read_text()
            # A normal start logs no WARNING (issue 30: a slave knocking before the master's
            # membership cache learned it was logged as one on every start).
            assert " WARNING " not in log, (node["name"], [x for x in log.splitlines() if " WARNING " in x])
        # Secure by default (docs/architecture.md §12): a mutating call without proof changes nothing.
        assert state["brokerSettings"]["authenticationEnabled"] == "true"
        assert (run_dir / "cluster.json").stat().st_mode & 0o077 == 0
        controller = next(n for n in nodes if n["kind"] == "controller")
        request = urllib.request.Request(
            f"http://127.0.0.1:{controller['port']}/v1/brokers/apply-id",
            data=json.dumps(
                {
                    "clusterName": "DefaultCluster",
                    "brokerName": "broker-z",
                    "appliedBrokerId": 1,
                    "registerCheckCode": "127.0.0.1:1;0",
                }
            ).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=5)
        assert refused.value.code == 401

        again = mqha("cluster", "up", "--dir", str(run_dir))
        assert again.returncode == 1 and "running" in again.stderr

        status = mqha("cluster", "status", "--dir", str(run_dir))
        assert status.returncode == 0 and status.stdout.count("MASTER") == 2, status.stdout

        down = mqha("cluster", "down", "--dir", str(run_dir))
        assert down.returncode == 0, down.stderr
        assert "stopped 5 processes" in down.stdout
        assert not any(alive(n["pid"], n["start_time"]) for n in nodes)
        assert processes_mentioning(str(run_dir)) == []

        after = mqha("cluster", "status", "--dir", str(run_dir))
        assert after.returncode == 0 and after.stdout.count("DOWN") == 5
    finally:
        if (run_dir / "cluster.json").exists():
            mqha("cluster", "down", "--dir", str(run_dir))


def test_status_of_a_missing_cluster_is_one_line(tmp_path: Path) -> None:
    result = mqha("cluster", "status", "--dir", str(tmp_path / "nothing"))
    assert result.returncode == 1
    assert result.stderr.strip().startswith("mqha cluster: no cluster recorded in")


def _status_rows(run_dir: Path) -> dict[str, list[str]]:
    status = mqha("cluster", "status", "--dir", str(run_dir))
    assert status.returncode == 0, status.stderr
    return {line.split()[0]: line.split() for line in status.stdout.splitlines()[1:] if line.strip()}


def test_base_port_restart_a_node_and_a_node_restarted_by_hand(tmp_path: Path) -> None:
    """``--base-port`` gives the documented ports; ``restart NODE``; a broker restarted by hand (from
    its config file) is shown with its new pid (its pid file) and stopped by ``down``; ``up`` in a
    directory with state asks for --fresh or --reuse."""
    from mqha.cluster.processes import pick_port

    run_dir = tmp_path / "run"
    base = pick_port(6)
    hand: subprocess.Popen[bytes] | None = None
    try:
        up = mqha(
            "cluster",
            "up",
            "--dir",
            str(run_dir),
            "--controllers",
            "1",
            "--replicas",
            "2",
            "--insecure",
            "--base-port",
            str(base),
        )
        assert up.returncode == 0, up.stdout + up.stderr
        nodes = {n["name"]: n for n in json.loads((run_dir / "cluster.json").read_text())["nodes"]}
        assert {name: n["port"] for name, n in nodes.items()} == {
            "n0": base,
            "broker-a-0": base + 2,
            "broker-a-1": base + 4,
        }
        rows = _status_rows(run_dir)
        assert rows["broker-a-1"][-2:] == [f"127.0.0.1:{base + 4}", str(nodes["broker-a-1"]["pid"])]

        restarted = mqha("cluster", "restart", "broker-a-1", "--dir", str(run_dir))
        assert restarted.returncode == 0, restarted.stderr
        assert "stopped broker-a-1" in restarted.stdout and "started broker-a-1" in restarted.stdout
        new_pid = int(_status_rows(run_dir)["broker-a-1"][-1])
        assert new_pid != nodes["broker-a-1"]["pid"] and alive(new_pid, proc_start_time(new_pid))

        # broker-a-0 stopped through the CLI, then started by hand from its own config file.
        assert mqha("cluster", "stop", "broker-a-0", "--dir", str(run_dir)).returncode == 0
        assert _status_rows(run_dir)["broker-a-0"][1] == "DOWN"
        conf = Path(nodes["broker-a-0"]["base"]) / "broker.conf"
        script = Path(sys.executable).with_name("mqbroker")
        command = [str(script)] if script.exists() else [sys.executable, "-m", "mqha.broker"]
        hand = subprocess.Popen(
            [*command, "-c", str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while _status_rows(run_dir)["broker-a-0"][-1] != str(hand.pid):
            assert time.monotonic() < deadline, _status_rows(run_dir)
            time.sleep(0.5)
        unknown = mqha("cluster", "restart", "nope", "--dir", str(run_dir))
        assert unknown.returncode == 2 and "no node 'nope'" in unknown.stderr

        down = mqha("cluster", "down", "--dir", str(run_dir))
        assert down.returncode == 0, down.stderr
        assert str(hand.pid) in down.stdout and "stopped 3 processes" in down.stdout
        assert hand.wait(timeout=10) is not None
        assert processes_mentioning(str(run_dir)) == []

        again = mqha("cluster", "up", "--dir", str(run_dir), "--insecure")
        assert again.returncode == 2 and "--fresh" in again.stderr and "--reuse" in again.stderr
        reuse = mqha("cluster", "up", "--dir", str(run_dir), "--reuse")
        assert reuse.returncode == 0, reuse.stdout + reuse.stderr
        assert json.loads((run_dir / "cluster.json").read_text())["nodes"][0]["port"] == base
        assert mqha("cluster", "down", "--dir", str(run_dir)).returncode == 0
        # At once on the same ports: what the stopped nodes left in TIME-WAIT does not count as in use.
        fresh = mqha(
            "cluster",
            "up",
            "--dir",
            str(run_dir),
            "--fresh",
            "--controllers",
            "1",
            "--replicas",
            "1",
            "--base-port",
            str(base),
        )
        assert fresh.returncode == 0, fresh.stdout + fresh.stderr
        assert len(json.loads((run_dir / "cluster.json").read_text())["nodes"]) == 2
    finally:
        if hand is not None and hand.poll() is None:
            hand.kill()
            hand.wait()
        if (run_dir / "cluster.json").exists():
            mqha("cluster", "down", "--dir", str(run_dir))
