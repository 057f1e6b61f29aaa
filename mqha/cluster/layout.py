"""A local cluster's run directory: its nodes and ports, their config files, ``cluster.json`` (shell, files).

See ``mqha.cluster.local`` for the directory's shape. Nothing here starts a process or asks a node.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

from mqha.broker.__main__ import PID_FILE as BROKER_PID_FILE
from mqha.cluster.nodes import (
    BROKER,
    BROKER_DEFAULTS,
    CONTROLLER,
    CONTROLLER_DEFAULTS,
    DEFAULT_CLUSTER_NAME,
    PROXY,
    ClusterError,
    Node,
    group_names,
)
from mqha.cluster.processes import LOCALHOST, NodeProcess, free_port_pair, port_free
from mqha.cluster.secrets import secure_settings
from mqha.config import render_properties
from mqha.controller.__main__ import PID_FILE as CONTROLLER_PID_FILE
from mqha.durable import make_private_dirs, write_atomically

STATE_FILE = "cluster.json"


def base_port_plan(base_port: int, count: int) -> list[int]:
    """``--base-port P``: node k (controllers n0.., then the brokers group by group) gets API port
    P + 2k and P + 2k + 1 for Raft (controllers) or HA (brokers). Refuses ports beyond 65535 or in use."""
    ports = [base_port + 2 * k for k in range(count)]
    if base_port < 1 or ports[-1] + 1 > 65535:
        raise ValueError(f"--base-port {base_port}: {count} nodes need ports up to {ports[-1] + 1} (> 65535)")
    busy = [p for port in ports for p in (port, port + 1) if not port_free(p)]
    if busy:
        raise ClusterError(f"--base-port {base_port}: port(s) in use: {', '.join(map(str, busy))}")
    return ports


class ClusterLayout:
    """Plans a local cluster's nodes and writes its files: the node configs and ``cluster.json``."""

    def __init__(
        self,
        run_dir: Path,
        *,
        cluster_name: str,
        controller_settings: dict[str, str],
        broker_settings: dict[str, str],
        replicas: int,
        nodes: dict[str, Node],
        node_settings: dict[str, dict[str, str]] | None = None,
        env: dict[str, str] | None = None,
        node_env: dict[str, dict[str, str]] | None = None,
        log_level: str = "INFO",
        store_tmpfs_mib: int = 0,
    ) -> None:
        self.run_dir = run_dir
        self.cluster_name = cluster_name
        self.controller_settings = controller_settings
        self.broker_settings = broker_settings
        # Per-node keys over everything else, set before ``start`` (node ports are known from here on);
        # chaos gives each broker a controllerAddr through its own links.
        self.node_settings: dict[str, dict[str, str]] = node_settings if node_settings is not None else {}
        self.env: dict[str, str] = env if env is not None else {}  # extra environment of every node process
        # Per node over ``env``: chaos runs give each process its own loopback source address.
        self.node_env: dict[str, dict[str, str]] = node_env if node_env is not None else {}
        self.log_level = log_level
        self.replicas = replicas
        self.nodes = nodes
        # > 0: each broker's store on its own tmpfs of this many MiB (root only; ``mqha.cluster.tmpfs``)
        self.store_tmpfs_mib = store_tmpfs_mib

    @classmethod
    def plan(
        cls,
        run_dir: str | Path,
        *,
        controllers: int,
        groups: int,
        replicas: int,
        cluster_name: str = DEFAULT_CLUSTER_NAME,
        controller_settings: Mapping[str, str] | None = None,
        broker_settings: Mapping[str, str] | None = None,
        log_level: str = "INFO",
        secure: bool = False,
        store_tmpfs_mib: int = 0,
        base_port: int | None = None,
        proxies: int = 0,
    ) -> ClusterLayout:
        """A new cluster's nodes, each with a free port pair under ``run_dir``; ``secure``: authentication
        on with fresh secrets (``mqha.cluster.secrets``), under any settings given. ``base_port``: fixed
        ports instead, ``base_port_plan``. ``proxies``: mqproxy processes beside the brokers (last)."""
        if controllers < 1 or groups < 1 or replicas < 1:
            raise ValueError("a cluster needs at least one controller, one group and one replica")
        root = Path(run_dir).resolve()
        names = [(f"n{i}", CONTROLLER, None) for i in range(controllers)]
        names += [(f"{group}-{r}", BROKER, group) for group in group_names(groups) for r in range(replicas)]
        names += [(f"proxy-{i}", PROXY, None) for i in range(proxies)]
        ports = base_port_plan(base_port, len(names)) if base_port is not None else None
        nodes: dict[str, Node] = {}
        for index, (name, kind, group) in enumerate(names):
            base = root / {CONTROLLER: "controllers", BROKER: "brokers", PROXY: "proxies"}[kind] / name
            port = ports[index] if ports is not None else free_port_pair()
            nodes[name] = Node(name, kind, port, str(base), group=group)
        secure_controller, secure_broker = secure_settings() if secure else ({}, {})
        return cls(
            root,
            cluster_name=cluster_name,
            controller_settings={**CONTROLLER_DEFAULTS, **secure_controller, **(controller_settings or {})},
            broker_settings={**BROKER_DEFAULTS, **secure_broker, **(broker_settings or {})},
            replicas=replicas,
            nodes=nodes,
            log_level=log_level,
            store_tmpfs_mib=store_tmpfs_mib,
        )

    # -- cluster.json ------------------------------------------------------------------------------

    @classmethod
    def load(cls, run_dir: str | Path) -> ClusterLayout:
        """The cluster recorded in ``run_dir/cluster.json`` (started by any process)."""
        path = Path(run_dir).resolve() / STATE_FILE
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise ClusterError(f"no cluster recorded in {path.parent} (missing {STATE_FILE})") from None
        return cls(
            path.parent,
            cluster_name=data["clusterName"],
            controller_settings=data["controllerSettings"],
            broker_settings=data["brokerSettings"],
            replicas=data["replicas"],
            nodes={n["name"]: Node(**n) for n in data["nodes"]},
            node_settings=data.get("nodeSettings", {}),
            env=data.get("env", {}),
            node_env=data.get("nodeEnv", {}),
            log_level=data.get("logLevel", "INFO"),
            store_tmpfs_mib=data.get("storeTmpfsMib", 0),
        )

    def save(self, procs: Mapping[str, NodeProcess]) -> None:
        """Write ``cluster.json`` with the running processes' pids, atomically (never half a file)."""
        for name, node in self.nodes.items():
            proc = procs.get(name)
            node.pid = proc.pid if proc is not None and proc.is_running() else None
            node.start_time = proc.start_time if node.pid is not None and proc is not None else None
        data = {
            "clusterName": self.cluster_name,
            "replicas": self.replicas,
            "controllerSettings": self.controller_settings,
            "brokerSettings": self.broker_settings,
            "nodeSettings": self.node_settings,
            "env": self.env,
            "nodeEnv": self.node_env,
            "logLevel": self.log_level,
            "storeTmpfsMib": self.store_tmpfs_mib,
            "nodes": [asdict(n) for n in self.nodes.values()],
        }
        make_private_dirs(self.run_dir)
        # Owner-only: the settings hold the cluster's secrets.
        write_atomically(str(self.run_dir / STATE_FILE), json.dumps(data, indent=2) + "\n", mode=0o600)

    def recorded_processes(self) -> dict[str, NodeProcess]:
        """The processes ``cluster.json`` names (checked against their start time before any signal),
        and for a node whose recorded process is gone, the one its pid file names (a node restarted
        by hand from its config file)."""
        found: dict[str, NodeProcess] = {}
        for name, node in self.nodes.items():
            proc = NodeProcess(node.pid, node.start_time) if node.pid is not None else None
            if proc is None or not proc.is_running():
                proc = NodeProcess.from_pid_file(self.pid_file(node), str(node.conf)) or proc
            if proc is not None:
                found[name] = proc
        return found

    @staticmethod
    def pid_file(node: Node) -> Path:
        """Where the node's process writes its pid (in its store: ``mqha.process.run``)."""
        return node.store / (CONTROLLER_PID_FILE if node.kind == CONTROLLER else BROKER_PID_FILE)

    def remove(self) -> None:
        """Delete the run directory."""
        shutil.rmtree(self.run_dir, ignore_errors=True)

    # -- topology ----------------------------------------------------------------------------------

    @property
    def controllers(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.kind == CONTROLLER]

    @property
    def brokers(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.kind == BROKER]

    @property
    def proxies(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.kind == PROXY]

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

    # -- node files --------------------------------------------------------------------------------

    def write_config(self, node: Node) -> None:
        make_private_dirs(Path(node.base))
        if node.kind == CONTROLLER:
            peers = ";".join(f"{c.name}-{c.address}" for c in self.controllers)
            values = {
                **self.controller_settings,
                "controllerDLegerPeers": peers,
                "controllerDLegerSelfId": node.name,
                "controllerStorePath": str(node.store),
                "configStorePath": str(Path(node.base) / "controller.properties"),
            }
        elif node.kind == PROXY:
            # The brokers' user, so the proxy may put when they require it, and the inner credentials,
            # so it may commit consumer offsets to the controllers (docs/architecture.md §13).
            shared = (
                "authenticationEnabled",
                "initAuthenticationUser",
                "innerClientAuthenticationCredentials",
                "maxMessageSize",
            )
            values = {key: self.broker_settings[key] for key in shared if key in self.broker_settings}
            values.update(
                grpcServerPort=str(node.port),
                grpcBindAddress=LOCALHOST,
                controllerAddr=";".join(self.controller_addresses),
            )
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
        text = f"# written by mqha cluster for {node.name}\n" + render_properties(values)
        write_atomically(str(node.conf), text, mode=0o600)  # owner-only: it may hold secrets

    def log_tail(self, node: str | Node, max_bytes: int = 3000) -> str:
        path = self.node(node).log
        try:
            data = path.read_bytes()[-max_bytes:]
        except OSError:
            return f"(no log at {path})"
        return f"--- last {len(data)} bytes of {path} ---\n{data.decode(errors='replace')}"
