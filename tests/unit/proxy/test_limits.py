"""mqproxy's limits: the in-flight byte budgets (core) and the options gRPC enforces the rest with."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqha.errors import ConfigError
from mqha.proxy.config import PROXY_CONFIG, check_proxy_config
from mqha.proxy.limits import PER_CONNECTION, PER_PROCESS, InFlightBytes, grpc_options


def test_a_connection_over_its_budget_is_refused_and_others_are_served() -> None:
    budget = InFlightBytes(per_connection=100, per_process=250)
    assert budget.admit("a", 60) is None and budget.admit("a", 40) is None
    refused = budget.admit("a", 1)
    assert refused is not None and refused.limit == PER_CONNECTION
    assert "holds 100 bytes" in refused.message and f"{PER_CONNECTION}=100" in refused.message
    assert (budget.total, budget.by_connection) == (100, {"a": 100})  # a refusal changes nothing
    assert budget.admit("b", 100) is None  # another connection is served
    budget.release("a", 60)
    assert budget.admit("a", 50) is None  # room again once answered


def test_the_process_budget_refuses_a_connection_holding_nothing() -> None:
    budget = InFlightBytes(per_connection=100, per_process=150)
    assert budget.admit("a", 100) is None
    refused = budget.admit("b", 60)
    assert refused is not None and refused.limit == PER_PROCESS and f"{PER_PROCESS}=150" in refused.message
    assert budget.admit("b", 50) is None
    budget.release("a", 100)
    budget.release("b", 50)
    assert (budget.total, budget.by_connection) == (0, {})  # nothing left behind per connection


@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 120), st.booleans()), max_size=60))
def test_budgets_are_never_passed_and_releases_balance(steps: list[tuple[str, int, bool]]) -> None:
    budget = InFlightBytes(per_connection=100, per_process=180)
    held: list[tuple[str, int]] = []
    for connection, size, release_first in steps:
        if release_first and held:
            budget.release(*held.pop(0))
        if budget.admit(connection, size) is None:
            held.append((connection, size))
        assert budget.total == sum(size for _, size in held) <= 180
        assert all(0 < v <= 100 for v in budget.by_connection.values())
    for item in held:
        budget.release(*item)
    assert (budget.total, budget.by_connection) == (0, {})


def test_grpc_enforces_connections_streams_and_request_size() -> None:
    config = PROXY_CONFIG.resolve({"controllerAddr": "127.0.0.1:9878"})
    options = dict(grpc_options(config))
    assert options["grpc.max_allowed_incoming_connections"] == 10_000
    assert options["grpc.max_concurrent_streams"] == 256
    assert options["grpc.max_receive_message_length"] == 5 * 1024 * 1024  # maxMessageSize + 1 MiB
    assert options["grpc.server_handshake_timeout_ms"] > 0 and options["grpc.max_connection_idle_ms"] > 0
    bigger = PROXY_CONFIG.resolve({"controllerAddr": "127.0.0.1:9878", "maxMessageSize": str(8 << 20)})
    assert dict(grpc_options(bigger))["grpc.max_receive_message_length"] == 9 << 20


@pytest.mark.parametrize(
    ("given", "key"),
    [
        ({"grpcMaxInflightBytesPerConnection": str(1 << 20)}, "grpcMaxInflightBytesPerConnection"),
        ({"grpcMaxInflightBytes": str(32 << 20)}, "grpcMaxInflightBytes"),
        ({"grpcMaxConcurrentCallsPerConnection": "0"}, "grpcMaxConcurrentCallsPerConnection"),
        ({"grpcMaxConnections": "0"}, "grpcMaxConnections"),
    ],
)
def test_budgets_that_cannot_hold_one_request_are_refused(given: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_proxy_config(PROXY_CONFIG.resolve({"controllerAddr": "127.0.0.1:9878", **given}))
    assert caught.value.key == key
