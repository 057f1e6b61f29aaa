"""Packet-filter rules for the chaos run's network faults (core): who may not send to whom.

Every node process of a chaos run connects from its own loopback address (``127.0.0.N``, set by the
``source_address`` shim) and listens, as always, on ``127.0.0.1`` ports. So every packet on the
loopback says which process sent it and to which node it goes:

- a connection the sender opened: ``sender's address -> 127.0.0.1:<a port of the receiver>``;
- a connection the receiver opened: ``127.0.0.1:<a port of the sender> -> receiver's address``.

A ``Drop`` of (sender, receiver) matches both shapes, so nothing the sender writes reaches the
receiver, whoever opened the connection, while the other direction is untouched (an asymmetric
partition); a symmetric partition is two drops. ``percent`` below 100 drops that share of the
packets instead (``numgen random``): TCP resends them, so the link is slow and lossy, not cut.

``ruleset`` renders the whole table for ``nft -f``: the table is created, deleted and created again
in one transaction, so each change replaces every rule at once and a removed table leaves nothing.
The traffic of processes without an address of their own (the chaos runner's probes) is never
matched: it comes from 127.0.0.1 and goes to 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

LISTEN_HOST = "127.0.0.1"
FIRST_SOURCE = 10
"""Node sources are ``127.0.0.10`` and up: clear of 127.0.0.1, which stays everyone's listen address."""


@dataclass(frozen=True)
class Endpoint:
    """One process of the run: the loopback address it connects from, the ports it listens on."""

    source: str
    ports: tuple[int, ...] = ()


@dataclass(frozen=True, order=True)
class Drop:
    """Nothing (``percent`` = 100) or that share of what ``sender`` sends reaches ``receiver``."""

    sender: str
    receiver: str
    percent: int = 100


def source_addresses(names: Iterable[str]) -> dict[str, str]:
    """A distinct loopback source address per name, in order (``127.0.0.10`` ...)."""
    out: dict[str, str] = {}
    for index, name in enumerate(names):
        number = FIRST_SOURCE + index
        if number > 254:
            raise ValueError(f"too many processes for one loopback /24: {name}")
        out[name] = f"127.0.0.{number}"
    return out


def partition(side_a: Iterable[str], side_b: Iterable[str], percent: int = 100) -> list[Drop]:
    """Both directions between every node of ``side_a`` and every node of ``side_b``."""
    a, b = sorted(set(side_a)), sorted(set(side_b))
    if set(a) & set(b):
        raise ValueError(f"a node on both sides: {sorted(set(a) & set(b))}")
    return sorted([Drop(x, y, percent) for x in a for y in b] + [Drop(y, x, percent) for x in a for y in b])


def one_way(senders: Iterable[str], receivers: Iterable[str], percent: int = 100) -> list[Drop]:
    """Only what ``senders`` send to ``receivers`` is dropped; the other direction flows."""
    return sorted(Drop(s, r, percent) for s in set(senders) for r in set(receivers) if s != r)


def _ports(ports: Iterable[int]) -> str:
    return "{ " + ", ".join(str(p) for p in sorted(set(ports))) + " }"


def rules(endpoints: Mapping[str, Endpoint], drops: Iterable[Drop]) -> list[str]:
    """The nft rules (output hook) of ``drops``; KeyError for a node without an endpoint."""
    out: list[str] = []
    for drop in sorted(set(drops)):
        if not 0 < drop.percent <= 100:
            raise ValueError(f"drop percent {drop.percent} is not in 1..100")
        sender, receiver = endpoints[drop.sender], endpoints[drop.receiver]
        verdict = "drop" if drop.percent == 100 else f"numgen random mod 100 < {drop.percent} drop"
        if receiver.ports:  # on the connections the sender opened
            to_receiver = f"ip daddr {LISTEN_HOST} tcp dport {_ports(receiver.ports)}"
            out.append(f"ip saddr {sender.source} {to_receiver} {verdict}")
        if sender.ports:  # on the connections the receiver opened
            from_sender = f"ip saddr {LISTEN_HOST} tcp sport {_ports(sender.ports)}"
            out.append(f"{from_sender} ip daddr {receiver.source} {verdict}")
    return out


def ruleset(table: str, endpoints: Mapping[str, Endpoint], drops: Iterable[Drop]) -> str:
    """The ``nft -f`` script that makes ``table`` hold exactly the rules of ``drops``."""
    body = "".join(f"    {rule}\n" for rule in rules(endpoints, drops))
    return (
        f"table inet {table}\n"
        f"delete table inet {table}\n"
        f"table inet {table} {{\n"
        "  chain output {\n"
        "    type filter hook output priority filter; policy accept;\n"
        f"{body}"
        "  }\n"
        "}\n"
    )


def removal(table: str) -> str:
    """The ``nft -f`` script that removes ``table`` (and creates nothing)."""
    return f"table inet {table}\ndelete table inet {table}\n"


TABLE_PREFIX = "mqha_chaos_"


def stale_tables(listing: str, alive: Callable[[int], bool]) -> list[str]:
    """The chaos tables in ``nft list tables`` output whose run (the pid in the name) is gone: a run killed
    with SIGKILL never removes its table, and its drops would go on matching reused ports."""
    out = []
    for line in listing.splitlines():
        words = line.split()
        if len(words) == 3 and words[:2] == ["table", "inet"] and words[2].startswith(TABLE_PREFIX):
            pid = words[2][len(TABLE_PREFIX) :]
            if pid.isdigit() and not alive(int(pid)):
                out.append(words[2])
    return out
