"""RocketMQ's metrics exporter keys (``metricsExporterType`` and its family), shared by the controller
and mqproxy: PROM is mapped to a ``/metrics`` listener on ``metricsPromExporterPort``; the OTLP and
LOG exporters and their keys are refused with what to do instead (data; docs/config.md)."""

from __future__ import annotations

from mqha import config as rules
from mqha.config import Key, mapped, refused


def exporter_keys(instead: str, type_deviation: str, host_default: str) -> list[Key]:
    """The family: ``instead`` (what mqha offers for metrics) in every refusal, ``type_deviation``
    for ``metricsExporterType``, ``host_default`` (what an empty ``metricsPromExporterHost`` binds)."""
    return [
        Key(
            "metricsExporterType",
            str,
            "DISABLE",
            "metrics exporter: DISABLE, OTLP_GRPC, PROM or LOG",
            choices=("DISABLE", "OTLP_GRPC", "PROM", "LOG"),
            support=mapped(instead, accepted=("PROM",)),
            deviation=type_deviation,
        ),
        Key("metricsGrpcExporterTarget", str, "", "OTLP endpoint", support=refused(instead)),
        Key("metricsGrpcExporterHeader", str, "", "OTLP request headers", support=refused(instead)),
        Key(
            "metricGrpcExporterTimeOutInMills",
            int,
            3000,
            "OTLP export timeout",
            rule=rules.MILLIS,
            support=refused(instead),
        ),
        Key(
            "metricGrpcExporterIntervalInMills",
            int,
            60000,
            "OTLP export period",
            rule=rules.MILLIS,
            support=refused(instead),
        ),
        Key(
            "metricLoggingExporterIntervalInMills",
            int,
            10000,
            "LOG exporter period",
            rule=rules.MILLIS,
            support=refused(instead),
        ),
        Key(
            "metricsPromExporterPort",
            int,
            5557,
            "port of the Prometheus exporter (metricsExporterType=PROM)",
            rule=rules.PORT,
        ),
        Key(
            "metricsPromExporterHost",
            str,
            "",
            "host of the Prometheus exporter",
            deviation=f"empty: {host_default}",
        ),
        Key(
            "metricsLabel",
            str,
            "",
            "extra labels on every metric, k:v,k:v",
            support=refused("add labels in the Prometheus scrape config (relabel_configs)"),
        ),
        Key(
            "metricsInDelta",
            bool,
            False,
            "export deltas instead of cumulative values",
            support=refused("Prometheus counters are cumulative: use rate() in queries"),
        ),
    ]
