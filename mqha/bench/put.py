"""``mqha bench put``: put throughput and latency per ack mode on a 3-replica group.

Three local clusters run side by side (one controller each, one group of 3 mqbroker replicas), the
same except for the ack rule: async (the master answers once the message is in its own log),
``inSyncReplicas=2`` (one slave must hold it too) and ``allAckInSyncStateSet=true`` (every member of
the SyncStateSet). The load generator sends single 1 KiB messages to the master's HTTP API, one at a
time per client, in interleaved rounds; the figures are the medians of the rounds and the ratio of
each sync mode's throughput to async's. Then puts while retention deletes segments vs while it does
not (``mqha.bench.retention_put``, root only), and puts while the master records its acks in its
history vs not (``mqha.bench.history_put``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp

from mqha.bench.loadgen import LoadResult, OpFailed, closed_loop, http_session
from mqha.bench.report import Outcome, Target, fmt, format_table, median, ratio
from mqha.cluster.client_auth import client_headers
from mqha.cluster.local import LocalCluster
from mqha.wire.broker_api import PUT_PATH

MODES: dict[str, dict[str, str]] = {
    "async": {"allAckInSyncStateSet": "false", "inSyncReplicas": "1"},
    "inSyncReplicas=2": {"allAckInSyncStateSet": "false", "inSyncReplicas": "2"},
    "allAckInSyncStateSet": {"allAckInSyncStateSet": "true"},
}
BODY = 1024


def settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {"clients": 8, "window": 1.0, "rounds": 1}
    return {"clients": 8, "window": 5.0, "rounds": 3}


def message_payload(body_bytes: int, batch: int = 1) -> bytes:
    """A put request body: one message, or a batch of ``batch`` identical ones (random bytes)."""
    message = {"topic": "BenchTopic", "bodyBase64": base64.b64encode(os.urandom(body_bytes)).decode()}
    return json.dumps({"messages": [message] * batch} if batch > 1 else message).encode()


class PutClient:
    """POST one prepared put request; anything but PUT_OK (for every message) fails."""

    def __init__(
        self,
        http: aiohttp.ClientSession,
        url: str,
        payload: bytes,
        headers: Mapping[str, str] | None = None,  # e.g. the brokers' user (client_headers)
    ) -> None:
        self.http, self.url, self.payload = http, url, payload
        self.headers = {"Content-Type": "application/json", **(headers or {})}

    async def __call__(self) -> None:
        async with self.http.post(self.url, data=self.payload, headers=self.headers) as response:
            body = await response.json(content_type=None)
        results = body.get("results", [body]) if isinstance(body, dict) else [{}]
        for result in results:
            status = result.get("status", result.get("codeName"))
            if status != "PUT_OK":
                raise OpFailed(str(status))


async def put_load(
    url: str, payload: bytes, clients: int, seconds: float, headers: Mapping[str, str] | None = None
) -> LoadResult:
    """``clients`` closed loops posting ``payload`` to ``url`` for ``seconds``."""
    async with http_session(clients) as http:
        loops = [PutClient(http, url, payload, headers) for _ in range(clients)]
        return await closed_loop(loops, seconds)


def _measure(base: Path, quick: bool) -> dict[str, Any]:
    cfg = settings(quick)
    payload = message_payload(BODY)
    data: dict[str, Any] = {"settings": {**cfg, "body_bytes": BODY, "modes": MODES}, "modes": {}}
    with contextlib.ExitStack() as stack:
        targets: dict[str, tuple[str, dict[str, str]]] = {}
        for index, (mode, extra) in enumerate(MODES.items()):
            cluster = start_group(stack, base / f"mode{index}", mode, extra)
            # A full SyncStateSet first: with inSyncReplicas=2 a master alone refuses puts
            # (IN_SYNC_REPLICAS_NOT_ENOUGH, docs/architecture.md §4), which would count as errors.
            cluster.wait_ready(timeout=60)
            targets[mode] = put_target(cluster)
        data["modes"] = interleaved_puts(targets, payload, cfg)
    # Imported here: retention_put reuses this module's load (a cycle at import time otherwise).
    from mqha.bench import retention_put

    data["retention"] = retention_put.measure(base / "retention", cfg, BODY)
    from mqha.bench import history_put

    data["history"] = history_put.measure(base / "history", cfg, BODY)
    return data


def start_group(
    stack: contextlib.ExitStack, run_dir: Path, name: str, broker_settings: Mapping[str, str], **kwargs: Any
) -> LocalCluster:
    """One controller and one group of 3 replicas, stopped with ``stack``; waits for the master."""
    cluster = LocalCluster(
        run_dir,
        controllers=1,
        groups=1,
        replicas=3,
        broker_settings=dict(broker_settings),
        log_level="WARNING",
        **kwargs,
    )
    stack.enter_context(cluster)
    if cluster.master(timeout=30) is None:
        raise RuntimeError(f"{name}: no master\n{cluster.status_table()}")
    return cluster


def put_target(cluster: LocalCluster) -> tuple[str, dict[str, str]]:
    """The master's put URL and the client headers of ``cluster``."""
    master = cluster.master(timeout=30)
    assert master is not None  # start_group waited for it
    return master.url + PUT_PATH, client_headers(cluster.broker_settings)


def interleaved_puts(
    targets: Mapping[str, tuple[str, Mapping[str, str]]], payload: bytes, cfg: Mapping[str, Any]
) -> dict[str, dict[str, Any]]:
    """Per target (name -> put URL and headers): after a warm-up, ``cfg["rounds"]`` rounds of
    ``cfg["window"]`` s of ``cfg["clients"]`` clients, the targets in turn within a round; the median
    figures of the rounds, the error count and the rounds themselves."""
    for url, headers in targets.values():
        asyncio.run(put_load(url, payload, cfg["clients"], 0.5, headers))  # warm-up
    runs: dict[str, list[LoadResult]] = {name: [] for name in targets}
    for _ in range(cfg["rounds"]):
        for name, (url, headers) in targets.items():
            runs[name].append(asyncio.run(put_load(url, payload, cfg["clients"], cfg["window"], headers)))
    figures = {}
    for name, results in runs.items():
        rounds = [r.as_json() for r in results]
        figures[name] = {
            **{k: median([r[k] for r in rounds]) for k in ("ops_per_s", "p50_ms", "p99_ms")},
            "errors": sum(sum(r["errors"].values()) for r in rounds),
            "rounds": rounds,
        }
    return figures


def _report(data: dict[str, Any]) -> Outcome:
    cfg, modes = data["settings"], data["modes"]
    base = modes["async"]["ops_per_s"]
    rows = [
        (
            mode,
            fmt(m["ops_per_s"], ".0f"),
            fmt(m["p50_ms"], ".2f"),
            fmt(m["p99_ms"], ".2f"),
            fmt(ratio(m["ops_per_s"], base), ".2f"),
            m["errors"],
        )
        for mode, m in modes.items()
    ]
    title = (
        f"put, 3-replica group, {cfg['clients']} clients x single {cfg['body_bytes']} B messages, "
        f"median of {cfg['rounds']} interleaved {cfg['window']:g} s rounds"
    )
    table = format_table(title, ("ack mode", "msgs/s", "p50 ms", "p99 ms", "/ async", "errors"), rows)
    targets = [
        Target(f"{mode} msgs/s / async", ratio(modes[mode]["ops_per_s"], base), 0.85, at_least=True)
        for mode in ("inSyncReplicas=2", "allAckInSyncStateSet")
    ]
    from mqha.bench import retention_put

    retention_table, on_off = retention_put.report(data["retention"], cfg, data["settings"]["body_bytes"])
    if on_off is not None:
        targets.append(Target("retention on/off msgs/s", on_off, 1 - retention_put.MAX_COST, at_least=True))
    from mqha.bench import history_put

    history_table, history_on_off = history_put.report(data["history"], cfg, data["settings"]["body_bytes"])
    targets.append(
        Target("ack history on/off msgs/s", history_on_off, 1 - history_put.MAX_COST, at_least=True)
    )
    return Outcome("put", [table, retention_table, history_table], targets, data)


def run(base: Path, quick: bool) -> Outcome:
    """Three clusters up, interleaved windows of load, tables."""
    return _report(_measure(base, quick))
