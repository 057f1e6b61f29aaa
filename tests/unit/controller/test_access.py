"""The controller's authentication decision (mqha/controller/access.py): every route kind, every kind of
proof, with authentication on and off."""

from __future__ import annotations

import pytest

from mqha.controller import access, openapi
from mqha.controller.access import Access, Principal, identify, permit, route_access
from mqha.controller.http_api import ROUTES
from mqha.security.credentials import InnerCredentials
from mqha.security.signing import Denial, RequestVerifier, sign

TOKEN = "admin-token-0123"
CREDENTIALS = InnerCredentials("inner", "inner-secret-0123")
BROKER_PATHS = {"applyBrokerId", "registerBroker", "brokerHeartbeat", "brokerSession", "alterSyncStateSet"}
INNER_CLIENT_PATHS = {"updateConsumerOffset"}  # mqproxy signs with the inner credentials (§13)
ACL_READS = ("listUser", "listAcl", "getAclBook")  # users and policies are not public (§12.11)


def test_every_mutating_route_needs_a_proof_and_public_reads_stay_open() -> None:
    for method, _path, name, _ in ROUTES:
        kind = route_access(method, name)
        if method == "GET" and name not in ("brokerSession", "getHistoryRows", *ACL_READS):
            assert kind is Access.OPEN, name
        elif name in BROKER_PATHS | INNER_CLIENT_PATHS | {"electMaster", "getAclBook"}:
            assert kind is Access.BROKER, name
        else:
            assert kind is Access.ADMIN, name
    assert route_access("POST", "someNewAdminCall") is Access.ADMIN  # closed until decided otherwise
    # A read, but of every acknowledged message id and the whole history: the admin token.
    assert route_access("GET", "getHistoryRows") is Access.ADMIN


def _identify(header: str | None, enabled: bool = True, verdict: Denial | None = None) -> object:
    calls: list[int] = []

    def verify() -> Denial | None:
        calls.append(1)
        return verdict

    who = identify(header, enabled=enabled, admin_token=TOKEN, verify=verify)
    signed = bool(header) and header.startswith("MQHA-HMAC-SHA256 ")  # type: ignore[union-attr]
    assert len(calls) == (1 if enabled and signed else 0)  # a nonce is spent only when checked
    return who


def test_identify_names_what_a_header_proves() -> None:
    signed = "MQHA-HMAC-SHA256 AccessKey=a, Timestamp=1, Nonce=n, Signature=s"
    assert _identify(None) is Principal.ANONYMOUS
    assert _identify("") is Principal.ANONYMOUS
    assert _identify(f"Bearer {TOKEN}") is Principal.ADMIN
    assert _identify(f"bearer  {TOKEN} ") is Principal.ADMIN
    assert _identify("Bearer nope") is Principal.WRONG_TOKEN
    assert _identify("Basic YTpi") is Principal.UNKNOWN
    assert _identify(signed) is Principal.BROKER
    replay = Denial(401, "signature already used (replay)")
    assert _identify(signed, verdict=replay) is replay
    assert _identify(signed, enabled=False) is Principal.UNKNOWN  # signatures mean nothing when off


ON_CASES = [
    # (access, who, expected status or None)
    (Access.OPEN, Principal.ANONYMOUS, None),
    (Access.OPEN, Principal.WRONG_TOKEN, None),
    (Access.BROKER, Principal.BROKER, None),
    (Access.BROKER, Principal.ADMIN, None),
    (Access.BROKER, Principal.ANONYMOUS, 401),
    (Access.BROKER, Principal.UNKNOWN, 401),
    (Access.BROKER, Principal.WRONG_TOKEN, 403),
    (Access.BROKER, Denial(401, "wrong signature"), 401),
    (Access.ADMIN, Principal.ADMIN, None),
    (Access.ADMIN, Principal.BROKER, 403),
    (Access.ADMIN, Principal.ANONYMOUS, 401),
    (Access.ADMIN, Principal.UNKNOWN, 401),
    (Access.ADMIN, Principal.WRONG_TOKEN, 403),
    (Access.ADMIN, Denial(401, "expired"), 401),
]


@pytest.mark.parametrize(("required", "who", "status"), ON_CASES)
def test_permit_with_authentication_on(required: Access, who: Principal | Denial, status: int | None) -> None:
    denied = permit(required, who, enabled=True, admin_token=TOKEN)
    assert (denied and denied.status) == status


@pytest.mark.parametrize("who", [*Principal])
def test_permit_with_authentication_off_is_the_old_admin_token_check(who: Principal) -> None:
    assert permit(Access.BROKER, who, enabled=False, admin_token=TOKEN) is None
    assert permit(Access.ADMIN, who, enabled=False, admin_token="") is None
    denied = permit(Access.ADMIN, who, enabled=False, admin_token=TOKEN)
    known = {Principal.ADMIN: None, Principal.ANONYMOUS: access.NO_ADMIN_TOKEN}
    expected = known.get(who, access.WRONG_TOKEN)
    assert denied == expected


def test_a_real_signature_end_to_end_through_identify() -> None:
    verifier = RequestVerifier({CREDENTIALS.access_key: CREDENTIALS}, "127.0.0.1:9878")
    body = b'{"brokerName":"b"}'
    header = sign(
        CREDENTIALS,
        "POST",
        "127.0.0.1:9878",
        "/v1/brokers/register",
        body,
        timestamp_ms=1_000_000,
        nonce="n1",
    )

    def who(target: str, now_ms: int = 1_000_500) -> object:
        return identify(
            header,
            enabled=True,
            admin_token=TOKEN,
            verify=lambda: verifier.verify("POST", target, header, now_ms).denial,
        )

    assert who("/v1/brokers/apply-id") == Denial(401, "wrong signature", "wrong")  # another path
    assert who("/v1/brokers/register", now_ms=1_000_000 + 61_000).status == 401  # type: ignore[attr-defined]
    assert who("/v1/brokers/register") is Principal.BROKER
    assert who("/v1/brokers/register").remark.endswith("(replay)")  # type: ignore[attr-defined]


def test_openapi_states_the_access_the_server_enforces() -> None:
    doc = openapi.document()
    for method, path, name, _ in ROUTES:
        operation = doc["paths"][path][method.lower()]
        schemes = {next(iter(item)) for item in operation.get("security", [])}
        expected = {
            Access.OPEN: set(),
            Access.BROKER: {"innerSignature", "adminToken"},
            Access.ADMIN: {"adminToken"},
        }[route_access(method, name)]
        assert schemes == expected, name
        assert ({"401", "403"} <= set(operation["responses"])) == bool(expected), name
