"""Named broker configurations of a chaos run (core): ``mqha chaos --config NAME``.

A name is dash-separated parts, in any order, each setting one dimension (unnamed ones keep the
default, ``async-allack-min1-r3``):

- ``sync`` | ``async``: ``flushDiskType`` SYNC_FLUSH | ASYNC_FLUSH;
- ``allack`` | ``isrN``: ``allAckInSyncStateSet=true``, or false with ``inSyncReplicas=N``;
- ``minN``: ``minInSyncReplicas=N``;
- ``rN``: N replicas per group.

``MATRIX`` is the soak's list: every flush mode with every ack mode, ``minInSyncReplicas`` 1 and 2,
2 and 3 replicas, as the configurations RocketMQ operators run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT = "async-allack-min1-r3"


@dataclass(frozen=True)
class ChaosConfig:
    """One configuration: its canonical name, the brokers' settings and the replicas per group."""

    name: str
    flush_disk_type: str
    all_ack: bool
    in_sync_replicas: int
    min_in_sync_replicas: int
    replicas: int

    @property
    def broker_settings(self) -> dict[str, str]:
        settings = {
            "allAckInSyncStateSet": "true" if self.all_ack else "false",
            "minInSyncReplicas": str(self.min_in_sync_replicas),
        }
        if not self.all_ack:
            settings["inSyncReplicas"] = str(self.in_sync_replicas)
        return settings


def _number(part: str, prefix: str) -> int:
    text = part[len(prefix) :]
    if not text.isdigit() or not 1 <= int(text) <= 9:
        raise ValueError(f"config part {part!r}: {prefix} takes a number 1..9")
    return int(text)


def parse_config(name: str) -> ChaosConfig:
    """The configuration a name stands for; ValueError names the bad part or the impossible mix."""
    flush, ack, isr, minimum, replicas = "ASYNC_FLUSH", True, 1, 1, 3
    for part in (p.strip().lower() for p in name.split("-")):
        if part in ("sync", "async"):
            flush = "SYNC_FLUSH" if part == "sync" else "ASYNC_FLUSH"
        elif part == "allack":
            ack = True
        elif part.startswith("isr"):
            ack, isr = False, _number(part, "isr")
        elif part.startswith("min"):
            minimum = _number(part, "min")
        elif part.startswith("r"):
            replicas = _number(part, "r")
        else:
            raise ValueError(
                f"unknown config part {part!r} in {name!r}; parts: sync|async, allack|isrN, minN, rN"
            )
    if not ack and isr > replicas:
        raise ValueError(f"config {name!r}: inSyncReplicas {isr} exceeds the {replicas} replicas")
    if minimum > replicas:
        raise ValueError(f"config {name!r}: minInSyncReplicas {minimum} exceeds the {replicas} replicas")
    mode = "sync" if flush == "SYNC_FLUSH" else "async"
    canonical = "-".join([mode, "allack" if ack else f"isr{isr}", f"min{minimum}", f"r{replicas}"])
    return ChaosConfig(canonical, flush, ack, isr, minimum, replicas)


MATRIX = (
    "async-allack-min1-r3",
    "sync-allack-min1-r3",
    "async-isr2-min1-r3",
    "sync-isr2-min2-r3",
    "async-allack-min2-r2",
    "sync-isr2-min1-r2",
)
"""The soak's configurations (``scripts/chaos.sh soak``)."""


FLUSH_DISK_TYPES = ("ASYNC_FLUSH", "SYNC_FLUSH")
MIXED_FLUSH = "mixed"  # the groups take the flush disk types in turn


def group_flush_types(choice: str, groups: Sequence[str]) -> dict[str, str]:
    """``flushDiskType`` of each group: ``choice`` for all, or with ``mixed`` the types in turn."""
    if choice == MIXED_FLUSH:
        return {g: FLUSH_DISK_TYPES[i % len(FLUSH_DISK_TYPES)] for i, g in enumerate(groups)}
    if choice not in FLUSH_DISK_TYPES:
        raise ValueError(f"flush disk type {choice!r}: choose {', '.join(FLUSH_DISK_TYPES)} or {MIXED_FLUSH}")
    return dict.fromkeys(groups, choice)
