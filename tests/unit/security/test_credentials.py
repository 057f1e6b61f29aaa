"""Secrets of the config: parsing with one-line errors naming the key, masking, HTTP Basic, HA proofs."""

from __future__ import annotations

import pytest

from mqha.errors import ConfigError
from mqha.security.basic import basic_header, check_basic
from mqha.security.credentials import (
    MASK,
    User,
    check_authentication_keys,
    is_placeholder,
    masked,
    parse_inner_credentials,
    parse_user,
    render_inner_credentials,
)
from mqha.security.ha_proof import master_proof, proof_matches, slave_proof

INNER = '{"accessKey": "broker", "secretKey": "0123456789abcdef"}'
USER = '{"username": "app", "password": "pa55word-long"}'


def test_credentials_round_trip() -> None:
    creds = parse_inner_credentials(INNER)
    assert (creds.access_key, creds.secret_key) == ("broker", "0123456789abcdef")
    assert parse_inner_credentials(render_inner_credentials(creds)) == creds
    assert parse_user(USER) == User("app", "pa55word-long")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        "[]",
        '{"accessKey": "a"}',
        '{"accessKey": "a", "secretKey": "0123456789", "x": 1}',
        '{"accessKey": "", "secretKey": "0123456789"}',
        '{"accessKey": "a:b", "secretKey": "0123456789"}',
        '{"accessKey": 1, "secretKey": "0123456789"}',
        '{"accessKey": "a", "secretKey": "short"}',
    ],
)
def test_bad_credentials_name_the_key_and_hide_the_secret(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_inner_credentials(text)
    assert info.value.key == "innerClientAuthenticationCredentials"
    assert "0123456789" not in str(info.value)
    assert "\n" not in str(info.value)


def test_authentication_on_requires_the_keys() -> None:
    keys = ("innerClientAuthenticationCredentials", "adminAuthToken")
    check_authentication_keys({"authenticationEnabled": False}, keys)
    with pytest.raises(ConfigError) as info:
        check_authentication_keys({"authenticationEnabled": True, "adminAuthToken": "long-enough"}, keys)
    assert info.value.key == "innerClientAuthenticationCredentials"
    with pytest.raises(ConfigError) as info:
        check_authentication_keys(
            {
                "authenticationEnabled": True,
                "innerClientAuthenticationCredentials": INNER,
                "adminAuthToken": "x",
            },
            keys,
        )
    assert info.value.key == "adminAuthToken"


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("adminAuthToken", "CHANGE-ME-admin-token"),
        ("controllerRaftPassword", "change_me_please"),
        ("adminAuthToken", "<admin token>"),
        ("adminAuthToken", "${MQHA_ADMIN_TOKEN}"),
        ("innerClientAuthenticationCredentials", '{"accessKey": "a", "secretKey": "CHANGE-ME-inner-secret"}'),
        ("initAuthenticationUser", '{"username": "app", "password": "Replace.Me.Now"}'),
    ],
)
def test_placeholder_secrets_are_refused_naming_the_key(key: str, text: str) -> None:
    """conf/ ships CHANGE-ME values: whatever authenticationEnabled says, a process refuses them."""
    for enabled in (False, True):
        with pytest.raises(ConfigError) as caught:
            check_authentication_keys({"authenticationEnabled": enabled, key: text}, ())
        message = str(caught.value)
        assert f"'{key}'" in message and "placeholder" in message and "\n" not in message
        secret = text.rsplit('": "', maxsplit=1)[-1].rstrip('"}')
        assert secret not in message


def test_real_secrets_are_not_placeholders() -> None:
    for secret in ("0123456789abcdef", "pa55word-long", "c" * 48, "exchange-mechanic-88"):
        assert not is_placeholder(secret)
    enabled = {"authenticationEnabled": True, "innerClientAuthenticationCredentials": INNER}
    check_authentication_keys(enabled, ())


def test_masking_hides_set_secrets_only() -> None:
    shown = masked({"adminAuthToken": "t0ken-value", "controllerRaftPassword": "", "listenPort": 1})
    assert shown == {"adminAuthToken": MASK, "controllerRaftPassword": "", "listenPort": 1}


def test_basic_auth() -> None:
    users = [parse_user(USER)]
    assert check_basic(basic_header(users[0]), users) is None
    assert check_basic(basic_header(User("app", "wrong-password")), users).status == 401
    assert check_basic(None, users).status == 401
    assert check_basic("Basic !!!", users).remark == "malformed HTTP Basic credentials"
    assert check_basic("Basic YXBw", users).remark == "malformed HTTP Basic credentials"  # "app", no colon


def test_ha_proofs_bind_role_challenges_and_id() -> None:
    m, s = b"m" * 32, b"s" * 32
    proof = slave_proof("secret-key", m, s, 2)
    assert proof_matches(proof, slave_proof("secret-key", m, s, 2))
    assert not proof_matches(proof, slave_proof("secret-key", m, s, 3))
    assert not proof_matches(proof, slave_proof("other-key", m, s, 2))
    assert not proof_matches(proof, master_proof("secret-key", m, s))
