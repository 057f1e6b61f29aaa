"""The ACL 2.0 routes of the controller API (docs/architecture.md §12.11). SHELL (aiohttp).

Admin (the admin token), leader: ``POST /v1/acl/users/{create,update,delete}``, ``GET /v1/acl/users``
(``?username=`` getUser, ``?filter=`` listUser), ``POST /v1/acl/policies/{create,update,delete}``,
``GET /v1/acl/policies`` (``?subject=&resource=``). Broker credentials (mqproxy signs with the inner
credentials), leader: ``GET /v1/acl/book``, every user with its sealed password and every policy. No
route answers a password in clear. The leader seals a new password here (``mqha.security.sealed``,
under ``innerClientAuthenticationCredentials``) before the decision records it; the decisions are
``mqha.controller.acls``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web

from mqha.codes import ResponseCode
from mqha.controller import acls
from mqha.controller import http_kit as api
from mqha.controller.result import ControllerResult
from mqha.controller.state import ControllerState
from mqha.security.acl import AclError, check_password
from mqha.security.credentials import parse_inner_credentials
from mqha.security.sealed import seal
from mqha.wire import acl_api
from mqha.wire.controller_api import Reply


def _sealed(request: web.Request, body: acl_api.UserRequest) -> str | None:
    """The request's password sealed under the inner credentials (None: it names no password)."""
    if body.password is None:
        return None
    text = api.service_of(request).parts.config.get("innerClientAuthenticationCredentials") or ""
    if not text:
        remark = "ACL users need innerClientAuthenticationCredentials on the controllers (it seals passwords)"
        raise api.HttpError(400, Reply(ResponseCode.CONTROLLER_INVALID_REQUEST, remark))
    try:
        password = check_password(body.password)
    except AclError as exc:
        raise api.HttpError(400, Reply(ResponseCode.CONTROLLER_INVALID_REQUEST, str(exc))) from None
    return seal(parse_inner_credentials(text).secret_key, body.username, password)


async def _write(
    request: web.Request, username: str, decide: Callable[[ControllerState], ControllerResult]
) -> web.Response:
    return api.respond(
        request, await api.service_of(request).writes.acl_write(acls.acl_lock_key(username), decide)
    )


async def _read(request: web.Request, decide: Callable[[ControllerState], ControllerResult]) -> web.Response:
    return api.respond(request, await api.service_of(request).writes.acl_read(decide))


async def _user_body(request: web.Request) -> acl_api.UserRequest:
    body = await api.read_request(request, acl_api.UserRequest)
    api.require_admin(request)
    return body


async def create_user(request: web.Request) -> web.Response:
    body = await _user_body(request)
    sealed = _sealed(request, body)
    return await _write(request, body.username, lambda state: acls.handle_create_user(state, body, sealed))


async def update_user(request: web.Request) -> web.Response:
    body = await _user_body(request)
    sealed = _sealed(request, body)
    return await _write(request, body.username, lambda state: acls.handle_update_user(state, body, sealed))


async def delete_user(request: web.Request) -> web.Response:
    body = await _user_body(request)
    return await _write(request, body.username, lambda state: acls.handle_delete_user(state, body))


async def list_users(request: web.Request) -> web.Response:
    api.require_admin(request)
    query = api.parse(acl_api.UserQuery, api.query_params(request, ("username", "filter")))
    return await _read(request, lambda state: acls.handle_list_users(state, query))


async def _policy_body(request: web.Request, cls: type[Any]) -> Any:
    body = await api.read_request(request, cls)
    api.require_admin(request)
    return body


def _subject_key(subject: str) -> str:
    """The lock of a subject's policy: its user's (a malformed subject is refused by the decision)."""
    return subject.partition(":")[2] or subject


async def put_acl(request: web.Request) -> web.Response:
    body = await _policy_body(request, acl_api.PutAclRequest)
    return await _write(request, _subject_key(body.subject), lambda state: acls.handle_put_acl(state, body))


async def delete_acl(request: web.Request) -> web.Response:
    body = await _policy_body(request, acl_api.DeleteAclRequest)
    return await _write(
        request, _subject_key(body.subject), lambda state: acls.handle_delete_acl(state, body)
    )


async def list_acls(request: web.Request) -> web.Response:
    api.require_admin(request)
    query = api.parse(acl_api.AclQuery, api.query_params(request, ("subject", "resource")))
    return await _read(request, lambda state: acls.handle_list_acls(state, query))


async def acl_book(request: web.Request) -> web.Response:
    api.query_params(request, ())
    return await _read(request, acls.handle_acl_book)


ROUTES = (
    ("POST", "/v1/acl/users/create", "createUser", create_user),
    ("POST", "/v1/acl/users/update", "updateUser", update_user),
    ("POST", "/v1/acl/users/delete", "deleteUser", delete_user),
    ("GET", "/v1/acl/users", "listUser", list_users),
    ("POST", "/v1/acl/policies/create", "createAcl", put_acl),
    ("POST", "/v1/acl/policies/update", "updateAcl", put_acl),
    ("POST", "/v1/acl/policies/delete", "deleteAcl", delete_acl),
    ("GET", "/v1/acl/policies", "listAcl", list_acls),
    ("GET", "/v1/acl/book", "getAclBook", acl_book),
)
"""(method, path, name, handler) as ``http_api.ROUTES``; the names are RocketMQ's mqadmin commands."""
