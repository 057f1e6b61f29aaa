"""The servicer's gRPC method handlers, with requests decoded where a corrupt one can be answered (shell).

The generated ``add_MessagingServiceServicer_to_server`` lets gRPC decode each request before the
servicer runs. grpcio's asyncio server answers a request that does not parse with UNKNOWN and the
Python exception's name. gRPC's status-code table says a server that cannot parse a request proto
answers INTERNAL, as RocketMQ's Java proxy does. So here every method takes the request's bytes, and
its handler decodes them and aborts with INTERNAL and what was wrong. This adds one coroutine frame
per call and no task.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError

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


def _unary_unary(request_type: Any, method: Callable[..., Awaitable[Any]]) -> Any:
    async def handle(raw: bytes, context: grpc.aio.ServicerContext) -> Any:
        return await method(await decode(request_type, raw, context), context)

    return handle


def _unary_stream(request_type: Any, method: Callable[..., AsyncIterator[Any]]) -> Any:
    async def handle(raw: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        async for response in method(await decode(request_type, raw, context), context):
            yield response

    return handle


def _stream_stream(request_type: Any, method: Callable[..., AsyncIterator[Any]]) -> Any:
    async def handle(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        async def decoded() -> AsyncIterator[Any]:
            async for raw in requests:
                yield await decode(request_type, raw, context)

        async for response in method(decoded(), context):
            yield response

    return handle


def add_servicer(servicer: Any, server: grpc.aio.Server) -> None:
    """Register every method of ``MessagingService`` on ``server``, served by ``servicer``'s method of
    the same name, requests decoded by :func:`decode`."""
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
                wrap(request_type, behaviour), response_serializer=serialize
            )
        elif method.client_streaming:
            raise ValueError(f"{method.name}: client-streaming methods are not served")
        else:
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                _unary_unary(request_type, behaviour), response_serializer=serialize
            )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
