"""The servicer's gRPC method handlers, with requests decoded where a corrupt one can be answered (shell).

The generated ``add_MessagingServiceServicer_to_server`` lets gRPC decode each request before the
servicer runs. grpcio's asyncio server answers a request that does not parse with UNKNOWN and the
Python exception's name. gRPC's status-code table says a server that cannot parse a request proto
answers INTERNAL, as RocketMQ's Java proxy does. So here every method takes the request's bytes, and
its handler decodes them and aborts with INTERNAL and what was wrong. This adds one coroutine frame
per call and no task.

Each unary request is also counted against ``InFlightBytes`` (``mqha.proxy.limits``) from the
moment it is here until it is answered; one that would pass a budget is RESOURCE_EXHAUSTED before it
is decoded. Telemetry's messages are small and answered at once: they are not counted.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from mqha.proxy.limits import InFlightBytes
from mqha.proxy.v2 import service as s

SERVICE = "apache.rocketmq.v2.MessagingService"


async def decode(request_type: Any, raw: bytes, context: grpc.aio.ServicerContext) -> Any:
    """``raw`` as a ``request_type``, or the call aborted with INTERNAL naming the type."""
    try:
        return request_type.FromString(raw)
    except DecodeError as exc:
        await context.abort(
            grpc.StatusCode.INTERNAL,
            f"the request is not a valid {request_type.DESCRIPTOR.full_name}: {exc}",
        )


OnRefused = Callable[[str], None]
"""Told the key of each budget a request was refused by (the metrics)."""


class _Admission:
    """Admits requests against ``in_flight``: RESOURCE_EXHAUSTED for one that would pass a budget."""

    def __init__(self, in_flight: InFlightBytes, on_refused: OnRefused | None) -> None:
        self.in_flight = in_flight
        self.on_refused = on_refused

    async def admit(self, raw: bytes, context: grpc.aio.ServicerContext) -> str:
        """The connection ``raw`` is now counted for; or the call aborted."""
        connection = context.peer()
        refused = self.in_flight.admit(connection, len(raw))
        if refused is not None:
            if self.on_refused is not None:
                self.on_refused(refused.limit)
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, refused.message)
        return connection


def _unary_unary(request_type: Any, method: Callable[..., Awaitable[Any]], gate: _Admission | None) -> Any:
    async def handle(raw: bytes, context: grpc.aio.ServicerContext) -> Any:
        return await method(await decode(request_type, raw, context), context)

    if gate is None:
        return handle

    async def admitted(raw: bytes, context: grpc.aio.ServicerContext) -> Any:
        connection = await gate.admit(raw, context)
        try:  # handle's body, not a call to it: one frame less on every send
            return await method(await decode(request_type, raw, context), context)
        finally:
            gate.in_flight.release(connection, len(raw))

    return admitted


def _unary_stream(
    request_type: Any, method: Callable[..., AsyncIterator[Any]], gate: _Admission | None
) -> Any:
    async def handle(raw: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        connection = None if gate is None else await gate.admit(raw, context)
        try:
            async for response in method(await decode(request_type, raw, context), context):
                yield response
        finally:
            if gate is not None and connection is not None:
                gate.in_flight.release(connection, len(raw))

    return handle


def _stream_stream(request_type: Any, method: Callable[..., AsyncIterator[Any]]) -> Any:
    async def handle(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        async def decoded() -> AsyncIterator[Any]:
            async for raw in requests:
                yield await decode(request_type, raw, context)

        async for response in method(decoded(), context):
            yield response

    return handle


def add_servicer(
    servicer: Any,
    server: grpc.aio.Server,
    in_flight: InFlightBytes | None = None,
    on_refused: OnRefused | None = None,
) -> None:
    """Register every method of ``MessagingService`` on ``server``, served by ``servicer``'s method of
    the same name, requests decoded by :func:`decode` and, with ``in_flight``, admitted against it."""
    gate = None if in_flight is None else _Admission(in_flight, on_refused)
    handlers = {}
    for method in s.DESCRIPTOR.services_by_name["MessagingService"].methods:
        request_type = getattr(s, method.input_type.name)
        serialize = getattr(s, method.output_type.name).SerializeToString
        behaviour = getattr(servicer, method.name)
        if method.client_streaming and method.server_streaming:
            handlers[method.name] = grpc.stream_stream_rpc_method_handler(
                _stream_stream(request_type, behaviour), response_serializer=serialize
            )
        elif method.server_streaming:
            # One that answers UNIMPLEMENTED is a coroutine that aborts, not a generator; gRPC takes either.
            wrap = _unary_stream if inspect.isasyncgenfunction(behaviour) else _unary_unary
            handlers[method.name] = grpc.unary_stream_rpc_method_handler(
                wrap(request_type, behaviour, gate), response_serializer=serialize
            )
        elif method.client_streaming:
            raise ValueError(f"{method.name}: client-streaming methods are not served")
        else:
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                _unary_unary(request_type, behaviour, gate), response_serializer=serialize
            )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
