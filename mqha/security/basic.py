"""HTTP Basic authentication of broker API users (``initAuthenticationUser``; RFC 7617)."""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Iterable

from mqha.security.credentials import User
from mqha.security.signing import Denial

REALM = "mqha"
MISSING = Denial(401, "this call needs HTTP Basic credentials of a broker user")


def basic_header(user: User) -> str:
    token = base64.b64encode(f"{user.username}:{user.password}".encode()).decode()
    return f"Basic {token}"


def check_basic(header: str | None, users: Iterable[User]) -> Denial | None:
    """None when ``header`` names one of ``users`` with its password; else a 401 ``Denial``."""
    if not header:
        return MISSING
    scheme, _, encoded = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return MISSING
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return Denial(401, "malformed HTTP Basic credentials")
    username, colon, password = decoded.partition(":")
    if not colon:
        return Denial(401, "malformed HTTP Basic credentials")
    matched = False
    for user in users:  # every user compared, in constant time each: no timing hint of which name exists
        name_ok = hmac.compare_digest(username.encode(), user.username.encode())
        password_ok = hmac.compare_digest(password.encode(), user.password.encode())
        matched |= name_ok and password_ok
    return None if matched else Denial(401, "wrong username or password")
