"""``mqha bench scale``: one 3-node controller cluster with many broker groups heartbeating.

Simulated brokers (this process, asyncio) speak the real protocol: each replica registers through
the HTTP API (next-id, apply-id, register), keeps one WebSocket session (``/v1/brokers/session``) to
every controller and sends its heartbeat on each every ``brokerHeartbeatInterval`` (RocketMQ's
defaults: 1 s, 10 s timeout); replica 1 of each group asks to be elected and then widens the
SyncStateSet to all three. Measured over a steady window: each controller's CPU (``/proc/<pid>/stat``
utime+stime deltas) and RSS, and the heartbeats delivered per second. Then the master replicas of
``kill`` groups close all their sessions at once, and the time until every one of those groups has a
new master is polled from ``sync-state-data``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

from mqha.bench.controller import Controllers, NotLeader, _checked, elect, heartbeat_body, register_replica
from mqha.bench.loadgen import get_json, http_session, post_json
from mqha.bench.report import Outcome, Target, fmt, format_table, summarize

REPLICAS = 3
HEARTBEAT_INTERVAL = 1.0
HEARTBEAT_TIMEOUT_MS = 10_000
T = TypeVar("T")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {"groups": 20, "kill": 5, "window": 3.0}
    return {"groups": 1000, "kill": 100, "window": 30.0}


def cpu_ticks(stat: str) -> int:
    """utime + stime of a ``/proc/<pid>/stat`` line (fields 14 and 15; the name may hold spaces)."""
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])


def rss_bytes(status: str) -> int:
    """VmRSS of a ``/proc/<pid>/status`` text, in bytes."""
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _cpu_seconds(pid: int) -> float:
    return cpu_ticks(Path(f"/proc/{pid}/stat").read_text()) / CLK_TCK


@dataclass
class SimBroker:
    """One simulated replica: its heartbeat text and its sessions (one per controller)."""

    name: str
    broker_id: int
    text: str
    sessions: list[aiohttp.ClientWebSocketResponse] = field(default_factory=list)
    readers: list[asyncio.Task[None]] = field(default_factory=list)
    alive: bool = True


async def _drain(ws: aiohttp.ClientWebSocketResponse) -> None:
    """Read (and drop) role-change pushes; reading also answers the controller's pings."""
    async for _ in ws:
        pass


class Swarm:
    """Every simulated broker of the run."""

    def __init__(
        self, http: aiohttp.ClientSession, ws: aiohttp.ClientSession, urls: list[str], leader: str
    ) -> None:
        self.http, self.ws, self.urls, self.leader = http, ws, urls, leader
        self.brokers: list[SimBroker] = []
        self.sent = 0
        self.leader_changes = 0

    async def on_leader(self, call: Callable[[str], Awaitable[T]], attempts: int = 50) -> T:
        """``call(leader URL)``, following the leader when it moves (a loaded leader may lose its
        leadership); a replica whose registration is retried simply gets a new id."""
        for _ in range(attempts - 1):
            try:
                return await call(self.leader)
            except (NotLeader, aiohttp.ClientError, TimeoutError) as exc:
                if isinstance(exc, NotLeader) and exc.leader and exc.leader != self.leader:
                    self.leader, self.leader_changes = exc.leader, self.leader_changes + 1
                await asyncio.sleep(0.2)
        return await call(self.leader)

    async def add_group(self, index: int) -> list[SimBroker]:
        name = f"g{index:04d}"
        members = []
        for replica in range(REPLICAS):
            port = 20000 + 2 * (REPLICAS * index + replica)
            broker_id, address = await self.on_leader(
                lambda leader, p=port: register_replica(self.http, leader, name, p)
            )
            body = heartbeat_body(name, broker_id, address, HEARTBEAT_TIMEOUT_MS)
            members.append(SimBroker(name, broker_id, json.dumps({"type": "heartbeat", **body})))
        for broker in members:
            for url in self.urls:
                ws = await self.ws.ws_connect(
                    f"{url}/v1/brokers/session",
                    autoping=True,
                    heartbeat=None,
                    timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=2.0),
                )
                broker.sessions.append(ws)
                broker.readers.append(asyncio.create_task(_drain(ws)))
                await ws.send_str(broker.text)
        self.brokers += members
        return members

    async def start_group(self, members: list[SimBroker]) -> None:
        """The first replica becomes master, then widens the SyncStateSet to every replica."""
        first = members[0]

        async def widen(leader: str) -> None:
            info = await _checked(
                get_json(self.http, f"{leader}/v1/groups/{first.name}/replica-info"), "info"
            )
            if info["masterBrokerId"] != first.broker_id:
                info = await elect(self.http, leader, first.name, first.broker_id)
            alter = {
                "masterBrokerId": info["masterBrokerId"],
                "masterEpoch": info["masterEpoch"],
                "syncStateSet": [m.broker_id for m in members],
                "syncStateSetEpoch": info["syncStateSetEpoch"],
            }
            await _checked(
                post_json(self.http, f"{leader}/v1/groups/{first.name}/sync-state-set", alter), "alter"
            )

        await self.on_leader(widen)

    async def heartbeats(self, stop: asyncio.Event) -> None:
        """Every live broker's heartbeat on each of its sessions, spread evenly over the interval."""
        while not stop.is_set():
            started = time.monotonic()
            links = [(b, ws) for b in self.brokers if b.alive for ws in b.sessions]
            for i, (broker, ws) in enumerate(links):
                if broker.alive and not ws.closed:
                    with contextlib.suppress(ConnectionError, RuntimeError):
                        await ws.send_str(broker.text)
                        self.sent += 1
                if i % 200 == 199:
                    delay = started + HEARTBEAT_INTERVAL * (i + 1) / len(links) - time.monotonic()
                    await asyncio.sleep(max(0.0, delay))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.0, started + HEARTBEAT_INTERVAL - time.monotonic()))

    async def kill(self, brokers: list[SimBroker]) -> None:
        """The brokers die at once: heartbeats stop, every session closes."""
        for broker in brokers:
            broker.alive = False
        await asyncio.gather(*(ws.close() for b in brokers for ws in b.sessions), return_exceptions=True)

    async def close(self) -> None:
        await self.kill(self.brokers)
        for broker in self.brokers:
            for task in broker.readers:
                task.cancel()


async def _bounded(limit: int, coros: list[Any]) -> list[Any]:
    gate = asyncio.Semaphore(limit)

    async def one(coro: Any) -> Any:
        async with gate:
            return await coro

    return await asyncio.gather(*(one(c) for c in coros))


async def _masters(http: aiohttp.ClientSession, urls: list[str], names: list[str]) -> dict[str, int | None]:
    """Each group's master as the first controller that answers sees it (any node serves it)."""
    query = "&".join(f"brokerName={n}" for n in names)
    for url in urls:
        with contextlib.suppress(aiohttp.ClientError, TimeoutError):
            status, body = await get_json(http, f"{url}/v1/sync-state-data?{query}", 2.0)
            if status == 200:
                table = body.get("replicasInfoTable") or {}
                return {name: (table.get(name) or {}).get("masterBrokerId") for name in names}
    return {}


async def _measure_async(controllers: Controllers, cfg: dict[str, Any]) -> dict[str, Any]:
    cluster = controllers.cluster
    leader = controllers.leader_url()
    data: dict[str, Any] = {"settings": cfg}
    # Sessions hold their connection for good: they get their own pool, without a limit.
    async with (
        http_session(32, timeout=30) as http,
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as sessions,
    ):
        swarm = Swarm(http, sessions, [n.url for n in cluster.controllers], leader)
        stop = asyncio.Event()
        beats = asyncio.create_task(swarm.heartbeats(stop))
        try:
            started = time.monotonic()
            groups = await _bounded(32, [swarm.add_group(i) for i in range(cfg["groups"])])
            await _bounded(32, [swarm.start_group(members) for members in groups])
            data["setup_s"] = time.monotonic() - started
            await asyncio.sleep(2 * HEARTBEAT_INTERVAL)  # settle into the steady heartbeat rhythm
            pids = {n.name: cluster.pid(n) for n in cluster.controllers}
            before = {name: _cpu_seconds(pid) for name, pid in pids.items() if pid}
            own_before, sent_before, t0 = time.process_time(), swarm.sent, time.monotonic()
            await asyncio.sleep(cfg["window"])
            elapsed = time.monotonic() - t0
            leader_name = next(n.name for n in cluster.controllers if n.url == swarm.leader)
            data["controllers"] = {
                name: {
                    "leader": name == leader_name,
                    "cpu_cores": (_cpu_seconds(pid) - before[name]) / elapsed,
                    "rss_mib": rss_bytes(Path(f"/proc/{pid}/status").read_text()) / (1 << 20),
                }
                for name, pid in pids.items()
                if pid
            }
            data["load_generator_cpu_cores"] = (time.process_time() - own_before) / elapsed
            data["heartbeats_per_s"] = (swarm.sent - sent_before) / elapsed
            data["heartbeats_per_s_per_controller"] = data["heartbeats_per_s"] / len(pids)
            data["sessions"] = sum(len(b.sessions) for b in swarm.brokers)
            data["leader_changes_during_setup"] = swarm.leader_changes

            victims = [members[0] for members in groups[: cfg["kill"]]]
            names = [v.name for v in victims]
            killed_at = time.monotonic()
            await swarm.kill(victims)
            elected: dict[str, float] = {}
            dead = {v.name: v.broker_id for v in victims}
            while len(elected) < len(names) and time.monotonic() - killed_at < 60:
                masters = await _masters(http, swarm.urls, [n for n in names if n not in elected])
                now = time.monotonic() - killed_at
                for name, master in masters.items():
                    if master is not None and master != dead[name]:
                        elected[name] = now
                await asyncio.sleep(0.02)
            data["failovers"] = {
                "killed": len(names),
                "elected": len(elected),
                "times_s": sorted(elected.values()),
            }
            data["all_reelected_s"] = max(elected.values()) if len(elected) == len(names) else None
        finally:
            stop.set()
            await beats
            await swarm.close()
    return data


def _report(data: dict[str, Any]) -> Outcome:
    cfg = data["settings"]
    rows = [
        (
            name + (" (leader)" if c["leader"] else ""),
            fmt(c["cpu_cores"] * 100, ".1f", " %"),
            fmt(c["rss_mib"], ".0f"),
        )
        for name, c in data["controllers"].items()
    ]
    title = (
        f"scale: {cfg['groups']} groups x {REPLICAS} simulated replicas, {data['sessions']} sessions, "
        f"heartbeats every {HEARTBEAT_INTERVAL:g} s, {cfg['window']:g} s window "
        f"(setup {data['setup_s']:.1f} s)"
    )
    tables = [format_table(title, ("controller", "CPU (% of one core)", "RSS MiB"), rows)]
    times = data["failovers"]["times_s"]
    s = summarize(times)
    tables.append(
        format_table(
            "scale: heartbeats and simultaneous failovers",
            ("figure", "value"),
            [
                ("heartbeats delivered /s (all controllers)", fmt(data["heartbeats_per_s"], ".0f")),
                ("heartbeats /s per controller", fmt(data["heartbeats_per_s_per_controller"], ".0f")),
                ("load generator CPU (% of one core)", fmt(data["load_generator_cpu_cores"] * 100, ".1f")),
                ("masters killed at once", data["failovers"]["killed"]),
                ("groups with a new master", data["failovers"]["elected"]),
                ("per group: p50 / p99 s", f"{fmt(_s(s['p50_ms']), '.3f')} / {fmt(_s(s['p99_ms']), '.3f')}"),
                ("all re-elected after s", fmt(data["all_reelected_s"], ".3f")),
            ],
        )
    )
    leader = next(c for c in data["controllers"].values() if c["leader"])
    targets = [
        Target(
            f"leader CPU with {cfg['groups']} groups (% of one core)",
            leader["cpu_cores"] * 100,
            50,
            at_least=False,
        ),
        Target(
            f"{cfg['kill']} simultaneous failovers done (s)", data["all_reelected_s"], 3.0, at_least=False
        ),
    ]
    return Outcome("scale", tables, targets, data)


def _s(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000


def run(base: Path, quick: bool) -> Outcome:
    """Controllers up, the swarm registered and heartbeating, a window, then the mass kill."""
    controllers = Controllers(base / "controllers")
    try:
        controllers.start()
        return _report(asyncio.run(_measure_async(controllers, settings(quick))))
    finally:
        controllers.stop()
