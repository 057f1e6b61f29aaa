"""The Helm chart (helm/mqha), rendered offline by the real Helm engine (helm-python-sdk embeds Helm 4).

Every variant is rendered as `helm install --dry-run=client` does it (schema, kubeVersion, templates),
linted, and each manifest is validated with kubernetes-validate --strict against two Kubernetes
versions. Each pod's start is then replayed: the env of its container is resolved as the kubelet
would (fieldRefs, secretKeyRefs, $(VAR) references), the chart's run.sh builds the runtime config from
the rendered ConfigMap, and mqha's own loaders (and the real mqcontroller/mqbroker -p) must accept it.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

helm = pytest.importorskip("helm_python", reason="helm-python-sdk (test extras) is not installed")
kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate (test extras) is not installed")
yaml = pytest.importorskip("yaml")

from mqha.broker.config import BROKER_CONFIG, load_broker_config  # noqa: E402
from mqha.config import parse_properties  # noqa: E402
from mqha.controller.config import CONTROLLER_CONFIG, load_controller_config, parse_peers  # noqa: E402
from mqha.controller.config_store import check_config  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "mqha"
RELEASE = "demo"
NAMESPACE = "mq"
# The chart's kubeVersion floor and the newest Kubernetes that kubernetes-validate 1.37.0 ships.
K8S_VERSIONS = ("1.29.0", "1.37.0")
DATA_MOUNT = "/var/lib/mqha"

# Keys the chart sets itself (rendered or appended by run.sh); values.schema.json refuses them in
# controller.config / broker.config and accepts every other key the loaders know (of a key the processes
# refuse at start, only the values they start with: _schema_type).
CONTROLLER_MANAGED = frozenset(
    {
        "controllerDLegerPeers",
        "controllerDLegerSelfId",
        "controllerStorePath",
        "configStorePath",
        "controllerRaftPortOffset",
        "controllerDLegerGroup",
        "authenticationEnabled",
        "adminAuthToken",
        "controllerRaftPassword",
        "innerClientAuthenticationCredentials",
    }
)
BROKER_MANAGED = frozenset(
    {
        "brokerClusterName",
        "brokerName",
        "brokerIP1",
        "listenPort",
        "haListenPort",
        "enableControllerMode",
        "controllerAddr",
        "storePathRootDir",
        "storePathCommitLog",
        "storePathEpochFile",
        "storePathBrokerIdentity",
        "authenticationEnabled",
        "adminAuthToken",
        "innerClientAuthenticationCredentials",
        "initAuthenticationUser",
        "brokerId",
    }
)
# Keys the chart does not offer yet (it mounts no certificates): values.schema.json refuses them too.
NOT_OFFERED = frozenset(
    {
        "tlsEnable",
        "tls.server.certPath",
        "tls.server.keyPath",
        "tls.client.trustCertPath",
        "tls.client.verifyHostname",
    }
)
# The secrets the chart manages: config key -> (env var run.sh reads, on controllers, on brokers).
AUTH_ITEMS = {
    "adminAuthToken": ("MQHA_ADMIN_TOKEN", True, True),
    "controllerRaftPassword": ("MQHA_RAFT_PASSWORD", True, False),
    "innerClientAuthenticationCredentials": ("MQHA_INNER_CREDENTIALS", True, True),
    "initAuthenticationUser": ("MQHA_INIT_USER", False, True),
}
# A secret with a quote and a backslash: run.sh must hand it over unchanged (Java-properties escapes).
OPS_CREDENTIALS = '{"accessKey": "ops", "secretKey": "q\\"uo\\\\te-12345"}'


VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "one-controller": {"controller": {"replicas": 1}},
    "five-controllers-three-groups": {
        "controller": {
            "replicas": 5,
            "config": {"scanNotActiveBrokerInterval": 3000, "enableElectUncleanMaster": False},
        },
        "broker": {
            "config": {
                "allAckInSyncStateSet": True,
                "mappedFileSizeCommitLog": 1073741824,
                "flushDiskType": "SYNC_FLUSH",
            }
        },
        "brokerGroups": [
            {"name": "broker-a", "replicas": 2},
            {
                "name": "broker-b",
                "replicas": 2,
                "config": {"allAckInSyncStateSet": False, "minInSyncReplicas": 2},
            },
            {
                "name": "broker-c",
                "replicas": 2,
                "persistence": {"size": "50Gi", "storageClass": "fast"},
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
            },
        ],
    },
    "auth-and-metrics": {
        "auth": {
            "adminAuthToken": {"enabled": True, "value": "s3cret-token"},
            "controllerRaftPassword": {"enabled": True, "value": "raft-pass#1"},
        },
        "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}}},
    },
    "existing-secret-pod-dns-no-persistence": {
        "clusterDomain": "cluster.local",
        "auth": {
            "adminAuthToken": {"enabled": True, "existingSecret": "ops-mqha", "secretKey": "token"},
            "innerClientAuthenticationCredentials": {"existingSecret": "ops-mqha", "secretKey": "inner"},
        },
        "controller": {"persistence": {"enabled": False}, "antiAffinity": "none"},
        "broker": {"address": "podDNS", "antiAffinity": "hard", "persistence": {"storageClass": "-"}},
        "brokerGroups": [{"name": "orders", "replicas": 3, "persistence": {"enabled": False}}],
        "metrics": {"grafanaDashboard": {"enabled": False}},
    },
    "auth-off": {"auth": {"enabled": False}},
    "proxy-options": {
        "broker": {"config": {"maxMessageSize": 1048576}},
        "proxy": {
            "replicas": 3,
            "grpcServerPort": 9081,
            "service": {"type": "LoadBalancer", "port": 8081, "annotations": {"example.com/lb": "internal"}},
            "config": {
                "autoCreateTopicEnable": False,
                "flushConsumerOffsetInterval": 500,
                "metricsExporterType": "PROM",
                "metricsPromExporterPort": 9557,
            },
            "antiAffinity": "hard",
        },
        "metrics": {"serviceMonitor": {"enabled": True}},
    },
    "no-proxy": {"proxy": {"enabled": False}},
    "no-secrets-at-all": {
        "auth": {
            "enabled": False,
            "adminAuthToken": {"enabled": False},
            "controllerRaftPassword": {"enabled": False},
        }
    },
}
# Secrets that exist in the cluster already (existingSecret): (name, key) -> value.
EXISTING_SECRETS = {("ops-mqha", "token"): "token-from-ops", ("ops-mqha", "inner"): OPS_CREDENTIALS}


# ----------------------------------------------------------------------------------------- rendering


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys (the API server would keep only one)."""


def _construct_mapping(loader: yaml.SafeLoader, node: Any, deep: bool = False) -> dict[Any, Any]:
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


class Rendered:
    """One rendered release: its manifests, NOTES and merged values."""

    def __init__(self, values: dict[str, Any], release: dict[str, Any], merged: dict[str, Any]) -> None:
        self.values = merged
        self.notes: str = release["notes"]
        self.docs: list[dict[str, Any]] = [
            doc for doc in yaml.load_all(release["manifest"], Loader=_StrictLoader) if doc
        ]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [doc for doc in self.docs if doc["kind"] == kind]

    def get(self, kind: str, name: str) -> dict[str, Any]:
        found = [doc for doc in self.of_kind(kind) if doc["metadata"]["name"] == name]
        assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
        return found[0]

    def secrets(self) -> dict[tuple[str, str], str]:
        out = dict(EXISTING_SECRETS)
        for secret in self.of_kind("Secret"):
            for key, encoded in secret.get("data", {}).items():
                out[(secret["metadata"]["name"], key)] = base64.b64decode(encoded).decode()
        return out


def install_dry_run(values: dict[str, Any], release: str = RELEASE) -> dict[str, Any]:
    """`helm install --dry-run=client`: no cluster, in-memory release storage."""
    with helm.Config(storage_driver="memory", namespace=NAMESPACE) as config:
        return config.install(str(CHART), release, values, dry_run="client", namespace=NAMESPACE)


@functools.cache
def rendered(variant: str) -> Rendered:
    values = VARIANTS[variant]
    with helm.Chart.load(str(CHART)) as chart:
        merged = chart.merge_values(values)
    return Rendered(values, install_dry_run(values), merged)


def controller_sts(r: Rendered) -> dict[str, Any]:
    return r.get("StatefulSet", f"{RELEASE}-controller")


def broker_sts(r: Rendered) -> list[dict[str, Any]]:
    return [
        s
        for s in r.of_kind("StatefulSet")
        if s["metadata"]["labels"]["app.kubernetes.io/component"] == "broker"
    ]


def container(sts: dict[str, Any]) -> dict[str, Any]:
    containers = sts["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def svc_suffix(r: Rendered) -> str:
    domain = r.values["clusterDomain"]
    return f"{NAMESPACE}.svc" + (f".{domain}" if domain else "")


def expected_secrets(r: Rendered, component: str) -> dict[str, str]:
    """The secret config keys a controller or broker pod must end up with, and their values."""
    auth = r.values["auth"]
    secrets = r.secrets()
    out = {}
    for key, (_, on_controller, on_broker) in AUTH_ITEMS.items():
        item = auth[key]
        in_use = item["enabled"] if "enabled" in item else auth["enabled"]
        if in_use and (on_controller if component == "controller" else on_broker):
            out[key] = secrets[(item["existingSecret"] or f"{RELEASE}-auth", item["secretKey"])]
    return out


# ------------------------------------------------------------------------------- replaying a pod start


def pod_ip(sts: dict[str, Any], ordinal: int) -> str:
    return f"10.{len(sts['metadata']['name']) % 250}.7.{ordinal + 10}"


def pod_env(r: Rendered, sts: dict[str, Any], ordinal: int) -> dict[str, str]:
    """The container env as the kubelet resolves it for pod <sts>-<ordinal>."""
    fields = {"metadata.name": f"{sts['metadata']['name']}-{ordinal}", "status.podIP": pod_ip(sts, ordinal)}
    secrets = r.secrets()
    env: dict[str, str] = {}
    for entry in container(sts).get("env", []):
        if "value" in entry:
            value = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), entry["value"])
        elif "fieldRef" in entry["valueFrom"]:
            value = fields[entry["valueFrom"]["fieldRef"]["fieldPath"]]
        else:
            ref = entry["valueFrom"]["secretKeyRef"]
            value = secrets[(ref["name"], ref["key"])]
        env[entry["name"]] = value
    return env


def _configmap_file(r: Rendered, sts: dict[str, Any], volume_name: str, mount_path: str, path: str) -> str:
    spec = sts["spec"]["template"]["spec"]
    mounts = {m["name"]: m["mountPath"] for m in container(sts)["volumeMounts"]}
    assert mounts[volume_name] == mount_path
    volume = next(v for v in spec["volumes"] if v["name"] == volume_name)
    data = r.get("ConfigMap", volume["configMap"]["name"])["data"]
    return data[path.removeprefix(mount_path + "/")]


def start_pod(
    r: Rendered, sts: dict[str, Any], ordinal: int, tmp: Path, program: str | None = None, *args: str
) -> tuple[Path, subprocess.CompletedProcess[str], dict[str, str]]:
    """Runs the pod's command (the chart's run.sh) against the rendered ConfigMaps. ``program``
    replaces the console script (default ``true``: only build the runtime config). Returns the
    runtime config path, the finished process and the pod env."""
    command = container(sts)["command"]
    assert command[:2] == ["sh", "/opt/mqha/run.sh"], command
    work = tmp / f"{sts['metadata']['name']}-{ordinal}"
    work.mkdir(parents=True)
    script = work / "run.sh"
    script.write_text(_configmap_file(r, sts, "scripts", "/opt/mqha", command[1]))
    template = work / Path(command[3]).name
    template.write_text(_configmap_file(r, sts, "config", "/etc/mqha", command[3]))
    env = pod_env(r, sts, ordinal)
    run_env = {k: v for k, v in env.items() if k != "MQHA_WAIT_FOR_HOST"}  # cluster DNS is not here
    run_env |= {"PATH": os.environ["PATH"], "MQHA_RUNTIME_DIR": str(work / "runtime")}
    done = subprocess.run(
        ["sh", str(script), program or "true", str(template), *args],
        env=run_env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return work / "runtime" / template.name, done, env


# ------------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("kube_version", K8S_VERSIONS)
def test_lint_is_clean(variant: str, kube_version: str) -> None:
    report = helm.lint(str(CHART), VARIANTS[variant], strict=True, kube_version=f"v{kube_version}")
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert not problems and not report["errors"], problems or report["errors"]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("kube_version", K8S_VERSIONS)
def test_manifests_validate_strictly(variant: str, kube_version: str) -> None:
    errors = []
    for doc in rendered(variant).docs:
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # a CRD: test_service_monitor_scrapes_every_pod checks it
        try:
            kv.validate(doc, kube_version, strict=True)
        except kv.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            errors.append(f"{doc['kind']}/{doc['metadata']['name']}: {path}: {exc.message}")
    assert not errors, "\n".join(errors)


def test_strict_validation_refuses_unknown_fields() -> None:
    sts = json.loads(json.dumps(controller_sts(rendered("default"))))
    container(sts)["livenesProbe"] = {"httpGet": {"path": "/healthz", "port": "http"}}
    with pytest.raises(kv.ValidationError):
        kv.validate(sts, K8S_VERSIONS[0], strict=True)


def test_expected_objects_for_default_values() -> None:
    r = rendered("default")
    kinds = sorted(f"{d['kind']}/{d['metadata']['name']}" for d in r.docs)
    assert kinds == sorted(
        [
            "ConfigMap/demo-broker-a-config",
            "ConfigMap/demo-controller-config",
            "ConfigMap/demo-grafana-dashboard",
            "ConfigMap/demo-proxy-config",
            "ConfigMap/demo-scripts",
            "Secret/demo-auth",
            "PodDisruptionBudget/demo-broker-a",
            "PodDisruptionBudget/demo-controller",
            "PodDisruptionBudget/demo-proxy",
            "Service/demo-broker-a-headless",
            "Service/demo-controller",
            "Service/demo-controller-headless",
            "Service/demo-proxy",
            "StatefulSet/demo-broker-a",
            "StatefulSet/demo-controller",
            "Deployment/demo-proxy",
        ]
    )
    for doc in r.docs:
        assert doc["metadata"]["namespace"] == NAMESPACE


@pytest.mark.parametrize("variant", VARIANTS)
def test_controller_statefulset(variant: str) -> None:
    r = rendered(variant)
    values = r.values["controller"]
    sts = controller_sts(r)
    spec, pod = sts["spec"], sts["spec"]["template"]["spec"]
    replicas = values["replicas"]
    assert spec["replicas"] == replicas
    assert spec["podManagementPolicy"] == "Parallel"
    headless = r.get("Service", spec["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True
    c = container(sts)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"http": values["port"], "raft": values["port"] + values["raftPortOffset"]}
    assert_probe_paths(c)
    assert c["resources"]["requests"] and c["resources"]["limits"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    data_volumes = [v for v in pod["volumes"] if v["name"] == "data"]
    if values["persistence"]["enabled"]:
        assert not data_volumes, "the Raft journal must be on a PersistentVolumeClaim"
        (claim,) = spec["volumeClaimTemplates"]
        assert claim["metadata"]["name"] == "data"
        assert claim["spec"]["resources"]["requests"]["storage"] == values["persistence"]["size"]
    else:
        assert data_volumes == [{"name": "data", "emptyDir": {}}]
        assert "volumeClaimTemplates" not in spec
        assert "WARNING: controller.persistence.enabled=false" in r.notes
    affinity = pod.get("affinity", {}).get("podAntiAffinity")
    assert bool(affinity) == (values["antiAffinity"] != "none")
    pdbs = [p for p in r.of_kind("PodDisruptionBudget") if p["metadata"]["name"] == sts["metadata"]["name"]]
    if replicas == 1:
        assert not pdbs  # a majority of one would block every drain
    else:
        (pdb,) = pdbs
        assert pdb["spec"]["minAvailable"] == replicas // 2 + 1
        assert pdb["spec"]["selector"]["matchLabels"] == spec["selector"]["matchLabels"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_broker_group_statefulsets(variant: str) -> None:
    r = rendered(variant)
    b = r.values["broker"]
    groups = r.values["brokerGroups"]
    by_name = {s["metadata"]["name"]: s for s in broker_sts(r)}
    assert sorted(by_name) == sorted(f"{RELEASE}-{g['name']}" for g in groups)
    for group in groups:
        sts = by_name[f"{RELEASE}-{group['name']}"]
        spec, pod = sts["spec"], sts["spec"]["template"]["spec"]
        assert spec["replicas"] == group["replicas"]
        assert r.get("Service", spec["serviceName"])["spec"]["clusterIP"] == "None"
        c = container(sts)
        assert {p["name"]: p["containerPort"] for p in c["ports"]} == {
            "http": b["listenPort"],
            "ha": b["haListenPort"],
        }
        assert_probe_paths(c)
        assert c["resources"] == group.get("resources", b["resources"])
        persistence = {**b["persistence"], **group.get("persistence", {})}
        if persistence["enabled"]:
            (claim,) = spec["volumeClaimTemplates"]
            assert claim["spec"]["resources"]["requests"]["storage"] == persistence["size"]
            storage_class = {"": None, "-": ""}.get(persistence["storageClass"], persistence["storageClass"])
            assert claim["spec"].get("storageClassName") == storage_class
        else:
            assert "volumeClaimTemplates" not in spec
            assert {"name": "data", "emptyDir": {}} in pod["volumes"]
        selector = spec["selector"]["matchLabels"]
        assert selector["mqha.io/broker-group"] == group["name"]
        pdbs = [
            p for p in r.of_kind("PodDisruptionBudget") if p["metadata"]["name"] == sts["metadata"]["name"]
        ]
        assert len(pdbs) == (1 if group["replicas"] > 1 else 0)
        for pdb in pdbs:
            assert pdb["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": selector}}


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_controller_pod_config_is_accepted(variant: str, tmp_path: Path) -> None:
    r = rendered(variant)
    values = r.values
    sts = controller_sts(r)
    headless = sts["spec"]["serviceName"]
    expected_hosts = [
        f"{RELEASE}-controller-{i}.{headless}.{svc_suffix(r)}" for i in range(sts["spec"]["replicas"])
    ]
    configmap_text = r.get("ConfigMap", f"{RELEASE}-controller-config")["data"]["controller.conf"]
    assert not {"controllerDLegerSelfId", *AUTH_ITEMS} & set(parse_properties(configmap_text)), (
        "per-pod keys and secrets are appended at start, never in the ConfigMap"
    )
    secrets = expected_secrets(r, "controller")
    for ordinal in range(sts["spec"]["replicas"]):
        path, _, env = start_pod(r, sts, ordinal, tmp_path)
        config = load_controller_config(str(path))  # CONTROLLER_CONFIG.parse + the cross-key checks
        check_config(config)
        assert config["controllerDLegerSelfId"] == f"n{ordinal}"
        peers = parse_peers(config["controllerDLegerPeers"])
        assert [p.node_id for p in peers] == [f"n{i}" for i in range(len(expected_hosts))]
        assert [p.host for p in peers] == expected_hosts
        assert {p.port for p in peers} == {values["controller"]["port"]}
        assert env["MQHA_WAIT_FOR_HOST"] == expected_hosts[ordinal]  # the name it binds to
        assert config["controllerRaftPortOffset"] == values["controller"]["raftPortOffset"]
        assert config["controllerDLegerGroup"] == values["controller"]["group"]
        assert config["controllerStorePath"].startswith(DATA_MOUNT + "/")
        assert config["configStorePath"].startswith(DATA_MOUNT + "/")
        for key, value in values["controller"]["config"].items():
            assert config[key] == value, key
        assert config["authenticationEnabled"] is values["auth"]["enabled"]
        for key in ("adminAuthToken", "controllerRaftPassword", "innerClientAuthenticationCredentials"):
            assert config[key] == secrets.get(key, ""), key
        assert oct(path.stat().st_mode & 0o777) == oct(0o600)


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_broker_pod_config_is_accepted(variant: str, tmp_path: Path) -> None:
    r = rendered(variant)
    values = r.values
    controller_addr = ";".join(
        p.api_address
        for p in parse_peers(
            parse_properties(r.get("ConfigMap", f"{RELEASE}-controller-config")["data"]["controller.conf"])[
                "controllerDLegerPeers"
            ]
        )
    )
    secrets = expected_secrets(r, "broker")
    for group in values["brokerGroups"]:
        sts = r.get("StatefulSet", f"{RELEASE}-{group['name']}")
        configmap_text = r.get("ConfigMap", f"{RELEASE}-{group['name']}-config")["data"]["broker.conf"]
        assert not {"brokerIP1", *AUTH_ITEMS} & set(parse_properties(configmap_text))
        for ordinal in range(group["replicas"]):
            path, _, env = start_pod(r, sts, ordinal, tmp_path)
            config = load_broker_config(str(path))  # BROKER_CONFIG.parse + check_broker_config
            pod_name = f"{sts['metadata']['name']}-{ordinal}"
            if values["broker"]["address"] == "podDNS":
                expected_ip = f"{pod_name}.{sts['spec']['serviceName']}.{svc_suffix(r)}"
                assert env["MQHA_WAIT_FOR_HOST"] == expected_ip
            else:
                expected_ip = pod_ip(sts, ordinal)
                assert "MQHA_WAIT_FOR_HOST" not in env
            assert config["brokerIP1"] == expected_ip
            assert config["brokerName"] == group["name"]
            assert config["brokerClusterName"] == values["broker"]["clusterName"]
            assert config["enableControllerMode"] is True
            assert config["controllerAddr"] == controller_addr
            assert config["listenPort"] == values["broker"]["listenPort"]
            assert config["haListenPort"] == values["broker"]["haListenPort"]
            for key in (
                "storePathRootDir",
                "storePathCommitLog",
                "storePathEpochFile",
                "storePathBrokerIdentity",
            ):
                assert config[key].startswith(DATA_MOUNT + "/"), key
            expected = {
                "totalReplicas": group["replicas"],
                **values["broker"]["config"],
                **group.get("config", {}),
            }
            for key, value in expected.items():
                assert config[key] == value, key
            assert config["authenticationEnabled"] is values["auth"]["enabled"]
            for key in ("adminAuthToken", "innerClientAuthenticationCredentials", "initAuthenticationUser"):
                assert config[key] == secrets.get(key, ""), key
            assert "controllerRaftPassword" not in secrets
            assert oct(path.stat().st_mode & 0o777) == oct(0o600)


def _console_script(name: str) -> str:
    path = Path(sys.executable).with_name(name)
    if not path.exists():
        pytest.skip(f"{name} is not installed next to {sys.executable}")
    return str(path)


# Real processes for three variants in the default run, every variant with -m slow (each costs seconds).
REAL_PROCESS_VARIANTS = ("default", "five-controllers-three-groups", "auth-off")


@pytest.mark.parametrize(
    "variant",
    [v if v in REAL_PROCESS_VARIANTS else pytest.param(v, marks=pytest.mark.slow) for v in VARIANTS],
)
def test_real_processes_accept_the_rendered_config(variant: str, tmp_path: Path) -> None:
    """mqcontroller/mqbroker -p: the processes themselves load, check and print the config."""
    r = rendered(variant)
    _, done, _ = start_pod(r, controller_sts(r), 0, tmp_path, _console_script("mqcontroller"), "-p")
    printed = parse_properties(done.stdout)
    assert printed["controllerDLegerSelfId"] == "n0"
    for sts in broker_sts(r):
        _, done, _ = start_pod(r, sts, 0, tmp_path, _console_script("mqbroker"), "-p")
        printed = parse_properties(done.stdout)
        assert printed["brokerName"] == sts["spec"]["selector"]["matchLabels"]["mqha.io/broker-group"]


def _defaults(spec: Any, required: dict[str, str]) -> dict[str, Any]:
    return spec.parse("".join(f"{k}={v}\n" for k, v in required.items()))


def test_every_accepted_config_key_renders_and_loads(tmp_path: Path) -> None:
    """Each key the schema lets through reaches the config file and loads with its value."""
    controller_values = {
        k: v
        for k, v in _defaults(
            CONTROLLER_CONFIG, {"controllerDLegerPeers": "n0-h:1", "controllerDLegerSelfId": "n0"}
        ).items()
        if k not in CONTROLLER_MANAGED and k not in NOT_OFFERED
    }
    broker_values = {
        k: v
        for k, v in _defaults(BROKER_CONFIG, {"brokerName": "x"}).items()
        if k not in BROKER_MANAGED and k not in NOT_OFFERED and k != "totalReplicas"
    }
    values = {"controller": {"config": controller_values}, "broker": {"config": broker_values}}
    with helm.Chart.load(str(CHART)) as chart:
        merged = chart.merge_values(values)
    r = Rendered(values, install_dry_run(values), merged)
    path, _, _ = start_pod(r, controller_sts(r), 0, tmp_path)
    text = path.read_text()
    config = load_controller_config(str(path))
    for key, value in controller_values.items():
        assert re.search(rf"^{key}=", text, re.M), key
        assert config[key] == value, key
    (sts,) = broker_sts(r)
    path, _, _ = start_pod(r, sts, 0, tmp_path)
    text = path.read_text()
    config = load_broker_config(str(path))
    for key, value in broker_values.items():
        assert re.search(rf"^{key}=", text, re.M), key
        assert config[key] == value, key


def _schema_type(key: Any) -> dict[str, Any]:
    """What values.schema.json allows for ``key``: its type, and for a key mqha refuses (or maps only
    some values of) just the values the process starts with: the default and the accepted ones."""
    accepted = key.allowed_values
    if accepted is not None:
        kind = {bool: "boolean", int: "integer"}.get(key.kind, "string")
        return {"type": kind, "enum": list(accepted), "description": f"mqha: {key.support.note}"}
    if key.choices:
        return {"type": "string", "enum": list(key.choices)}
    if key.kind is bool:
        return {"type": "boolean"}
    if key.kind is int:
        return {"type": "integer"}
    return {"$ref": "#/definitions/propertyString"}


@pytest.mark.parametrize(
    ("definition", "spec", "managed"),
    [
        ("controllerConfig", CONTROLLER_CONFIG, CONTROLLER_MANAGED),
        ("brokerConfig", BROKER_CONFIG, BROKER_MANAGED),
    ],
)
def test_schema_config_keys_follow_the_loaders(definition: str, spec: Any, managed: frozenset[str]) -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    allowed = schema["definitions"][definition]["properties"]
    assert schema["definitions"][definition]["additionalProperties"] is False
    assert managed | NOT_OFFERED <= set(spec.keys), "a chart-managed key is not a config key any more"
    expected = {
        name: _schema_type(key)
        for name, key in spec.keys.items()
        if name not in managed and name not in NOT_OFFERED
    }
    missing = sorted(set(expected) - set(allowed))
    unknown = sorted(set(allowed) - set(expected))
    assert not unknown, (
        f"values.schema.json {definition} lists keys the loader rejects or the chart sets: {unknown}"
    )
    assert not missing, f"add to values.schema.json definitions.{definition}: {missing}"
    wrong = {name: (allowed[name], expected[name]) for name in expected if allowed[name] != expected[name]}
    assert not wrong, f"types differ from the loader: {wrong}"


INVALID_VALUES = {
    "even-controllers": (
        {"controller": {"replicas": 4}},
        "/controller/replicas': value must be one of 1, 3, 5, 7, 9",
    ),
    "two-controllers": (
        {"controller": {"replicas": 2}},
        "/controller/replicas': value must be one of 1, 3, 5, 7, 9",
    ),
    "zero-controllers": ({"controller": {"replicas": 0}}, "/controller/replicas': value must be one of"),
    "negative-broker-replicas": (
        {"brokerGroups": [{"name": "broker-a", "replicas": -1}]},
        "/brokerGroups/0/replicas': minimum: got -1, want 1",
    ),
    "unknown-top-level-key": ({"brokerGroup": []}, "additional properties 'brokerGroup' not allowed"),
    "unknown-nested-key": ({"controller": {"replica": 3}}, "additional properties 'replica' not allowed"),
    "unknown-rocketmq-key": (
        {"broker": {"config": {"brokerIp1": "x"}}},
        "/broker/config': additional properties 'brokerIp1' not allowed",
    ),
    "chart-managed-key": (
        {"controller": {"config": {"controllerDLegerPeers": "n0-x:1"}}},
        "additional properties 'controllerDLegerPeers' not allowed",
    ),
    "wrong-type": (
        {"broker": {"config": {"allAckInSyncStateSet": "yes"}}},
        "/broker/config/allAckInSyncStateSet': got string, want boolean",
    ),
    "not-an-integer": ({"broker": {"config": {"maxMessageSize": 1.5}}}, "/broker/config/maxMessageSize'"),
    "bad-choice": ({"broker": {"config": {"flushDiskType": "NEVER"}}}, "/broker/config/flushDiskType'"),
    "multi-line-value": (
        {"controller": {"config": {"metricsPromExporterHost": "a\nadminAuthToken="}}},
        "/controller/config/metricsPromExporterHost'",
    ),
    # Keys the processes refuse at start (docs/config.md): the schema lets through only what they take.
    "refused-controller-type": (
        {"controller": {"config": {"controllerType": "jRaft"}}},
        "/controller/config/controllerType': value must be 'DLedger'",
    ),
    "refused-thread-pool": (
        {"controller": {"config": {"controllerThreadPoolNums": 32}}},
        "/controller/config/controllerThreadPoolNums': value must be 16",
    ),
    "refused-metrics-exporter": (
        {"controller": {"config": {"metricsExporterType": "LOG"}}},
        "/controller/config/metricsExporterType': value must be one of 'DISABLE', 'PROM'",
    ),
    "refused-broker-role": (
        {"broker": {"config": {"brokerRole": "SYNC_MASTER"}}},
        "/broker/config/brokerRole': value must be one of 'ASYNC_MASTER', 'SLAVE'",
    ),
    "refused-resend-length": (
        {"broker": {"config": {"maxSlaveResendLength": 1}}},
        "/broker/config/maxSlaveResendLength'",
    ),
    "bad-group-name": ({"brokerGroups": [{"name": "Broker_A", "replicas": 2}]}, "/brokerGroups/0/name'"),
    "no-groups": ({"brokerGroups": []}, "/brokerGroups'"),
    "bad-port": ({"broker": {"listenPort": 70000}}, "/broker/listenPort'"),
    "bad-address-mode": ({"broker": {"address": "nodeIP"}}, "/broker/address'"),
    "bad-size": ({"controller": {"persistence": {"size": "lots"}}}, "/controller/persistence/size'"),
    "duplicate-group": (
        {"brokerGroups": [{"name": "a", "replicas": 1}, {"name": "a", "replicas": 2}]},
        'brokerGroups: the name "a" is listed twice',
    ),
    "reserved-group-name": (
        {"brokerGroups": [{"name": "controller", "replicas": 2}]},
        'the name "controller" is reserved',
    ),
    "same-ports": ({"broker": {"haListenPort": 10911}}, "broker.haListenPort (10911) must differ"),
    "auth-without-admin-token": (
        {"auth": {"adminAuthToken": {"enabled": False}}},
        "auth.enabled is true: controllers then require adminAuthToken",
    ),
    "short-admin-token": (
        {"auth": {"adminAuthToken": {"value": "short"}}},
        "auth.adminAuthToken.value must be at least 8 characters",
    ),
    "short-raft-password": (
        {"auth": {"controllerRaftPassword": {"value": "1234567"}}},
        "auth.controllerRaftPassword.value must be at least 8 characters",
    ),
    "credentials-not-json": (
        {"auth": {"innerClientAuthenticationCredentials": {"value": "ak:sk"}}},
        "auth.innerClientAuthenticationCredentials.value must be one line of JSON",
    ),
    "credentials-wrong-fields": (
        {
            "auth": {
                "innerClientAuthenticationCredentials": {"value": '{"accessKey": "a", "secret": "12345678"}'}
            }
        },
        "with exactly these fields",
    ),
    "credentials-short-secret": (
        {
            "auth": {
                "innerClientAuthenticationCredentials": {"value": '{"accessKey": "a", "secretKey": "1234"}'}
            }
        },
        'field "secretKey" must be a string of 8+ characters',
    ),
    "user-colon-in-name": (
        {"auth": {"initAuthenticationUser": {"value": '{"username": "a:b", "password": "12345678"}'}}},
        "field \"username\" must be a non-empty string without ':'",
    ),
    "user-not-an-object": (
        {"auth": {"initAuthenticationUser": {"value": '["mqha", "12345678"]'}}},
        "auth.initAuthenticationUser.value must be one line of JSON",
    ),
    "secret-with-newline": (
        {"auth": {"adminAuthToken": {"value": "abcdefgh\nbrokerIP1=evil"}}},
        "/auth/adminAuthToken/value'",
    ),
    "secret-with-trailing-space": (
        {"auth": {"adminAuthToken": {"value": "abcdefgh "}}},
        "/auth/adminAuthToken/value'",
    ),
    "raft-port-overflow": ({"controller": {"port": 65535}}, "the Raft port) is 65536, above 65535"),
}


@pytest.mark.parametrize("case", INVALID_VALUES)
def test_invalid_values_are_rejected(case: str) -> None:
    values, message = INVALID_VALUES[case]
    with pytest.raises(helm.HelmError) as caught:
        install_dry_run(values)
    assert message in str(caught.value)


def test_too_long_names_are_rejected() -> None:
    with pytest.raises(helm.HelmError, match="more than the 52 a StatefulSet allows"):
        install_dry_run({}, release="r" * 45)


@pytest.mark.parametrize("variant", VARIANTS)
def test_service_monitor_scrapes_every_pod(variant: str) -> None:
    r = rendered(variant)
    monitors = r.of_kind("ServiceMonitor")
    if not r.values["metrics"]["serviceMonitor"]["enabled"]:
        assert not monitors
        return
    (monitor,) = monitors
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    extra_labels = r.values["metrics"]["serviceMonitor"].get("labels", {})
    assert monitor["metadata"]["labels"].items() >= extra_labels.items()
    selector = monitor["spec"]["selector"]["matchLabels"]
    selected = [s for s in r.of_kind("Service") if selector.items() <= s["metadata"]["labels"].items()]
    governing = {s["spec"]["serviceName"] for s in r.of_kind("StatefulSet")}
    proxy = r.values["proxy"]
    prom = proxy["enabled"] and proxy["config"].get("metricsExporterType") == "PROM"
    # each pod once: through the headless Service that governs its StatefulSet, the proxies' exporter
    exporters = {f"{RELEASE}-proxy-metrics"} if prom else set()
    assert {s["metadata"]["name"] for s in selected} == governing | exporters
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics"
    for service in selected:
        assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    # The Prometheus Operator names each target's job after the Service's `jobLabel` label, else after
    # the Service: every job must be one the alerts and the dashboard query, or they never match.
    label = monitor["spec"].get("jobLabel", "")
    jobs = {s["metadata"]["labels"].get(label, s["metadata"]["name"]) for s in selected}
    assert jobs >= {"mqha-controller", "mqha-broker"} | ({"mqha-proxy"} if prom else set())
    assert jobs <= ALERT_JOBS, f"scrape jobs {sorted(jobs - ALERT_JOBS)} are in no alert rule"


ALERT_JOBS = set(re.findall(r'job="([^"]+)"', (ROOT / "deploy" / "prometheus" / "alerts.yml").read_text()))


@pytest.mark.parametrize("variant", VARIANTS)
def test_grafana_dashboard_configmap(variant: str) -> None:
    r = rendered(variant)
    maps = [m for m in r.of_kind("ConfigMap") if m["metadata"]["name"] == f"{RELEASE}-grafana-dashboard"]
    if not r.values["metrics"]["grafanaDashboard"]["enabled"]:
        assert not maps
        return
    (configmap,) = maps
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    repo_dashboard = json.loads((ROOT / "deploy" / "grafana" / "mqha-dashboard.json").read_text())
    assert json.loads(configmap["data"]["mqha-dashboard.json"]) == repo_dashboard


def test_chart_dashboard_is_a_copy_of_the_repository_one() -> None:
    """Helm reads only files inside the chart: helm/mqha/dashboards/ holds a copy; keep it in step."""
    assert (CHART / "dashboards" / "mqha-dashboard.json").read_bytes() == (
        ROOT / "deploy" / "grafana" / "mqha-dashboard.json"
    ).read_bytes(), "cp deploy/grafana/mqha-dashboard.json helm/mqha/dashboards/"


@pytest.mark.parametrize("variant", VARIANTS)
def test_secrets_stay_out_of_configmaps(variant: str) -> None:
    """Secrets reach the pods only as secretKeyRef env vars; no ConfigMap or plain env value holds one."""
    r = rendered(variant)
    secret_values = set(r.secrets().values())
    for configmap in r.of_kind("ConfigMap"):
        for text in configmap["data"].values():
            leaked = [value for value in secret_values if value in text]
            assert not leaked, f"ConfigMap {configmap['metadata']['name']} holds a secret"
    auth = r.values["auth"]
    for sts in r.of_kind("StatefulSet"):
        component = sts["metadata"]["labels"]["app.kubernetes.io/component"]
        expected = expected_secrets(r, component)
        env = {e["name"]: e for e in container(sts)["env"]}
        for key, (variable, _, _) in AUTH_ITEMS.items():
            if key not in expected:
                assert variable not in env, (sts["metadata"]["name"], variable)
                continue
            item = auth[key]
            assert env[variable] == {
                "name": variable,
                "valueFrom": {
                    "secretKeyRef": {
                        "name": item["existingSecret"] or f"{RELEASE}-auth",
                        "key": item["secretKey"],
                    }
                },
            }
        for entry in env.values():
            assert entry.get("value") not in secret_values, entry["name"]
    # the chart's Secret holds exactly the secrets in use that no existingSecret provides
    stored = {
        auth[key]["secretKey"]
        for key in {*expected_secrets(r, "controller"), *expected_secrets(r, "broker")}
        if not auth[key]["existingSecret"]
    }
    secrets = r.of_kind("Secret")
    if not stored:
        assert not secrets
        return
    (secret,) = secrets
    assert secret["metadata"]["name"] == f"{RELEASE}-auth"
    assert secret["type"] == "Opaque"
    assert set(secret["data"]) == stored


def test_config_changes_roll_the_pods() -> None:
    base = controller_sts(rendered("default"))["spec"]["template"]["metadata"]["annotations"]
    changed = install_dry_run({"controller": {"config": {"scanNotActiveBrokerInterval": 1000}}})
    docs = [d for d in yaml.safe_load_all(changed["manifest"]) if d]
    sts = next(
        d for d in docs if d["kind"] == "StatefulSet" and d["metadata"]["name"] == f"{RELEASE}-controller"
    )
    assert sts["spec"]["template"]["metadata"]["annotations"]["checksum/config"] != base["checksum/config"]


def test_notes_show_the_mqadmin_commands() -> None:
    r = rendered("five-controllers-three-groups")
    addr = ";".join(
        f"{RELEASE}-controller-{i}.{RELEASE}-controller-headless.{NAMESPACE}.svc:9878" for i in range(5)
    )
    assert f"export MQHA_A='{addr}'" in r.notes
    for command in ("getControllerMetaData", "getSyncStateSet", "getBrokerEpoch", "haStatus", "electMaster"):
        assert f'mqadmin {command} -a "$MQHA_A"' in r.notes, command
    for group in ("broker-a", "broker-b", "broker-c"):
        assert f"{group}: 2 replica(s)" in r.notes


# ------------------------------------------------------------------------------------------ run.sh


def _run_script(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "run.sh"
    script.write_text((CHART / "files" / "run.sh").read_text())
    template = tmp_path / "controller.conf"
    template.write_text("controllerDLegerPeers=n0-localhost:9878\n")
    return subprocess.run(
        ["sh", str(script), "true", str(template), *args],
        env={"PATH": os.environ["PATH"], "MQHA_RUNTIME_DIR": str(tmp_path / "rt"), **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MQHA_ADMIN_TOKEN": "abc\nbrokerIP1=evil"}, "adminAuthToken must be one line"),
        ({"MQHA_INIT_USER": "abc\n"}, "initAuthenticationUser must be one line"),
        ({"MQHA_RAFT_PASSWORD": " abcdefgh"}, "controllerRaftPassword must not start or end with whitespace"),
        ({"MQHA_INNER_CREDENTIALS": "abcdefgh\t"}, "must not start or end with whitespace"),
        ({"MQHA_NODE_ID_PREFIX": "n", "POD_NAME": "controller"}, "does not end in -<ordinal>"),
        ({"MQHA_NODE_ID_PREFIX": "n"}, "POD_NAME"),
        ({"MQHA_WAIT_FOR_HOST": "no-such-host.invalid", "MQHA_RESOLVE_TIMEOUT": "0"}, "does not resolve"),
    ],
)
def test_run_sh_refuses_what_would_break_the_config(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    done = _run_script(tmp_path, env)
    assert done.returncode != 0
    assert message in done.stderr


def test_run_sh_hands_secrets_over_unchanged(tmp_path: Path) -> None:
    """Java-properties would eat a backslash: run.sh escapes it, so quotes and backslashes survive."""
    token = 'a\\b\\"c=d:e#f!g\\'
    done = _run_script(tmp_path, {"MQHA_ADMIN_TOKEN": token, "MQHA_INNER_CREDENTIALS": OPS_CREDENTIALS})
    assert done.returncode == 0, done.stderr
    path = tmp_path / "rt" / "controller.conf"
    config = parse_properties(path.read_text())
    assert config["adminAuthToken"] == token
    assert config["innerClientAuthenticationCredentials"] == OPS_CREDENTIALS
    assert json.loads(config["innerClientAuthenticationCredentials"])["secretKey"] == 'q"uo\\te-12345'
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)
    assert oct((tmp_path / "rt").stat().st_mode & 0o777) == oct(0o700)


def test_run_sh_waits_for_a_resolvable_host(tmp_path: Path) -> None:
    done = _run_script(
        tmp_path, {"MQHA_WAIT_FOR_HOST": "localhost", "MQHA_NODE_ID_PREFIX": "n", "POD_NAME": "x-12"}
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "rt" / "controller.conf").read_text().endswith("controllerDLegerSelfId=n12\n")


def assert_probe_paths(c: dict[str, Any]) -> None:
    """Startup and liveness ask /livez (the process answers); readiness /healthz, which is 503 for a
    damaged node: as liveness, Kubernetes would restart it in a loop and mend nothing."""
    for probe, path in (
        ("startupProbe", "/livez"),
        ("livenessProbe", "/livez"),
        ("readinessProbe", "/healthz"),
    ):
        assert c[probe]["httpGet"] == {"path": path, "port": "http"}, probe
