"""Prometheus metrics of one broker, in the broker's own registry (``GET /metrics``). SHELL.

Gauges that mirror state (role, epochs, offsets, per-slave ack lag, HA byte counters) are read from
the live objects at scrape time by a custom collector, so they can never go stale or keep labels of a
slave that left. Put latency and results are recorded by the HTTP layer as they happen.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from mqha.autoswitch_ha.ack import ALL_IN_SYNC_STATE_SET, AckPolicy
from mqha.security.http_limits import ConnectionStats

if TYPE_CHECKING:
    from mqha.broker.access import DiskCheck
    from mqha.broker.hooks_impl import BrokerRuntime

ROLES = ("MASTER", "SLAVE", "NONE")
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0)


def ack_mode(policy: AckPolicy) -> str:
    """The label of the put's ack mode: ``async``, ``allAckInSyncStateSet`` or ``inSyncReplicas=N``."""
    if not policy.needs_replica_wait:
        return "async"
    if policy.required_acks == ALL_IN_SYNC_STATE_SET:
        return "allAckInSyncStateSet"
    return f"inSyncReplicas={policy.required_acks}"


class _ConnectionCollector(Collector):
    """The HTTP API's connection counts (``mqha.security.http_limits``) at scrape time."""

    def __init__(self, broker_name: str, stats: ConnectionStats) -> None:
        self.broker_name, self.stats = broker_name, stats

    def collect(self) -> Iterator[Metric]:
        opened = GaugeMetricFamily(
            "mqha_broker_http_connections", "open HTTP API connections", labels=["broker_name"]
        )
        opened.add_metric([self.broker_name], self.stats.open())
        yield opened
        refused = CounterMetricFamily(
            "mqha_broker_http_connections_refused",
            "HTTP API connections refused over httpMaxConnections",
            labels=["broker_name"],
        )
        refused.add_metric([self.broker_name], self.stats.refused)
        yield refused


class _StateCollector(Collector):
    """Reads the broker's role, epochs, offsets and HA counters at scrape time."""

    def __init__(self, broker_name: str, runtime: BrokerRuntime) -> None:
        self.broker_name = broker_name
        self.runtime = runtime

    def collect(self) -> Iterator[Metric]:
        rt = self.runtime
        ha, store, broker_role = rt.ha, rt.store, rt.role
        name = self.broker_name
        role = GaugeMetricFamily(
            "mqha_broker_role", "1 for the broker's current role", labels=["broker_name", "role"]
        )
        for value in ROLES:
            role.add_metric([name, value], 1.0 if broker_role.role.value == value else 0.0)
        yield role
        for metric, doc, value in (
            (
                "mqha_broker_fenced",
                "1 while the broker is fenced (not registered)",
                float(broker_role.fenced),
            ),
            (
                "mqha_broker_master_epoch",
                "master epoch the broker follows or leads",
                broker_role.master_epoch,
            ),
            ("mqha_broker_last_epoch", "last epoch in the epoch file", store.epochs.last_epoch()),
            (
                "mqha_broker_sync_state_set_epoch",
                "SyncStateSet epoch last applied",
                broker_role.sync_state_set_epoch,
            ),
            (
                "mqha_broker_sync_state_set_size",
                "members of the effective SyncStateSet",
                len(ha.keeper.sync_state_set()),
            ),
            ("mqha_broker_min_offset", "commit log min physical offset", store.min_offset),
            ("mqha_broker_max_offset", "commit log max physical offset", store.max_offset),
            ("mqha_broker_confirm_offset", "confirm offset (no read goes past it)", ha.gate.confirm_offset()),
        ):
            gauge = GaugeMetricFamily(metric, doc, labels=["broker_name"])
            gauge.add_metric([name], float(value))
            yield gauge
        lag = GaugeMetricFamily(
            "mqha_broker_slave_ack_lag_bytes",
            "bytes the slave has not acknowledged (master only)",
            labels=["broker_name", "slave_broker_id"],
        )
        for slave, behind in sorted(ha.status.ack_lags().items()):
            lag.add_metric([name, str(slave)], float(behind))
        yield lag
        for metric, doc, value in (
            ("mqha_broker_ha_sent_bytes", "HA bytes sent (both roles)", ha.traffic.sent),
            ("mqha_broker_ha_received_bytes", "HA bytes received (both roles)", ha.traffic.received),
        ):
            counter = CounterMetricFamily(metric, doc, labels=["broker_name"])
            counter.add_metric([name], float(value))
            yield counter


SESSION_STATES = ("connecting", "open", "disconnected", "closed")  # replicas_manager.client


class _ReplicationHealthCollector(Collector):
    """Issue 6 additions: slave caught-up age, minInSyncReplicas, the session to each controller.

    The sessions come from the ReplicasManager (``sessions``; none without one, as in tests).
    """

    def __init__(
        self,
        broker_name: str,
        runtime: BrokerRuntime,
        min_in_sync_replicas: int,
        sessions: Callable[[], Mapping[str, Mapping[str, Any]]] | None,
    ) -> None:
        self.broker_name = broker_name
        self.runtime = runtime
        self.min_in_sync_replicas = min_in_sync_replicas
        self.sessions = sessions

    def collect(self) -> Iterator[Metric]:
        ha, name = self.runtime.ha, self.broker_name
        age = GaugeMetricFamily(
            "mqha_broker_slave_caught_up_age_seconds",
            "seconds since the slave was last caught up with the master (master only)",
            labels=["broker_name", "slave_broker_id"],
        )
        in_sync = ha.keeper.in_sync
        if self.runtime.role.is_master and in_sync is not None:
            now_ms = ha.clock()  # the clock the caught-up times were taken with
            for slave, at_ms in sorted(in_sync.caught_up_ms.items()):
                if slave != in_sync.local_id:
                    age.add_metric([name, str(slave)], max(0.0, (now_ms - at_ms) / 1000))
        yield age
        minimum = GaugeMetricFamily(
            "mqha_broker_min_in_sync_replicas",
            "configured minInSyncReplicas (alert when the SyncStateSet is smaller)",
            labels=["broker_name"],
        )
        minimum.add_metric([name], float(self.min_in_sync_replicas))
        yield minimum
        state = GaugeMetricFamily(
            "mqha_broker_controller_session_state",
            "1 for the current state of the broker's session to each controller",
            labels=["broker_name", "controller", "state"],
        )
        connects = CounterMetricFamily(
            "mqha_broker_controller_session_connects",
            "sessions opened to each controller (reconnects included)",
            labels=["broker_name", "controller"],
        )
        refusals = CounterMetricFamily(
            "mqha_broker_controller_session_refusals",
            "session upgrades a controller refused, by its reason (skew: this broker's clock is off)",
            labels=["broker_name", "controller", "reason"],
        )
        for controller, info in sorted((self.sessions() if self.sessions is not None else {}).items()):
            current = info.get("state")
            for value in SESSION_STATES:
                state.add_metric([name, controller, value], 1.0 if current == value else 0.0)
            connects.add_metric([name, controller], float(info.get("connects") or 0))
            for reason, count in sorted((info.get("refusals") or {}).items()):
                refusals.add_metric([name, controller, reason], float(count))
        yield state
        yield connects
        yield refusals


class _DiskCollector(Collector):
    """The commit log file system's usage and full-disk flag (docs/architecture.md §4.2)."""

    def __init__(self, broker_name: str, disk: DiskCheck) -> None:
        self.broker_name = broker_name
        self.disk = disk

    def collect(self) -> Iterator[Metric]:
        for metric, doc, value in (
            (
                "mqha_broker_disk_used_ratio",
                "used share (0..1) of the commit log's file system",
                self.disk.used,
            ),
            (
                "mqha_broker_disk_full",
                "1 while the disk is full (above diskSpaceWarningLevelRatio): puts refused, nothing stored",
                float(self.disk.is_full()),
            ),
        ):
            gauge = GaugeMetricFamily(metric, doc, labels=["broker_name"])
            gauge.add_metric([self.broker_name], float(value))
            yield gauge


class BrokerMetrics:
    """Holds the broker's metrics registry: scrape-time collectors and the put counters."""

    def __init__(
        self,
        config: Mapping[str, Any],
        runtime: BrokerRuntime,
        sessions: Callable[[], Mapping[str, Mapping[str, Any]]] | None = None,
        disk: DiskCheck | None = None,
    ) -> None:
        self.broker_name = name = config["brokerName"]
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(_StateCollector(name, runtime))
        self.registry.register(
            _ReplicationHealthCollector(name, runtime, config.get("minInSyncReplicas", 1), sessions)
        )
        if disk is not None:
            self.registry.register(_DiskCollector(name, disk))
        self.ack_mode = ack_mode(runtime.ha.gate.policy)
        self.put_latency = Histogram(
            "mqha_broker_put_latency_seconds",
            "put request latency, from the parsed request to the reply",
            ["broker_name", "ack_mode", "status"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.put_requests = Counter(
            "mqha_broker_put_requests",
            "put requests by ack mode and result status",
            ["broker_name", "ack_mode", "status"],
            registry=self.registry,
        )
        self.put_messages = Counter(
            "mqha_broker_put_messages",
            "messages in put requests by result status",
            ["broker_name", "ack_mode", "status"],
            registry=self.registry,
        )

        self.put_streams = Gauge(
            "mqha_broker_put_streams",
            "put streams open now (GET /v1/messages/stream: mqproxy's puts)",
            ["broker_name"],
            registry=self.registry,
        )
        self.retention_clock_lag = Gauge(
            "mqha_broker_retention_clock_lag_seconds",
            "how far retention's clock is behind the wall clock: forward steps of the wall clock not taken, "
            "and the time since the log's newest record at the last start (docs/architecture.md §4.2)",
            ["broker_name"],
            registry=self.registry,
        )
        self.refused_requests = Counter(
            "mqha_broker_refused_requests",
            "requests refused for missing or wrong credentials (no secret in any label)",
            ["broker_name", "route", "http_status"],
            registry=self.registry,
        )

    def count_http_connections(self, stats: ConnectionStats) -> None:
        """``mqha_broker_http_connections`` (open now) and ``mqha_broker_http_connections_refused_total``
        (over ``httpMaxConnections``), read at each scrape."""
        self.registry.register(_ConnectionCollector(self.broker_name, stats))

    def count_put_streams(self, count: Callable[[], int]) -> None:
        """``mqha_broker_put_streams`` is ``count()`` at each scrape."""
        self.put_streams.labels(self.broker_name).set_function(lambda: float(count()))

    def watch_retention_clock(self, lag_ms: Callable[[], int]) -> None:
        """``mqha_broker_retention_clock_lag_seconds`` is ``lag_ms() / 1000`` at each scrape."""
        self.retention_clock_lag.labels(self.broker_name).set_function(lambda: lag_ms() / 1000)

    def observe_refused(self, route: str, http_status: int) -> None:
        self.refused_requests.labels(self.broker_name, route, str(http_status)).inc()

    def observe_put(self, status: str, messages: int, seconds: float) -> None:
        labels = (self.broker_name, self.ack_mode, status)
        self.put_latency.labels(*labels).observe(seconds)
        self.put_requests.labels(*labels).inc()
        self.put_messages.labels(*labels).inc(messages)

    def render(self) -> bytes:
        return generate_latest(self.registry)
