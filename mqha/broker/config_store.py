"""The broker's live config (shell): ``GET /v1/config`` and ``PUT /v1/config`` (``mqadmin getBrokerConfig``,
``updateBrokerConfig``; docs/architecture.md §4, docs/config.md).

A key with ``Key.runtime`` is applied at once (``apply``) and written into the broker's ``-c`` file, as
RocketMQ's broker persists an update into the file it started from, so the change survives a restart;
the file's other lines and comments stay. Any other key is refused (code 16) without a change: it
takes effect only through the file and a restart. Secrets are masked in answers and never updatable.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from mqha.broker.config import BROKER_CONFIG
from mqha.codes import ResponseCode
from mqha.config import typed_changes, with_values
from mqha.durable import rewrite_atomically
from mqha.errors import ConfigError
from mqha.security.credentials import SECRET_KEYS, masked

log = logging.getLogger(__name__)

RUNTIME_KEYS = frozenset(name for name, key in BROKER_CONFIG.keys.items() if key.runtime)
"""Keys a running broker takes at once (docs/config.md)."""


class BrokerConfigStore:
    """This broker's config: read by ``GET /v1/config``, runtime keys changed by ``PUT /v1/config``."""

    def __init__(
        self,
        config: Mapping[str, Any],
        path: str | None,
        apply: Callable[[Mapping[str, Any]], None],
    ) -> None:
        self.config: dict[str, Any] = dict(config)
        self.path = path  # the -c file; None for a broker built in a test without one
        self._apply = apply

    def document(self) -> dict[str, Any]:
        return {"config": masked(self.config), "runtimeKeys": sorted(RUNTIME_KEYS), "configFile": self.path}

    def update(self, body: Any) -> tuple[ResponseCode, str]:
        """Check, persist, then apply ``{key: value}``: all keys or none."""
        if not isinstance(body, dict):
            return ResponseCode.SYSTEM_ERROR, "config update must be a JSON object of key: value"
        static = sorted(key for key in body if key not in RUNTIME_KEYS)
        if static:
            secret = [key for key in static if key in SECRET_KEYS]
            where = f"edit {self.path}" if self.path else "edit the broker's config file"
            why = "is a secret" if secret else "cannot change while the broker runs"
            runtime = ", ".join(sorted(RUNTIME_KEYS))
            return (
                ResponseCode.NO_PERMISSION,
                f"{', '.join(static)} {why}: {where} and restart the broker (runtime keys: {runtime})",
            )
        try:
            changes = typed_changes(BROKER_CONFIG, body)
        except ConfigError as exc:
            return ResponseCode.SYSTEM_ERROR, str(exc)
        if not changes:
            return ResponseCode.SUCCESS, ""
        if self.path is not None:
            try:
                rewrite_atomically(self.path, lambda text: with_values(text, changes))
            except OSError as exc:
                return ResponseCode.SYSTEM_ERROR, f"cannot persist the config to {self.path}: {exc}"
        self.config.update(changes)
        self._apply(changes)
        log.info("config updated: %s", ", ".join(f"{k}={v}" for k, v in sorted(changes.items())))
        return ResponseCode.SUCCESS, "" if self.path is not None else "applied, not persisted: no config file"
