"""A local mqha cluster: N controllers and M broker groups x R replicas as real processes (shell).

Everything lives in one run directory::

    <run_dir>/cluster.json                     nodes, addresses, pids (what ``down`` stops)
    <run_dir>/controllers/n0/controller.conf   + controller.log, store/ (journal, history.db)
    <run_dir>/brokers/broker-a-0/broker.conf   + broker.log, store/ (commit log, epochs, history.db)
    <run_dir>/proxies/proxy-0/proxy.conf       + proxy.log (with ``proxies``: mqproxy, its gRPC port p)

Every node listens on 127.0.0.1 with free ports (controller API port p, Raft p+1; broker API port p,
HA p+1), or with ``base_port`` P on P+2k and P+2k+1 for node k (controllers first). Timeouts are
small so a failover takes well under a second (``CONTROLLER_DEFAULTS``,
``BROKER_DEFAULTS``; override per cluster). Use it as a context manager::

    with LocalCluster(run_dir, controllers=3, groups=1, replicas=3) as cluster:
        cluster.wait_ready()
        master = cluster.master("broker-a")
        cluster.kill(master)          # kill -9
        cluster.restart(master)

``LocalCluster.attach(run_dir)`` re-opens a cluster started by another process (``mqha cluster
status|down``); it signals only the pids recorded there, after checking each is still the process
that was started (start time from ``/proc``). Every wait is bounded.

Three parts do the work, each with one job: :class:`~mqha.cluster.layout.ClusterLayout` (the nodes,
their config files, ``cluster.json``), :class:`~mqha.cluster.cluster_processes.ClusterProcesses`
(start, stop, kill, pause the processes) and :class:`~mqha.cluster.probe.ClusterProbe` (status and
readiness over HTTP). ``LocalCluster`` composes them behind one API.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mqha.cluster.cluster_processes import ClusterProcesses
from mqha.cluster.layout import STATE_FILE, ClusterLayout
from mqha.cluster.nodes import DEFAULT_CLUSTER_NAME, ClusterError, Node, NodeStatus
from mqha.cluster.probe import ClusterProbe
from mqha.cluster.tmpfs import unmount, unmount_keeping_files
from mqha.durable import make_private_dirs

__all__ = ["STATE_FILE", "LocalCluster"]


class LocalCluster:
    """Runs N controllers + M groups x R brokers (+ P mqproxies) on 127.0.0.1 through its parts."""

    def __init__(
        self,
        run_dir: str | Path,
        *,
        controllers: int = 3,
        groups: int = 1,
        replicas: int = 3,
        cluster_name: str = DEFAULT_CLUSTER_NAME,
        controller_settings: Mapping[str, str] | None = None,
        broker_settings: Mapping[str, str] | None = None,
        log_level: str = "INFO",
        die_with_parent: bool = True,
        secure: bool = False,
        store_tmpfs_mib: int = 0,
        base_port: int | None = None,
        proxies: int = 0,
    ) -> None:
        """``store_tmpfs_mib`` > 0: each broker's store on its own tmpfs of that size (root only),
        mounted at the broker's first start; :meth:`unmount_stores` takes them down."""
        layout = ClusterLayout.plan(
            run_dir,
            controllers=controllers,
            groups=groups,
            replicas=replicas,
            cluster_name=cluster_name,
            controller_settings=controller_settings,
            broker_settings=broker_settings,
            log_level=log_level,
            secure=secure,
            store_tmpfs_mib=store_tmpfs_mib,
            base_port=base_port,
            proxies=proxies,
        )
        self._compose(layout, ClusterProcesses(layout, die_with_parent=die_with_parent))

    def _compose(self, layout: ClusterLayout, processes: ClusterProcesses) -> None:
        self.layout = layout
        self.processes = processes
        self.probe = ClusterProbe(layout, processes)

    @classmethod
    def attach(cls, run_dir: str | Path) -> LocalCluster:
        """The cluster recorded in ``run_dir/cluster.json`` (started by any process)."""
        layout = ClusterLayout.load(run_dir)
        self = cls.__new__(cls)
        # processes started from here must outlive this shell
        self._compose(layout, ClusterProcesses(layout, layout.recorded_processes(), die_with_parent=False))
        return self

    def save(self) -> None:
        """Write ``cluster.json`` atomically (a reader never sees half a file)."""
        self.layout.save(self.processes.procs)

    # -- the layout's facts ------------------------------------------------------------------------

    @property
    def run_dir(self) -> Path:
        return self.layout.run_dir

    @property
    def cluster_name(self) -> str:
        return self.layout.cluster_name

    @property
    def controller_settings(self) -> dict[str, str]:
        return self.layout.controller_settings

    @property
    def broker_settings(self) -> dict[str, str]:
        return self.layout.broker_settings

    @property
    def node_settings(self) -> dict[str, dict[str, str]]:
        """Per-node keys over everything else, set before ``start``."""
        return self.layout.node_settings

    @property
    def env(self) -> dict[str, str]:
        """Extra environment of every node process, set before ``start``."""
        return self.layout.env

    @property
    def node_env(self) -> dict[str, dict[str, str]]:
        """Extra environment per node process (over ``env``), set before its start."""
        return self.layout.node_env

    @property
    def log_level(self) -> str:
        return self.layout.log_level

    @property
    def die_with_parent(self) -> bool:
        return self.processes.die_with_parent

    @property
    def replicas(self) -> int:
        return self.layout.replicas

    @property
    def nodes(self) -> dict[str, Node]:
        return self.layout.nodes

    @property
    def controllers(self) -> list[Node]:
        return self.layout.controllers

    @property
    def brokers(self) -> list[Node]:
        return self.layout.brokers

    @property
    def proxies(self) -> list[Node]:
        return self.layout.proxies

    @property
    def proxy_addresses(self) -> list[str]:
        """The mqproxies' gRPC addresses: the RocketMQ clients' access point (docs/architecture.md §13)."""
        return [n.address for n in self.layout.proxies]

    @property
    def groups(self) -> list[str]:
        return self.layout.groups

    def group_brokers(self, group: str) -> list[Node]:
        return self.layout.group_brokers(group)

    @property
    def controller_addresses(self) -> list[str]:
        """API addresses of the controllers (what clients and ``controllerAddr`` take)."""
        return self.layout.controller_addresses

    def node(self, name_or_node: str | Node) -> Node:
        return self.layout.node(name_or_node)

    def log_tail(self, node: str | Node, max_bytes: int = 3000) -> str:
        return self.layout.log_tail(node, max_bytes)

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(
        self,
        *,
        wait: bool = True,
        timeout: float = 60.0,
        rewrite_configs: bool = True,
        later: Iterable[str] = (),
    ) -> None:
        """Write the configs (unless ``rewrite_configs`` is False: a reused cluster keeps its files and
        the changes saved into them), start the controllers, then the brokers but those named in
        ``later`` (``start_node`` them), then the proxies (each waited for until it takes connections);
        with ``wait``, return once every group has a master and a full SyncStateSet (``wait_ready``)."""
        layout, processes, probe = self.layout, self.processes, self.probe
        make_private_dirs(layout.run_dir)
        for node in layout.nodes.values():
            if rewrite_configs or not node.conf.exists():
                layout.write_config(node)
        try:
            deadline = time.monotonic() + timeout
            for node in layout.controllers:
                processes.start(node)
            for node in layout.controllers:
                probe.wait_healthy(node, deadline - time.monotonic())
            for node in layout.brokers:
                if node.name not in later:
                    processes.start(node)
            for node in layout.proxies:
                processes.start(node)
            for node in layout.proxies:
                probe.wait_healthy(node, deadline - time.monotonic())
            if wait:
                probe.wait_ready(max(1.0, deadline - time.monotonic()))
        except BaseException:
            self.stop()  # never leave half a cluster behind (Ctrl-C included)
            raise

    def start_node(self, node: str | Node, *, wait: bool = True, timeout: float = 20.0) -> None:
        """Start one node from its config (again, after a stop or kill); waits for /healthz."""
        node = self.layout.node(node)
        self.processes.start(node)
        if wait:
            self.probe.wait_healthy(node, timeout)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop every node (SIGTERM in parallel, SIGKILL after ``timeout``), brokers first."""
        self.processes.stop_all(timeout)

    def stop_node(self, node: str | Node, timeout: float = 5.0) -> None:
        """Graceful stop of one node (SIGTERM, SIGKILL after ``timeout``)."""
        self.processes.stop(node, timeout)

    def kill(self, node: str | Node) -> None:
        """kill -9 one node and reap it."""
        self.processes.kill(node)

    def restart(self, node: str | Node, *, wait: bool = True, graceful: bool = True) -> None:
        """Stop (or with ``graceful=False`` kill -9) one node, then start it again with the same store."""
        if graceful:
            self.stop_node(node)
        else:
            self.kill(node)
        self.start_node(node, wait=wait)

    def pause(self, node: str | Node) -> None:
        """SIGSTOP: the node hangs with its sockets open."""
        self.processes.pause(node)

    def resume(self, node: str | Node) -> None:
        self.processes.resume(node)

    def pid(self, node: str | Node) -> int | None:
        return self.processes.pid(node)

    def is_running(self, node: str | Node) -> bool:
        return self.processes.is_running(node)

    def running_pids(self) -> list[int]:
        return self.processes.running_pids()

    def unmount_stores(self) -> None:
        """Unmount the brokers' store file systems (``store_tmpfs_mib``), leaving their files on the
        disk below for the analysis (the cluster must be stopped)."""
        if self.running_pids():
            raise ClusterError("stop the cluster before unmounting its stores")
        for node in self.layout.brokers:
            unmount_keeping_files(node.store)

    def remove(self) -> None:
        """Delete the run directory (the cluster must be stopped)."""
        if self.running_pids():
            raise ClusterError("stop the cluster before removing its run directory")
        for node in self.layout.brokers:
            unmount(node.store)
        self.layout.remove()

    def discard_or_keep(self, *, temporary: bool, ok: bool) -> str:
        """After a demo or chaos run: a run directory the run made for itself (no ``--dir``) is deleted
        when the run passed (it holds 10-50 MB); one given, or one of a failed run, is kept for a look.
        Returns the line saying which."""
        if temporary and ok and not self.running_pids():
            self.remove()
            return f"removed the run directory {self.run_dir}"
        why = "" if not temporary else " (the run did not pass)"
        return f"run directory kept{why}: {self.run_dir} (configs, logs, stores, histories)"

    def __enter__(self) -> LocalCluster:
        if not self.running_pids():
            self.start()  # waits until every group is ready; stops what it started on failure
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- observation -------------------------------------------------------------------------------

    def broker_status(self, node: str | Node, timeout: float = 1.0) -> dict[str, Any] | None:
        """The broker's ``/v1/status``, or None when it does not answer (down, paused, starting)."""
        return self.probe.broker_status(node, timeout)

    def controller_metadata(self, node: str | Node, timeout: float = 1.0) -> dict[str, Any] | None:
        return self.probe.controller_metadata(node, timeout)

    def status(self) -> list[NodeStatus]:
        """Every node's status, asked in parallel (a paused or dead node costs one timeout at most)."""
        return self.probe.status()

    def status_table(self, statuses: Sequence[NodeStatus] | None = None) -> str:
        """A text table: node, role, broker id, epoch, offsets, SyncStateSet, address, pid."""
        return self.probe.status_table(statuses)

    def master(self, group: str | None = None, timeout: float = 0.0) -> Node | None:
        """The group's unfenced MASTER broker (exactly one must answer as master), else None."""
        return self.probe.master(group, timeout)

    def controller_leader(self) -> Node | None:
        return self.probe.controller_leader()

    def group_ready(self, group: str, replicas: int | None = None) -> bool:
        """One unfenced master, the other replicas slaves, a SyncStateSet of ``replicas`` members."""
        return self.probe.group_ready(group, replicas)

    def wait_ready(self, timeout: float = 60.0, groups: Iterable[str] | None = None) -> None:
        """Wait until every group (or ``groups``) is ready; ClusterError after ``timeout``."""
        self.probe.wait_ready(timeout, groups)
