"""Signed requests between mqha's own processes: HMAC-SHA256 over the request and the node it is for.

A broker proves ``innerClientAuthenticationCredentials`` to a controller without sending the secret: the
``Authorization`` header carries the access key, the node the request is for (the ``host:port`` the
sender dialled), a timestamp (ms), a random nonce, the SHA-256 of the body and
``HMAC-SHA256(secretKey, canonical request)``, where the canonical request is the method, the node, the
path with its query, the timestamp, the nonce and the body's SHA-256, one per line.

The verifier checks everything from the header alone, before any body byte is read: the node must be
its own (a signature made for another controller is useless here), the HMAC must match, the timestamp
must be within ``window_ms`` of its own clock and the nonce unseen (a replay). Only then is the body
read, and its SHA-256 must be the one signed (``check_body``). Secrets are compared in constant time.

Pure: the caller passes the time and the nonce. ``ReplayGuard`` keeps the nonces of the last window, so
its memory is bounded by the request rate times twice the window. Its memory starts empty with the
process, so a guard also refuses signatures dated before it began (``not_before_ms``) until a window has
passed: a request captured before a restart cannot be replayed after it (a sender just signs again).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from mqha.security.credentials import InnerCredentials

SCHEME = "MQHA-HMAC-SHA256"
REPLAY_WINDOW_MS = 60_000
"""How far a signature's timestamp may be from the verifier's clock (either way): clock skew allowance."""
MAX_NONCE_LENGTH = 64
MAX_NODE_LENGTH = 300
MAX_HEADER_LENGTH = 1024
FIELDS = ("AccessKey", "Node", "Timestamp", "Nonce", "ContentSha256", "Signature")
REFUSED_HEADER = "MQHA-Signature-Refused"
"""The header of a refusal of a signature that names why (``Denial.reason``: ``skew``, ``replay`` ...),
so a broker can count refusals for its clock even where it sees no body (a refused WebSocket upgrade)."""


@dataclass(frozen=True)
class Denial:
    """Why a request is refused.

    ``status`` is 401 (no or bad proof) or 403 (proved, but not allowed); ``reason`` is a short metric
    label of a refused signature (``skew``, ``replay``, ``other_node`` ...)."""

    status: int
    remark: str
    reason: str = ""


MISSING = Denial(401, f"this call needs a signed 'Authorization: {SCHEME} ...' header or an admin token")


@dataclass(frozen=True)
class Verdict:
    """What one signed header proves.

    ``denial`` is None when it is valid and fresh. ``skew_ms`` (the signature's timestamp minus the
    verifier's clock) is known once the HMAC is right, refused or not; ``body_sha256`` is what the body
    must hash to (``check_body``)."""

    denial: Denial | None
    skew_ms: int | None = None
    body_sha256: str = ""


def body_digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def canonical_request(
    method: str, node: str, target: str, *, timestamp_ms: int, nonce: str, body_sha256: str
) -> bytes:
    """The bytes a signature covers; ``node`` is the ``host:port`` the request is for, ``target`` the
    path with its raw query string."""
    return f"{method.upper()}\n{node}\n{target}\n{timestamp_ms}\n{nonce}\n{body_sha256}".encode()


def signature(secret_key: str, message: bytes) -> str:
    return hmac.new(secret_key.encode(), message, hashlib.sha256).hexdigest()


def sign(
    credentials: InnerCredentials,
    method: str,
    node: str,
    target: str,
    body: bytes,
    *,
    timestamp_ms: int,
    nonce: str,
) -> str:
    """The ``Authorization`` header value of one request to ``node`` (``host:port``)."""
    digest = body_digest(body)
    mac = signature(
        credentials.secret_key,
        canonical_request(method, node, target, timestamp_ms=timestamp_ms, nonce=nonce, body_sha256=digest),
    )
    return (
        f"{SCHEME} AccessKey={credentials.access_key}, Node={node}, Timestamp={timestamp_ms}, "
        f"Nonce={nonce}, ContentSha256={digest}, Signature={mac}"
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
    if set(fields) != set(FIELDS):
        return None
    if not fields["Timestamp"].isdigit() or not 0 < len(fields["Nonce"]) <= MAX_NONCE_LENGTH:
        return None
    if not 0 < len(fields["Node"]) <= MAX_NODE_LENGTH or len(fields["ContentSha256"]) != 64:
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

    def __init__(self, window_ms: int = REPLAY_WINDOW_MS, not_before_ms: int | None = None) -> None:
        """``not_before_ms``: the wall-clock time this guard's memory began (its process started);
        earlier signatures are refused, since their nonces may have been spent before it. The owner
        sets it to None once a window has passed (by its monotonic clock): every such signature has
        expired by then, and a wall clock stepped back after the start must not lock senders out."""
        self.window_ms = window_ms
        self.not_before_ms = not_before_ms
        self._buckets: dict[int, set[str]] = {}  # expiry // window -> nonces

    def __len__(self) -> int:
        return sum(map(len, self._buckets.values()))

    def admit(self, nonce: str, timestamp_ms: int, now_ms: int) -> Denial | None:
        """None (and the nonce remembered) for a fresh nonce in the window; else why not."""
        window = self.window_ms
        if abs(now_ms - timestamp_ms) > window:
            return Denial(401, f"signature timestamp is over {window} ms from the server's clock", "skew")
        if self.not_before_ms is not None and timestamp_ms < self.not_before_ms:
            remark = "signature dated before this node started (its replay cache is new): sign again"
            return Denial(401, remark, "before_start")
        for bucket in [b for b in self._buckets if (b + 1) * window <= now_ms]:
            del self._buckets[bucket]  # every signature in it has expired
        if any(nonce in nonces for nonces in self._buckets.values()):
            return Denial(401, "signature already used (replay)", "replay")
        self._buckets.setdefault((timestamp_ms + window) // window, set()).add(nonce)
        return None


class RequestVerifier:
    """Checks signed requests to ``node`` (this process's ``host:port``) against the known access keys.

    One replay guard remembers the nonces."""

    def __init__(
        self,
        credentials: Mapping[str, InnerCredentials],
        node: str,
        window_ms: int = REPLAY_WINDOW_MS,
        aliases: Iterable[str] = (),
        not_before_ms: int | None = None,
    ) -> None:
        """``aliases``: other addresses signers may reach this node by (a port forward, NAT);
        ``not_before_ms``: see ``ReplayGuard``."""
        self._by_access_key = dict(credentials)
        self.node = node
        self.names = frozenset({node, *aliases})
        self.guard = ReplayGuard(window_ms, not_before_ms)

    def verify(self, method: str, target: str, header: str | None, now_ms: int) -> Verdict:
        """Whether ``header`` is a valid, fresh signature of a request to this node, from the header
        alone (the nonce is spent when it is); the body is checked after by ``check_body``."""
        if not header:
            return Verdict(MISSING)
        fields = parse_signed(header)
        if fields is None:
            return Verdict(Denial(401, f"malformed '{SCHEME}' Authorization header", "malformed"))
        credentials = self._by_access_key.get(fields["AccessKey"])
        if credentials is None:
            return Verdict(Denial(401, "unknown access key", "unknown_key"))
        if fields["Node"] not in self.names:
            remark = f"signature made for node {fields['Node'][:80]!r}, not for this node {self.node!r}"
            return Verdict(Denial(401, remark, "other_node"))
        timestamp = int(fields["Timestamp"])
        message = canonical_request(
            method,
            fields["Node"],
            target,
            timestamp_ms=timestamp,
            nonce=fields["Nonce"],
            body_sha256=fields["ContentSha256"],
        )
        if not hmac.compare_digest(signature(credentials.secret_key, message), fields["Signature"]):
            return Verdict(Denial(401, "wrong signature", "wrong"))
        denial = self.guard.admit(fields["Nonce"], timestamp, now_ms)
        return Verdict(denial, timestamp - now_ms, fields["ContentSha256"])


def check_body(body_sha256: str, body: bytes) -> Denial | None:
    """None when ``body`` is the one a verified signature covers (its ``ContentSha256``)."""
    if hmac.compare_digest(body_digest(body), body_sha256):
        return None
    return Denial(401, "the body is not the one signed (ContentSha256 differs)", "body")


def bearer_header(token: str) -> str:
    """The ``Authorization`` value of an admin call: ``Bearer <adminAuthToken>``."""
    return f"Bearer {token}"


def bearer_matches(header: str | None, token: str) -> bool:
    """Whether ``header`` is ``Bearer <token>`` (constant-time comparison)."""
    if not header or not token:
        return False
    scheme, _, given = header.strip().partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())
