"""This node's live config (shell): checks, typed updates from ``PUT /v1/controller/config``, persistence.

``config`` is replaced as a whole on an update (after the blacklist check, typing, validation and
persisting to ``configStorePath``); every job reads it at each use. Keys in ``LIVE_KEYS`` take effect at
once; the others are persisted and take effect at the next start. Secrets
(``mqha.security.credentials.SECRET_KEYS``) are masked in ``GET`` answers and blacklisted for updates.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from mqha.codes import ResponseCode
from mqha.config import typed_changes, with_values
from mqha.controller.config import CONTROLLER_CONFIG, blacklisted_keys, parse_peers
from mqha.durable import rewrite_atomically
from mqha.errors import ConfigError
from mqha.security.credentials import masked
from mqha.wire.controller_api import Reply

log = logging.getLogger(__name__)

Code = ResponseCode

LIVE_KEYS = frozenset(name for name, key in CONTROLLER_CONFIG.keys.items() if key.runtime)
"""Keys a running node takes at once (``Key.runtime``; docs/config.md)."""


def check_config(values: Mapping[str, Any]) -> None:
    """Cross-key checks the service relies on (each key's own range is its ``Rule``, checked when it
    is read: ``mqha.controller.config``); raises ``ConfigError`` naming the key."""
    low, high = values["controllerRaftMinTimeoutMills"], values["controllerRaftMaxTimeoutMills"]
    if low <= 150:  # PySyncObj needs the election timeout above 3 heartbeat periods (3 x 50 ms)
        raise ConfigError("controllerRaftMinTimeoutMills", f"must be > 150, got {low}")
    if high <= low:
        raise ConfigError("controllerRaftMaxTimeoutMills", f"must be > controllerRaftMinTimeoutMills ({low})")


class ConfigStore:
    """Holds this node's config: checked at start, replaced whole by a typed, persisted update."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        check_config(config)
        self.config: Mapping[str, Any] = dict(config)

    def get_config(self) -> Reply:
        return Reply(Code.SUCCESS, "", {"config": masked(self.config)})

    def update_config(self, body: Any) -> Reply:
        """docs/reference-behaviour.md §5.11 with a JSON body ``{key: value}``; any node, this node only.

        The changed keys are written into ``configStorePath`` (only them; the file's other lines stay),
        which the node reads over its ``-c`` file at every start: a change survives a restart."""
        if not isinstance(body, dict):
            return Reply(Code.CONTROLLER_INVALID_REQUEST, "config update must be a JSON object of key: value")
        banned = sorted(key for key in body if key in blacklisted_keys(self.config))
        if banned:
            return Reply(Code.NO_PERMISSION, "Can not update config in black list.", {"keys": banned})
        try:
            changes = typed_changes(CONTROLLER_CONFIG, body)
            updated = {**self.config, **changes}
            check_config(updated)
            parse_peers(updated["controllerDLegerPeers"])
        except ConfigError as exc:
            return Reply(Code.CONTROLLER_INVALID_REQUEST, str(exc))
        if changes:
            path = updated["configStorePath"]
            try:
                # Owner-only: a config file may hold secrets. The directory is fsynced too.
                rewrite_atomically(path, lambda text: with_values(text, changes), mode=0o600, make_dirs=True)
            except OSError as exc:
                return Reply(Code.SYSTEM_ERROR, f"cannot persist the config to {path}: {exc}")
            self.config = updated
            log.info("config updated: %s", ", ".join(sorted(changes)))
        later = sorted(key for key in body if key not in LIVE_KEYS)
        remark = f"takes effect after a restart: {', '.join(later)}" if later else ""
        return Reply(Code.SUCCESS, remark)

    def max_message_bytes(self) -> int:
        return int(self.config["maxRequestBodyBytes"])

    def session_ping_seconds(self) -> float:
        return self.config["brokerSessionPingMills"] / 1000
