"""The put-bench kit shared by the put benchmarks (``mqha bench put`` and its history, retention,
replication and auth variants): request bodies, the closed-loop put client, a one-controller group of 3
replicas, and interleaved rounds over several targets.
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
from mqha.bench.report import median
from mqha.cluster.client_auth import client_headers
from mqha.cluster.local import LocalCluster
from mqha.wire.broker_api import PUT_PATH


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
