"""The credentials a local cluster's tools send to its brokers, from its settings (no IO)."""

from __future__ import annotations

import json

from mqha.cluster.client_auth import admin_headers, broker_user, client_headers
from mqha.security.basic import check_basic
from mqha.security.credentials import User

USER = User("alice", "alice-password-1")
SETTINGS = {
    "initAuthenticationUser": json.dumps({"username": USER.username, "password": USER.password}),
    "adminAuthToken": "admin-token-12345",
}


def test_a_configured_user_and_token_are_sent() -> None:
    assert broker_user(SETTINGS) == USER
    assert check_basic(client_headers(SETTINGS)["Authorization"], [USER]) is None
    assert admin_headers(SETTINGS) == {"Authorization": "Bearer admin-token-12345"}


def test_nothing_is_sent_without_secrets() -> None:
    for settings in ({}, {"initAuthenticationUser": "", "adminAuthToken": ""}):
        assert broker_user(settings) is None
        assert client_headers(settings) == {} and admin_headers(settings) == {}
