"""Signed requests between mqha's own processes: HMAC-SHA256 with a timestamp and a replay window.

A broker proves ``innerClientAuthenticationCredentials`` to a controller without sending the secret: the
``Authorization`` header carries the access key, a timestamp (ms), a random nonce and
``HMAC-SHA256(secretKey, canonical request)``, where the canonical request is the method, the path with
its query, the timestamp, the nonce and the SHA-256 of the body, one per line. The verifier accepts a
signature only within ``window_ms`` of its own clock and only once (a nonce seen in the window is a
replay). Secrets are compared in constant time.

Pure: the caller passes the time and the nonce. ``ReplayGuard`` keeps the nonces of the last window, so
its memory is bounded by the request rate times twice the window.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from mqha.security.credentials import InnerCredentials

SCHEME = "MQHA-HMAC-SHA256"
REPLAY_WINDOW_MS = 60_000
"""How far a signature's timestamp may be from the verifier's clock (either way): clock skew allowance."""
MAX_NONCE_LENGTH = 64
MAX_HEADER_LENGTH = 1024


@dataclass(frozen=True)
class Denial:
    """Why a request is refused: HTTP status 401 (no or bad proof) or 403 (proved, but not allowed)."""

    status: int
    remark: str


MISSING = Denial(401, f"this call needs a signed 'Authorization: {SCHEME} ...' header or an admin token")


def canonical_request(method: str, target: str, timestamp_ms: int, nonce: str, body: bytes) -> bytes:
    """The bytes a signature covers; ``target`` is the path with its raw query string."""
    digest = hashlib.sha256(body).hexdigest()
    return f"{method.upper()}\n{target}\n{timestamp_ms}\n{nonce}\n{digest}".encode()


def signature(secret_key: str, message: bytes) -> str:
    return hmac.new(secret_key.encode(), message, hashlib.sha256).hexdigest()


def sign(
    credentials: InnerCredentials, method: str, target: str, body: bytes, *, timestamp_ms: int, nonce: str
) -> str:
    """The ``Authorization`` header value of one request."""
    mac = signature(credentials.secret_key, canonical_request(method, target, timestamp_ms, nonce, body))
    return (
        f"{SCHEME} AccessKey={credentials.access_key}, Timestamp={timestamp_ms}, "
        f"Nonce={nonce}, Signature={mac}"
    )


def parse_signed(header: str) -> dict[str, str] | None:
    """The fields of a signed ``Authorization`` header, or None when it is not one (or malformed)."""
    if len(header) > MAX_HEADER_LENGTH:
        return None
    scheme, _, rest = header.strip().partition(" ")
    if scheme != SCHEME:
        return None
    fields: dict[str, str] = {}
    for part in rest.split(","):
        name, eq, value = part.strip().partition("=")
        if not eq or name in fields:
            return None
        fields[name] = value
    if set(fields) != {"AccessKey", "Timestamp", "Nonce", "Signature"}:
        return None
    if not fields["Timestamp"].isdigit() or not 0 < len(fields["Nonce"]) <= MAX_NONCE_LENGTH:
        return None
    return fields


class ReplayGuard:
    """Remembers each nonce until its signature expires; a nonce seen again before that is a replay.

    A signature with timestamp ``ts`` is accepted only until ``ts + window``, so its nonce is needed
    until then and no longer. Nonces sit in buckets by that expiry (one bucket per window), and a bucket
    is dropped whole once its last expiry has passed: at most three buckets live, each a set of strings,
    so a request costs O(1) and adds no object for the garbage collector to track (a deque of
    (time, nonce) tuples did, ~10^5 of them at a controller's write rate, and writes got ~4 % slower).
    Memory is bounded by the request rate times two windows."""

    def __init__(self, window_ms: int = REPLAY_WINDOW_MS) -> None:
        self.window_ms = window_ms
        self._buckets: dict[int, set[str]] = {}  # expiry // window -> nonces

    def __len__(self) -> int:
        return sum(map(len, self._buckets.values()))

    def admit(self, nonce: str, timestamp_ms: int, now_ms: int) -> Denial | None:
        """None (and the nonce remembered) for a fresh nonce in the window; else why not."""
        window = self.window_ms
        if abs(now_ms - timestamp_ms) > window:
            return Denial(401, f"signature timestamp is over {window} ms from the server's clock")
        for bucket in [b for b in self._buckets if (b + 1) * window <= now_ms]:
            del self._buckets[bucket]  # every signature in it has expired
        if any(nonce in nonces for nonces in self._buckets.values()):
            return Denial(401, "signature already used (replay)")
        self._buckets.setdefault((timestamp_ms + window) // window, set()).add(nonce)
        return None


class RequestVerifier:
    """Checks signed requests against the known access keys, with one replay guard."""

    def __init__(
        self, credentials: Mapping[str, InnerCredentials], window_ms: int = REPLAY_WINDOW_MS
    ) -> None:
        self._by_access_key = dict(credentials)
        self.guard = ReplayGuard(window_ms)

    def verify(self, method: str, target: str, body: bytes, header: str | None, now_ms: int) -> Denial | None:
        """None when ``header`` is a valid, fresh signature of this request; else a 401 ``Denial``."""
        if not header:
            return MISSING
        fields = parse_signed(header)
        if fields is None:
            return Denial(401, f"malformed '{SCHEME}' Authorization header")
        credentials = self._by_access_key.get(fields["AccessKey"])
        if credentials is None:
            return Denial(401, "unknown access key")
        timestamp = int(fields["Timestamp"])
        expected = signature(
            credentials.secret_key, canonical_request(method, target, timestamp, fields["Nonce"], body)
        )
        if not hmac.compare_digest(expected, fields["Signature"]):
            return Denial(401, "wrong signature")
        return self.guard.admit(fields["Nonce"], timestamp, now_ms)


def bearer_header(token: str) -> str:
    """The ``Authorization`` value of an admin call: ``Bearer <adminAuthToken>``."""
    return f"Bearer {token}"


def bearer_matches(header: str | None, token: str) -> bool:
    """Whether ``header`` is ``Bearer <token>`` (constant-time comparison)."""
    if not header or not token:
        return False
    scheme, _, given = header.strip().partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())
