"""``/metrics`` of every node of a real cluster (3 ``mqcontroller`` + 2 ``mqbroker``), issue 6 item 2,
and of an ``mqproxy`` in front of it with ``metricsExporterType=PROM`` (after one SendMessage).

Each node's text is parsed (prometheus_client's parser): every metric of the issue's lists is there
with its type and exactly its label names, the values agree with the cluster's state, and
``promtool check metrics`` accepts the text. Every ``mqha_*`` name used by the alert rules and the
Grafana dashboard is exposed by some node.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.processes import ProcessGroup, free_port, wait_until
from tests.helpers.proxy_harness import start_proxy_for
from tests.integration.controller_cluster import request
from tests.integration.test_mqadmin_brokers import BROKER_NAME, BrokerSet

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

# name -> (type, label names). Counters by their exposed ``_total`` name.
CONTROLLER_METRICS: dict[str, tuple[str, frozenset[str]]] = {
    "mqha_controller_is_leader": ("gauge", frozenset()),
    "mqha_controller_raft_term": ("gauge", frozenset()),
    "mqha_controller_raft_voter": ("gauge", frozenset()),
    "mqha_controller_raft_voters": ("gauge", frozenset()),
    "mqha_controller_raft_damaged": ("gauge", frozenset()),
    "mqha_controller_raft_commit_index": ("gauge", frozenset()),
    "mqha_controller_raft_last_applied_index": ("gauge", frozenset()),
    "mqha_controller_broker_groups": ("gauge", frozenset()),
    "mqha_controller_live_brokers": ("gauge", frozenset()),
    "mqha_controller_broker_sessions": ("gauge", frozenset()),
    "mqha_controller_sync_state_set_size": ("gauge", frozenset({"broker_name"})),
    "mqha_controller_master_epoch": ("gauge", frozenset({"broker_name"})),
    "mqha_controller_broker_group_has_master": ("gauge", frozenset({"broker_name"})),
    "mqha_controller_election_waiting": ("gauge", frozenset({"broker_name"})),
    "mqha_controller_acked_data_lost_total": ("counter", frozenset({"broker_name"})),
    "mqha_controller_requests_total": ("counter", frozenset({"api", "code"})),
    "mqha_controller_request_duration_seconds": ("histogram", frozenset({"api"})),
    "mqha_controller_elections_total": ("counter", frozenset({"trigger", "result"})),
    "mqha_controller_election_duration_seconds": ("histogram", frozenset({"trigger"})),
    "mqha_controller_signatures_verified_total": ("counter", frozenset()),
    "mqha_controller_signatures_refused_total": ("counter", frozenset({"reason"})),
    "mqha_controller_signature_clock_skew_seconds": ("gauge", frozenset()),
    "mqha_controller_signature_stalled_seconds": ("gauge", frozenset()),
    "mqha_controller_signature_stall_handovers_total": ("counter", frozenset()),
    "mqha_controller_http_connections": ("gauge", frozenset()),
    "mqha_controller_http_connections_refused_total": ("counter", frozenset()),
    "mqha_controller_console_streams": ("gauge", frozenset()),
}
_BROKER = frozenset({"broker_name"})
_SLAVE = frozenset({"broker_name", "slave_broker_id"})
_PUT = frozenset({"broker_name", "ack_mode", "status"})
BROKER_METRICS: dict[str, tuple[str, frozenset[str]]] = {
    "mqha_broker_role": ("gauge", frozenset({"broker_name", "role"})),
    "mqha_broker_fenced": ("gauge", _BROKER),
    "mqha_broker_master_epoch": ("gauge", _BROKER),
    "mqha_broker_last_epoch": ("gauge", _BROKER),
    "mqha_broker_sync_state_set_epoch": ("gauge", _BROKER),
    "mqha_broker_sync_state_set_size": ("gauge", _BROKER),
    "mqha_broker_min_in_sync_replicas": ("gauge", _BROKER),
    "mqha_broker_min_offset": ("gauge", _BROKER),
    "mqha_broker_max_offset": ("gauge", _BROKER),
    "mqha_broker_confirm_offset": ("gauge", _BROKER),
    "mqha_broker_disk_used_ratio": ("gauge", _BROKER),
    "mqha_broker_disk_full": ("gauge", _BROKER),
    "mqha_broker_commitlog_damaged_records": ("gauge", _BROKER),
    "mqha_broker_commitlog_damaged_records_found_total": ("counter", _BROKER),
    "mqha_broker_commitlog_records_repaired_total": ("counter", _BROKER),
    "mqha_broker_scrub_verified_bytes_total": ("counter", _BROKER),
    "mqha_broker_scrub_passes_total": ("counter", _BROKER),
    "mqha_broker_slave_ack_lag_bytes": ("gauge", _SLAVE),
    "mqha_broker_slave_caught_up_age_seconds": ("gauge", _SLAVE),
    "mqha_broker_ha_sent_bytes_total": ("counter", _BROKER),
    "mqha_broker_ha_received_bytes_total": ("counter", _BROKER),
    "mqha_broker_put_latency_seconds": ("histogram", _PUT),
    "mqha_broker_put_requests_total": ("counter", _PUT),
    "mqha_broker_put_messages_total": ("counter", _PUT),
    "mqha_broker_put_streams": ("gauge", _BROKER),
    "mqha_broker_refused_requests_total": ("counter", frozenset({"broker_name", "route", "http_status"})),
    "mqha_broker_controller_session_state": ("gauge", frozenset({"broker_name", "controller", "state"})),
    "mqha_broker_controller_session_connects_total": ("counter", frozenset({"broker_name", "controller"})),
    "mqha_broker_controller_session_refusals_total": (
        "counter",
        frozenset({"broker_name", "controller", "reason"}),
    ),
    "mqha_broker_http_connections": ("gauge", _BROKER),
    "mqha_broker_retention_clock_lag_seconds": ("gauge", _BROKER),
    "mqha_broker_http_connections_refused_total": ("counter", _BROKER),
}


@dataclass
class Scrape:
    address: str
    text: str
    types: dict[str, str]  # exposed name -> type
    samples: dict[str, list[tuple[dict[str, str], float]]]  # exposed family name -> (labels, value)

    @classmethod
    def parse(cls, address: str, text: str) -> Scrape:
        types: dict[str, str] = {}
        samples: dict[str, list[tuple[dict[str, str], float]]] = {}
        for family in text_string_to_metric_families(text):
            if family.name.endswith("_created"):
                continue  # prometheus_client's creation timestamps, not ours
            name = family.name + "_total" if family.type == "counter" else family.name
            types[name] = family.type
            samples[name] = [
                (s.labels, s.value)
                for s in family.samples
                if s.name in (name, family.name) or family.type == "histogram"
            ]
        return cls(address, text, types, samples)

    def value(self, name: str, **labels: str) -> float:
        matching = [v for lab, v in self.samples[name] if all(lab.get(k) == x for k, x in labels.items())]
        assert len(matching) == 1, (self.address, name, labels, self.samples[name])
        return matching[0]


def scrape(url: str, address: str) -> Scrape:
    status, text = request("GET", url + "/metrics", timeout=5.0)
    assert status == 200 and isinstance(text, str), text
    return Scrape.parse(address, text)


_CALLS = frozenset({"method", "code"})
PROXY_METRICS: dict[str, tuple[str, frozenset[str]]] = {
    "mqha_proxy_rpc_latency_seconds": ("histogram", _CALLS),
    "mqha_proxy_messages_in_total": ("counter", frozenset({"code"})),
    "mqha_proxy_messages_out_total": ("counter", frozenset()),
    "mqha_proxy_auth_refusals_total": ("counter", frozenset({"method", "reason"})),
    "mqha_proxy_limit_refusals_total": ("counter", frozenset({"limit"})),
    "mqha_proxy_inflight_bytes": ("gauge", frozenset()),
}


@dataclass
class Scrapes:
    broker_set: BrokerSet
    controllers: list[Scrape]
    master: Scrape
    slave: Scrape
    proxy: Scrape


@pytest.fixture(scope="module")
def scrapes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scrapes]:
    with ProcessGroup() as group:
        broker_set = BrokerSet.start(group, tmp_path_factory.mktemp("metrics"))
        master = broker_set.wait_replicated()
        slave = next(b for b in broker_set.brokers if b is not master)
        # Every broker holds a session to every controller before the scrape.
        wait_until(
            lambda: all(
                sum(
                    1
                    for info in b.get("/v1/status")["replicasManager"]["controllerSessions"].values()
                    if info["state"] == "open"
                )
                == 3
                for b in broker_set.brokers
            ),
            15,
            interval=0.1,
            message="broker sessions open to every controller",
        )
        for node in broker_set.controllers.nodes:  # a first scrape, so "metrics" requests are counted
            scrape(node.url, node.address)
        controllers = [scrape(n.url, n.address) for n in broker_set.controllers.nodes]
        brokers = scrape(master.url, master.address), scrape(slave.url, slave.address)
        # Then the proxy, whose send would change the numbers above.
        exporter = free_port()
        _, access = start_proxy_for(
            group,
            broker_set.controller_addresses,
            tmp_path_factory.mktemp("proxy"),
            f"metricsExporterType=PROM\nmetricsPromExporterPort={exporter}\n",
        )
        send_through(access)
        yield Scrapes(broker_set, controllers, *brokers, scrape(f"http://127.0.0.1:{exporter}", access))


def send_through(access: str) -> None:
    """One message sent through the proxy at ``access`` with the v2 stub; answered OK."""
    import grpc

    from mqha.proxy.v2 import definition as d
    from mqha.proxy.v2 import service as s
    from mqha.proxy.v2 import service_grpc

    message = d.Message(topic=d.Resource(name="ScrapedProxy"), body=b"scraped")
    message.system_properties.message_id = "SCRAPEDPROXY0001"
    with grpc.insecure_channel(access) as channel:
        answer = service_grpc.MessagingServiceStub(channel).SendMessage(
            s.SendMessageRequest(messages=[message]), timeout=20
        )
    assert answer.status.code == d.Code.OK, answer


def check_names_and_labels(node: Scrape, expected: dict[str, tuple[str, frozenset[str]]]) -> None:
    ours = {name for name in node.types if name.startswith("mqha_")}
    assert ours == set(expected), (node.address, sorted(ours ^ set(expected)))
    for name, (kind, labels) in expected.items():
        assert node.types[name] == kind, (node.address, name, node.types[name])
        for sample_labels, _ in node.samples[name]:
            assert set(sample_labels) - {"le"} == labels, (node.address, name, sample_labels)


def test_controller_metrics_on_every_node(scrapes: Scrapes) -> None:
    for node in scrapes.controllers:
        check_names_and_labels(node, CONTROLLER_METRICS)
        for name in (
            "mqha_controller_is_leader",
            "mqha_controller_raft_term",
            "mqha_controller_raft_commit_index",
            "mqha_controller_requests_total",
            "mqha_controller_request_duration_seconds",
            "mqha_controller_election_duration_seconds",
        ):
            assert node.samples[name], (node.address, name)
        assert node.value("mqha_controller_broker_groups") == 1
        assert node.value("mqha_controller_sync_state_set_size", broker_name=BROKER_NAME) == 2
        assert node.value("mqha_controller_live_brokers") == 2
        assert node.value("mqha_controller_broker_sessions") == 2
        assert node.value("mqha_controller_requests_total", api="metrics", code="SUCCESS") >= 1
        assert {lab["trigger"] for lab, _ in node.samples["mqha_controller_election_duration_seconds"]} == {
            "broker",
            "admin",
            "controller",
        }
    assert sorted(node.value("mqha_controller_is_leader") for node in scrapes.controllers) == [0, 0, 1]
    # The broker that registered first asked to be elected: counted by the node that decided.
    elections = [
        (lab, v) for node in scrapes.controllers for lab, v in node.samples["mqha_controller_elections_total"]
    ]
    assert ({"trigger": "broker", "result": "SUCCESS"}, 1.0) in elections


def test_broker_metrics_on_master_and_slave(scrapes: Scrapes) -> None:
    master, slave = scrapes.master, scrapes.slave
    for node in (master, slave):
        check_names_and_labels(node, BROKER_METRICS)
        controllers = {lab["controller"] for lab, _ in node.samples["mqha_broker_controller_session_state"]}
        assert controllers == {n.address for n in scrapes.broker_set.controllers.nodes}
        for controller in controllers:
            assert (
                node.value("mqha_broker_controller_session_state", controller=controller, state="open") == 1
            )
            assert node.value("mqha_broker_controller_session_connects_total", controller=controller) >= 1
        assert node.value("mqha_broker_min_in_sync_replicas") == 1
        assert node.value("mqha_broker_ha_sent_bytes_total") > 0
        assert node.value("mqha_broker_ha_received_bytes_total") > 0
    assert master.value("mqha_broker_role", role="MASTER") == 1
    assert slave.value("mqha_broker_role", role="SLAVE") == 1
    assert master.value("mqha_broker_sync_state_set_size") == 2
    assert master.value("mqha_broker_max_offset") == slave.value("mqha_broker_max_offset") > 0
    (slave_id,) = {lab["slave_broker_id"] for lab, _ in master.samples["mqha_broker_slave_ack_lag_bytes"]}
    assert master.value("mqha_broker_slave_ack_lag_bytes", slave_broker_id=slave_id) == 0
    assert master.value("mqha_broker_slave_caught_up_age_seconds", slave_broker_id=slave_id) >= 0
    assert not slave.samples["mqha_broker_slave_ack_lag_bytes"]  # a slave has no slaves
    assert (
        master.value("mqha_broker_put_requests_total", ack_mode="allAckInSyncStateSet", status="PUT_OK") == 1
    )
    assert (
        master.value("mqha_broker_put_messages_total", ack_mode="allAckInSyncStateSet", status="PUT_OK") == 3
    )


def test_proxy_metrics(scrapes: Scrapes) -> None:
    proxy = scrapes.proxy
    check_names_and_labels(proxy, PROXY_METRICS)
    assert proxy.value("mqha_proxy_messages_in_total", code="OK") == 1
    assert proxy.value("mqha_proxy_messages_out_total") == 0
    assert {lab["method"] for lab, _ in proxy.samples["mqha_proxy_rpc_latency_seconds"]} == {"SendMessage"}


def promtool_check_metrics(text: str) -> subprocess.CompletedProcess[str]:
    path = shutil.which("promtool")
    assert path is not None, (
        "promtool not found: run scripts/setup.sh (installs the Debian package prometheus)"
    )
    return subprocess.run(
        [path, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30, check=False
    )


def test_promtool_check_metrics_on_controllers(scrapes: Scrapes) -> None:
    for node in scrapes.controllers:
        done = promtool_check_metrics(node.text)
        assert done.returncode == 0, (node.address, done.stdout + done.stderr)


def test_promtool_check_metrics_on_brokers(scrapes: Scrapes) -> None:
    for node in (scrapes.master, scrapes.slave):
        done = promtool_check_metrics(node.text)
        assert done.returncode == 0, (node.address, done.stdout + done.stderr)


def test_promtool_check_metrics_on_the_proxy(scrapes: Scrapes) -> None:
    done = promtool_check_metrics(scrapes.proxy.text)
    assert done.returncode == 0, done.stdout + done.stderr


def test_rules_and_dashboard_use_exposed_metric_names(scrapes: Scrapes) -> None:
    exposed: set[str] = set()
    for node in [*scrapes.controllers, scrapes.master, scrapes.slave, scrapes.proxy]:
        for name, kind in node.types.items():
            exposed.add(name)
            if kind == "histogram":
                exposed |= {f"{name}_bucket", f"{name}_count", f"{name}_sum"}
    for path in (ROOT / "deploy/prometheus/alerts.yml", ROOT / "deploy/grafana/mqha-dashboard.json"):
        used = set(re.findall(r"\bmqha_[a-z0-9_]+", path.read_text()))
        assert used, path
        assert used <= exposed, (path.name, sorted(used - exposed))
