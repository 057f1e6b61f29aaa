"""The secrets of the config (RocketMQ 5.3 ACL 2.0 key names) as typed values, and their masking.

``innerClientAuthenticationCredentials`` is ``{"accessKey": ..., "secretKey": ...}`` and
``initAuthenticationUser`` is ``{"username": ..., "password": ...}``, as in RocketMQ. A malformed value
is a ``ConfigError`` naming the key; the secret itself never appears in a message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mqha.errors import ConfigError

SECRET_KEYS = frozenset(
    {
        "adminAuthToken",
        "controllerRaftPassword",
        "innerClientAuthenticationCredentials",
        "initAuthenticationUser",
    }
)
"""Config keys whose values are secrets: never shown (masked), never read or changed through a config API."""

MASK = "******"

MIN_SECRET_LENGTH = 8
"""A secret shorter than this is refused at start: a guessable secret protects nothing."""

_PLACEHOLDER = re.compile(
    r"(?<![a-z])(change|replace)[-_ .]?me(?![a-z])|(?<![a-z])placeholder|<[^<>]*>|\$\{[^}]*\}", re.IGNORECASE
)
"""What an example says instead of a secret: ``CHANGE-ME-...`` (conf/), ``replace_me``, ``<your
secret>``, a ``${VAR}`` no shell expanded. Whole words only: ``exchange-mechanic`` is a secret."""


def masked(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with every set secret replaced by ``MASK`` (an empty secret stays empty: it says "off")."""
    return {key: (MASK if key in SECRET_KEYS and value else value) for key, value in values.items()}


@dataclass(frozen=True, repr=False)
class InnerCredentials:
    """The access key and secret key that brokers and controllers prove to each other."""

    access_key: str
    secret_key: str

    def __repr__(self) -> str:  # never print the secret
        return f"InnerCredentials(access_key={self.access_key!r}, secret_key=***)"


@dataclass(frozen=True, repr=False)
class User:
    """A client user of the broker API (HTTP Basic)."""

    username: str
    password: str

    def __repr__(self) -> str:
        return f"User(username={self.username!r}, password=***)"


def _json_object(key: str, text: str, fields: tuple[str, str]) -> tuple[str, str]:
    try:
        value = json.loads(text)
    except ValueError:
        raise ConfigError(key, f'expected a JSON object {{"{fields[0]}": ..., "{fields[1]}": ...}}') from None
    if not isinstance(value, dict) or set(value) != set(fields):
        raise ConfigError(key, f"expected exactly the fields {fields[0]!r} and {fields[1]!r}")
    public, secret = value[fields[0]], value[fields[1]]
    if not isinstance(public, str) or not public or ":" in public or not public.isprintable():
        raise ConfigError(key, f"field {fields[0]!r} must be a non-empty printable string without ':'")
    if not isinstance(secret, str) or len(secret) < MIN_SECRET_LENGTH:
        raise ConfigError(key, f"field {fields[1]!r} must be a string of {MIN_SECRET_LENGTH}+ characters")
    return public, secret


def parse_inner_credentials(text: str, key: str = "innerClientAuthenticationCredentials") -> InnerCredentials:
    access_key, secret_key = _json_object(key, text, ("accessKey", "secretKey"))
    return InnerCredentials(access_key, secret_key)


def parse_user(text: str, key: str = "initAuthenticationUser") -> User:
    username, password = _json_object(key, text, ("username", "password"))
    return User(username, password)


def render_inner_credentials(credentials: InnerCredentials) -> str:
    return json.dumps({"accessKey": credentials.access_key, "secretKey": credentials.secret_key})


def render_user(user: User) -> str:
    return json.dumps({"username": user.username, "password": user.password})


def is_placeholder(secret: str) -> bool:
    """Whether ``secret`` is an example's stand-in rather than a secret (``CHANGE-ME-...``,
    ``<password>``, ``${TOKEN}``)."""
    return _PLACEHOLDER.search(secret) is not None


def check_no_placeholder_secrets(values: Mapping[str, Any]) -> None:
    """Refuse a secret key whose value (or a JSON field of it) is a placeholder: a copied example
    would otherwise run with a secret everyone can read. Raises ``ConfigError`` naming the key."""
    for key in sorted(SECRET_KEYS):
        text = values.get(key) or ""
        if not isinstance(text, str) or not text:
            continue
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        fields = [v for v in parsed.values() if isinstance(v, str)] if isinstance(parsed, dict) else [text]
        if any(is_placeholder(field) for field in fields):
            raise ConfigError(key, "holds a placeholder, not a secret: set one (e.g. openssl rand -hex 24)")


def check_authentication_keys(values: Mapping[str, Any], required: tuple[str, ...]) -> None:
    """With ``authenticationEnabled``, each key of ``required`` must be set and well-formed; a set key
    is checked either way, and no secret may be a placeholder. Raises ``ConfigError`` naming the key."""
    check_no_placeholder_secrets(values)
    enabled = bool(values.get("authenticationEnabled"))
    parsers = {
        "innerClientAuthenticationCredentials": parse_inner_credentials,
        "initAuthenticationUser": parse_user,
    }
    for key in required:
        text = values.get(key, "")
        if not text:
            if enabled:
                raise ConfigError(key, "required when authenticationEnabled=true")
            continue
        if key in parsers:
            parsers[key](text, key)
        elif enabled and len(text) < MIN_SECRET_LENGTH:
            raise ConfigError(key, f"must be at least {MIN_SECRET_LENGTH} characters")
