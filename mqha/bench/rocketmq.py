"""``mqha bench rocketmq``: mqha beside Apache RocketMQ 5 on this machine, in one run (issue 47).

Both clusters run at once in the topology of ``mqha demo`` (3 controllers, one group of 3 replicas
with ``allAckInSyncStateSet=true``, one proxy; RocketMQ adds its NameServer). The official Java 5
client (``interop/java-client``) drives both proxies the same way; mqha's own client drives the mqha
group directly as a third row. Rounds are interleaved (the side that goes first alternates), and the
tables give each side's medians and the ratio mqha/RocketMQ, since absolute figures drift between
minutes on this shared 2-core machine.

a) crash failover: SIGKILL the master under 1 and 16 senders, ``--kills`` times per side; the
   client's largest gap between acks, its failed sends, and the time until the side's own metadata
   API names another master (p50/p99).
b) hang failover: the same with SIGSTOP (SIGCONT once a new master serves).
c) produce: msgs/s, p50/p99 at 1 and 16 senders, 1 KiB bodies, through each proxy; mqha direct.
d) consume: msgs/s of a SimpleConsumer reading what (c) wrote.
e) resources: the server processes' RSS at the end, and their CPU seconds per 1,000 messages of (c).

After each failover run a fresh consumer group reads the topic back: every acknowledged sequence
number must be there (lost), and none twice (duplicated), counted alike on both sides.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mqha.bench.loadgen import OpFailed, closed_loop
from mqha.bench.report import Outcome, fmt, format_table, median, ratio
from mqha.bench.rocketmq_figures import Sends, consume_rate, loss, p50_p99, per_thousand
from mqha.bench.rocketmq_sides import KILL, PAUSE, Master, MqhaSide, RocketMQSide, Side, java_client
from mqha.client import Producer, SendStatus

SENDERS = (1, 16)
BODY = 1024
SIDES = ("mqha", "rocketmq")


def settings(quick: bool, kills: int | None) -> dict[str, Any]:
    if quick:
        return {"rounds": 1, "window_s": 5.0, "kills": kills or 1}
    return {"rounds": 2, "window_s": 10.0, "kills": kills or 3}


class JavaDriver:
    """Runs the Java client's driver modes, each a subprocess writing JSON lines to a file."""

    def __init__(self, work: Path) -> None:
        self.command = java_client()
        self.work = work
        self.runs = 0

    def start(self, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
        self.runs += 1
        out = self.work / f"java-{self.runs}-{args[0]}.jsonl"
        env = {"HOME": str(self.work), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        if args[0] in ("drain", "produce"):  # read-backs and round trips have no deadline to keep
            env["MQ_REQUEST_TIMEOUT_MS"] = "15000"  # (``load`` keeps RocketMQ's 3 s: it is measured)
        with open(out, "wb") as sink:
            child = subprocess.Popen(
                [*self.command, *args], stdout=sink, stderr=subprocess.DEVNULL, cwd=self.work, env=env
            )
        return child, out

    def run(self, *args: str, timeout: float) -> list[dict[str, Any]]:
        """Run one mode to its end; its events. A client that failed to start (a cold proxy's route
        query can miss the client's deadline under load) is run again, up to three times."""
        for _ in range(3):
            child, out = self.start(*args)
            try:
                child.wait(timeout)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            events = events_of(out)
            if events and events[-1].get("done"):
                return events
        raise RuntimeError(f"the Java client's {args[0]} gave no result; see {out}")


def events_of(path: Path) -> list[dict[str, Any]]:
    events = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{") and line.endswith("}"):
            events.append(json.loads(line))
    return events


def cpu_seconds(pids: Sequence[int]) -> float:
    """utime + stime of the processes, from /proc (a gone process counts 0)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def rss_mib(pids: Sequence[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def produce_round(side: Side, java: JavaDriver, topic: str, senders: int, window: float) -> dict[str, Any]:
    """One window of the Java client's load through the side's proxy, with the servers' CPU."""
    side.create_topic(topic)
    pids = side.server_pids()
    cpu_before = cpu_seconds(pids)
    events = java.run(
        "load", side.endpoint, topic, str(window), str(senders), str(BODY), timeout=window + 180
    )
    cpu = cpu_seconds(pids) - cpu_before
    sends = Sends.of(events)
    p50, p99 = p50_p99(sends.latencies_ms)
    return {
        "msgs_per_s": sends.throughput(),
        "p50_ms": p50,
        "p99_ms": p99,
        "acked": len(sends.acks),
        "failed": len(sends.failures),
        "cpu_s_per_1000": per_thousand(cpu, len(sends.acks)),
        "rss_mib": rss_mib(pids),
    }


def direct_round(side: MqhaSide, senders: int, window: float) -> dict[str, Any]:
    """mqha's own client straight to the master (no proxy): the same closed loop of 1 KiB sends."""
    body = os.urandom(BODY)

    async def load() -> Any:
        async with Producer(side.cluster.controller_addresses, side.group) as producer:

            async def send() -> None:
                result = await producer.send("BenchDirect", body)
                if result.status != SendStatus.PUT_OK:
                    raise OpFailed(result.status.name)

            return await closed_loop([send] * senders, window)

    result = asyncio.run(load())
    p50, p99 = p50_p99([s * 1000 for s in result.latencies])
    return {
        "msgs_per_s": result.ops_per_s,
        "p50_ms": p50,
        "p99_ms": p99,
        "failed": sum(result.errors.values()),
    }


def consume_round(side: Side, java: JavaDriver, topic: str) -> dict[str, Any]:
    events = java.run("drain", side.endpoint, topic, f"{topic}-reader", "5", "300", timeout=420)
    times = [float(e["t"]) for e in events if "seq" in e]
    return {"msgs_per_s": consume_rate(times), "received": len(times)}


def wait_for(check: Any, timeout: float, what: str, pause: float = 0.05) -> float:
    """Seconds until ``check()`` is true; TimeoutError naming ``what`` after ``timeout``."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if check():
            return time.monotonic() - started
        time.sleep(pause)
    raise TimeoutError(f"{what} not within {timeout:g} s")


def fault_cycle(side: Side, kind: str, acked: Any) -> dict[str, Any]:
    """Fault the master under load; time the metadata API's new master and the acks' return; restore
    the old master and wait until the group is whole again."""
    old: Master = side.master()
    if not old.present or old.pid is None:
        raise RuntimeError(f"{side.name}: no master to fault ({old})")
    count = acked()
    wait_for(lambda: acked() > count, 60, f"{side.name}: acks before the fault")
    start = time.time()
    side.fault(kind, old)
    new_master = wait_for(
        lambda: (m := side.master()).present and m.broker_id != old.broker_id,
        180,
        f"{side.name}: a new master",
    )
    after = acked()
    resumed = wait_for(lambda: acked() > after, 120, f"{side.name}: acks after the new master")
    side.restore(kind, old)
    wait_for(side.ready, 300, f"{side.name}: the group whole again", pause=0.5)
    return {"start": start, "end": time.time(), "new_master_s": new_master, "resumed_after_master_s": resumed}


class LoadRun:
    """The Java client's ``load`` running in the background, its acks counted as they come."""

    def __init__(self, java: JavaDriver, args: tuple[str, ...]) -> None:
        self.java, self.args = java, args
        self.child, self.out = java.start(*args)

    def acked(self) -> int:
        return self.out.read_bytes().count(b'"ok":true')

    def wait_started(self, acks: int) -> None:
        """Until ``acks`` came; a client whose start-up missed its deadline under load exits, and is
        started once more."""
        for _ in range(2):
            with contextlib.suppress(TimeoutError):
                wait_for(lambda: self.acked() >= acks or self.child.poll() is not None, 240, "acks", 0.2)
            if self.child.poll() is None:
                break
            self.child, self.out = self.java.start(*self.args)
        wait_for(lambda: self.acked() >= acks, 240, f"{acks} acks of the Java client", pause=0.2)

    def finish(self) -> None:
        try:
            self.child.wait(60)
        except subprocess.TimeoutExpired:
            self.child.kill()
            self.child.wait()


def failover_run(
    side: Side, java: JavaDriver, kind: str, *, senders: int, kills: int, tag: str
) -> dict[str, Any]:
    """``kills`` faults of one kind under one load; then the no-loss read-back."""
    topic = f"Fail{kind.title()}{senders}{side.name.title()}{tag}"
    side.create_topic(topic)
    stop = java.work / f"{topic}.stop"
    load = LoadRun(java, ("load", side.endpoint, topic, "36000", str(senders), str(BODY), str(stop)))
    cycles = []
    try:
        load.wait_started(5 * senders)
        for _ in range(kills):
            cycles.append(fault_cycle(side, kind, load.acked))
        time.sleep(1)
    finally:
        stop.touch()
        load.finish()
    sends = Sends.of(events_of(load.out))
    ends = [c["start"] for c in cycles[1:]] + [float("inf")]
    for cycle, end in zip(cycles, ends, strict=True):
        cycle["largest_gap_s"] = sends.largest_gap(cycle["start"], min(end, cycle["end"]))
        cycle["failed"] = sends.failed_between(cycle["start"], min(end, cycle["end"]))
    read = java.run("drain", side.endpoint, topic, f"{topic}-check", "10", "600", timeout=720)
    received = [int(e["seq"]) for e in read if "seq" in e]
    return {"cycles": cycles, "failed_total": len(sends.failures), **loss(sends.acked, received)}


def parse_only(text: str | None) -> list[tuple[int, str]] | None:
    """``--only kill:16,pause:1`` -> the failover runs to make (senders, kind); None: everything."""
    if not text:
        return None
    runs = []
    for item in text.split(","):
        kind, _, senders = item.strip().partition(":")
        if kind not in (KILL, PAUSE) or not senders.isdigit():
            raise SystemExit(f"--only: {item!r} is not KIND:SENDERS (kind kill or pause)")
        runs.append((int(senders), kind))
    return runs


def _produce_phase(
    sides: dict[str, Any], java: JavaDriver, cfg: dict[str, Any], data: dict[str, Any]
) -> None:
    for name in SIDES:  # warm-up, not counted: the JVMs' JIT, both proxies' routes and pools
        produce_round(sides[name], java, f"Warm{name.title()}", SENDERS[-1], cfg["window_s"])
    for round_no in range(cfg["rounds"]):
        order = SIDES if round_no % 2 == 0 else SIDES[::-1]
        for senders in SENDERS:
            for name in order:
                topic = f"Bench{senders}R{round_no}{name.title()}"
                row = produce_round(sides[name], java, topic, senders, cfg["window_s"])
                data["produce"].append({"side": name, "senders": senders, "round": round_no, **row})
                if senders == SENDERS[-1]:
                    read = consume_round(sides[name], java, topic)
                    data["consume"].append({"side": name, "round": round_no, **read})
            direct = direct_round(sides["mqha"], senders, cfg["window_s"])
            data["direct"].append({"senders": senders, "round": round_no, **direct})


def _measure(base: Path, quick: bool, kills: int | None, only: str | None) -> dict[str, Any]:
    cfg = settings(quick, kills)
    runs = parse_only(only)
    work = base / "clients"
    work.mkdir(parents=True)
    java = JavaDriver(work)
    sides: dict[str, Any] = {}
    data: dict[str, Any] = {"settings": cfg, "produce": [], "direct": [], "consume": [], "failover": []}
    try:
        sides["mqha"] = MqhaSide(base)
        sides["rocketmq"] = RocketMQSide(base)
        if runs is None:
            _produce_phase(sides, java, cfg, data)
        for index, (senders, kind) in enumerate(runs or [(s, k) for s in SENDERS for k in (KILL, PAUSE)]):
            order = SIDES if index % 2 == 0 else SIDES[::-1]
            for name in order:
                run = failover_run(
                    sides[name], java, kind, senders=senders, kills=cfg["kills"], tag=str(index)
                )
                data["failover"].append({"side": name, "kind": kind, "senders": senders, **run})
    finally:
        for side in sides.values():
            side.stop()
    return data


def _med(rows: Sequence[dict[str, Any]], key: str) -> float | None:
    return median([row.get(key) for row in rows])


def _produce_table(data: dict[str, Any]) -> str:
    rows = []
    for senders in SENDERS:
        cells: dict[str, dict[str, float | None]] = {}
        for name in SIDES:
            mine = [r for r in data["produce"] if r["side"] == name and r["senders"] == senders]
            cells[name] = {k: _med(mine, k) for k in ("msgs_per_s", "p50_ms", "p99_ms")}
        direct = [r for r in data["direct"] if r["senders"] == senders]
        for key, label in (("msgs_per_s", "msgs/s"), ("p50_ms", "p50 ms"), ("p99_ms", "p99 ms")):
            ours, theirs = cells["mqha"][key], cells["rocketmq"][key]
            rows.append((
                f"{senders} sender(s): {label}", fmt(ours, ".1f"), fmt(theirs, ".1f"),
                fmt(ratio(ours, theirs), ".2f"), fmt(_med(direct, key), ".1f"),
            ))  # fmt: skip
    return format_table(
        "c) produce, 1 KiB, allAckInSyncStateSet, official Java client through each proxy (medians)",
        ("figure", "mqha (mqproxy)", "RocketMQ (proxy)", "mqha/RocketMQ", "mqha client direct"),
        rows,
    )


def _consume_and_resources(data: dict[str, Any]) -> str:
    rows = []
    consume = {n: _med([r for r in data["consume"] if r["side"] == n], "msgs_per_s") for n in SIDES}
    rows.append(("d) consume msgs/s (SimpleConsumer)", *_pair(consume, ".1f")))
    for senders in SENDERS:
        for key, label in (("cpu_s_per_1000", "CPU s per 1,000 msgs"), ("rss_mib", "RSS MiB, all servers")):
            cells = {
                n: _med([r for r in data["produce"] if r["side"] == n and r["senders"] == senders], key)
                for n in SIDES
            }
            rows.append((f"e) {label}, {senders} sender(s)", *_pair(cells, ".2f" if "cpu" in key else ".0f")))
    return format_table(
        "d) consume and e) resources (medians)", ("figure", "mqha", "RocketMQ", "mqha/RocketMQ"), rows
    )


def _pair(cells: dict[str, float | None], spec: str) -> tuple[str, str, str]:
    return (
        fmt(cells["mqha"], spec),
        fmt(cells["rocketmq"], spec),
        fmt(ratio(cells["mqha"], cells["rocketmq"]), ".2f"),
    )


def _failover_table(data: dict[str, Any]) -> str:
    rows = []
    for kind, label in ((KILL, "SIGKILL"), (PAUSE, "SIGSTOP")):
        for senders in SENDERS:
            runs = {
                n: [
                    r
                    for r in data["failover"]
                    if r["side"] == n and r["kind"] == kind and r["senders"] == senders
                ]
                for n in SIDES
            }
            if not any(runs.values()):
                continue
            figures: dict[str, dict[str, Any]] = {}
            for name, mine in runs.items():
                cycles = [c for r in mine for c in r["cycles"]]
                master50, master99 = p50_p99([c["new_master_s"] for c in cycles])
                gap50, gap99 = p50_p99([c["largest_gap_s"] for c in cycles if c["largest_gap_s"] is not None])
                figures[name] = {
                    "faults": len(cycles), "new master p50 s": master50, "new master p99 s": master99,
                    "largest ack gap p50 s": gap50, "largest ack gap p99 s": gap99,
                    "failed sends": sum(r["failed_total"] for r in mine),
                    "lost": sum(r["lost"] for r in mine), "duplicated": sum(r["duplicated"] for r in mine),
                }  # fmt: skip
            for key in figures["mqha"]:
                ours, theirs = figures["mqha"][key], figures["rocketmq"][key]
                spec = ".2f" if key.endswith(" s") else "d"
                cell_ratio = fmt(ratio(ours, theirs), ".2f") if key.endswith(" s") else ""
                rows.append(
                    (f"{label}, {senders} sender(s): {key}", fmt(ours, spec), fmt(theirs, spec), cell_ratio)
                )
    return format_table(
        "a) crash and b) hang failover", ("figure", "mqha", "RocketMQ", "mqha/RocketMQ"), rows
    )


def run(base: Path, quick: bool, kills: int | None = None, only: str | None = None) -> Outcome:
    data = _measure(base, quick, kills, only)
    lossy = [
        f"{r['side']} {r['kind']}:{r['senders']}" for r in data["failover"] if r["lost"] or r["duplicated"]
    ]
    if lossy:
        data["keep_run_dir"] = "lost or duplicated messages in " + ", ".join(lossy)
    tables = [_failover_table(data)]
    if data["produce"]:
        tables = [_produce_table(data), _consume_and_resources(data), *tables]
    return Outcome("rocketmq", tables, [], data)
