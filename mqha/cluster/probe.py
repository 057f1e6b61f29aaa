"""Asks a local cluster's nodes over HTTP: health, status, the master, the leader, readiness (shell).

A node that is down or paused is not asked (it would only cost a timeout). Every wait is bounded. An
mqproxy speaks gRPC only: it is healthy once its port takes a connection.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mqha.cluster.cluster_processes import ClusterProcesses
from mqha.cluster.layout import ClusterLayout
from mqha.cluster.nodes import (
    CONTROLLER,
    PROXY,
    ClusterError,
    Node,
    NodeStatus,
    format_status_table,
    http_get,
)


class ClusterProbe:
    """Asks the cluster's nodes over HTTP for their status and waits for health and readiness."""

    def __init__(self, layout: ClusterLayout, processes: ClusterProcesses) -> None:
        self.layout = layout
        self.processes = processes

    def _get(self, node: str | Node, path: str, timeout: float) -> dict[str, Any] | None:
        node = self.layout.node(node)
        if not self.processes.is_answering(node):
            return None
        try:
            code, body = http_get(node.url + path, timeout)
        except OSError:
            return None
        return body if code == 200 and isinstance(body, dict) else None

    def broker_status(self, node: str | Node, timeout: float = 1.0) -> dict[str, Any] | None:
        """The broker's ``/v1/status``, or None when it does not answer (down, paused, starting)."""
        return self._get(node, "/v1/status", timeout)

    def controller_metadata(self, node: str | Node, timeout: float = 1.0) -> dict[str, Any] | None:
        return self._get(node, "/v1/controller/metadata", timeout)

    def wait_healthy(self, node: Node, timeout: float) -> None:
        """Until the node answers ``/healthz`` (a proxy: takes a connection); ClusterError if it exits or
        ``timeout`` passes first."""
        deadline = time.monotonic() + max(0.0, timeout)
        log_tail = self.layout.log_tail
        while True:
            proc = self.processes.proc(node)
            if proc is None or not proc.is_running():
                code = proc.returncode if proc is not None else None
                raise ClusterError(f"{node.name} exited (code {code}) during start\n{log_tail(node)}")
            with contextlib.suppress(OSError):
                if node.kind == PROXY:
                    socket.create_connection(
                        (node.address.rpartition(":")[0], node.port), timeout=0.5
                    ).close()
                    return
                if http_get(node.url + "/healthz", timeout=0.5)[0] == 200:
                    return
            if time.monotonic() >= deadline:
                what = "taking connections" if node.kind == PROXY else "answering /healthz"
                raise ClusterError(f"{node.name} not {what} in time\n{log_tail(node)}")
            time.sleep(0.05)

    def node_status(self, node: Node) -> NodeStatus:
        proc = self.processes.proc(node)
        running = proc is not None and proc.is_running()
        state = "down" if not running else ("paused" if proc is not None and proc.paused else "running")
        pid = proc.pid if running and proc is not None else None
        if node.kind == PROXY:
            return NodeStatus(node.name, node.kind, node.address, pid, state, "PROXY")
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
        nodes = list(self.layout.nodes.values())
        with ThreadPoolExecutor(max_workers=min(8, len(nodes))) as pool:
            return list(pool.map(self.node_status, nodes))

    def status_table(self, statuses: Sequence[NodeStatus] | None = None) -> str:
        """A text table: node, role, controller id, epoch, offsets, SyncStateSet, address, pid."""
        return format_status_table(self.status() if statuses is None else statuses)

    def master(self, group: str | None = None, timeout: float = 0.0) -> Node | None:
        """The group's unfenced MASTER broker (exactly one must answer as master), else None after
        ``timeout`` seconds of polling."""
        group = group or self.layout.groups[0]
        deadline = time.monotonic() + timeout
        while True:
            masters = []
            for node in self.layout.group_brokers(group):
                st = self.broker_status(node, timeout=0.5)
                if st is not None and st.get("role") == "MASTER" and not st.get("fenced"):
                    masters.append(node)
            if len(masters) == 1:
                return masters[0]
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.05)

    def controller_leader(self) -> Node | None:
        for node in self.layout.controllers:
            meta = self.controller_metadata(node, timeout=0.5)
            if meta is not None and meta.get("isLeader"):
                return node
        return None

    def group_ready(self, group: str, replicas: int | None = None) -> bool:
        """One unfenced master, every other running replica a slave, and a confirmed SyncStateSet of
        ``replicas`` members (default: all of the group)."""
        want = self.layout.replicas if replicas is None else replicas
        statuses = [self.broker_status(n, timeout=0.5) for n in self.layout.group_brokers(group)]
        masters = [s for s in statuses if s and s.get("role") == "MASTER" and not s.get("fenced")]
        if len(masters) != 1:
            return False
        slaves = [s for s in statuses if s and s.get("role") == "SLAVE" and not s.get("fenced")]
        return len(masters[0].get("syncStateSet") or []) >= want and len(slaves) + 1 >= want

    def wait_ready(self, timeout: float = 60.0, groups: Iterable[str] | None = None) -> None:
        """Wait until every group (or ``groups``) is ready (``group_ready``); ClusterError after
        ``timeout`` naming the groups that are not, with the status table."""
        wanted = list(groups or self.layout.groups)
        deadline = time.monotonic() + timeout
        while True:
            for name, code in self.processes.crashed():
                raise ClusterError(f"{name} exited with {code}\n{self.layout.log_tail(name)}")
            pending = [g for g in wanted if not self.group_ready(g)]
            if not pending:
                return
            if time.monotonic() >= deadline:
                raise ClusterError(
                    f"groups without a master and a full SyncStateSet after {timeout:g} s: "
                    f"{', '.join(pending)}\n{self.status_table()}"
                )
            time.sleep(0.1)
