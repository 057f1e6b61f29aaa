"""Broker API access decisions (``mqha.broker.auth``) and secret masking in ``-p`` output (no sockets)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mqha.broker import __main__ as broker_main
from mqha.broker.auth import BrokerAuth
from mqha.config import parse_properties, render_properties
from mqha.controller import __main__ as controller_main
from mqha.security.basic import basic_header
from mqha.security.credentials import MASK, User

CONF = Path(__file__).resolve().parents[3] / "conf"
USER = User("alice", "alice-password-1")
INNER = json.dumps({"accessKey": "brokers", "secretKey": "inner-secret-key-1"})
ON = {
    "authenticationEnabled": True,
    "initAuthenticationUser": json.dumps({"username": USER.username, "password": USER.password}),
    "adminAuthToken": "admin-token-12345",
}


@pytest.mark.parametrize(
    ("header", "allowed"),
    [
        (basic_header(USER), True),
        (None, False),
        ("", False),
        (basic_header(User("alice", "wrong-password")), False),
        (basic_header(User("mallory", USER.password)), False),
        ("Basic !!!", False),
        ("Bearer admin-token-12345", False),  # the admin token is no broker user
    ],
)
def test_client_routes_need_the_user_when_authentication_is_on(header: str | None, allowed: bool) -> None:
    denial = BrokerAuth(ON).check_client(header)
    assert (denial is None) is allowed
    if denial is not None:
        assert denial.status == 401 and USER.password not in denial.remark


def test_client_routes_are_open_with_authentication_off() -> None:
    auth = BrokerAuth({**ON, "authenticationEnabled": False})
    assert auth.check_client(None) is None and auth.users == ()


@pytest.mark.parametrize("enabled", [True, False])
def test_admin_routes_need_the_token_whenever_one_is_set(enabled: bool) -> None:
    auth = BrokerAuth({**ON, "authenticationEnabled": enabled})
    assert auth.check_admin("Bearer admin-token-12345") is None
    assert auth.check_admin(" bearer  admin-token-12345 ") is None
    assert auth.check_admin(None).status == 401  # type: ignore[union-attr]
    assert auth.check_admin(basic_header(USER)).status == 401  # type: ignore[union-attr]
    assert auth.check_admin("Bearer admin-token-1234").status == 403  # type: ignore[union-attr]
    assert BrokerAuth({"authenticationEnabled": enabled, "adminAuthToken": ""}).check_admin(None) is None


def _with(tmp_path: Path, name: str, extra: dict[str, str]) -> Path:
    values = parse_properties((CONF / name).read_text(encoding="utf-8"))
    conf = tmp_path / "node.conf"
    conf.write_text(render_properties({**values, **extra}))
    return conf


SECRETS = {
    "adminAuthToken": "admin-token-12345",
    "innerClientAuthenticationCredentials": INNER,
}


@pytest.mark.parametrize(
    ("name", "main", "extra"),
    [
        (
            "broker-standalone.conf",
            broker_main.main,
            {"initAuthenticationUser": str(ON["initAuthenticationUser"])},
        ),
        (
            "controller-cluster/controller-n0.conf",
            controller_main.main,
            {"controllerRaftPassword": "raft-password-123"},
        ),
    ],
)
def test_print_config_masks_every_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, main: Any, extra: dict[str, str]
) -> None:
    secrets = {**SECRETS, **extra}
    main(["-c", str(_with(tmp_path, name, {"authenticationEnabled": "true", **secrets})), "-p"])
    out = capsys.readouterr().out
    printed = parse_properties(out)
    assert printed["authenticationEnabled"] == "true"
    for key, secret in secrets.items():
        assert printed[key] == MASK
        assert secret not in out
    assert "inner-secret-key-1" not in out and USER.password not in out
