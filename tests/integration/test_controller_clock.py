"""Issue 45 finding 7 (the controller's part) with real processes: a leader whose wall clock jumps an hour
ahead refuses every broker signature. Before, it stayed a healthy leader (no master for >= 20 s after a
master kill, restarted brokers could not register). Now, once a broker has to sign anew (here: it is
restarted), it alarms, answers ``/healthz`` 503, hands leadership over, and its metrics show the skew
and the stall; the broker registers through the new leader.

3 ``mqcontroller`` with authentication on and 1 ``mqbroker`` (it heartbeats to every controller). Each
controller runs with a test-only wall-clock shim (a ``sitecustomize`` on its ``PYTHONPATH``): its
``time.time`` is shifted by the milliseconds written in a file, read again at most every 0.2 s, so the
test steps one running process's clock (libfaketime breaks Python's sleeps; monotonic time is untouched).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mqha.security.credentials import InnerCredentials, User, render_inner_credentials, render_user
from tests.helpers.processes import ProcessGroup, wait_healthy, wait_until
from tests.integration.broker_processes import BROKER_TEST_SETTINGS, Broker, mqbroker_command
from tests.integration.controller_cluster import ControllerCluster, mqcontroller_command
from tests.integration.controller_cluster import Node as Controller

pytestmark = pytest.mark.integration

CREDENTIALS = InnerCredentials("inner", "inner-secret-key-0123")
AUTH = {
    "authenticationEnabled": "true",
    "innerClientAuthenticationCredentials": render_inner_credentials(CREDENTIALS),
}
CONTROLLER_SETTINGS = {
    **AUTH,
    "adminAuthToken": "admin-token-0123456789",
    "controllerSignatureStallMills": "3000",
}
BROKER_SETTINGS = {
    **BROKER_TEST_SETTINGS,
    **AUTH,
    "initAuthenticationUser": render_user(User("u", "u-password")),
}
OFFSET_FILE = "wall_offset_ms"

SHIM = """
import os, time
_path = os.environ.get("MQHA_TEST_ONLY_WALL_OFFSET_FILE")
if _path:
    _plain_time, _plain_time_ns, _monotonic = time.time, time.time_ns, time.monotonic
    _cache = [-1.0, 0]
    def _offset_ns():
        now = _monotonic()
        if now - _cache[0] > 0.2:
            try:
                with open(_path) as f:
                    _cache[1] = int(f.read().strip() or 0) * 1_000_000
            except (OSError, ValueError):
                _cache[1] = 0
            _cache[0] = now
        return _cache[1]
    time.time = lambda: _plain_time() + _offset_ns() / 1e9
    time.time_ns = lambda: _plain_time_ns() + _offset_ns()
"""


@dataclass
class Cluster:
    group: ProcessGroup
    base: Path
    controllers: ControllerCluster
    broker: Broker

    def restart_broker(self) -> None:
        """SIGKILL and start again: the new process signs its session upgrades and registration anew."""
        assert self.broker.proc is not None
        self.broker.proc.kill()
        self.broker.start(self.group, ";".join(n.address for n in self.controllers.nodes))

    def step_clock(self, node: Controller, offset_ms: int) -> None:
        (node.base / OFFSET_FILE).write_text(str(offset_ms))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("clock")
    shim = base / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(SHIM)
    with ProcessGroup() as group:
        controllers = ControllerCluster(group, base / "controllers", size=3, settings=CONTROLLER_SETTINGS)
        for node in controllers.nodes:
            node.proc = group.start(
                [*mqcontroller_command(), "-c", str(node.conf)],
                log_path=node.log_path,
                name=node.node_id,
                env=_shim_env(shim, node.base),
            )
        wait_healthy([(node.proc, node.url) for node in controllers.nodes], 20)
        controllers.leader(timeout=10)
        broker = Broker("b0", base / "b0", BROKER_SETTINGS)
        broker.start(group, ";".join(n.address for n in controllers.nodes))
        wait_until(lambda: (broker.try_status() or {}).get("role") == "MASTER", 20, message="master")
        yield Cluster(group, base, controllers, broker)


def _shim_env(shim: Path, base: Path) -> dict[str, str]:
    """The environment of a process whose wall clock follows ``base / OFFSET_FILE``."""
    return {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(shim), os.environ.get("PYTHONPATH")])),
        "MQHA_TEST_ONLY_WALL_OFFSET_FILE": str(base / OFFSET_FILE),
    }


def _metric(node: Controller, name: str) -> float | None:
    status, text = node.get("/metrics")
    assert status == 200
    return _value(str(text), name)


def _value(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith((name + " ", name + "{")):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_a_leader_whose_clock_jumps_an_hour_ahead_alarms_hands_over_and_does_not_stand_again(
    cluster: Cluster,
) -> None:
    controllers = cluster.controllers
    leader = controllers.leader(timeout=10)
    assert abs(_metric(leader, "mqha_controller_signature_clock_skew_seconds") or 0) < 5
    cluster.step_clock(leader, 3_600_000)
    try:
        # Open sessions stay (they were signed once); a restarted broker must sign anew, as after a crash.
        cluster.restart_broker()
        wait_until(
            lambda: leader.get("/healthz")[0] == 503, 30, interval=0.2, message="the skewed node is unhealthy"
        )
        body = leader.get("/healthz")[1]
        assert "no broker signature verified" in body["remark"], body
        others = [n for n in controllers.nodes if n is not leader]
        new = controllers.leader(timeout=20, among=others)  # wait: another node leads
        assert new is not leader
        assert all(n.get("/healthz")[0] == 200 for n in others)
        skew = _metric(leader, "mqha_controller_signature_clock_skew_seconds")
        assert skew is not None and -3700 < skew < -3500, skew
        assert (_metric(leader, "mqha_controller_signature_stalled_seconds") or 0) >= 3
        assert (_metric(leader, 'mqha_controller_signatures_refused_total{reason="skew"}') or 0) > 0
        assert (_metric(leader, "mqha_controller_signature_stall_handovers_total") or 0) >= 1
        assert "ALARM: no broker signature verified" in leader.log_path.read_text()
        # The restarted broker registers through the healthy leader and serves again.
        wait_until(
            lambda: (cluster.broker.try_status() or {}).get("role") == "MASTER", 30, message="master again"
        )
        _the_skewed_node_does_not_stand_for_election(cluster, leader, new)
    finally:
        cluster.step_clock(leader, 0)
    wait_until(lambda: leader.get("/healthz")[0] == 200, 20, interval=0.2, message="healthy again")
    wait_until(lambda: "the clock alarm is over" in leader.log_path.read_text(), 10, message="alarm over")


def _the_skewed_node_does_not_stand_for_election(
    cluster: Cluster, skewed: Controller, leader: Controller
) -> None:
    """The new leader dies and the only other node is silent for 2 s: the skewed node would stand (and,
    once the other answers again, win: its log is as long). Until its clock checks out it must not."""
    third = next(n for n in cluster.controllers.nodes if n not in (skewed, leader))
    assert leader.proc is not None and third.proc is not None
    leader.proc.kill()
    third.proc.pause()
    try:
        time.sleep(2)  # many election timeouts (0.2-0.4 s)
    finally:
        third.proc.resume()
    assert cluster.controllers.leader(timeout=20, among=[skewed, third]) is third
    assert skewed.get("/healthz")[0] == 503
    _start_controller(cluster, leader)
    cluster.controllers.leader(timeout=20)


def _start_controller(cluster: Cluster, node: Controller) -> None:
    node.proc = cluster.group.start(
        [*mqcontroller_command(), "-c", str(node.conf)],
        log_path=node.log_path,
        name=node.node_id,
        env=_shim_env(cluster.base / "shim", node.base),
    )
    wait_healthy([(node.proc, node.url)], 20)


def test_a_broker_whose_clock_is_off_is_refused_and_counted_and_no_controller_alarms(
    cluster: Cluster,
) -> None:
    """The same refusals from one broker with a skewed clock (+2 min) look like a stall to every
    controller (the healthy broker's session signs nothing meanwhile); the controllers' clocks agree,
    so none alarms or steps down. The broker stays fenced, and both sides count it."""
    controllers = cluster.controllers
    leader = controllers.leader(timeout=10)
    logged = {n.node_id: len(n.log_path.read_text()) for n in controllers.nodes}  # what came before
    skewed = Broker("skewed", cluster.base / "skewed", {**BROKER_SETTINGS, "brokerName": "skewed"})
    skewed.base.mkdir(parents=True)
    (skewed.base / OFFSET_FILE).write_text("120000")
    conf = skewed.write_config(";".join(n.address for n in controllers.nodes))
    skewed.proc = cluster.group.start(
        [*mqbroker_command(), "-c", str(conf)],
        log_path=skewed.base / "broker.log",
        name="mqbroker-skewed",
        env=_shim_env(cluster.base / "shim", skewed.base),
    )
    try:
        wait_healthy([(skewed.proc, skewed.url)], 20)
        refused = "mqha_broker_controller_session_refusals_total" + (
            '{broker_name="skewed",controller="%s",reason="skew"}'
        )
        wait_until(
            lambda: (_value(skewed.metrics_text(), refused % leader.address) or 0) > 0,
            20,
            message="the skewed broker counts its refusals for its clock",
        )
        time.sleep(6)  # past controllerSignatureStallMills (3 s) and a few guard rounds
        assert skewed.status()["fenced"]
        assert (_metric(leader, 'mqha_controller_signatures_refused_total{reason="skew"}') or 0) > 0
        # The watch alone says "stalled" (nothing else signs meanwhile); the peers' clocks say it is not ours.
        assert (_metric(leader, "mqha_controller_signature_stalled_seconds") or 0) >= 3
        assert all(n.get("/healthz")[0] == 200 for n in controllers.nodes)
        assert controllers.leader(timeout=5) is leader
        assert not any("ALARM" in n.log_path.read_text()[logged[n.node_id] :] for n in controllers.nodes)
    finally:
        skewed.proc.kill()
