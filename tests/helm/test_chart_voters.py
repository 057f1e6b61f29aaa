"""The chart's controller voter-set upkeep (helm/mqha/README.md "Scaling controllers",
docs/architecture.md §6.2): bootstrap needs every pod of a first install to reach the others, and
`helm upgrade` keeps the Raft voter set in step with controller.replicas through two hook Jobs.

Upgrades are rendered by the real Helm engine against the stand-in API server of
``test_chart_auth`` (which also answers the chart's `lookup` of the controller StatefulSet). Each Job's
command is then run as its pod would run it, with a stand-in ``mqadmin`` on PATH that keeps a voter
set in a file, so the order and idempotence of the changes are checked, not only the YAML.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

helm = pytest.importorskip("helm_python", reason="helm-python-sdk (test extras) is not installed")
kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate (test extras) is not installed")

from tests.helm.test_chart import K8S_VERSIONS, NAMESPACE, RELEASE, controller_sts, rendered  # noqa: E402
from tests.helm.test_chart_auth import SECRET_NAME, _Cluster  # noqa: E402

ADD = f"Job/{RELEASE}-controller-add-voters"
REMOVE = f"Job/{RELEASE}-controller-remove-voters"


@pytest.fixture
def cluster() -> Iterator[_Cluster]:
    with _Cluster() as fake:
        yield fake


def jobs(objects: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The voter Jobs among ``objects``."""
    return {k: v for k, v in objects.items() if k.startswith("Job/") and k.endswith("-voters")}


def peer(ordinal: int) -> str:
    return f"{RELEASE}-controller-{ordinal}.{RELEASE}-controller-headless.{NAMESPACE}.svc:9878"


def env_of(job: dict[str, Any]) -> dict[str, Any]:
    (c,) = job["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c["env"]}


# ------------------------------------------------------------------------------ bootstrap and pods


@pytest.mark.parametrize("variant", ["default", "five-controllers-three-groups"])
def test_a_first_install_lets_every_blank_controller_reach_its_peers(variant: str) -> None:
    r = rendered(variant)
    sts = controller_sts(r)
    spec = sts["spec"]
    assert spec["podManagementPolicy"] == "Parallel"  # OrderedReady would wait for pod 0 to be ready
    headless = r.get("Service", spec["serviceName"])
    assert headless["spec"]["publishNotReadyAddresses"] is True  # peers answer before they are ready
    # A dropped ordinal's store holds an identity the voter set removed: scaling down deletes it.
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Delete"}


def test_without_persistence_there_is_no_claim_policy() -> None:
    spec = controller_sts(rendered("existing-secret-pod-dns-no-persistence"))["spec"]
    assert "persistentVolumeClaimRetentionPolicy" not in spec


# ------------------------------------------------------------------------------ the hook Jobs


def test_an_install_has_only_the_post_upgrade_job(cluster: _Cluster) -> None:
    objects = cluster.render({}, upgrade=False)
    assert set(jobs(objects)) == {ADD}
    assert objects[ADD]["metadata"]["annotations"]["helm.sh/hook"] == "post-upgrade"


def test_scaling_up_adds_and_scaling_down_removes_first(cluster: _Cluster) -> None:
    cluster.render({}, upgrade=False)
    up = jobs(cluster.render({"controller": {"replicas": 5}}, upgrade=True))
    assert set(up) == {ADD}  # nothing to remove when growing
    env = env_of(up[ADD])
    assert env["MQHA_REPLICAS"] == "5"
    assert env["MQHA_CONTROLLERS"] == ";".join(peer(i) for i in range(5))
    assert env["MQHA_PEER_ADDRESS"].replace("%d", "3") == peer(3)
    assert env["MQHA_ADMIN_TOKEN"] == {"secretKeyRef": {"name": SECRET_NAME, "key": "adminAuthToken"}}

    down = jobs(cluster.render({"controller": {"replicas": 3}}, upgrade=True))
    assert set(down) == {ADD, REMOVE}
    remove = down[REMOVE]
    assert remove["metadata"]["annotations"] == {
        "helm.sh/hook": "pre-upgrade",
        "helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded",
    }
    assert env_of(remove)["MQHA_REPLICAS"] == "3"
    assert env_of(remove)["MQHA_CONTROLLERS"] == ";".join(peer(i) for i in range(3))  # the ones kept
    # Same count again: only the (idempotent) post-upgrade Job.
    assert set(jobs(cluster.render({"controller": {"replicas": 3}}, upgrade=True))) == {ADD}


def test_the_jobs_validate_strictly_and_are_locked_down(cluster: _Cluster) -> None:
    cluster.render({"controller": {"replicas": 5}}, upgrade=False)
    found = jobs(cluster.render({"controller": {"replicas": 3}}, upgrade=True))
    for job in found.values():
        for version in K8S_VERSIONS:
            kv.validate(job, version, strict=True)
        pod = job["spec"]["template"]["spec"]
        assert pod["restartPolicy"] == "Never" and pod["automountServiceAccountToken"] is False
        assert pod["securityContext"]["runAsNonRoot"] is True
        (c,) = pod["containers"]
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        # Hook pods are not controllers: no Service or PodDisruptionBudget selects them.
        labels = job["spec"]["template"]["metadata"]["labels"]
        assert labels["app.kubernetes.io/component"] == "controller-voters"
        assert job["spec"]["activeDeadlineSeconds"] == 900


def test_an_existing_secret_or_no_token(cluster: _Cluster) -> None:
    token = {"existingSecret": "ops-mqha", "secretKey": "token"}
    objects = cluster.render({"auth": {"adminAuthToken": token}}, upgrade=True)
    assert env_of(objects[ADD])["MQHA_ADMIN_TOKEN"] == {"secretKeyRef": {"name": "ops-mqha", "key": "token"}}
    off = {"enabled": False, "adminAuthToken": {"enabled": False}}
    assert "MQHA_ADMIN_TOKEN" not in env_of(cluster.render({"auth": off}, upgrade=True)[ADD])
    assert not jobs(cluster.render({"controller": {"voterJobs": {"enabled": False}}}, upgrade=True))


# ------------------------------------------------------------------------------ running voters.sh

FAKE_MQADMIN = """\
import json, sys
from pathlib import Path

state = Path(sys.argv[0]).with_name("state.json")
s = json.loads(state.read_text())
command, args = sys.argv[1], sys.argv[2:]
s["calls"].append([command, *args])
peer = args[args.index("-p") + 1] if "-p" in args else None
code = 0
if command == "getControllerQuorum":
    print(json.dumps({"voters": [{"apiAddress": a} for a in s["voters"]], "observers": []}))
elif s["fail"].get(peer, 0) > 0:  # not reachable yet
    s["fail"][peer] -= 1
    code = 3
elif command == "addControllerPeer":
    s["voters"].append(peer)
elif command == "removeControllerPeer":
    s["voters"].remove(peer)
state.write_text(json.dumps(s))
sys.exit(code)
"""


def run_job(job: dict[str, Any], tmp: Path, voters: list[str], fail: dict[str, int]) -> dict[str, Any]:
    """Runs the Job's container command with a stand-in mqadmin; returns the final state."""
    return run_with_fake_mqadmin(job, tmp, FAKE_MQADMIN, {"voters": voters, "calls": [], "fail": fail}, {})


def run_with_fake_mqadmin(
    job: dict[str, Any], tmp: Path, fake_source: str, state: dict[str, Any], env: dict[str, str]
) -> dict[str, Any]:
    """Runs ``job``'s container command (its plain env values, then ``env``) with ``fake_source`` as
    mqadmin, which keeps ``state`` in a state.json beside it; the final state."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(parents=True)
    fake = bin_dir / "mqadmin"
    fake.write_text(f"#!{sys.executable}\n{fake_source}")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    (bin_dir / "state.json").write_text(json.dumps(state))
    (c,) = job["spec"]["template"]["spec"]["containers"]
    full = {k: v for k, v in env_of(job).items() if isinstance(v, str)} | env
    full |= {"PATH": f"{bin_dir}:{os.environ['PATH']}", "MQHA_RETRY_PAUSE": "0"}
    command = [sys.executable if c["command"][0] == "python3" else c["command"][0], *c["command"][1:]]
    done = subprocess.run(command, env=full, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    final: dict[str, Any] = json.loads((bin_dir / "state.json").read_text())
    return final


def changes(state: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c[0], c[c.index("-p") + 1]) for c in state["calls"] if c[0] != "getControllerQuorum"]


def test_the_add_job_adds_each_new_ordinal_once_in_order(cluster: _Cluster, tmp_path: Path) -> None:
    cluster.render({}, upgrade=False)
    job = cluster.render({"controller": {"replicas": 5}}, upgrade=True)[ADD]
    state = run_job(job, tmp_path, [peer(0), peer(1), peer(2)], fail={peer(4): 2})
    assert state["voters"] == [peer(i) for i in range(5)]
    # pod 4 not reachable the first two times: tried again; never an add of a voter.
    assert changes(state) == [("addControllerPeer", peer(3))] + [("addControllerPeer", peer(4))] * 3
    again = run_job(job, tmp_path / "again", [peer(i) for i in range(5)], fail={})
    assert changes(again) == []


def test_the_remove_job_removes_the_dropped_ordinals_highest_first(cluster: _Cluster, tmp_path: Path) -> None:
    cluster.render({"controller": {"replicas": 5}}, upgrade=False)
    job = cluster.render({"controller": {"replicas": 3}}, upgrade=True)[REMOVE]
    state = run_job(job, tmp_path, [peer(i) for i in range(5)], fail={})
    assert state["voters"] == [peer(0), peer(1), peer(2)]
    assert changes(state) == [("removeControllerPeer", peer(4)), ("removeControllerPeer", peer(3))]
