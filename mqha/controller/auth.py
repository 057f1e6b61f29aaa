"""The controller's one authentication check (shell): who a request is, and whether it may call the
route (``mqha.controller.access`` decides; docs/architecture.md §3.3).

It owns the signature verifier of ``innerClientAuthenticationCredentials`` (with its replay cache) and
reads the wall clock for the signatures' timestamps; ``adminAuthToken`` is read from the live config.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mqha.clock import wall_ms
from mqha.codes import ResponseCode
from mqha.controller import access
from mqha.controller.access import Access, Principal
from mqha.controller.config_store import ConfigStore
from mqha.security.credentials import parse_inner_credentials
from mqha.security.signing import Denial, RequestVerifier
from mqha.wire.controller_api import Reply

Code = ResponseCode


class ControllerAuth:
    """Identifies the caller of a request and checks it against the route's access."""

    def __init__(self, config_store: ConfigStore) -> None:
        self._config_store = config_store
        text = config_store.config["innerClientAuthenticationCredentials"]
        credentials = parse_inner_credentials(text) if text else None
        # Secrets cannot change through the config API: the verifier is built once.
        self._verifier = RequestVerifier({credentials.access_key: credentials} if credentials else {})

    @property
    def config(self) -> Mapping[str, Any]:
        return self._config_store.config

    @property
    def enabled(self) -> bool:
        return bool(self.config["authenticationEnabled"])

    def identify(self, method: str, target: str, body: bytes, header: str | None) -> Principal | Denial:
        """What ``header`` proves for this request (``target``: the path with its raw query)."""
        return access.identify(
            header,
            enabled=self.enabled,
            admin_token=self.config["adminAuthToken"],
            # Wall clock: a signature's timestamp is the broker's wall clock.
            verify=lambda: self._verifier.verify(method, target, body, header, wall_ms()),
        )

    def permit(self, required: Access, who: Principal | Denial) -> tuple[int, Reply] | None:
        """None when allowed; else (HTTP status, reply with code 16)."""
        denied = access.permit(required, who, enabled=self.enabled, admin_token=self.config["adminAuthToken"])
        if denied is None:
            return None
        return denied.status, Reply(Code.NO_PERMISSION, denied.remark)
