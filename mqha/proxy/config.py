"""mqproxy's config keys: RocketMQ proxy names where it has them (``ProxyConfig``), broker names for
what brokers share (docs/architecture.md §13, docs/config.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mqha.affinity import allowed_cpus, format_cpu_list, parse_cpu_list
from mqha.config import INT32_MAX, PORT, POSITIVE_INT, ConfigSpec, Key, Rule, between, refused
from mqha.errors import ConfigError
from mqha.exporter_keys import exporter_keys
from mqha.security.credentials import check_authentication_keys
from mqha.security.keys import AUTHENTICATION_KEYS, BROKER_USER_KEYS, TLS_KEYS
from mqha.security.tls import CERT_KEY, PRIVATE_KEY_KEY, server_context
from mqha.wire.types import is_valid_address

_MIB = 1024 * 1024
GRPC_ENVELOPE_BYTES = _MIB
"""What a request carries besides its message body (properties, ids, protobuf and gRPC framing)."""
INNER_CREDENTIALS_KEY = next(
    k for k in AUTHENTICATION_KEYS if k.name == "innerClientAuthenticationCredentials"
)
_TLS_ON_GRPC = "TLS on the gRPC port (clients: Java enableSsl, Python tls_enable, Node sslEnabled)"
_NO_TLS_TO_BROKERS = refused("mqproxy speaks plain HTTP to the brokers: run them without tlsEnable")
PROXY_TLS_KEYS = tuple(
    Key(k.name, k.kind, k.default, _TLS_ON_GRPC if k.name == "tlsEnable" else k.doc)
    if k.name in ("tlsEnable", CERT_KEY, PRIVATE_KEY_KEY)
    else Key(k.name, k.kind, k.default, k.doc, support=_NO_TLS_TO_BROKERS)
    for k in TLS_KEYS
)
"""The brokers' TLS keys: the server side puts TLS on the gRPC port; the proxy still speaks plain
HTTP to brokers (§13), so a ``tls.client.*`` value other than the default is refused, saying why."""
HOST = Rule(lambda value: is_valid_address(f"{value}:1"), "a host name, IPv4 or [IPv6] address")


def _is_cpu_list(value: str) -> bool:
    try:
        parse_cpu_list(value)
    except ValueError:
        return False
    return True


CPU_LIST = Rule(_is_cpu_list, "a CPU list as taskset -c takes it (1 or 0,2-3), or empty")

PROXY_CONFIG = ConfigSpec(
    [
        Key("grpcServerPort", int, 8081, "port of the gRPC MessagingService (RocketMQ 5 clients)", rule=PORT),
        Key(
            "grpcBindAddress",
            str,
            "0.0.0.0",
            "address the gRPC server binds (0.0.0.0: every interface)",
            rule=HOST,
            rocketmq=False,
        ),
        Key("controllerAddr", str, "", "controllers' addresses, host:port;host:port (required)"),
        Key(
            "defaultTopicQueueNums",
            int,
            8,
            "queues of an auto-created topic in each broker group (autoCreateTopicEnable)",
            rule=between(1, 1024),
        ),
        Key(
            "autoCreateTopicEnable",
            bool,
            True,
            "a topic the controllers do not know is in every broker group (else TOPIC_NOT_FOUND)",
        ),
        Key(
            "maxMessageSize",
            int,
            4 * _MIB,
            "largest message body a client may send (the brokers' maxMessageSize bounds the record)",
            rule=POSITIVE_INT,
            unit="bytes",
        ),
        Key(
            "grpcMaxInboundMessageSize",
            int,
            lambda values: values["maxMessageSize"] + GRPC_ENVELOPE_BYTES,
            "largest gRPC request the proxy reads; a larger one is RESOURCE_EXHAUSTED before it is read",
            rule=POSITIVE_INT,
            unit="bytes",
            default_text="maxMessageSize + 1048576",
            deviation="RocketMQ's proxy reads up to 130 MiB (32 messages of 4 MiB); mqproxy one largest "
            "message and gRPC's envelope, so a batch carries at most that much in all",
        ),
        Key(
            "grpcMaxConcurrentCallsPerConnection",
            int,
            256,
            "calls one connection may have open at once; one more is RESOURCE_EXHAUSTED at once "
            "(HTTP/2 MAX_CONCURRENT_STREAMS is twice this)",
            rule=between(1, INT32_MAX),
            deviation="RocketMQ's default is unlimited; 256 bounds what one connection holds "
            "(the official clients use a few streams each)",
        ),
        Key(
            "grpcMaxConnections",
            int,
            10_000,
            "client connections with calls open at once; one more's call is RESOURCE_EXHAUSTED "
            "(gRPC closes connections past twice this; the process raises its open-files limit to "
            "fit; under a lower hard limit it serves as many as fit)",
            rule=between(1, 1_000_000),
            rocketmq=False,
        ),
        Key(
            "grpcMaxInflightBytesPerConnection",
            int,
            64 * _MIB,
            "bytes of one connection's requests held until answered, and apart those still "
            "arriving (each counted at grpcMaxInboundMessageSize); past it a request is "
            "RESOURCE_EXHAUSTED (at least grpcMaxInboundMessageSize)",
            rule=POSITIVE_INT,
            unit="bytes",
            rocketmq=False,
        ),
        Key(
            "grpcMaxInflightBytes",
            int,
            256 * _MIB,
            "bytes of all connections' requests held until answered, and apart those still "
            "arriving; past it a request is RESOURCE_EXHAUSTED (at least "
            "grpcMaxInflightBytesPerConnection)",
            rule=POSITIVE_INT,
            unit="bytes",
            rocketmq=False,
        ),
        Key(
            "proxySendHoldMarginMillis",
            int,
            300,
            "a send held through a failover answers this long before the client's deadline",
            rule=between(1, 60_000),
            rocketmq=False,
        ),
        Key(
            "proxyGroupRefreshMillis",
            int,
            5000,
            "how long the broker groups listed by the controllers are reused before asking again",
            rule=between(100, 3_600_000),
            rocketmq=False,
        ),
        Key(
            "proxyCpuAffinity",
            str,
            "",
            "the CPUs every thread of the proxy runs on (empty: any); one CPU of its own keeps gRPC's "
            "hand-overs to the event loop on one cache (docs/performance.md §9)",
            rule=CPU_LIST,
            rocketmq=False,
        ),
        Key(
            "flushConsumerOffsetInterval",
            int,
            1000,
            "how often the consumer groups' acknowledged positions are committed to the controllers",
            rule=between(100, 60_000),
            unit="ms",
            deviation="RocketMQ's broker persists its consumer offsets every 5000 ms; mqproxy commits to the "
            "controllers every 1000 ms, so a proxy restart redelivers at most about a second of acks",
        ),
        *exporter_keys(
            "metricsExporterType=PROM serves mqproxy's metrics as Prometheus text on /metrics of "
            "metricsPromExporterPort (docs/metrics.md)",
            "OTLP_GRPC and LOG are refused",
            "grpcBindAddress",
        ),
        Key(
            "authenticationEnabled",
            bool,
            False,
            "the brokers require their API user (the proxy puts as initAuthenticationUser) and the "
            "controllers a signature (the proxy commits offsets with innerClientAuthenticationCredentials)",
        ),
        *BROKER_USER_KEYS,
        INNER_CREDENTIALS_KEY,
        Key(
            "authorizationEnabled",
            bool,
            False,
            "each call must also be allowed by its user's ACL policy (needs authenticationEnabled)",
        ),
        Key(
            "proxyAclRefreshMillis",
            int,
            1000,
            "how often the ACL users and policies are fetched from the controllers (authenticationEnabled)",
            rule=between(100, 3_600_000),
            unit="ms",
            rocketmq=False,
        ),
        Key(
            "authenticationClockSkewSeconds",
            int,
            900,
            "how far a client's signed x-mq-date-time may be from the proxy's clock, either way",
            rule=between(1, 86_400),
            unit="s",
            rocketmq=False,
        ),
        *PROXY_TLS_KEYS,
    ]
)


def check_proxy_config(values: Mapping[str, Any]) -> None:
    """Cross-key rules; raises ``ConfigError`` naming the key."""
    addresses = controller_addresses(values)
    if not addresses:
        raise ConfigError("controllerAddr", "required (host:port;host:port)")
    for address in addresses:
        if not is_valid_address(address):
            raise ConfigError(
                "controllerAddr", f"expected host:port;host:port (port 1..65535), got {address!r}"
            )
    check_authentication_keys(values, ("initAuthenticationUser", "innerClientAuthenticationCredentials"))
    if values["authorizationEnabled"] and not values["authenticationEnabled"]:
        raise ConfigError("authorizationEnabled", "needs authenticationEnabled=true (decisions need a user)")
    if values["grpcMaxInflightBytesPerConnection"] < values["grpcMaxInboundMessageSize"]:
        raise ConfigError(
            "grpcMaxInflightBytesPerConnection", "must be at least grpcMaxInboundMessageSize (one request)"
        )
    if values["grpcMaxInflightBytes"] < values["grpcMaxInflightBytesPerConnection"]:
        raise ConfigError("grpcMaxInflightBytes", "must be at least grpcMaxInflightBytesPerConnection")
    if values["tlsEnable"]:
        for key in (CERT_KEY, PRIVATE_KEY_KEY):
            if not values[key]:
                raise ConfigError(key, "required when tlsEnable=true")
        server_context(values)  # files readable, PEM, the key the certificate's
    cpus, allowed = parse_cpu_list(values["proxyCpuAffinity"]), allowed_cpus()
    if not cpus <= allowed:
        raise ConfigError(
            "proxyCpuAffinity",
            f"CPU {format_cpu_list(cpus - allowed)} is not one this process may run on "
            f"({format_cpu_list(allowed)})",
        )


def controller_addresses(values: Mapping[str, Any]) -> list[str]:
    return [part.strip() for part in values["controllerAddr"].split(";") if part.strip()]


def load_proxy_layers(path: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The proxy's checked config and where each value came from."""
    values, sources = PROXY_CONFIG.load_layers([path])
    check_proxy_config(values)
    return values, sources
