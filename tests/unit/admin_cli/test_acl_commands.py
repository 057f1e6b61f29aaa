"""mqadmin's ACL commands: RocketMQ's options become the controllers' bodies, a typo fails before
anything is sent, and the tables never show a password."""

from __future__ import annotations

import pytest

from mqha.admin_cli.commands import acl
from mqha.admin_cli.commands.calls import Answer
from mqha.admin_cli.commands.failures import UsageError
from mqha.admin_cli.commands.table import COMMANDS


def test_options_are_rocketmq_s_with_the_controllers_on_n() -> None:
    flags = {o.flags[0]: o.dest for o in COMMANDS["createAcl"].options}
    assert flags == {
        "-n": "controllerAddress",
        "-c": "clusterName",
        "-s": "subject",
        "-r": "resources",
        "-a": "actions",
        "-d": "decision",
        "-i": "sourceIp",
    }
    assert {o.flags[0] for o in COMMANDS["createUser"].options} == {"-n", "-c", "-u", "-p", "-t"}
    for name in (
        "updateUser",
        "deleteUser",
        "getUser",
        "listUser",
        "updateAcl",
        "deleteAcl",
        "getAcl",
        "listAcl",
    ):
        assert COMMANDS[name].options[0].flags == ("-n", "--controllerAddress")


def test_calls_carry_checked_normalised_values() -> None:
    call = acl.put_acl_call(
        "createAcl",
        subject="User:app",
        resources="topic:A, Group:G*",
        actions="sub,pub",
        decision="allow",
        source_ips="10.0.0.1",
    )
    assert (call.method, call.path, call.write) == ("POST", "/v1/acl/policies/create", True)
    assert call.body == {
        "subject": "User:app",
        "resources": ["Topic:A", "Group:G*"],
        "actions": ["Pub", "Sub"],
        "decision": "Allow",
        "sourceIps": ["10.0.0.1/32"],
    }
    assert acl.user_call("createUser", "app", "pw-12345678", "normal").body == {
        "username": "app",
        "password": "pw-12345678",
        "userType": "Normal",
    }
    assert acl.delete_acl_call("User:app", None).body == {"subject": "User:app"}
    assert (
        acl.list_acls_call("User:app", "Topic:A").path
        == "/v1/acl/policies?subject=User%3Aapp&resource=Topic%3AA"
    )
    for bad in (
        lambda: acl.put_acl_call(
            "createAcl",
            subject="User:app",
            resources="Queue:A",
            actions="Pub",
            decision="Allow",
            source_ips=None,
        ),
        lambda: acl.put_acl_call(
            "createAcl",
            subject="User:app",
            resources="Topic:A",
            actions="Publish",
            decision="Allow",
            source_ips=None,
        ),
        lambda: acl.user_call("createUser", "app", "pw", "Admin"),
    ):
        with pytest.raises(UsageError):
            bad()


def test_tables() -> None:
    users = acl.users_of(Answer("a", 200, 0, "", {"users": [{"username": "app", "userType": "Normal"}]}))
    assert acl.format_users(users) == "#UserName  #UserType\napp        Normal\n"
    answer = Answer(
        "a",
        200,
        0,
        "",
        {
            "acls": [
                {
                    "subject": "User:app",
                    "entries": [
                        {
                            "resource": "Topic:A",
                            "actions": ["Pub", "Sub"],
                            "sourceIps": [],
                            "decision": "Allow",
                        }
                    ],
                }
            ]
        },
    )
    text = acl.format_acls(acl.acls_of(answer))
    assert text.splitlines()[1].split() == ["User:app", "Topic:A", "Pub,Sub", "*", "Allow"]
