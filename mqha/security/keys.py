"""The security config keys both controllers and brokers accept (RocketMQ 5.3 names where they exist)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mqha.config import Key
from mqha.errors import ConfigError
from mqha.security.credentials import check_authentication_keys
from mqha.security.tls import check_tls_files

AUTHENTICATION_KEYS = (
    Key("authenticationEnabled", bool, False, "require proof of identity on every mutating path"),
    Key(
        "innerClientAuthenticationCredentials",
        str,
        "",
        'JSON {"accessKey": ..., "secretKey": ...} that brokers and controllers prove to each other',
    ),
    Key("adminAuthToken", str, "", "bearer token required by admin calls when set", rocketmq=False),
)
BROKER_USER_KEYS = (
    Key(
        "initAuthenticationUser",
        str,
        "",
        'JSON {"username": ..., "password": ...}: the HTTP Basic user of puts and reads',
    ),
)
TLS_KEYS = (
    Key("tlsEnable", bool, False, "TLS on the HTTP API and the HA port"),
    Key("tls.server.certPath", str, "", "PEM certificate chain this node serves"),
    Key("tls.server.keyPath", str, "", "PEM private key of tls.server.certPath"),
    Key("tls.client.trustCertPath", str, "", "PEM CA bundle that peers' certificates must chain to"),
    Key("tls.client.verifyHostname", bool, False, "also check the peer's host or IP against its certificate"),
)


def check_security_keys(values: Mapping[str, Any], required: tuple[str, ...]) -> None:
    """Start-up checks of the security keys; raises ``ConfigError`` naming the key."""
    check_authentication_keys(values, required)
    if values.get("tlsEnable"):
        for key in ("tls.server.certPath", "tls.server.keyPath", "tls.client.trustCertPath"):
            if not values.get(key):
                raise ConfigError(key, "required when tlsEnable=true")
        check_tls_files(values)
