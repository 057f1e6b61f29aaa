"""A local cluster's node processes: start, stop, kill -9, pause and resume them (shell, processes).

Every change is recorded in ``cluster.json`` (``ClusterLayout.save``) so that another process
(``mqha cluster status|down``) can find the pids; it signals only a pid whose start time still matches.
"""

from __future__ import annotations

import subprocess

from mqha.cluster.layout import ClusterLayout
from mqha.cluster.nodes import BROKER, CONTROLLER, PROXY, ClusterError, Node, command_of
from mqha.cluster.processes import NodeProcess, stop_all
from mqha.cluster.tmpfs import mount_tmpfs


class ClusterProcesses:
    """Starts, stops, kills, pauses and resumes the cluster's node processes and records their pids."""

    def __init__(
        self, layout: ClusterLayout, procs: dict[str, NodeProcess] | None = None, *, die_with_parent: bool
    ) -> None:
        self.layout = layout
        self.procs: dict[str, NodeProcess] = procs if procs is not None else {}
        self.die_with_parent = die_with_parent

    def proc(self, node: str | Node) -> NodeProcess | None:
        return self.procs.get(self.layout.node(node).name)

    def start(self, node: str | Node) -> None:
        """Start one node from its config (again, after a stop or kill); does not wait for it."""
        node = self.layout.node(node)
        current = self.procs.get(node.name)
        if current is not None and current.is_running():
            raise ClusterError(f"{node.name} is already running (pid {current.pid})")
        if not node.conf.exists():
            self.layout.write_config(node)
        if node.kind == BROKER and self.layout.store_tmpfs_mib > 0:
            try:
                mount_tmpfs(node.store, self.layout.store_tmpfs_mib)  # kept across restarts
            except (OSError, subprocess.SubprocessError) as exc:
                raise ClusterError(f"{node.name}: {exc}") from None
        program = {
            CONTROLLER: command_of("mqcontroller", "mqha.controller"),
            BROKER: command_of("mqbroker", "mqha.broker"),
            PROXY: command_of("mqproxy", "mqha.proxy"),
        }[node.kind]
        args = [*program, "-c", str(node.conf), "--log-level", self.layout.log_level]
        env = {**self.layout.env, **self.layout.node_env.get(node.name, {})}
        proc = NodeProcess.spawn(args, node.log, env=env, die_with_parent=self.die_with_parent)
        self.procs[node.name] = proc
        self.layout.save(self.procs)

    def stop_all(self, timeout: float = 5.0) -> None:
        """Stop every node (SIGTERM in parallel, SIGKILL after ``timeout``), proxies and brokers first."""
        layout = self.layout
        order = [n.name for n in (*layout.proxies, *layout.brokers, *layout.controllers)]
        stop_all([self.procs[name] for name in order if name in self.procs], timeout)
        layout.save(self.procs)

    def stop(self, node: str | Node, timeout: float = 5.0) -> None:
        """Graceful stop of one node (SIGTERM, SIGKILL after ``timeout``)."""
        proc = self.proc(node)
        if proc is not None:
            proc.stop(timeout)
        self.layout.save(self.procs)

    def kill(self, node: str | Node) -> None:
        """kill -9 one node and reap it."""
        proc = self.proc(node)
        if proc is not None:
            proc.kill()
        self.layout.save(self.procs)

    def pause(self, node: str | Node) -> None:
        """SIGSTOP: the node hangs with its sockets open."""
        proc = self.proc(node)
        if proc is not None:
            proc.pause()

    def resume(self, node: str | Node) -> None:
        proc = self.proc(node)
        if proc is not None:
            proc.resume()

    def pid(self, node: str | Node) -> int | None:
        proc = self.proc(node)
        return proc.pid if proc is not None and proc.is_running() else None

    def is_running(self, node: str | Node) -> bool:
        proc = self.proc(node)
        return proc is not None and proc.is_running()

    def is_answering(self, node: str | Node) -> bool:
        """Running and not paused: worth an HTTP question."""
        proc = self.proc(node)
        return proc is not None and not proc.paused and proc.is_running()

    def running_pids(self) -> list[int]:
        return [p.pid for p in self.procs.values() if p.is_running()]

    def crashed(self) -> list[tuple[str, int | None]]:
        """Nodes that exited on their own (not stopped, not killed): name and exit code."""
        return [
            (name, proc.returncode)
            for name, proc in self.procs.items()
            if not proc.is_running() and proc.returncode not in (None, 0, -9, -15)
        ]
