"""The credentials a local cluster's own tools use on its brokers, read from the cluster's config.

The demo, chaos runs, benchmarks and final-log dumps put and read through the broker API like any
client: when the brokers' settings name an ``initAuthenticationUser`` they send it (HTTP Basic), and
the brokers' ``adminAuthToken`` goes with admin calls (final-log). With neither set (authentication
off) nothing is sent and everything behaves as before.
"""

from __future__ import annotations

from collections.abc import Mapping

from mqha.security.basic import basic_header
from mqha.security.credentials import User, parse_user
from mqha.security.signing import bearer_header


def broker_user(broker_settings: Mapping[str, str]) -> User | None:
    """The brokers' ``initAuthenticationUser``, or None when the settings name none."""
    text = broker_settings.get("initAuthenticationUser") or ""
    return parse_user(text) if text else None


def client_headers(broker_settings: Mapping[str, str]) -> dict[str, str]:
    """Headers of a put or read on these brokers: ``Authorization: Basic ...`` when a user is set."""
    user = broker_user(broker_settings)
    return {"Authorization": basic_header(user)} if user is not None else {}


def admin_headers(broker_settings: Mapping[str, str]) -> dict[str, str]:
    """Headers of an admin call on these brokers: ``Authorization: Bearer <adminAuthToken>`` when set."""
    token = broker_settings.get("adminAuthToken") or ""
    return {"Authorization": bearer_header(token)} if token else {}
