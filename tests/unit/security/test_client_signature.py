"""The official clients' MQv2-HMAC-SHA1 signature: what the Python and Node.js clients send is accepted,
everything else is refused with its reason."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from mqha.security.client_signature import (
    ClaimError,
    Refusal,
    authorization_header,
    check_claim,
    format_date_time,
    parse_claim,
    sign,
)

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z
STAMP = "20260101T000000Z"


def test_the_clients_headers_verify() -> None:
    assert format_date_time(NOW) == STAMP
    python_signature = hmac.new(b"secret-key", STAMP.encode(), hashlib.sha1).hexdigest()
    assert sign("secret-key", STAMP) == python_signature
    # Python's header (lower-case hex) and Node's (upper case), as their sources write them.
    for signature in (python_signature, python_signature.upper()):
        header = f"MQv2-HMAC-SHA1 Credential=app, SignedHeaders=x-mq-date-time, Signature={signature}"
        claim = parse_claim(header, STAMP)
        assert (claim.access_key, claim.signed_at_s) == ("app", int(NOW))
        assert check_claim(claim, "secret-key", NOW, 900) is None
    assert parse_claim(authorization_header("app", "secret-key", STAMP), STAMP).signature == python_signature
    # Java's Credential may carry more after a slash (region/...): the access key is the first part.
    slashed = authorization_header("app", "secret-key", STAMP).replace("Credential=app", "Credential=app/x/y")
    assert parse_claim(slashed, STAMP).access_key == "app"


@pytest.mark.parametrize(
    ("header", "stamp", "refusal"),
    [
        (None, STAMP, Refusal.MISSING),
        ("", STAMP, Refusal.MISSING),
        # The Python client given no credentials signs with an empty access key.
        (
            f"MQv2-HMAC-SHA1 Credential=, SignedHeaders=x-mq-date-time, Signature={'0' * 40}",
            STAMP,
            Refusal.MISSING,
        ),
        ("Basic YWJjOmRlZg==", STAMP, Refusal.MALFORMED),
        ("MQv2-HMAC-SHA1", STAMP, Refusal.MALFORMED),
        ("MQv2-HMAC-SHA1 Credential=app, Signature", STAMP, Refusal.MALFORMED),
        ("MQv2-HMAC-SHA1 Credential=app, Signature=zz", STAMP, Refusal.MALFORMED),
        (f"MQv2-HMAC-SHA1 Credential=app, Signature={'g' * 40}", STAMP, Refusal.MALFORMED),
        (f"MQv2-HMAC-SHA1 Credential=app, Signature={'a' * 40}", None, Refusal.MALFORMED),
        (f"MQv2-HMAC-SHA1 Credential=app, Signature={'a' * 40}", "2026-01-01", Refusal.MALFORMED),
        (f"MQv2-HMAC-SHA1 Credential=app, Signature={'a' * 40}", "20261301T000000Z", Refusal.MALFORMED),
        ("MQv2-HMAC-SHA1 Credential=" + "a" * 2000, STAMP, Refusal.MALFORMED),
    ],
)
def test_bad_headers_are_refused_with_their_reason(
    header: str | None, stamp: str | None, refusal: Refusal
) -> None:
    with pytest.raises(ClaimError) as refused:
        parse_claim(header, stamp)
    assert refused.value.refusal is refusal


def test_unknown_users_wrong_secrets_and_stale_dates() -> None:
    claim = parse_claim(authorization_header("app", "secret-key", STAMP), STAMP)
    assert check_claim(claim, None, NOW, 900) is Refusal.UNKNOWN_USER
    assert check_claim(claim, "secret-kez", NOW, 900) is Refusal.WRONG_SIGNATURE
    assert check_claim(claim, "secret-key", NOW + 900, 900) is None
    assert check_claim(claim, "secret-key", NOW - 900, 900) is None
    assert check_claim(claim, "secret-key", NOW + 901, 900) is Refusal.CLOCK_SKEW
    assert check_claim(claim, "secret-key", NOW - 901, 900) is Refusal.CLOCK_SKEW
    # A signature over another date-time than the header's is wrong, not merely old.
    other = parse_claim(authorization_header("app", "secret-key", STAMP), "20260101T000001Z")
    assert check_claim(other, "secret-key", NOW, 900) is Refusal.WRONG_SIGNATURE
