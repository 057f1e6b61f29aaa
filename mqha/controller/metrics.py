"""Prometheus metrics of one controller node (shell), on a registry of its own (not the global one).

Counters and the latency histogram are updated by the HTTP layer and the service; gauges that
describe Raft and the replicated state are computed at scrape time by :class:`_NodeCollector` from a
:class:`NodeView` callback, so they can never go stale.

Names (Prometheus conventions: ``_total`` counters, base units, snake_case):

- ``mqha_controller_requests_total{api,code}`` and ``mqha_controller_request_duration_seconds{api}``
- ``mqha_controller_elections_total{trigger,result}`` — trigger ``broker``/``admin``/``controller``,
  result the response code name; ``mqha_controller_election_duration_seconds{trigger}`` — decide +
  commit of one election attempt (observed when the caller passes ``seconds`` to ``observe_election``)
- ``mqha_controller_is_leader``, ``mqha_controller_raft_term``, ``mqha_controller_raft_voter``,
  ``mqha_controller_raft_voters``, ``mqha_controller_raft_damaged``, ``mqha_controller_raft_commit_index``,
  ``mqha_controller_raft_last_applied_index``
- ``mqha_controller_acked_data_lost_total{broker_name}`` — elections this node decided that declared
  acknowledged data lost; ``mqha_controller_election_waiting{broker_name}`` — 1 while a set waits for a
  complete replica (docs/architecture.md §3.2)
- ``mqha_controller_broker_groups``, ``mqha_controller_live_brokers``, ``mqha_controller_broker_sessions``,
  ``mqha_controller_sync_state_set_size{broker_name}``, ``mqha_controller_master_epoch{broker_name}``,
  ``mqha_controller_broker_group_has_master{broker_name}`` (when the view fills ``has_master``)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

# Controller writes are ~1 ms on a healthy cluster and bounded by the 5 s proposal timeout.
_LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
ELECTION_TRIGGERS = ("broker", "admin", "controller")  # controller.service TRIGGER_*


@dataclass(frozen=True)
class GroupGauge:
    """One broker set's row of the scrape-time gauges: SyncStateSet size, master epoch, master."""

    broker_name: str
    sync_state_set_size: int
    master_epoch: int
    has_master: bool | None = None  # None: not reported by the view (no series)
    election_waiting: bool = False


@dataclass(frozen=True)
class NodeView:
    """What the scrape-time gauges show; built by the service."""

    is_leader: bool
    raft_term: int
    commit_index: int
    last_applied: int
    live_brokers: int
    sessions: int
    groups: list[GroupGauge] = field(default_factory=list)
    voter: bool = True
    voters: int = 0
    damaged: bool = False


class _NodeCollector(Collector):
    """Turns this node's ``NodeView`` into Prometheus gauges at scrape time."""

    def __init__(
        self, view: Callable[[], NodeView], on_groups: Callable[[list[GroupGauge]], None] | None = None
    ) -> None:
        self._view = view
        self._on_groups = on_groups

    def collect(self) -> Iterator[Metric]:
        view = self._view()
        if self._on_groups is not None:
            self._on_groups(view.groups)
        yield GaugeMetricFamily(
            "mqha_controller_is_leader",
            "1 while this node is the serving Raft leader",
            value=int(view.is_leader),
        )
        yield GaugeMetricFamily("mqha_controller_raft_term", "current Raft term", value=view.raft_term)
        yield GaugeMetricFamily(
            "mqha_controller_raft_voter",
            "1 while this node's store is in the voter set, 0 while it is an observer",
            value=int(view.voter),
        )
        yield GaugeMetricFamily(
            "mqha_controller_raft_voters", "voters in the voter set as this node knows it", value=view.voters
        )
        yield GaugeMetricFamily(
            "mqha_controller_raft_damaged",
            "1 while this member's Raft state is damaged: it applies, votes and leads no more (see /healthz)",
            value=int(view.damaged),
        )
        yield GaugeMetricFamily(
            "mqha_controller_raft_commit_index", "Raft commit index known here", value=view.commit_index
        )
        yield GaugeMetricFamily(
            "mqha_controller_raft_last_applied_index", "last Raft index applied here", value=view.last_applied
        )
        yield GaugeMetricFamily(
            "mqha_controller_broker_groups", "broker sets in the replicated state", value=len(view.groups)
        )
        yield GaugeMetricFamily(
            "mqha_controller_live_brokers",
            "replicas alive in this node's heartbeat table",
            value=view.live_brokers,
        )
        yield GaugeMetricFamily(
            "mqha_controller_broker_sessions",
            "open broker WebSocket sessions on this node",
            value=view.sessions,
        )
        sss = GaugeMetricFamily(
            "mqha_controller_sync_state_set_size", "SyncStateSet size per broker set", labels=["broker_name"]
        )
        epoch = GaugeMetricFamily(
            "mqha_controller_master_epoch", "masterEpoch per broker set", labels=["broker_name"]
        )
        has_master = GaugeMetricFamily(
            "mqha_controller_broker_group_has_master",
            "1 while the broker set has a master in the replicated state",
            labels=["broker_name"],
        )
        waiting = GaugeMetricFamily(
            "mqha_controller_election_waiting",
            "1 while the broker set waits for a replica holding every acknowledged message (this node)",
            labels=["broker_name"],
        )
        for group in view.groups:
            sss.add_metric([group.broker_name], group.sync_state_set_size)
            epoch.add_metric([group.broker_name], group.master_epoch)
            if group.has_master is not None:
                has_master.add_metric([group.broker_name], int(group.has_master))
            waiting.add_metric([group.broker_name], int(group.election_waiting))
        yield sss
        yield epoch
        yield has_master
        yield waiting


class ControllerMetrics:
    """All metrics of one node. ``view`` is called at each scrape."""

    def __init__(self, view: Callable[[], NodeView]) -> None:
        disable_created_metrics()  # process-wide; the ``_created`` series only add noise here
        self.registry = CollectorRegistry(auto_describe=False)
        self.requests = Counter(
            "mqha_controller_requests",
            "HTTP API requests by API and response code name",
            ["api", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "mqha_controller_request_duration_seconds",
            "HTTP API request latency",
            ["api"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.elections = Counter(
            "mqha_controller_elections",
            "master elections decided by this node, by trigger and result",
            ["trigger", "result"],
            registry=self.registry,
        )
        self.election_duration = Histogram(
            "mqha_controller_election_duration_seconds",
            "time to decide and commit one master election attempt, by trigger",
            ["trigger"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        for trigger in ELECTION_TRIGGERS:  # series exist (at zero) before the first election
            self.election_duration.labels(trigger)
        self.acked_data_lost = Counter(
            "mqha_controller_acked_data_lost",
            "elections decided by this node that declared acknowledged data lost (on no live replica)",
            ["broker_name"],
            registry=self.registry,
        )
        self.registry.register(_NodeCollector(view, self._touch_groups))

    def observe_request(self, api: str, code: str, seconds: float) -> None:
        self.requests.labels(api, code).inc()
        self.latency.labels(api).observe(seconds)

    def observe_election(self, trigger: str, result: str, seconds: float | None = None) -> None:
        self.elections.labels(trigger, result).inc()
        if seconds is not None:
            self.election_duration.labels(trigger).observe(seconds)

    def _touch_groups(self, groups: list[GroupGauge]) -> None:
        # Every set's loss counter exists at 0 before its first loss, so increase() sees that one too.
        for group in groups:
            self.acked_data_lost.labels(group.broker_name)

    def observe_acked_data_lost(self, broker_name: str) -> None:
        self.acked_data_lost.labels(broker_name).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
