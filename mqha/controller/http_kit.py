"""The controller HTTP API's kit, shared by every route module (``http_api`` and the routes grouped
by resource: ``topic_routes``, ``acl_routes``, ``history_route``). SHELL (aiohttp).

The typed answer (``respond``: a ``Reply`` as JSON, its HTTP status from the code), the answers the HTTP
layer decides itself (``HttpError``), and the strict request parsing: body within
``maxRequestBodyBytes`` and ``httpBodyTimeoutMills``, JSON straight into the request struct, query
and path parameters, and the caller's proof for a route (``identify``, ``require``).
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec
from aiohttp import web

from mqha.codes import ResponseCode, http_status_for
from mqha.controller.access import Access, Principal
from mqha.controller.service import ControllerService
from mqha.errors import MqhaError, RequestError
from mqha.security.http_limits import read_body
from mqha.security.signing import Denial
from mqha.wire import controller_api as api
from mqha.wire.codec import Request, decode_any
from mqha.wire.controller_api import Reply
from mqha.wire.types import NAME_RULE, is_valid_name

R = TypeVar("R", bound=Request)
B = TypeVar("B", api.ElectMasterRequest, api.AlterSyncStateSetRequest, api.CleanBrokerDataRequest)
Code = ResponseCode
SERVICE = web.AppKey("service", ControllerService)
CODE_KEY = web.RequestKey("mqha_code", str)
# What the Authorization header proved (access.Principal | Denial).
WHO_KEY = web.RequestKey("mqha_who", object)
RAW_BODY_KEY = web.RequestKey("mqha_raw_body", bytes)
BODY_SHA256_KEY = web.RequestKey("mqha_body_sha256", str)  # what a verified signature says the body hashes to


class HttpError(MqhaError):
    """An answer decided by the HTTP layer itself (bad body, auth)."""

    def __init__(self, status: int, reply: Reply) -> None:
        super().__init__(reply.remark)
        self.status = status
        self.reply = reply


def bad_request(remark: str, status: int = 400) -> HttpError:
    return HttpError(status, Reply(Code.CONTROLLER_INVALID_REQUEST, remark))


def respond(request: web.Request, reply: Reply, status: int | None = None) -> web.Response:
    request[CODE_KEY] = reply.code.name
    # msgspec straight from the payload struct: the stdlib encoder was 4 % of the leader's GIL time at
    # 2,000 writes/s (docs/performance.md).
    return web.Response(
        body=reply.encode(),
        status=status or http_status_for(reply.code),
        content_type="application/json",
    )


def service_of(request: web.Request) -> ControllerService:
    return request.app[SERVICE]


# ------------------------------------------------------------------------------------ parsing


async def read_body_checked(request: web.Request) -> bytes:
    """The body, reading at most ``maxRequestBodyBytes`` (413 beyond, without buffering it) within
    ``httpBodyTimeoutMills`` (408 after)."""
    if (checked := request.get(RAW_BODY_KEY)) is not None:  # already read for its signature
        return checked
    service = service_of(request)
    limit = service.max_message_bytes()
    if request.content_length is not None and request.content_length > limit:
        raise bad_request(f"request body of {request.content_length} bytes exceeds {limit} bytes", 413)
    timeout_ms = service.config_store.config["httpBodyTimeoutMills"]
    raw = await read_body(
        request.content,
        limit,
        timeout_ms / 1000,
        too_large=lambda: bad_request(f"request body exceeds {limit} bytes", 413),
        too_slow=lambda: bad_request(
            f"request body not received within httpBodyTimeoutMills={timeout_ms}", 408
        ),
    )
    if not raw.strip():
        raise bad_request("request body is empty; expected a JSON object")
    return raw


async def read_json(request: web.Request) -> Any:
    """The body as a JSON value (bodies without a request struct: the config update), nested at most
    ``MAX_JSON_DEPTH`` deep."""
    try:
        return decode_any(await read_body_checked(request))
    except msgspec.DecodeError as exc:
        raise bad_request(f"malformed JSON: {exc}") from None


async def read_request(request: web.Request, cls: type[R]) -> R:
    """The body decoded as the request struct ``cls`` (one pass: JSON syntax, types, fields)."""
    raw = await read_body_checked(request)
    try:
        return cls.decode(raw)
    except RequestError as exc:
        raise HttpError(400, Reply(exc.code, exc.remark)) from None


def query_params(
    request: web.Request, allowed: tuple[str, ...], multi: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Query parameters as a JSON-like object; unknown or repeated (single-valued) ones are 400."""
    result: dict[str, Any] = {}
    for key in dict.fromkeys(request.query.keys()):
        if key not in allowed:
            raise bad_request(f"unknown query parameter '{key}'")
        values = request.query.getall(key)
        if key in multi:
            result[key] = list(values)
        elif len(values) > 1:
            raise bad_request(f"query parameter '{key}' given more than once")
        else:
            result[key] = values[0]
    return result


def with_path_name(request: web.Request, body: B) -> B:
    """Merge ``{brokerName}`` of the path into the request (checked by the name rule; a differing body
    value is 400; an empty one counts as absent, the requests' default)."""
    name = path_name(request)
    given: str = body.broker_name  # type: ignore[attr-defined]
    if given == name:
        return body
    if given:
        raise bad_request(f"field 'brokerName' ({given!r}) does not match the path ({name!r})")
    return msgspec.structs.replace(body, broker_name=name)


def path_name(request: web.Request) -> str:
    """``{brokerName}`` of the path, checked by the same rule as the bodies' names."""
    name = request.match_info["brokerName"]
    if not is_valid_name(name):
        raise bad_request(f"path parameter 'brokerName': expected {NAME_RULE}, got {name[:140]!r}")
    return name


def parse(cls: type[R], obj: Any) -> R:
    try:
        return cls.from_json(obj)
    except RequestError as exc:
        raise HttpError(400, Reply(exc.code, exc.remark)) from None


def identify(request: web.Request) -> Principal | Denial:
    """Who the request's ``Authorization`` header proves, from the headers alone; once per request (a
    signature's nonce is spent by its first check)."""
    who = request.get(WHO_KEY)
    if who is None:
        header = request.headers.get("Authorization")
        who, digest = service_of(request).auth.identify(request.method, request.raw_path, header)
        request[WHO_KEY], request[BODY_SHA256_KEY] = who, digest
    return who


def require(request: web.Request, required: Access) -> None:
    denied = service_of(request).auth.permit(required, identify(request))
    if denied is not None:
        raise HttpError(*denied)


def require_admin(request: web.Request) -> None:
    require(request, Access.ADMIN)
