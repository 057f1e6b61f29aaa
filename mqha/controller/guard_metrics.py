"""Scrape-time metrics of the controller's guards (shell): signatures, clocks and the HTTP limits.

- ``mqha_controller_signatures_verified_total``; ``mqha_controller_signatures_refused_total{reason}``
  (``malformed``, ``unknown_key``, ``other_node``, ``wrong``, ``skew``, ``replay``, ``body``)
- ``mqha_controller_signature_clock_skew_seconds``: the last signature with a right HMAC, its
  timestamp minus this node's wall clock (NaN before the first)
- ``mqha_controller_signature_stalled_seconds``: how long signatures have failed on this node's clock
  with none accepted (0 normally); ``mqha_controller_signature_stall_handovers_total``
- ``mqha_controller_http_connections``, ``mqha_controller_http_connections_refused_total``,
  ``mqha_controller_console_streams``
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from mqha.controller.auth import ControllerAuth
from mqha.controller.clock_guard import ClockGuard
from mqha.controller.console_feed import ConsoleFeed
from mqha.security.http_limits import ConnectionStats

REFUSAL_REASONS = (
    "malformed",
    "unknown_key",
    "other_node",
    "wrong",
    "skew",
    "before_start",
    "replay",
    "body",
)


class GuardCollector(Collector):
    """Reads the guards' counters at each scrape."""

    def __init__(
        self, auth: ControllerAuth, guard: ClockGuard, connections: ConnectionStats, console: ConsoleFeed
    ) -> None:
        self.auth, self.guard, self.connections, self.console = auth, guard, connections, console

    def collect(self) -> Iterator[Metric]:
        auth = self.auth
        yield CounterMetricFamily(
            "mqha_controller_signatures_verified",
            "broker signatures accepted",
            value=auth.watch.verified_total,
        )
        refused = CounterMetricFamily(
            "mqha_controller_signatures_refused", "broker signatures refused, by reason", labels=["reason"]
        )
        for reason in sorted({*REFUSAL_REASONS, *auth.refused}):
            refused.add_metric([reason], auth.refused[reason])
        yield refused
        skew = auth.watch.last_skew_ms
        yield GaugeMetricFamily(
            "mqha_controller_signature_clock_skew_seconds",
            "the last broker signature's timestamp minus this node's wall clock (NaN before the first)",
            value=math.nan if skew is None else skew / 1000,
        )
        yield GaugeMetricFamily(
            "mqha_controller_signature_stalled_seconds",
            "how long broker signatures have failed on this node's clock with none accepted",
            value=auth.signatures_stalled_ms() / 1000,
        )
        yield CounterMetricFamily(
            "mqha_controller_signature_stall_handovers",
            "leadership handed over because no broker signature verified (clock)",
            value=self.guard.handovers,
        )
        yield GaugeMetricFamily(
            "mqha_controller_http_connections", "open HTTP API connections", value=self.connections.open()
        )
        yield CounterMetricFamily(
            "mqha_controller_http_connections_refused",
            "HTTP API connections refused over httpMaxConnections",
            value=self.connections.refused,
        )
        yield GaugeMetricFamily(
            "mqha_controller_console_streams", "open web console event streams", value=self.console.streams
        )
