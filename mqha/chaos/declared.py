"""Losses the controllers declared after power cuts, as a chaos run's verdict tells them apart (core).

A message acknowledged before a power cut of its whole group that ends beyond everything any replica
of it had fsynced, inside a range an ElectMaster record declared lost (``ackedDataLost``, issue 25), is
*declared lost*: gone from every disk, and said so. ``mqha.chaos.verdict`` counts such losses apart
from silent ones. Only under ``ASYNC_FLUSH``: a ``SYNC_FLUSH`` group fsyncs before it acknowledges, so
an acknowledged message that no disk held broke the flush contract, declared or not.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mqha.client.results import SendResult

Ranges = Mapping[str, Sequence[tuple[int, int]]]  # group -> [fromOffset, toOffset) declared lost


@dataclass(frozen=True)
class PowerCut:
    """One ``power-loss`` injection: which stores lost their un-fsynced writes, and from where."""

    index: int  # the step
    group: str
    nodes: tuple[str, ...]
    whole_group: bool  # every replica of ``group`` at once
    cut_at: float  # every node was dead from here (``time.monotonic``)
    flushed: Mapping[str, int]  # node -> the flushed offset its commit log was cut back to
    records_cut: int  # messages removed across the nodes (acknowledged or not)
    sync_flush: bool = False  # the group ran SYNC_FLUSH: every ack was fsynced first, none may be gone

    @property
    def fsynced_up_to(self) -> int:
        """The highest offset one of the cut replicas had fsynced."""
        return max(self.flushed.values(), default=0)


def never_fsynced(send: SendResult, cuts: Iterable[PowerCut]) -> bool:
    """Acknowledged before a power cut of its whole group and ending beyond everything any replica of
    it had fsynced then: no disk held it when the power went."""
    if send.offset is None:
        return False
    end = send.offset + (send.size or 0)
    return any(
        c.whole_group
        and c.group == send.broker_name
        and send.completed_at <= c.cut_at
        and end > c.fsynced_up_to
        for c in cuts
    )


def declared_lost(lost: Iterable[SendResult], cuts: Sequence[PowerCut], declared: Ranges) -> list[SendResult]:
    """The lost sends no replica of an ``ASYNC_FLUSH`` group had fsynced (``never_fsynced``) that lie in a
    range the controller declared lost."""
    unsynced = [c for c in cuts if not c.sync_flush]
    return [
        s
        for s in lost
        if s.offset is not None
        and never_fsynced(s, unsynced)
        and any(low <= s.offset < high for low, high in declared.get(s.broker_name, ()))
    ]


def declared_ranges(controller_events: Iterable[Mapping[str, Any]]) -> dict[str, list[tuple[int, int]]]:
    """The ranges the controllers declared lost, by group, from exported ``controller_events`` rows
    (the history's columns ``ackedDataLostFrom``/``ackedDataLostTo``, docs/architecture.md §5; or
    ``ackedDataLost``: ``{fromOffset, toOffset}`` or its JSON text, the ElectMaster record's field).
    Rows without one are skipped."""
    out: dict[str, set[tuple[int, int]]] = {}
    for row in controller_events:
        value = row.get("ackedDataLost")
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                value = None
        if isinstance(value, Mapping):
            low, high = value.get("fromOffset"), value.get("toOffset")
        else:
            low, high = row.get("ackedDataLostFrom"), row.get("ackedDataLostTo")
        if isinstance(low, int) and isinstance(high, int) and high > low and row.get("brokerName"):
            out.setdefault(str(row["brokerName"]), set()).add((low, high))
    return {group: sorted(ranges) for group, ranges in out.items()}
