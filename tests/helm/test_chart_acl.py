"""The chart's ACL hook Job (helm/mqha/templates/acl-job.yaml, files/acl_users.py): after install and
upgrade it puts the admin user, the users of a Secret and the policies of the values into the
controllers' book with mqadmin. Rendered by the real Helm engine; the Job's command is then run here
with a stand-in mqadmin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

helm = pytest.importorskip("helm_python", reason="helm-python-sdk (test extras) is not installed")

from tests.helm.test_chart import RELEASE  # noqa: E402
from tests.helm.test_chart_auth import SECRET_NAME, _Cluster  # noqa: E402
from tests.helm.test_chart_voters import env_of, run_with_fake_mqadmin  # noqa: E402

JOB = f"Job/{RELEASE}-acl"
ADMIN = {"username": "mqha", "password": "admin-password-0001"}
USERS = [
    {"username": "app", "password": "app-password-0001"},
    {"username": "ops", "password": "ops-password-0001", "userType": "Super"},
]
POLICIES = [
    {"subject": "User:app", "resources": ["Topic:orders", "Group:billing"], "actions": ["Pub", "Sub"]},
    {
        "subject": "User:app",
        "resources": ["Topic:audit"],
        "actions": ["Pub"],
        "decision": "Deny",
        "sourceIps": ["10.0.0.0/8"],
    },
]


@pytest.fixture
def cluster() -> Iterator[_Cluster]:
    with _Cluster() as fake:
        yield fake


def test_the_job_gets_the_admin_user_the_users_secret_and_the_policies(cluster: _Cluster) -> None:
    values = {"acl": {"users": {"existingSecret": "app-users", "secretKey": "u.json"}, "policies": POLICIES}}
    job = cluster.render(values, upgrade=False)[JOB]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade"
    env = env_of(job)
    assert env["MQHA_ACL_USERS"] == {"secretKeyRef": {"name": "app-users", "key": "u.json"}}
    assert env["MQHA_INIT_USER"] == {"secretKeyRef": {"name": SECRET_NAME, "key": "initAuthenticationUser"}}
    assert env["MQHA_ADMIN_TOKEN"] == {"secretKeyRef": {"name": SECRET_NAME, "key": "adminAuthToken"}}
    assert json.loads(env["MQHA_ACL_POLICIES"]) == POLICIES
    assert env["MQHA_CLUSTER"] == "DefaultCluster"
    assert "MQHA_RAFT_PASSWORD" not in env and "MQHA_INNER_CREDENTIALS" not in env  # what it needs only
    assert "MQHA_ACL_USERS" not in env_of(cluster.render({}, upgrade=True)[JOB])  # no Secret: the admin only
    off = {"enabled": False, "adminAuthToken": {"enabled": False}}
    assert JOB not in cluster.render({"auth": off}, upgrade=True)
    assert JOB not in cluster.render({"acl": {"job": {"enabled": False}}}, upgrade=True)


def test_a_policy_outside_the_schema_stops_the_install(cluster: _Cluster) -> None:
    bad = {"acl": {"policies": [{"subject": "app", "resources": ["Topic:a"], "actions": ["Publish"]}]}}
    with pytest.raises(Exception, match=r"subject|actions"):
        cluster.render(bad, upgrade=False)


FAKE_MQADMIN = """\
import json, sys
from pathlib import Path

state = Path(sys.argv[0]).with_name("state.json")
s = json.loads(state.read_text())
command, args = sys.argv[1], sys.argv[2:]
s["calls"].append([command, *args])
code = 0
if s["down"] > 0:  # the controllers are still starting
    s["down"] -= 1
    code = 3
elif command == "createUser":
    name = args[args.index("-u") + 1]
    if name in s["users"]:
        print("CODE: 2005 user exists", file=sys.stderr)
        code = 1
    else:
        s["users"][name] = args[args.index("-t") + 1]
elif command == "updateUser":
    s["users"][args[args.index("-u") + 1]] = args[args.index("-t") + 1]
state.write_text(json.dumps(s))
sys.exit(code)
"""


def run_job(job: dict[str, Any], tmp: Path, env: dict[str, str], users: dict[str, str], down: int) -> Any:
    """Runs the Job's container command with a stand-in mqadmin; the final state."""
    state = {"users": users, "calls": [], "down": down}
    return run_with_fake_mqadmin(job, tmp, FAKE_MQADMIN, state, env | {"MQHA_ADMIN_TOKEN": "t" * 16})


def test_the_job_creates_or_updates_each_user_then_applies_each_policy(
    cluster: _Cluster, tmp_path: Path
) -> None:
    job = cluster.render({"acl": {"policies": POLICIES}}, upgrade=False)[JOB]
    env = {"MQHA_INIT_USER": json.dumps(ADMIN), "MQHA_ACL_USERS": json.dumps(USERS)}
    state = run_job(job, tmp_path, env, users={"ops": "Normal"}, down=2)
    assert state["users"] == {"mqha": "Super", "app": "Normal", "ops": "Super"}  # ops existed: updated
    acls = [c for c in state["calls"] if c[0] == "createAcl"]
    assert acls[0][acls[0].index("-s") + 1 :] == [
        "User:app",
        "-r",
        "Topic:orders,Group:billing",
        "-a",
        "Pub,Sub",
        "-d",
        "Allow",
    ]
    assert acls[1][acls[1].index("-s") + 1 :] == [
        "User:app",
        "-r",
        "Topic:audit",
        "-a",
        "Pub",
        "-d",
        "Deny",
        "-i",
        "10.0.0.0/8",
    ]
    assert all(c[c.index("-c") + 1] == "DefaultCluster" for c in state["calls"])
    again = run_job(job, tmp_path / "again", env, users=state["users"], down=0)
    assert again["users"] == state["users"]  # a second run changes nothing


def test_a_users_secret_that_is_not_a_list_of_users_fails_the_job_with_one_line(
    cluster: _Cluster, tmp_path: Path
) -> None:
    job = cluster.render({}, upgrade=False)[JOB]
    (c,) = job["spec"]["template"]["spec"]["containers"]
    env = {"PATH": os.environ["PATH"], "MQHA_ACL_USERS": json.dumps([{"username": "x"}])}
    done = subprocess.run(
        [sys.executable, *c["command"][1:]],
        env=env | {"MQHA_CONTROLLERS": "c", "MQHA_CLUSTER": "k"},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 1 and "needs a username and a password" in done.stderr
