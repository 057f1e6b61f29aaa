"""Test-only Raft member: a key/value applier behind :class:`mqha.controller.raft.ReplicatedLog`.

Run as a process by the integration tests and the benchmark (never part of the product)::

    python tests/integration/raft_node.py --self 127.0.0.1:7001 --partners 127.0.0.1:7002,127.0.0.1:7003 \
        --store /tmp/n0 --http-port 8001

HTTP (JSON) on 127.0.0.1:<http-port>:

- ``GET /healthz``: 200 once the member runs and is healthy, else 503.
- ``GET /status``: ``ReplicatedLog.status()``. ``GET /state``: the key/value state and counters.
- ``GET /events``: leadership changes seen by the listener (role, term, monotonic time).
- ``POST /propose`` ``{"record": {...}, "timeout": 2.0}``: 200 ``{"result"}``; 421 ``{"leader"}`` when not
  leader; 504 on timeout; 500 when the applier raised; 503 on other failures.
- ``POST /load`` ``{"count", "concurrency", "prefix", "value_size", "timeout"}``: proposals issued
  inside this process (as a controller handler would); returns counts and latency percentiles.
- ``POST /snapshot``: ask for a log compaction.

``--hold-journal-cut`` keeps the member, once its first compaction has put a dump in place, from ever
cutting its journal back to it or dumping again: it stays in the window between the two files (which
a compaction normally crosses within a tick) until it is killed.

Records are JSON: ``{"op": "set", "key", "value"}``, ``{"op": "noop"}`` (also the barrier), and
``{"op": "fail"}``, on which the applier raises (to test that a raising applier does not wedge the log).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import threading
import time
from typing import Any

from aiohttp import web

from mqha.controller.raft import (
    ApplyError,
    LeadershipChange,
    NotLeaderError,
    ProposalFailed,
    ProposalTimeout,
    ReplicatedLog,
)

NOOP_RECORD = b'{"op": "noop"}'


class KVApplier:
    """A dict. ``apply`` runs on PySyncObj's tick thread; HTTP reads copy under the lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data: dict[str, str] = {}
        self._last_index = 0
        self._sets = 0
        self._noops = 0
        self.restores = 0  # not state: how often this process restored a snapshot

    def apply(self, data: bytes, raft_index: int) -> object:
        record = json.loads(data) if data else {"op": "noop"}
        with self._lock:
            self._last_index = raft_index
            op = record.get("op")
            if op == "noop":
                self._noops += 1
                return {"index": raft_index, "noop": True}
            if op == "set":
                prev = self._data.get(record["key"])
                self._data[record["key"]] = record["value"]
                self._sets += 1
                return {"index": raft_index, "prev": prev}
            if op == "fail":
                raise RuntimeError("record asked the applier to fail")
            raise ValueError(f"unknown op {op!r}")

    def snapshot(self) -> bytes:
        with self._lock:
            state = {"data": self._data, "last_index": self._last_index, "sets": self._sets}
            return json.dumps({**state, "noops": self._noops}).encode()

    def restore(self, data: bytes) -> None:
        state = json.loads(data)
        with self._lock:
            self._data = dict(state["data"])
            self._last_index = state["last_index"]
            self._sets = state["sets"]
            self._noops = state["noops"]
            self.restores += 1

    def read(self) -> dict[str, Any]:
        with self._lock:
            return {
                "data": dict(self._data),
                "last_index": self._last_index,
                "sets": self._sets,
                "noops": self._noops,
                "restores": self.restores,
            }


def _percentile(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


class Node:
    def __init__(self, log: ReplicatedLog, applier: KVApplier) -> None:
        self.log = log
        self.applier = applier
        self.events: list[dict[str, Any]] = []
        log.add_leadership_listener(self._on_leadership)

    def _on_leadership(self, change: LeadershipChange) -> None:
        self.events.append({"role": change.role.value, "term": change.term, "t": time.monotonic()})

    async def propose_json(self, record: dict[str, Any] | None, timeout: float) -> web.Response:
        data = b"" if record is None else json.dumps(record).encode()
        try:
            result = await self.log.propose(data, timeout)
        except NotLeaderError as exc:
            return web.json_response({"error": "not_leader", "leader": exc.leader_address}, status=421)
        except ProposalTimeout:
            return web.json_response({"error": "timeout"}, status=504)
        except ApplyError as exc:
            return web.json_response({"error": "apply_failed", "reason": exc.reason}, status=500)
        except ProposalFailed as exc:
            body = {"error": "failed", "reason": exc.reason, "outcome_unknown": exc.outcome_unknown}
            return web.json_response(body, status=503)
        return web.json_response({"result": result})

    async def handle_propose(self, request: web.Request) -> web.Response:
        body = await request.json()
        return await self.propose_json(body.get("record"), float(body.get("timeout", 2.0)))

    async def handle_load(self, request: web.Request) -> web.Response:
        body = await request.json()
        count = int(body.get("count", 1000))
        concurrency = int(body.get("concurrency", 1))
        prefix = str(body.get("prefix", "k"))
        value = "v" * int(body.get("value_size", 64))
        timeout = float(body.get("timeout", 2.0))
        max_seconds = float(body.get("max_seconds", 30.0))
        latencies: list[float] = []
        errors: dict[str, int] = {}
        next_item = iter(range(count))
        started = time.monotonic()

        async def worker() -> None:
            for i in next_item:
                if time.monotonic() - started > max_seconds:
                    return
                data = json.dumps({"op": "set", "key": f"{prefix}{i}", "value": value}).encode()
                t0 = time.perf_counter()
                try:
                    await self.log.propose(data, timeout)
                except Exception as exc:
                    errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                    continue
                latencies.append((time.perf_counter() - t0) * 1000)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.monotonic() - started
        latencies.sort()
        return web.json_response(
            {
                "ok": len(latencies),
                "errors": errors,
                "elapsed": elapsed,
                "rate": len(latencies) / elapsed if elapsed > 0 else None,
                "p50_ms": _percentile(latencies, 0.50),
                "p99_ms": _percentile(latencies, 0.99),
                "max_ms": latencies[-1] if latencies else None,
            }
        )

    async def handle_status(self, request: web.Request) -> web.Response:
        return web.json_response(self.log.status())

    async def handle_state(self, request: web.Request) -> web.Response:
        return web.json_response(self.applier.read())

    async def handle_events(self, request: web.Request) -> web.Response:
        return web.json_response(self.events)

    async def handle_snapshot(self, request: web.Request) -> web.Response:
        self.log.request_snapshot()
        return web.json_response({"requested": True})

    async def handle_healthz(self, request: web.Request) -> web.Response:
        healthy = self.log.healthy()
        return web.json_response({"healthy": healthy}, status=200 if healthy else 503)


async def run(args: argparse.Namespace) -> None:
    applier = KVApplier()
    tuning: dict[str, Any] = {
        "raft_min_timeout": args.min_timeout,
        "raft_max_timeout": args.max_timeout,
        "log_compaction_min_entries": args.compaction_min_entries,
        "log_compaction_split": args.compaction_split,
    }
    partners = [p for p in args.partners.split(",") if p]
    if args.hold_journal_cut:
        _hold_journal_cut()
    log = ReplicatedLog(
        args.self,
        partners,
        args.store,
        applier,
        args.password or None,
        noop_record=NOOP_RECORD,
        durable=args.durable,
        **tuning,
    )
    node = Node(log, applier)
    await log.start()
    app = web.Application()
    app.add_routes(
        [
            web.get("/healthz", node.handle_healthz),
            web.get("/status", node.handle_status),
            web.get("/state", node.handle_state),
            web.get("/events", node.handle_events),
            web.post("/propose", node.handle_propose),
            web.post("/load", node.handle_load),
            web.post("/snapshot", node.handle_snapshot),
        ]
    )
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", args.http_port)
    await site.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        await log.stop()


def _hold_journal_cut() -> None:
    """No journal class cuts its journal (``deleteEntriesTo``), and only the first dump is written."""
    from pysyncobj.journal import FileJournal
    from pysyncobj.serializer import Serializer

    from mqha.controller.raft import journal

    def keep(self: object, entry_to: int) -> None:
        return None

    for cls in (FileJournal, journal.CompactionSafeJournal):  # the durable journal inherits the latter's
        cls.deleteEntriesTo = keep  # type: ignore[method-assign]
    first_dump = Serializer.serialize
    dumped = threading.Event()

    def serialize_once(self: Serializer, data: Any, id: int) -> None:
        if not dumped.is_set():
            dumped.set()
            first_dump(self, data, id)

    Serializer.serialize = serialize_once  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--self", required=True, help="this member's Raft host:port")
    parser.add_argument("--partners", required=True, help="comma-separated Raft host:port of the others")
    parser.add_argument("--store", required=True)
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument("--password", default="")
    parser.add_argument("--durable", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--min-timeout", type=float, default=0.2)
    parser.add_argument("--max-timeout", type=float, default=0.4)
    parser.add_argument("--compaction-min-entries", type=int, default=5000)
    parser.add_argument("--compaction-split", action=argparse.BooleanOptionalAction, default=False)
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--hold-journal-cut", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
