"""mqproxy's limits: calls open, bytes arriving and held (cores), and the options gRPC is given."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqha.errors import ConfigError
from mqha.proxy.config import PROXY_CONFIG, check_proxy_config
from mqha.proxy.limits import (
    ARRIVAL_WINDOW,
    CONNECTIONS,
    PER_CONNECTION,
    PER_PROCESS,
    STREAMS,
    Arrivals,
    InFlightBytes,
    OpenCalls,
    grpc_options,
)


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


def test_grpc_caps_connections_and_streams_past_the_counted_limits_and_sizes_requests() -> None:
    config = PROXY_CONFIG.resolve({"controllerAddr": "127.0.0.1:9878"})
    options = dict(grpc_options(config))
    # Twice the counted limits: a call past those reaches mqproxy, which answers RESOURCE_EXHAUSTED.
    assert options["grpc.max_allowed_incoming_connections"] == 20_000
    assert options["grpc.max_concurrent_streams"] == 512
    assert options["grpc.http2.lookahead_bytes"] == ARRIVAL_WINDOW  # before mqproxy asks for a request
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


def test_calls_past_a_connections_streams_or_the_connections_limit_are_refused() -> None:
    calls = OpenCalls(max_connections=2, per_connection=3)
    assert all(calls.open("a") is None for _ in range(3))
    refused = calls.open("a")
    assert refused is not None and refused.limit == STREAMS and f"{STREAMS}=3" in refused.message
    assert calls.open("b") is None
    refused = calls.open("c")  # a third connection with a call
    assert refused is not None and refused.limit == CONNECTIONS and f"{CONNECTIONS}=2" in refused.message
    assert calls.open("b") is None  # a counted connection's next call is only a stream
    calls.close("b")
    calls.close("b")
    assert calls.open("c") is None  # b has no call open: it no longer counts
    assert calls.by_connection == {"a": 3, "c": 1}


def test_arrivals_are_counted_at_the_largest_size_and_the_oldest_gives_way_after_the_grace() -> None:
    arrivals = Arrivals(InFlightBytes(per_connection=20, per_process=30), largest=10, grace=1.0)
    assert arrivals.expect(1, "a", now=0.0).refused is None
    assert arrivals.expect(2, "a", now=0.1).refused is None
    waiting = arrivals.expect(3, "a", now=0.5)  # the connection's budget is full, none stale yet
    assert waiting.refused is not None and waiting.refused.limit == PER_CONNECTION
    assert waiting.evicted == [] and waiting.retry_in == pytest.approx(0.5)
    assert arrivals.expect(4, "b", now=0.5).refused is None  # another connection is served
    late = arrivals.expect(5, "b", now=0.6)  # the process is full
    assert late.refused is not None and late.refused.limit == PER_PROCESS
    assert late.retry_in == pytest.approx(0.4)
    made_room = arrivals.expect(5, "b", now=1.05)  # call 1 has been arriving past the grace
    assert made_room.refused is None and made_room.evicted == [(1, PER_PROCESS)]
    own = arrivals.expect(6, "a", now=1.2)  # a holds call 2 only, but the process is full again
    assert own.refused is None and own.evicted == [(2, PER_PROCESS)]
    for call in (4, 5, 6, 99):  # 99: never counted, or evicted before
        arrivals.arrived(call)
    assert (arrivals.budget.total, arrivals.budget.by_connection, arrivals.arriving) == (0, {}, {})


def test_a_refused_arrival_with_nothing_to_wait_for_says_so() -> None:
    arrivals = Arrivals(InFlightBytes(per_connection=10, per_process=10), largest=10)
    assert arrivals.expect(1, "a", now=0.0).refused is None
    other = arrivals.expect(2, "b", now=0.0)
    assert other.refused is not None and other.retry_in == pytest.approx(arrivals.grace)


@given(st.lists(st.tuples(st.sampled_from("abc"), st.floats(0, 0.7), st.booleans()), max_size=60))
def test_arrivals_never_pass_a_budget_and_balance(steps: list[tuple[str, float, bool]]) -> None:
    arrivals = Arrivals(InFlightBytes(per_connection=20, per_process=50), largest=10, grace=1.0)
    now = 0.0
    for call, (connection, step, finish_first) in enumerate(steps):
        now += step
        if finish_first and arrivals.arriving:
            arrivals.arrived(next(iter(arrivals.arriving)))
        expected = arrivals.expect(call, connection, now)
        assert all(victim not in arrivals.arriving for victim, _ in expected.evicted)
        assert (call in arrivals.arriving) == (expected.refused is None)
        assert arrivals.budget.total == 10 * len(arrivals.arriving) <= 50
        assert all(v <= 20 for v in arrivals.budget.by_connection.values())
    for call in list(arrivals.arriving):
        arrivals.arrived(call)
    assert (arrivals.budget.total, arrivals.budget.by_connection) == (0, {})
