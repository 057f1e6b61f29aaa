"""TLS contexts from the ``tls.*`` keys (shell: reads certificate files).

One CA bundle (``tls.client.trustCertPath``) verifies every peer; servers present
``tls.server.certPath``/``keyPath``. Clients check the server's certificate chain; host names are not
checked because nodes are addressed by IP (the certificate proves membership of the cluster's CA).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any

from mqha.errors import ConfigError


def _load(key: str, action: Any) -> None:
    try:
        action()
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(key, f"cannot load: {exc}") from None


def server_context(values: Mapping[str, Any]) -> ssl.SSLContext | None:
    """The server side's context, or None without ``tlsEnable``."""
    if not values.get("tlsEnable"):
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load(
        "tls.server.certPath",
        lambda: context.load_cert_chain(values["tls.server.certPath"], values["tls.server.keyPath"]),
    )
    return context


def client_context(values: Mapping[str, Any]) -> ssl.SSLContext | None:
    """The client side's context (verifies the server against the CA), or None without ``tlsEnable``."""
    if not values.get("tlsEnable"):
        return None
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = False
    _load(
        "tls.client.trustCertPath", lambda: context.load_verify_locations(values["tls.client.trustCertPath"])
    )
    return context


def scheme(values: Mapping[str, Any]) -> str:
    """``https`` with ``tlsEnable``, else ``http``."""
    return "https" if values.get("tlsEnable") else "http"
