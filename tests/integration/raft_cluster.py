"""A cluster of ``raft_node.py`` processes on 127.0.0.1, for the replicated-log tests and benchmark."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqha.cluster.nodes import LocalEndpoint
from tests.helpers.processes import (
    LOCALHOST,
    ManagedProcess,
    ProcessGroup,
    free_ports,
    http_json,
    wait_healthy,
    wait_until,
)

RAFT_NODE = Path(__file__).with_name("raft_node.py")


@dataclass
class Member(LocalEndpoint):
    """One raft_node.py process of a test cluster and its HTTP calls."""

    index: int
    raft_address: str
    port: int  # its HTTP API
    store: Path
    log_path: Path
    proc: ManagedProcess | None = None

    def get(self, path: str, timeout: float = 2.0) -> Any:
        status, body = http_json("GET", self.url + path, timeout=timeout)
        if status != 200:
            raise RuntimeError(f"GET {path} on member {self.index}: {status} {body}")
        return body

    def post(self, path: str, body: Any, timeout: float = 5.0) -> tuple[int, Any]:
        return http_json("POST", self.url + path, body, timeout=timeout)

    def propose(self, record: dict[str, Any], timeout: float = 2.0) -> tuple[int, Any]:
        return self.post("/propose", {"record": record, "timeout": timeout}, timeout=timeout + 3.0)

    def try_status(self) -> dict[str, Any] | None:
        try:
            return self.get("/status", timeout=0.5)
        except (OSError, RuntimeError):
            return None


class RaftCluster:
    """Starts, stops and asks a test cluster of raft_node.py processes."""

    def __init__(
        self, group: ProcessGroup, base_dir: Path, size: int = 3, extra_args: Sequence[str] = ()
    ) -> None:
        self.group = group
        self.extra_args = list(extra_args)
        raft_ports = free_ports(size)
        http_ports = free_ports(size)
        self.members = [
            Member(
                index=i,
                raft_address=f"{LOCALHOST}:{raft_ports[i]}",
                port=http_ports[i],
                store=base_dir / f"n{i}",
                log_path=base_dir / f"n{i}.log",
            )
            for i in range(size)
        ]

    def start(
        self, indexes: Sequence[int] | None = None, timeout: float = 15.0, *, wait: bool = True
    ) -> None:
        """Start members (all by default) in parallel and wait for their /healthz (unless not ``wait``)."""
        chosen = [self.members[i] for i in (range(len(self.members)) if indexes is None else indexes)]
        for m in chosen:
            partners = ",".join(o.raft_address for o in self.members if o is not m)
            m.proc = self.group.start_python(
                [
                    str(RAFT_NODE),
                    "--self",
                    m.raft_address,
                    "--partners",
                    partners,
                    "--store",
                    str(m.store),
                    "--http-port",
                    str(m.port),
                    *self.extra_args,
                ],
                log_path=m.log_path,
                name=f"raft-n{m.index}",
            )
        if wait:
            wait_healthy([(m.proc, m.url) for m in chosen], timeout)

    def alive(self) -> list[Member]:
        return [m for m in self.members if m.proc is not None and m.proc.is_running() and not m.proc.paused]

    def kill(self, member: Member) -> None:
        assert member.proc is not None
        member.proc.kill()

    def serving_leader(self, timeout: float = 5.0, among: Sequence[Member] | None = None) -> Member:
        """The one member reporting ``serving``; waits (bounded) until exactly one does."""

        def find() -> Member | None:
            serving = [m for m in (among or self.alive()) if (s := m.try_status()) and s["serving"]]
            return serving[0] if len(serving) == 1 else None

        return wait_until(find, timeout, message="exactly one serving leader")

    def state(self, member: Member) -> dict[str, Any]:
        return member.get("/state")

    def wait_same_state(
        self, members: Sequence[Member], timeout: float = 5.0, **expect: Any
    ) -> dict[str, Any]:
        """Wait until all ``members`` report identical key/value data (and each ``expect`` key matches)."""

        def same() -> dict[str, Any] | None:
            states = [self.state(m) for m in members]
            first = states[0]
            if any(s["data"] != first["data"] or s["last_index"] != first["last_index"] for s in states):
                return None
            if any(first.get(k) != v for k, v in expect.items()):
                return None
            return first

        return wait_until(same, timeout, message="identical state on members")

    def wait_applied_everywhere(self, members: Sequence[Member], timeout: float = 5.0) -> None:
        """Wait until every member applied up to its commit index and all agree on it."""

        def caught_up() -> bool:
            statuses = [m.get("/status") for m in members]
            commits = {s["commit_index"] for s in statuses}
            return len(commits) == 1 and all(s["last_applied"] == s["commit_index"] for s in statuses)

        wait_until(caught_up, timeout, message="all members caught up")


def time_until(predicate: Any, timeout: float, interval: float = 0.01) -> float:
    """Seconds until ``predicate()`` is truthy (bounded by ``timeout``)."""
    t0 = time.monotonic()
    wait_until(predicate, timeout, interval=interval)
    return time.monotonic() - t0
