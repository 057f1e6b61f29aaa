"""The ``power-loss`` fault of a chaos run (shell: processes and store files).

A step SIGKILLs its nodes at once (one broker, or every replica of a group), then cuts each store back
to what it had fsynced (``mqha.chaos.power_loss.cut_unflushed``), and at the heal starts them again
one by one in the step's order (``mqha.chaos.schedule``), ``stagger`` seconds apart. What each cut
removed is kept as a :class:`~mqha.chaos.verdict.PowerCut`: the verdict tells an acknowledged message
that no replica had fsynced when its whole group lost power (a loss the controller must declare) from
a silent loss.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from mqha.chaos.declared import PowerCut
from mqha.chaos.power_loss import CutReport, cut_unflushed
from mqha.chaos.schedule import GROUP, MASTER_FIRST, FaultStep
from mqha.cluster.local import LocalCluster


class PowerCuts:
    """Cuts the power of brokers for ``power-loss`` steps and brings them back at the heal."""

    def __init__(
        self, cluster: LocalCluster, say: Callable[[str], None], flush_types: Mapping[str, str] | None = None
    ) -> None:
        self.cluster = cluster
        self.say = say
        self.flush_types = flush_types or {}  # group -> its brokers' flushDiskType
        self.cuts: list[PowerCut] = []

    def hit(self, step: FaultStep, nodes: Sequence[str]) -> PowerCut:
        """Kill ``nodes`` (all of them before any store is touched), cut every store."""
        for node in nodes:
            self.cluster.kill(node)
        cut_at = time.monotonic()  # every answer a producer got before this came from a live broker
        reports: dict[str, CutReport] = {}
        for node in nodes:
            reports[node] = cut_unflushed(self.cluster.node(node).store)
            self.say(f"    {node}: {reports[node].describe()}")
        group = step.group or self.cluster.node(nodes[0]).group or ""
        cut = PowerCut(
            step.index,
            group,
            tuple(nodes),
            whole_group=step.target == GROUP,
            cut_at=cut_at,
            flushed={n: r.flushed_offset for n, r in reports.items()},
            records_cut=sum(len(r.lost) for r in reports.values()),
            sync_flush=self.flush_types.get(group) == "SYNC_FLUSH",
        )
        self.cuts.append(cut)
        return cut

    @staticmethod
    def restart_order(step: FaultStep, nodes: Sequence[str], master: str | None) -> list[str]:
        """The planned order; ``master`` (the group's master when the power went) first when the step
        says so."""
        order = list(step.nodes) if step.target == GROUP else list(nodes)
        if step.order == MASTER_FIRST and master in order:
            order.remove(master)
            order.insert(0, master)
        return order

    def heal(self, step: FaultStep, order: Sequence[str], start: Callable[[Sequence[str]], None]) -> None:
        """Start the nodes in ``order``, ``step.stagger`` seconds apart (``start`` reports failures)."""
        for i, node in enumerate(order):
            if i and step.stagger:
                time.sleep(step.stagger)
            start([node])
