"""Which network links a chaos run can cut, and how each broker is wired through them (core).

Every broker reaches every controller and every other replica of its group through its own link, a
TCP proxy on 127.0.0.1 (``mqha.chaos.proxy``). So a link is one (source broker, target) pair and a
partition of a broker blocks exactly its links, in both directions:

- ``controller`` links, broker X -> controller C: X's ``controllerAddr`` lists its links instead of
  the controllers. Controllers name themselves (``leaderAddress``, ``peers``) and the masters' HA
  addresses (``masterHaAddress``) in their answers; X's links translate those real addresses into X's
  own link addresses (same length, so HTTP and WebSocket framing stay valid), so X's leader calls and
  its HA connection also travel over its links -- as a per-host view of the network (NAT) would.
- ``replication`` links, broker X -> broker Y's HA port: the connection X opens as Y's slave.

Clients (producers, consumers, the runner) reach every node directly, as in a partition that leaves
the clients with the majority side. The Raft traffic between controllers is not proxied.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from mqha.chaos.schedule import ALL_LINKS, CONTROLLER_LINKS, REPLICATION_LINKS, Topology

HOST = "127.0.0.1"
RTO_MIN = 0.2  # Linux TCP_RTO_MIN: a lost segment is resent after this long
RTO_MAX = 3.2


@dataclass(frozen=True)
class Link:
    """One proxied link: ``source`` connects to ``listen``, which forwards to ``upstream``."""

    source: str
    target: str
    scope: str  # CONTROLLER_LINKS | REPLICATION_LINKS
    listen: str
    upstream: str

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"


def plan_links(
    topology: Topology,
    controller_api: Mapping[str, str],
    broker_ha: Mapping[str, str],
    ports: Iterable[int],
) -> list[Link]:
    """Every broker's links (controllers in topology order, then its group's other replicas), each
    listening on the next of ``ports``. A listen address must be as long as the address it stands
    for (the translation keeps byte counts): ValueError otherwise."""
    free = iter(ports)
    links = []
    for _group, members in topology.groups:
        for broker in members:
            targets = [(c, CONTROLLER_LINKS, controller_api[c]) for c in topology.controllers]
            targets += [(b, REPLICATION_LINKS, broker_ha[b]) for b in members if b != broker]
            for target, scope, upstream in targets:
                listen = f"{HOST}:{next(free)}"
                if len(listen) != len(upstream):
                    raise ValueError(f"link {broker}->{target}: {listen} and {upstream} differ in length")
                links.append(Link(broker, target, scope, listen, upstream))
    return links


def controller_addr(links: Sequence[Link], broker: str) -> str:
    """The ``controllerAddr`` value of ``broker``: its controller links, in order."""
    return ";".join(link.listen for link in links if link.source == broker and link.scope == CONTROLLER_LINKS)


def controller_aliases(links: Sequence[Link], controller_api: str) -> str:
    """The ``controllerNodeAliases`` value of the controller at ``controller_api``: every link address
    that forwards to it (brokers sign for the address they dial)."""
    fronting = (link for link in links if link.scope == CONTROLLER_LINKS and link.upstream == controller_api)
    return ",".join(link.listen for link in fronting)


def translations(links: Sequence[Link], broker: str) -> tuple[tuple[bytes, bytes], ...]:
    """Real address -> ``broker``'s link address, for every node ``broker`` has a link to: applied to
    what controllers send ``broker``."""
    return tuple((link.upstream.encode(), link.listen.encode()) for link in links if link.source == broker)


def links_touching(links: Sequence[Link], node: str, scope: str) -> list[Link]:
    """The links a fault on ``node`` with ``scope`` (ALL_LINKS, CONTROLLER_LINKS, REPLICATION_LINKS)
    cuts: its own links of that scope, and for replication also the links other replicas open to it."""
    if scope not in (ALL_LINKS, CONTROLLER_LINKS, REPLICATION_LINKS):
        raise ValueError(f"unknown link scope {scope!r}")
    out = []
    for link in links:
        if scope not in (ALL_LINKS, link.scope):
            continue
        if link.source == node or (link.scope == REPLICATION_LINKS and link.target == node):
            out.append(link)
    return out


def client_partition_links(links: Sequence[Link], master: str, controller: str) -> list[Link]:
    """The broker links a client-partition cuts (the #7017 shape): the old ``master`` keeps only its
    link to ``controller`` -- not to the other controllers, not to its replicas -- and no other broker
    reaches ``controller``."""
    out = []
    for link in links:
        if link.scope == CONTROLLER_LINKS:
            if (link.source == master) != (link.target == controller):
                out.append(link)
        elif master in (link.source, link.target):
            out.append(link)
    return out


class Translator:
    """Replaces byte strings in a stream by others of the same length (sans-IO).

    ``feed`` returns what can be forwarded now; a tail that may be the start of an address split across
    reads is held back until the next ``feed`` or ``flush`` (the proxy flushes when the stream goes
    quiet).
    """

    def __init__(self, pairs: Sequence[tuple[bytes, bytes]]) -> None:
        for old, new in pairs:
            if len(old) != len(new) or not old:
                raise ValueError(f"{old!r} -> {new!r}: replacements must keep the length")
        self.pairs = tuple(pairs)
        self._held = b""

    @property
    def held(self) -> bytes:
        return self._held

    def feed(self, data: bytes) -> bytes:
        buf = self._held + data
        for old, new in self.pairs:
            buf = buf.replace(old, new)
        keep = self._partial_tail(buf)
        self._held = buf[len(buf) - keep :] if keep else b""
        return buf[: len(buf) - keep]

    def flush(self) -> bytes:
        out, self._held = self._held, b""
        return out

    def _partial_tail(self, buf: bytes) -> int:
        """Length of the longest suffix of ``buf`` that is a proper prefix of an address."""
        best = 0
        for old, _ in self.pairs:
            for n in range(min(len(old) - 1, len(buf)), best, -1):
                if buf.endswith(old[:n]):
                    best = n
                    break
        return best


def retransmit_delay(consecutive_losses: int) -> float:
    """How late a chunk arrives after ``consecutive_losses`` losses in a row: TCP resends a lost
    segment after its retransmission timeout, doubling while losses repeat."""
    return min(RTO_MAX, RTO_MIN * 2 ** max(0, consecutive_losses - 1)) if consecutive_losses else 0.0


def delivery_time(arrival: float, delay: float, jitter: float, previous: float) -> float:
    """When a chunk read at ``arrival`` is forwarded on a delayed link: ``delay`` plus this chunk's
    ``jitter`` (a draw in [-j, +j]) later, never before the chunk ahead of it (``previous``): a TCP
    stream stays in order, so jitter shows as bunching, not reordering."""
    return max(previous, arrival + max(0.0, delay + jitter))
