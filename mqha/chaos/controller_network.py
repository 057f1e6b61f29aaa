"""The controllers' own network in a chaos run: ``raft-partition`` and ``asym-partition`` (shell).

Each controller process connects from its own loopback address (the source-address shim, set in its
environment before the cluster starts) and the kernel's packet filter drops what a step asks
(``mqha.chaos.netfilter``). ``drops_for`` is the pure part: which drops a step means for the
controllers it hit. The brokers' links to the controllers go through the per-link proxies
(``mqha.chaos.links``), whose traffic comes from the chaos runner itself: they are never matched.
"""

from __future__ import annotations

from collections.abc import Sequence

from mqha.chaos.netfilter import Drop, Endpoint, one_way, partition, source_addresses
from mqha.chaos.packet_filter import PacketFilter, problem, shim_env
from mqha.chaos.schedule import ASYM_PARTITION, CONTROLLER_BRIDGE, OUT, RAFT_PARTITION, FaultStep
from mqha.cluster.local import LocalCluster
from mqha.cluster.nodes import ClusterError


def drops_for(step: FaultStep, hit: Sequence[str], controllers: Sequence[str]) -> list[Drop]:
    """The drops of a raft or asym partition that hit ``hit`` (the bridge itself, for a bridge)."""
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
    raise ValueError(f"{step.kind} is not a controller network fault")


class ControllerNetwork:
    """Gives the controllers their source addresses and holds the packet filter of a run."""

    def __init__(self, cluster: LocalCluster) -> None:
        why = problem()
        if why is not None:
            raise ClusterError(why)
        self.controllers = tuple(c.name for c in cluster.controllers)
        offset = int(cluster.controller_settings.get("controllerRaftPortOffset", "1"))
        sources = source_addresses(self.controllers)
        endpoints: dict[str, Endpoint] = {}
        for node in cluster.controllers:
            cluster.node_env[node.name] = shim_env(sources[node.name])
            endpoints[node.name] = Endpoint(sources[node.name], (node.port, node.port + offset))
        self.packets = PacketFilter(endpoints)

    def hit(self, step: FaultStep, nodes: Sequence[str]) -> list[Drop]:
        drops = drops_for(step, nodes, self.controllers)
        self.packets.apply(drops)
        return drops

    def heal(self) -> None:
        self.packets.apply([])

    def clear(self) -> None:
        self.packets.clear()
