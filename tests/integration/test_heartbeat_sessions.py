"""The broker's controller sessions (mqha/replicas_manager/heartbeat_sessions.py) against a stand-in
controller on a real socket.

A controller binds a session to a broker only when a heartbeat arrives on it, and pushes roleChanged
only to bound sessions. A session opened before the broker's first (HTTP, confirmed) heartbeat used to
stay unbound until the first periodic heartbeat; a broker elected in that window learned of it only
from its next poll (about 400 ms in the demo instead of 15).
"""

from __future__ import annotations

import asyncio
import json

from aiohttp import WSMsgType, web

from mqha.controller_client.caller import LeaderCaller
from mqha.controller_client.policy import Policy
from mqha.replicas_manager.heartbeat_sessions import HEARTBEAT_PATH, SESSION_PATH, HeartbeatSessions
from tests.helpers.processes import free_port

HEARTBEAT = {"clusterName": "c1", "brokerName": "broker-a", "brokerAddr": "127.0.0.1:1", "brokerId": 2}


def test_the_confirmed_heartbeat_also_binds_the_sessions_already_open() -> None:
    async def body() -> None:
        port = free_port()
        on_session: list[dict] = []
        opened = asyncio.Event()

        async def session(request: web.Request) -> web.WebSocketResponse:
            ws = web.WebSocketResponse()
            await ws.prepare(request)
            opened.set()
            async for message in ws:
                if message.type == WSMsgType.TEXT:
                    on_session.append(json.loads(message.data))
            return ws

        async def heartbeat(request: web.Request) -> web.Response:
            return web.json_response({"code": 0, "remark": "Heart beat success"})

        app = web.Application()
        app.router.add_get(SESSION_PATH, session)
        app.router.add_post(HEARTBEAT_PATH, heartbeat)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        address = f"127.0.0.1:{port}"
        caller = LeaderCaller([address], Policy(rounds=1, discover=False))
        sessions = HeartbeatSessions([address], caller, on_push=lambda _address, _message: None)
        try:
            sessions.start()
            await asyncio.wait_for(opened.wait(), 5)
            for _ in range(500):  # and open on the broker's side too
                if sessions.sessions()[address]["state"] == "open":
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
            assert on_session == []  # nothing to say yet: no heartbeat was ever built
            assert await sessions.post_heartbeat_all(HEARTBEAT) == 1
            for _ in range(200):
                if on_session:
                    break
                await asyncio.sleep(0.01)
            assert on_session == [HEARTBEAT]
        finally:
            await sessions.close()
            await caller.close()
            await runner.cleanup()

    asyncio.run(asyncio.wait_for(body(), 30))
