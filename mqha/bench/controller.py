"""``mqha bench controller``: our 3-node controller vs a 3-member etcd, same load generator, same run.

Ours: 3 ``mqcontroller`` processes (journal fsync on, the default). Two write workloads, each client
on its own broker set with two live replicas: *alter* loops alter-SyncStateSet {m} -> {m, o} -> {m};
*elect* loops a designated electMaster that moves the master to the other replica (the controllers
run with ``enableElectUncleanMaster=true``: an election leaves only the new master in the
SyncStateSet, so the old one is designated back from outside it). Every call is one committed Raft
entry, fsynced on a majority before the answer. etcd: 3 members (fsync on, the default), each client
compare-and-swaps its own key (``POST /v3/kv/txn``, compare mod_revision, put) with a value as long as
our alter request body. All run in interleaved rounds at 1, 8 and 32 clients so the shared machine's
drift hits them alike; the figures are the medians of the rounds and the ratio ours/etcd.

Leader kill: SIGKILL of the leader, then one client retries its alter on the survivors (0.2 s per
request) until one commits; the killed member restarts and catches up between repeats.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

from mqha.bench.controller_report import controller_report
from mqha.bench.etcd import CasClient, EtcdCluster, EtcdUnavailable, etcd_binary
from mqha.bench.lean_http import LeanHttp
from mqha.bench.loadgen import (
    Http,
    LoadResult,
    OpFailed,
    closed_loop,
    first_success,
    get_json,
    http_session,
    post_json,
)
from mqha.bench.report import Outcome, median
from mqha.cluster.local import LocalCluster
from mqha.controller_client.caller import Signer
from mqha.errors import MqhaError

CLUSTER = "bench"
PROBE_TIMEOUT = 0.2  # per request while a leader is being replaced (as in docs/performance.md)
HEARTBEAT_TIMEOUT_MS = 3_600_000  # the replicas stay alive for the whole run
CONTROLLER_SETTINGS = {"enableElectUncleanMaster": "true"}  # the elect loop designates the old master back


def settings(quick: bool) -> dict[str, Any]:
    """Sizes: ``--quick`` is a smoke test (one short round), the full run gives stable medians."""
    if quick:
        return {"clients": (1, 8, 32), "window": 1.0, "rounds": 1, "kills": 1}
    return {"clients": (1, 8, 32), "window": 5.0, "rounds": 3, "kills": 10}


class AlterClient:
    """One client's alter-SyncStateSet loop on its own broker set ({m} <-> {m, o}).

    ``signer``: a broker's proof of each request (authentication on), as a broker sends it.
    """

    def __init__(self, http: Http, url: str, name: str, signer: Signer | None = None) -> None:
        self.http, self.url, self.name, self.signer = http, url, name, signer
        self.master, self.other, self.master_epoch, self.sss_epoch = 1, 2, 0, 0
        self.expanded = False
        self.timeout: float | None = None

    async def sync(self) -> None:
        status, info = await get_json(
            self.http, f"{self.url}/v1/groups/{self.name}/replica-info", self.timeout, self.signer
        )
        if status == 200:
            self.master, self.master_epoch = info["masterBrokerId"], info["masterEpoch"]
            self.sss_epoch, self.expanded = info["syncStateSetEpoch"], len(info["syncStateSet"]) > 1
            self.other = 2 if self.master == 1 else 1

    def body(self) -> dict[str, Any]:
        members = [self.master] if self.expanded else [self.master, self.other]
        return {
            "masterBrokerId": self.master,
            "masterEpoch": self.master_epoch,
            "syncStateSet": members,
            "syncStateSetEpoch": self.sss_epoch,
        }

    async def __call__(self) -> None:
        url = f"{self.url}/v1/groups/{self.name}/sync-state-set"
        status, reply = await post_json(self.http, url, self.body(), self.timeout, self.signer)
        if status != 200:
            await self.sync()
            raise OpFailed(str(reply.get("codeName") if isinstance(reply, dict) else status))
        self.sss_epoch, self.expanded = reply["newSyncStateSetEpoch"], not self.expanded


class ElectClient:
    """Runs one client's designated-electMaster loop on its own broker set.

    The master moves to the other replica at each call. ``signer``: the admin's proof (a designated
    election is an admin call; authentication on).
    """

    def __init__(self, http: Http, url: str, name: str, signer: Signer | None = None) -> None:
        self.http, self.url, self.name, self.signer = http, url, name, signer
        self.master = 1

    async def sync(self) -> None:
        url = f"{self.url}/v1/groups/{self.name}/replica-info"
        status, info = await get_json(self.http, url, signer=self.signer)
        if status == 200:
            self.master = info["masterBrokerId"]

    async def __call__(self) -> None:
        target = 2 if self.master == 1 else 1
        body = {"clusterName": CLUSTER, "brokerId": target, "designateElect": True}
        url = f"{self.url}/v1/groups/{self.name}/elect"
        status, reply = await post_json(self.http, url, body, signer=self.signer)
        if status != 200:
            await self.sync()
            raise OpFailed(str(reply.get("codeName") if isinstance(reply, dict) else status))
        self.master = target


class NotLeader(MqhaError, RuntimeError):
    """421: the node asked is not the serving leader; ``leader`` is the URL it named, if any."""

    def __init__(self, leader: str | None) -> None:
        super().__init__(f"not the leader (leader: {leader})")
        self.leader = leader


async def _checked(call: Awaitable[tuple[int, Any]], what: str) -> Any:
    status, body = await call
    if status == 421:
        address = body.get("leaderAddress") if isinstance(body, dict) else None
        raise NotLeader(f"http://{address}" if address else None)
    if status != 200:
        raise RuntimeError(f"{what}: HTTP {status} {body}")
    return body


def heartbeat_body(name: str, broker_id: int, address: str, timeout_ms: int) -> dict[str, Any]:
    """A broker heartbeat (``POST /v1/brokers/heartbeat`` or one session message)."""
    return {
        "clusterName": CLUSTER,
        "brokerName": name,
        "brokerAddr": address,
        "brokerId": broker_id,
        "epoch": 0,
        "maxOffset": 0,
        "confirmOffset": 0,
        "heartbeatTimeoutMills": timeout_ms,
    }


async def register_replica(
    http: aiohttp.ClientSession, leader: str, name: str, port: int, signer: Signer | None = None
) -> tuple[int, str]:
    """One replica of ``name`` registered as a broker does it (next-id, apply-id, register, each
    signed by ``signer`` when given); returns its id and (never connected) address."""
    query = f"{leader}/v1/brokers/next-id?clusterName={CLUSTER}&brokerName={name}"
    broker_id = (await _checked(get_json(http, query, signer=signer), "next-id"))["nextBrokerId"]
    address = f"127.0.0.1:{port}"
    apply = {
        "clusterName": CLUSTER,
        "brokerName": name,
        "appliedBrokerId": broker_id,
        "registerCheckCode": f"{address};{time.time_ns() // 1_000_000}",
    }
    await _checked(post_json(http, f"{leader}/v1/brokers/apply-id", apply, signer=signer), "apply-id")
    register = {
        "clusterName": CLUSTER,
        "brokerName": name,
        "brokerId": broker_id,
        "brokerAddress": address,
        "haAddress": f"127.0.0.1:{port + 1}",
    }
    await _checked(post_json(http, f"{leader}/v1/brokers/register", register, signer=signer), "register")
    return broker_id, address


async def elect(
    http: aiohttp.ClientSession, leader: str, name: str, broker_id: int, signer: Signer | None = None
) -> dict[str, Any]:
    """Ask the controller to make ``broker_id`` the master of ``name`` (a broker's own request)."""
    body = {"clusterName": CLUSTER, "brokerId": broker_id}
    result: dict[str, Any] = await _checked(
        post_json(http, f"{leader}/v1/groups/{name}/elect", body, signer=signer), "elect"
    )
    return result


SET_PORTS = (10901, 10903)  # the (never connected) addresses of a set's replicas 1 and 2


async def heartbeat_set(
    http: aiohttp.ClientSession, urls: list[str], name: str, signer: Signer | None = None
) -> None:
    """Both replicas of ``name`` alive on every controller in ``urls`` (liveness is soft state per
    node: a restarted controller needs them again)."""
    for broker_id, port in enumerate(SET_PORTS, start=1):
        beat = heartbeat_body(name, broker_id, f"127.0.0.1:{port}", HEARTBEAT_TIMEOUT_MS)
        for url in urls:
            await _checked(post_json(http, f"{url}/v1/brokers/heartbeat", beat, signer=signer), "heartbeat")


async def register_set(
    http: aiohttp.ClientSession, leader: str, urls: list[str], name: str, signer: Signer | None = None
) -> None:
    """Two replicas of ``name``, alive on every controller (heartbeats with a long timeout),
    replica 1 elected master; every call signed by ``signer`` when given."""
    for port in SET_PORTS:
        await register_replica(http, leader, name, port, signer)
    await heartbeat_set(http, urls, name, signer)
    await elect(http, leader, name, 1, signer)


async def kill_to_commit(
    kill: Callable[[], list[str]], client: AlterClient | CasClient, timeout: float = 20.0
) -> float:
    """Seconds from ``kill()`` (which kills the leader and returns the survivors' URLs) until
    ``client`` commits a write on one of them."""
    client.timeout = PROBE_TIMEOUT
    survivors = kill()
    started = time.monotonic()

    async def attempt() -> bool:
        for url in survivors:
            client.url = url
            try:
                await client()
                return True
            except (OpFailed, aiohttp.ClientError, TimeoutError, OSError):
                continue
        return False

    await first_success(attempt, timeout)
    elapsed = time.monotonic() - started
    client.timeout = None
    return elapsed


class Controllers:
    """3 ``mqcontroller`` processes of a :class:`LocalCluster`, no brokers."""

    def __init__(self, base: Path, settings: dict[str, str] | None = None, secure: bool = False) -> None:
        # One group of one replica is declared but never started: only the controllers run.
        self.cluster = LocalCluster(
            base,
            controllers=3,
            groups=1,
            replicas=1,
            controller_settings=settings,
            log_level="WARNING",
            secure=secure,  # authentication on, with fresh secrets (mqha.cluster.secrets)
        )

    def start(self) -> None:
        # All at once: a first start waits until every configured peer answers (docs/raft.md §10).
        for node in self.cluster.controllers:
            self.cluster.start_node(node, wait=False)
        for node in self.cluster.controllers:
            self.cluster.probe.wait_healthy(node, 30)

    def stop(self) -> None:
        self.cluster.stop()

    def leader_url(self, timeout: float = 15.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            leader = self.cluster.controller_leader()
            if leader is not None:
                return leader.url
            time.sleep(0.05)
        raise RuntimeError(f"no controller leader within {timeout:g} s")

    def restart(self, name: str) -> None:
        self.cluster.start_node(name, timeout=30)
        self.leader_url()


async def _measure(quick: bool, base: Path) -> dict[str, Any]:
    cfg = settings(quick)
    most = max(cfg["clients"])
    names = [f"set{i}" for i in range(most)]
    elect_names = [f"elect{i}" for i in range(most)]
    ours = Controllers(base / "controllers", CONTROLLER_SETTINGS)
    etcd: EtcdCluster | None = None
    skipped: str | None = None
    data: dict[str, Any] = {"settings": cfg, "ours": {}, "ours_elect": {}, "etcd": {}, "etcd_skipped": None}
    try:
        ours.start()
        try:
            etcd = EtcdCluster(base / "etcd", etcd_binary())
            etcd.start()
        except EtcdUnavailable as exc:
            skipped, etcd = str(exc), None
            data["etcd_skipped"] = skipped
        async with http_session(most) as http:
            leader = ours.leader_url()
            urls = [n.url for n in ours.cluster.controllers]
            await asyncio.gather(*(register_set(http, leader, urls, name) for name in names + elect_names))
            # One lean keep-alive connection per load client (bench.lean_http.LeanHttp), on both sides.
            connections: list[LeanHttp] = []

            def connection() -> LeanHttp:
                connections.append(LeanHttp())
                return connections[-1]

            alters = [AlterClient(connection(), leader, name) for name in names]
            for client in alters:
                await client.sync()
            elects = [ElectClient(connection(), leader, name) for name in elect_names]
            value_size = len(json.dumps(alters[0].body()))
            data["request_bytes"] = value_size
            cas: list[CasClient] = []
            if etcd is not None:
                etcd_leader = etcd.url(await etcd.leader(http))
                cas = [CasClient(connection(), etcd_leader, f"bench/{i}", value_size) for i in range(most)]
                for client in cas:
                    await client.sync()
            await closed_loop(alters[:4], 0.5)  # warm-up: connections, code paths
            await closed_loop(elects[:4], 0.5)
            if cas:
                await closed_loop(cas[:4], 0.5)
            workloads = {"ours": alters, "ours_elect": elects, "etcd": cas}
            for side, figures in (await interleaved_rounds(cfg, workloads)).items():
                data[side].update(figures)
            data["ours"]["leader_kill_s"] = await _kills_ours(ours, http, alters[0], cfg["kills"])
            if etcd is not None:
                data["etcd"]["leader_kill_s"] = await _kills_etcd(etcd, http, cas[0], cfg["kills"])
            for conn in connections:
                conn.close()
    finally:
        ours.stop()
        if etcd is not None:
            etcd.stop()
    return data


async def interleaved_rounds(
    cfg: dict[str, Any],
    workloads: dict[str, list[Any]],
    alternate: bool = False,
    pools: dict[str, list[list[Any]]] | None = None,
) -> dict[str, Any]:
    """Per workload and client count, the median figures of ``cfg["rounds"]`` rounds; within a round
    every workload runs at one client count before the next count (an empty workload is skipped).
    ``alternate``: every other round runs the workloads in reverse order, so that a drift within a
    round does not always favour the same one. ``pools``: a workload with several client pools (one per
    cluster of that side) uses them in turn, round by round, so a cluster's own pace is averaged out."""
    pools = {**{side: [ops] for side, ops in workloads.items()}, **(pools or {})}
    rounds: dict[str, dict[int, list[LoadResult]]] = {side: {} for side, each in pools.items() if each[0]}
    for number in range(cfg["rounds"]):
        order = list(rounds.items())
        if alternate and number % 2:
            order.reverse()
        for clients in cfg["clients"]:
            for side, by_clients in order:
                ops = pools[side][number % len(pools[side])]
                result = await closed_loop(ops[:clients], cfg["window"])
                by_clients.setdefault(clients, []).append(result)
    return {
        side: {str(clients): _median_of(results) for clients, results in by_clients.items()}
        for side, by_clients in rounds.items()
    }


def _median_of(results: list[LoadResult]) -> dict[str, Any]:
    """Median of each figure over the rounds; the rounds themselves kept for the JSON."""
    rounds = [r.as_json() for r in results]
    keys = ("ops_per_s", "p50_ms", "p99_ms")
    summary: dict[str, Any] = {k: median([r[k] for r in rounds]) for k in keys}
    errors: dict[str, int] = {}
    for r in rounds:
        for kind, count in r["errors"].items():
            errors[kind] = errors.get(kind, 0) + count
    return {**summary, "errors": errors, "rounds": rounds}


async def _kills_ours(
    ours: Controllers, http: aiohttp.ClientSession, client: AlterClient, repeats: int
) -> list[float]:
    times = []
    for _ in range(repeats):
        leader = ours.cluster.controller_leader()
        if leader is None:
            raise RuntimeError("no controller leader to kill")

        def kill(name: str = leader.name) -> list[str]:
            ours.cluster.kill(name)
            return [n.url for n in ours.cluster.controllers if n.name != name]

        times.append(await kill_to_commit(kill, client))
        await asyncio.to_thread(ours.restart, leader.name)
        await heartbeat_set(http, [leader.url], client.name)
        client.url = ours.leader_url()
        await asyncio.sleep(1.0)  # the restarted node catches up from its journal and the leader
        await client.sync()
    return times


async def _kills_etcd(
    etcd: EtcdCluster, http: aiohttp.ClientSession, client: CasClient, repeats: int
) -> list[float]:
    times = []
    for _ in range(repeats):
        leader = await etcd.leader(http)

        def kill(name: str = leader) -> list[str]:
            etcd.kill(name)
            return [etcd.url(n) for n in etcd.names if n != name]

        times.append(await kill_to_commit(kill, client))
        await asyncio.to_thread(etcd.start, [leader])
        client.url = etcd.url(await etcd.leader(http))
        await asyncio.sleep(1.0)
        await client.sync()
    return times


def run(base: Path, quick: bool) -> Outcome:
    """Measure both sides and build the tables."""
    return controller_report(asyncio.run(_measure(quick, base)))
