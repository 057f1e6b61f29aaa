"""The secrets of a secure local cluster: generated once, kept in the run directory's ``cluster.json``.

``mqha cluster up`` and the demo turn authentication on (docs/architecture.md §12): every node gets
``authenticationEnabled=true``, one ``innerClientAuthenticationCredentials`` pair shared by controllers and
brokers, an ``adminAuthToken``, and the brokers' ``initAuthenticationUser``; controllers also get a
``controllerRaftPassword``. The cluster's own tools read them back from the settings
(``mqha.cluster.client_auth``).
"""

from __future__ import annotations

import secrets

from mqha.security.credentials import InnerCredentials, User, render_inner_credentials, render_user

ACCESS_KEY = "mqha-inner"
USERNAME = "mqha"


def _secret() -> str:
    # 192 bits in hex: a urlsafe secret began with "-" one time in 64, and `--token SECRET` took it for an
    # option ("expected one argument").
    return secrets.token_hex(24)


def secure_settings() -> tuple[dict[str, str], dict[str, str]]:
    """Fresh (controller settings, broker settings) with authentication on and new secrets."""
    inner = render_inner_credentials(InnerCredentials(ACCESS_KEY, _secret()))
    token = _secret()
    common = {
        "authenticationEnabled": "true",
        "innerClientAuthenticationCredentials": inner,
        "adminAuthToken": token,
    }
    controller = {**common, "controllerRaftPassword": _secret()}
    broker = {**common, "initAuthenticationUser": render_user(User(USERNAME, _secret()))}
    return controller, broker
