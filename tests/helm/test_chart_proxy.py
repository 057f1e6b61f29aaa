"""mqproxy in the Helm chart (helm/mqha/templates/proxy.yaml; docs/architecture.md §13): a Deployment of
``proxy.replicas`` behind one Service on the gRPC port, TCP probes, proxy.conf from values, the secrets
it needs (the brokers' user for puts, the inner credentials for consumer-offset commits) only from the
Secret, and a schema whose ``proxy.config`` keys follow mqproxy's loader. Rendered with the chart
test's machinery (tests/helm/test_chart.py: the real Helm engine, a replayed pod start)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

helm = pytest.importorskip("helm_python", reason="helm-python-sdk (test extras) is not installed")
yaml = pytest.importorskip("yaml")

from mqha.config import parse_properties  # noqa: E402
from mqha.controller.config import parse_peers  # noqa: E402
from mqha.proxy.config import PROXY_CONFIG, load_proxy_layers  # noqa: E402
from tests.helm.test_chart import (  # noqa: E402
    CHART,
    RELEASE,
    VARIANTS,
    Rendered,
    _console_script,
    _schema_type,
    container,
    install_dry_run,
    rendered,
    start_pod,
)

PROXY = f"{RELEASE}-proxy"
# Keys the chart sets itself: values.schema.json refuses them in proxy.config.
PROXY_MANAGED = frozenset(
    {
        "controllerAddr",
        "grpcServerPort",
        "authenticationEnabled",
        "innerClientAuthenticationCredentials",
        "initAuthenticationUser",
    }
)
PROXY_SECRETS = ("innerClientAuthenticationCredentials", "initAuthenticationUser")


def proxy_objects(r: Rendered) -> list[dict[str, Any]]:
    return [d for d in r.docs if d["metadata"]["labels"].get("app.kubernetes.io/component") == "proxy"]


def controller_addr(r: Rendered) -> str:
    conf = r.get("ConfigMap", f"{RELEASE}-controller-config")["data"]["controller.conf"]
    return ";".join(p.api_address for p in parse_peers(parse_properties(conf)["controllerDLegerPeers"]))


@pytest.mark.parametrize("variant", VARIANTS)
def test_proxy_deployment_service_and_budget(variant: str) -> None:
    r = rendered(variant)
    values = r.values["proxy"]
    if not values["enabled"]:
        assert proxy_objects(r) == []
        return
    deployment = r.get("Deployment", PROXY)
    spec, pod = deployment["spec"], deployment["spec"]["template"]["spec"]
    assert spec["replicas"] == values["replicas"]
    assert spec["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}  # never all at once
    c = container(deployment)
    assert c["command"] == ["sh", "/opt/mqha/run.sh", "mqproxy", "/etc/mqha/proxy.conf"]
    prom = values["config"].get("metricsExporterType") == "PROM"
    prom_port = values["config"].get("metricsPromExporterPort", 5557)
    assert c["ports"] == [{"name": "grpc", "containerPort": values["grpcServerPort"]}] + (
        [{"name": "metrics", "containerPort": prom_port}] if prom else []
    )
    metrics_services = [
        d for d in proxy_objects(r) if d["kind"] == "Service" and d["metadata"]["name"] != PROXY
    ]
    if prom:  # the exporter behind a headless Service the ServiceMonitor selects
        (metrics,) = metrics_services
        assert metrics["metadata"]["labels"]["mqha.io/metrics"] == "true"
        assert metrics["spec"]["clusterIP"] == "None"
        assert metrics["spec"]["ports"] == [{"name": "http", "port": prom_port, "targetPort": "metrics"}]
    else:
        assert metrics_services == []
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert c[probe]["tcpSocket"] == {"port": "grpc"}, probe
    assert c["resources"] == values["resources"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert bool(pod.get("affinity", {}).get("podAntiAffinity")) == (values["antiAffinity"] != "none")
    service = r.get("Service", PROXY)
    assert service["spec"]["type"] == values["service"]["type"]
    assert service["spec"]["ports"] == [
        {"name": "grpc", "port": values["service"]["port"], "targetPort": "grpc"}
    ]
    assert service["spec"]["selector"] == spec["selector"]["matchLabels"]
    assert spec["template"]["metadata"]["labels"].items() >= spec["selector"]["matchLabels"].items()
    assert service["metadata"].get("annotations", {}) == values["service"]["annotations"]
    # The selector matches proxies only: the access point never leads to a broker or controller.
    for sts in r.of_kind("StatefulSet"):
        labels = sts["spec"]["template"]["metadata"]["labels"]
        assert not labels.items() >= service["spec"]["selector"].items()
    budgets = [p for p in r.of_kind("PodDisruptionBudget") if p["metadata"]["name"] == PROXY]
    if values["replicas"] > 1 and values["podDisruptionBudget"]["enabled"]:
        (budget,) = budgets
        assert budget["spec"] == {
            "maxUnavailable": 1,
            "selector": {"matchLabels": spec["selector"]["matchLabels"]},
        }
    else:
        assert not budgets


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v != "no-proxy"])
def test_every_proxy_pod_config_is_accepted(variant: str, tmp_path: Path) -> None:
    r = rendered(variant)
    values = r.values
    deployment = r.get("Deployment", PROXY)
    configmap_text = r.get("ConfigMap", f"{PROXY}-config")["data"]["proxy.conf"]
    assert not set(PROXY_SECRETS) & set(parse_properties(configmap_text)), "secrets only from the Secret"
    path, _, env = start_pod(r, deployment, 0, tmp_path)
    config, _ = load_proxy_layers(str(path))  # PROXY_CONFIG.parse + check_proxy_config
    assert config["controllerAddr"] == controller_addr(r)
    assert config["grpcServerPort"] == values["proxy"]["grpcServerPort"]
    assert config["authenticationEnabled"] is values["auth"]["enabled"]
    secrets = r.secrets()
    auth = values["auth"]
    for key in PROXY_SECRETS:
        item = auth[key]
        expected = (
            secrets[(item["existingSecret"] or f"{RELEASE}-auth", item["secretKey"])]
            if auth["enabled"]
            else ""
        )
        assert config[key] == expected, key
    assert "adminAuthToken" not in configmap_text and "MQHA_ADMIN_TOKEN" not in env  # no admin power
    broker_size = values["broker"]["config"].get("maxMessageSize")
    expected_config = {
        **({"maxMessageSize": broker_size} if broker_size else {}),
        **values["proxy"]["config"],
    }
    for key, value in expected_config.items():
        assert config[key] == value, key
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)


@pytest.mark.parametrize("variant", ["default", "proxy-options", "auth-off"])
def test_mqproxy_accepts_the_rendered_config(variant: str, tmp_path: Path) -> None:
    """``mqproxy -p``: the process itself loads, checks and prints the config."""
    r = rendered(variant)
    _, done, _ = start_pod(r, r.get("Deployment", PROXY), 0, tmp_path, _console_script("mqproxy"), "-p")
    printed = parse_properties(done.stdout)
    assert printed["grpcServerPort"] == str(r.values["proxy"]["grpcServerPort"])
    if r.values["auth"]["enabled"]:
        assert printed["innerClientAuthenticationCredentials"] == "******"


def test_schema_proxy_config_keys_follow_the_loader() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    definition = schema["definitions"]["proxyConfig"]
    assert definition["additionalProperties"] is False
    assert set(PROXY_CONFIG.keys) >= PROXY_MANAGED
    expected = {
        name: _schema_type(key) for name, key in PROXY_CONFIG.keys.items() if name not in PROXY_MANAGED
    }
    assert definition["properties"] == expected


def test_every_accepted_proxy_key_renders_and_loads(tmp_path: Path) -> None:
    defaults = PROXY_CONFIG.parse("controllerAddr=h:1\n")
    proxy_values = {k: v for k, v in defaults.items() if k not in PROXY_MANAGED}
    values = {"proxy": {"config": proxy_values}}
    with helm.Chart.load(str(CHART)) as chart:
        merged = chart.merge_values(values)
    r = Rendered(values, install_dry_run(values), merged)
    path, _, _ = start_pod(r, r.get("Deployment", PROXY), 0, tmp_path)
    config, _ = load_proxy_layers(str(path))
    for key, value in proxy_values.items():
        assert config[key] == value, key


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"proxy": {"config": {"controllerAddr": "x:1"}}},
            "additional properties 'controllerAddr' not allowed",
        ),
        ({"proxy": {"config": {"noSuchKey": 1}}}, "additional properties 'noSuchKey' not allowed"),
        ({"proxy": {"config": {"autoCreateTopicEnable": "yes"}}}, "/proxy/config/autoCreateTopicEnable'"),
        ({"proxy": {"replicas": -1}}, "/proxy/replicas'"),
        ({"proxy": {"grpcServerPort": 0}}, "/proxy/grpcServerPort'"),
        ({"proxy": {"service": {"type": "ExternalName", "port": 8081}}}, "/proxy/service/type'"),
    ],
)
def test_invalid_proxy_values_are_rejected(values: dict[str, Any], message: str) -> None:
    with pytest.raises(helm.HelmError) as caught:
        install_dry_run(values)
    assert message in str(caught.value)
