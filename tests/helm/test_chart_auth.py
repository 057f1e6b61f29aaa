"""The chart's security defaults (helm/mqha/README.md "Security"): authentication on, generated secrets
kept across upgrades, the operator told how to read them.

Upgrades are rendered by the real Helm engine against a stand-in Kubernetes API server on 127.0.0.1
that answers the chart's `lookup` of its Secret (discovery of /api/v1 and one GET), so the reuse of
generated secrets is exercised as `helm upgrade` does it, not only reasoned about.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

helm = pytest.importorskip("helm_python", reason="helm-python-sdk (test extras) is not installed")
yaml = pytest.importorskip("yaml")

from mqha.admin_cli.commands.failures import TOKEN_ENV  # noqa: E402
from mqha.broker.config import load_broker_config  # noqa: E402
from mqha.config import parse_properties  # noqa: E402
from mqha.controller.config import load_controller_config  # noqa: E402
from mqha.security.credentials import parse_inner_credentials, parse_user  # noqa: E402
from tests.helm.test_chart import (  # noqa: E402
    AUTH_ITEMS,
    CHART,
    NAMESPACE,
    RELEASE,
    Rendered,
    _console_script,
    broker_sts,
    container,
    controller_sts,
    install_dry_run,
    rendered,
    start_pod,
)

SECRET_NAME = f"{RELEASE}-auth"
GENERATED = re.compile(r"[A-Za-z0-9]{32}")


def _stored(r: Rendered) -> dict[str, str]:
    """The chart Secret's data, decoded."""
    return {key: value for (name, key), value in r.secrets().items() if name == SECRET_NAME}


# ------------------------------------------------------------------------ defaults: authentication on


def test_default_turns_authentication_on_with_generated_secrets(tmp_path: Path) -> None:
    r = rendered("default")
    stored = _stored(r)
    assert set(stored) == set(AUTH_ITEMS)
    assert GENERATED.fullmatch(stored["adminAuthToken"])
    assert GENERATED.fullmatch(stored["controllerRaftPassword"])
    inner = parse_inner_credentials(stored["innerClientAuthenticationCredentials"])
    assert inner.access_key == "mqha-inner" and GENERATED.fullmatch(inner.secret_key)
    user = parse_user(stored["initAuthenticationUser"])
    assert user.username == "mqha" and GENERATED.fullmatch(user.password)
    assert (
        len({stored["adminAuthToken"], stored["controllerRaftPassword"], inner.secret_key, user.password})
        == 4
    )

    path, _, _ = start_pod(r, controller_sts(r), 0, tmp_path)
    controller = load_controller_config(str(path))  # refuses authenticationEnabled without its secrets
    assert controller["authenticationEnabled"] is True
    assert controller["adminAuthToken"] == stored["adminAuthToken"]
    assert controller["controllerRaftPassword"] == stored["controllerRaftPassword"]
    (sts,) = broker_sts(r)
    path, _, _ = start_pod(r, sts, 0, tmp_path)
    broker = load_broker_config(str(path))
    assert broker["authenticationEnabled"] is True
    assert broker["initAuthenticationUser"] == stored["initAuthenticationUser"]
    # controllers and brokers prove the same credentials to each other
    assert (
        broker["innerClientAuthenticationCredentials"]
        == controller["innerClientAuthenticationCredentials"]
        == stored["innerClientAuthenticationCredentials"]
    )


@pytest.mark.parametrize("variant", ["default", "auth-off"])
def test_the_real_processes_start_with_authentication(variant: str, tmp_path: Path) -> None:
    r = rendered(variant)
    enabled = str(r.values["auth"]["enabled"]).lower()
    _, done, _ = start_pod(r, controller_sts(r), 0, tmp_path, _console_script("mqcontroller"), "-p")
    assert parse_properties(done.stdout)["authenticationEnabled"] == enabled
    (sts,) = broker_sts(r)
    _, done, _ = start_pod(r, sts, 0, tmp_path, _console_script("mqbroker"), "-p")
    assert parse_properties(done.stdout)["authenticationEnabled"] == enabled


def test_turning_authentication_off_keeps_the_admin_token_and_raft_password(tmp_path: Path) -> None:
    r = rendered("auth-off")
    assert set(_stored(r)) == {"adminAuthToken", "controllerRaftPassword"}
    path, _, _ = start_pod(r, controller_sts(r), 0, tmp_path)
    config = load_controller_config(str(path))
    assert config["authenticationEnabled"] is False
    assert config["innerClientAuthenticationCredentials"] == ""
    assert config["controllerRaftPassword"] == _stored(r)["controllerRaftPassword"]
    assert "WARNING: auth.enabled=false" in r.notes
    assert "WARNING: auth.enabled=false" not in rendered("default").notes
    for warning in ("auth.adminAuthToken.enabled=false", "auth.controllerRaftPassword.enabled=false"):
        assert warning in rendered("no-secrets-at-all").notes
        assert warning not in r.notes


def test_every_install_generates_its_own_secrets() -> None:
    first, second = (Rendered({}, install_dry_run({}), rendered("default").values) for _ in range(2))
    for key in AUTH_ITEMS:
        assert _stored(first)[key] != _stored(second)[key], key


def test_given_values_are_stored_as_given() -> None:
    values = {
        "auth": {
            "adminAuthToken": {"value": "given-token-1"},
            "initAuthenticationUser": {"value": '{"username": "app", "password": "app-password"}'},
        }
    }
    r = Rendered(values, install_dry_run(values), rendered("default").values)
    stored = _stored(r)
    assert stored["adminAuthToken"] == "given-token-1"
    assert stored["initAuthenticationUser"] == '{"username": "app", "password": "app-password"}'
    assert GENERATED.fullmatch(stored["controllerRaftPassword"])


# ------------------------------------------------------------------ upgrades: `lookup` of the Secret


class _FakeKubeApi(BaseHTTPRequestHandler):
    """Answers the requests of the chart's Helm `lookup`s (its Secret, the controller StatefulSet):
    discovery of the group version and a GET by name."""

    secrets: dict[str, dict[str, Any]]  # name -> Secret object in namespace NAMESPACE
    statefulsets: dict[str, dict[str, Any]]  # name -> StatefulSet object in namespace NAMESPACE
    paths: list[str]

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        self.paths.append(path)
        prefix = f"/api/v1/namespaces/{NAMESPACE}/secrets/"
        sts_prefix = f"/apis/apps/v1/namespaces/{NAMESPACE}/statefulsets/"
        if path == "/api/v1":
            resource = {"name": "secrets", "singularName": "secret", "namespaced": True, "kind": "Secret"}
            body, status = {"kind": "APIResourceList", "groupVersion": "v1", "resources": [resource]}, 200
        elif path == "/apis/apps/v1":
            resource = {
                "name": "statefulsets",
                "singularName": "statefulset",
                "namespaced": True,
                "kind": "StatefulSet",
            }
            body, status = (
                {"kind": "APIResourceList", "groupVersion": "apps/v1", "resources": [resource]},
                200,
            )
        elif path.startswith(prefix) and path[len(prefix) :] in self.secrets:
            body, status = self.secrets[path[len(prefix) :]], 200
        elif path.startswith(sts_prefix) and path[len(sts_prefix) :] in self.statefulsets:
            body, status = self.statefulsets[path[len(sts_prefix) :]], 200
        else:
            body = {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "reason": "NotFound",
                "code": 404,
            }
            status = 404
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Cluster:
    """A stand-in API server and the Helm config that renders against it."""

    def __init__(self) -> None:
        self.secrets: dict[str, dict[str, Any]] = {}
        self.statefulsets: dict[str, dict[str, Any]] = {}
        self.paths: list[str] = []
        handler = type(
            "Handler",
            (_FakeKubeApi,),
            {"secrets": self.secrets, "statefulsets": self.statefulsets, "paths": self.paths},
        )
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        host, port = self.server.server_address[:2]
        self.kubeconfig = yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": f"http://{host}:{port}"}}],
                "users": [{"name": "fake", "user": {"token": "test"}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
                "current-context": "fake",
            }
        )

    def render(self, values: dict[str, Any], *, upgrade: bool) -> dict[str, dict[str, Any]]:
        """Renders like `helm install/upgrade` (lookup answered by this server); applies the Secret."""
        with (
            helm.Config(
                kubeconfig_content=self.kubeconfig, namespace=NAMESPACE, storage_driver="memory"
            ) as config,
            helm.Chart.load(str(CHART)) as chart,
        ):
            manifests = config.render(
                chart, values, name=RELEASE, namespace=NAMESPACE, is_install=not upgrade, is_upgrade=upgrade
            )
        docs = [
            d
            for path, text in manifests.items()
            if path.endswith(".yaml")  # not NOTES.txt
            for d in yaml.safe_load_all(text)
            if d
        ]
        for doc in docs:  # what the API server then holds (hooks are not applied)
            if doc["kind"] == "Secret":
                self.secrets[doc["metadata"]["name"]] = doc
            elif doc["kind"] == "StatefulSet":
                self.statefulsets[doc["metadata"]["name"]] = doc
        return {f"{d['kind']}/{d['metadata']['name']}": d for d in docs}

    def stored(self) -> dict[str, str]:
        data = self.secrets.get(SECRET_NAME, {}).get("data", {})
        return {key: base64.b64decode(value).decode() for key, value in data.items()}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def __enter__(self) -> _Cluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@pytest.fixture
def cluster() -> Iterator[_Cluster]:
    fake = _Cluster()
    try:
        yield fake
    finally:
        fake.close()


def test_upgrades_keep_the_generated_secrets(cluster: _Cluster) -> None:
    cluster.render({}, upgrade=False)
    installed = cluster.stored()
    assert set(installed) == set(AUTH_ITEMS)
    assert f"/api/v1/namespaces/{NAMESPACE}/secrets/{SECRET_NAME}" in cluster.paths, "the chart looks it up"
    cluster.render({"controller": {"config": {"scanNotActiveBrokerInterval": 3000}}}, upgrade=True)
    assert cluster.stored() == installed
    cluster.render({}, upgrade=True)
    assert cluster.stored() == installed


def test_an_upgrade_takes_new_values_and_keeps_the_rest(cluster: _Cluster) -> None:
    cluster.render({"auth": {"enabled": False}}, upgrade=False)
    before = cluster.stored()
    assert set(before) == {"adminAuthToken", "controllerRaftPassword"}
    # turning authentication on later generates the credentials and the user, keeps the others
    cluster.render({}, upgrade=True)
    after = cluster.stored()
    assert set(after) == set(AUTH_ITEMS)
    assert {k: after[k] for k in before} == before
    # rotation: a given value replaces the stored one; the rest stay
    objects = cluster.render({"auth": {"adminAuthToken": {"value": "rotated-token"}}}, upgrade=True)
    rotated = cluster.stored()
    assert rotated == {**after, "adminAuthToken": "rotated-token"}
    env = {e["name"]: e for e in container(objects[f"StatefulSet/{RELEASE}-controller"])["env"]}
    assert env[TOKEN_ENV]["valueFrom"]["secretKeyRef"] == {"name": SECRET_NAME, "key": "adminAuthToken"}


def test_an_existing_secret_replaces_the_chart_one(cluster: _Cluster) -> None:
    values = {
        "auth": {
            key: {"existingSecret": "ops", "secretKey": key}
            for key in ("adminAuthToken", "controllerRaftPassword", "initAuthenticationUser")
        }
        | {"innerClientAuthenticationCredentials": {"existingSecret": "ops", "secretKey": "inner"}}
    }
    objects = cluster.render(values, upgrade=False)
    assert not [name for name in objects if name.startswith("Secret/")]
    for name, obj in objects.items():
        if name.startswith("StatefulSet/"):
            refs = [
                e["valueFrom"]["secretKeyRef"]
                for e in container(obj)["env"]
                if "secretKeyRef" in e.get("valueFrom", {})
            ]
            assert refs and all(ref["name"] == "ops" for ref in refs)


# ---------------------------------------------------------------------------- telling the operator


def test_notes_tell_how_to_read_the_secrets_and_pass_the_token() -> None:
    notes = rendered("default").notes
    assert f"get secret {SECRET_NAME} -o jsonpath='{{.data.adminAuthToken}}' | base64 -d" in notes
    assert f"get secret {SECRET_NAME} -o jsonpath='{{.data.initAuthenticationUser}}' | base64 -d" in notes
    assert '--token "$TOKEN"' in notes
    assert TOKEN_ENV in notes  # the variable mqadmin reads and the pods have
    notes = rendered("existing-secret-pod-dns-no-persistence").notes
    assert "get secret ops-mqha -o jsonpath='{.data.token}' | base64 -d" in notes
    dotted = install_dry_run(
        {"auth": {"adminAuthToken": {"existingSecret": "ops", "secretKey": "admin.token"}}}
    )
    assert "jsonpath='{.data.admin\\.token}'" in dotted["notes"]


def test_the_pods_hand_mqadmin_the_token_it_reads() -> None:
    """NOTES says `kubectl exec ... mqadmin electMaster` works as is: the pods carry TOKEN_ENV."""
    r = rendered("default")
    for sts in r.of_kind("StatefulSet"):
        assert TOKEN_ENV in {e["name"] for e in container(sts)["env"]}
        probes = [container(sts)[p] for p in ("startupProbe", "livenessProbe", "readinessProbe")]
        # /livez and /healthz stay open: probes carry no credentials
        assert all(
            p["httpGet"]["path"] in ("/livez", "/healthz") and "httpHeaders" not in p["httpGet"]
            for p in probes
        )
