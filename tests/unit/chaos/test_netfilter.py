"""``mqha.chaos.netfilter``: which packets a drop matches, and the nft script around them."""

from __future__ import annotations

import pytest

from mqha.chaos.netfilter import (
    Drop,
    Endpoint,
    one_way,
    partition,
    rules,
    ruleset,
    source_addresses,
    stale_tables,
)

ENDPOINTS = {
    "n0": Endpoint("127.0.0.10", (9000, 9001)),
    "n1": Endpoint("127.0.0.11", (9010, 9011)),
    "producer": Endpoint("127.0.0.12"),
}


def test_a_drop_matches_the_senders_connections_and_its_replies_on_the_receivers() -> None:
    assert rules(ENDPOINTS, [Drop("n0", "n1")]) == [
        "ip saddr 127.0.0.10 ip daddr 127.0.0.1 tcp dport { 9010, 9011 } drop",
        "ip saddr 127.0.0.1 tcp sport { 9000, 9001 } ip daddr 127.0.0.11 drop",
    ]


def test_a_client_without_ports_is_matched_on_its_own_connections_only() -> None:
    assert rules(ENDPOINTS, [Drop("producer", "n0")]) == [
        "ip saddr 127.0.0.12 ip daddr 127.0.0.1 tcp dport { 9000, 9001 } drop"
    ]
    assert rules(ENDPOINTS, [Drop("n0", "producer")]) == [
        "ip saddr 127.0.0.1 tcp sport { 9000, 9001 } ip daddr 127.0.0.12 drop"
    ]


def test_a_lossy_drop_draws_per_packet() -> None:
    (rule, _) = rules(ENDPOINTS, [Drop("n0", "n1", 80)])
    assert rule.endswith("numgen random mod 100 < 80 drop")


def test_partition_is_both_ways_and_one_way_is_one() -> None:
    assert partition(["n0"], ["n1", "producer"]) == sorted(
        [Drop("n0", "n1"), Drop("n1", "n0"), Drop("n0", "producer"), Drop("producer", "n0")]
    )
    assert one_way(["n0"], ["n1", "n0"]) == [Drop("n0", "n1")]
    with pytest.raises(ValueError, match="both sides"):
        partition(["n0"], ["n0"])


def test_bad_percent_and_unknown_nodes_are_refused() -> None:
    with pytest.raises(ValueError, match="percent"):
        rules(ENDPOINTS, [Drop("n0", "n1", 0)])
    with pytest.raises(KeyError):
        rules(ENDPOINTS, [Drop("n0", "n9")])


def test_the_script_replaces_the_table_in_one_transaction() -> None:
    script = ruleset("t1", ENDPOINTS, [Drop("producer", "n1")])
    assert script.splitlines()[:3] == ["table inet t1", "delete table inet t1", "table inet t1 {"]
    assert "type filter hook output priority filter; policy accept;" in script
    assert "ip saddr 127.0.0.12 ip daddr 127.0.0.1 tcp dport { 9010, 9011 } drop" in script


def test_source_addresses_are_distinct_and_clear_of_the_listen_address() -> None:
    got = source_addresses(["a", "b"])
    assert got == {"a": "127.0.0.10", "b": "127.0.0.11"}
    with pytest.raises(ValueError):
        source_addresses(str(i) for i in range(300))


def test_stale_tables_are_the_chaos_tables_of_runs_that_are_gone() -> None:
    listing = (
        "table inet mqha_chaos_12\ntable inet mqha_chaos_34\ntable inet filter\ntable ip mqha_chaos_56\n"
    )
    listing += "table inet mqha_chaos_x\ntable inet mqha_test_78\n"
    assert stale_tables(listing, alive=lambda pid: pid == 34) == ["mqha_chaos_12"]
    assert stale_tables("", alive=lambda pid: False) == []
