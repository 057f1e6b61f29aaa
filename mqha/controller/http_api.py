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
from typing import Any

from aiohttp import web

from mqha.controller import acl_routes, history_route, openapi, topic_routes
from mqha.controller.access import Access, route_access
from mqha.controller.console_view import sse_message
from mqha.controller.http_kit import (
    BODY_SHA256_KEY,
    CODE_KEY,
    RAW_BODY_KEY,
    SERVICE,
    WHO_KEY,
    Code,
    HttpError,
    bad_request,
    parse,
    query_params,
    read_body_checked,
    read_json,
    read_request,
    require,
    require_admin,
    respond,
    service_of,
    with_path_name,
)
from mqha.controller.service import ControllerService
from mqha.process import metrics_response
from mqha.security.signing import REFUSED_HEADER, Denial
from mqha.wire import controller_api as api
from mqha.wire.controller_api import Reply
from mqha.wire.controller_quorum import AddControllerPeerRequest, RemoveControllerPeerRequest

log = logging.getLogger(__name__)

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


# ----------------------------------------------------------------------------------- handlers


async def get_metadata(request: web.Request) -> web.Response:
    return respond(request, service_of(request).metadata())


async def get_config(request: web.Request) -> web.Response:
    return respond(request, service_of(request).get_config())


async def update_config(request: web.Request) -> web.Response:
    body = await read_json(request)
    require_admin(request)
    return respond(request, service_of(request).update_config(body))


async def get_status(request: web.Request) -> web.Response:
    return respond(request, service_of(request).node_status())


async def get_storage(request: web.Request) -> web.Response:
    return respond(request, service_of(request).get_storage())


async def get_quorum(request: web.Request) -> web.Response:
    return respond(request, service_of(request).get_quorum())


async def add_controller_peer(request: web.Request) -> web.Response:
    req = await read_request(request, AddControllerPeerRequest)
    require_admin(request)
    return respond(request, await service_of(request).add_controller_peer(req.raft_id))


async def remove_controller_peer(request: web.Request) -> web.Response:
    req = await read_request(request, RemoveControllerPeerRequest)
    require_admin(request)
    return respond(request, await service_of(request).remove_controller_peer(req.raft_id, req.address))


async def get_next_broker_id(request: web.Request) -> web.Response:
    query = query_params(request, ("clusterName", "brokerName"))
    req = parse(api.GetNextBrokerIdRequest, query)
    return respond(request, await service_of(request).get_next_broker_id(req))


async def apply_broker_id(request: web.Request) -> web.Response:
    req = await read_request(request, api.ApplyBrokerIdRequest)
    return respond(request, await service_of(request).apply_broker_id(req))


async def register_broker(request: web.Request) -> web.Response:
    req = await read_request(request, api.RegisterBrokerRequest)
    return respond(request, await service_of(request).register_broker(req))


async def broker_heartbeat(request: web.Request) -> web.Response:
    req = await read_request(request, api.BrokerHeartbeatRequest)
    return respond(request, service_of(request).record_heartbeat(req))


async def broker_session(request: web.Request) -> web.StreamResponse:
    if not web.WebSocketResponse().can_prepare(request).ok:
        raise bad_request("GET /v1/brokers/session must be a WebSocket upgrade")
    return await service_of(request).sessions.handle(request)


async def elect_master(request: web.Request) -> web.Response:
    req = with_path_name(request, await read_request(request, api.ElectMasterRequest))
    if req.designate_elect:
        require_admin(request)
    return respond(request, await service_of(request).elect_master(req))


async def alter_sync_state_set(request: web.Request) -> web.Response:
    req = with_path_name(request, await read_request(request, api.AlterSyncStateSetRequest))
    return respond(request, await service_of(request).alter_sync_state_set(req))


async def get_replica_info(request: web.Request) -> web.Response:
    query_params(request, ())
    req = parse(api.GetReplicaInfoRequest, {"brokerName": request.match_info["brokerName"]})
    return respond(request, await service_of(request).get_replica_info(req))


async def get_sync_state_data(request: web.Request) -> web.Response:
    query = query_params(request, ("brokerName", "clusterName"), multi=("brokerName",))
    obj: dict[str, Any] = {"brokerNames": query.get("brokerName", [])}
    if "clusterName" in query:
        obj["clusterName"] = query["clusterName"]
    req = parse(api.GetSyncStateDataRequest, obj)
    return respond(request, await service_of(request).get_sync_state_data(req))


async def clean_broker_data(request: web.Request) -> web.Response:
    req = with_path_name(request, await read_request(request, api.CleanBrokerDataRequest))
    require_admin(request)
    return respond(request, await service_of(request).clean_broker_data(req))


async def list_groups(request: web.Request) -> web.Response:
    query_params(request, ())
    return respond(request, await service_of(request).list_groups())


async def healthz(request: web.Request) -> web.Response:
    service = service_of(request)
    problem, damage = service.health_problem(), service.damage()
    code = Code.SERVICE_NOT_AVAILABLE if problem else Code.SUCCESS
    return respond(request, Reply(code, problem, {"healthy": not problem, "damage": damage}))


async def livez(request: web.Request) -> web.Response:
    """200 while the process answers, whatever its state: Kubernetes' liveness probe (``/healthz``,
    503 for a damaged member, is readiness: a restart would not mend the damage)."""
    return respond(request, Reply(Code.SUCCESS, "", {"alive": True}))


async def metrics(request: web.Request) -> web.Response:
    request[CODE_KEY] = Code.SUCCESS.name
    return metrics_response(service_of(request).metrics.render())


@functools.cache
def _console_file(name: str) -> bytes:
    return resources.files("mqha.controller").joinpath("console", name).read_bytes()


def _console_response(request: web.Request, name: str) -> web.Response:
    request[CODE_KEY] = Code.SUCCESS.name
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
    service = service_of(request)
    feed = service.console
    most = service.config_store.config["consoleMaxStreams"]
    if feed.streams >= most:
        raise HttpError(503, Reply(Code.SYSTEM_BUSY, f"too many console streams (consoleMaxStreams={most})"))
    request[CODE_KEY] = Code.SUCCESS.name
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
    service = service_of(request)
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
    query_params(request, ())
    return respond(request, await asyncio.to_thread(service_of(request).console_analysis))


async def openapi_json(request: web.Request) -> web.Response:
    request[CODE_KEY] = Code.SUCCESS.name
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
        if isinstance(who := request.get(WHO_KEY), Denial) and who.reason:  # e.g. skew: the broker counts it
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
        code = request.get(CODE_KEY, "UNKNOWN")
        service.metrics.observe_request(api, code, time.perf_counter() - started)
    return response


_WHILE_STARTING = frozenset({"getControllerStorage", "healthz", "livez"})
"""Routes a node answers before its Raft member runs (peers ask a pending node about its store)."""


@web.middleware
async def _until_started(request: web.Request, handler: Handler) -> web.StreamResponse:
    """503 (code 14) for every route but ``_WHILE_STARTING`` until the store's role is decided and the
    Raft member runs (docs/raft.md §10)."""
    if not service_of(request).started and request.match_info.route.name not in _WHILE_STARTING:
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
    if service_of(request).auth.enabled and required is not Access.OPEN:
        require(request, required)
        body = await read_body_checked(request) if request.method in _BODY_METHODS else b""
        if (wrong := service_of(request).auth.check_body(request.get(BODY_SHA256_KEY, ""), body)) is not None:
            raise HttpError(*wrong)
        request[RAW_BODY_KEY] = body
    return await handler(request)


async def _on_shutdown(app: web.Application) -> None:
    service = app[SERVICE]
    service.begin_stop()  # a session closing now is a controller shutdown, not a broker crash
    await service.sessions.close_all()


def build_app(service: ControllerService) -> web.Application:
    # Bodies are read by ``read_json`` with the live ``maxRequestBodyBytes``; this is a backstop.
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
