"""Every network fault of a chaos run, injected and healed in one place (shell).

Broker links (``partition``, ``loss``, ``delay``) are the per-link proxies' modes
(``mqha.chaos.proxy``); the controllers' own links (``raft-partition``, ``asym-partition``,
``raft-loss``) are packet-filter drops (``mqha.chaos.controller_network``); a ``client-partition``
is both: the old master's and the other brokers' links through the proxies, the controllers and the
clients through the packet filter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mqha.chaos import links as chaos_links
from mqha.chaos.controller_network import ControllerNetwork
from mqha.chaos.proxy import BLOCK, DELAY, LOSS, PASS, FaultProxy
from mqha.chaos.schedule import (
    ASYM_PARTITION,
    CLIENT_PARTITION,
    DELAY_JITTER,
    PARTITION,
    RAFT_LOSS,
    RAFT_PARTITION,
    FaultStep,
)
from mqha.chaos.schedule import DELAY as DELAY_KIND
from mqha.chaos.schedule import LOSS as LOSS_KIND

PROXY_KINDS = frozenset({PARTITION, LOSS_KIND, DELAY_KIND})
FILTER_KINDS = frozenset({RAFT_PARTITION, ASYM_PARTITION, RAFT_LOSS})
NETWORK_KINDS = PROXY_KINDS | FILTER_KINDS | {CLIENT_PARTITION}


class NetworkFaults:
    """Injects and heals the network steps of a run.

    ``network`` is None when no step needs the packet filter.
    """

    def __init__(
        self,
        proxy: FaultProxy,
        links: Sequence[chaos_links.Link],
        network: ControllerNetwork | None,
        heartbeat_timeout: float,
        say: Callable[[str], None],
    ) -> None:
        self.proxy = proxy
        self.links = list(links)
        self.network = network
        self.heartbeat_timeout = heartbeat_timeout
        self.say = say

    def link_names(self, step: FaultStep, nodes: Sequence[str]) -> list[str]:
        """The proxied links ``step`` acts on (none for packet-filter-only kinds)."""
        if step.kind == CLIENT_PARTITION:
            master, controller = nodes
            return sorted(
                link.name for link in chaos_links.client_partition_links(self.links, master, controller)
            )
        if step.kind not in PROXY_KINDS:
            return []
        touched = (chaos_links.links_touching(self.links, n, step.links) for n in nodes)
        return sorted({link.name for links in touched for link in links})

    def hit(self, step: FaultStep, nodes: Sequence[str]) -> None:
        names = self.link_names(step, nodes)
        if step.kind in FILTER_KINDS or step.kind == CLIENT_PARTITION:
            assert self.network is not None, "packet-filter kinds get a ControllerNetwork"
            drops = self.network.hit(step, nodes)
            shown = sorted(
                {f"{d.sender}->{d.receiver}" + (f" {d.percent}%" if d.percent < 100 else "") for d in drops}
            )
            self.say(f"    dropped: {', '.join(shown) or 'nothing'}")
        if step.kind == DELAY_KIND:
            delay = step.fraction * self.heartbeat_timeout
            self.proxy.set_mode(names, DELAY, delay=delay, jitter=delay * DELAY_JITTER)
            self.say(f"    {len(names)} link(s) {delay:.2f} s late (+-{delay * DELAY_JITTER:.2f} s)")
        elif step.kind == LOSS_KIND:
            self.proxy.set_mode(names, LOSS, step.fraction)
        elif step.kind in (PARTITION, CLIENT_PARTITION):
            self.proxy.set_mode(names, BLOCK)

    def heal(self, step: FaultStep, nodes: Sequence[str]) -> None:
        if step.kind in FILTER_KINDS or step.kind == CLIENT_PARTITION:
            assert self.network is not None
            self.network.heal()
        names = self.link_names(step, nodes)
        if names:
            self.proxy.set_mode(names, PASS)

    def heal_all(self) -> None:
        self.proxy.heal()
        if self.network is not None:
            self.network.heal()

    def clear(self) -> None:
        """Remove the packet filter's table (the run is over)."""
        if self.network is not None:
            self.network.clear()
