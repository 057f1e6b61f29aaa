"""The signed-request core: what a signature covers, the replay window and the nonce memory."""

from __future__ import annotations

import pytest

from mqha.security.credentials import InnerCredentials
from mqha.security.signing import (
    REPLAY_WINDOW_MS,
    Denial,
    ReplayGuard,
    RequestVerifier,
    bearer_matches,
    body_digest,
    check_body,
    parse_signed,
    sign,
)

CREDS = InnerCredentials("broker", "0123456789abcdef")
NOW = 1_700_000_000_000
NODE = "10.0.0.1:9878"
OTHER_NODE = "10.0.0.2:9878"


def _verifier(node: str = NODE) -> RequestVerifier:
    return RequestVerifier({CREDS.access_key: CREDS}, node)


def _header(
    body: bytes = b"{}",
    *,
    node: str = NODE,
    target: str = "/v1/brokers/register",
    ts: int = NOW,
    nonce: str = "n1",
    credentials: InnerCredentials = CREDS,
) -> str:
    return sign(credentials, "POST", node, target, body, timestamp_ms=ts, nonce=nonce)


def _check(
    header: str,
    *,
    method: str = "POST",
    target: str = "/v1/brokers/register",
    body: bytes = b"{}",
    now: int = NOW,
) -> Denial | None:
    """The whole check as a server runs it: the header first, then the body it names."""
    verdict = _verifier().verify(method, target, header, now)
    return verdict.denial or check_body(verdict.body_sha256, body)


def test_a_fresh_signature_of_the_same_request_is_accepted() -> None:
    verdict = _verifier().verify("POST", "/v1/brokers/register", _header(), NOW + 5)
    assert verdict.denial is None and verdict.skew_ms == -5
    assert check_body(verdict.body_sha256, b"{}") is None


def test_the_secret_never_travels() -> None:
    assert CREDS.secret_key not in _header()
    assert CREDS.secret_key not in repr(CREDS)


@pytest.mark.parametrize(
    ("method", "target"),
    [("PUT", "/v1/brokers/register"), ("POST", "/v1/brokers/apply-id"), ("POST", "/v1/brokers/register?x=1")],
)
def test_any_change_of_method_or_target_breaks_the_signature(method: str, target: str) -> None:
    denial = _check(_header(), method=method, target=target)
    assert denial is not None and denial.status == 401 and denial.reason == "wrong"


def test_another_body_than_the_signed_one_is_refused() -> None:
    denial = _check(_header(), body=b'{"brokerId": 2}')
    assert denial is not None and denial.status == 401 and denial.reason == "body"


def test_a_signature_made_for_another_node_is_refused_here() -> None:
    """Issue 45 finding 5: a captured signature replayed to another controller gains nothing."""
    denial = _check(_header(node=OTHER_NODE))
    assert denial is not None and denial.status == 401 and denial.reason == "other_node"
    assert OTHER_NODE in denial.remark and NODE in denial.remark
    # Changing the Node field to this node breaks the HMAC, which covers the node.
    forged = _header(node=OTHER_NODE).replace(f"Node={OTHER_NODE}", f"Node={NODE}")
    denial = _check(forged)
    assert denial is not None and denial.reason == "wrong"


def test_a_changed_content_digest_breaks_the_signature() -> None:
    header = _header()
    digest = header.split("ContentSha256=")[1].split(",")[0]
    forged = header.replace(digest, body_digest(b'{"brokerId": 2}'))
    denial = _check(forged, body=b'{"brokerId": 2}')
    assert denial is not None and denial.reason == "wrong"


def test_a_replayed_signature_is_refused() -> None:
    verifier = _verifier()
    assert verifier.verify("POST", "/v1/brokers/register", _header(), NOW).denial is None
    denial = verifier.verify("POST", "/v1/brokers/register", _header(), NOW + 10).denial
    assert denial is not None and "replay" in denial.remark and denial.reason == "replay"


@pytest.mark.parametrize("skew", [REPLAY_WINDOW_MS + 1, -REPLAY_WINDOW_MS - 1])
def test_a_timestamp_outside_the_window_is_refused_and_its_skew_known(skew: int) -> None:
    verdict = _verifier().verify("POST", "/v1/brokers/register", _header(ts=NOW + skew), NOW)
    denial = verdict.denial
    assert (
        denial is not None and denial.status == 401 and "clock" in denial.remark and denial.reason == "skew"
    )
    assert verdict.skew_ms == skew


def test_an_unknown_access_key_and_a_wrong_secret_are_refused_with_no_skew() -> None:
    forged = _header(credentials=InnerCredentials("intruder", "0123456789abcdef"))
    verdict = _verifier().verify("POST", "/v1/brokers/register", forged, NOW)
    assert verdict.denial is not None and verdict.denial.remark == "unknown access key"
    guessed = _header(credentials=InnerCredentials("broker", "wrong-secret!"), ts=NOW + 10**9)
    verdict = _verifier().verify("POST", "/v1/brokers/register", guessed, NOW)
    assert verdict.denial is not None and verdict.denial.remark == "wrong signature"
    assert verdict.skew_ms is None  # an HMAC that is not right says nothing about clocks


_FIELDS = "AccessKey=a, Node=h:1, Timestamp=1, Nonce=n, ContentSha256=" + "0" * 64 + ", Signature=s"


@pytest.mark.parametrize(
    "header",
    [
        "",
        "Bearer abc",
        "MQHA-HMAC-SHA256",
        "MQHA-HMAC-SHA256 AccessKey=a, Timestamp=1, Nonce=n, Signature=s",  # the old form: no node, no digest
        "MQHA-HMAC-SHA256 " + _FIELDS.replace("Timestamp=1", "Timestamp=x"),
        "MQHA-HMAC-SHA256 " + _FIELDS.replace("Nonce=n", "Nonce="),
        "MQHA-HMAC-SHA256 " + _FIELDS.replace("Node=h:1", "Node="),
        "MQHA-HMAC-SHA256 " + _FIELDS.replace("0" * 64, "0" * 63),
        "MQHA-HMAC-SHA256 AccessKey=b, " + _FIELDS,
        "MQHA-HMAC-SHA256 " + _FIELDS + ", Extra=1",
        "MQHA-HMAC-SHA256 " + _FIELDS.replace("Nonce=n", "Nonce=" + "n" * 65),
        "MQHA-HMAC-SHA256 " + "x" * 5000,
    ],
)
def test_malformed_headers_are_refused_without_error(header: str) -> None:
    denial = _verifier().verify("POST", "/x", header, NOW).denial
    assert denial is not None and denial.status == 401
    if header.startswith("MQHA") and len(header) > 20:
        assert parse_signed(header) is None
    assert parse_signed("MQHA-HMAC-SHA256 " + _FIELDS) is not None


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


def test_signatures_dated_before_the_guard_began_are_refused_until_it_is_lifted() -> None:
    guard = ReplayGuard(window_ms=1000, not_before_ms=NOW)
    refused = guard.admit("old", NOW - 1, NOW + 10)
    assert refused is not None and refused.reason == "before_start" and "sign again" in refused.remark
    assert guard.admit("new", NOW, NOW + 10) is None
    assert len(guard) == 1  # a refused nonce is not remembered
    guard.not_before_ms = None
    assert guard.admit("old", NOW - 1, NOW + 10) is None
