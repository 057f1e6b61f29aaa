"""The clients of a chaos run: per group a producer and a consumer, and the controller-write workload (shell).

Producers and consumers record every answer and every read (``clients/`` in the run directory) and
connect from the run's client address when the run has one (``client-partition``);
``mqha.chaos.controller_writes`` writes topics through the controller leader all along.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from mqha.chaos.client_checks import WriteLog
from mqha.chaos.controller_writes import ControllerWrites
from mqha.client.results import SendResult
from mqha.cluster.client_auth import admin_headers, broker_user
from mqha.cluster.local import LocalCluster
from mqha.cluster.workload import ConsumeWorkload, ProduceWorkload

TOPIC = "chaos"


class RunClients:
    """Starts, stops and reads back the workloads of one run."""

    def __init__(
        self, cluster: LocalCluster, clients_dir: Path, concurrency: int, body_size: int, source: str | None
    ) -> None:
        self.cluster = cluster
        self.clients_dir = clients_dir
        self.concurrency = concurrency
        self.body_size = body_size
        self.source = source  # the clients' own loopback address (None: the runner's)
        self.producers: dict[str, ProduceWorkload] = {}
        self.consumers: dict[str, ConsumeWorkload] = {}
        self.writes: ControllerWrites | None = None

    def start(self) -> None:
        controllers = self.cluster.controller_addresses
        user = broker_user(self.cluster.broker_settings)  # None unless the brokers require a user
        for group in self.cluster.groups:
            self.producers[group] = ProduceWorkload(
                controllers,
                group,
                concurrency=self.concurrency,
                topic=TOPIC,
                body_size=self.body_size,
                record_to=self.clients_dir / f"producer-{group}",
                client_id=f"chaos-producer-{group}",
                user=user,
                local_address=self.source,
            ).start()
            self.consumers[group] = ConsumeWorkload(
                controllers,
                group,
                record_to=self.clients_dir / f"consumer-{group}",
                client_id=f"chaos-consumer-{group}",
                user=user,
                local_address=self.source,
            ).start()
        headers = admin_headers(self.cluster.broker_settings)
        self.writes = ControllerWrites(list(controllers), self.cluster.cluster_name, headers).start()
        for workload in self.producers.values():
            workload.wait_acked(workload.concurrency * 10, timeout=30)

    def stop_producers(self) -> tuple[SendResult, ...]:
        """Stop sending (in-flight sends finish); every send's result."""
        for workload in self.producers.values():
            workload.stop()
        return tuple(r for w in self.producers.values() for r in w.snapshot())

    def sequences(self) -> tuple[tuple[SendResult, ...], ...]:
        return tuple(tuple(q) for w in self.producers.values() for q in w.sequence_snapshot())

    def drain_consumers(self) -> int:
        """Let each consumer read up to its group's confirm offset (bounded), stop it; reads delivered."""
        for group, consumer in self.consumers.items():
            master = self.cluster.master(group, timeout=10)
            end = int((self.cluster.broker_status(master) or {}).get("confirmOffset") or 0) if master else 0
            consumer.catch_up(end, timeout=30)
            consumer.stop()
        return sum(c.delivered for c in self.consumers.values())

    def stop_writes(self) -> WriteLog | None:
        return self.writes.stop() if self.writes is not None else None

    def cancel(self) -> None:
        """Stop everything at once (an interrupted or failed run)."""
        for workload in self.producers.values():
            with contextlib.suppress(Exception):
                workload.stop(timeout=5, cancel=True)
        for consumer in self.consumers.values():
            with contextlib.suppress(Exception):
                consumer.stop(timeout=5)
        if self.writes is not None:
            with contextlib.suppress(Exception):
                self.writes.stop(timeout=5)
