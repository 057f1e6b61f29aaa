"""The network faults of a chaos run made with the kernel's packet filter (shell around a pure part).

``raft-partition``, ``asym-partition`` and ``raft-loss`` act on the controllers' own traffic;
``client-partition`` also cuts the clients off (the RocketMQ #7017 shape, with the broker links of the
per-link proxies, ``mqha.chaos.links.client_partition_links``).

Each controller process connects from its own loopback address (the source-address shim, set in its
environment before the cluster starts), the run's clients (producers, consumers) from one more
(``CLIENTS``, their ``local_address``), and the kernel's packet filter drops what a step asks
(``mqha.chaos.netfilter``). ``drops_for`` is the pure part: which drops a step means for the nodes
it hit. The brokers' links go through the per-link proxies (``mqha.chaos.links``), whose traffic
comes from the chaos runner itself: the packet filter never matches them.
"""

from __future__ import annotations

from collections.abc import Sequence

from mqha.chaos.netfilter import Drop, Endpoint, one_way, partition, source_addresses
from mqha.chaos.packet_filter import PacketFilter, problem, shim_env
from mqha.chaos.schedule import (
    ASYM_PARTITION,
    CLIENT_PARTITION,
    CONTROLLER_BRIDGE,
    CONTROLLERS,
    OUT,
    RAFT_LOSS,
    RAFT_PARTITION,
    FaultStep,
)
from mqha.cluster.local import LocalCluster
from mqha.cluster.nodes import ClusterError

CLIENTS = "clients"  # the endpoint of the run's producers and consumers


def drops_for(
    step: FaultStep, hit: Sequence[str], controllers: Sequence[str], brokers: Sequence[str] = ()
) -> list[Drop]:
    """The drops of a controller-network step that hit ``hit`` (the bridge itself, for a bridge; for a
    client-partition: the old master, then the controller on the clients' side)."""
    others = [c for c in controllers if c not in hit]
    if step.kind == RAFT_PARTITION:
        if step.target == CONTROLLER_BRIDGE:
            if len(others) < 2:
                return []
            half = len(others) // 2
            return partition(others[:half], others[half:])
        return partition(hit, others)
    if step.kind == ASYM_PARTITION:
        return one_way(hit, others) if step.links == OUT else one_way(others, hit)
    if step.kind == RAFT_LOSS:
        percent = round(step.fraction * 100)
        if step.target == CONTROLLERS:
            return one_way(controllers, controllers, percent)  # every link between two controllers
        return partition(hit, others, percent)
    if step.kind == CLIENT_PARTITION:
        master, controller = hit
        rest = [c for c in controllers if c != controller]
        cut_off = [b for b in brokers if b != master] + rest
        return sorted(partition([controller], rest) + partition([CLIENTS], cut_off))
    raise ValueError(f"{step.kind} is not a packet-filter fault")


class ControllerNetwork:
    """Gives the controllers and the clients their source addresses and holds the packet filter."""

    def __init__(self, cluster: LocalCluster) -> None:
        why = problem()
        if why is not None:
            raise ClusterError(why)
        self.controllers = tuple(c.name for c in cluster.controllers)
        self.brokers = tuple(b.name for b in cluster.brokers)
        offset = int(cluster.controller_settings.get("controllerRaftPortOffset", "1"))
        sources = source_addresses([*self.controllers, CLIENTS])
        self.client_source = sources[CLIENTS]
        endpoints: dict[str, Endpoint] = {CLIENTS: Endpoint(self.client_source)}
        for node in cluster.controllers:
            cluster.node_env[node.name] = shim_env(sources[node.name])
            endpoints[node.name] = Endpoint(sources[node.name], (node.port, node.port + offset))
        for broker in cluster.brokers:
            # Brokers connect through the runner's proxies (from 127.0.0.1): only what is sent to
            # their API port is ever matched, from the clients.
            endpoints[broker.name] = Endpoint("127.0.0.1", (broker.port,))
        self.packets = PacketFilter(endpoints)

    def hit(self, step: FaultStep, nodes: Sequence[str]) -> list[Drop]:
        drops = drops_for(step, nodes, self.controllers, self.brokers)
        self.packets.apply(drops)
        return drops

    def heal(self) -> None:
        self.packets.apply([])

    def clear(self) -> None:
        self.packets.clear()
