"""A v2 ``MessagingService`` that stores nothing and answers every send OK at once, for the proxy
benchmark: what the official client itself allows (its own per-send cost, the gRPC server's) with
no proxy work and no broker behind it. Routes and Settings are mqproxy's own answers (the client
needs them); nothing else is implemented.

usage: python -m tests.helpers.v2_null_server PORT [CPUS]   (CPUS: run on these, as proxyCpuAffinity)
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import grpc

from mqha.affinity import parse_cpu_list, pin_process
from mqha.proxy.routes import GroupQueues, query_route, status
from mqha.proxy.service import ClientSessionRpcs
from mqha.proxy.v2 import service as s
from mqha.proxy.v2 import service_grpc as sg

_LAYOUT = (GroupQueues("broker-a", 8, 8),)


class NullService(ClientSessionRpcs):
    _max_body = 4 * 1024 * 1024

    async def QueryRoute(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return query_route(request.topic, request.endpoints, _LAYOUT)

    async def SendMessage(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        entries = [
            s.SendResultEntry(status=status(), message_id=m.system_properties.message_id, offset=0)
            for m in request.messages
        ]
        return s.SendMessageResponse(status=status(), entries=entries)


async def serve(port: int) -> None:
    server = grpc.aio.server()
    sg.add_MessagingServiceServicer_to_server(NullService(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


if __name__ == "__main__":
    if len(sys.argv) > 2:
        pin_process(parse_cpu_list(sys.argv[2]))
    asyncio.run(serve(int(sys.argv[1])))
