"""TLS contexts from the ``tls.*`` keys (shell: reads certificate files). docs/architecture.md §12.5.

One CA bundle (``tls.client.trustCertPath``) verifies every peer; servers present
``tls.server.certPath``/``keyPath``. Clients check the server's certificate chain; host names (or IP
addresses) are checked against the certificate's subjectAltName only with ``tls.client.verifyHostname``:
nodes are addressed by IP, and in Kubernetes those change, so by default the chain alone proves
membership of the cluster's CA (as RocketMQ's Netty clients do).
A file that cannot be used ends in one ``ConfigError`` naming its key.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any

from mqha.errors import ConfigError

CERT_KEY = "tls.server.certPath"
PRIVATE_KEY_KEY = "tls.server.keyPath"
TRUST_KEY = "tls.client.trustCertPath"
VERIFY_HOSTNAME_KEY = "tls.client.verifyHostname"


def _read_pem(key: str, path: str, marker: str, what: str) -> None:
    """Name the key of a file that is missing, unreadable or not the PEM it should be."""
    try:
        with open(path, "rb") as handle:
            text = handle.read()
    except OSError as exc:
        raise ConfigError(key, f"cannot read {path}: {exc.strerror or exc}") from None
    if marker.encode() not in text:
        raise ConfigError(key, f"{path} holds no PEM {what}")


def server_context(values: Mapping[str, Any]) -> ssl.SSLContext | None:
    """The server side's context, or None without ``tlsEnable``."""
    if not values.get("tlsEnable"):
        return None
    cert, key = values.get(CERT_KEY) or "", values.get(PRIVATE_KEY_KEY) or ""
    _read_pem(CERT_KEY, cert, "-----BEGIN CERTIFICATE-----", "certificate")
    _read_pem(PRIVATE_KEY_KEY, key, "PRIVATE KEY-----", "private key")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        mismatch = "KEY_VALUES_MISMATCH" in str(exc) or "key values mismatch" in str(exc)
        if mismatch:
            raise ConfigError(PRIVATE_KEY_KEY, f"{key} is not the key of {CERT_KEY} {cert}") from None
        raise ConfigError(CERT_KEY, f"cannot load {cert} with {key}: {exc}") from None
    return context


def trust_context(ca_path: str, *, verify_hostname: bool = False, key: str = TRUST_KEY) -> ssl.SSLContext:
    """A client context that trusts only the CA bundle ``ca_path`` (for clients and mqadmin too)."""
    _read_pem(key, ca_path, "-----BEGIN CERTIFICATE-----", "CA certificate")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies the chain; no system CAs
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = verify_hostname
    try:
        context.load_verify_locations(ca_path)
    except ssl.SSLError as exc:
        raise ConfigError(key, f"cannot load {ca_path}: {exc}") from None
    return context


def client_context(values: Mapping[str, Any]) -> ssl.SSLContext | None:
    """The client side's context (verifies the server against the CA), or None without ``tlsEnable``."""
    if not values.get("tlsEnable"):
        return None
    return trust_context(values.get(TRUST_KEY) or "", verify_hostname=bool(values.get(VERIFY_HOSTNAME_KEY)))


def check_tls_files(values: Mapping[str, Any]) -> None:
    """Start-up check: with ``tlsEnable`` both contexts can be built (else a ``ConfigError``)."""
    server_context(values)
    client_context(values)


def scheme_of(context: ssl.SSLContext | None) -> str:
    """``https`` when a client has a TLS context, else ``http``."""
    return "http" if context is None else "https"
