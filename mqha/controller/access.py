"""Who may call which controller route: the one authentication decision of the HTTP API (core).

Three kinds of routes (docs/architecture.md §3.3):

* ``OPEN`` -- reads of public state (metadata, the masked config, status, groups, replica-info,
  sync-state-data, next-id, metrics, healthz, the console, openapi): no credential, ever;
* ``BROKER`` -- what brokers call (apply-id, register, heartbeat, the session upgrade, sync-state-set,
  elect) and mqproxy's consumer-offset commits: with ``authenticationEnabled`` a valid
  ``MQHA-HMAC-SHA256`` signature by ``innerClientAuthenticationCredentials``, or the admin token (an
  operator may do what a broker can); without it, open as before;
* ``ADMIN`` -- config PUT, clean, a designated elect and any other non-GET route: the admin token
  (``Authorization: Bearer <adminAuthToken>``); a broker's signature is not enough (403). Without
  ``authenticationEnabled`` the token is checked only when one is set, as before.

The answer is 401 when the request proves nothing (no header, an unknown scheme, a bad, expired or
replayed signature) and 403 when it proves the wrong thing (a wrong token, a broker on an admin
call). Pure: the shell (``mqha.controller.auth``) verifies signatures with the clock and passes the
verdict in.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from mqha.security.signing import MISSING as NO_SIGNATURE
from mqha.security.signing import SCHEME, Denial, bearer_matches


class Access(enum.Enum):
    """What a route requires."""

    OPEN = "open"
    BROKER = "broker"
    ADMIN = "admin"


class Principal(enum.Enum):
    """What an ``Authorization`` header proves."""

    ANONYMOUS = "anonymous"  # no header
    UNKNOWN = "unknown"  # a header that is neither a signature nor a bearer token
    WRONG_TOKEN = "wrong token"  # a bearer token that is not the admin token
    BROKER = "broker"  # a valid signature by the inner credentials
    ADMIN = "admin"  # the admin token


ROUTE_ACCESS: dict[str, Access] = {
    "applyBrokerId": Access.BROKER,
    "registerBroker": Access.BROKER,
    "brokerHeartbeat": Access.BROKER,
    "brokerSession": Access.BROKER,
    "alterSyncStateSet": Access.BROKER,
    "electMaster": Access.BROKER,  # ADMIN when designated: the handler asks again after decoding
    "updateConsumerOffset": Access.BROKER,  # mqproxy commits with the inner credentials (§13)
    "updateControllerConfig": Access.ADMIN,
    "cleanBrokerData": Access.ADMIN,
    "addControllerPeer": Access.ADMIN,
    "removeControllerPeer": Access.ADMIN,
    "getHistoryRows": Access.ADMIN,  # a read, but of every message id the cluster acknowledged
    "listUser": Access.ADMIN,  # ACL reads (§12.11): who may do what is the operator's business
    "listAcl": Access.ADMIN,
    "getAclBook": Access.BROKER,  # mqproxy's: sealed passwords and every policy
}
"""Routes (by name, ``mqha.controller.http_api.ROUTES``) that are not open."""

NO_ADMIN_TOKEN = Denial(401, "this call needs 'Authorization: Bearer <adminAuthToken>'")
WRONG_TOKEN = Denial(403, "wrong admin token")
BROKER_NOT_ADMIN = Denial(403, "an admin call: broker credentials do not allow it, it needs the admin token")
UNKNOWN_SCHEME = Denial(
    401, f"unsupported Authorization scheme; expected '{SCHEME} ...' or 'Bearer <adminAuthToken>'"
)


def route_access(method: str, name: str) -> Access:
    """A route's access: the table's, else open for reads and admin for anything else (a new
    mutating route is closed until someone decides otherwise)."""
    default = Access.OPEN if method in ("GET", "HEAD") else Access.ADMIN
    return ROUTE_ACCESS.get(name, default)


def is_signed(header: str) -> bool:
    return header.lstrip().startswith(SCHEME + " ")


def identify(
    header: str | None, *, enabled: bool, admin_token: str, verify: Callable[[], Denial | None]
) -> Principal | Denial:
    """What ``header`` proves. ``verify`` checks its signature (called only for a signed header with
    authentication on: it spends the nonce); a bad signature is its ``Denial``."""
    if not header:
        return Principal.ANONYMOUS
    if enabled and is_signed(header):
        return verify() or Principal.BROKER
    if header.strip().partition(" ")[0].lower() == "bearer":
        return Principal.ADMIN if bearer_matches(header, admin_token) else Principal.WRONG_TOKEN
    return Principal.UNKNOWN


def permit(access: Access, who: Principal | Denial, *, enabled: bool, admin_token: str) -> Denial | None:
    """None when ``who`` may call a route of ``access``; else why not (401 or 403)."""
    if access is Access.OPEN:
        return None
    if not enabled:  # the behaviour before authentication existed: only admin calls, only with a token
        if access is Access.BROKER or not admin_token or who is Principal.ADMIN:
            return None
        return NO_ADMIN_TOKEN if who is Principal.ANONYMOUS else WRONG_TOKEN
    if isinstance(who, Denial):
        return who
    if who is Principal.ADMIN:
        return None
    if who is Principal.BROKER:
        return None if access is Access.BROKER else BROKER_NOT_ADMIN
    if who is Principal.WRONG_TOKEN:
        return WRONG_TOKEN
    if who is Principal.UNKNOWN:
        return UNKNOWN_SCHEME
    return NO_SIGNATURE if access is Access.BROKER else NO_ADMIN_TOKEN
