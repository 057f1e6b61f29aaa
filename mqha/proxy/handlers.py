"""The servicer's gRPC method handlers: each call admitted against mqproxy's limits before its request
is read, and the request decoded where a corrupt one can be answered (shell).

**Limits** (``mqha.proxy.limits``). Every method is registered with gRPC as request-streaming, so gRPC
asks for no request byte before the handler does: the handler first counts the call
(:class:`OpenCalls`: connections and streams), then the request as arriving (:class:`Arrivals`:
bytes still arriving), and only then reads it; a unary request is then counted as held
(:class:`InFlightBytes`) until it is answered. Past any limit the call ends RESOURCE_EXHAUSTED with
the key in its message and no request byte beyond HTTP/2's initial window is taken. Telemetry's
commands are small and answered at once: the call is counted, its commands are not.

**Decoding.** The generated ``add_MessagingServiceServicer_to_server`` lets gRPC decode each request
before the servicer runs, and grpcio's asyncio server answers one that does not parse with UNKNOWN
and the Python exception's name. gRPC's status-code table says a server that cannot parse a request
proto answers INTERNAL, as RocketMQ's Java proxy does: here each handler decodes the bytes itself and
aborts with INTERNAL and what was wrong.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from mqha.proxy.limits import Arrivals, InFlightBytes, OpenCalls, Refused
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
"""Told the key of each limit a call was refused by (the metrics)."""


class Gate:
    """Admits calls and their requests against mqproxy's limits (the shell around the cores)."""

    def __init__(
        self, calls: OpenCalls, arrivals: Arrivals, in_flight: InFlightBytes, on_refused: OnRefused | None
    ) -> None:
        self.calls, self.arrivals, self.in_flight = calls, arrivals, in_flight
        self.on_refused = on_refused
        self._ids = itertools.count()
        self._readers: dict[int, asyncio.Task[Any]] = {}  # call -> the task reading its request
        self._evicted: dict[int, Refused] = {}
        self._room = asyncio.Event()  # set (and replaced) whenever an arrival ends

    async def refuse(self, context: grpc.aio.ServicerContext, refused: Refused) -> None:
        """End the call RESOURCE_EXHAUSTED (raises)."""
        if self.on_refused is not None:
            self.on_refused(refused.limit)
        await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, refused.message)

    async def open(self, context: grpc.aio.ServicerContext) -> str:
        """Count the call for its connection (returned); or end it. :meth:`calls`.close must follow."""
        connection = context.peer()
        refused = self.calls.open(connection)
        if refused is not None:
            await self.refuse(context, refused)
        return connection

    async def admit(self, context: grpc.aio.ServicerContext) -> tuple[str, bytes]:
        """A unary request's call counted, its request read and counted as held: the connection and
        the request; or the call ended. :meth:`done` must follow."""
        connection = await self.open(context)
        try:
            raw = await self.receive(connection, context)
            refused = self.in_flight.admit(connection, len(raw))
            if refused is not None:
                await self.refuse(context, refused)
        except BaseException:
            self.calls.close(connection)
            raise
        return connection, raw

    def done(self, connection: str, raw: bytes) -> None:
        """The call :meth:`admit` let in was answered (or failed)."""
        self.in_flight.release(connection, len(raw))
        self.calls.close(connection)

    async def receive(self, connection: str, context: grpc.aio.ServicerContext) -> bytes:
        """The call's one request, read once it is counted as arriving; or the call ended."""
        call = next(self._ids)
        await self._expect(call, connection, context)
        task = asyncio.current_task()
        assert task is not None
        self._readers[call] = task
        try:
            raw = await context.read()
        except asyncio.CancelledError:
            refused = self._evicted.pop(call, None)
            if refused is None:
                raise
            task.uncancel()
            raw = None
        finally:
            self._readers.pop(call, None)
            self.arrivals.arrived(call)
            self._room.set()
            self._room = asyncio.Event()
        if raw is None:
            await self.refuse(context, refused)
        if raw is grpc.aio.EOF:
            await context.abort(grpc.StatusCode.INTERNAL, "the call ended without its request")
        return raw

    async def _expect(self, call: int, connection: str, context: grpc.aio.ServicerContext) -> None:
        while True:
            expected = self.arrivals.expect(call, connection, time.monotonic())
            for victim, limit in expected.evicted:
                self._evict(victim, limit)
            if expected.refused is None:
                return
            remaining = context.time_remaining()
            if expected.retry_in is None or (remaining is not None and remaining < expected.retry_in):
                await self.refuse(context, expected.refused)
            room = self._room
            # An arrival that ends makes room; at the latest the oldest turns evictable.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(room.wait(), expected.retry_in)

    def _evict(self, victim: int, limit: str) -> None:
        reader = self._readers.get(victim)
        if reader is None:
            return
        self._evicted[victim] = Refused(
            limit,
            f"this request was still arriving after {self.arrivals.grace:g} s when another needed its "
            f"room under {limit}: send requests whole, or retry",
        )
        reader.cancel()


def _unary_unary(request_type: Any, method: Callable[..., Awaitable[Any]], gate: Gate) -> Any:
    async def handle(requests: Any, context: grpc.aio.ServicerContext) -> Any:
        connection, raw = await gate.admit(context)
        try:
            return await method(await decode(request_type, raw, context), context)
        finally:
            gate.done(connection, raw)

    return handle


def _unary_stream(request_type: Any, method: Callable[..., AsyncIterator[Any]], gate: Gate) -> Any:
    async def handle(requests: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        connection, raw = await gate.admit(context)
        try:
            async for response in method(await decode(request_type, raw, context), context):
                yield response
        finally:
            gate.done(connection, raw)

    return handle


def _stream_stream(request_type: Any, method: Callable[..., AsyncIterator[Any]], gate: Gate) -> Any:
    async def handle(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        async def decoded() -> AsyncIterator[Any]:
            async for raw in requests:
                yield await decode(request_type, raw, context)

        connection = await gate.open(context)
        try:
            async for response in method(decoded(), context):
                yield response
        finally:
            gate.calls.close(connection)

    return handle


def add_servicer(servicer: Any, server: grpc.aio.Server, gate: Gate) -> None:
    """Register every method of ``MessagingService`` on ``server``, served by ``servicer``'s method of
    the same name, calls admitted by ``gate`` and requests decoded by :func:`decode`."""
    handlers = {}
    for method in s.DESCRIPTOR.services_by_name["MessagingService"].methods:
        request_type = getattr(s, method.input_type.name)
        serialize = getattr(s, method.output_type.name).SerializeToString
        behaviour = getattr(servicer, method.name)
        if method.client_streaming and method.server_streaming:
            handlers[method.name] = grpc.stream_stream_rpc_method_handler(
                _stream_stream(request_type, behaviour, gate), response_serializer=serialize
            )
        elif method.client_streaming:
            raise ValueError(f"{method.name}: client-streaming methods are not served")
        elif method.server_streaming and inspect.isasyncgenfunction(behaviour):
            handlers[method.name] = grpc.stream_stream_rpc_method_handler(
                _unary_stream(request_type, behaviour, gate), response_serializer=serialize
            )
        else:  # one that answers UNIMPLEMENTED is a coroutine that aborts, not a generator
            handlers[method.name] = grpc.stream_unary_rpc_method_handler(
                _unary_unary(request_type, behaviour, gate), response_serializer=serialize
            )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
