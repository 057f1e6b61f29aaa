"""``mqha bench replication``: master -> slave catch-up speed vs this machine's raw loopback copy.

For each message size a local cluster (one controller, one group of 2 mqbroker replicas, async acks)
is started, the slave stopped, a backlog written to the master through its put API, and the slave
started again: its catch-up is timed from the slave's first replicated byte to its log end reaching
the master's (polled), and from its process start for the catch-up time. The slave then copies the
backlog once more from an empty store. Before each catch-up and once after the last, the same bytes
are copied raw: a Python sender process reads the master's segment files and streams them over a
loopback socket to a Python receiver writing a file (1 MiB chunks, no fsync -- the HA path does not
fsync either). Every copy follows a page-cache warm-up. Both sides report their best (``REPEATS``):
on this VM a single copy of either kind is often slowed at random (see ``warm_page_cache``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mqha.bench.loadgen import closed_loop, http_session
from mqha.bench.put_kit import PutClient, message_payload
from mqha.bench.report import Outcome, Target, fmt, format_table, ratio
from mqha.cluster.client_auth import client_headers
from mqha.cluster.local import LocalCluster
from mqha.wire.broker_api import PUT_PATH

MIB = 1 << 20
KIB = 1 << 10
BROKER = {"allAckInSyncStateSet": "false", "inSyncReplicas": "1", "mappedFileSizeCommitLog": str(64 * MIB)}


DEFAULT_BATCH = 32 * KIB  # haTransferBatchSize, the reference's default
LARGE_BATCH = MIB
REPEATS = 2
"""Catch-ups per run (the slave's store is emptied between them) and raw copies (one more): both sides
report their best, as this VM's memory reclaim slows single copies at random (``warm_page_cache``)."""


def settings(quick: bool) -> dict[str, Any]:
    """(message size, backlog bytes, haTransferBatchSize) per run; the 16 KiB backlog at the default
    batch size is the catch-up figure. The 1 MiB batch shows what per-frame work costs."""
    scale = 32 if quick else 1
    return {
        "runs": [
            (body, backlog // scale, batch)
            for body, backlog in ((KIB, 256 * MIB), (16 * KIB, 1024 * MIB))
            for batch in (DEFAULT_BATCH, LARGE_BATCH)
        ]
    }


def raw_copy(files: list[Path], target: Path, limit: int) -> tuple[int, float]:
    """Python sender process -> loopback socket -> Python receiver writing a file: the first
    ``limit`` bytes of ``files`` (segment files are preallocated, so their size is not the data's).
    Returns (bytes, seconds)."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    total = min(limit, sum(p.stat().st_size for p in files))
    received = [0]

    def receive() -> None:
        conn, _ = server.accept()
        buffer = bytearray(MIB)
        view = memoryview(buffer)
        with conn, target.open("wb") as out:
            while True:
                n = conn.recv_into(buffer)
                if not n:
                    break
                out.write(view[:n])
                received[0] += n

    sender_code = (
        "import socket,sys\n"
        f"s=socket.create_connection(('127.0.0.1',{port}))\n"
        f"left={total}\n"
        "for p in sys.argv[1:]:\n"
        "    with open(p,'rb') as f:\n"
        "        while left > 0:\n"
        "            b=f.read(min(1<<20, left))\n"
        "            if not b: break\n"
        "            s.sendall(b)\n"
        "            left -= len(b)\n"
        "s.close()\n"
    )
    thread = threading.Thread(target=receive)
    thread.start()
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", sender_code, *map(str, files)], check=True, timeout=600)
    thread.join(600)
    elapsed = time.perf_counter() - started
    server.close()
    if received[0] != total:
        raise RuntimeError(f"raw copy moved {received[0]} of {total} bytes")
    return total, elapsed


def warm_page_cache(path: Path, nbytes: int) -> None:
    """Write ``nbytes`` to a scratch file and delete it, so that the next ``nbytes`` of new page cache
    come from memory this VM has touched before. A guest's first touch of a page costs a hypervisor
    fault: measured here, 1 GiB of writes into never-touched memory ran at ~480 MiB/s and the same
    writes right after at ~3,000 MiB/s, which would bill the hypervisor to whichever side ran first."""
    chunk = bytes(MIB)
    with path.open("wb") as out:
        for _ in range(-(-nbytes // MIB)):
            out.write(chunk)
    path.unlink()


async def _write_backlog(
    url: str, body: int, target: int, offset: Any, headers: Mapping[str, str] | None = None
) -> None:
    """Put batches of ~512 KiB from 4 clients until the master's log holds ``target`` bytes."""
    payload = message_payload(body, max(1, 512 * KIB // body))
    async with http_session(4) as http:
        while offset() < target:
            await closed_loop([PutClient(http, url, payload, headers) for _ in range(4)], 0.25)


def _offset(cluster: LocalCluster, node: Any) -> int:
    return int((cluster.broker_status(node, timeout=5) or {}).get("maxOffset") or 0)


def replication_cluster(base: Path, batch: int = DEFAULT_BATCH, secure: bool = False) -> LocalCluster:
    """One controller and one group of 2 replicas with async acks (not started); ``secure``:
    authentication on everywhere, with fresh secrets."""
    broker = {**BROKER, "haTransferBatchSize": str(batch)}
    return LocalCluster(
        base, controllers=1, groups=1, replicas=2, broker_settings=broker, log_level="WARNING", secure=secure
    )


def backlog_behind(cluster: LocalCluster, body: int, backlog: int) -> tuple[Any, Any, int]:
    """Stop the slave of a running ``cluster`` and put ``backlog`` bytes of ``body``-byte messages on
    the master (as the cluster's user when authentication is on); (master, slave, master's log end)."""
    master = cluster.master(timeout=30)
    if master is None:
        raise RuntimeError(f"no master\n{cluster.status_table()}")
    slave = next(n for n in cluster.brokers if n.name != master.name)
    cluster.stop_node(slave)
    url, headers = master.url + PUT_PATH, client_headers(cluster.broker_settings)
    asyncio.run(_write_backlog(url, body, backlog, lambda: _offset(cluster, master), headers))
    return master, slave, _offset(cluster, master)


def empty_slave(cluster: LocalCluster, slave: Any) -> None:
    """Stop ``slave`` and empty its store, so that it copies the whole backlog again."""
    cluster.stop_node(slave)
    shutil.rmtree(slave.store / "commitlog")
    for epoch_file in slave.store.glob("epochFileCheckpoint*"):
        epoch_file.unlink()


def _one_size(base: Path, body: int, backlog: int, batch: int = DEFAULT_BATCH) -> dict[str, Any]:
    with replication_cluster(base, batch) as cluster:
        master, slave, top = backlog_behind(cluster, body, backlog)
        files = sorted((master.store / "commitlog").glob("0*"))
        raw, catch_ups = [], []
        for attempt in range(REPEATS):
            settle(base, top)
            raw.append(raw_copy(files, base / "raw-copy.bin", top))
            if attempt:  # the slave copies the whole backlog again, from an empty store
                empty_slave(cluster, slave)
            settle(base, top)
            catch_ups.append(catch_up(cluster, slave, top))
        settle(base, top)
        raw.append(raw_copy(files, base / "raw-copy.bin", top))
        (base / "raw-copy.bin").unlink()
    copied, raw_seconds = min(raw, key=lambda run: run[1])  # the machine's best in this run
    best = max(catch_ups, key=lambda run: run["mib_per_s"] or 0.0)
    return {
        "body_bytes": body,
        "batch_bytes": batch,
        "backlog_bytes": top,
        **best,
        "mib_per_s_runs": [run["mib_per_s"] for run in catch_ups],
        "raw_mib_per_s": copied / MIB / raw_seconds,
        "raw_runs_s": [r[1] for r in raw],
    }


def settle(base: Path, nbytes: int) -> None:
    """Before a timed copy: write dirty pages back (dirty-page throttling would hit whichever copy runs
    next), then warm ``nbytes`` of page cache."""
    os.sync()
    warm_page_cache(base / "warm-up.bin", nbytes)


def catch_up(cluster: LocalCluster, slave: Any, top: int) -> dict[str, Any]:
    """Start the stopped ``slave`` and time its catch-up to ``top``: the transfer from its first
    replicated byte (polled every 50 ms), the catch-up from its process start."""
    started = time.monotonic()
    cluster.start_node(slave, wait=False)
    first: tuple[float, int] | None = None
    deadline = started + 900
    while True:
        now, offset = time.monotonic(), _offset(cluster, slave)
        if first is None and offset > 0:
            first = (now, offset)
        if offset >= top:
            break
        if now > deadline:
            raise TimeoutError(f"slave at {offset} of {top} bytes after 900 s")
        time.sleep(0.05)
    caught_up = time.monotonic()
    assert first is not None
    moved = top - first[1]
    seconds = max(caught_up - first[0], 1e-3)
    return {
        "catch_up_s": caught_up - started,
        "transfer_bytes": moved,
        "transfer_s": seconds,
        # A backlog caught up before the second poll leaves no window to time (the quick runs' small
        # backlogs): the rate is unknown, shown as "-", not as 0.
        "mib_per_s": moved / MIB / seconds if moved > 0 else None,
    }


def _measure(base: Path, quick: bool) -> dict[str, Any]:
    cfg = settings(quick)
    runs = [
        _one_size(base / f"body{body}-batch{batch}", body, backlog, batch)
        for body, backlog, batch in cfg["runs"]
    ]
    return {"settings": {"runs": cfg["runs"], "broker": BROKER}, "runs": runs}


def _batch_label(run: dict[str, Any]) -> str:
    batch = run.get("batch_bytes", DEFAULT_BATCH)
    label = f"{batch // MIB} MiB" if batch >= MIB else f"{batch // KIB} KiB"
    return label + (" (default)" if batch == DEFAULT_BATCH else "")


def _report(data: dict[str, Any]) -> Outcome:
    rows = [
        (
            f"{r['body_bytes'] // KIB} KiB",
            _batch_label(r),
            fmt(r["backlog_bytes"] / MIB, ".0f"),
            fmt(r["mib_per_s"], ".0f"),
            fmt(r["raw_mib_per_s"], ".0f"),
            fmt(ratio(r["mib_per_s"], r["raw_mib_per_s"]), ".0%"),
            fmt(r["catch_up_s"], ".1f"),
        )
        for r in data["runs"]
    ]
    header = (
        "messages",
        "haTransferBatchSize",
        "backlog MiB",
        "master->slave MiB/s",
        "raw copy MiB/s",
        "of raw",
        "catch-up s",
    )
    title = "replication: slave catch-up of a backlog vs raw loopback socket->file copy of the same bytes"
    targets = [
        Target(
            f"replication / raw copy, {r['body_bytes'] // KIB} KiB messages, {_batch_label(r)} batches",
            ratio(r["mib_per_s"], r["raw_mib_per_s"]),
            0.6,
            at_least=True,
        )
        for r in data["runs"]
    ]
    return Outcome("replication", [format_table(title, header, rows)], targets, data)


def run(base: Path, quick: bool) -> Outcome:
    """Backlog, raw copy, catch-up, raw copy again; per message size."""
    return _report(_measure(base, quick))
