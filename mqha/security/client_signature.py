"""The official RocketMQ 5 clients' request signature, checked (pure; docs/architecture.md §12.12).

Every call of the Java, Python, Node.js... clients carries ``x-mq-date-time: 20260101T120000Z`` and
``authorization: MQv2-HMAC-SHA1 Credential=<accessKey>, SignedHeaders=x-mq-date-time,
Signature=<hex HMAC-SHA1(secretKey, the date-time header)>`` (the Node client writes the hex in upper
case, the others in lower). The access key is the ACL user's name and the secret its password, as in
RocketMQ 5.3. The signature covers only the date-time, so a captured header is a bearer token until
the date-time is too old: :func:`verify` bounds it with ``max_skew_s`` either way (RocketMQ's proxy
checks no time at all). The Java and Python clients write their *local* time with a ``Z``, so a client
outside UTC looks as far off as its time zone.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import re
import time
from dataclasses import dataclass
from enum import Enum

from mqha.errors import MqhaError

SCHEME = "MQv2-HMAC-SHA1"
AUTHORIZATION = "authorization"
DATE_TIME = "x-mq-date-time"
DATE_TIME_FORMAT = "%Y%m%dT%H%M%SZ"
MAX_HEADER_LENGTH = 1024
_HEX40 = re.compile(r"[0-9a-f]{40}")


class Refusal(Enum):
    """Why a call's credentials are refused; the value labels the metric."""

    MISSING = "missing"
    MALFORMED = "malformed"
    UNKNOWN_USER = "unknown_user"
    WRONG_SIGNATURE = "wrong_signature"
    CLOCK_SKEW = "clock_skew"


@dataclass(frozen=True)
class Claim:
    """What a well-formed header says: who, the signature (lower-case hex) and the signed date-time."""

    header: str
    access_key: str
    signature: str
    date_time: str
    signed_at_s: int


class ClaimError(MqhaError, ValueError):
    """A call's headers make no claim: ``refusal`` says why."""

    def __init__(self, refusal: Refusal, message: str) -> None:
        super().__init__(message)
        self.refusal = refusal


def sign(secret_key: str, date_time: str) -> str:
    """The clients' signature of ``date_time`` (lower-case hex)."""
    return hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()


def authorization_header(access_key: str, secret_key: str, date_time: str) -> str:
    return (
        f"{SCHEME} Credential={access_key}, SignedHeaders={DATE_TIME}, "
        f"Signature={sign(secret_key, date_time)}"
    )


def format_date_time(epoch_s: float) -> str:
    return time.strftime(DATE_TIME_FORMAT, time.gmtime(epoch_s))


def _epoch_seconds(text: str) -> int | None:
    """``20260101T120000Z`` as seconds since the epoch, or None (by hand: ``strptime`` took ~20 µs)."""
    if len(text) != 16 or text[8] != "T" or text[15] != "Z" or not (text[:8] + text[9:15]).isdigit():
        return None
    try:
        moment = datetime.datetime(
            int(text[:4]),
            int(text[4:6]),
            int(text[6:8]),
            int(text[9:11]),
            int(text[11:13]),
            int(text[13:15]),
            tzinfo=datetime.UTC,
        )
    except ValueError:
        return None
    return int(moment.timestamp())


def parse_claim(authorization: str | None, date_time: str | None) -> Claim:
    """The claim of one call's headers; ``ClaimError`` says why there is none."""
    if not authorization:
        raise ClaimError(Refusal.MISSING, "this call needs the client's access key and secret key")
    if len(authorization) > MAX_HEADER_LENGTH:
        raise ClaimError(Refusal.MALFORMED, "the authorization header is too long")
    scheme, _, rest = authorization.strip().partition(" ")
    if scheme != SCHEME:
        raise ClaimError(Refusal.MALFORMED, f"the authorization scheme must be {SCHEME}")
    fields: dict[str, str] = {}
    for part in rest.split(","):
        name, equals, value = part.strip().partition("=")
        if not equals:
            raise ClaimError(Refusal.MALFORMED, "the authorization header is not name=value, ...")
        fields[name] = value
    access_key = fields.get("Credential", "").split("/", 1)[0]
    if not access_key:  # the Python client signs with an empty access key when given none
        raise ClaimError(Refusal.MISSING, "this call needs the client's access key and secret key")
    signature = fields.get("Signature", "").lower()
    if not _HEX40.fullmatch(signature):
        raise ClaimError(Refusal.MALFORMED, "the authorization header needs a hex Signature")
    if not date_time:
        raise ClaimError(Refusal.MALFORMED, f"the {DATE_TIME} header is missing")
    signed_at = _epoch_seconds(date_time)
    if signed_at is None:
        raise ClaimError(Refusal.MALFORMED, f"the {DATE_TIME} header is not yyyyMMddTHHmmssZ")
    return Claim(authorization, access_key, signature, date_time, signed_at)


def check_claim(claim: Claim, secret_key: str | None, now_s: float, max_skew_s: float) -> Refusal | None:
    """None when ``claim`` is signed with ``secret_key`` (None: no such user) within ``max_skew_s`` of
    ``now_s``."""
    if secret_key is None:
        return Refusal.UNKNOWN_USER
    if not hmac.compare_digest(sign(secret_key, claim.date_time), claim.signature):
        return Refusal.WRONG_SIGNATURE
    if abs(now_s - claim.signed_at_s) > max_skew_s:
        return Refusal.CLOCK_SKEW
    return None


REFUSAL_TEXT = {
    Refusal.UNKNOWN_USER: "the access key names no user",
    Refusal.WRONG_SIGNATURE: "check signature failed: wrong secret key",
    Refusal.CLOCK_SKEW: "the request's x-mq-date-time is too far from the proxy's clock (a client outside "
    "UTC writes local time: run it with TZ=UTC)",
}
