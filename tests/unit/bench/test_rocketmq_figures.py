"""The arithmetic of ``mqha bench rocketmq``: what the Java driver's lines say, alike for both sides."""

from __future__ import annotations

import pytest

from mqha.bench.rocketmq_figures import Sends, consume_rate, loss, p50_p99, per_thousand


def _ack(seq: int, t: float, ms: float = 1.0) -> dict[str, object]:
    return {"seq": seq, "ok": True, "t": t, "ms": ms}


def test_sends_keep_acks_in_time_order_and_failures_apart() -> None:
    events = [
        _ack(1, 2.0),
        {"seq": 2, "ok": False, "t": 2.5, "ms": 3000.0, "error": "timeout"},
        _ack(0, 1.0),
        {"done": True, "ok": 2, "failed": 1},
        {"error": "receive", "t": 3.0},
    ]
    sends = Sends.of(events)
    assert sends.acks == ((1.0, 0), (2.0, 1))
    assert sends.failures == (2.5,)
    assert sends.acked == {0, 1}
    assert sends.latencies_ms == (1.0, 1.0)


def test_throughput_counts_from_the_first_ack_to_the_last() -> None:
    assert Sends.of([_ack(i, 10 + i * 0.5) for i in range(5)]).throughput() == pytest.approx(2.0)
    assert Sends.of([_ack(0, 1.0)]).throughput() is None


def test_largest_gap_spans_the_fault_from_the_last_ack_before_it() -> None:
    times = (9.9, 10.5, 13.0, 13.1, 13.2, 20.5)
    sends = Sends.of([_ack(seq, t) for seq, t in enumerate(times)])
    assert sends.largest_gap(10.0, 13.15) == pytest.approx(2.5)  # 10.5 -> 13.0
    assert sends.largest_gap(13.15, 20.0) == pytest.approx(7.3)  # 13.2 -> the first ack after the end
    assert Sends.of([_ack(0, 1.0)]).largest_gap(2.0, 8.0) == pytest.approx(7.0)  # none after: to the end
    assert Sends.of([]).largest_gap(5.0, 8.0) == pytest.approx(3.0)


def test_failed_sends_are_counted_within_the_cycle() -> None:
    sends = Sends.of([{"seq": i, "ok": False, "t": t} for i, t in enumerate((1.0, 5.0, 9.0))])
    assert sends.failed_between(4.0, 9.0) == 2


def test_loss_counts_acked_never_received_and_every_extra_receipt() -> None:
    figures = loss([0, 1, 2, 3], [0, 2, 2, 3, 3, 3, 7])
    assert figures == {"acked": 4, "received": 7, "lost": 1, "duplicated": 3}


def test_rates_and_percentiles() -> None:
    assert consume_rate([1.0, 2.0, 3.0]) == pytest.approx(1.0)
    assert consume_rate([1.0]) is None
    assert per_thousand(2.0, 4000) == pytest.approx(0.5)
    assert per_thousand(2.0, 0) is None
    assert p50_p99([]) == (None, None)
    assert p50_p99([float(i) for i in range(1, 101)]) == (50.0, 99.0)


def test_only_names_failover_runs_and_refuses_anything_else() -> None:
    from mqha.bench.rocketmq import parse_only

    assert parse_only(None) is None
    assert parse_only("kill:16, pause:1") == [(16, "kill"), (1, "pause")]
    with pytest.raises(SystemExit, match="KIND:SENDERS"):
        parse_only("crash:16")


def test_the_tables_put_both_sides_and_their_ratio_side_by_side() -> None:
    from mqha.bench import rocketmq

    produce = [
        {"side": side, "senders": n, "msgs_per_s": rate * n, "p50_ms": 2.0, "p99_ms": 9.0,
         "cpu_s_per_1000": 0.5, "rss_mib": 700.0}
        for side, rate in (("mqha", 100.0), ("rocketmq", 200.0)) for n in (1, 16)
    ]  # fmt: skip
    cycle = {"new_master_s": 1.5, "largest_gap_s": 2.0}
    failover = [
        {"side": side, "kind": "kill", "senders": 16, "cycles": [cycle], "failed_total": 0, "lost": 0,
         "duplicated": 1}
        for side in ("mqha", "rocketmq")
    ]  # fmt: skip
    data = {
        "produce": produce,
        "direct": [{"senders": n, "msgs_per_s": 900.0, "p50_ms": 1.0, "p99_ms": 3.0} for n in (1, 16)],
        "consume": [{"side": "mqha", "msgs_per_s": 50.0}, {"side": "rocketmq", "msgs_per_s": 100.0}],
        "failover": failover,
    }
    produce_table = _rows(rocketmq._produce_table(data))
    assert produce_table["16 sender(s): msgs/s"] == ["1600.0", "3200.0", "0.50", "900.0"]
    consume = _rows(rocketmq._consume_and_resources(data))
    assert consume["d) consume msgs/s (SimpleConsumer)"] == ["50.0", "100.0", "0.50"]
    failover = _rows(rocketmq._failover_table(data))
    assert failover["SIGKILL, 16 sender(s): new master p50 s"] == ["1.50", "1.50", "1.00"]
    assert failover["SIGKILL, 16 sender(s): duplicated"] == ["1", "1", ""]
    assert not [row for row in failover if "SIGSTOP" in row or "1 sender(s)" in row]


def _rows(table: str) -> dict[str, list[str]]:
    """A printed table's rows by their first cell."""
    rows = {}
    for line in table.splitlines():
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            rows[cells[0]] = cells[1:]
    return rows
