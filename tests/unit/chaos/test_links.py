"""Link layout of a chaos cluster and the streaming address translation."""

from __future__ import annotations

import itertools

import pytest

from mqha.chaos.links import (
    RTO_MAX,
    RTO_MIN,
    Link,
    Translator,
    client_partition_links,
    controller_addr,
    delivery_time,
    links_touching,
    plan_links,
    retransmit_delay,
    translations,
)
from mqha.chaos.schedule import ALL_LINKS, CONTROLLER_LINKS, REPLICATION_LINKS, Topology

TOPO = Topology.local(2, ["broker-a"], 3)
API = {"n0": "127.0.0.1:40000", "n1": "127.0.0.1:40010"}
HA = {"broker-a-0": "127.0.0.1:41001", "broker-a-1": "127.0.0.1:41011", "broker-a-2": "127.0.0.1:41021"}


def links() -> list[Link]:
    return plan_links(TOPO, API, HA, itertools.count(50000))


def test_every_broker_gets_a_link_to_each_controller_and_each_other_replica() -> None:
    out = links()
    assert len(out) == 3 * (2 + 2)
    assert len({link.listen for link in out}) == len(out)
    first = [link for link in out if link.source == "broker-a-0"]
    assert [(link.target, link.scope, link.upstream) for link in first] == [
        ("n0", CONTROLLER_LINKS, API["n0"]),
        ("n1", CONTROLLER_LINKS, API["n1"]),
        ("broker-a-1", REPLICATION_LINKS, HA["broker-a-1"]),
        ("broker-a-2", REPLICATION_LINKS, HA["broker-a-2"]),
    ]
    assert first[0].name == "broker-a-0->n0"
    assert controller_addr(out, "broker-a-0") == "127.0.0.1:50000;127.0.0.1:50001"


def test_groups_do_not_link_to_each_other() -> None:
    topo = Topology.local(1, ["broker-a", "broker-b"], 2)
    ha = {b: f"127.0.0.1:4{i}000" for i, b in enumerate(topo.brokers)}
    out = plan_links(topo, {"n0": "127.0.0.1:40000"}, ha, itertools.count(50000))
    for link in out:
        if link.scope == REPLICATION_LINKS:
            assert topo.group_of(link.source) == topo.group_of(link.target)


def test_link_addresses_must_keep_the_length() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        plan_links(TOPO, API, HA, itertools.count(5000))


def test_translations_cover_what_the_broker_links_to() -> None:
    out = links()
    pairs = dict(translations(out, "broker-a-1"))
    assert set(pairs) == {
        API["n0"].encode(),
        API["n1"].encode(),
        HA["broker-a-0"].encode(),
        HA["broker-a-2"].encode(),
    }
    assert HA["broker-a-1"].encode() not in pairs  # its own address stays as it is


def test_links_touching_by_scope() -> None:
    out = links()
    names = lambda scope: sorted(link.name for link in links_touching(out, "broker-a-1", scope))  # noqa: E731
    assert names(CONTROLLER_LINKS) == ["broker-a-1->n0", "broker-a-1->n1"]
    assert names(REPLICATION_LINKS) == [
        "broker-a-0->broker-a-1",
        "broker-a-1->broker-a-0",
        "broker-a-1->broker-a-2",
        "broker-a-2->broker-a-1",
    ]
    assert names(ALL_LINKS) == sorted(names(CONTROLLER_LINKS) + names(REPLICATION_LINKS))
    assert links_touching(out, "n0", CONTROLLER_LINKS) == []  # controllers have no links of their own
    with pytest.raises(ValueError):
        links_touching(out, "broker-a-1", "raft")


PAIRS = ((b"127.0.0.1:40000", b"127.0.0.1:50000"), (b"127.0.0.1:41011", b"127.0.0.1:50003"))


def test_translator_replaces_whole_addresses() -> None:
    t = Translator(PAIRS)
    out = t.feed(b'{"leaderAddress":"127.0.0.1:40000","masterHaAddress":"127.0.0.1:41011"}')
    assert out == b'{"leaderAddress":"127.0.0.1:50000","masterHaAddress":"127.0.0.1:50003"}'
    assert t.held == b""


def test_translator_handles_an_address_split_across_reads() -> None:
    text = b'x "127.0.0.1:40000" y 127.0.0.1:41011'
    for cut in range(len(text) + 1):
        t = Translator(PAIRS)
        out = t.feed(text[:cut]) + t.feed(text[cut:]) + t.flush()
        assert out == b'x "127.0.0.1:50000" y 127.0.0.1:50003', cut


def test_translator_holds_back_only_a_possible_prefix() -> None:
    t = Translator(PAIRS)
    assert t.feed(b"abc 127.0.") == b"abc "
    assert t.held == b"127.0."
    assert t.flush() == b"127.0."
    assert t.feed(b"other 127.0.0.1:4999") == b"other 127.0.0.1:4999"  # cannot become an address
    assert t.feed(b"}") == b"}"


def test_translator_needs_same_length_pairs() -> None:
    with pytest.raises(ValueError):
        Translator(((b"127.0.0.1:1", b"127.0.0.1:12"),))


def test_retransmit_delay_doubles_to_a_cap() -> None:
    assert retransmit_delay(0) == 0.0
    assert retransmit_delay(1) == RTO_MIN
    assert retransmit_delay(2) == 2 * RTO_MIN
    assert retransmit_delay(50) == RTO_MAX


def test_a_client_partition_leaves_the_old_master_one_controller_and_the_rest_their_others() -> None:
    cut = {link.name for link in client_partition_links(links(), "broker-a-0", "n1")}
    assert cut == {
        "broker-a-0->n0",  # the old master keeps only n1
        "broker-a-0->broker-a-1",
        "broker-a-0->broker-a-2",
        "broker-a-1->broker-a-0",  # no replica reaches it
        "broker-a-2->broker-a-0",
        "broker-a-1->n1",  # nobody else reaches n1
        "broker-a-2->n1",
    }


def test_a_delayed_chunk_is_late_by_delay_plus_jitter_and_never_overtakes() -> None:
    assert delivery_time(10.0, 1.0, 0.2, 0.0) == pytest.approx(11.2)
    assert delivery_time(10.0, 1.0, -0.2, 0.0) == pytest.approx(10.8)
    assert delivery_time(10.1, 1.0, -0.2, 11.2) == 11.2  # behind the chunk ahead of it
    assert delivery_time(10.0, 0.1, -0.5, 0.0) == 10.0  # never earlier than read
