"""``mqha demo``: a lossless failover, end to end, on 127.0.0.1 (shell).

Steps: start 3 controllers and one broker group of 3 replicas (``allAckInSyncStateSet=true``); produce
a stream of messages with a live status table and progress bar; kill -9 the master and show the
election and the client's recovery time; restart the old master and show it truncate and rejoin;
repeat the kill a few more times for the recovery-time distribution; read everything back; export
the history and run the Spark invariant check; print a verdict.

Ctrl-C (or SIGTERM) at any point stops the workload and every process the demo started, by pid, and
says so; the run directory stays for inspection.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from mqha.cluster.checking import (
    ToolChild,
    adopt_final_log_dump,
    analysis_engine,
    dump_final_logs,
    export_and_analyze,
)
from mqha.cluster.client_auth import broker_user
from mqha.cluster.failover import FailoverReport, distribution, kill_master, ms, rejoin
from mqha.cluster.local import LocalCluster
from mqha.cluster.workload import ProduceWorkload
from mqha.security.credentials import User

GROUP = "broker-a"
TOPIC = "demo"
RECOVERY_MEDIAN_TARGET = 1.0
RECOVERY_MAX_TARGET = 2.0


@dataclass
class DemoOptions:
    """The settings of one ``mqha demo`` run: run directory, kills, warm-up, load and the analysis engine."""

    run_dir: Path | None = None
    kills: int = 5  # the first is shown in detail, the rest feed the distribution
    warmup: float = 3.0  # seconds of steady production before the first kill
    concurrency: int = 4
    body_size: int = 200
    spark: str = "auto"  # auto | spark | python | off


@dataclass
class DemoResult:
    """What one ``mqha demo`` run showed: acknowledged, lost and unknown sends, recovery times, analysis."""

    ok: bool
    acked: int = 0
    lost: int = 0
    unknown: int = 0
    failed: int = 0
    recoveries: list[float] = field(default_factory=list)
    analysis: str = "skipped"
    run_dir: Path | None = None
    interrupted: bool = False


class Screen:
    """Output: plain lines, plus a block redrawn in place when stdout is a terminal."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.tty = out.isatty()
        self._block_lines = 0

    def line(self, text: str = "") -> None:
        self._block_lines = 0
        self.out.write(text + "\n")
        self.out.flush()

    def block(self, lines: list[str]) -> None:
        """Redraw the live block (terminal) or print it (pipe)."""
        if self.tty and self._block_lines:
            self.out.write(f"\x1b[{self._block_lines}F\x1b[J")
        self.out.write("\n".join(lines) + "\n")
        self.out.flush()
        self._block_lines = len(lines) if self.tty else 0

    def bold(self, text: str) -> str:
        return f"\x1b[1m{text}\x1b[0m" if self.tty else text


def _bar(fraction: float, width: int = 30) -> str:
    filled = int(max(0.0, min(1.0, fraction)) * width)
    return "[" + "#" * filled + "." * (width - filled) + "]"


def _indent(text: str, prefix: str = "    ") -> list[str]:
    return [prefix + line for line in text.splitlines()]


def live(
    screen: Screen,
    cluster: LocalCluster,
    workload: ProduceWorkload,
    seconds: float,
    title: str,
    *,
    until: Callable[[], bool] | None = None,
) -> None:
    """Show the status table and a progress bar for ``seconds`` (or until ``until()``)."""
    start = time.monotonic()
    last_print = 0.0
    acked_before = workload.acked
    while True:
        elapsed = time.monotonic() - start
        done = elapsed >= seconds or (until is not None and until())
        if screen.tty or done or elapsed - last_print >= 1.0:
            last_print = elapsed
            rate = (workload.acked - acked_before) / elapsed if elapsed > 0 else 0.0
            c = workload.counts
            progress = (
                f"    {_bar(elapsed / seconds if seconds else 1.0)} {title}: {workload.acked:,} acked "
                f"({rate:,.0f}/s), unknown {c[_status('UNKNOWN')]}, failed {c[_status('FAILED')]}, "
                f"not replicated {c[_status('FLUSH_SLAVE_TIMEOUT')]}"
            )
            if screen.tty:
                screen.block([*_indent(cluster.status_table()), "", progress])
            elif done:
                screen.block([*_indent(cluster.status_table()), progress])
            else:
                screen.line(progress)
        if done:
            return
        time.sleep(0.25)


def _status(name: str) -> Any:
    from mqha.client.results import SendStatus

    return SendStatus[name]


def _wait_sss(cluster: LocalCluster, size: int, timeout: float) -> tuple[int, ...]:
    deadline = time.monotonic() + timeout
    while True:
        master = cluster.master(GROUP)
        sss = tuple((cluster.broker_status(master) or {}).get("syncStateSet") or ()) if master else ()
        if len(sss) >= size or time.monotonic() >= deadline:
            return sss
        time.sleep(0.05)


def _sss(members: tuple[int, ...] | list[int]) -> str:
    return "{" + ",".join(str(m) for m in members) + "}"


def show_failover(screen: Screen, cluster: LocalCluster, report: FailoverReport) -> None:
    screen.line(
        f"    killed {report.old_master} (broker id {report.old_broker_id}, masterEpoch {report.old_epoch},"
        f" log end {report.old_max_offset})"
    )
    leader = cluster.controller_leader()
    screen.line(
        f"    election: {report.new_master} (broker id {report.new_broker_id}) is master, masterEpoch "
        f"{report.old_epoch} -> {report.new_epoch}, SyncStateSet {_sss(report.new_sync_state_set)}"
        f" -- seen {ms(report.election)} after the kill"
        + (f" (controller leader {leader.name})" if leader else "")
    )
    s = report.sample
    screen.line(
        f"    client: first failed send {ms(s.first_failure_at - s.killed_at)} after the kill, first ack "
        f"from the new master {ms(s.kill_to_ack)} after it -> recovery time {screen.bold(ms(s.recovery))}"
    )
    sss = _wait_sss(cluster, 2, 5.0)
    screen.line(f"    the surviving slave catches up and rejoins: SyncStateSet {_sss(sss)}")


def show_rejoin(screen: Screen, report: FailoverReport) -> None:
    if report.truncated is not None:
        cut_from, cut_to = report.truncated
        what = f"truncated its unreplicated tail {cut_from} -> {cut_to} ({cut_from - cut_to} bytes)"
    else:
        what = "had no divergent tail to truncate (everything it held was replicated)"
    screen.line(
        f"    {report.old_master} restarted: {what}; rejoined as {report.rejoined_role} in "
        f"{report.rejoined_in or 0:.1f} s; SyncStateSet {_sss(report.final_sync_state_set)}"
    )


async def _read_back(
    controllers: list[str], record_to: Path, expected_end: int, user: User | None = None
) -> dict[int, str]:
    """Every message of the final master's log, offset -> msgId, read through a Consumer."""
    from mqha.client.consumer import Consumer

    out: dict[int, str] = {}
    async with Consumer(
        controllers, GROUP, record_to=record_to, client_id="demo-consumer", user=user
    ) as consumer:
        deadline = time.monotonic() + 30
        while consumer.offset < expected_end and time.monotonic() < deadline:
            batch = await consumer.poll(1024, timeout=5)
            for message in batch:
                out[message.offset] = message.msg_id
            if not batch:
                await _sleep(0.05)
    return out


async def _sleep(seconds: float) -> None:
    import asyncio

    await asyncio.sleep(seconds)


@contextlib.contextmanager
def _signals_raise() -> Iterator[None]:
    """SIGTERM / SIGHUP behave like Ctrl-C: the ``finally`` blocks stop everything."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def _uninterruptible() -> Iterator[None]:
    """Cleanup must finish: a second Ctrl-C during it is ignored."""
    previous = {
        sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    }
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


class Demo:
    """The demo's steps; ``run`` sequences them and always cleans up (see the module docstring)."""

    STEPS = 7

    def __init__(self, options: DemoOptions, out: TextIO) -> None:
        self.options = options
        self.screen = Screen(out)
        self.temporary = options.run_dir is None  # deleted after a passed run
        self.run_dir = Path(options.run_dir or tempfile.mkdtemp(prefix="mqha-demo-")).resolve()
        self.result = DemoResult(ok=False, run_dir=self.run_dir)
        self.cluster = LocalCluster(self.run_dir, controllers=3, groups=1, replicas=3, secure=True)
        self.workload: ProduceWorkload | None = None
        self.child = ToolChild()
        self.reports: list[FailoverReport] = []
        self.started = time.monotonic()

    def step(self, number: int, text: str) -> None:
        self.screen.line()
        self.screen.line(f"[{number}/{self.STEPS}] {text}")

    def run(self) -> DemoResult:
        screen = self.screen
        screen.line(
            screen.bold("mqha demo: RocketMQ controller-mode HA, lossless failover, all on 127.0.0.1")
        )
        screen.line(f"run directory: {self.run_dir}  (configs, logs, stores, histories)")
        try:
            with _signals_raise():
                self.start_cluster()
                self.produce()
                self.first_failover()
                self.more_failovers()
                self.read_back()
                self.check()
                self.verdict()
        except KeyboardInterrupt:
            self.result.interrupted = True
            screen.line()
            screen.line("interrupted: stopping everything the demo started ...")
        finally:
            with _uninterruptible():
                self.cleanup()
        return self.result

    def start_cluster(self) -> None:
        self.step(
            1,
            f"starting 3 controllers + broker group {GROUP} x 3 replicas (allAckInSyncStateSet=true, "
            "1.5 s heartbeat timeout; a crash is seen when its controller session closes)",
        )
        t0 = time.monotonic()
        self.cluster.start(timeout=90)
        self.screen.line(f"    ready in {time.monotonic() - t0:.1f} s: one master, SyncStateSet of 3")
        self.screen.block(_indent(self.cluster.status_table()))

    def produce(self) -> None:
        o = self.options
        self.step(
            2,
            f"producing: {o.concurrency} concurrent senders, {o.body_size}-byte messages, "
            "every answer recorded in the history store",
        )
        self.workload = ProduceWorkload(
            self.cluster.controller_addresses,
            GROUP,
            concurrency=o.concurrency,
            topic=TOPIC,
            body_size=o.body_size,
            record_to=self.run_dir / "clients" / "producer",
            client_id="demo-producer",
            user=broker_user(self.cluster.broker_settings),
        ).start()
        live(self.screen, self.cluster, self.workload, o.warmup, "steady state")

    def first_failover(self) -> None:
        assert self.workload is not None
        self.step(3, "kill -9 the master while the stream runs")
        report = kill_master(self.cluster, self.workload, GROUP)
        self.reports.append(report)
        show_failover(self.screen, self.cluster, report)
        live(self.screen, self.cluster, self.workload, 1.0, "on the new master")
        self.step(4, "restart the old master: it truncates what was never replicated and rejoins")
        rejoin(self.cluster, report)
        show_rejoin(self.screen, report)
        live(self.screen, self.cluster, self.workload, 1.0, "whole again")

    def more_failovers(self) -> None:
        assert self.workload is not None
        more = max(0, self.options.kills - 1)
        self.step(5, f"{more} more kill -9 / restart cycles for the recovery-time distribution")
        for i in range(more):
            report = rejoin(self.cluster, kill_master(self.cluster, self.workload, GROUP))
            self.reports.append(report)
            cut = (
                f"truncated {report.truncated[0] - report.truncated[1]} B" if report.truncated else "no tail"
            )
            self.screen.line(
                f"    #{i + 2}: killed {report.old_master} -> {report.new_master} masterEpoch "
                f"{report.new_epoch}: recovery {ms(report.recovery)} (election seen "
                f"{ms(report.election)}); restarted: {cut}, rejoined in {report.rejoined_in or 0:.1f} s"
            )
        dist = distribution(self.reports)
        self.result.recoveries = list(dist.samples)
        self.screen.line("    client recovery time, first failed send -> first ack on the new master:")
        self.screen.line(f"    {dist.summary()}")
        for line in dist.histogram():
            self.screen.line("    " + line)

    def read_back(self) -> None:
        import asyncio

        assert self.workload is not None
        self.step(6, "stop producing; read everything back from the final master")
        self.workload.stop()
        results = self.workload.snapshot()
        acked = {r.offset: r.msg_id for r in results if r.ok}
        r = self.result
        r.acked = len(acked)
        r.unknown = sum(x.status.value == "UNKNOWN" for x in results)
        r.failed = sum(x.status.value == "FAILED" for x in results)
        retried = sum(x.attempts > 1 for x in results)
        master = self.cluster.master(GROUP, timeout=10)
        end = int((self.cluster.broker_status(master) or {}).get("maxOffset") or 0) if master else 0
        consumer_dir = self.run_dir / "clients" / "consumer"
        user = broker_user(self.cluster.broker_settings)
        log = asyncio.run(_read_back(self.cluster.controller_addresses, consumer_dir, end, user))
        r.lost = sum(log.get(offset) != msg_id for offset, msg_id in acked.items())
        duplicates = len(log) - len(set(log.values()))
        self.screen.line(
            f"    sent {len(results):,}: {r.acked:,} acknowledged (PUT_OK), {r.unknown} unknown, "
            f"{r.failed} failed; {retried} needed a retry"
        )
        self.screen.line(
            f"    the log holds {len(log):,} messages ({duplicates} stored twice: a retry after an answer "
            f"lost in a crash, same msgId); acknowledged but missing: {self.screen.bold(str(r.lost))}"
        )

    def check(self) -> None:
        engine = analysis_engine(self.options.spark)
        name = {"spark": "PySpark", "python": "pure-Python checker"}.get(engine or "", "skipped")
        self.step(7, f"export the history and check the invariants ({name})")
        # Brokers that do not dump their own log at shutdown get it read through their API first;
        # the dump is named so that ``mqha export`` only sees it when it is actually used.
        staging = self.run_dir / "clients" / "final-log-dump" / "api-dump.db"
        dumped = dump_final_logs(self.cluster, staging, [GROUP])
        self.cluster.stop()  # nodes flush their histories on the way out
        if adopt_final_log_dump(self.cluster, staging):
            self.screen.line(
                f"    brokers keep no final log of their own: using {len(dumped)} replica logs "
                "read via the API"
            )
        result = export_and_analyze(self.run_dir, engine, self.child)
        self.screen.line("    " + result.export_line)
        if engine is None:
            return
        if result.analyze_code is None:
            self.result.analysis = f"export failed (exit {result.export_code})"
            return
        for line in result.lines:
            self.screen.line("    " + line)
        self.screen.line(f"    ({result.seconds:.0f} s; reports in {result.export_dir / 'report'})")
        self.result.analysis = (
            "all invariants hold" if result.analyze_code == 0 else f"VIOLATIONS (exit {result.analyze_code})"
        )

    def verdict(self) -> None:
        r = self.result
        dist = distribution(self.reports)
        analysis_ok = r.analysis in ("all invariants hold", "skipped")
        fast = dist.median <= RECOVERY_MEDIAN_TARGET and dist.maximum <= RECOVERY_MAX_TARGET
        r.ok = r.lost == 0 and analysis_ok and fast
        self.screen.line()
        self.screen.line(
            self.screen.bold(
                f"verdict: {'PASS' if r.ok else 'FAIL'} -- {r.acked:,} messages acknowledged, {r.lost} lost, "
                f"{r.unknown} unknown; recovery median {ms(dist.median)}, max {ms(dist.maximum)} over "
                f"{len(dist.samples)} master kills; invariants: {r.analysis}; "
                f"{time.monotonic() - self.started:.0f} s in all"
            )
        )

    def cleanup(self) -> None:
        if self.workload is not None:
            with contextlib.suppress(Exception):
                self.workload.stop(timeout=5, cancel=self.result.interrupted)
        self.child.stop()
        self.cluster.stop()
        left = self.cluster.running_pids()
        if self.result.interrupted or left:
            self.screen.line(f"stopped; processes left behind: {left or 'none'}")
        passed = self.result.ok and not self.result.interrupted
        self.screen.line(self.cluster.discard_or_keep(temporary=self.temporary, ok=passed))


def run_demo(options: DemoOptions, out: TextIO = sys.stdout) -> DemoResult:
    """Run the demo; returns its verdict (also printed)."""
    return Demo(options, out).run()
