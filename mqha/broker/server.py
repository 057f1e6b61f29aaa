"""The broker's HTTP API (docs/architecture.md §4) on ``brokerIP1:listenPort``. SHELL (aiohttp).

Routes: POST/GET ``/v1/messages``, GET ``/v1/messages/stream`` (the put stream, docs/architecture.md
§4.6, ``mqha.broker.put_stream``), GET ``/v1/queues/messages`` and ``/v1/queues`` (docs/architecture.md
§4.4), GET
``/v1/epochs`` (docs/reference-behaviour.md §9.8), GET ``/v1/ha/status`` (§10.7), GET ``/v1/status``,
GET ``/metrics``, GET ``/healthz`` (readiness), GET ``/livez`` (liveness), GET and PUT ``/v1/config``
(``mqha.broker.config_store``), POST
``/v1/history/final-log`` and GET ``/v1/history/rows`` (docs/architecture.md §5); the status documents
are assembled by ``mqha.broker.status_views``. Request bodies go through
``mqha.broker.protocol`` (validation on ``mqha.wire.broker_api``'s structs, reply shapes); the put/read
paths are ``BrokerAccess.put`` / ``read``.
Protected routes (``mqha.broker.auth``): puts and reads need the ``initAuthenticationUser``'s HTTP
Basic credentials when ``authenticationEnabled=true``; the final-log dump and the history pages need
the ``adminAuthToken`` bearer whenever one is set. Each check runs first in its handler, from the
headers alone, before the body is read: a refused request costs little and changes nothing (401/403,
code 16 NO_PERMISSION).
Errors are translated once, here: ``RequestError`` → its code's HTTP status, a body over
``maxRequestBodyBytes`` → 413 (refused from its ``Content-Length`` before anything is read), anything
unexpected → 500 with the error logged. Every body carries ``{code, codeName, remark}``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import msgspec
from aiohttp import web

from mqha.broker.access import BrokerAccess
from mqha.broker.auth import BASIC_CHALLENGE, BEARER_CHALLENGE, BrokerAuth
from mqha.broker.commitlog import OffsetTooSmall
from mqha.broker.config_store import BrokerConfigStore
from mqha.broker.hooks_impl import BrokerRuntime
from mqha.broker.integrity import RECORD_PATH, IntegrityTask
from mqha.broker.metrics import BrokerMetrics
from mqha.broker.protocol import (
    BrokerCode,
    PutRequest,
    decode_put_request,
    envelope,
    http_status_of,
    illegal,
    internal_error_reply,
    parse_queue_read_request,
    parse_read_request,
    put_reply,
    queue_read_reply,
    read_corrupted_reply,
    read_diverged_reply,
    read_moved_reply,
    read_reply,
    request_error_reply,
)
from mqha.broker.put_stream import close_put_streams, serve_put_stream
from mqha.broker.queue_stats import parse_queue_stats_request, queue_stats_reply
from mqha.broker.status_views import BrokerStatusViews
from mqha.codes import ResponseCode
from mqha.epoch.history import reader_divergence
from mqha.errors import CorruptRecordError, NotAlignedError, RequestError
from mqha.process import metrics_response
from mqha.security.http_limits import ConnectionStats, LimitedSite, read_body, runner_args
from mqha.security.signing import Denial
from mqha.security.tls import server_context
from mqha.wire.broker_api import PUT_PATH, PUT_STREAM_PATH

log = logging.getLogger(__name__)

QUEUE_STATS_MAX_STEPS = 256
"""Index steps (4096 messages each) one ``GET /v1/queues`` takes at most; beyond, its counts cover
``indexedTo`` only."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
RUNTIME = web.AppKey("runtime", BrokerRuntime)

FINAL_LOG_WAIT_S = 30.0
"""How long a final-log dump waits for its rows to be committed to the history database."""


def _json(status: int, body: Mapping[str, Any]) -> web.Response:
    # msgspec at the edge: one C pass to bytes (the stdlib encoder showed in the put path's profile).
    return web.Response(body=msgspec.json.encode(body), status=status, content_type="application/json")


def _error(code: BrokerCode, remark: str, status: int | None = None, **extra: Any) -> web.Response:
    return _json(status or http_status_of(code), envelope(code, remark, **extra))


def _refused(denial: Denial, challenge: str) -> web.Response:
    """401/403 with the NO_PERMISSION envelope; a 401 names the scheme that would be accepted."""
    response = _json(denial.status, envelope(ResponseCode.NO_PERMISSION, denial.remark))
    if denial.status == 401:
        response.headers["WWW-Authenticate"] = challenge
    return response


class BrokerHttpServer:
    """Serves the broker's HTTP API: routes requests to the broker's parts and translates errors once."""

    def __init__(
        self,
        config: Mapping[str, Any],
        runtime: BrokerRuntime,
        access: BrokerAccess,
        metrics: BrokerMetrics,
        *,
        host: str | None = None,
        port: int | None = None,
        replicas_status: Callable[[], Mapping[str, Any]] | None = None,
        config_store: BrokerConfigStore | None = None,
        integrity: IntegrityTask | None = None,
    ) -> None:
        self.config = config
        self.runtime = runtime
        self.role = runtime.role
        self.store = runtime.store
        self.ha = runtime.ha
        self.access = access
        self.metrics = metrics
        self.host = host if host is not None else config["brokerIP1"]
        self.port = port if port is not None else config["listenPort"]
        self.max_body = config["maxRequestBodyBytes"]
        self.max_message_size = config["maxMessageSize"]
        self.views = BrokerStatusViews(config, runtime, replicas_status=replicas_status, disk=access.disk)
        self.auth = BrokerAuth(config)
        self.config_store = config_store or BrokerConfigStore(config, None, lambda _changes: None)
        self.integrity = integrity  # the scrub and repairs (docs/architecture.md §4.7)
        self._runner: web.AppRunner | None = None
        self.bound_port: int | None = None
        self.put_streams: set[web.WebSocketResponse] = set()  # open ones (mqha.broker.put_stream)
        metrics.count_put_streams(self.put_streams.__len__)
        self.connections = ConnectionStats()
        metrics.count_http_connections(self.connections)

    def make_app(self) -> web.Application:
        app = web.Application(client_max_size=self.max_body, middlewares=[self._errors])
        app[RUNTIME] = self.runtime
        app.router.add_post(PUT_PATH, self.put_messages)
        app.router.add_get(PUT_STREAM_PATH, functools.partial(serve_put_stream, self))
        app.router.add_get("/v1/messages", self.get_messages)
        app.router.add_get("/v1/queues/messages", self.get_queue_messages)
        app.router.add_get("/v1/queues", self.get_queues)
        app.router.add_get("/v1/epochs", self.get_epochs)
        app.router.add_get("/v1/ha/status", self.get_ha_status)
        app.router.add_get("/v1/status", self.get_status)
        app.router.add_get("/metrics", self.get_metrics)
        app.router.add_get("/healthz", self.get_healthz)
        app.router.add_get("/livez", self.get_livez)
        app.router.add_post("/v1/history/final-log", self.post_final_log)
        app.router.add_get("/v1/config", self.get_config)
        app.router.add_put("/v1/config", self.put_config)
        app.router.add_get("/v1/history/rows", self.get_history_rows)
        app.router.add_get(RECORD_PATH, self.get_log_record)
        return app

    async def start(self) -> None:
        # runner_args: the limits of §12.10 (a refused body, e.g. a 413, is drained and discarded for 1 s
        # at most, so the client reads the answer).
        self._runner = web.AppRunner(
            self.make_app(), access_log=None, shutdown_timeout=2.0, **runner_args(self.config)
        )
        await self._runner.setup()
        site = LimitedSite(
            self._runner,
            self.host,
            self.port,
            max_connections=self.config["httpMaxConnections"],
            stats=self.connections,
            reuse_address=True,
            ssl_context=server_context(self.config),
        )
        await site.start()
        addresses = self._runner.addresses
        self.bound_port = int(addresses[0][1]) if addresses else self.port
        log.info("broker API listening on %s:%d", self.host, self.bound_port)

    async def stop(self) -> None:
        if self._runner is not None:
            await close_put_streams(self.put_streams)
            await self._runner.cleanup()
            self._runner = None

    # -- error translation -----------------------------------------------------------------------

    @web.middleware
    async def _errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except RequestError as exc:
            return _json(*request_error_reply(exc))
        except web.HTTPRequestEntityTooLarge:
            return _error(
                BrokerCode.MESSAGE_ILLEGAL, f"request body exceeds maxRequestBodyBytes {self.max_body}", 413
            )
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            return _json(exc.status, envelope(BrokerCode.SYSTEM_ERROR, exc.reason))
        except Exception:
            log.exception("%s %s failed", request.method, request.path)
            return _json(*internal_error_reply())

    # -- messages --------------------------------------------------------------------------------

    async def put_messages(self, request: web.Request) -> web.Response:
        started = time.perf_counter()
        refused = self.client_refusal(request, "put")
        if refused is not None:
            return refused
        length = request.content_length
        if length is not None and length > self.max_body:
            # Refuse from the header alone: a 100 MB body is never buffered.
            return _error(
                BrokerCode.MESSAGE_ILLEGAL,
                f"request body of {length} bytes exceeds maxRequestBodyBytes {self.max_body}",
                413,
            )
        return _json(*await self.put_body(functools.partial(self._read_body, request), started))

    async def _read_body(self, request: web.Request) -> bytes:
        """The body, at most ``maxRequestBodyBytes`` (413), within ``httpBodyTimeoutMills`` (408)."""
        return await read_body(
            request.content,
            self.max_body,
            self.config["httpBodyTimeoutMills"] / 1000,
            too_large=lambda: web.HTTPRequestEntityTooLarge(
                max_size=self.max_body, actual_size=self.max_body + 1
            ),
            too_slow=web.HTTPRequestTimeout,
        )

    async def put_body(
        self, read: Callable[[], Awaitable[bytes]], started: float
    ) -> tuple[int, dict[str, Any]]:
        """One put request: its body (read only when this broker takes puts now) decoded, written and
        answered; the HTTP status and the reply. Raises ``RequestError`` for a body that is not a put.
        Shared by ``POST /v1/messages`` and the put stream (``mqha.broker.put_stream``)."""
        rejected = self.access.reject_if_unavailable()
        if rejected is not None:
            put, outcome = PutRequest((), batch=False), rejected
        else:
            # The body's bytes decode straight into the wire structs (mqha.wire.broker_api), checked.
            put = decode_put_request(await read(), max_message_size=self.max_message_size)
            outcome = await self.access.put(put.drafts)
        status, body = put_reply(put, outcome)
        self.metrics.observe_put(outcome.status.value, len(put.drafts), time.perf_counter() - started)
        return status, body

    def _read_refused(self, request: web.Request) -> web.Response | None:
        """Why a read is not served (no credentials, fenced, an unverified slave), or None."""
        return self.client_refusal(request, "read") or self._log_refused()

    def client_refusal(self, request: web.Request, route: str) -> web.Response | None:
        """The 401 of a put or read without the client credentials it needs (counted), or None."""
        denial = self.auth.check_client(request.headers.get("Authorization"))
        if denial is None:
            return None
        self.metrics.observe_refused(route, denial.status)
        response = _refused(denial, BASIC_CHALLENGE)
        if not request.content.is_eof():  # a refused body is not drained: the connection closes
            response.force_close()
        return response

    def _log_refused(self) -> web.Response | None:
        """Why this broker's log is not served now (fenced, an unverified slave), or None."""
        if self.role.fenced:
            return _error(
                BrokerCode.SERVICE_NOT_AVAILABLE, "broker is fenced: not registered with the controller yet"
            )
        unverified = self.access.read_refusal()
        if unverified is not None:  # a slave whose log may differ from its master's: serve nothing
            return _error(BrokerCode.SERVICE_NOT_AVAILABLE, unverified)
        return None

    async def get_queue_messages(self, request: web.Request) -> web.Response:
        """One (topic, queue)'s messages through the queue index (docs/architecture.md §4.4)."""
        refused = self._read_refused(request)
        if refused is not None:
            return refused
        read = parse_queue_read_request(request.query)
        await self.access.flush_for_reads()
        try:
            messages, next_offset, limit = self.access.read_queue(read)
        except CorruptRecordError as exc:
            return self._corrupted(exc, topic=read.topic, queueId=read.queue_id)
        return _json(200, queue_read_reply(read, messages, next_offset, limit, self.store.max_offset))

    def _corrupted(self, exc: CorruptRecordError, **fields: Any) -> web.Response:
        """A read that met a damaged record (docs/architecture.md §4.7); the scrub's repair is told."""
        if self.integrity is not None:
            self.integrity.notice()
        confirm = self.ha.gate.confirm_offset()
        return _json(
            *read_corrupted_reply(exc.messages, exc.offset, exc.why, confirm, self.store.max_offset, **fields)
        )

    async def get_queues(self, request: web.Request) -> web.Response:
        """A topic's queues and a consumer's backlog in each (mqadmin consumerProgress; §4.4): the
        index is brought up to the confirm offset first, a step at a time (the loop keeps serving).
        Open like ``/v1/status`` (positions and counts, no message data); a fenced broker or an
        unverified slave answers 503 as for a read."""
        refused = self._log_refused()
        if refused is not None:
            return refused
        stats = parse_queue_stats_request(request.query)
        index = self.access.queue_index
        limit = self.access.index_step()
        for _ in range(QUEUE_STATS_MAX_STEPS):
            if index.indexed_to >= limit:
                break
            await asyncio.sleep(0)
            limit = self.access.index_step()
        found = index.queue_stats(stats.topic, limit, stats.positions)
        return _json(200, queue_stats_reply(stats.topic, found, index.indexed_to, limit))

    async def get_messages(self, request: web.Request) -> web.Response:
        refused = self._read_refused(request)
        if refused is not None:
            return refused
        read = parse_read_request(request.query)
        epochs = self.store.epochs
        if read.epoch is not None and (end := reader_divergence(epochs, read.epoch, read.offset)) is not None:
            confirm = self.ha.gate.confirm_offset()
            return _json(
                200, read_diverged_reply(read.offset, read.epoch, end, confirm, self.store.max_offset)
            )
        await self.access.flush_for_reads()
        try:
            messages, next_offset, limit = self.access.read(read)
        except OffsetTooSmall as exc:
            confirm = self.ha.gate.confirm_offset()
            return _json(200, read_moved_reply(read.offset, exc.min_offset, confirm, self.store.max_offset))
        except CorruptRecordError as exc:
            return self._corrupted(exc)
        entry = epochs.find_by_offset(messages[-1].offset) if messages else None
        last_epoch = entry.epoch if entry is not None else None
        return _json(200, read_reply(messages, next_offset, limit, self.store.max_offset, last_epoch))

    # -- admin -----------------------------------------------------------------------------------

    async def get_epochs(self, request: web.Request) -> web.Response:
        return _json(200, envelope(BrokerCode.SUCCESS, "", **self.views.epochs()))

    async def get_ha_status(self, request: web.Request) -> web.Response:
        return _json(200, envelope(BrokerCode.SUCCESS, "", **self.ha.status.runtime_info()))

    async def get_status(self, request: web.Request) -> web.Response:
        extra = {"integrity": self.integrity.status()} if self.integrity is not None else {}
        return _json(200, envelope(BrokerCode.SUCCESS, "", **self.views.status(), **extra))

    async def get_log_record(self, request: web.Request) -> web.StreamResponse:
        """One verified record as stored, for a replica that repairs its damaged copy
        (docs/architecture.md §4.7): the read credentials and the read rules; never past the read limit."""
        refused = self._read_refused(request)
        if refused is not None:
            return refused
        raw = request.query.get("offset", "")
        if not raw.isdigit():
            raise illegal(f"offset must be a non-negative integer, got {raw!r}")
        await self.access.flush_for_reads()
        try:
            data = self.store.log.read_unit(int(raw), self.access.read_limit())
        except CorruptRecordError as exc:
            return self._corrupted(exc)
        except NotAlignedError as exc:
            raise illegal(exc.reason) from None
        return web.Response(body=data, content_type="application/octet-stream")

    async def get_metrics(self, request: web.Request) -> web.Response:
        return metrics_response(self.metrics.render())

    async def post_final_log(self, request: web.Request) -> web.Response:
        """Write this replica's log index as ``final_logs`` rows into its own history database
        (docs/architecture.md §5), for the no-loss check after a run; answers once the rows are committed.
        An admin call: needs the ``adminAuthToken`` bearer when one is set."""
        denial = self.auth.check_admin(request.headers.get("Authorization"))
        if denial is not None:
            self.metrics.observe_refused("final-log", denial.status)
            return _refused(denial, BEARER_CHALLENGE)
        if self.store.history is None or self.store.history.broker_id is None:
            return _error(BrokerCode.SERVICE_NOT_AVAILABLE, "no history yet: the broker is not registered")
        rows = await asyncio.to_thread(self.store.dump_final_log, FINAL_LOG_WAIT_S)
        return _json(200, envelope(BrokerCode.SUCCESS, "", rows=rows))

    async def get_config(self, request: web.Request) -> web.Response:
        return _json(200, envelope(BrokerCode.SUCCESS, "", **self.config_store.document()))

    async def put_config(self, request: web.Request) -> web.Response:
        """``updateBrokerConfig``: an admin call (the ``adminAuthToken`` bearer when one is set)."""
        denial = self.auth.check_admin(request.headers.get("Authorization"))
        if denial is not None:
            self.metrics.observe_refused("config", denial.status)
            return _refused(denial, BEARER_CHALLENGE)
        try:
            body = msgspec.json.decode(await self._read_body(request))
        except msgspec.DecodeError:
            return _error(BrokerCode.SYSTEM_ERROR, "config update must be a JSON object of key: value", 400)
        code, remark = self.config_store.update(body)
        status = {ResponseCode.SUCCESS: 200, ResponseCode.NO_PERMISSION: 403}.get(code, 400)
        return _json(status, envelope(code, remark))

    async def get_history_rows(self, request: web.Request) -> web.Response:
        """A page of this broker's ``history.db`` (``mqha.history.pages``) for ``mqha export
        --controller``: NDJSON; an admin call, as the final-log dump."""
        from mqha.history.pages import NDJSON, serve_page

        denial = self.auth.check_admin(request.headers.get("Authorization"))
        if denial is not None:
            self.metrics.observe_refused("history", denial.status)
            return _refused(denial, BEARER_CHALLENGE)
        body = await serve_page(self.config["storePathRootDir"], request.query, illegal)
        return web.Response(body=body, content_type=NDJSON)

    async def get_livez(self, request: web.Request) -> web.Response:
        """200 while the process answers, damaged or not: Kubernetes' liveness (``/healthz`` is
        readiness; a restart would not mend a damaged record)."""
        return _json(200, envelope(BrokerCode.SUCCESS, "", status="alive", role=self.role.role.value))

    async def get_healthz(self, request: web.Request) -> web.Response:
        damage = self.integrity.damage() if self.integrity is not None else None
        if damage is not None:  # a known damaged record (docs/architecture.md §4.7)
            return _json(
                503,
                envelope(
                    BrokerCode.SERVICE_NOT_AVAILABLE, damage, status="degraded", role=self.role.role.value
                ),
            )
        return _json(200, envelope(BrokerCode.SUCCESS, "", status="ok", role=self.role.role.value))
