"""mqproxy's Prometheus metrics: ``metricsExporterType=PROM`` serves them on ``/metrics`` of
``metricsPromExporterPort`` (shell; docs/metrics.md).

A gRPC interceptor, installed only when the exporter is on, times every unary and server-streaming
call by method and by the v2 code its answer carries (RocketMQ's proxy answers errors inside the
response, with gRPC status OK), and counts the messages sent in and handed out. With the exporter
off nothing is installed, so the send path pays nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from mqha.process import metrics_response
from mqha.proxy.v2 import definition as d

LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
"""Seconds; a ReceiveMessage long poll may last ``long_polling_timeout`` (20 s)."""
_SEND = "SendMessage"
_TELEMETRY = "Telemetry"


class ProxyMetrics:
    """The proxy's registry: RPC latency by method and code, messages in and out."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.rpc_latency = Histogram(
            "mqha_proxy_rpc_latency_seconds",
            "v2 RPCs by method and the code of the answer (a gRPC status name when the call failed)",
            ["method", "code"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.messages_in = Counter(
            "mqha_proxy_messages_in",
            "messages of SendMessage calls by the code of each message's entry",
            ["code"],
            registry=self.registry,
        )
        self.messages_out = Counter(
            "mqha_proxy_messages_out",
            "messages handed to consumers by ReceiveMessage",
            registry=self.registry,
        )
        self.auth_refusals = Counter(
            "mqha_proxy_auth_refusals",
            "calls refused by authentication (missing, malformed, unknown_user, wrong_signature, "
            "clock_skew) or authorization (forbidden), by method",
            ["method", "reason"],
            registry=self.registry,
        )
        self.limit_refusals = Counter(
            "mqha_proxy_limit_refusals",
            "calls refused RESOURCE_EXHAUSTED by the limit named (connections, streams, bytes)",
            ["limit"],
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "mqha_proxy_inflight_bytes",
            "bytes of requests received and not yet answered (grpcMaxInflightBytes bounds it)",
            registry=self.registry,
        )

    def refused(self, method: str, reason: str) -> None:
        self.auth_refusals.labels(method, reason).inc()

    def limit_refused(self, limit: str) -> None:
        self.limit_refusals.labels(limit).inc()

    def watch_in_flight(self, total: Callable[[], float]) -> None:
        """Report ``total()`` as the in-flight bytes at each scrape."""
        self.in_flight.set_function(total)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def observe(self, method: str, response: Any, seconds: float) -> None:
        """A unary call answered ``response`` after ``seconds``."""
        self.rpc_latency.labels(method, _code(response)).observe(seconds)
        if method == _SEND:
            for entry in response.entries:
                self.messages_in.labels(_name(entry.status.code)).inc()


class MetricsInterceptor(grpc.aio.ServerInterceptor):
    """Wraps each handler but Telemetry's to feed :class:`ProxyMetrics`."""

    def __init__(self, metrics: ProxyMetrics) -> None:
        self._metrics = metrics

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method.rsplit("/", 1)[-1]
        if handler is None or method == _TELEMETRY:
            return handler  # unknown methods, and Telemetry (a session, not a call to time)
        # mqha.proxy.handlers registers every method as request-streaming (its limits read the one
        # request themselves); the response side tells a unary answer from a server stream.
        if handler.response_streaming:
            return grpc.stream_stream_rpc_method_handler(
                self._streaming(method, handler.stream_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return grpc.stream_unary_rpc_method_handler(
            self._unary(method, handler.stream_unary),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    def _unary(self, method: str, behavior: Any) -> Any:
        metrics = self._metrics

        async def timed(request: Any, context: grpc.aio.ServicerContext) -> Any:
            started = time.perf_counter()
            try:
                response = await behavior(request, context)
            except BaseException as exc:
                metrics.rpc_latency.labels(method, _failed(context, exc)).observe(
                    time.perf_counter() - started
                )
                raise
            metrics.observe(method, response, time.perf_counter() - started)
            return response

        return timed

    def _streaming(self, method: str, behavior: Any) -> Any:
        metrics = self._metrics

        async def timed(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            started = time.perf_counter()
            code = _name(d.Code.OK)
            try:
                async for response in behavior(request, context):
                    if response.HasField("message"):
                        metrics.messages_out.inc()
                    elif response.HasField("status"):
                        code = _code(response)
                    yield response
            except BaseException as exc:
                code = _failed(context, exc)
                raise
            finally:
                metrics.rpc_latency.labels(method, code).observe(time.perf_counter() - started)

        return timed


def _code(response: Any) -> str:
    return _name(response.status.code) if response.HasField("status") else _name(d.Code.OK)


def _name(code: int) -> str:
    try:
        return str(d.Code.Name(code))
    except ValueError:  # a code this protobuf version does not name
        return str(code)


def _failed(context: grpc.aio.ServicerContext, exc: BaseException) -> str:
    """The gRPC status name of a call that raised: what it aborted with, else CANCELLED or UNKNOWN."""
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code.name
    return "CANCELLED" if isinstance(exc, asyncio.CancelledError) else "UNKNOWN"


def exporter_app(metrics: ProxyMetrics) -> web.Application:
    """``GET /metrics``: the registry as Prometheus text."""

    async def scrape(request: web.Request) -> web.Response:
        return metrics_response(metrics.render())

    app = web.Application()
    app.router.add_get("/metrics", scrape)
    return app
