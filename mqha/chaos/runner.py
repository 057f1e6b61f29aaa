"""``mqha chaos``: a local cluster under a workload and a seeded fault schedule, then a verdict (shell).

Sequence (decisions live in ``mqha.chaos.schedule``, ``mqha.chaos.links`` and ``mqha.chaos.verdict``):

1. a :class:`LocalCluster` whose brokers reach the controllers and each other through per-link
   proxies (``mqha.chaos.proxy``), ``allAckInSyncStateSet=true``, ``flushDiskType`` as asked
   (``mixed``: the groups take ``ASYNC_FLUSH`` and ``SYNC_FLUSH`` in turn);
2. per broker group, a producer (unique msgIds, every answer recorded) and a consumer (every read
   recorded);
3. the schedule's steps, one at a time: inject, hold, heal, wait until every group is whole again
   (bounded), a quiet gap; no new step starts after ``duration`` seconds (a ``disk-wipe`` is
   injected and healed by ``mqha.chaos.controller_stores``, a ``disk-full`` by
   ``mqha.chaos.disk_fill``, on brokers whose stores are tmpfs mounts of ``store_tmpfs_mib``, a
   ``power-loss`` by ``mqha.chaos.power_cuts``);
4. heal everything (every controller a voter again), let it settle, stop the clients, check that the
   controllers agree, read every replica's final log, stop the cluster, ``mqha export`` +
   ``mqha analyze`` (``mqha.cluster.checking``), print the verdict table.

Every process is started through the cluster (stopped by pid in the ``finally``); the proxy is a
thread of this process.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from mqha.chaos import links as chaos_links
from mqha.chaos.bitflips import BITFLIP_SETTINGS, BitFlips
from mqha.chaos.clock_faults import CLOCK_SETTINGS, ClockFaults
from mqha.chaos.clones import Clones
from mqha.chaos.configs import group_flush_types
from mqha.chaos.controller_network import ControllerNetwork
from mqha.chaos.controller_stores import ControllerStores
from mqha.chaos.controller_writes import present_topics
from mqha.chaos.declared import declared_ranges
from mqha.chaos.disk_fill import DISK_FULL_SETTINGS, DiskFill, disk_full_problem
from mqha.chaos.network_faults import NETWORK_KINDS, NetworkFaults
from mqha.chaos.power_cuts import PowerCuts
from mqha.chaos.proxy import FaultProxy
from mqha.chaos.run_clients import RunClients
from mqha.chaos.run_files import exported_rows, write_fault_rows
from mqha.chaos.schedule import (
    ALL_CONTROLLERS,
    BITFLIP,
    BROKER,
    CLIENT_PARTITION,
    CLOCK,
    CLONE,
    CONTROLLER_LEADER,
    DISK_FULL,
    DISK_WIPE,
    GROUP,
    KILL,
    MASTER,
    MASTER_AND_LEADER,
    PACKET_FILTER_KINDS,
    PARTITION,
    PAUSE,
    POWER_LOSS,
    FaultStep,
    Topology,
    plan,
    schedule_text,
)
from mqha.chaos.verdict import (
    FaultOutcome,
    RunFacts,
    Verdict,
    fault_rows,
    judge,
    recovery_time,
)
from mqha.cluster.checking import (
    PYTHON_ENGINE,
    ToolChild,
    adopt_final_log_dump,
    analysis_engine,
    dump_final_logs,
    export_and_analyze,
)
from mqha.cluster.client_auth import admin_headers
from mqha.cluster.local import LocalCluster
from mqha.cluster.nodes import ClusterError
from mqha.cluster.processes import free_port_pair
from mqha.testing.planted_bugs import planted_env


@dataclass
class ChaosOptions:
    """The settings of one ``mqha chaos`` run (faults, seed, sizes, output)."""

    duration: float = 120.0  # seconds during which new faults start
    kinds: tuple[str, ...] = (KILL, PAUSE, PARTITION)
    seed: int = 1
    controllers: int = 3
    groups: int = 1
    replicas: int = 3
    run_dir: Path | None = None
    check: str = "auto"  # auto | spark | python | off
    concurrency: int = 4
    body_size: int = 200
    settle_timeout: float = 30.0  # per step: heal -> every group whole again
    rejoin_timeout: float = 60.0  # disk-wipe: observer -> voter again (waits out an overlapping fault)
    planted: tuple[str, ...] = ()  # planted bugs (tests only; mqha.testing.planted_bugs)
    broker_settings: dict[str, str] = field(default_factory=dict)
    store_tmpfs_mib: int = 0  # > 0: each broker's store on its own tmpfs (root; needed by disk-full)
    flush_disk_type: str = "ASYNC_FLUSH"  # or SYNC_FLUSH, or MIXED_FLUSH (per group in turn)
    config_name: str = ""  # ``--config`` (mqha.chaos.configs), shown in the title


def topology_of(cluster: LocalCluster) -> Topology:
    return Topology(
        tuple(c.name for c in cluster.controllers),
        tuple((g, tuple(b.name for b in cluster.group_brokers(g))) for g in cluster.groups),
    )


def _link_ports() -> Iterator[int]:
    """Free ports with 5 digits, as the cluster's (the address translation keeps lengths)."""
    while True:
        port = free_port_pair()
        if port >= 10000:
            yield port


class ChaosRun:
    """One ``mqha chaos`` run; ``run`` always stops what it started."""

    def __init__(self, options: ChaosOptions, out: TextIO = sys.stdout) -> None:
        self.options = options
        self.out = out
        if DISK_FULL in options.kinds and (problem := disk_full_problem(options.store_tmpfs_mib)):
            raise ClusterError(problem)
        self.temporary = options.run_dir is None  # deleted after a passed run
        self.run_dir = Path(options.run_dir or tempfile.mkdtemp(prefix="mqha-chaos-")).resolve()
        self.cluster = LocalCluster(
            self.run_dir,
            controllers=options.controllers,
            groups=options.groups,
            replicas=options.replicas,
            broker_settings={
                "allAckInSyncStateSet": "true",
                **(DISK_FULL_SETTINGS if options.store_tmpfs_mib else {}),
                **(BITFLIP_SETTINGS if BITFLIP in options.kinds else {}),
                **(CLOCK_SETTINGS if CLOCK in options.kinds else {}),
                **options.broker_settings,
            },
            secure=True,  # faults hit the cluster as operators run it: authentication on (docs §12)
            store_tmpfs_mib=options.store_tmpfs_mib,
        )
        self.cluster.env.update(planted_env(options.planted))
        self.topology = topology_of(self.cluster)
        self.steps = plan(options.seed, options.kinds, options.duration, self.topology)
        self.links = chaos_links.plan_links(
            self.topology,
            {c.name: c.address for c in self.cluster.controllers},
            {b.name: b.ha_address or "" for b in self.cluster.brokers},
            _link_ports(),
        )
        for controller in self.cluster.controllers:
            self.cluster.node_settings.setdefault(controller.name, {})["controllerNodeAliases"] = (
                chaos_links.controller_aliases(self.links, controller.address)
            )
        self.flush_types = group_flush_types(options.flush_disk_type, self.cluster.groups)
        for broker in self.cluster.brokers:
            self.cluster.node_settings[broker.name] = {
                "controllerAddr": chaos_links.controller_addr(self.links, broker.name),
                "flushDiskType": self.flush_types[broker.group or ""],
            }
        self.proxy = FaultProxy(
            self.links,
            translations={
                link.name: chaos_links.translations(self.links, link.source)
                for link in self.links
                if link.scope == chaos_links.CONTROLLER_LINKS
            },
            seed=options.seed,
        )
        self.outcomes: list[FaultOutcome] = []
        self.reached: list[str] = []  # the kind of every step reached, injected or skipped
        self.stores = ControllerStores(self.cluster)
        self.disks = DiskFill(self.cluster)
        self.power = PowerCuts(self.cluster, self.say, self.flush_types)
        self.flips = BitFlips(self.cluster, self.say, options.seed, self.stores, options.rejoin_timeout)
        self.clones = Clones(self.cluster, self.run_dir, self.say)
        # Controller-network and client faults: the kernel's packet filter.
        network = ControllerNetwork(self.cluster) if PACKET_FILTER_KINDS & set(options.kinds) else None
        heartbeat_timeout = int(self.cluster.broker_settings["controllerHeartBeatTimeoutMills"]) / 1000
        self.net = NetworkFaults(self.proxy, self.links, network, heartbeat_timeout, self.say)
        # After ControllerNetwork: both shims share the node's environment.
        self.clocks = ClockFaults(self.cluster, self.run_dir) if CLOCK in options.kinds else None
        client_source = network.client_source if network is not None else None
        self.clients = RunClients(
            self.cluster, self.run_dir / "clients", options.concurrency, options.body_size, client_source
        )
        self.producers = self.clients.producers
        self.child = ToolChild()
        self.started = time.monotonic()

    def say(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    @property
    def title(self) -> str:
        o = self.options
        return (
            f"mqha chaos: seed {o.seed}, faults {','.join(o.kinds)}, {o.duration:g} s, {o.controllers} "
            f"controllers, {o.groups} group(s) x {o.replicas} replicas, {self._ack_text()}, "
            f"flushDiskType={self._flush_text()}"
            + (f", config {o.config_name}" if o.config_name else "")
            + (f", PLANTED BUG: {', '.join(o.planted)}" if o.planted else "")
            + (f", broker stores on {o.store_tmpfs_mib} MiB tmpfs" if o.store_tmpfs_mib else "")
        )

    def _ack_text(self) -> str:
        settings = self.cluster.broker_settings
        text = f"allAckInSyncStateSet={settings.get('allAckInSyncStateSet', 'false')}"
        if settings.get("allAckInSyncStateSet") != "true":
            text += f", inSyncReplicas={settings.get('inSyncReplicas', '1')}"
        return text + f", minInSyncReplicas={settings.get('minInSyncReplicas', '1')}"

    def _flush_text(self) -> str:
        kinds = set(self.flush_types.values())
        if len(kinds) == 1:
            return kinds.pop()
        return ",".join(f"{g}:{t}" for g, t in self.flush_types.items())

    # -- the run -----------------------------------------------------------------------------------

    def run(self) -> Verdict:
        verdict: Verdict | None = None
        try:
            self.say(self.title)
            self.say(f"run directory: {self.run_dir}")
            self.say(f"schedule ({len(self.steps)} steps):")
            self.out.write(schedule_text(self.steps))
            self.start()
            self.inject_all()
            verdict = self.finish()
            return verdict
        finally:
            self.cleanup()
            ok = verdict is not None and verdict.ok
            self.say(self.cluster.discard_or_keep(temporary=self.temporary, ok=ok))

    def start(self) -> None:
        self.proxy.start()
        t0 = time.monotonic()
        self.cluster.start(timeout=90)
        self.say(f"cluster ready in {time.monotonic() - t0:.1f} s; starting the clients")
        self.clients.start()

    def inject_all(self) -> None:
        faults_from = time.monotonic()  # the duration counts from the first fault, not the set-up
        for step in self.steps:
            if time.monotonic() - faults_from > self.options.duration:
                self.say(f"duration reached: {len(self.outcomes)} of {len(self.steps)} steps injected")
                return
            self._start_stopped(list(self.cluster.nodes))  # a restart that failed before
            self.reached.append(step.kind)
            outcome = self.inject(step)
            if outcome is not None:
                self.outcomes.append(outcome)
            time.sleep(step.gap)

    def _resolve(self, step: FaultStep) -> tuple[str, ...]:
        """The nodes a step hits now (a master or a leader is looked up, bounded)."""
        nodes = list(step.nodes)
        if step.target == GROUP:
            return tuple(nodes)
        if step.kind == CLIENT_PARTITION:  # (the old master, the controller on the clients' side)
            master = self.cluster.master(step.group, timeout=10)
            controller = nodes[0] if nodes else self._leader_name()
            return (master.name, controller) if master is not None and controller is not None else ()
        if step.target in (MASTER, MASTER_AND_LEADER):
            master = self.cluster.master(step.group, timeout=10)
            if master is None:
                return ()
            nodes.append(master.name)
        if step.target in (CONTROLLER_LEADER, MASTER_AND_LEADER):
            leader = self._leader_name()
            if leader is None:
                return ()
            nodes.append(leader)
        return tuple(nodes)

    def _leader_name(self) -> str | None:
        """The controller leader of the moment (looked up for at most 10 s)."""
        deadline = time.monotonic() + 10
        leader = self.cluster.controller_leader()
        while leader is None and time.monotonic() < deadline:
            time.sleep(0.1)
            leader = self.cluster.controller_leader()
        return leader.name if leader is not None else None

    def inject(self, step: FaultStep) -> FaultOutcome | None:
        nodes = self._resolve(step)
        if not nodes:
            self.say(f"{step.describe()}: skipped, no {step.target} found")
            return None
        own = step.target in (MASTER, BROKER, GROUP) and step.group and step.kind != CLIENT_PARTITION
        groups = (step.group,) if own and step.group else tuple(self.cluster.groups)
        marks = {g: len(self.producers[g].results) for g in groups}
        master = self.cluster.master(step.group, timeout=1) if step.target == GROUP else None
        injected_at = time.monotonic()
        injected_at = self._hit(step, nodes) or injected_at
        time.sleep(max(0.0, injected_at + step.hold - time.monotonic()))
        healed_at = self._heal(step, nodes, master.name if master is not None else None)
        whole_at: float | None = None
        try:
            self.cluster.wait_ready(self.options.settle_timeout)
            whole_at = time.monotonic()
        except ClusterError as exc:
            first_line = str(exc).splitlines()[0]
            self.say(f"    not whole again within {self.options.settle_timeout:g} s: {first_line}")
        outcome = FaultOutcome(step, nodes, groups, injected_at, healed_at, whole_at)
        # Results are appended as sends complete: only those after the mark can follow the fault.
        recovered = [recovery_time(injected_at, self.producers[g].results[marks[g] :]) for g in groups]
        known = [r for r in recovered if r is not None]
        shown = f"{max(known):.2f} s" if known and len(known) == len(recovered) else "-"
        whole = "-" if whole_at is None else f"{whole_at - healed_at:.1f} s"
        self.say(
            f"{step.describe()} -> hit {','.join(nodes)}; recovery {shown}; "
            f"whole again {whole} after the heal"
        )
        return outcome

    def _hit(self, step: FaultStep, nodes: Sequence[str]) -> float | None:
        """Inject ``step``; a power cut returns the instant every node was dead (recovery counts from
        there: the master may answer puts until its own kill), a network fault the instant it was in
        place, other kinds None."""
        if step.kind == POWER_LOSS:
            return self.power.hit(step, nodes).cut_at
        if step.kind == DISK_WIPE:
            self.stores.hit(step, nodes)
        elif step.kind == BITFLIP:
            self.flips.hit(step, nodes)
        elif step.kind == DISK_FULL:
            self.say(f"    filled {self.disks.hit(nodes)} (until ENOSPC)")
        elif step.kind == CLONE:
            self.clones.hit(nodes[0])
        elif step.kind == KILL:
            for node in nodes:
                self.cluster.kill(node)
        elif step.kind == PAUSE or (step.kind == ALL_CONTROLLERS and step.links == PAUSE):
            for node in nodes:
                self.cluster.pause(node)
        elif step.kind == ALL_CONTROLLERS:
            for node in nodes:
                self.cluster.kill(node)
        elif step.kind == CLOCK and self.clocks is not None:
            self.clocks.hit(step, nodes)
        elif step.kind in NETWORK_KINDS:
            self.net.hit(step, nodes)
            return time.monotonic()  # in place now (nft takes a moment): what is acked before proves nothing
        else:
            raise ValueError(f"no injection for {step.kind}")
        return None

    def _heal(self, step: FaultStep, nodes: Sequence[str], master: str | None) -> float:
        """Undo ``step``; returns when it counts as healed (``master``: a power-cut group's master)."""
        heal_started = time.monotonic()
        if step.kind == DISK_WIPE:
            problem = self.stores.heal(step, nodes, self.options.rejoin_timeout)
            done = f"a voter again {time.monotonic() - heal_started:.1f} s after its restart"
            self.say(f"    {nodes[0]}: {problem or done}")
            return heal_started  # healed when it restarts: the procedure counts toward "whole again"
        if step.kind == DISK_FULL:
            for seen in self.disks.heal(nodes):
                self.say(f"    before freeing: {seen}")
        elif step.kind == KILL or (step.kind == ALL_CONTROLLERS and step.links == KILL):
            self._start_stopped(nodes)
        elif step.kind == CLOCK and self.clocks is not None:
            self.clocks.heal(nodes)
        elif step.kind in NETWORK_KINDS:
            self.net.heal(step, nodes)
        elif step.kind == CLONE:
            self.clones.heal()
        elif step.kind == POWER_LOSS:
            self.power.heal(step, self.power.restart_order(step, nodes, master), self._start_stopped)
        elif step.kind == BITFLIP:
            self.flips.heal(step, nodes, self._start_stopped)
        elif step.kind in (PAUSE, ALL_CONTROLLERS):
            for node in nodes:
                self.cluster.resume(node)
        return time.monotonic()

    def _retention_may_delete(self) -> bool:
        """Whether retention may rightly have deleted acknowledged messages of this run: the run lasted
        fileReservedTime, or a full disk allowed forcible cleaning (a disk-full fault, or the run
        directory's file system above diskSpaceCleanForciblyRatio)."""
        settings = self.cluster.broker_settings
        reserved_s = int(settings.get("fileReservedTime", "72")) * 3600
        disk = os.statvfs(self.run_dir)
        used = 1 - disk.f_bavail / disk.f_blocks if disk.f_blocks else 1.0
        forcible = used * 100 > int(settings.get("diskSpaceCleanForciblyRatio", "85"))
        return self.options.duration >= reserved_s or DISK_FULL in self.options.kinds or forcible

    def _start_stopped(self, nodes: Sequence[str]) -> None:
        """Start those of ``nodes`` that are not running; a failed start is reported, and the next
        step or the final heal tries again."""
        for node in nodes:
            if self.cluster.is_running(node):
                continue
            try:
                self.cluster.start_node(node, timeout=30)
            except ClusterError as exc:
                self.say(f"    restart of {node} failed: {str(exc).splitlines()[0]}")

    def heal_all(self) -> bool:
        """Every link open, every node resumed and running, every controller a voter; True when every
        group is whole again."""
        self.net.heal_all()
        self.disks.heal_all()
        for node in self.cluster.nodes.values():
            self.cluster.resume(node)
        self._start_stopped(list(self.cluster.nodes))
        for problem in self.stores.ensure_voters(self.options.rejoin_timeout):
            self.say(f"not a voter again after the final heal: {problem}")
        try:
            self.cluster.wait_ready(60)
        except ClusterError as exc:
            self.say(f"not whole again after the final heal: {exc}")
            return False
        return True

    def finish(self) -> Verdict:
        settled = self.heal_all()
        time.sleep(2.0)  # traffic on the healed cluster
        unrepaired = self.flips.unrepaired(30.0) if self.flips.flips else []
        sends = self.clients.stop_producers()
        reads = self.clients.drain_consumers()
        writes = self.clients.stop_writes()
        headers = admin_headers(self.cluster.broker_settings)
        present = present_topics(list(self.cluster.controller_addresses), headers) if writes else None
        controllers = self.stores.agreement(30.0)
        final_logs = self._final_logs_then_stop()
        engine = analysis_engine(self.options.check)
        self.say(f"checking the history ({engine or 'no invariant check'}) ...")
        # auto: a Spark JVM that cannot finish on a loaded machine leaves the Python engine the verdict
        fallback = PYTHON_ENGINE if self.options.check == "auto" else None
        check = export_and_analyze(self.run_dir, engine, self.child, fallback=fallback)
        if check.fallback_reason:
            self.say(f"    {check.fallback_reason}; checked again with {check.engine}")
        problem = None
        declared = declared_ranges(exported_rows(check.export_dir, "controller_events"))
        if engine is not None and check.invariants is None:
            problem = (
                f"export failed (exit {check.export_code}): {check.export_line}"
                if check.analyze_code is None
                else f"analysis gave no verdict (exit {check.analyze_code})"
            )
        reads_seen = exported_rows(check.export_dir, "reads")
        facts = RunFacts(
            title=self.title,
            planned=len(self.steps),
            faults=tuple(self.outcomes),
            sends=sends,
            reads=reads,
            final_logs=final_logs,
            engine=check.engine or engine or "off",
            invariants=check.invariants,
            check_problem=problem,
            settled=settled,
            heartbeat_timeout=int(self.cluster.broker_settings["controllerHeartBeatTimeoutMills"]) / 1000,
            controllers=controllers,
            power_cuts=tuple(self.power.cuts),
            declared=declared,
            reads_seen=tuple((r["brokerName"], r["offset"], r["msgId"]) for r in reads_seen),
            reads_recorded=bool(reads_seen) or check.invariants is not None,
            sequences=self.clients.sequences(),
            controller_writes=writes,
            probe_topics=present,
            asked=self.options.kinds,
            reached=tuple(self.reached),
            flips=len(self.flips.flips),
            unrepaired=tuple(unrepaired),
            undetected=tuple(self.flips.undetected),
            retention_may_delete=self._retention_may_delete(),
            clones=self.clones.summary(),
            clone_problems=tuple(self.clones.problems),
        )
        verdict = judge(facts)
        write_fault_rows(self.run_dir, fault_rows(facts))
        self.say()
        self.out.write(verdict.text)
        self.say(f"({time.monotonic() - self.started:.0f} s in all; history and reports in {self.run_dir})")
        return verdict

    def _final_logs_then_stop(self) -> dict[str, dict[int, str]]:
        """Each group's master's log (offset -> msgId), dumped before the cluster and proxy stop."""
        staging = self.run_dir / "clients" / "final-log-dump" / "api-dump.db"
        dumped = dump_final_logs(self.cluster, staging)
        final_logs = {}
        for group in self.cluster.groups:
            master = self.cluster.master(group, timeout=10)
            if master is not None and master.name in dumped:
                final_logs[group] = {row["offset"]: row["msgId"] for row in dumped[master.name]}
        self.cluster.stop()
        self.proxy.stop()
        adopt_final_log_dump(self.cluster, staging)
        return final_logs

    def cleanup(self) -> None:
        self.clients.cancel()
        self.clones.stop_all()
        self.child.stop()
        with contextlib.suppress(RuntimeError):
            self.net.clear()
        self.disks.heal_all()
        self.cluster.stop()
        self.proxy.stop()
        with contextlib.suppress(Exception):
            self.cluster.unmount_stores()  # their files stay in the run directory


def run_chaos(options: ChaosOptions, out: TextIO = sys.stdout) -> Verdict:
    """Run one chaos run; the verdict is printed and returned."""
    return ChaosRun(options, out).run()
