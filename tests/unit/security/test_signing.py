"""The signed-request core: what a signature covers, the replay window and the nonce memory."""

from __future__ import annotations

import pytest

from mqha.security.credentials import InnerCredentials
from mqha.security.signing import (
    REPLAY_WINDOW_MS,
    ReplayGuard,
    RequestVerifier,
    bearer_matches,
    parse_signed,
    sign,
)

CREDS = InnerCredentials("broker", "0123456789abcdef")
NOW = 1_700_000_000_000


def _verifier() -> RequestVerifier:
    return RequestVerifier({CREDS.access_key: CREDS})


def _header(
    body: bytes = b"{}", *, target: str = "/v1/brokers/register", ts: int = NOW, nonce: str = "n1"
) -> str:
    return sign(CREDS, "POST", target, body, timestamp_ms=ts, nonce=nonce)


def test_a_fresh_signature_of_the_same_request_is_accepted() -> None:
    assert _verifier().verify("POST", "/v1/brokers/register", b"{}", _header(), NOW) is None


def test_the_secret_never_travels() -> None:
    assert CREDS.secret_key not in _header()
    assert CREDS.secret_key not in repr(CREDS)


@pytest.mark.parametrize(
    ("method", "target", "body"),
    [
        ("PUT", "/v1/brokers/register", b"{}"),
        ("POST", "/v1/brokers/apply-id", b"{}"),
        ("POST", "/v1/brokers/register?x=1", b"{}"),
        ("POST", "/v1/brokers/register", b'{"brokerId": 2}'),
    ],
)
def test_any_change_of_method_target_or_body_breaks_the_signature(
    method: str, target: str, body: bytes
) -> None:
    denial = _verifier().verify(method, target, body, _header(), NOW)
    assert denial is not None and denial.status == 401 and denial.remark == "wrong signature"


def test_a_replayed_signature_is_refused() -> None:
    verifier = _verifier()
    assert verifier.verify("POST", "/v1/brokers/register", b"{}", _header(), NOW) is None
    denial = verifier.verify("POST", "/v1/brokers/register", b"{}", _header(), NOW + 10)
    assert denial is not None and "replay" in denial.remark


@pytest.mark.parametrize("skew", [REPLAY_WINDOW_MS + 1, -REPLAY_WINDOW_MS - 1])
def test_a_timestamp_outside_the_window_is_refused(skew: int) -> None:
    denial = _verifier().verify("POST", "/v1/brokers/register", b"{}", _header(ts=NOW + skew), NOW)
    assert denial is not None and denial.status == 401 and "clock" in denial.remark


def test_an_unknown_access_key_and_a_wrong_secret_are_refused() -> None:
    other = InnerCredentials("intruder", "0123456789abcdef")
    forged = sign(other, "POST", "/x", b"", timestamp_ms=NOW, nonce="a")
    assert _verifier().verify("POST", "/x", b"", forged, NOW).remark == "unknown access key"
    guessed = sign(
        InnerCredentials("broker", "wrong-secret!"), "POST", "/x", b"", timestamp_ms=NOW, nonce="a"
    )
    assert _verifier().verify("POST", "/x", b"", guessed, NOW).remark == "wrong signature"


@pytest.mark.parametrize(
    "header",
    [
        "",
        "Bearer abc",
        "MQHA-HMAC-SHA256",
        "MQHA-HMAC-SHA256 AccessKey=a, Timestamp=x, Nonce=n, Signature=s",
        "MQHA-HMAC-SHA256 AccessKey=a, Timestamp=1, Nonce=, Signature=s",
        "MQHA-HMAC-SHA256 AccessKey=a, AccessKey=b, Timestamp=1, Nonce=n, Signature=s",
        "MQHA-HMAC-SHA256 AccessKey=a, Timestamp=1, Nonce=n, Signature=s, Extra=1",
        "MQHA-HMAC-SHA256 AccessKey=a, Timestamp=1, Nonce=" + "n" * 65 + ", Signature=s",
        "MQHA-HMAC-SHA256 " + "x" * 5000,
    ],
)
def test_malformed_headers_are_refused_without_error(header: str) -> None:
    denial = _verifier().verify("POST", "/x", b"", header, NOW)
    assert denial is not None and denial.status == 401
    if header.startswith("MQHA") and len(header) > 20:
        assert parse_signed(header) is None


def test_the_nonce_memory_is_bounded_by_the_window() -> None:
    guard = ReplayGuard(window_ms=1000)
    for i in range(100):
        assert guard.admit(f"n{i}", NOW + i * 100, NOW + i * 100) is None
    assert len(guard) <= 21  # two windows of 10 per window, plus the newest


def test_bearer_tokens_compare_whole() -> None:
    assert bearer_matches("Bearer s3cret-token", "s3cret-token")
    assert bearer_matches("bearer  s3cret-token ", "s3cret-token")
    assert not bearer_matches("Bearer s3cret", "s3cret-token")
    assert not bearer_matches("Basic s3cret-token", "s3cret-token")
    assert not bearer_matches("Bearer x", "")
    assert not bearer_matches(None, "s3cret-token")


@pytest.mark.parametrize("skew", [-1000, 0, 1000])
def test_a_nonce_is_remembered_for_as_long_as_its_signature_is_accepted(skew: int) -> None:
    guard = ReplayGuard(window_ms=1000)
    ts = NOW + skew
    assert guard.admit("n", ts, NOW) is None
    for later in range(NOW, ts + 1001, 50):  # every moment the timestamp check still passes
        if abs(later - ts) <= 1000:
            assert "replay" in guard.admit("n", ts, later).remark
    assert "clock" in guard.admit("n", ts, ts + 1001).remark
    assert guard.admit("other", NOW + 5000, NOW + 5000) is None
    assert len(guard) == 1  # the expired nonce's bucket is gone
