"""A local mqha cluster: N controllers and M broker groups x R replicas as real processes (shell).

Everything lives in one run directory::

    <run_dir>/cluster.json                     nodes, addresses, pids (what ``down`` stops)
    <run_dir>/controllers/n0/controller.conf   + controller.log, store/ (journal, history.db)
    <run_dir>/brokers/broker-a-0/broker.conf   + broker.log, store/ (commit log, epochs, history.db)

Every node listens on 127.0.0.1 with free ports (controller API port p, Raft p+1; broker API port p,
HA p+1). Timeouts are small so a failover takes well under a second (``CONTROLLER_DEFAULTS``,
``BROKER_DEFAULTS``; override per cluster). Use it as a context manager::

    with LocalCluster(run_dir, controllers=3, groups=1, replicas=3) as cluster:
        cluster.wait_ready()
        master = cluster.master("broker-a")
        cluster.kill(master)          # kill -9
        cluster.restart(master)

``LocalCluster.attach(run_dir)`` re-opens a cluster started by another process (``mqha cluster
status|down``); it signals only the pids recorded there, after checking each is still the process
that was started (start time from ``/proc``). Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mqha.cluster.nodes import (
    BROKER,
    BROKER_DEFAULTS,
    CONTROLLER,
    CONTROLLER_DEFAULTS,
    DEFAULT_CLUSTER_NAME,
    ClusterError,
    Node,
    NodeStatus,
    command_of,
    format_status_table,
    group_names,
    http_get,
)
from mqha.cluster.processes import NodeProcess, free_port_pair, stop_all

STATE_FILE = "cluster.json"


class LocalCluster:
    """N controllers + M groups x R brokers on 127.0.0.1 (see the module docstring)."""

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
    ) -> None:
        if controllers < 1 or groups < 1 or replicas < 1:
            raise ValueError("a cluster needs at least one controller, one group and one replica")
        self.run_dir = Path(run_dir).resolve()
        self.cluster_name = cluster_name
        self.controller_settings = {**CONTROLLER_DEFAULTS, **(controller_settings or {})}
        self.broker_settings = {**BROKER_DEFAULTS, **(broker_settings or {})}
        # Per-node keys over everything else, set before ``start`` (node ports are known from here on);
        # chaos gives each broker a controllerAddr through its own links.
        self.node_settings: dict[str, dict[str, str]] = {}
        self.env: dict[str, str] = {}  # extra environment of every node process
        self.log_level = log_level
        self.die_with_parent = die_with_parent
        self.replicas = replicas
        self.nodes: dict[str, Node] = {}
        self._procs: dict[str, NodeProcess] = {}
        for i in range(controllers):
            name = f"n{i}"
            base = self.run_dir / "controllers" / name
            self.nodes[name] = Node(name, CONTROLLER, free_port_pair(), str(base))
        for group in group_names(groups):
            for r in range(replicas):
                name = f"{group}-{r}"
                base = self.run_dir / "brokers" / name
                self.nodes[name] = Node(name, BROKER, free_port_pair(), str(base), group=group)

    # -- persistence -------------------------------------------------------------------------------

    @classmethod
    def attach(cls, run_dir: str | Path) -> LocalCluster:
        """The cluster recorded in ``run_dir/cluster.json`` (started by any process)."""
        path = Path(run_dir).resolve() / STATE_FILE
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise ClusterError(f"no cluster recorded in {path.parent} (missing {STATE_FILE})") from None
        self = cls.__new__(cls)
        self.run_dir = path.parent
        self.cluster_name = data["clusterName"]
        self.controller_settings = data["controllerSettings"]
        self.broker_settings = data["brokerSettings"]
        self.node_settings = data.get("nodeSettings", {})
        self.env = data.get("env", {})
        self.log_level = data.get("logLevel", "INFO")
        self.die_with_parent = False  # processes started from here must outlive this shell
        self.replicas = data["replicas"]
        self.nodes = {n["name"]: Node(**n) for n in data["nodes"]}
        self._procs = {
            name: NodeProcess(node.pid, node.start_time)
            for name, node in self.nodes.items()
            if node.pid is not None
        }
        return self

    def save(self) -> None:
        """Write ``mqha.cluster.json`` atomically (a reader never sees half a file)."""
        for name, node in self.nodes.items():
            proc = self._procs.get(name)
            node.pid = proc.pid if proc is not None and proc.is_running() else None
            node.start_time = proc.start_time if node.pid is not None and proc is not None else None
        data = {
            "clusterName": self.cluster_name,
            "replicas": self.replicas,
            "controllerSettings": self.controller_settings,
            "brokerSettings": self.broker_settings,
            "nodeSettings": self.node_settings,
            "env": self.env,
            "logLevel": self.log_level,
            "nodes": [asdict(n) for n in self.nodes.values()],
        }
        self.run_dir.mkdir(parents=True, exist_ok=True)
        temp = self.run_dir / (STATE_FILE + ".tmp")
        temp.write_text(json.dumps(data, indent=2) + "\n")
        temp.replace(self.run_dir / STATE_FILE)

    # -- topology ----------------------------------------------------------------------------------

    @property
    def controllers(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.kind == CONTROLLER]

    @property
    def brokers(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.kind == BROKER]

    @property
    def groups(self) -> list[str]:
        return list(dict.fromkeys(n.group for n in self.brokers if n.group is not None))

    def group_brokers(self, group: str) -> list[Node]:
        return [n for n in self.brokers if n.group == group]

    @property
    def controller_addresses(self) -> list[str]:
        """API addresses of the controllers (what clients and ``controllerAddr`` take)."""
        return [n.address for n in self.controllers]

    def node(self, name_or_node: str | Node) -> Node:
        name = name_or_node.name if isinstance(name_or_node, Node) else name_or_node
        try:
            return self.nodes[name]
        except KeyError:
            raise KeyError(f"no node {name!r}; nodes: {', '.join(self.nodes)}") from None

    # -- configs -----------------------------------------------------------------------------------

    def _write_config(self, node: Node) -> None:
        Path(node.base).mkdir(parents=True, exist_ok=True)
        if node.kind == CONTROLLER:
            peers = ";".join(f"{c.name}-{c.address}" for c in self.controllers)
            values = {
                **self.controller_settings,
                "controllerDLegerPeers": peers,
                "controllerDLegerSelfId": node.name,
                "controllerStorePath": str(node.store),
                "configStorePath": str(Path(node.base) / "controller.properties"),
            }
        else:
            values = {
                **self.broker_settings,
                "brokerClusterName": self.cluster_name,
                "brokerName": node.group or "",
                "listenPort": str(node.port),
                "haListenPort": str(node.port + 1),
                "controllerAddr": ";".join(self.controller_addresses),
                "storePathRootDir": str(node.store),
                "totalReplicas": str(self.replicas),
            }
        values.update(self.node_settings.get(node.name, {}))
        node.conf.write_text(
            f"# written by mqha cluster for {node.name}\n" + "".join(f"{k}={v}\n" for k, v in values.items())
        )

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self, *, wait: bool = True, timeout: float = 60.0) -> None:
        """Write the configs, start the controllers, then the brokers; with ``wait``, return once
        every group has a master and a full SyncStateSet (``wait_ready``)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        for node in self.nodes.values():
            self._write_config(node)
        try:
            deadline = time.monotonic() + timeout
            for node in self.controllers:
                self.start_node(node, wait=False)
            for node in self.controllers:
                self._wait_healthy(node, deadline - time.monotonic())
            for node in self.brokers:
                self.start_node(node, wait=False)
            if wait:
                self.wait_ready(max(1.0, deadline - time.monotonic()))
        except BaseException:
            self.stop()  # never leave half a cluster behind (Ctrl-C included)
            raise

    def start_node(self, node: str | Node, *, wait: bool = True, timeout: float = 20.0) -> None:
        """Start one node from its config (again, after a stop or kill); waits for /healthz."""
        node = self.node(node)
        current = self._procs.get(node.name)
        if current is not None and current.is_running():
            raise ClusterError(f"{node.name} is already running (pid {current.pid})")
        if not node.conf.exists():
            self._write_config(node)
        program = (
            command_of("mqcontroller", "mqha.controller")
            if node.kind == CONTROLLER
            else command_of("mqbroker", "mqha.broker")
        )
        args = [*program, "-c", str(node.conf), "--log-level", self.log_level]
        self._procs[node.name] = NodeProcess.spawn(
            args, node.log, env=self.env, die_with_parent=self.die_with_parent
        )
        self.save()
        if wait:
            self._wait_healthy(node, timeout)

    def _wait_healthy(self, node: Node, timeout: float) -> None:
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            proc = self._procs.get(node.name)
            if proc is None or not proc.is_running():
                code = proc.returncode if proc is not None else None
                raise ClusterError(f"{node.name} exited (code {code}) during start\n{self.log_tail(node)}")
            with contextlib.suppress(OSError):
                if http_get(node.url + "/healthz", timeout=0.5)[0] == 200:
                    return
            if time.monotonic() >= deadline:
                raise ClusterError(f"{node.name} not answering /healthz in time\n{self.log_tail(node)}")
            time.sleep(0.05)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop every node (SIGTERM in parallel, SIGKILL after ``timeout``), brokers first."""
        order = [n.name for n in self.brokers] + [n.name for n in self.controllers]
        stop_all([self._procs[name] for name in order if name in self._procs], timeout)
        self.save()

    def stop_node(self, node: str | Node, timeout: float = 5.0) -> None:
        """Graceful stop of one node (SIGTERM, SIGKILL after ``timeout``)."""
        proc = self._procs.get(self.node(node).name)
        if proc is not None:
            proc.stop(timeout)
        self.save()

    def kill(self, node: str | Node) -> None:
        """kill -9 one node and reap it."""
        proc = self._procs.get(self.node(node).name)
        if proc is not None:
            proc.kill()
        self.save()

    def restart(self, node: str | Node, *, wait: bool = True, graceful: bool = True) -> None:
        """Stop (or with ``graceful=False`` kill -9) one node, then start it again with the same store."""
        if graceful:
            self.stop_node(node)
        else:
            self.kill(node)
        self.start_node(node, wait=wait)

    def pause(self, node: str | Node) -> None:
        """SIGSTOP: the node hangs with its sockets open."""
        proc = self._procs.get(self.node(node).name)
        if proc is not None:
            proc.pause()

    def resume(self, node: str | Node) -> None:
        proc = self._procs.get(self.node(node).name)
        if proc is not None:
            proc.resume()

    def pid(self, node: str | Node) -> int | None:
        proc = self._procs.get(self.node(node).name)
        return proc.pid if proc is not None and proc.is_running() else None

    def is_running(self, node: str | Node) -> bool:
        proc = self._procs.get(self.node(node).name)
        return proc is not None and proc.is_running()

    def running_pids(self) -> list[int]:
        return [p.pid for p in self._procs.values() if p.is_running()]

    def remove(self) -> None:
        """Delete the run directory (the cluster must be stopped)."""
        if self.running_pids():
            raise ClusterError("stop the cluster before removing its run directory")
        shutil.rmtree(self.run_dir, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        if not any(p.is_running() for p in self._procs.values()):
            self.start()  # waits until every group is ready; stops what it started on failure
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- observation -------------------------------------------------------------------------------

    def log_tail(self, node: str | Node, max_bytes: int = 3000) -> str:
        path = self.node(node).log
        try:
            data = path.read_bytes()[-max_bytes:]
        except OSError:
            return f"(no log at {path})"
        return f"--- last {len(data)} bytes of {path} ---\n{data.decode(errors='replace')}"

    def broker_status(self, node: str | Node, timeout: float = 1.0) -> dict[str, Any] | None:
        """The broker's ``/v1/status``, or None when it does not answer (down, paused, starting)."""
        node = self.node(node)
        proc = self._procs.get(node.name)
        if proc is None or proc.paused or not proc.is_running():
            return None
        try:
            code, body = http_get(node.url + "/v1/status", timeout)
        except OSError:
            return None
        return body if code == 200 and isinstance(body, dict) else None

    def controller_metadata(self, node: str | Node, timeout: float = 1.0) -> dict[str, Any] | None:
        node = self.node(node)
        proc = self._procs.get(node.name)
        if proc is None or proc.paused or not proc.is_running():
            return None
        try:
            code, body = http_get(node.url + "/v1/controller/metadata", timeout)
        except OSError:
            return None
        return body if code == 200 and isinstance(body, dict) else None

    def _node_status(self, node: Node) -> NodeStatus:
        proc = self._procs.get(node.name)
        running = proc is not None and proc.is_running()
        state = "down" if not running else ("paused" if proc is not None and proc.paused else "running")
        pid = proc.pid if running and proc is not None else None
        if node.kind == CONTROLLER:
            meta = self.controller_metadata(node) if state == "running" else None
            role = "-" if meta is None else ("LEADER" if meta.get("isLeader") else "FOLLOWER")
            return NodeStatus(node.name, node.kind, node.address, pid, state, role, raw=meta or {})
        st = self.broker_status(node) if state == "running" else None
        if st is None:
            return NodeStatus(node.name, node.kind, node.address, pid, state, "-", group=node.group)
        role = str(st.get("role", "-"))
        if st.get("fenced"):
            role = f"{role}(fenced)"
        sss = st.get("syncStateSet")
        return NodeStatus(
            node.name,
            node.kind,
            node.address,
            pid,
            state,
            role,
            group=node.group,
            broker_id=st.get("controllerBrokerId"),
            master_epoch=st.get("masterEpoch"),
            max_offset=st.get("maxOffset"),
            confirm_offset=st.get("confirmOffset"),
            sync_state_set=tuple(sss) if isinstance(sss, list) else None,
            raw=st,
        )

    def status(self) -> list[NodeStatus]:
        """Every node's status, asked in parallel (a paused or dead node costs one timeout at most)."""
        nodes = list(self.nodes.values())
        with ThreadPoolExecutor(max_workers=min(8, len(nodes))) as pool:
            return list(pool.map(self._node_status, nodes))

    def status_table(self, statuses: Sequence[NodeStatus] | None = None) -> str:
        """A text table: node, role, broker id, epoch, offsets, SyncStateSet, address, pid."""
        return format_status_table(self.status() if statuses is None else statuses)

    def master(self, group: str | None = None, timeout: float = 0.0) -> Node | None:
        """The group's unfenced MASTER broker (exactly one must answer as master), else None after
        ``timeout`` seconds of polling."""
        group = group or self.groups[0]
        deadline = time.monotonic() + timeout
        while True:
            masters = []
            for node in self.group_brokers(group):
                st = self.broker_status(node, timeout=0.5)
                if st is not None and st.get("role") == "MASTER" and not st.get("fenced"):
                    masters.append(node)
            if len(masters) == 1:
                return masters[0]
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.05)

    def controller_leader(self) -> Node | None:
        for node in self.controllers:
            meta = self.controller_metadata(node, timeout=0.5)
            if meta is not None and meta.get("isLeader"):
                return node
        return None

    def group_ready(self, group: str, replicas: int | None = None) -> bool:
        """One unfenced master, every other running replica a slave, and a confirmed SyncStateSet of
        ``replicas`` members (default: all of the group)."""
        want = self.replicas if replicas is None else replicas
        statuses = [self.broker_status(n, timeout=0.5) for n in self.group_brokers(group)]
        masters = [s for s in statuses if s and s.get("role") == "MASTER" and not s.get("fenced")]
        if len(masters) != 1:
            return False
        slaves = [s for s in statuses if s and s.get("role") == "SLAVE" and not s.get("fenced")]
        return len(masters[0].get("syncStateSet") or []) >= want and len(slaves) + 1 >= want

    def wait_ready(self, timeout: float = 60.0, groups: Iterable[str] | None = None) -> None:
        """Wait until every group (or ``groups``) is ready (``group_ready``); ClusterError after
        ``timeout`` naming the groups that are not, with the status table."""
        wanted = list(groups or self.groups)
        deadline = time.monotonic() + timeout
        while True:
            for name in list(self.nodes):
                proc = self._procs.get(name)
                if proc is not None and not proc.is_running() and proc.returncode not in (None, 0, -9, -15):
                    raise ClusterError(f"{name} exited with {proc.returncode}\n{self.log_tail(name)}")
            pending = [g for g in wanted if not self.group_ready(g)]
            if not pending:
                return
            if time.monotonic() >= deadline:
                raise ClusterError(
                    f"groups without a master and a full SyncStateSet after {timeout:g} s: "
                    f"{', '.join(pending)}\n{self.status_table()}"
                )
            time.sleep(0.1)
