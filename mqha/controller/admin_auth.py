"""The admin token check of the controller's admin calls (``adminAuthToken``; docs/architecture.md §3)."""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Any

from mqha.codes import ResponseCode
from mqha.controller.config_store import ConfigStore
from mqha.wire.controller_api import Reply

Code = ResponseCode


class AdminAuth:
    """Checks an admin call's bearer token against this node's current ``adminAuthToken``."""

    def __init__(self, config_store: ConfigStore) -> None:
        self._config_store = config_store

    @property
    def config(self) -> Mapping[str, Any]:
        return self._config_store.config

    def check_admin_auth(self, authorization: str | None) -> tuple[int, Reply] | None:
        """None when allowed; else (HTTP status, reply): 401 without a token, 403 with a wrong one."""
        token = self.config["adminAuthToken"]
        if not token:
            return None
        if not authorization:
            return 401, Reply(Code.NO_PERMISSION, "this call needs 'Authorization: Bearer <adminAuthToken>'")
        scheme, _, given = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
            return 403, Reply(Code.NO_PERMISSION, "wrong admin token")
        return None
