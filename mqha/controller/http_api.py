"""The controller's HTTP API (aiohttp; shell): routes, request parsing, code -> HTTP status, metrics.

Routes and JSON shapes are docs/architecture.md §3's (topics: ``topic_routes``); ``mqha.controller.openapi``
describes each one and a test checks that both list the same routes. Every answer (errors included,
also 404/405 of unknown routes) is a JSON object ``{"code", "codeName", "remark", ...payload}``, except the
bodies that are not API answers: ``/metrics`` (Prometheus text), the web console's page and assets
(``/``, ``/console/*``) and its event stream (``/v1/console/events``, server-sent events).
HTTP status from the code (``mqha.codes.http_status_for``): 200 success; 400 invalid request (2005);
404 unknown broker set (2008, 2010); 409 fenced or rejected; 421 not leader (2007, with
``leaderAddress``); 503 no quorum (14); 500 system error (1). The HTTP layer adds: 401/403 (code 16)
for a request without / with the wrong proof (``mqha.controller.access``), 413 (code 2005) for a body
over ``maxRequestBodyBytes``, 404/405 (code 3) for unknown routes and methods.

Before a request reaches a handler, the site caps connections and the keep-alive timer bounds how
long a request head may take (``mqha.security.http_limits``). Order of checks per request: with
``authenticationEnabled``, the caller's proof for the route from the headers alone (``_authenticate``:
a signature names the body's SHA-256, so a refused caller's body is never read and its connection is
closed) -> body size and time (``httpBodyTimeoutMills``), and with a signature the body's SHA-256 ->
JSON syntax
and fields in one pass (``mqha.wire``: the body's bytes decode straight into the request struct;
strict: types, ranges, required, unknown -> 400 naming the field) -> path parameter -> admin token
(a designated elect; without ``authenticationEnabled`` every admin call is checked here, as before)
-> leadership -> the decision. A bad request is bad on any node, so validation comes before the
leader check; nothing is decided or changed before the last step. Replies stay typed until ``respond``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any, TypeVar

import msgspec
from aiohttp import web

from mqha.codes import ResponseCode, http_status_for
from mqha.controller import acl_routes, history_route, openapi, topic_routes
from mqha.controller.access import Access, Principal, route_access
from mqha.controller.console_view import sse_message
from mqha.controller.service import ControllerService
from mqha.errors import RequestError
from mqha.process import metrics_response
from mqha.security.http_limits import read_body
from mqha.security.signing import REFUSED_HEADER, Denial
from mqha.wire import controller_api as api
from mqha.wire.codec import Request, decode_any
from mqha.wire.controller_api import Reply
from mqha.wire.controller_quorum import AddControllerPeerRequest, RemoveControllerPeerRequest
from mqha.wire.types import NAME_RULE, is_valid_name

R = TypeVar("R", bound=Request)
B = TypeVar("B", api.ElectMasterRequest, api.AlterSyncStateSetRequest, api.CleanBrokerDataRequest)

log = logging.getLogger(__name__)

Code = ResponseCode
SERVICE = web.AppKey("service", ControllerService)
_CODE = web.RequestKey("mqha_code", str)
_WHO = web.RequestKey("mqha_who", object)  # what the Authorization header proved (access.Principal | Denial)
_RAW_BODY = web.RequestKey("mqha_raw_body", bytes)
_BODY_SHA256 = web.RequestKey("mqha_body_sha256", str)  # what a verified signature says the body hashes to
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
# Sessions and console streams last as long as their peer: no latency sample.
_UNTIMED = frozenset({"brokerSession", "consoleEvents"})

CONSOLE_ASSETS = {
    "index.html": "text/html",
    "app.js": "text/javascript",
    "style.css": "text/css",
}
"""The web console's files (``mqha/controller/console/``, package data), by name, with their media type."""
CONSOLE_RECHECK = 0.5  # s: soft state (heartbeat expiry, offsets) changes without an event
CONSOLE_KEEPALIVE = 15.0  # s: an SSE comment line keeps idle proxies from closing the stream

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class HttpError(Exception):
    """An answer decided by the HTTP layer itself (bad body, auth)."""

    def __init__(self, status: int, reply: Reply) -> None:
        super().__init__(reply.remark)
        self.status = status
        self.reply = reply


def _bad_request(remark: str, status: int = 400) -> HttpError:
    return HttpError(status, Reply(Code.CONTROLLER_INVALID_REQUEST, remark))


def respond(request: web.Request, reply: Reply, status: int | None = None) -> web.Response:
    request[_CODE] = reply.code.name
    # msgspec straight from the payload struct: the stdlib encoder was 4 % of the leader's GIL time at
    # 2,000 writes/s (docs/performance.md).
    return web.Response(
        body=reply.encode(),
        status=status or http_status_for(reply.code),
        content_type="application/json",
    )


def _service(request: web.Request) -> ControllerService:
    return request.app[SERVICE]


# ------------------------------------------------------------------------------------ parsing


async def _read_body(request: web.Request) -> bytes:
    """The body, reading at most ``maxRequestBodyBytes`` (413 beyond, without buffering it) within
    ``httpBodyTimeoutMills`` (408 after)."""
    if (checked := request.get(_RAW_BODY)) is not None:  # already read for its signature
        return checked
    service = _service(request)
    limit = service.max_message_bytes()
    if request.content_length is not None and request.content_length > limit:
        raise _bad_request(f"request body of {request.content_length} bytes exceeds {limit} bytes", 413)
    timeout_ms = service.config_store.config["httpBodyTimeoutMills"]
    raw = await read_body(
        request.content,
        limit,
        timeout_ms / 1000,
        too_large=lambda: _bad_request(f"request body exceeds {limit} bytes", 413),
        too_slow=lambda: _bad_request(
            f"request body not received within httpBodyTimeoutMills={timeout_ms}", 408
        ),
    )
    if not raw.strip():
        raise _bad_request("request body is empty; expected a JSON object")
    return raw


async def _read_json(request: web.Request) -> Any:
    """The body as a JSON value (bodies without a request struct: the config update), nested at most
    ``MAX_JSON_DEPTH`` deep."""
    try:
        return decode_any(await _read_body(request))
    except msgspec.DecodeError as exc:
        raise _bad_request(f"malformed JSON: {exc}") from None


async def _read_request(request: web.Request, cls: type[R]) -> R:
    """The body decoded as the request struct ``cls`` (one pass: JSON syntax, types, fields)."""
    raw = await _read_body(request)
    try:
        return cls.decode(raw)
    except RequestError as exc:
        raise HttpError(400, Reply(exc.code, exc.remark)) from None


def _query(request: web.Request, allowed: tuple[str, ...], multi: tuple[str, ...] = ()) -> dict[str, Any]:
    """Query parameters as a JSON-like object; unknown or repeated (single-valued) ones are 400."""
    result: dict[str, Any] = {}
    for key in dict.fromkeys(request.query.keys()):
        if key not in allowed:
            raise _bad_request(f"unknown query parameter '{key}'")
        values = request.query.getall(key)
        if key in multi:
            result[key] = list(values)
        elif len(values) > 1:
            raise _bad_request(f"query parameter '{key}' given more than once")
        else:
            result[key] = values[0]
    return result


def _with_path_name(request: web.Request, body: B) -> B:
    """Merge ``{brokerName}`` of the path into the request (checked by the name rule; a differing body
    value is 400; an empty one counts as absent, the requests' default)."""
    name = _path_name(request)
    given: str = body.broker_name  # type: ignore[attr-defined]
    if given == name:
        return body
    if given:
        raise _bad_request(f"field 'brokerName' ({given!r}) does not match the path ({name!r})")
    return msgspec.structs.replace(body, broker_name=name)


def _path_name(request: web.Request) -> str:
    """``{brokerName}`` of the path, checked by the same rule as the bodies' names."""
    name = request.match_info["brokerName"]
    if not is_valid_name(name):
        raise _bad_request(f"path parameter 'brokerName': expected {NAME_RULE}, got {name[:140]!r}")
    return name


def _parse(cls: type[R], obj: Any) -> R:
    try:
        return cls.from_json(obj)
    except RequestError as exc:
        raise HttpError(400, Reply(exc.code, exc.remark)) from None


def _identify(request: web.Request) -> Principal | Denial:
    """Who the request's ``Authorization`` header proves, from the headers alone; once per request (a
    signature's nonce is spent by its first check)."""
    who = request.get(_WHO)
    if who is None:
        header = request.headers.get("Authorization")
        who, digest = _service(request).auth.identify(request.method, request.raw_path, header)
        request[_WHO], request[_BODY_SHA256] = who, digest
    return who


def _require(request: web.Request, required: Access) -> None:
    denied = _service(request).auth.permit(required, _identify(request))
    if denied is not None:
        raise HttpError(*denied)


def _require_admin(request: web.Request) -> None:
    _require(request, Access.ADMIN)


# ----------------------------------------------------------------------------------- handlers


async def get_metadata(request: web.Request) -> web.Response:
    return respond(request, _service(request).metadata())


async def get_config(request: web.Request) -> web.Response:
    return respond(request, _service(request).get_config())


async def update_config(request: web.Request) -> web.Response:
    body = await _read_json(request)
    _require_admin(request)
    return respond(request, _service(request).update_config(body))


async def get_status(request: web.Request) -> web.Response:
    return respond(request, _service(request).node_status())


async def get_storage(request: web.Request) -> web.Response:
    return respond(request, _service(request).get_storage())


async def get_quorum(request: web.Request) -> web.Response:
    return respond(request, _service(request).get_quorum())


async def add_controller_peer(request: web.Request) -> web.Response:
    req = await _read_request(request, AddControllerPeerRequest)
    _require_admin(request)
    return respond(request, await _service(request).add_controller_peer(req.raft_id))


async def remove_controller_peer(request: web.Request) -> web.Response:
    req = await _read_request(request, RemoveControllerPeerRequest)
    _require_admin(request)
    return respond(request, await _service(request).remove_controller_peer(req.raft_id, req.address))


async def get_next_broker_id(request: web.Request) -> web.Response:
    query = _query(request, ("clusterName", "brokerName"))
    req = _parse(api.GetNextBrokerIdRequest, query)
    return respond(request, await _service(request).get_next_broker_id(req))


async def apply_broker_id(request: web.Request) -> web.Response:
    req = await _read_request(request, api.ApplyBrokerIdRequest)
    return respond(request, await _service(request).apply_broker_id(req))


async def register_broker(request: web.Request) -> web.Response:
    req = await _read_request(request, api.RegisterBrokerRequest)
    return respond(request, await _service(request).register_broker(req))


async def broker_heartbeat(request: web.Request) -> web.Response:
    req = await _read_request(request, api.BrokerHeartbeatRequest)
    return respond(request, _service(request).record_heartbeat(req))


async def broker_session(request: web.Request) -> web.StreamResponse:
    if not web.WebSocketResponse().can_prepare(request).ok:
        raise _bad_request("GET /v1/brokers/session must be a WebSocket upgrade")
    return await _service(request).sessions.handle(request)


async def elect_master(request: web.Request) -> web.Response:
    req = _with_path_name(request, await _read_request(request, api.ElectMasterRequest))
    if req.designate_elect:
        _require_admin(request)
    return respond(request, await _service(request).elect_master(req))


async def alter_sync_state_set(request: web.Request) -> web.Response:
    req = _with_path_name(request, await _read_request(request, api.AlterSyncStateSetRequest))
    return respond(request, await _service(request).alter_sync_state_set(req))


async def get_replica_info(request: web.Request) -> web.Response:
    _query(request, ())
    req = _parse(api.GetReplicaInfoRequest, {"brokerName": request.match_info["brokerName"]})
    return respond(request, await _service(request).get_replica_info(req))


async def get_sync_state_data(request: web.Request) -> web.Response:
    query = _query(request, ("brokerName", "clusterName"), multi=("brokerName",))
    obj: dict[str, Any] = {"brokerNames": query.get("brokerName", [])}
    if "clusterName" in query:
        obj["clusterName"] = query["clusterName"]
    req = _parse(api.GetSyncStateDataRequest, obj)
    return respond(request, await _service(request).get_sync_state_data(req))


async def clean_broker_data(request: web.Request) -> web.Response:
    req = _with_path_name(request, await _read_request(request, api.CleanBrokerDataRequest))
    _require_admin(request)
    return respond(request, await _service(request).clean_broker_data(req))


async def list_groups(request: web.Request) -> web.Response:
    _query(request, ())
    return respond(request, await _service(request).list_groups())


async def healthz(request: web.Request) -> web.Response:
    service = _service(request)
    problem, damage = service.health_problem(), service.damage()
    code = Code.SERVICE_NOT_AVAILABLE if problem else Code.SUCCESS
    return respond(request, Reply(code, problem, {"healthy": not problem, "damage": damage}))


async def livez(request: web.Request) -> web.Response:
    """200 while the process answers, whatever its state: Kubernetes' liveness probe (``/healthz``,
    503 for a damaged member, is readiness: a restart would not mend the damage)."""
    return respond(request, Reply(Code.SUCCESS, "", {"alive": True}))


async def metrics(request: web.Request) -> web.Response:
    request[_CODE] = Code.SUCCESS.name
    return metrics_response(_service(request).metrics.render())


@functools.cache
def _console_file(name: str) -> bytes:
    return resources.files("mqha.controller").joinpath("console", name).read_bytes()


def _console_response(request: web.Request, name: str) -> web.Response:
    request[_CODE] = Code.SUCCESS.name
    return web.Response(
        body=_console_file(name),
        content_type=CONSOLE_ASSETS[name],
        charset="utf-8",
        headers={"Cache-Control": "no-cache"},
    )


async def console_index(request: web.Request) -> web.Response:
    return _console_response(request, "index.html")


async def console_asset(request: web.Request) -> web.Response:
    name = request.match_info["asset"]
    if name not in CONSOLE_ASSETS or name == "index.html":
        raise HttpError(404, Reply(Code.REQUEST_CODE_NOT_SUPPORTED, f"no console asset {name!r}"))
    return _console_response(request, name)


async def console_events(request: web.Request) -> web.StreamResponse:
    """Server-sent events: a ``snapshot`` event at once and after every change of the document. At most
    ``consoleMaxStreams`` at once (503, code 2, beyond); the streams share one snapshot per change."""
    service = _service(request)
    feed = service.console
    most = service.config_store.config["consoleMaxStreams"]
    if feed.streams >= most:
        raise HttpError(503, Reply(Code.SYSTEM_BUSY, f"too many console streams (consoleMaxStreams={most})"))
    request[_CODE] = Code.SUCCESS.name
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    feed.streams += 1
    try:
        await response.prepare(request)
        await _stream_console(request, response)
    except ConnectionResetError:  # the browser went away
        pass
    finally:
        feed.streams -= 1
    return response


async def _stream_console(request: web.Request, response: web.StreamResponse) -> None:
    service = _service(request)
    feed = service.console
    last: dict[str, Any] | None = None
    generation = feed.generation
    written = time.monotonic()
    await response.write(b"retry: 1000\n\n")  # EventSource reconnects after 1 s
    while not feed.closed and request.transport is not None and not request.transport.is_closing():
        snapshot = feed.shared_snapshot(service.console_snapshot, time.monotonic(), CONSOLE_RECHECK / 2)
        if snapshot != last:
            await response.write(sse_message("snapshot", snapshot))
            last, written = snapshot, time.monotonic()
        elif time.monotonic() - written >= CONSOLE_KEEPALIVE:
            await response.write(b": keepalive\n\n")
            written = time.monotonic()
        generation = await feed.wait_change(generation, CONSOLE_RECHECK)


async def console_analysis(request: web.Request) -> web.Response:
    _query(request, ())
    return respond(request, await asyncio.to_thread(_service(request).console_analysis))


async def openapi_json(request: web.Request) -> web.Response:
    request[_CODE] = Code.SUCCESS.name
    return web.json_response(openapi.document())


# (method, path, name, handler): the name is the ``api`` label of the metrics and the operationId.
ROUTES: tuple[tuple[str, str, str, Handler], ...] = (
    ("GET", "/v1/controller/metadata", "getControllerMetadata", get_metadata),
    ("GET", "/v1/controller/config", "getControllerConfig", get_config),
    ("PUT", "/v1/controller/config", "updateControllerConfig", update_config),
    ("GET", "/v1/controller/status", "getControllerStatus", get_status),
    ("GET", "/v1/controller/storage", "getControllerStorage", get_storage),
    ("GET", "/v1/controller/quorum", "getControllerQuorum", get_quorum),
    ("POST", "/v1/controller/peers/add", "addControllerPeer", add_controller_peer),
    ("POST", "/v1/controller/peers/remove", "removeControllerPeer", remove_controller_peer),
    ("GET", "/v1/brokers/next-id", "getNextBrokerId", get_next_broker_id),
    ("POST", "/v1/brokers/apply-id", "applyBrokerId", apply_broker_id),
    ("POST", "/v1/brokers/register", "registerBroker", register_broker),
    ("GET", "/v1/brokers/session", "brokerSession", broker_session),
    ("POST", "/v1/brokers/heartbeat", "brokerHeartbeat", broker_heartbeat),
    ("GET", "/v1/groups", "listGroups", list_groups),
    ("POST", "/v1/groups/{brokerName}/elect", "electMaster", elect_master),
    ("POST", "/v1/groups/{brokerName}/sync-state-set", "alterSyncStateSet", alter_sync_state_set),
    ("GET", "/v1/groups/{brokerName}/replica-info", "getReplicaInfo", get_replica_info),
    ("POST", "/v1/groups/{brokerName}/clean", "cleanBrokerData", clean_broker_data),
    ("GET", "/v1/sync-state-data", "getSyncStateData", get_sync_state_data),
    ("GET", "/metrics", "metrics", metrics),
    ("GET", "/healthz", "healthz", healthz),
    ("GET", "/livez", "livez", livez),
    ("GET", "/openapi.json", "openapi", openapi_json),
    ("GET", "/", "consoleIndex", console_index),
    ("GET", "/console/{asset}", "consoleAsset", console_asset),
    ("GET", "/v1/console/events", "consoleEvents", console_events),
    ("GET", "/v1/console/analysis", "consoleAnalysis", console_analysis),
    ("GET", "/v1/history/rows", "getHistoryRows", history_route.get_history_rows),  # NDJSON
    *topic_routes.ROUTES,
    *acl_routes.ROUTES,
)


@web.middleware
async def _envelope(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Errors -> JSON envelope; request count and latency per API and code."""
    started = time.perf_counter()
    api = request.match_info.route.name or "unknown"
    try:
        response = await handler(request)
    except HttpError as exc:
        response = respond(request, exc.reply, exc.status)
        if not request.content.is_eof():  # a refused body is not drained: the connection closes
            response.force_close()
        if isinstance(who := request.get(_WHO), Denial) and who.reason:  # e.g. skew: the broker counts it
            response.headers[REFUSED_HEADER] = who.reason
    except web.HTTPException as exc:  # the router's 404 / 405
        if exc.status < 400:
            raise
        reply = Reply(Code.REQUEST_CODE_NOT_SUPPORTED, f"{request.method} {request.path}: {exc.reason}")
        response = respond(request, reply, exc.status)
    except Exception as exc:
        log.exception("%s %s failed", request.method, request.path)
        response = respond(request, Reply(Code.SYSTEM_ERROR, f"internal error: {type(exc).__name__}"), 500)
    if api not in _UNTIMED:
        service = request.app[SERVICE]
        code = request.get(_CODE, "UNKNOWN")
        service.metrics.observe_request(api, code, time.perf_counter() - started)
    return response


_WHILE_STARTING = frozenset({"getControllerStorage", "healthz", "livez"})
"""Routes a node answers before its Raft member runs (peers ask a pending node about its store)."""


@web.middleware
async def _until_started(request: web.Request, handler: Handler) -> web.StreamResponse:
    """503 (code 14) for every route but ``_WHILE_STARTING`` until the store's role is decided and the
    Raft member runs (docs/raft.md §10)."""
    if not _service(request).started and request.match_info.route.name not in _WHILE_STARTING:
        reply = Reply(Code.SERVICE_NOT_AVAILABLE, "starting: this controller has not joined its cluster yet")
        raise HttpError(503, reply)
    return await handler(request)


@web.middleware
async def _authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
    """With ``authenticationEnabled``: the caller's proof, from the headers, before any body byte is
    read (an unauthenticated peer costs one HMAC and learns nothing). Then the body is read (and kept
    for the handler); a signature's ``ContentSha256`` must be its hash."""
    name = request.match_info.route.name
    if name is None:  # no such route: the router's 404 / 405
        return await handler(request)
    required = route_access(request.method, name)
    if _service(request).auth.enabled and required is not Access.OPEN:
        _require(request, required)
        body = await _read_body(request) if request.method in _BODY_METHODS else b""
        if (wrong := _service(request).auth.check_body(request.get(_BODY_SHA256, ""), body)) is not None:
            raise HttpError(*wrong)
        request[_RAW_BODY] = body
    return await handler(request)


async def _on_shutdown(app: web.Application) -> None:
    service = app[SERVICE]
    service.begin_stop()  # a session closing now is a controller shutdown, not a broker crash
    await service.sessions.close_all()


def build_app(service: ControllerService) -> web.Application:
    # Bodies are read by ``_read_json`` with the live ``maxRequestBodyBytes``; this is a backstop.
    app = web.Application(
        middlewares=[_envelope, _until_started, _authenticate], client_max_size=64 * 1024 * 1024
    )
    app[SERVICE] = service
    for method, path, name, handler in ROUTES:
        app.router.add_route(method, path, handler, name=name)
    app.on_shutdown.append(_on_shutdown)
    return app


def build_metrics_app(service: ControllerService) -> web.Application:
    """``metricsExporterType=PROM``: RocketMQ's Prometheus exporter port serves the same ``/metrics``
    text as the API port (docs/config.md)."""
    app = web.Application()
    app[SERVICE] = service
    app.router.add_route("GET", "/metrics", metrics, name="metrics")
    return app
