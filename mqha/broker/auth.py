"""Who may use the broker API's protected routes (docs/architecture.md §4). CORE: no IO.

- Client routes (POST and GET ``/v1/messages``, the put stream's upgrade): with
  ``authenticationEnabled=true``, HTTP Basic credentials of the ``initAuthenticationUser`` user
  (``mqha.security.basic``); open otherwise.
- Admin routes (POST ``/v1/history/final-log``): ``Authorization: Bearer <adminAuthToken>`` whenever
  ``adminAuthToken`` is set, whatever ``authenticationEnabled`` says (as on the controllers).
- Everything else (``/healthz``, ``/metrics``, ``/v1/status``, ``/v1/ha/status``, ``/v1/epochs``) is
  public state and stays open.

A refusal is a ``Denial``: 401 when no acceptable proof came, 403 for a wrong admin token.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mqha.security.basic import REALM, check_basic
from mqha.security.credentials import User, parse_user
from mqha.security.signing import Denial, bearer_matches

NEEDS_ADMIN_TOKEN = Denial(401, "this call needs 'Authorization: Bearer <adminAuthToken>'")
WRONG_ADMIN_TOKEN = Denial(403, "wrong admin token")
BASIC_CHALLENGE = f'Basic realm="{REALM}"'
BEARER_CHALLENGE = f'Bearer realm="{REALM}"'


class BrokerAuth:
    """Decides whether one request may use a client route or an admin route of the broker API."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.enabled = bool(config.get("authenticationEnabled"))
        user_text = config.get("initAuthenticationUser") or ""
        # The config check already refused a missing or malformed user when authentication is on.
        self.users: tuple[User, ...] = (parse_user(user_text),) if self.enabled and user_text else ()
        self.admin_token: str = config.get("adminAuthToken") or ""

    def check_client(self, authorization: str | None) -> Denial | None:
        """None when a put or read may proceed; else a 401 (answer with ``BASIC_CHALLENGE``)."""
        if not self.enabled:
            return None
        return check_basic(authorization, self.users)

    def check_admin(self, authorization: str | None) -> Denial | None:
        """None when an admin call may proceed: no token configured, or the right bearer token."""
        if not self.admin_token:
            return None
        scheme = (authorization or "").strip().partition(" ")[0].lower()
        if scheme != "bearer":
            return NEEDS_ADMIN_TOKEN
        return None if bearer_matches(authorization, self.admin_token) else WRONG_ADMIN_TOKEN
